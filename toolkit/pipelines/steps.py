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


def load_models(name: str | Path, reference: str | Path | None = None, *, dtype=None, device_map=None):
    """``((model, tokenizer), reference pair or None)``, each loaded by :func:`toolkit.audit.losses.load_audit_model`
    and, without a ``device_map``, moved to the GPU when there is one."""
    import torch

    from toolkit.audit.losses import load_audit_model

    def one(src):
        model, tok = load_audit_model(src, dtype=dtype, device_map=device_map)
        if device_map is None and torch.cuda.is_available():
            model.to("cuda")
        return model, tok

    return one(name), (one(reference) if reference is not None else None)


def attack_model(model: str | Path, members: Corpus, nonmembers: Corpus, identifiers: dict[str, Any], *,
                 out_dir: str | Path, reference: str | Path | None = None,
                 identifier_count: dict[str, float] | None = None, canaries: pd.DataFrame | None = None,
                 novel_privacy: float | dict | None = None, regurgitation: float | dict | None = None, options=None,
                 n_bootstrap: int = 1000, seed: int = 0, dtype=None, device_map=None, rmia=None,
                 one_run: pd.DataFrame | None = None, identifiers_all: dict[str, Any] | None = None,
                 public_texts=None, saw_neither: bool = False, progress: bool = False) -> dict[str, Any]:
    """The attack battery on one model (methods.md §10–11) and its verdict, written into ``out_dir``.

    Membership attacks on ``members`` vs ``nonmembers`` (:func:`toolkit.audit.attacks.run_battery`, with the
    ``reference`` model when given and the probe's ``identifier_count`` scores; the inserted ``canaries``' tokens
    left out of every membership score), PII inference on the members' PII
    entities (the ``spans`` of ``identifiers``, the members' identifier tables; and the reference's), memorisation of
    every identifier type of their ``positions`` (with a reference only), the exposure of inserted ``canaries``, then
    :func:`toolkit.audit.verdict.verdict` with the §4 audit's ``novel_privacy`` (or
    :func:`toolkit.audit.evaluate.novel_evidence`: with the non-members' side) and the free-running
    ``regurgitation`` share. ``options``: an :class:`~toolkit.config.sections.AttacksSection` (window, candidates,
    sample sizes). ``rmia``: :class:`~toolkit.audit.attacks.rmia.RMIAReferences` (the ``rmia`` attack), optional.
    ``one_run``: the one-run audit's canary table (:func:`~toolkit.audit.attacks.one_run.one_run_canaries_into_corpus`),
    optional: the audit with the models loaded here, ``one_run`` in ``attacks.json``, its evidence in the verdict and
    ``one_run.parquet`` (per canary: id, host individual, inclusion, insertions, score; made-up records only).
    ``identifiers_all``: the identifier tables of members and non-members; with them PII inference attacks the
    non-members' notes too (candidates and sharing from both groups) and ``pii_inference.member_advantage`` holds the
    members' advantage over them, the verdict's test (methods.md §11). ``public_texts``: the public split's texts;
    identifiers they name are public (never a finding). ``saw_neither``: the model is the reference itself (a run's
    base model, or ``toolkit audit`` of the reference): its own attacks are the split check.

    Files: ``attacks.json`` / ``roc.json`` / ``scores.parquet`` (the battery), ``identifiers.json``
    (``pii_inference``, ``memorisation``, ``canaries`` when inserted; aggregates only, never an identifier) and
    ``verdict.json``. Returns them as :func:`load_attacks` does.
    """
    from toolkit.audit.attacks import (canary_ranges, exposure, exposure_summary, memorisation_scores, pii_inference,
                                       run_battery)
    from toolkit.audit.verdict import verdict
    from toolkit.config.experiment import AttacksSection

    opt = options or AttacksSection()
    copies = getattr(opt, "pll_copies", None)  # a masked model's estimator: membership …
    pii_copies = getattr(opt, "pii_pll_copies", None)  # … and PII inference and canaries (None: the same)
    pii_copies = copies if pii_copies is None else pii_copies
    out = make_private_dir(out_dir)
    (f, tok), ref = load_models(model, reference, dtype=dtype, device_map=device_map)
    ref_name = str(reference) if reference is not None else None
    people = members.person_ids + nonmembers.person_ids
    extra = {"identifier_count": {p: float(identifier_count.get(p, 0.0)) for p in people}} \
        if identifier_count is not None else None
    # the members' texts carry the inserted canaries: their tokens are no membership evidence (methods.md §10)
    canary_text = canary_ranges(members, canaries, with_separator=True) \
        if canaries is not None and len(canaries) else None
    battery = run_battery(f, tok, members, nonmembers, reference=ref, extra_scores=extra, window=opt.window,
                          seed=seed, n_bootstrap=n_bootstrap, batch_size=opt.batch_size, reference_name=ref_name,
                          exclude=canary_text, pll_positions=opt.pll_positions,
                          pll_copies=copies, rmia=rmia, public=public_texts, progress=progress)
    if saw_neither:  # the model that saw neither group: its own attacks say whether the groups differ
        battery.meta["reference_model_attacks"] = battery.to_json()["attacks"]
    pii_kw = dict(reference=ref, n_candidates=opt.pii_candidates, max_occurrences=opt.pii_occurrences,
                  window=opt.pii_window, seed=seed, batch_size=opt.batch_size, reference_name=ref_name,
                  progress=progress, pll_copies=pii_copies)
    if identifiers_all is None:
        pii = pii_inference(f, tok, members, identifiers["spans"], **pii_kw)
    else:
        from toolkit.audit.attacks import identifier_occurrences, pii_member_advantage, public_identifier_keys
        from toolkit.corpus import Corpus

        both = Corpus(list(members) + list(nonmembers))
        mine = {d.doc_id for d in members}  # the members' own table (their texts may have had canaries cut out)
        spans = identifiers_all["spans"]
        spans = pd.concat([identifiers["spans"], spans[~spans["doc_id"].astype(str).isin(mine)]], ignore_index=True)
        every = identifier_occurrences(both, spans)  # once: the candidates and who shares what, for both calls
        public = public_identifier_keys(set(every["key"]), public_texts) if public_texts is not None else None
        pii_kw.update(population=every, public_keys=public, return_table=True)
        pii, table_m = pii_inference(f, tok, members, spans, **pii_kw)
        pii_n, table_n = pii_inference(f, tok, nonmembers, spans, **pii_kw)
        pii["nonmembers"] = {k: pii_n[k] for k in ("n_occurrences", "n_occurrences_total", "overall", "by_category",
                                                   "by_sharing", "n_public")}
        pii["member_advantage"] = pii_member_advantage(table_m, table_n, seed=seed)
    memo = {"reference": None, "n_occurrences": 0, "overall": None, "by_category": {}}
    if ref is not None:
        _, memo = memorisation_scores(f, tok, ref, members, identifiers["positions"], window=opt.pii_window,
                                      max_occurrences=opt.memorisation_occurrences, seed=seed,
                                      batch_size=opt.batch_size, progress=progress)
        memo = {"reference": ref_name, **memo}
    found = {"pii_inference": pii, "memorisation": memo}
    if canaries is not None and len(canaries):
        table = exposure(f, tok, canaries, n_reference=opt.canary_references, seed=seed, batch_size=opt.batch_size,
                         progress=progress, pll_copies=pii_copies)
        found["canaries"] = {**exposure_summary(table), "canaries": [
            {"canary_id": r.canary_id, "repeats": int(r.repeats), "exposure": float(r.exposure),
             "rank": float(r.rank)} for r in table.itertuples(index=False)]}
    audit = None
    if one_run is not None:
        from toolkit.audit.attacks.one_run import accountant_privacy, one_run_audit

        audit = one_run_audit(f, tok, one_run, reference=ref, accountant=accountant_privacy(model),
                              batch_size=opt.batch_size, progress=progress)
        battery.meta["one_run"] = audit.to_json()
        atomic_write_parquet(audit.scores.assign(person_id=list(one_run["person_id"]),
                                                 repeats=list(one_run["repeats"])), out / "one_run.parquet")
    v = verdict(attacks=battery, pii=pii, novel_privacy=novel_privacy, regurgitation=regurgitation,
                canaries=found.get("canaries"), one_run=audit)
    battery.save(out)
    atomic_write_json(found, out / "identifiers.json")
    atomic_write_json(v.to_dict(), out / "verdict.json")
    return {"attacks": battery.to_json(), "roc": battery.roc_curves, "scores": battery.scores, "identifiers": found,
            "verdict": v.to_dict()}


def load_attacks(out_dir: str | Path) -> dict[str, Any]:
    """What :func:`attack_model` wrote into ``out_dir``."""
    out = Path(out_dir)

    def read(name: str):
        return json.loads((out / name).read_text(encoding="utf-8"))

    return {"attacks": read("attacks.json"), "roc": read("roc.json"), "scores": pd.read_parquet(out / "scores.parquet"),
            "identifiers": read("identifiers.json"), "verdict": read("verdict.json")}


__all__ = ["attack_model", "audit_checkpoint", "base_model", "identifiers", "load_attacks", "load_audit", "load_models"]
