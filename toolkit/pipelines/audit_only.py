"""Audit any model with the strongest known attacks, without training (methods.md §10–11): ``python -m toolkit audit``
and experiment configs with ``models:`` instead of ``training:``.

Every model — a Hugging Face id or directory, masked or causal — is audited on the members (its training data) and
non-members of a corpus:

1. the §4 probe, fill-mask or teacher-forced next word from the architecture
   (:func:`toolkit.pipelines.steps.audit_checkpoint`): privacy, novel privacy (with a ``public`` corpus) and the
   papers' ``identifier_count`` membership scores;
2. the attacks (:func:`toolkit.audit.model_audit.audit_model`): the membership battery (loss, zlib, Min-K%,
   Min-K%++, reference, identifier_count), PII inference (and the reference's), memorisation of identifier types
   (with a reference model) and the traffic-light verdict.

The reference model is the one given, else the base named by the checkpoint's training record (``run.json`` of the
model directory or of the run directory holding an ``epoch-N`` checkpoint; ``training_log.json``), else none.
Every step is cached by the one cache rule (:mod:`toolkit.pipelines.cache`). Layout of ``out_dir`` (the run layout,
:class:`toolkit.results.layout.RunLayout`, with each model stored under its label)::

    identifiers_members/ identifiers_all/      identifier analyses (when made here from a detector, k, n)
    audit/<label>/                             metrics.json, roc.json, predictions.hashed.parquet,
                                               mia_predictions.hashed.parquet (the §4 probe; keyed hashes)
    attacks/<label>/                           attacks.json, roc.json, scores.parquet, identifiers.json, verdict.json
    missed/<label>/                            missed.json (gold identifiers the detector missed; not for oracle)
    attacks.json identifiers.json verdicts.json report.html   .hash_key (the hashes' key)

(``attacks.json`` / ``identifiers.json``: the model's own for one model, ``{label: …}`` for several.
``attacks.json`` records the settings the attacks used: ``window`` — after clipping to the model's position table —
and ``window_requested``, ``n_bootstrap``, ``auc_ci_method`` (``bootstrap``, or ``hanley-mcneil`` with
``n_bootstrap = 0``), ``pll_positions``, ``pll_copies``, ``pii_pll_copies``.)

A standalone audit (no ``cache``: the command line, a notebook) works like ``toolkit run``
(:mod:`toolkit.pipelines.audit_outputs`): it holds ``OUT/.lock`` (:func:`toolkit.pipelines.lock.run_lock`; a second
audit of the same folder stops with an error naming the holder's pid, a dead holder's lock is taken over); before
any new work it *removes* — not moves — the previous top-level outputs and every step folder whose inputs differ
from this audit's (the cache rule would remove them anyway; removing them first means an interrupted audit never
leaves the previous verdicts beside its own half-done folders, and no stale copy of personal data is kept); the
prediction tables hold keyed hashes, not words (``hash_predictions=False``, ``--raw-predictions``: the words, as
``predictions.parquet`` / ``mia_predictions.parquet``); the verdicts are known (``on_verdicts``) before the
top-level files are written, and a full disk, a quota, a read-only or forbidden folder stops it with one line naming
the file.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolkit.config.sections import AttacksSection
from toolkit.corpus import Corpus
from toolkit.errors import ToolkitError
from toolkit.pipelines.audit_outputs import check_options, writing
from toolkit.results.layout import RESERVED, RunLayout

if TYPE_CHECKING:
    from toolkit.pipelines.data import ExperimentData
_CHECKPOINT = re.compile(r"(epoch|step|checkpoint)-\d+")
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")


def model_label(model: str | Path) -> str:
    """A folder name for ``model``: a directory's name (``RUN-epoch-N`` for a checkpoint of a run), a hub id with
    ``/`` written ``--``."""
    p = Path(model)
    if p.exists():
        name = p.resolve().name
        if _CHECKPOINT.fullmatch(name):
            name = f"{p.resolve().parent.name}-{name}"
    else:
        name = str(model).replace("/", "--")
    name = re.sub(r"[^\w.+-]", "_", name) or "model"
    return f"{name}-model" if name in RESERVED else name


def default_reference(model: str | Path) -> str | None:
    """The base model a checkpoint was fine-tuned from, as its training record names it (``run.json`` in the model
    directory or its parent run directory, ``base`` in ``training_log.json``); None when none names one that is a
    local directory or looks like a hub id."""
    p = Path(model)
    if not p.is_dir():
        return None
    for rec in (p / "run.json", p.parent / "run.json", p / "training_log.json"):
        try:
            base = json.loads(rec.read_text(encoding="utf-8")).get("base") if rec.is_file() else None
        except (OSError, ValueError, AttributeError):
            base = None
        if isinstance(base, str) and base and base != "scratch":  # "scratch": a base built from nothing
            for cand in (Path(base), rec.parent / base):
                if cand.is_dir():
                    return str(cand.resolve())
            if _HUB_ID.fullmatch(base) and not base.startswith(("/", ".")):
                return base
    return None


@dataclass
class AuditResult:
    """What :func:`audit_models` returns: per model label, the model, its reference, the §4 audit
    (:func:`~toolkit.pipelines.steps.load_audit`'s keys) and the attacks
    (:func:`~toolkit.audit.model_audit.read_attack_files`'s keys, ``verdict`` included)."""

    out_dir: Path
    models: dict[str, str]
    references: dict[str, str | None] = field(default_factory=dict)
    audits: dict[str, dict[str, Any]] = field(default_factory=dict)
    attacks: dict[str, dict[str, Any]] = field(default_factory=dict)
    missed: dict[str, dict[str, Any]] = field(default_factory=dict)  # missed.json per label (non-oracle detector)

    @property
    def verdicts(self) -> dict[str, dict[str, Any]]:
        """``label → Verdict.to_dict()``."""
        return {label: a["verdict"] for label, a in self.attacks.items()}

    def lines(self) -> list[str]:
        """The verdicts as printed, one model after another (:func:`toolkit.audit.verdict.verdict_lines`)."""
        from toolkit.audit.verdict import verdict_lines

        return [x for label, v in self.verdicts.items() for x in verdict_lines(str(self.models[label]), v)]

    def save(self, report: bool = True) -> dict[str, Path]:
        """Write ``attacks.json``, ``identifiers.json``, ``verdicts.json`` and (``report``) ``report.html`` into
        ``out_dir`` (the per-model folders are written by the steps). A full disk, a quota, a read-only or forbidden
        folder: a one-line :class:`ToolkitError` naming the file (:func:`~toolkit.pipelines.audit_outputs.writing`)."""
        from toolkit.io import atomic_write_json

        one, layout = len(self.attacks) == 1, RunLayout(self.out_dir)
        att = {label: a["attacks"] for label, a in self.attacks.items()}
        ids = {label: a["identifiers"] for label, a in self.attacks.items()}
        files = {"attacks": next(iter(att.values())) if one else att,
                 "identifiers": next(iter(ids.values())) if one else ids, "verdicts": self.verdicts}
        out = {}
        for name, obj in files.items():
            with writing(layout.summary(name)):
                out[name] = atomic_write_json(obj, layout.summary(name))
        if report:
            from toolkit.report import build_report

            with writing(layout.report):
                out["report"] = build_report([self.out_dir], layout.report)
        return out


def _split(corpus: Corpus, split, n: int | None, what: str) -> Corpus:
    if isinstance(split, Corpus):
        part = split
    else:
        wanted = [split] if isinstance(split, str) else list(split)
        missing = [s for s in wanted if s not in corpus.splits]
        if missing:
            raise ToolkitError(f"{corpus.source or 'corpus'}: {what}: no document of split(s) {missing}; the corpus "
                               f"has splits {corpus.splits}")
        part = corpus.filter(split=wanted)
    return part.filter(person_ids=part.person_ids[:n]) if n else part


def _identifier_plan(identifiers, detector, k, n, members: Corpus, nonmembers: Corpus) -> tuple[dict | None, dict]:
    """``(tables, analyses)``: a given identifiers folder's tables (checked to cover every audited document) and no
    analysis, or None and the analyses of members and members ∪ non-members to make here (cached):
    ``{step name: (inputs, documents, settings)}``."""
    from toolkit.identifiers import IdentifierConfig, load_identifiers
    from toolkit.identifiers.storage import check_coverage
    from toolkit.pipelines.registry import IdentifiersInputs, identifier_settings
    from toolkit.training import corpus_fingerprint

    if isinstance(identifiers, (str, Path)):
        tables = load_identifiers(identifiers)
        check_coverage(list(members) + list(nonmembers), tables["positions"], table="positions")
        return tables, {}
    if isinstance(identifiers, IdentifierConfig):
        cfg = identifiers
    elif detector is not None:
        cfg = IdentifierConfig(detector=detector, k=k, n=n)
    else:
        raise ToolkitError("name the identifiers: a folder made by `python -m toolkit identifiers`, or a detector "
                           "(with k and n) to analyse the audited documents")
    id_cfg = identifier_settings(cfg)
    return None, {f"identifiers_{part}": (IdentifiersInputs.of(id_cfg, corpus_fingerprint(docs),
                                                               with_cache_location=True), docs, id_cfg)
                  for part, docs in (("members", members), ("all", Corpus(list(members) + list(nonmembers))))}


def audit_models(models: str | Path | Sequence[str | Path], corpus, *, members, nonmembers, reference=None,
                 identifiers=None, detector: str | None = None, k: int = 2, n: int = 1, out_dir: str | Path,
                 dtype=None, device_map=None, window: int = 256, n_individuals: int | None = None, seed: int = 0,
                 progress: bool = True, options: AttacksSection | None = None, public: Corpus | None = None,
                 n_bootstrap: int = 1000, batch_size: int = 32, cache=None, report: bool = True,
                 pll_positions: int | str = "all", pll_copies: int | str = "all",
                 pii_pll_copies: int | str | None = None, hash_predictions: bool = True, echo: bool = False,
                 on_verdicts: Callable[[AuditResult], None] | None = None) -> AuditResult:
    """Audit every model of ``models`` (see the module docstring) into ``out_dir`` and return the results.

    Parameters
    ----------
    corpus : path or Corpus
        Holds the members and non-members; ``members`` / ``nonmembers`` name their split(s) (or are corpora), the
        first ``n_individuals`` individuals of each when given.
    reference : str or Path, optional
        The attacks' reference model for every model; ``None``: each checkpoint's base (:func:`default_reference`);
        ``False``: none.
    identifiers : path or IdentifierConfig, optional
        A folder of ``python -m toolkit identifiers`` covering the audited documents, or the analysis settings;
        else ``detector`` / ``k`` / ``n``.
    dtype, device_map : optional
        Passed to :func:`toolkit.audit.losses.load_audit_model` (``"bf16"``, ``"auto"`` …) for large models; without
        a device map a model runs on the GPU when there is one. Batch sizes halve on out-of-memory.
    window : int
        Probe window and (without ``options``) the membership attacks' window, in tokens (≥ 8); clipped to each
        model's position table (a note on stderr; ``attacks.json`` records both).
    options : AttacksSection, optional
        The attacks' sample sizes (:class:`~toolkit.config.sections.AttacksSection`).
    public : Corpus or split name(s) of ``corpus``, optional
        The base model's training data: its identifiers are public (never a finding), the others *novel*
        (methods.md §4, §11).
    n_bootstrap : int
        Bootstrap resamples of the AUC intervals; 0: Hanley–McNeil intervals (:func:`toolkit.metrics.mia.mia_report`).
    cache : StepCache, optional
        Records the steps in a run's manifest (``run_experiment``, which holds the run's lock); default
        :func:`~toolkit.pipelines.cache.cached_step`, with the folder's lock and stale outputs removed first.
    report : bool
        Also write ``report.html`` (:func:`toolkit.report.build_report`).
    pll_positions, pll_copies, pii_pll_copies : "all" or int
        Without ``options``: a masked model's membership scoring, exact pseudo-log-likelihood, N positions per
        window or every position from K masked copies per window (:mod:`toolkit.audit.pll`); PII inference's and
        the canaries' K (None: ``pll_copies``).
    hash_predictions : bool
        Write the probe's prediction tables with keyed hashes instead of words
        (:func:`~toolkit.pipelines.audit_outputs.hash_predictions`).
    echo : bool
        One line per step on stdout (``[audit] <label>: … done in 1.2 s``).
    on_verdicts : callable, optional
        Called with the result once every verdict is known, before the top-level files are written.
    """
    from contextlib import ExitStack

    from toolkit.corpus import load_corpus
    from toolkit.io import make_private_dir
    from toolkit.pipelines.lock import run_lock

    models = [models] if isinstance(models, (str, Path)) else list(models)
    if not models:
        raise ToolkitError("no model to audit")
    budget = check_options(window=window, n_bootstrap=n_bootstrap, seed=seed, n_individuals=n_individuals, k=k, n=n,
                           batch_size=batch_size, pll_positions=pll_positions, pll_copies=pll_copies,
                           pii_pll_copies=pii_pll_copies)
    missing = [str(m) for m in models if str(m).startswith((".", "/", "~")) and not Path(m).expanduser().exists()]
    if missing:
        raise ToolkitError(f"model directory not found: {', '.join(missing)}")
    with writing(Path(out_dir)):
        out = make_private_dir(out_dir)
    with ExitStack() as held:
        if cache is None:  # a run (cache given) holds its own lock on the same folder
            held.enter_context(run_lock(out))
        if not isinstance(corpus, Corpus):
            corpus = load_corpus(corpus)
        mem = _split(corpus, members, n_individuals, "members")
        non = _split(corpus, nonmembers, n_individuals, "non-members")
        public = _split(corpus, public, None, "public") if public is not None else None
        audited = {*mem.person_ids, *non.person_ids}
        for name, a, b in (("members and non-members", mem.person_ids, non.person_ids),
                           ("public and audited", public.person_ids if public is not None else (), audited)):
            if shared := set(a) & set(b):
                raise ToolkitError(f"{len(shared)} individuals are both {name}; splits must be disjoint by individual")
        if options is None:
            options = AttacksSection(window=window, pll_positions="all" if budget is None else budget,
                                     pll_copies=pll_copies, pii_pll_copies=pii_pll_copies or pll_copies)
        return _audit(models, out, mem, non, reference=reference, identifiers=identifiers, detector=detector, k=k,
                      n=n, dtype=dtype, device_map=device_map, window=window, seed=seed, progress=progress,
                      options=options, public=public, n_bootstrap=n_bootstrap, batch_size=batch_size,
                      cache=cache, standalone=cache is None,
                      report=report, hashed=hash_predictions, echo=echo and cache is None, on_verdicts=on_verdicts)


#: what the progress lines call the identifier analyses
WHAT = {"identifiers_members": "identifiers of the members",
        "identifiers_all": "identifiers of the members and non-members"}


def _say(text: str, *, err: bool = False) -> None:
    print(text, file=sys.stderr if err else sys.stdout, flush=True)


def _audit(models, out: Path, mem: Corpus, non: Corpus, *, reference, identifiers, detector, k, n, dtype, device_map,
           window, seed, progress, options, public, n_bootstrap, batch_size, cache, standalone, report, hashed, echo,
           on_verdicts) -> AuditResult:
    """:func:`audit_models` once the folder is locked and the documents chosen: plan every step (keys), remove what
    is stale, run the steps, report the verdicts, write the top-level files."""
    import torch

    from toolkit.audit.evaluate import corpus_word_types, membership_scores, novel_evidence
    from toolkit.audit.files import write_attack_files
    from toolkit.audit.model_audit import AuditContext, AuditSettings, audit_model, read_attack_files
    from toolkit.audit.hashing import run_key
    from toolkit.identifiers import load_identifiers
    from toolkit.pipelines import steps
    from toolkit.pipelines.audit_outputs import (hash_predictions, hashed_membership_scores, position_limit,
                                                 remove_stale)
    from toolkit.pipelines.registry import ABSENT, AttacksInputs, AuditInputs, ProbeSettings, current, key, run_step
    from toolkit.training.provenance import model_fingerprint
    from toolkit.training import corpus_fingerprint

    def step(kind: str, name: str, what: str, d: Path, inputs, compute, load):
        up_to_date = echo and current(kind, d, inputs, name)
        if echo:
            _say(f"[audit] {what}: up to date (cached)" if up_to_date else f"[audit] {what} ...")
        t0 = time.perf_counter()
        with writing(d, within=out):
            result = run_step(cache, kind, inputs, compute, load, out_dir=d, name=name)
        if echo and not up_to_date:
            _say(f"[audit] {what}: done in {time.perf_counter() - t0:.1f} s")
        return result

    # --- plan: every step's inputs and key, before anything is written
    both = Corpus(list(mem) + list(non))
    given, analyses = _identifier_plan(identifiers, detector, k, n, mem, non)
    keys = {name: key("identifiers", inputs, name) for name, (inputs, _, _) in analyses.items()}
    key_m = given["summary"]["run_key"] if given is not None else keys["identifiers_members"]
    key_a = given["summary"]["run_key"] if given is not None else keys["identifiers_all"]
    hash_key = run_key(out) if hashed else None
    data = {"identifiers_members": key_m, "identifiers_all": key_a, "members": corpus_fingerprint(mem),
            "nonmembers": corpus_fingerprint(non), "dtype": None if dtype is None else str(dtype)}
    if hash_key is not None:  # the tables' hashes depend on the key: a new key (after `purge`) makes new tables
        data["predictions"] = {"words": "keyed hash", "key": hashlib.sha256(hash_key).hexdigest()[:16]}
    method = "bootstrap" if n_bootstrap > 0 else "hanley-mcneil"

    def fingerprint(src) -> str:
        return model_fingerprint(src) if Path(src).is_dir() else str(src)

    result, plans, layout = AuditResult(out_dir=out, models={}), [], RunLayout(out)
    from toolkit.pipelines.missed_steps import load_missed, missed_inputs, missed_model, planned_detector, wants_missed

    missed_plan: dict[str, Any] = {}  # the gold identifiers the detector missed (methods.md §2.1), per label
    for src in models:
        label = model_label(src)
        while label in result.models:
            label += "+"
        src = str(Path(src).resolve()) if Path(src).exists() else str(src)
        ref = default_reference(src) if reference is None else None if reference is False else \
            str(Path(reference).resolve()) if Path(reference).exists() else str(reference)
        result.models[label], result.references[label] = src, ref
        limit = position_limit(src)
        probe_window = min(window, limit) if limit else window
        opts = replace(options, window=min(options.window, limit)) if limit else options
        if opts.window != options.window or probe_window != window:
            _say(f"[audit] {label}: window {max(window, options.window)} tokens is more than the model's {limit} "
                 f"positions: the audit uses {limit} tokens (attacks.json records both)", err=True)
        probe = ProbeSettings(max_length=probe_window, n_bootstrap=n_bootstrap, batch_size=batch_size, seed=seed,
                              base_vocabulary=corpus_fingerprint(public) if public is not None else None)
        audit_inputs = AuditInputs(model=fingerprint(src), **data, audit=probe)
        audit_step, attack_step = layout.step("audit", label), layout.step("attacks", label)
        keys[audit_step] = key("audit", audit_inputs, audit_step)
        inputs = AttacksInputs(model=audit_inputs.model, reference=fingerprint(ref) if ref else None, **data,
                               audit=keys[audit_step], attacks=opts, n_bootstrap=n_bootstrap, seed=seed,
                               public=corpus_fingerprint(public) if public is not None else ABSENT)
        keys[attack_step] = key("attacks", inputs, attack_step)
        pll, copies = getattr(opts, "pll_positions", None), getattr(opts, "pll_copies", None) or "all"
        settings = {"window": opts.window, "window_requested": options.window, "n_bootstrap": n_bootstrap,
                    "auc_ci_method": method, "pll_positions": "all" if pll is None else pll, "pll_copies": copies,
                    "pii_pll_copies": getattr(opts, "pii_pll_copies", None) or copies}
        plans.append((label, src, ref, opts, audit_inputs, inputs, settings))
        if wants_missed(planned_detector(given, analyses), mem, non):
            missed_plan[label] = missed_inputs(
                model=inputs.model, reference=inputs.reference, identifiers_members=key_m, identifiers_all=key_a,
                members=mem, nonmembers=non, fingerprints=data, options=opts, seed=seed,
                public=inputs.public or None, dtype=dtype)
            keys[layout.step("missed", label)] = key("missed", missed_plan[label], layout.step("missed", label))
    if standalone:
        removed = remove_stale(out, keys, keep=(identifiers,) if isinstance(identifiers, (str, Path)) else ())
        if echo and removed:
            _say(f"[audit] {out}: removed {len(removed)} outputs of an earlier audit ({', '.join(sorted(removed))})")

    # --- run
    ids_m, ids_a = (given, given) if given is not None else [
        step("identifiers", name, WHAT[name], d, inputs,
             lambda d=d, docs=docs, cfg=cfg: steps.identifiers(docs, d, **cfg), lambda d=d: load_identifiers(d))
        for name, (inputs, docs, cfg) in analyses.items()
        for d in [layout.identifiers(name.removeprefix("identifiers_"))]]
    vocab = corpus_word_types(public) if public is not None else None
    for label, src, ref, opts, audit_inputs, inputs, settings in plans:
        probe_kw = audit_inputs.audit.options()  # the keyed settings, seed included, as `toolkit run` passes them
        if device_map is None and torch.cuda.is_available():
            probe_kw["device"] = "cuda"
        d_audit = layout.audit(label)
        redact = (lambda frame: hash_predictions(frame, hash_key)) if hash_key is not None else None
        audit = step("audit", layout.step("audit", label), f"{label}: §4 probe (privacy, utility, count attack)",
                     d_audit, audit_inputs, lambda src=src, d=d_audit, kw=probe_kw: steps.audit_checkpoint(
                         src, mem, non, ids_m, ids_a, out_dir=d, base_vocabulary=vocab, progress=progress,
                         dtype=dtype, device_map=device_map, redact=redact, **kw),
                     lambda d=d_audit: steps.load_audit(d))
        result.audits[label] = audit
        d = layout.attacks(label)

        def attack(src=src, ref=ref, d=d, audit=audit, opts=opts, settings=settings):
            counts = (hashed_membership_scores(audit["mia_predictions"], ids_a, both, hash_key) if hash_key
                      else membership_scores(audit["mia_predictions"], ids_a, both))
            context = AuditContext(identifiers_all=ids_a, identifier_count=counts.to_dict(),
                                   novel_privacy=novel_evidence(audit["metrics"]),
                                   public_texts=[x.text for x in public] if public is not None else None,
                                   saw_neither=ref is not None and ref == src)
            res = audit_model(src, mem, non, ids_m, reference=ref, context=context, settings=AuditSettings(
                opts, n_bootstrap=n_bootstrap, seed=seed, dtype=dtype, device_map=device_map, progress=progress))
            res = res.with_settings(settings)
            res.to_files(d)
            return res.to_dict()

        def load(d=d, settings=settings):
            res = read_attack_files(d)
            merged = {**res["attacks"], **settings}
            if merged != res["attacks"]:  # e.g. the same window, asked as 100000 this time: the file says so too
                write_attack_files(d, {"attacks": merged})
            return {**res, "attacks": merged}

        result.attacks[label] = step("attacks", layout.step("attacks", label),
                                     f"{label}: membership battery, PII inference, memorisation", d, inputs, attack, load)
        if label in missed_plan:
            d_m = layout.missed(label)
            result.missed[label] = step("missed", layout.step("missed", label), f"{label}: missed gold identifiers",
                                        d_m, missed_plan[label], lambda src=src, ref=ref, d=d_m, opts=opts: missed_model(
                                            src, mem, non, ids_m, ids_a, out_dir=d, reference=ref, options=opts,
                                            regurgitation=missed_plan[label].regurgitation, seed=seed, dtype=dtype,
                                            public_texts=[x.text for x in public] if public is not None else None,
                                            device_map=device_map, hash_key=run_key(out), progress=progress),
                                        lambda d=d_m: load_missed(d))
    if on_verdicts is not None:
        on_verdicts(result)
    result.save(report=report)
    return result


def audit_config(cfg, data: ExperimentData, out_dir: str | Path, *, cache=None, progress: bool = True) -> AuditResult:
    """The audit-only path of :func:`toolkit.pipelines.lm_experiment.run_experiment`: ``cfg.models`` audited on the
    config's members and non-members (``data`` from ``load_data``), identifiers, attacks and bootstrap as the config
    says, the public split (when the corpus has it) defining novel identifiers. No ``report.html`` (``python -m
    toolkit report RUN_DIR`` makes it)."""
    return audit_models(cfg.models, data.corpus, members=data.members, nonmembers=data.nonmembers,
                        reference=cfg.audit.reference, identifiers=cfg.identifiers, out_dir=out_dir,
                        window=cfg.audit.max_length, seed=cfg.seed, progress=progress, options=cfg.audit.attacks,
                        public=data.public, n_bootstrap=cfg.audit.n_bootstrap, batch_size=cfg.audit.batch_size,
                        cache=cache, report=False, hash_predictions=False)


__all__ = ["AuditResult", "RESERVED", "WHAT", "audit_config", "audit_models", "check_options", "default_reference",
           "model_label"]
