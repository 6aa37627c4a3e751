"""The steps of the masked/causal-LM audit experiment, each a plain function that computes its result, writes it
into its output directory and returns it. Whether a step runs at all is decided by the one cache rule of
:mod:`toolkit.pipelines.cache` (a step's key is a hash of its inputs), applied by
:func:`toolkit.pipelines.lm_experiment.run_experiment` — the single orchestration path of the CLI's ``run``, the
notebooks and the library. Outputs are the files the CLI writes (``metrics.json``, ``roc.json``,
``predictions.parquet``), so a notebook and ``python -m toolkit probe`` agree; :func:`load_audit` reads them back for
a cached step.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from toolkit.corpus import Corpus
from toolkit.io import atomic_write_json, atomic_write_parquet, make_private_dir


def base_model(public: Corpus | None, out_dir: str | Path, kind: str, *, spec, pretrain,
               progress: bool = True) -> Path | str:
    """The base model: a pre-trained id/path (``spec`` a string) as is, or a tiny model of architecture ``spec``
    built from ``public`` with the ``pretrain`` schedule into ``out_dir``."""
    from toolkit.training import build_base

    if isinstance(spec, str):
        return Path(spec) if Path(spec).exists() else spec  # a hub id stays a string
    build_base(public, out_dir, kind, tiny=spec, config=pretrain, progress=progress)
    return Path(out_dir)


def identifiers(corpus: Corpus, out_dir: str | Path, *, exclude: dict[str, list[tuple[int, int]]] | None = None,
                **config) -> dict[str, Any]:
    """Identifier analysis of ``corpus`` (methods.md §2) written to ``out_dir``; returned as
    ``load_identifiers`` returns it (the same tables, dtypes included, whether computed now or cached).

    ``exclude`` (``doc_id -> [(start, end), ...]``, e.g. where canaries were inserted) is not part of the notes: the
    analysis runs on the texts with those ranges blanked (each character replaced by a space, so every offset
    stays), with gold spans overlapping them dropped — for every n, the same individual × term graph as the notes
    had before the insertion (no word of a canary counts towards any term's individuals, and no n-gram joins a
    canary's words; tests/test_identifier_step.py compares with the analysis of the notes without canaries).
    ``summary.json``'s ``canaries_excluded`` says how many ranges and characters were blanked.

    The analysis runs on the out-of-core engine (:func:`~toolkit.identifiers.engine.analyze_to_disk`), as
    ``python -m toolkit identifiers`` does: the same tables as the in-memory analysis, memory bounded."""
    from toolkit.identifiers import IdentifierConfig, load_identifiers
    from toolkit.identifiers.engine import analyze_to_disk
    from toolkit.identifiers.storage import run_key, save_identifiers, text_sha256

    analyze_to_disk(blank_ranges(corpus, exclude) if exclude else corpus, out_dir, IdentifierConfig(**config),
                    progress=False)
    res = load_identifiers(out_dir)
    if not exclude:
        return res
    tables = {name: res[name] for name in ("terms", "individuals", "positions", "spans", "documents")}
    # the tables cover the notes as they are (canaries in): training checks its documents against these fingerprints
    documents = tables["documents"].copy()
    documents["text_sha256"] = documents["doc_id"].astype(str).map({d.doc_id: text_sha256(d.text) for d in corpus})
    tables["documents"] = documents
    ranges = {k: sorted(map(list, v)) for k, v in sorted(exclude.items())}
    summary = {**res["summary"], "run_key": run_key({"config": res["summary"].get("config"), "excluded": ranges},
                                                      documents),
               "canaries_excluded": {"n_ranges": sum(len(v) for v in exclude.values()), "n_documents": len(exclude),
                                     "n_characters": sum(b - a for v in exclude.values() for a, b in v)}}
    save_identifiers(tables, summary, out_dir)
    return load_identifiers(out_dir)


def blank_ranges(corpus: Corpus, exclude: dict[str, list[tuple[int, int]]]) -> Corpus:
    """``corpus`` with the characters of ``exclude``'s ranges replaced by spaces (offsets unchanged) and the gold
    spans overlapping them dropped. A document id that is not in ``corpus`` is a :class:`ToolkitError`."""
    import dataclasses

    from toolkit.errors import ToolkitError

    ids = {d.doc_id for d in corpus}
    missing = [k for k in exclude if k not in ids]
    if missing:
        raise ToolkitError(f"ranges to exclude name {len(missing)} document(s) not in the corpus")
    docs = []
    for d in corpus:
        ranges = exclude.get(d.doc_id)
        if not ranges:
            docs.append(d)
            continue
        chars = list(d.text)
        for a, b in ranges:
            chars[max(a, 0):b] = " " * (min(b, len(chars)) - max(a, 0))
        spans = tuple(s for s in d.spans if not any(s.start < b and s.end > a for a, b in ranges))
        docs.append(dataclasses.replace(d, text="".join(chars), spans=spans))
    return Corpus(docs, source=corpus.source)


def audit_checkpoint(checkpoint: str | Path, members: Corpus, nonmembers: Corpus, ids_train: dict, ids_all: dict, *,
                     out_dir: str | Path, base_vocabulary: set[str] | None = None, max_length: int = 256,
                     n_bootstrap: int = 1000, progress: bool = False, seed: int | None = None, dtype=None,
                     device_map=None, redact=None, **probe_kw) -> dict[str, Any]:
    """The papers' two audits of a checkpoint — fill-mask for a masked LM (``seed``: its pass assignment and, for
    every model, the bootstrap of the count attack's AUC), teacher-forced next-word for a causal LM (chosen from the
    checkpoint's architecture):

    * privacy and utility (methods.md §4): the training documents (``members``) probed with the identifiers
      the model was trained with (``ids_train``), so a utility position is a word the strategy trained on and a
      protected position one it protected; written as ``metrics.json`` and ``predictions.parquet``;
    * the count membership attack (§5): members and non-members probed alike with the auditor's identifiers over
      both (``ids_all``), so both sides are masked and scored by the same rule; ``roc.json`` and
      ``mia_predictions.parquet``. The non-members' rows of that probe give the held-out utility (§4,
      ``heldout_utility`` in ``metrics.json``) and, with ``base_vocabulary``, the non-members' side of novel-identifier
      privacy (``novel_member_advantage``, :func:`toolkit.audit.evaluate.novel_member_advantage`; §11).

    ``dtype`` / ``device_map`` load a large model (:func:`toolkit.audit.losses.load_audit_model`); ``probe_kw`` go
    to the probe (``batch_size``, ``device``). ``redact`` (``python -m toolkit audit``'s default: keyed hashes of the
    words, :func:`toolkit.pipelines.audit_only.hash_predictions`) is applied to both prediction tables after the
    metrics are computed and before they are written and returned; they are then written as
    ``predictions.hashed.parquet`` and ``mia_predictions.hashed.parquet``, so that no reader takes hashes for words."""
    from toolkit.audit import probe_causal, probe_masked
    from toolkit.audit.evaluate import (evaluate_predictions, membership_report, membership_scores,
                                        novel_member_advantage)
    from toolkit.audit.losses import load_audit_model
    from toolkit.metrics.probing import heldout_utility
    from toolkit.models import model_kind

    out = Path(out_dir)
    member_ids, nonmember_ids = set(members.person_ids), set(nonmembers.person_ids)
    both = Corpus(list(members) + list(nonmembers))
    model, tokenizer = load_audit_model(checkpoint, dtype=dtype, device_map=device_map)
    probe = probe_masked if model_kind(model) == "mlm" else probe_causal
    if probe is probe_masked and seed is not None:
        probe_kw["seed"] = seed
    preds = probe(model, tokenizer, members, positions=ids_train["positions"], max_length=max_length,
                  progress=progress, **probe_kw)
    report = evaluate_predictions(preds, ids_train, base_vocabulary=base_vocabulary)
    report["checkpoint"] = str(checkpoint)
    if preds.attrs.get("token_accuracy") is not None:
        report["token_accuracy"] = float(preds.attrs["token_accuracy"])
    mia_preds = probe(model, tokenizer, both, positions=ids_all["positions"], max_length=max_length,
                      progress=progress, **probe_kw)
    report["heldout_utility"] = heldout_utility(mia_preds, nonmember_ids)
    if base_vocabulary is not None:  # the verdict judges the members' novel identifiers against the non-members'
        report["novel_member_advantage"] = novel_member_advantage(
            mia_preds, ids_all, both, member_ids, nonmember_ids, base_vocabulary=base_vocabulary,
            seed=0 if seed is None else seed)
    scores = membership_scores(mia_preds, ids_all, both)
    roc = membership_report(scores, member_ids, nonmember_ids, n_bootstrap=n_bootstrap,
                            seed=0 if seed is None else seed)  # the seed of the step's key: the bootstrap's too
    make_private_dir(out)  # predictions hold predicted identifiers: owner-only
    if redact is not None:
        preds, mia_preds = redact(preds), redact(mia_preds)
    tail = ".hashed.parquet" if redact is not None else ".parquet"
    atomic_write_parquet(preds.assign(top_k=preds["top_k"].map(list)), out / f"predictions{tail}")
    atomic_write_parquet(mia_preds.assign(top_k=mia_preds["top_k"].map(list)), out / f"mia_predictions{tail}")
    atomic_write_json(roc, out / "roc.json")
    atomic_write_json(report, out / "metrics.json")
    return {"metrics": report, "roc": roc, "predictions": preds, "mia_predictions": mia_preds}


def load_audit(out_dir: str | Path) -> dict[str, Any]:
    """What :func:`audit_checkpoint` wrote into ``out_dir``.

    An audit written before ``heldout_utility`` existed gets it here from the same files: its non-members are the
    individuals of ``mia_predictions.parquet`` absent from ``predictions.parquet`` (the §4 probe reads members only).
    """
    from toolkit.metrics.probing import heldout_utility

    out = Path(out_dir)
    tail = ".parquet" if (out / "predictions.parquet").is_file() else ".hashed.parquet"  # see audit_checkpoint
    audit = {"metrics": json.loads((out / "metrics.json").read_text(encoding="utf-8")),
             "roc": json.loads((out / "roc.json").read_text(encoding="utf-8")),
             "predictions": pd.read_parquet(out / f"predictions{tail}"),
             "mia_predictions": pd.read_parquet(out / f"mia_predictions{tail}")}
    if "heldout_utility" not in audit["metrics"]:
        mia = audit["mia_predictions"]
        nonmembers = set(mia["person_id"]) - set(audit["predictions"]["person_id"])
        audit["metrics"]["heldout_utility"] = heldout_utility(mia, nonmembers) if nonmembers else None
    return audit


__all__ = ["audit_checkpoint", "base_model", "identifiers", "load_audit"]
