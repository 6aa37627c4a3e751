"""Benchmark: exact batched pseudo-log-likelihood, budgeted PLL and a per-token loop on a run's masked models, in one run.

Takes a run directory of a masked-LM experiment (notebook 02: ``python -m toolkit run configs/cpu_masked.yaml --out
RUN``) and finds the base model (``base_*/``) and the last checkpoint of every strategy (``runs/<strategy>/epoch-<N>``,
``--all-epochs``: every one); the members and non-members are the run's own (``RUN/config.yaml``). For each model:

* ``exact``   — :func:`toolkit.audit.losses.token_losses` with every position masked (copies of many documents
  stacked into batches of ``--batch-size`` rows, LM head only at the masked positions), Min-K%++ moments included;
* ``budgeted`` — the same with ``pll_positions=N`` (``--budget``, default the profile's), timed on a copy of the
  model that the process-wide reuse cannot serve;
* ``strided`` — ``pll_copies=K`` for every K of ``--copies`` (every position scored from K masked copies per window,
  every K-th position masked together; deterministic), timed and scored like the others;
* ``loop``    — one forward pass of the whole model per masked position (batch of 1, full logits), on the first
  ``--loop-docs`` documents, its time extrapolated per token; its losses are checked against exact (atol 1e-4).

Then the membership AUC of every attack (unit: individual; the base model as reference of every checkpoint) under
exact PLL and under budgeted PLL for every N of ``--grid``, for each of ``--seeds``. Budgeted losses are a subsample of
the exact per-position losses at the positions :func:`toolkit.audit.pll.draw_positions` draws — exactly what
``token_losses(..., pll_positions=N)`` computes (tests/test_pll_budget.py checks it to 1e-6) — so the exact losses are
computed once per model and every N is evaluated by subsampling them. The smallest N whose AUCs stay within
``--tolerance`` (0.02) of exact for every attack, model and seed is printed, and likewise the smallest K of the strided
copies: the CPU profile's estimator (docs/performance.md holds the measured tables).

Usage: ``python benchmarks/attacks.py RUN_DIR [--window 256] [--threads 2] [--grid 8,16,24,32,48,64] [--seeds 0,1,2]
[--out results.json]``
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
import yaml
from sklearn.metrics import roc_auc_score

from toolkit.audit.attacks import membership_scores, person_scores
from toolkit.audit.losses import TokenLosses, load_audit_model, token_losses
from toolkit.audit.pll import draw_positions
from toolkit.config import load_profile
from toolkit.config.sections import AttacksSection, CorpusSection
from toolkit.pipelines.lm_experiment import load_data


def find_models(run: Path, all_epochs: bool = False) -> dict[str, Path]:
    """``label -> folder``: the base model and the last (or every) checkpoint of every strategy of a run."""
    bases = sorted(p for p in run.glob("base_*") if (p / "config.json").is_file())
    if not bases:
        raise SystemExit(f"{run}: no base model (base_*/config.json)")
    out = {"base": bases[0]}
    for strategy in sorted(p for p in (run / "runs").glob("*") if p.is_dir()):
        ckpts = sorted((p for p in strategy.glob("epoch-*") if (p / "config.json").is_file()),
                       key=lambda p: int(p.name.split("-")[1]))
        for p in (ckpts if all_epochs else ckpts[-1:]):
            out[f"{strategy.name} {p.name}"] = p
    return out


def subsample(tl: TokenLosses, budget: int, seed: int) -> TokenLosses:
    """The budgeted token losses from the exact ones: each document's positions drawn as token_losses draws them."""
    draws = [draw_positions(ids, budget, seed) for ids in tl.token_ids]

    def pick(arrays):
        return None if arrays is None else [a[d] for a, d in zip(arrays, draws)]

    return replace(tl, losses=pick(tl.losses), token_ids=pick(tl.token_ids), offsets=pick(tl.offsets), mu=pick(tl.mu),
                   sigma=pick(tl.sigma))


def aucs(tl: TokenLosses, ref: TokenLosses | None, persons, members: set) -> dict[str, float]:
    """Membership AUC of every attack, individuals as units (as the battery's default)."""
    per = person_scores(membership_scores(tl, reference_losses=ref), persons)
    y = np.isin(np.asarray(per.index, dtype=object), list(members))
    return {a: float(roc_auc_score(y, per[a].to_numpy())) for a in per.columns}


def loop_pll(model, tokenizer, texts, window: int, device) -> list[np.ndarray]:
    """Token losses by one forward per masked position (the reference the batched pass must reproduce)."""
    out = []
    for text in texts:
        enc = tokenizer(text, truncation=True, max_length=window, return_special_tokens_mask=True)
        x = torch.tensor(enc["input_ids"], device=device)[None]
        losses = []
        for t in np.flatnonzero(~np.array(enc["special_tokens_mask"], dtype=bool)):
            y = x.clone()
            y[0, t] = tokenizer.mask_token_id
            with torch.inference_mode():
                logits = model(input_ids=y).logits[0, t]
            losses.append(-torch.log_softmax(logits.double(), -1)[x[0, t]].item())
        out.append(np.array(losses))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="run directory of a masked-LM experiment (notebook 02)")
    ap.add_argument("--window", type=int, default=None, help="audit window (default: the run's audit.attacks.window)")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--grid", default="8,16,24,32,48,64")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--budget", type=int, default=None, help="N timed as budgeted PLL (default: the run's profile)")
    ap.add_argument("--tolerance", type=float, default=0.02)
    ap.add_argument("--copies", default="8,16,32", help="K of the strided estimator to compare (pll_copies)")
    ap.add_argument("--loop-docs", type=int, default=2, help="documents the per-token loop runs on (0: skip)")
    ap.add_argument("--all-epochs", action="store_true")
    ap.add_argument("--out", type=Path, default=None, help="write every number as JSON here")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    raw = yaml.safe_load((args.run / "config.yaml").read_text(encoding="utf-8"))  # as the run wrote it
    attacks = (raw.get("audit") or {}).get("attacks") or {}
    window = args.window or attacks.get("window") or AttacksSection().window
    grid, seeds = [int(x) for x in args.grid.split(",")], [int(x) for x in args.seeds.split(",")]
    chosen = attacks.get("pll_positions") or load_profile(raw.get("profile", "cpu")).pll_positions
    budget = args.budget or (chosen if chosen != "all" else 32)
    cfg = SimpleNamespace(corpus=CorpusSection(**raw["corpus"]), models=None, source=str(args.run / "config.yaml"))
    data = load_data(cfg)
    docs = list(data["members"]) + list(data["nonmembers"])
    texts, persons, members = [d.text for d in docs], [d.person_id for d in docs], set(data["members"].person_ids)
    models = find_models(args.run, args.all_epochs)
    print(f"{len(models)} models, {len(texts)} documents ({len(members)} members), window {window}, device {device}, "
          f"{torch.get_num_threads()} threads")

    exact, times, rows, strided = {}, {}, [], {}
    copies = [int(x) for x in args.copies.split(",") if x]
    for label, path in models.items():
        model, tok = load_audit_model(path)
        model.to(device)
        files, model.toolkit_files = model.toolkit_files, None
        token_losses(model, tok, texts[:1], window=window, progress=False)  # warm-up, not timed, not kept
        model.toolkit_files = files
        t0 = time.perf_counter()
        exact[label] = token_losses(model, tok, texts, window=window, batch_size=args.batch_size, progress=False)
        t_exact = time.perf_counter() - t0
        model.toolkit_files = None  # no reuse: budgeted PLL computed, not subsampled from the kept exact losses
        t0 = time.perf_counter()
        bud = token_losses(model, tok, texts, window=window, batch_size=args.batch_size, progress=False,
                           pll_positions=budget, pll_seed=seeds[0])
        t_budget = time.perf_counter() - t0
        same = subsample(exact[label], budget, seeds[0])
        assert all(np.allclose(a, b, atol=1e-6) for a, b in zip(bud.losses, same.losses))
        t_loop, ok = float("nan"), None
        if args.loop_docs:
            t0 = time.perf_counter()
            loop = loop_pll(model, tok, texts[:args.loop_docs], window, device)
            n_loop = sum(a.size for a in loop)
            t_loop = (time.perf_counter() - t0) * int(exact[label].n_tokens.sum()) / n_loop
            ok = all(np.allclose(a, b, atol=1e-4) for a, b in zip(exact[label].losses, loop))
        times[label] = {"exact": t_exact, "budgeted": t_budget, "loop (extrapolated)": t_loop, "loop_agrees": ok,
                        "tokens": int(exact[label].n_tokens.sum())}
        for k in copies:
            t0 = time.perf_counter()
            strided[(label, k)] = token_losses(model, tok, texts, window=window, batch_size=args.batch_size,
                                               progress=False, pll_copies=k)
            times[label][f"strided K={k}"] = time.perf_counter() - t0
        print(f"{label:28s} exact {t_exact:7.1f} s   budgeted (N={budget}) {t_budget:6.1f} s   "
              + "".join(f"strided (K={k}) {times[label][f'strided K={k}']:6.1f} s   " for k in copies)
              + f"loop {t_loop:8.1f} s (extrapolated; agrees with exact: {ok})", flush=True)

    ref = exact["base"]
    for label, tl in exact.items():
        r = None if label == "base" else ref
        base_auc = aucs(tl, r, persons, members)
        for n in grid:
            for seed in seeds:
                got = aucs(subsample(tl, n, seed), None if r is None else subsample(r, n, seed), persons, members)
                for attack, auc in got.items():
                    rows.append({"model": label, "attack": attack, "N": n, "seed": seed, "auc_exact": base_auc[attack],
                                 "auc_budgeted": auc, "delta": auc - base_auc[attack]})
        for k in copies:
            rs = None if label == "base" else strided[("base", k)]
            for attack, auc in aucs(strided[(label, k)], rs, persons, members).items():
                rows.append({"model": label, "attack": attack, "K": k, "auc_exact": base_auc[attack],
                             "auc_strided": auc, "delta": auc - base_auc[attack]})
    report(rows, grid, args.tolerance, times, budget, args.out)


def report(rows: list[dict], grid: list[int], tol: float, times: dict, budget: int, out: Path | None) -> None:
    import pandas as pd

    every = pd.DataFrame(rows)
    if "K" in every:
        st = every[every["K"].notna()]
        st_worst = st.assign(abs_delta=st["delta"].abs()).groupby(["model", "K"])["abs_delta"].max().unstack("K")
        print("\nstrided copies: max |AUC strided - AUC exact| over attacks, per model and K:")
        print(st_worst.round(3).to_string())
        print("\nstrided AUC per model, attack and K:")
        print(st.pivot_table(index=["model", "attack"], columns="K", values="auc_strided").round(3).to_string())
        good = [k for k in st_worst.columns if (st_worst[k] <= tol).all()]
        print(f"\nsmallest K within ±{tol} on every model: {int(good[0]) if good else None}")
        every = every[every["K"].isna()] if "N" in every else every.iloc[:0]
    df = every
    worst = df.assign(abs_delta=df["delta"].abs()).groupby(["model", "N"])["abs_delta"].max().unstack("N")
    print("\nmax |AUC budgeted - AUC exact| over attacks and seeds, per model and N:")
    print(worst.round(3).to_string())
    exact = df[df["N"] == grid[0]].groupby(["model", "attack"])["auc_exact"].first().unstack("attack")
    print("\nexact AUC per model and attack:")
    print(exact.round(3).to_string())
    mean = df.groupby(["model", "attack", "N"])["auc_budgeted"].mean().unstack("N")
    print("\nbudgeted AUC (mean over seeds) per model, attack and N:")
    print(mean.round(3).to_string())
    per_model = {m: next((n for n in grid if worst.loc[m, n] <= tol), None) for m in worst.index}
    ok = [n for n in grid if (worst[n] <= tol).all()]
    chosen = ok[0] if ok else None
    print(f"\nsmallest N within ±{tol} per model: {per_model}")
    print(f"smallest N within ±{tol} on every model: {chosen}")
    keys = [k for k in next(iter(times.values())) if k not in ("loop_agrees", "tokens")]
    total = {k: sum(t[k] for t in times.values()) for k in keys}
    print(f"total time, {len(times)} models: " + ", ".join(f"{k} {v:.0f} s" for k, v in total.items()))
    if out is not None:
        out.write_text(json.dumps({"rows": rows, "times": times, "chosen": chosen, "per_model": per_model,
                                   "tolerance": tol, "budget_timed": budget}, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
