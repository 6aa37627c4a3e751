"""The verdict's operating characteristic (methods.md §11): how often it raises a false alarm, how often it finds a
planted leak.

**Null worlds.** A tiny model fine-tuned on 40 patients of the sample corpus' ``train`` split is audited with
"members" and "non-members" *both* drawn from the 400 patients it never saw (``heldout`` + ``test``): random
halves of 40 + 40 and 200 + 200, ``--splits`` each (default 100), causal and masked, with and without the reference
(base) model. Every non-green verdict there is a false alarm. Each unseen patient is scored once (membership scores
of the model and of the reference, PII inference, regurgitation per individual) and every split re-reads those
scores: every statistic the verdict tests is a function of per-individual scores that do not depend on the split —
except RMIA (its population is the audited non-members: left out here), PII inference's candidate pool (drawn here
from all 400 unseen patients, in an audit from the two groups) and the identifiers whose novel ones the §4 probe is
scored on (the oracle analysis of all 400, k = 2; in an audit of the two groups). Canaries (none inserted into unseen
patients) are not part of a null world.

**Planted leaks (power).** The causal model fine-tuned on 100 ``train`` patients at a tenth of the CPU profile's
learning rate (2·10⁻⁴), checkpoints after ¼, 1 and 4 epochs (the strength of the leak), 20 canaries inserted 1, 4 or 16 times into their notes: each checkpoint audited on 40 of its members against
40 unseen patients (``--splits`` draws) — the share of non-green and red verdicts at each strength — and the share
of canaries whose own exposure test is significant (p = 2^−e ≤ 0.05 / 20) at each insertion count. With
``--power-kinds mlm`` the masked model too, checkpoints after 1, 4 and 16 epochs (the same shares of its profile's 32
epochs as the causal model's ¼, 1 and 4 of 8), its canaries scored by the profile's strided pseudo-log-likelihood.

The verdict of d13fd36 (before issue 34, read from the repository's history) judges the same null worlds — the
obvious alternative, in the same run. Shares are given with Clopper–Pearson 95% intervals. Writes ``--out`` (JSON; the report and docs/methods.md §11 read
``toolkit/audit/operating_characteristic.json``, copy it there with ``--publish``).

    python benchmarks/verdict_error_rates.py --out runs/verdict_error_rates [--splits 100] [--publish]
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from toolkit.audit.attacks import (battery_from_scores, canaries_into_corpus, canary_ranges, exposure,  # noqa: E402
                                   pii_inference,
                                   pii_member_advantage, public_identifier_keys, run_battery)
from toolkit.audit.attacks.battery import person_scores  # noqa: E402
from toolkit.audit.attacks.registry import REGISTRY, AttackInputs  # noqa: E402
from toolkit.audit.attacks.pii_inference import identifier_occurrences  # noqa: E402
from toolkit.audit.evaluate import corpus_word_types, novel_identifiers_by_person  # noqa: E402
from toolkit.audit.probe_causal import probe_causal  # noqa: E402
from toolkit.audit.probe_masked import probe_masked  # noqa: E402
from toolkit.identifiers.analysis import IdentifierConfig, analyze  # noqa: E402
from toolkit.audit.probe_causal import regurgitation_rate  # noqa: E402
from toolkit.audit.verdict import verdict  # noqa: E402
from toolkit.corpus import Corpus, load_corpus  # noqa: E402
from toolkit.metrics.significance import clopper_pearson, member_advantage_test  # noqa: E402
from toolkit.models import load_model  # noqa: E402
from toolkit.training.checkpoints import step_checkpoint_dirs  # noqa: E402
from toolkit.training.trainer import TrainConfig, train  # noqa: E402

CORPUS = ROOT / "data_samples" / "clinical" / "notes.jsonl"
BASES = {"clm": ROOT / "prebuilt" / "c34a500c5cc9828972a0e6452aaf1a27138f6d95f614f6288724e452560f83e5",
         "mlm": ROOT / "prebuilt" / "1b93acc91fe5796d10b3ef25fa85937be4961ec5a0f354e6bc5a35859b482028"}
#: the CPU profile's fine-tuning schedule (toolkit/configs/cpu.yaml); ``clm_dp``: the ``clm_dp`` strategy of
#: configs/cpu_causal.yaml (the profile's causal schedule, DP-SGD at its defaults: ε = 8, δ = 1e-5, C = 10, the
#: individual as privacy unit; its last checkpoint, ``dp_epochs: [4, 8]``)
SCHEDULE = {"clm": dict(batch_size=16, learning_rate=2e-3, lr_schedule="constant", max_length=256),
            "mlm": dict(batch_size=8, learning_rate=2e-3, warmup_steps=50, lr_schedule="constant", max_length=256)}
SCHEDULE["clm_dp"] = SCHEDULE["clm"]
EPOCHS = {"clm": 8, "mlm": 32, "clm_dp": 8}
#: the model kind of each null world's strategy
MODEL_KIND = {"clm": "clm", "mlm": "mlm", "clm_dp": "clm"}
#: the attacks of the battery before issue 57 (the record of the six-attack battery; the verdict of d13fd36 knew these)
SIX = ("loss", "zlib", "min_k", "min_k_plus_plus", "reference", "rmia")
#: an attack needs the reference model when it needs one of these (toolkit.audit.attacks.registry)
REFERENCE_NEEDS = {"reference_losses", "reference_log_probs", "rmia"}


def positions(corpus: Corpus) -> pd.DataFrame:
    """The gold spans as an identifier table (every gold span a direct identifier, its label the category)."""
    rows = [(d.doc_id, s.start, s.end, s.label, True) for d in corpus for s in d.spans]
    return pd.DataFrame(rows, columns=["doc_id", "start", "end", "category", "direct"])


def people(corpus: Corpus, split: str) -> list[str]:
    return sorted({d.person_id for d in corpus if d.split == split})


def of(corpus: Corpus, ids) -> Corpus:
    ids = set(ids)
    return Corpus([d for d in corpus if d.person_id in ids])


def fine_tune(corpus: Corpus, kind: str, epochs: list[int], out: Path, checkpoints_per_epoch: int = 0,
              **schedule) -> list[tuple[int, Path]]:
    """Fine-tune the base of ``kind``'s model kind with strategy ``kind`` (``clm``, ``mlm``, ``clm_dp``)."""
    cfg = TrainConfig(epochs=epochs, seed=0, checkpoints_per_epoch=checkpoints_per_epoch,
                      **{**SCHEDULE[kind], **schedule})
    return train(corpus, BASES[MODEL_KIND[kind]], out, kind, cfg, progress=False)


def blind_inputs(res) -> list[tuple]:
    """``(doc_id, person_id, text, scoreable)`` of every document the battery ``res`` scored, ``text`` the window
    its attacks read (``res.window_texts``: the audited window, the excluded ranges cut out), as the audit's blind
    baseline reads it; checked against the battery's own blind scores on its split (the same scores to 1e-9, or the
    benchmark stops)."""
    d = res.doc_scores
    out = list(zip(d["doc_id"], d["person_id"], res.window_texts, d["scoreable"].astype(bool)))
    if "blind" in d:
        again = doc_blind(out, set(p for p, m in zip(d["person_id"], d["member"]) if m), seed=0)
        ok = np.isfinite(d["blind"].to_numpy(float))
        if not np.allclose(again[ok], d["blind"].to_numpy(float)[ok], rtol=0, atol=1e-9):
            raise RuntimeError("blind_inputs: the blind baseline re-fitted on the battery's split differs from its "
                               "scores (the texts are not the audit's)")
    return out


def doc_blind(docs: list[tuple], members: set, *, seed: int) -> np.ndarray:
    """The blind baseline's document scores by its registry entry (cross-fitted over individuals), nan where the
    battery left a document unscoreable (as run_battery does)."""
    x = AttackInputs(texts=[t for _, _, t, _ in docs], persons=[p for _, p, _, _ in docs],
                     labels=np.array([p in members for _, p, _, _ in docs]), seed=seed)
    out = np.asarray(REGISTRY["blind"].score(x), dtype=float)
    out[~np.array([ok for *_, ok in docs], dtype=bool)] = np.nan
    return out


def score_once(model_dir: Path, kind: str, members: Corpus | None, unseen: Corpus, pos: pd.DataFrame, public_keys: set,
               *, pii_occurrences: int, exclude=None, base_vocabulary: set | None = None,
               pii_copies: int = 32, public_texts: list[str] | None = None) -> dict:
    """Per-individual scores of everyone in ``members`` and ``unseen``: membership (model and reference), PII
    inference per occurrence (model and reference), regurgitation per individual (causal), and with
    ``base_vocabulary`` each individual's novel identifiers and the words the §4 probe predicts on their notes
    (identifiers: the oracle analysis of everyone scored, k = 2, n = 1)."""
    kind = MODEL_KIND[kind]
    model, tok = load_model(model_dir, kind=kind)
    ref = load_model(BASES[kind], kind=kind)
    everyone = Corpus(list(members or []) + list(unseen))
    pll = {"pll_copies": 32} if kind == "mlm" else {}  # the CPU profile's estimator (configs/cpu_masked.yaml)
    half = sorted(unseen.person_ids)
    first = (list(members.person_ids) if members is not None else []) + half[: len(half) // 2]
    a, b = of(everyone, first), of(everyone, half[len(half) // 2:])
    res = run_battery(model, tok, a, b, reference=ref, window=256, n_bootstrap=0, progress=False, exclude=exclude,
                      public=public_texts, **pll)
    print(f"  battery scored, {rss()}", flush=True)
    # the blind baseline is fitted on the split's labels: re-fitted per world (world()) on the audit's texts
    docs = blind_inputs(res)
    scores = res.scores.set_index("id").drop(columns=["member"])
    ref_scores = res.reference_scores
    _, table = pii_inference(model, tok, everyone, pos, reference=ref, n_candidates=20,
                             max_occurrences=pii_occurrences, window=64, seed=0,
                             population=identifier_occurrences(everyone, pos),
                             public_keys=public_keys, return_table=True, progress=False,
                             **({"pll_copies": pii_copies} if pll else {}))
    print(f"  PII inference scored ({len(table)} occurrences), {rss()}", flush=True)
    reg = ref_reg = None
    if kind == "clm":
        vocab = set(identifier_occurrences(everyone, pos)["key"])
        kw = dict(prefix_tokens=32, max_new_tokens=64, progress=False)
        reg = regurgitation_rate(model, tok, everyone, vocab, **kw)
        ref_reg = regurgitation_rate(*ref, everyone, vocab, **kw)
    novel = None
    if base_vocabulary is not None:
        ids = analyze(everyone, IdentifierConfig(detector="oracle", k=2, n=1), progress=False)
        tables = {"terms": ids.terms, "positions": ids.positions()}
        probe = probe_masked if kind == "mlm" else probe_causal
        preds = probe(model, tok, everyone, positions=tables["positions"], max_length=256, progress=False)
        novel = novel_identifiers_by_person(preds, tables, everyone, base_vocabulary=base_vocabulary)
    return {"scores": scores, "ref_scores": ref_scores, "pii": table, "regurgitation": reg, "ref_regurgitation": ref_reg,
            "novel": novel, "docs": docs}


def dp_settings(ckpt: Path) -> dict:
    """The DP-SGD run's settings and its accountant's figures, as its run.json records them."""
    meta = json.loads((ckpt.parent / "run.json").read_text(encoding="utf-8"))
    keep = {k: v for k, v in meta.items() if "eps" in k or "sigma" in k or "noise" in k or k in ("dp", "steps")}
    return {"strategy": meta.get("strategy"), "dp": meta.get("config", {}).get("dp"), **keep}


def world(s: dict, a: list[str], b: list[str], *, with_reference: bool, seed: int,
          attacks: tuple[str, ...] | None = None) -> dict:
    """The verdict's inputs for members ``a`` and non-members ``b`` from the per-individual scores ``s``; without
    the reference, the attacks that need it (their registry needs) left out; ``attacks``: only these."""
    ids = list(a) + list(b)
    member = np.r_[np.ones(len(a), bool), np.zeros(len(b), bool)]
    cols = [c for c in s["scores"].columns if (attacks is None or c in attacks)
            and (with_reference or c not in REGISTRY or not REGISTRY[c].needs & REFERENCE_NEEDS)]
    table = s["scores"].loc[ids, cols].copy()
    if "blind" in table and s.get("docs"):  # fitted on this world's labels, cross-fitted over its individuals
        mine, both = set(a), set(a) | set(b)
        docs = [d for d in s["docs"] if d[1] in both]
        doc = doc_blind(docs, mine, seed=seed)
        table["blind"] = person_scores(pd.DataFrame({"blind": doc}), [d[1] for d in docs]).reindex(ids)["blind"]
    bat = battery_from_scores(table, member, n_bootstrap=0).to_json()
    if with_reference:
        bat["reference_model_attacks"] = battery_from_scores(s["ref_scores"].loc[ids], member,
                                                             n_bootstrap=0).to_json()["attacks"]
        bat["reference"] = "the base model"
    t = s["pii"]
    ta, tb = t[t["person_id"].isin(set(a))], t[t["person_id"].isin(set(b))]
    if not with_reference:
        ta, tb = ta.drop(columns=["reference_top1"]), tb.drop(columns=["reference_top1"])
    usable = ta[ta["sharing"] != "public"]
    overall = {"n": int(len(usable)), "top1": float(usable["top1"].mean()) if len(usable) else None,
               "chance": float(usable["chance"].mean()) if len(usable) else None}
    pii = {"n_occurrences": int(len(ta)), "overall": overall, "by_category": {},
           "n_public": int((ta["sharing"] == "public").sum()),
           "member_advantage": pii_member_advantage(ta, tb, seed=seed, n_permutations=1999)}
    reg = None
    if s["regurgitation"] is not None:
        bp = s["regurgitation"]["by_person"]
        ra = [bp.get(p, [0, 0]) for p in a]
        rb = [bp.get(p, [0, 0]) for p in b]
        n_t = sum(x[0] for x in ra)
        reg = {"share_reproduced": sum(x[1] for x in ra) / n_t if n_t else None, "n_identifier_occurrences": n_t,
               "member_advantage": member_advantage_test([x[1] for x in ra], [x[0] for x in ra],
                                                         [x[1] for x in rb], [x[0] for x in rb], seed=seed,
                                                         n_permutations=1999)}
    novel = None
    if s.get("novel") is not None:
        nv = s["novel"]
        ha, ta_ = [len(nv[p][0] & nv[p][1]) for p in a], [len(nv[p][0]) for p in a]
        hb, tb_ = [len(nv[p][0] & nv[p][1]) for p in b], [len(nv[p][0]) for p in b]
        types = set().union(*(nv[p][0] for p in a))
        said = set().union(*(nv[p][1] for p in a))
        novel = {"novel_privacy": 1 - len(types & said) / len(types) if types else 1.0,  # §4: over the members
                 "member_advantage": member_advantage_test(ha, ta_, hb, tb_, seed=seed, n_permutations=1999)}
    return {"attacks": bat, "pii": pii, "regurgitation": reg, "novel_privacy": novel}


def world_before(s: dict, a: list[str], b: list[str], *, with_reference: bool) -> dict:
    """The same world as the verdict of d13fd36 read it: the members' figures only, the reference (base) model's as
    the comparison (PII inference per category, regurgitation's share)."""
    w = world(s, a, b, with_reference=with_reference, seed=0, attacks=SIX)  # the battery it knew
    t = s["pii"]
    ta = t[t["person_id"].isin(set(a))]

    def summary(x):
        return {"n": int(len(x)), "top1": float(x["top1"].mean()), "chance": float(x["chance"].mean()),
                "reference_top1": float(x["reference_top1"].mean()) if with_reference else None}

    pii = {"n_occurrences": int(len(ta)), "overall": summary(ta) if len(ta) else {"n": 0},
           "by_category": {c: summary(x) for c, x in ta.groupby("category")}}
    reg = None
    if s["regurgitation"] is not None:
        def share(r):
            ks = [r["by_person"].get(p, [0, 0]) for p in a]
            n = sum(k[0] for k in ks)
            return {"share_reproduced": sum(k[1] for k in ks) / n if n else None, "n_identifier_occurrences": n}
        reg = share(s["regurgitation"])
        if with_reference:
            reg["reference"] = share(s["ref_regurgitation"])
    attacks = {k: v for k, v in w["attacks"].items() if k != "reference_model_attacks"}
    novel = (w["novel_privacy"] or {}).get("novel_privacy")  # a threshold on the members' figure then
    return {"attacks": attacks, "pii": pii, "regurgitation": reg, "novel_privacy": novel}


def verdict_before():
    """The verdict function of commit d13fd36 (before issue 34), read from the repository's history; None where the
    history is not there (a shallow clone)."""
    import types

    def past(path: str, name: str):
        got = subprocess.run(["git", "show", f"d13fd36:{path}"], capture_output=True, text=True, cwd=ROOT)
        if got.returncode != 0:
            return None
        module = types.ModuleType(name)
        sys.modules[name] = module  # dataclasses look their module up
        exec(compile(got.stdout, f"{name}.py", "exec"), module.__dict__)  # noqa: S102 - our own past code
        return module

    # the verdict with the helpers it read then (auc_lower_bound has since become auc_interval)
    if past("toolkit/metrics/mia.py", "mia_d13fd36") is None:
        return None
    got = subprocess.run(["git", "show", "d13fd36:toolkit/audit/verdict.py"], capture_output=True, text=True, cwd=ROOT)
    source = got.stdout.replace("from toolkit.metrics.mia import", "from mia_d13fd36 import")
    module = types.ModuleType("verdict_d13fd36")
    sys.modules[module.__name__] = module
    exec(compile(source, "verdict_d13fd36.py", "exec"), module.__dict__)  # noqa: S102 - our own past code
    return module.verdict


def rss() -> str:
    """This process' resident memory now (GiB), for the progress lines: the benchmark has run out of memory before."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, ValueError, IndexError):
        return "?"
    return f"{pages * 4096 / 2 ** 30:.1f} GiB"


def shares(levels: list[str]) -> dict:
    n = len(levels)
    out = {"n": n, "levels": {lv: levels.count(lv) for lv in ("green", "amber", "red", "incomplete")}}
    for name, k in (("red", levels.count("red")), ("non_green", n - levels.count("green"))):
        lo, hi = clopper_pearson(k, n)
        out[name] = {"share": k / n if n else None, "ci95": [lo, hi]}
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/verdict_error_rates")
    ap.add_argument("--splits", type=int, default=100)
    ap.add_argument("--kinds", default="clm,mlm", help="null worlds of these strategies: clm, mlm, clm_dp (DP-SGD, "
                    "the clm_dp strategy of configs/cpu_causal.yaml)")
    ap.add_argument("--pii-occurrences", type=int, default=1500)
    ap.add_argument("--skip-power", action="store_true")
    ap.add_argument("--power-kinds", default="clm", help="the planted leaks of these model kinds (clm, mlm)")
    ap.add_argument("--mlm-pii-copies", type=int, default=32, help="masked PII inference: masked copies per window "
                    "(strided PLL; the battery keeps the CPU profile's 32)")
    ap.add_argument("--duplicates", action="store_true", help="run the duplicated-documents planted leak (only it "
                    "with --kinds '' --skip-power)")
    ap.add_argument("--publish", action="store_true", help="copy the result to toolkit/audit/operating_characteristic.json")
    ap.add_argument("--merge", nargs="+", help="only merge these results (parts run separately) into --out; a later "
                    "part's entries replace an earlier one's")
    ap.add_argument("--before", help="with --merge: a record to compare with (e.g. the published one before a change "
                    "of the battery), kept in the result as 'before' and set beside it in the before/after table")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.merge:
        parts = [json.loads(Path(p).read_text(encoding="utf-8")) for p in args.merge]
        result = {**parts[0], "null_worlds": {}, "power": {}, "seconds": {}, "settings": {}, "commits": {}}
        for part in parts:
            for k in ("null_worlds", "power", "seconds", "settings"):
                result[k].update(part.get(k, {}))
            for k in list(part.get("null_worlds", {})) + list(part.get("power", {})):
                result["commits"][k] = part.get("commits", {}).get(k, part["commit"])
        result["commit"] = ", ".join(dict.fromkeys(result["commits"].values()))
        result["seconds"]["total"] = round(sum(p["seconds"].get("total", 0) for p in parts), 1)
        if args.before:
            old = json.loads(Path(args.before).read_text(encoding="utf-8"))
            result["before"] = {k: old.get(k) for k in ("commit", "commits", "machine", "splits", "settings",
                                                          "null_worlds", "power")}
        return _write(result, out, args.publish)
    t0 = time.time()
    corpus = load_corpus(CORPUS)
    pos = positions(corpus)
    unseen_ids = people(corpus, "heldout") + people(corpus, "test")
    train_ids = people(corpus, "train")
    public_texts = [d.text for d in corpus if d.split == "public"]
    keys = set(identifier_occurrences(corpus, pos)["key"])
    public_keys = public_identifier_keys(keys, public_texts)
    vocab = corpus_word_types(Corpus([d for d in corpus if d.split == "public"]))  # novel identifiers (§4)
    unseen = of(corpus, unseen_ids)
    result = {"commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                       cwd=ROOT).stdout.strip(),
              "machine": f"{platform.machine()}, {__import__('os').cpu_count()} cores, {platform.python_version()}",
              "splits": args.splits, "null_worlds": {}, "power": {}, "seconds": {}}

    # ---- null worlds
    for kind in [k for k in args.kinds.split(",") if k]:
        t = time.time()
        members = of(corpus, train_ids[:40])
        ckpt = fine_tune(members, kind, [EPOCHS[kind]], out / f"null-{kind}")[-1][1]
        s = score_once(ckpt, kind, None, unseen, pos, public_keys, pii_occurrences=args.pii_occurrences,
                       base_vocabulary=vocab, pii_copies=args.mlm_pii_copies, public_texts=public_texts)
        result.setdefault("settings", {})[f"null {kind}"] = {"pii_occurrences": args.pii_occurrences,
                                                             **({"pii_pll_copies": args.mlm_pii_copies,
                                                                 "battery_pll_copies": 32} if kind == "mlm" else {}),
                                                             **(dp_settings(ckpt) if kind == "clm_dp" else {})}
        pd.to_pickle(s, out / f"null-{kind}-scores.pkl")  # per-individual scores: worlds re-read without re-scoring
        result["seconds"][f"null {kind}: train and score"] = round(time.time() - t, 1)
        print(f"null {kind}: scored in {time.time() - t:.0f} s, {rss()}", flush=True)
        rng = np.random.default_rng(0)
        before = verdict_before()
        for size in (40, 200):
            for with_ref in (True, False):
                levels, rules, old_levels, old_rules, alarms = [], [], [], [], []
                for i in range(args.splits):
                    draw = rng.permutation(unseen_ids)
                    a, b = list(draw[:size]), list(draw[size:2 * size])
                    v = verdict(**world(s, a, b, with_reference=with_ref, seed=i))
                    levels.append(v.level)
                    rules.append(v.rule)
                    if v.level != "green":
                        alarms.append(f"split {i}: {v.statement}")
                    if before is not None:
                        old = before(**world_before(s, a, b, with_reference=with_ref))
                        old_levels.append(old.level)
                        old_rules.append(old.rule)
                    if i % 20 == 19:
                        print(f"  {size}+{size} {'with' if with_ref else 'without'} reference: {i + 1} splits, "
                              f"{rss()}", flush=True)
                key = f"{kind} {size}+{size} {'with' if with_ref else 'without'} reference"
                result["null_worlds"][key] = {**shares(levels), "rules": sorted(set(rules) - {"none"}),
                                              "false_alarms": alarms}
                if before is not None:
                    result["null_worlds"][key]["before (d13fd36)"] = {**shares(old_levels),
                                                                       "rules": sorted(set(old_rules) - {"none"})}
                print(key, result["null_worlds"][key]["levels"], "before:", shares(old_levels)["levels"]
                      if old_levels else "-", flush=True)

    # ---- planted leaks (causal; masked with --power-kinds)
    for kind in ([k for k in args.power_kinds.split(",") if k] if not args.skip_power else []):
        t = time.time()
        members = of(corpus, train_ids[:100])
        planted, table = canaries_into_corpus(members, 60, repeats=(1, 4, 16), seed=0)
        run = out / f"power-{kind}"
        # a tenth of the profile's learning rate: leaks from barely measurable to plain; the causal model's
        # checkpoints after 1/4, 1 and 4 epochs (1/32, 1/8 and 1/2 of its profile's 8), the masked model's after 1, 4
        # and 16 (the same shares of its profile's 32)
        if kind == "clm":
            fine_tune(planted, "clm", [4], run, checkpoints_per_epoch=4, learning_rate=2e-4)
            steps = [p for _, p in step_checkpoint_dirs(run)]  # every quarter epoch, in order
            ckpts = [(f"{(q + 1) / 4:g}", steps[q]) for q in (0, 3, 15) if q < len(steps)]
        else:
            ckpts = [(f"{e:g}", p) for e, p in fine_tune(planted, kind, [1, 4, 16], run, learning_rate=2e-4)]
        # the members' spans moved with the canaries; everyone else's as they were
        pos_planted = pd.concat([positions(planted), pos[~pos["doc_id"].isin({d.doc_id for d in planted})]],
                                ignore_index=True)
        cut = canary_ranges(planted, table, with_separator=True)  # no membership evidence (as toolkit run)
        rng = np.random.default_rng(1)
        pll = {"pll_copies": 32} if kind == "mlm" else {}  # the CPU profile's estimator for the canaries too
        for epoch, path in ckpts:
            s = score_once(path, kind, planted, of(corpus, unseen_ids[:200]), pos_planted, public_keys,
                           pii_occurrences=args.pii_occurrences, exclude=cut, pii_copies=args.mlm_pii_copies)
            model, tok = load_model(path, kind=kind)
            exp = exposure(model, tok, table, n_reference=300, seed=0, progress=False, **pll)
            can = {"log2_space": float(8 * np.log2(10)), "by_repeats": {
                str(r): {"n": int(len(g)), "max": float(g["exposure"].max())} for r, g in exp.groupby("repeats")}}
            per = {}
            for r, g in exp.groupby("repeats"):
                p = np.minimum(1.0, 2.0 ** -g["exposure"].to_numpy() * len(exp))
                k = int((p <= 0.05).sum())
                per[str(r)] = {"n": int(len(g)), "detected": k, "ci95": list(clopper_pearson(k, len(g)))}
            levels, levels_no_canary, rules = [], [], []
            for i in range(args.splits):
                a = list(rng.choice(sorted(planted.person_ids), 40, replace=False))
                b = list(rng.choice(unseen_ids[:200], 40, replace=False))
                w = world(s, a, b, with_reference=True, seed=i)
                v = verdict(**w)
                levels_no_canary.append(v.level)
                rules.append(v.rule)
                levels.append(verdict(**w, canaries=can).level)
            key = f"{kind} epoch {epoch}"
            result["power"][key] = {
                "membership and PII (no canaries)": {**shares(levels_no_canary), "rules": sorted(set(rules) - {"none"})},
                "with canaries": shares(levels), "canaries detected": per}
            if kind == "mlm":
                result.setdefault("settings", {})[key] = {"pii_occurrences": args.pii_occurrences,
                                                          "pii_pll_copies": args.mlm_pii_copies,
                                                          "battery_pll_copies": 32, "canary_pll_copies": 32}
            print(key, result["power"][key]["membership and PII (no canaries)"]["levels"], per, flush=True)
        result["seconds"][f"power {kind}: train and score" if kind != "clm" else "power: train and score"] = round(
            time.time() - t, 1)
    if args.duplicates:
        t = time.time()
        result["power"].update(duplicated_documents(corpus, train_ids, unseen_ids, pos, public_keys, out,
                                                    splits=args.splits, pii_occurrences=args.pii_occurrences,
                                                    base_vocabulary=vocab))
        result["seconds"]["duplicated documents: train and score"] = round(time.time() - t, 1)
    result["seconds"]["total"] = round(time.time() - t0, 1)
    return _write(result, out, args.publish)


#: how many times each group of members' notes stands in the training corpus
DUPLICATES = (1, 4, 16)


def duplicated_documents(corpus: Corpus, train_ids: list[str], unseen_ids: list[str], pos: pd.DataFrame,
                         public_keys: set, out: Path, *, splits: int, pii_occurrences: int, group: int = 40,
                         base_vocabulary: set | None = None) -> dict:
    """Planted leak by duplication: three groups of ``group`` members whose notes stand 1, 4 and 16 times in one
    training corpus (copies under new document ids), the causal model fine-tuned one epoch at a tenth of the profile's
    learning rate; each group audited against ``group`` unseen patients (``splits`` draws of the non-members out of
    200). The share of non-green and red verdicts at each duplication count is the verdict's power against the
    duplicated-record memorisation the extraction literature finds (Kandpal et al., ICML 2022)."""
    from dataclasses import replace

    groups = {r: train_ids[i * group:(i + 1) * group] for i, r in enumerate(DUPLICATES)}
    docs = []
    for r, ids in groups.items():
        for d in of(corpus, ids):
            docs += [d] + [replace(d, doc_id=f"{d.doc_id}~copy{c}") for c in range(1, r)]
    run = out / "duplicates-clm"
    ckpt = fine_tune(Corpus(docs), "clm", [1], run, learning_rate=2e-4)[-1][1]
    members = of(corpus, [p for ids in groups.values() for p in ids])
    pool = unseen_ids[:200]
    s = score_once(ckpt, "clm", members, of(corpus, pool), pos, public_keys, pii_occurrences=pii_occurrences,
                   base_vocabulary=base_vocabulary)
    pd.to_pickle(s, run / "scores.pkl")
    rng = np.random.default_rng(2)
    found = {}
    for r, ids in groups.items():
        levels, rules = [], []
        for i in range(splits):
            b = list(rng.choice(pool, group, replace=False))
            v = verdict(**world(s, list(ids), b, with_reference=True, seed=i))
            levels.append(v.level)
            rules.append(v.rule)
        found[f"clm notes x{r}"] = {"membership and PII (no canaries)": {**shares(levels),
                                                                          "rules": sorted(set(rules) - {"none"})}}
        print(f"notes x{r}", found[f"clm notes x{r}"]["membership and PII (no canaries)"]["levels"], flush=True)
    return found


def markdown(result: dict) -> str:
    """The result as the tables of docs/methods.md §11.1 and docs/results.md."""
    def cell(x: dict, what: str) -> str:
        n, lv = x["n"], x["levels"]
        k = n - lv["green"] if what == "non_green" else lv["red"]
        lo, hi = x[what]["ci95"]
        return f"{k}/{n} ({lo:.1%}–{hi:.1%})"

    out = ["| null world | non-green | red | rules | before (d13fd36): non-green | red | its rules |",
           "|---|---|---|---|---|---|---|"]
    for name, x in result.get("null_worlds", {}).items():
        old = x.get("before (d13fd36)")
        out.append(f"| {name} | {cell(x, 'non_green')} | {cell(x, 'red')} | {', '.join(x['rules']) or '—'} | "
                   + (f"{cell(old, 'non_green')} | {cell(old, 'red')} | {', '.join(old['rules']) or '—'} |" if old
                      else "— | — | — |"))
    if result.get("power"):
        out += ["", "| planted leak | non-green | red | deciding rules | canaries detected (r = 1 / 4 / 16) |",
                "|---|---|---|---|---|"]
        for name, x in result["power"].items():
            y = x["membership and PII (no canaries)"]
            can = " / ".join(f"{c['detected']}/{c['n']}" for c in x["canaries detected"].values()) \
                if "canaries detected" in x else "—"  # duplicated documents: no canaries
            out.append(f"| {name} | {cell(y, 'non_green')} | {cell(y, 'red')} | {', '.join(y.get('rules', [])) or '—'}"
                       f" | {can} |")
    return "\n".join(out)


def before_after(result: dict) -> str:
    """The result beside its ``before`` record (``--merge --before``): one row per null world and planted leak of
    either, "not re-run" where the result's entry is the before record's own (the same commit)."""
    before = result.get("before") or {}
    if not before:
        return ""

    def cells(x: dict | None) -> str:
        if x is None:
            return "— | — | —"
        x = x.get("membership and PII (no canaries)", x)
        n, lv = x["n"], x["levels"]
        got = []
        for what, k in (("non_green", n - lv["green"]), ("red", lv["red"])):
            lo, hi = x[what]["ci95"]
            got.append(f"{k}/{n} ({lo:.1%}–{hi:.1%})")
        return " | ".join(got + [", ".join(x.get("rules", [])) or "—"])

    out = ["| | after: non-green | red | rules | before: non-green | red | rules |", "|---|---|---|---|---|---|---|"]
    for section in ("null_worlds", "power"):
        new, old = result.get(section) or {}, before.get(section) or {}
        for name in dict.fromkeys(list(old) + list(new)):
            same = name in old and (result.get("commits") or {}).get(name) == (before.get("commits") or {}).get(name)
            after = "not re-run | | " if same else cells(new.get(name))
            out.append(f"| {name} | {after} | {cells(old.get(name))} |")
    return "\n".join(out)


def _write(result: dict, out: Path, publish: bool) -> dict:
    (out / "operating_characteristic.json").write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(markdown(result))
    if result.get("before"):
        print(before_after(result))
    if publish:
        (ROOT / "toolkit" / "audit" / "operating_characteristic.json").write_text(json.dumps(result, indent=1),
                                                                                 encoding="utf-8")
    return result


if __name__ == "__main__":
    main()
