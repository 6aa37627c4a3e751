"""The ``missed/…`` steps: the gold identifiers the detector missed and what each audited model does with them
(:mod:`toolkit.audit.missed`, methods.md §2.1), for ``toolkit run`` (:func:`run_missed`: the base model and every
strategy's last checkpoint, as the attack steps) and ``toolkit audit`` (:func:`missed_inputs`, run by
:mod:`toolkit.pipelines.audit_only`).

Planned only where something can be missed (:func:`wants_missed`): the audited documents carry gold spans and the
detector is not, or does not include, the gold spans themselves (``oracle``). A run with the ``oracle`` detector, as
the shipped configs, plans no such step, so its step plan and keys — and the pre-built results keyed by them — are
those it had before the step existed.

Layout: ``missed/base/``, ``missed/<strategy>/epoch-<N>/``, ``missed/<label>/`` (:class:`~toolkit.results.layout.
RunLayout`), each with ``missed.json`` (hashed values, categories and counts only) and ``step.json``. The key covers
the model, its reference, both identifier steps, the documents and their gold spans, the attack settings, the
regurgitation settings, the seed and the public split.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from toolkit.corpus import Corpus


def wants_missed(detector: str | None, *corpora: Corpus) -> bool:
    """True when a missed step belongs in the plan: gold spans in ``corpora`` and a ``detector`` that is not the gold
    spans (:func:`toolkit.audit.missed.detector_uses_gold`)."""
    from toolkit.audit.missed import detector_uses_gold, has_gold_spans

    return detector is not None and not detector_uses_gold(detector) and has_gold_spans(*corpora)


def missed_model(model: str | Path, members: Corpus, nonmembers: Corpus, identifiers: dict[str, Any],
                 identifiers_all: dict[str, Any], *, out_dir: str | Path, reference: str | Path | None = None,
                 options=None, regurgitation=None, public_texts=None, seed: int = 0, dtype=None, device_map=None,
                 hash_key: bytes | None = None, progress: bool = False) -> dict[str, Any]:
    """:func:`toolkit.audit.missed.missed_audit` of ``model`` (the members' protected positions from
    ``identifiers``, the non-members' from ``identifiers_all``; PII inference with the ``options``
    (:class:`~toolkit.config.sections.AttacksSection`) the attack step uses; regurgitation with the
    ``regurgitation`` settings, causal models only; values hashed under ``hash_key``, by default the run's active
    key), written as ``out_dir/missed.json`` and returned."""
    from toolkit.audit.missed import missed_audit
    from toolkit.config.sections import AttacksSection
    from toolkit.io import atomic_write_json, make_private_dir
    from toolkit.audit.model_audit import load_models

    opt = options or AttacksSection()
    copies = getattr(opt, "pii_pll_copies", None)
    copies = getattr(opt, "pll_copies", None) if copies is None else copies
    out = make_private_dir(out_dir)
    (f, tok), ref = load_models(model, reference, dtype=dtype, device_map=device_map)
    res = missed_audit(f, tok, members, nonmembers, identifiers["positions"], identifiers_all["positions"],
                       reference=ref, reference_name=str(reference) if reference is not None else None,
                       public_texts=public_texts, n_candidates=opt.pii_candidates,
                       max_occurrences=opt.pii_occurrences, window=opt.pii_window, seed=seed,
                       batch_size=opt.batch_size, pll_copies=copies,
                       regurgitation=asdict(regurgitation) if regurgitation is not None else None, hash_key=hash_key,
                       progress=progress)
    atomic_write_json(res, out / "missed.json")
    return res


def load_missed(out_dir: str | Path) -> dict[str, Any]:
    """What :func:`missed_model` wrote into ``out_dir``."""
    from toolkit.results.layout import read_json

    return read_json(Path(out_dir) / "missed.json")


def planned_detector(given: dict | None, analyses: dict) -> str | None:
    """The detector of ``toolkit audit``'s identifiers: a given folder's (its ``summary.json``), else the settings
    of the analyses it makes (:func:`toolkit.pipelines.audit_only._identifier_plan`'s two results)."""
    if given is not None:
        return (given.get("summary", {}).get("config") or {}).get("detector")
    return next(iter(analyses.values()))[2]["detector"] if analyses else None


def missed_inputs(*, model, reference, identifiers_members: str, identifiers_all: str, members: Corpus,
                  nonmembers: Corpus, fingerprints: dict, options, seed: int, regurgitation: Any = "default",
                  epoch=None, public=None, canaries=None, dtype=None):
    """The step's :class:`~toolkit.pipelines.registry.MissedInputs` (``fingerprints``: ``members`` and
    ``nonmembers``; ``public``: the public split's fingerprint; ``regurgitation``: a RegurgitationSection, None
    (not measured) or ``"default"``: the section's defaults, ``toolkit audit``'s)."""
    from toolkit.audit.missed import gold_fingerprint
    from toolkit.config.sections import RegurgitationSection
    from toolkit.pipelines.registry import ABSENT, MissedInputs

    regurgitation = RegurgitationSection() if isinstance(regurgitation, str) else regurgitation

    return MissedInputs(model=model, epoch=ABSENT if epoch is None else epoch, reference=reference,
                        identifiers_members=identifiers_members, identifiers_all=identifiers_all,
                        members=fingerprints["members"], nonmembers=fingerprints["nonmembers"],
                        gold=gold_fingerprint(Corpus(list(members) + list(nonmembers))), attacks=options,
                        regurgitation=regurgitation, seed=seed, public=ABSENT if public is None else public,
                        canaries=ABSENT if canaries is None else canaries,
                        dtype=ABSENT if dtype is None else str(dtype))


def run_missed(cfg, cache, run_dir: Path, *, data, tables: dict[str, dict], checkpoints: dict, train_keys: dict,
               base, base_key, canary_key, identifier_keys: dict[str, str], fingerprints: dict,
               progress: bool = True) -> dict:
    """The ``missed/…`` steps of ``toolkit run`` (module docstring): ``(name, epoch) → missed.json``'s dict; empty
    when :func:`wants_missed` says none belongs in the plan or the attacks are off."""
    from toolkit.audit.attacks.one_run import without_canaries
    from toolkit.pipelines.registry import run_step
    from toolkit.results.layout import RunLayout

    opts = cfg.audit.attacks
    if not opts.enabled or not wants_missed(cfg.identifiers.detector, data.members, data.nonmembers):
        return {}
    members, ids = data.members, tables["members"]
    if data.one_run_canaries is not None:  # as the attack steps: the one-run audit's records cut out
        members, ids = without_canaries(members, data.one_run_canaries, ids)
    targets = [("base", 0, base, base_key, None)] if cfg.audit.base_model else []
    targets += [(n, c[-1][0], c[-1][1], train_keys[n], base) for n, c in checkpoints.items() if c]
    public = [x.text for x in data.public] if data.public is not None else None
    layout, out = RunLayout(run_dir), {}
    for name, epoch, path, key, ref in targets:
        d = layout.missed(name, epoch)
        inputs = missed_inputs(model=key, reference=base_key if ref is not None else None,
                               identifiers_members=identifier_keys["members"], identifiers_all=identifier_keys["all"],
                               members=data.members, nonmembers=data.nonmembers, fingerprints=fingerprints,
                               options=opts, regurgitation=cfg.audit.regurgitation, seed=cfg.seed,
                               epoch=None if name == "base" else epoch, public=fingerprints.get("public"),
                               canaries=canary_key)
        out[(name, epoch)] = run_step(
            cache, "missed", inputs,
            lambda path=path, ref=ref, d=d: missed_model(
                path, members, data.nonmembers, ids, tables["all"], out_dir=d, reference=ref, options=opts,
                regurgitation=cfg.audit.regurgitation, public_texts=public, seed=cfg.seed, progress=progress),
            lambda d=d: load_missed(d), out_dir=d, name=layout.step("missed", name, epoch))
    return out


__all__ = ["load_missed", "missed_inputs", "missed_model", "planned_detector", "run_missed", "wants_missed"]
