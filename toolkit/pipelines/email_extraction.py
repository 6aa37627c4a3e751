"""Baseline / RMFT / dedup fine-tuning with seen-address logs, and the comparison of their extraction results
(paper 002 §4; methods.md §3 ``rmft`` / ``dedup`` rows, §6).

:func:`train_technique` transforms the training corpus (``baseline``: unchanged, ``rmft``: :func:`~.rmft.rmft`,
``dedup``: :func:`~.dedup.dedup`), fine-tunes the base with the plain causal objective (strategy ``clm``: every token
a target) and step checkpoints (:class:`~toolkit.training.TrainConfig` ``checkpoints_per_epoch``), then writes

``RUN_DIR/addresses.json``
    ``technique`` and ``original``: the addresses of the **original** (untransformed) training corpus — TER's
    denominator for every technique;
``RUN_DIR/<checkpoint>/seen_addresses.json``
    ``seen``: the original addresses present in the training text of the examples consumed up to that checkpoint
    (the chunks decoded from their token ids, so exactly what the model read: after RMFT only first occurrences
    are original, after dedup the removed header lines are gone) — SER's denominator;
``RUN_DIR/technique_summary.json``
    the transformation's counts (no addresses).

These files hold identifiers (the run folder is created owner-only); nothing here prints an address.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from toolkit.corpus import Corpus
from toolkit.errors import ToolkitError
from toolkit.io import atomic_write_json, private_umask
from toolkit.identifiers.addresses import addresses_in, occurrence_table

TECHNIQUES = ("baseline", "rmft", "dedup")


def technique_corpus(corpus: Corpus, technique: str, *, seed: int = 0,
                     granularity: str = "line") -> tuple[Corpus, dict[str, Any]]:
    """The training corpus of ``technique`` and the transformation's summary (counts only); ``granularity`` is
    dedup's (``"line"``, the paper's, or ``"address"``: :func:`~toolkit.strategies.dedup.dedup`)."""
    if technique == "baseline":
        from toolkit.identifiers.addresses import address_summary

        occ = occurrence_table(corpus)
        s = address_summary(occ, set(occ["address"]))
        return corpus, {"technique": "baseline", "n_documents": len(corpus), "before": s, "after": s}
    if technique == "rmft":
        from toolkit.strategies.rmft import rmft

        res = rmft(corpus, seed=seed)
        return res.corpus, res.summary
    if technique == "dedup":
        from toolkit.strategies.dedup import dedup

        res = dedup(corpus, granularity=granularity)
        return res.corpus, res.summary
    raise ToolkitError(f"unknown technique {technique!r}; available: {', '.join(TECHNIQUES)}")


def _run_examples(corpus: Corpus, checkpoint: Path, max_length: int) -> tuple[list[dict], Any]:
    """The training examples :func:`toolkit.training.train` built for this corpus (same tokenizer and window, read
    from a checkpoint folder of the run), to map consumed example indices back to text."""
    from transformers import AutoConfig, AutoTokenizer

    from toolkit.strategies import training_examples

    tok = AutoTokenizer.from_pretrained(str(checkpoint))
    conf = AutoConfig.from_pretrained(str(checkpoint))
    limit = int(getattr(conf, "max_position_embeddings", None) or getattr(conf, "n_positions", None) or 512)
    return training_examples(corpus, tok, "clm", positions=None, max_length=min(max_length, limit),
                             progress=False), tok


def write_seen_addresses(run_dir: str | Path, corpus: Corpus, max_length: int, original: set[str]) -> int:
    """Write ``seen_addresses.json`` into every checkpoint of ``run_dir`` whose ``training_log.json`` lists its
    ``consumed_examples``; returns the number of checkpoints written."""
    run = Path(run_dir)
    logs = [p for p in sorted(run.glob("*/training_log.json")) if p.parent.name.startswith(("step-", "epoch-"))]
    logs = [(p, json.loads(p.read_text())) for p in logs]
    logs = [(p, log) for p, log in logs if "consumed_examples" in log]
    if not logs:
        return 0
    examples, tok = _run_examples(corpus, logs[0][0].parent, max_length)
    if any(log.get("n_examples") != len(examples) for _, log in logs):
        raise ToolkitError(f"{run}: the run's examples do not match this corpus and base (re-train the run)")
    texts = tok.batch_decode([e["input_ids"] for e in examples], skip_special_tokens=True)
    per_example = [addresses_in(t) & original for t in texts]
    for path, log in logs:
        seen: set[str] = set()
        for i in log["consumed_examples"]:
            seen |= per_example[i]
        atomic_write_json({"checkpoint": path.parent.name, "n_seen": len(seen), "seen": sorted(seen)},
                          path.parent / "seen_addresses.json")
    return len(logs)


def train_technique(corpus: Corpus, technique: str, base, run_dir: str | Path, config, *, seed: int = 0,
                    granularity: str = "line", progress: bool = True) -> pd.DataFrame:
    """Fine-tune ``base`` on ``corpus`` transformed by ``technique`` (module docstring; ``granularity``: dedup's)
    into ``run_dir``; returns :func:`~toolkit.audit.extraction.run_checkpoints`. A finished run with the same
    settings is not retrained."""
    from toolkit.training import train
    from toolkit.audit.extraction import run_checkpoints

    with private_umask():  # the Trainer's own files (trainer/checkpoint-*) owner-only too
        run = Path(run_dir)
        train_corpus, summary = technique_corpus(corpus, technique, seed=seed, granularity=granularity)
        original = set(occurrence_table(corpus)["address"])
        if not original:
            raise ToolkitError("the training corpus holds no e-mail address: nothing to extract")
        train(train_corpus, base, run, "clm", config, progress=progress)
        atomic_write_json({"technique": technique, "seed": int(seed), "n_original": len(original),
                           "original": sorted(original)}, run / "addresses.json")
        atomic_write_json(summary, run / "technique_summary.json")
        write_seen_addresses(run, train_corpus, config.max_length, original)
        return run_checkpoints(run)


# ---------------------------------------------------------------------------------------------------------------------
# notebook steps (cached on disk, as toolkit.pipelines.steps)


def email_base_spec(email, profile):
    """The e-mail experiment's base: ``email.base`` if set, else the profile's ``base.clm`` — a model id or path
    (``str``) or a tiny architecture; a :class:`ToolkitError` when neither names one."""
    spec = email.base or profile.base.get("clm")
    if spec is None:
        raise ToolkitError("the profile names no causal base model (email.base or base.clm)")
    return spec


def tiny_email_base_inputs(spec, email, public_corpus: Corpus):
    """The ``base`` step's inputs of the tiny e-mail base ``spec`` pre-trained on ``public_corpus`` (its key is what
    :func:`ensure_email_base` caches under and :mod:`toolkit.pipelines.prebuilt` ships)."""
    from toolkit.pipelines.registry import BaseInputs
    from toolkit.training import corpus_fingerprint

    return BaseInputs.pretrained(spec, email.pretrain, corpus_fingerprint(public_corpus))


def ensure_email_base(out_dir: str | Path, public_corpus: Corpus | None, email, profile, *,
                      progress: bool = True, prebuilt: str | Path | None = None):
    """The base model of the e-mail experiment: ``email.base`` (an HF id or path) if set, else the profile's
    ``base.clm`` when it names one, else a tiny GPT-2 pre-trained once on ``public_corpus`` (``email.pretrain``
    schedule) and cached in ``out_dir``.

    ``public_corpus`` must hold messages among *other* people than the training corpus, so that the base learns
    e-mail language without any training address (checkpoint 0 of the extraction then measures the base alone);
    callers (notebook 04) build it with ``toolkit.samples.email.public_email_corpus(email.public_documents)``
    (``None`` is accepted when the profile names a model). The tiny base is a cached step
    (:mod:`toolkit.pipelines.cache`) keyed by its architecture, schedule and the public corpus' fingerprint; a base of
    this key built before under ``prebuilt`` (``make prebuilt``: :mod:`toolkit.pipelines.prebuilt`) is copied instead
    of pre-trained."""
    from toolkit.pipelines.registry import run_step
    from toolkit.training import build_base

    spec = email_base_spec(email, profile)
    if isinstance(spec, str):
        return Path(spec) if Path(spec).exists() else spec
    out = Path(out_dir).resolve()  # absolute: runs record it in run.json, and `extract --with-base` reloads it
    if public_corpus is None or len(public_corpus) == 0:
        raise ToolkitError(f"{out}: the tiny e-mail base is pre-trained on a public corpus, but none (or an empty "
                           "one) was given")
    inputs = tiny_email_base_inputs(spec, email, public_corpus)
    with private_umask():  # the Trainer's own files owner-only too
        run_step(None, "base", inputs, lambda: build_base(public_corpus, out, "clm", tiny=spec, config=email.pretrain,
                                                          progress=progress), out_dir=out, prebuilt=prebuilt)
    return out



def _finished(run: Path) -> bool:
    """Whether ``run`` looks finished (a hint for where to compute it: the callee decides what to redo)."""
    try:
        return (json.loads((run / "run.json").read_text(encoding="utf-8")).get("status") == "done"
                and (run / "technique_summary.json").is_file())
    except (OSError, ValueError):
        return False


def _side_by_side(fn, calls: dict[str, dict], todo: set[str], *, desc: str, progress: bool) -> dict[str, Any]:
    """``fn(**calls[t])`` for every technique ``t``: those in ``todo`` side by side in worker processes
    (:func:`toolkit.pipelines.parallel.map_in_processes`, without their own bars), the others here."""
    from toolkit.pipelines.parallel import map_in_processes

    todo = [t for t in calls if t in todo]
    out = dict(zip(todo, map_in_processes(fn, [{**calls[t], "progress": False} for t in todo], desc=desc,
                                          unit="technique", progress=progress))) if len(todo) > 1 else {}
    return {t: out[t] if t in out else fn(**calls[t]) for t in calls}


def train_techniques(corpus: Corpus, base, run_root: str | Path, techniques, config, *, seed: int = 0,
                     progress: bool = True) -> dict[str, pd.DataFrame]:
    """:func:`train_technique` for each technique into ``run_root/NAME`` (finished runs are reused); the runs not
    finished yet side by side, one process each, on a machine without a GPU
    (:func:`toolkit.pipelines.parallel.step_processes`; same seeds, so the same models)."""
    calls = {t: dict(corpus=corpus, technique=t, base=base, run_dir=Path(run_root) / t, config=config, seed=seed,
                     progress=progress) for t in techniques}
    todo = {t for t, c in calls.items() if not _finished(c["run_dir"])}
    return _side_by_side(train_technique, calls, todo, desc="fine-tuning", progress=progress)


def extract_techniques(run_root: str | Path, techniques, prompts: pd.DataFrame, out_root: str | Path, *,
                       heldout=None, config=None, include_base: bool = True,
                       progress: bool = True) -> dict[str, pd.DataFrame]:
    """:func:`~toolkit.audit.extraction.extract_run` for each technique (``out_root/NAME``, cached per
    checkpoint), side by side as :func:`train_techniques`."""
    from toolkit.audit.extraction import extract_run

    calls = {t: dict(run_dir=Path(run_root) / t, prompts=prompts, out_dir=Path(out_root) / t, heldout=heldout,
                     config=config, include_base=include_base, progress=progress) for t in techniques}
    return _side_by_side(extract_run, calls, set(calls), desc="extraction", progress=progress)


def runs_summary(run_root: str | Path, techniques) -> pd.DataFrame:
    """Per technique: training seconds, tokens/s, steps, checkpoints and the transformation's counts."""
    rows = {}
    for t in techniques:
        run = Path(run_root) / t
        info = json.loads((run / "run.json").read_text())
        summ = json.loads((run / "technique_summary.json").read_text())
        after = summ["after"]
        rows[t] = {"address occurrences": after["n_occurrences"],
                   "original occurrences": after["n_original_occurrences"],
                   "original max repetition": after["original_max_repetition"],
                   "checkpoints": len(list(run.glob("step-*"))) or len(list(run.glob("epoch-*"))),
                   "steps": info.get("steps"), "train seconds": info.get("seconds"),
                   "tokens/s": info.get("tokens_per_second")}
    return pd.DataFrame(rows).T


def findings(tables: dict[str, pd.DataFrame], comparison: pd.DataFrame, report: dict) -> str:
    """Markdown bullets computed from the results: TER/SER at the last checkpoint; each technique's TER and SER
    reduction against the baseline there with its exact interval (:func:`~toolkit.metrics.extraction.
    extraction_reductions`; "no conclusion at this size" where it holds 0); the mean TER and MDP% over the
    checkpoints (002 Table 1 style, descriptive: no interval); AURC in %² with the mean MaxTER it amounts to
    (AURC / τ_max, in %), and where each technique is infeasible and why (its smallest MDP%)."""
    from toolkit.metrics.extraction import extraction_reductions

    lines = []
    base = tables.get("baseline")
    if base is not None:
        b = base[base["checkpoint"] > 0]
        last = b.iloc[-1]
        lines.append(f"- **baseline**: TER {last['ter']:.2f}% ({int(last['n_leaked'])} of {int(last['n_original'])} "
                     f"training addresses, {int(last['n_leaked_uncopied'])} never in the prompt that produced "
                     f"them), SER {last['ser']:.2f}% at the last checkpoint; mean TER over the checkpoints "
                     f"{b['ter'].mean():.2f}%; base model before fine-tuning: TER "
                     f"{base.loc[base['checkpoint'] == 0, 'ter'].iloc[0]:.2f}%"
                     if (base["checkpoint"] == 0).any() else
                     f"- **baseline**: TER {last['ter']:.2f}%, SER {last['ser']:.2f}% at the last checkpoint")
    red = extraction_reductions(tables)
    tau_max = float(report["tau_max"])
    for name, g in comparison.groupby("technique", sort=False):
        t = tables[name]
        last = t[t["checkpoint"] > 0].iloc[-1]
        judged = []
        for r in red[red["technique"] == name].itertuples():
            judged.append(f"{r.rate} {r.leaked} of {r.out_of} against {r.baseline_leaked} of {r.baseline_out_of}: "
                          f"reduction {r.reduction:+.0f}% [{r.reduction_low:+.0f}%, {r.reduction_high:+.0f}%] "
                          f"({r.confidence:.1%} exact interval) — **{r.conclusion}**")
        t0 = report["infeasible_below"].get(name)
        a = report["aurc"][name]
        feas = ("; never feasible (no checkpoint with a defined TER drop)" if t0 is None else
                f"; infeasible below τ = {t0:.1f}%, the smallest MDP% of its checkpoints (no checkpoint keeps "
                "held-out perplexity within a smaller increase)" if t0 > 0 else "")
        lines.append(
            f"- **{name}**: TER {last['ter']:.2f}% / SER {last['ser']:.2f}% at the last checkpoint; there, "
            + ("; ".join(judged) or "no baseline to compare with")
            + f". Over the checkpoints (descriptive, no interval): mean TER {g['ter'].mean():.2f}% vs "
            f"{g['baseline_ter'].mean():.2f}% for the baseline at a mean MDP of {g['mdp_percent'].mean():+.1f}% "
            f"(mean ΔPP {g['mean_delta_perplexity'].mean():+.3f}); AURC {a:,.1f} %² over τ ≤ {tau_max:g}% (a mean "
            f"MaxTER of {a / tau_max:.1f}% over that range)" + feas)
    return "\n".join(lines)


def write_maxter(comparison: pd.DataFrame, out_dir: str | Path, tau_max: float | None = None) -> dict[str, Any]:
    """Compute MaxTER curves and AURC (methods.md §6) from :func:`~.metrics.compare_to_baseline`'s table and write
    ``maxter.parquet`` (curves), ``checkpoints.parquet`` (the comparison) and ``aurc.json`` (the report the HTML
    report reads) into ``out_dir``; returns the AURC report."""
    from toolkit.io import atomic_write_parquet
    from toolkit.metrics.extraction import aurc_report, maxter_table

    if comparison["perplexity"].isna().all():
        raise ToolkitError("the extraction tables hold no perplexity: run the extraction with a held-out corpus")
    report = aurc_report(comparison, tau_max)
    out = Path(out_dir)
    atomic_write_parquet(maxter_table(comparison, report["tau_max"]), out / "maxter.parquet")
    atomic_write_parquet(comparison, out / "checkpoints.parquet")
    atomic_write_json(report, out / "aurc.json")
    return report


__all__ = ["TECHNIQUES", "email_base_spec", "ensure_email_base", "extract_techniques", "findings", "runs_summary",
           "technique_corpus", "tiny_email_base_inputs", "train_technique", "train_techniques", "write_maxter",
           "write_seen_addresses"]
