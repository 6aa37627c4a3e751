"""Cached steps of the two-step method that notebook 05 chains (methods.md §7): each expensive result is written once.

The NER anonymisation and the model trained from scratch are cached steps under the one cache rule of
:mod:`toolkit.pipelines.cache` (a step's key is a hash of its inputs); a run with other inputs recomputes them. The
cheap steps (sentences, candidates, scrubbing, the anonymity test) are recomputed every time.
"""

from __future__ import annotations

import shutil
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd

from toolkit.corpus import Corpus
from toolkit.pipelines.registry import AnonymizeInputs, BaseInputs, run_step
from toolkit.scrub.anonymize import AnonymizeConfig, Anonymized, anonymize_corpus, load_anonymized


def ensure_anonymized(corpus: Corpus, out_dir: str | Path, config: AnonymizeConfig, *,
                      progress: bool = True) -> Anonymized:
    """:func:`~toolkit.scrub.anonymize.anonymize_corpus` into ``out_dir/anonymized.jsonl`` (+ offset map and
    summary), a cached step keyed by the corpus fingerprint and the config (:mod:`toolkit.pipelines.cache`)."""
    from toolkit.training import corpus_fingerprint

    path = Path(out_dir) / "anonymized.jsonl"

    def compute() -> Anonymized:
        result = anonymize_corpus(corpus, config, progress=progress)
        result.save(path)
        return result

    inputs = AnonymizeInputs(corpus_fingerprint(corpus), config)
    return run_step(None, "anonymize", inputs, compute, lambda: load_anonymized(path), out_dir=out_dir)


def ensure_model(corpus: Corpus, out_dir: str | Path, *, tiny, config, progress: bool = True,
                 prebuilt: str | Path | None = None) -> Path | str:
    """A tokenizer and a masked LM trained from scratch on ``corpus`` (``toolkit.training.build_base``: the way
    MedRoBERTa.nl was built, methods.md §7.2), a cached step in ``out_dir``; one of this key built before under
    ``prebuilt`` (notebook 05's, shipped in ``prebuilt/``: :mod:`toolkit.pipelines.prebuilt`) is copied instead of
    trained. When ``tiny`` is a model id or path (a profile with a pre-trained base, e.g. ``paper``), that model is
    used as it is: any masked LM can be scrubbed."""
    from toolkit.training import build_base, corpus_fingerprint

    if isinstance(tiny, str):
        return Path(tiny) if Path(tiny).exists() else tiny
    out = Path(out_dir)
    inputs = BaseInputs.from_scratch(corpus_fingerprint(corpus), tiny, config)
    run_step(None, "base", inputs, lambda: build_base(corpus, out, "mlm", tiny=tiny, config=config,
                                                      progress=progress), out_dir=out, prebuilt=prebuilt)
    return out


def scripted_session(candidates: pd.DataFrame, review_file: str | Path, reviewer: str,
                     script: str | Path | pd.DataFrame, *, default: str | None = "not_name"):
    """A :class:`~toolkit.review.store.ReviewSession` whose pending candidates are decided by ``script`` (the
    headless notebook run); candidates the script does not list get ``default``."""
    from toolkit.review.session import ReviewSession

    session = ReviewSession(candidates, review_file, reviewer)
    session.apply_script(script, default=default)
    return session


def fresh_dir(path: str | Path) -> Path:
    """``path`` emptied (for outputs rewritten on every run, such as the scrubbed model)."""
    p = Path(path)
    if p.exists():
        shutil.rmtree(p)
    return p


class StepTimer:
    """Wall-clock and CPU seconds per named step: ``with timer("train"): ...``; ``timer.table()``."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    @contextmanager
    def __call__(self, name: str):
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self.rows.append({"step": name, "wall s": round(time.perf_counter() - t0, 1),
                              "CPU s (this process)": round(time.process_time() - c0, 1)})

    def table(self) -> pd.DataFrame:
        t = pd.DataFrame(self.rows, columns=["step", "wall s", "CPU s (this process)"])
        total = {"step": "total", "wall s": round(t["wall s"].sum(), 1),
                 "CPU s (this process)": round(t["CPU s (this process)"].sum(), 1)}
        return pd.concat([t, pd.DataFrame([total])], ignore_index=True).set_index("step")


__all__ = ["StepTimer", "ensure_anonymized", "ensure_model", "fresh_dir", "scripted_session"]
