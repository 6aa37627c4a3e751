"""Audit any model with the strongest known attacks, without training (methods.md §10–11): ``python -m toolkit audit``
and experiment configs with ``models:`` instead of ``training:``.

Every model — a Hugging Face id or directory, masked or causal — is audited on the members (its training data) and
non-members of a corpus:

1. the §4 probe, fill-mask or teacher-forced next word from the architecture
   (:func:`toolkit.pipelines.steps.audit_checkpoint`): privacy, novel privacy (with a ``public`` corpus) and the
   papers' ``identifier_count`` membership scores;
2. the attacks (:func:`toolkit.pipelines.steps.attack_model`): the membership battery (loss, zlib, Min-K%,
   Min-K%++, reference, identifier_count), PII inference (and the reference's), memorisation of identifier types
   (with a reference model) and the traffic-light verdict.

The reference model is the one given, else the base named by the checkpoint's training record (``run.json`` of the
model directory or of the run directory holding an ``epoch-N`` checkpoint; ``training_log.json``), else none.
Every step is cached by the one cache rule (:mod:`toolkit.pipelines.cache`). Layout of ``out_dir``::

    identifiers_members/ identifiers_all/      identifier analyses (when made here from a detector, k, n)
    audit/<label>/                             metrics.json, roc.json, predictions.parquet (the §4 probe)
    <label>/                                   attacks.json, roc.json, scores.parquet, identifiers.json, verdict.json
    attacks.json identifiers.json verdicts.json report.html

(``attacks.json`` / ``identifiers.json``: the model's own for one model, ``{label: …}`` for several.)
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from toolkit.config.sections import AttacksSection
from toolkit.corpus import Corpus
from toolkit.errors import ToolkitError

#: folder names of ``out_dir`` that a model label may not take
RESERVED = {"audit", "attacks", "identifiers_members", "identifiers_all", "runs", "regurgitation"}
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
    (:func:`~toolkit.pipelines.steps.load_attacks`'s keys, ``verdict`` included)."""

    out_dir: Path
    models: dict[str, str]
    references: dict[str, str | None] = field(default_factory=dict)
    audits: dict[str, dict[str, Any]] = field(default_factory=dict)
    attacks: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def verdicts(self) -> dict[str, dict[str, Any]]:
        """``label → Verdict.to_dict()``."""
        return {label: a["verdict"] for label, a in self.attacks.items()}

    def lines(self) -> list[str]:
        """One line per model: ``MODEL: VERDICT — rule (attack, figure)`` (a green verdict: its statement)."""
        out = []
        for label, v in self.verdicts.items():
            if v["level"] == "green":
                out.append(f"{self.models[label]}: green — {v['statement']}")
            else:
                detail = ", ".join(x for x in (v.get("attack"), v.get("figure")) if x)
                out.append(f"{self.models[label]}: {v['level']} — {v['rule']}" + (f" ({detail})" if detail else ""))
        return out

    def save(self, report: bool = True) -> dict[str, Path]:
        """Write ``attacks.json``, ``identifiers.json``, ``verdicts.json`` and (``report``) ``report.html`` into
        ``out_dir`` (the per-model folders are written by the steps)."""
        from toolkit.io import atomic_write_json

        one = len(self.attacks) == 1
        att = {label: a["attacks"] for label, a in self.attacks.items()}
        ids = {label: a["identifiers"] for label, a in self.attacks.items()}
        out = {"attacks": atomic_write_json(next(iter(att.values())) if one else att, self.out_dir / "attacks.json"),
               "identifiers": atomic_write_json(next(iter(ids.values())) if one else ids,
                                                self.out_dir / "identifiers.json"),
               "verdicts": atomic_write_json(self.verdicts, self.out_dir / "verdicts.json")}
        if report:
            from toolkit.report import build_report

            out["report"] = build_report([self.out_dir], self.out_dir / "report.html")
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


def _identifier_tables(identifiers, detector, k, n, members: Corpus, nonmembers: Corpus, out: Path,
                       run) -> tuple[dict, dict, str, str]:
    """``(ids_members, ids_all, key_members, key_all)``: a given identifiers folder (checked to cover every audited
    document), or the analyses of members and members ∪ non-members made here (cached)."""
    from toolkit.identifiers import IdentifierConfig, load_identifiers
    from toolkit.identifiers.storage import check_coverage
    from toolkit.pipelines import steps
    from toolkit.pipelines.cache import step_key
    from toolkit.training import corpus_fingerprint

    if isinstance(identifiers, (str, Path)):
        tables = load_identifiers(identifiers)
        check_coverage(list(members) + list(nonmembers), tables["positions"], table="positions")
        key = tables["summary"]["run_key"]
        return tables, tables, key, key
    if isinstance(identifiers, IdentifierConfig):
        cfg = identifiers
    elif detector is not None:
        cfg = IdentifierConfig(detector=detector, k=k, n=n)
    else:
        raise ToolkitError("name the identifiers: a folder made by `python -m toolkit identifiers`, or a detector "
                           "(with k and n) to analyse the audited documents")
    id_cfg = {**asdict(cfg), "spacy_labels": list(cfg.spacy_labels)}
    got, keys = [], []
    for part, docs in (("members", members), ("all", Corpus(list(members) + list(nonmembers)))):
        inputs = {"identifiers": id_cfg, "documents": corpus_fingerprint(docs)}
        d = out / f"identifiers_{part}"
        got.append(run(f"identifiers_{part}", d, inputs, lambda d=d, docs=docs: steps.identifiers(docs, d, **id_cfg),
                       lambda d=d: load_identifiers(d), check="summary.json"))
        keys.append(step_key(f"identifiers_{part}", inputs))
    return got[0], got[1], keys[0], keys[1]


def audit_models(models: str | Path | Sequence[str | Path], corpus, *, members, nonmembers, reference=None,
                 identifiers=None, detector: str | None = None, k: int = 2, n: int = 1, out_dir: str | Path,
                 dtype=None, device_map=None, window: int = 256, n_individuals: int | None = None, seed: int = 0,
                 progress: bool = True, options: AttacksSection | None = None, public: Corpus | None = None,
                 n_bootstrap: int = 1000, batch_size: int = 32, cache=None, report: bool = True) -> AuditResult:
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
        Probe window and (without ``options``) the membership attacks' window, in tokens.
    options : AttacksSection, optional
        The attacks' sample sizes (:class:`~toolkit.config.sections.AttacksSection`).
    public : Corpus, optional
        The base model's training data, for *novel* identifiers (methods.md §4).
    cache : StepCache, optional
        Records the steps in a run's manifest (``run_experiment``); default
        :func:`~toolkit.pipelines.cache.cached_step`.
    report : bool
        Also write ``report.html`` (:func:`toolkit.report.build_report`).
    """
    import torch

    from toolkit.audit.evaluate import corpus_word_types, membership_scores
    from toolkit.corpus import load_corpus
    from toolkit.io import make_private_dir
    from toolkit.pipelines import steps
    from toolkit.pipelines.cache import cached_step, step_key
    from toolkit.pipelines.manifest import model_fingerprint
    from toolkit.training import corpus_fingerprint

    models = [models] if isinstance(models, (str, Path)) else list(models)
    if not models:
        raise ToolkitError("no model to audit")
    missing = [str(m) for m in models if str(m).startswith((".", "/", "~")) and not Path(m).expanduser().exists()]
    if missing:
        raise ToolkitError(f"model directory not found: {', '.join(missing)}")
    out = make_private_dir(out_dir)
    run = cache.run if cache is not None else cached_step
    if not isinstance(corpus, Corpus):
        corpus = load_corpus(corpus)
    mem = _split(corpus, members, n_individuals, "members")
    non = _split(corpus, nonmembers, n_individuals, "non-members")
    shared = set(mem.person_ids) & set(non.person_ids)
    if shared:
        raise ToolkitError(f"{len(shared)} individuals are both members and non-members; splits must be disjoint by "
                           "individual")
    both = Corpus(list(mem) + list(non))
    opts = options or AttacksSection(window=window)
    ids_m, ids_a, key_m, key_a = _identifier_tables(identifiers, detector, k, n, mem, non, out, run)
    vocab = corpus_word_types(public) if public is not None else None
    data = {"identifiers_members": key_m, "identifiers_all": key_a, "members": corpus_fingerprint(mem),
            "nonmembers": corpus_fingerprint(non), "dtype": None if dtype is None else str(dtype)}
    audit_opts = {"max_length": window, "n_bootstrap": n_bootstrap, "batch_size": batch_size, "seed": seed,
                  "base_vocabulary": corpus_fingerprint(public) if public is not None else None}

    def fingerprint(src) -> str:
        return model_fingerprint(src) if Path(src).is_dir() else str(src)

    result = AuditResult(out_dir=out, models={})
    for src in models:
        label = model_label(src)
        while label in result.models:
            label += "+"
        src = str(Path(src).resolve()) if Path(src).exists() else str(src)
        ref = default_reference(src) if reference is None else None if reference is False else \
            str(Path(reference).resolve()) if Path(reference).exists() else str(reference)
        result.models[label], result.references[label] = src, ref
        model_key = fingerprint(src)
        probe_kw = {"batch_size": batch_size, "seed": seed}
        if device_map is None and torch.cuda.is_available():
            probe_kw["device"] = "cuda"
        d_audit = out / "audit" / label
        audit_inputs = {"model": model_key, **data, "audit": audit_opts}
        audit = run(f"audit/{label}", d_audit, audit_inputs,
                    lambda src=src, d=d_audit: steps.audit_checkpoint(
                        src, mem, non, ids_m, ids_a, out_dir=d, base_vocabulary=vocab, max_length=window,
                        n_bootstrap=n_bootstrap, progress=progress, dtype=dtype, device_map=device_map, **probe_kw),
                    lambda d=d_audit: steps.load_audit(d), check="metrics.json")
        result.audits[label] = audit
        d = out / label
        inputs = {"model": model_key, "reference": fingerprint(ref) if ref else None, **data,
                  "audit": step_key(f"audit/{label}", audit_inputs), "attacks": asdict(opts),
                  "n_bootstrap": n_bootstrap, "seed": seed}

        def attack(src=src, ref=ref, d=d, audit=audit):
            counts = membership_scores(audit["mia_predictions"], ids_a, both)
            return steps.attack_model(src, mem, non, ids_m, out_dir=d, reference=ref,
                                      identifier_count=counts.to_dict(),
                                      novel_privacy=audit["metrics"].get("novel_privacy"), options=opts,
                                      n_bootstrap=n_bootstrap, seed=seed, dtype=dtype, device_map=device_map,
                                      progress=progress)

        result.attacks[label] = run(f"attacks/{label}", d, inputs, attack, lambda d=d: steps.load_attacks(d),
                                    check="verdict.json")
    result.save(report=report)
    return result


def audit_config(cfg, data: dict[str, Any], out_dir: str | Path, *, cache=None, progress: bool = True) -> AuditResult:
    """The audit-only path of :func:`toolkit.pipelines.lm_experiment.run_experiment`: ``cfg.models`` audited on the
    config's members and non-members (``data`` from ``load_data``), identifiers, attacks and bootstrap as the config
    says, the public split (when the corpus has it) defining novel identifiers. No ``report.html`` (``python -m
    toolkit report RUN_DIR`` makes it)."""
    return audit_models(cfg.models, data["corpus"], members=data["members"], nonmembers=data["nonmembers"],
                        reference=cfg.audit.reference, identifiers=cfg.identifiers, out_dir=out_dir,
                        window=cfg.audit.max_length, seed=cfg.seed, progress=progress, options=cfg.audit.attacks,
                        public=data.get("public"), n_bootstrap=cfg.audit.n_bootstrap,
                        batch_size=cfg.audit.batch_size, cache=cache, report=False)


__all__ = ["AuditResult", "RESERVED", "audit_config", "audit_models", "default_reference", "model_label"]
