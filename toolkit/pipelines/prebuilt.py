"""Pre-built steps of the shipped configs (``make prebuilt``): the tiny base model and RMIA's reference models of an
experiment run ahead of time and kept under ``model.prebuilt``, each in a sub-folder named by its step's key, so that a
workshop's first run copies them instead of training them: the quick start's (notebook 00, about 40 s of CPU for the
base and 40 s for the reference model saved), the masked-LM experiment's (notebook 02, ``configs/cpu_masked.yaml``:
about 3 min and 1 min) and the causal-LM experiment's (notebook 03, ``configs/cpu_causal.yaml``: about 3.3 min and
1 min), 4 MB a model.

The cache rule makes this safe: the key is a hash of the step's inputs (the base's architecture, pre-training schedule
and the public split's fingerprint; the reference models' base key, schedule, seed, count and the public split's
fingerprint), so a copy is used only by a run that would have built exactly it; a changed config or corpus builds its
own. Neither depends on a member: RMIA's reference models are trained on halves of the public split
(:mod:`toolkit.pipelines.reference_models`). Regenerate after changing a config's model or the sample data:

    python -m toolkit.pipelines.prebuilt configs/quickstart.yaml configs/cpu_masked.yaml configs/cpu_causal.yaml
    python -m toolkit email-base --profile cpu --into prebuilt

``--from-run RUN_DIR`` copies the steps of a finished run of the same config instead of building them; each is taken
only when its step key is this config's. Two models outside an experiment config are shipped the same way: notebook
04's tiny e-mail base (``python -m toolkit email-base``: pre-trained on the sample generator's public messages,
about 2 min of CPU; :func:`build_prebuilt_email`) and
notebook 05's masked LM trained from scratch on the NER-anonymised sample (``--ship
outputs/work/05_vocabulary_scrubbing/model`` after the notebook ran: about 3.5 min of CPU). ``tests/test_prebuilt.py``
fails when a shipped folder is no longer the current key of its config or notebook.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from toolkit.errors import ToolkitError


def build_prebuilt(config, *, progress: bool = True, from_run: str | Path | None = None,
                   overrides: dict | None = None, references: bool = True) -> Path:
    """Build the tiny base of ``config`` (a path or a name in ``configs/``) into its ``model.prebuilt`` folder, or
    copy it from the run directory ``from_run`` when that run's base has the same key, then RMIA's reference models
    likewise (:func:`build_prebuilt_references`; not with ``references=False``); returns the base's sub-folder (one
    that already holds a finished base of this key is kept: nothing to do)."""
    base = _build_base(config, progress=progress, from_run=from_run)
    if references:
        build_prebuilt_references(config, base, progress=progress, from_run=from_run, overrides=overrides)
    return base


def references_plan(config, base: Path, overrides: dict | None = None):
    """``(cfg, plan)``: the experiment (with the dotted-key ``overrides`` a notebook applies, e.g.
    ``{"corpus.n_individuals": 12}`` — the reference models train on as many public individuals as there are
    members) and its ``rmia_references`` step
    (:func:`~toolkit.pipelines.reference_models.reference_models_plan`: folder, inputs, split, training arguments)
    with ``base`` as the base model, or ``(cfg, None)`` when the config trains no reference model."""
    from toolkit.config.experiment import load_experiment
    from toolkit.pipelines.lm_experiment import load_data
    from toolkit.pipelines.reference_models import reference_models_plan
    from toolkit.training import corpus_fingerprint

    cfg = load_experiment(config, overrides)
    data = load_data(cfg)
    if cfg.training is None or not cfg.audit.attacks.enabled:
        return cfg, None
    public = corpus_fingerprint(data.public) if data.public is not None else None
    return cfg, reference_models_plan(cfg, Path(tempfile.gettempdir()), public=data.public, base=base,
                                      base_key=_base_key(cfg, data), public_fingerprint=public,
                                      n_train=len(set(data.members.person_ids)), progress=False)


def build_prebuilt_references(config, base: Path, *, progress: bool = True, from_run: str | Path | None = None,
                              overrides: dict | None = None) -> Path | None:
    """RMIA's reference models of ``config`` (fine-tuned from ``base``, the config's own base) into its
    ``model.prebuilt`` folder — built, or copied from ``from_run``'s ``rmia_references`` when its key is the
    config's — without the trainer's resume state; None when the config trains none."""
    from toolkit.pipelines import registry
    from toolkit.pipelines.cache import is_current
    from toolkit.pipelines.reference_models import train_references

    cfg, plan = references_plan(config, base, overrides)
    if plan is None:
        return None
    _, inputs, _, kwargs = plan
    key = registry.key("rmia_references", inputs)
    check = registry.STEPS["rmia_references"].check
    target = Path(cfg.model.prebuilt) / key
    if is_current(target, key, check):
        return target
    if from_run is not None:
        source = Path(from_run) / "rmia_references"
        if not is_current(source, key, check):
            raise ToolkitError(f"{source}: no finished reference models of this config's key {key[:12]}… (another "
                               "config, corpus or schedule, or still running): build them without --from-run")
        _ship(source, target, base=base.name)
        return target
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rmia_references"
        registry.run_step(None, "rmia_references", inputs,
                          lambda: train_references(**{**kwargs, "out_dir": out, "progress": progress}), out_dir=out)
        _ship(out, target, base=base.name)
    return target


def email_base_key(profile, public) -> str:
    """The step key of notebook 04's tiny e-mail base under ``profile`` (a name or a
    :class:`~toolkit.config.Profile`), pre-trained on ``public`` (notebook 04's synthetic public messages:
    ``toolkit.samples.email.public_email_corpus(email.public_documents)``) — the key
    :func:`~toolkit.pipelines.email_extraction.ensure_email_base` caches under; a :class:`ToolkitError` when the
    profile names a pre-trained base instead."""
    from toolkit.config import load_profile
    from toolkit.config.email import EmailProfile
    from toolkit.pipelines import registry
    from toolkit.pipelines.email_extraction import email_base_spec, tiny_email_base_inputs

    prof = load_profile(profile) if isinstance(profile, str) else profile
    email = prof.email or EmailProfile()
    spec = email_base_spec(email, prof)
    if isinstance(spec, str):
        raise ToolkitError(f"profile {getattr(prof, 'name', profile)!r}: the e-mail base is a pre-trained model "
                           f"({spec}), not a tiny base")
    return registry.key("base", tiny_email_base_inputs(spec, email, public))


def build_prebuilt_email(profile, folder: str | Path, public, *, progress: bool = True,
                         from_dir: str | Path | None = None) -> Path:
    """Notebook 04's tiny e-mail base (:func:`email_base_key`) into ``folder/<key>``: built, or copied from
    ``from_dir`` (a finished ``base_clm`` of notebook 04's work folder) when its key is this one. The command line:
    ``python -m toolkit email-base`` (the public messages are the sample generator's)."""
    from toolkit.config import load_profile
    from toolkit.config.email import EmailProfile
    from toolkit.pipelines.cache import is_current
    from toolkit.pipelines.email_extraction import ensure_email_base

    prof = load_profile(profile) if isinstance(profile, str) else profile
    key = email_base_key(prof, public)
    target = Path(folder) / key
    if is_current(target, key, "config.json"):
        return target
    if from_dir is not None:
        if not is_current(from_dir, key, "config.json"):
            raise ToolkitError(f"{from_dir}: no finished e-mail base of key {key[:12]}… (other parameters or code, or "
                               "still running): build it without --copy-from")
        _ship(Path(from_dir), target)
        return target
    with tempfile.TemporaryDirectory() as tmp:
        out = ensure_email_base(Path(tmp) / "base_clm", public, prof.email or EmailProfile(), prof, progress=progress)
        _ship(Path(out), target)
    return target


def ship_step(step_dir: str | Path, folder: str | Path) -> Path:
    """A finished step's folder (e.g. notebook 05's model trained from scratch, ``outputs/work/05_…/model``) copied
    into ``folder/<its key>`` as :func:`build_prebuilt` ships (no machine times or paths); a run with other inputs never
    picks it up. A :class:`ToolkitError` for a folder that holds no finished step."""
    from toolkit.pipelines.cache import read_step

    info = read_step(step_dir)
    if not info or info.get("status") != "done" or not info.get("key"):
        raise ToolkitError(f"{step_dir}: no finished step (its step.json says none is done)")
    target = Path(folder) / info["key"]
    _ship(Path(step_dir), target)
    return target


def _base_key(cfg, data) -> str:
    """The ``base`` step's key of the experiment ``cfg``'s tiny base (its settings and ``data``'s public split)."""
    from toolkit.config.experiment import resolved_settings
    from toolkit.pipelines import registry
    from toolkit.pipelines.lm_experiment import tiny_base_inputs
    from toolkit.training import corpus_fingerprint

    return registry.key("base", tiny_base_inputs(resolved_settings(cfg), corpus_fingerprint(data.public)))


def _build_base(config, *, progress: bool = True, from_run: str | Path | None = None) -> Path:
    from toolkit.config.experiment import load_experiment, resolved_settings
    from toolkit.pipelines.cache import StepCache, is_current
    from toolkit.pipelines.lm_experiment import base_step, load_data
    from toolkit.pipelines.manifest import Manifest
    from toolkit.training import corpus_fingerprint

    cfg = load_experiment(config)
    if cfg.model.prebuilt is None:
        raise ToolkitError(f"{cfg.source}: model.prebuilt names no folder to build into")
    settings = resolved_settings(cfg)
    if isinstance(settings["base"], str):
        raise ToolkitError(f"{cfg.source}: the base is a pre-trained model ({settings['base']}), not a tiny base")
    data = load_data(cfg)
    key = _base_key(cfg, data)
    target = Path(cfg.model.prebuilt) / key
    if is_current(target, key, "config.json"):
        return target
    if from_run is not None:
        source = Path(from_run) / f"base_{cfg.model.kind}"
        if not is_current(source, key, "config.json"):
            raise ToolkitError(f"{source}: no finished base of this config's key {key[:12]}… (another config, "
                               f"corpus or schedule, or still running): build it without --from-run")
        _ship(source, target)
        return target
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp)
        cache = StepCache(Manifest(run_dir, cfg, settings), echo=progress)
        base_dir, built_key = base_step(cfg, settings, data, {"public": corpus_fingerprint(data.public)}, run_dir,
                                        cache, cache.manifest, progress=progress)
        if built_key != key:  # pragma: no cover - base_step and this function hash the same inputs
            raise ToolkitError(f"{cfg.source}: the base step's key changed while building")
        _ship(base_dir, target)
    return target


#: what a shipped copy leaves out: machine times of the records, and the trainer's resume state of finished models
_MACHINE_TIMES = ("started", "finished", "seconds", "train_seconds", "tokens_per_second")


def _ship(base_dir: Path, target: Path, *, base: str | None = None) -> None:
    """Copy a finished step's folder into ``target`` (through a temporary sibling, then renamed), readable by
    everyone (it is a repository file, trained on synthetic data only), its ``step.json`` without this machine's
    times; a folder of training runs (RMIA's reference models) also without each run's ``trainer/`` resume state,
    its ``run.json`` without times and naming its ``base`` as the sibling folder of that name (no machine path)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        shutil.copytree(base_dir, staging, dirs_exist_ok=True,
                        ignore=lambda d, names: ["trainer"] if (Path(d) / "run.json").is_file() else [])
        step = json.loads((staging / "step.json").read_text(encoding="utf-8"))
        # the step record is kept (the key and inputs are what a run checks), without this machine's times
        (staging / "step.json").write_text(json.dumps({k: v for k, v in step.items() if k not in _MACHINE_TIMES},
                                                      indent=1, sort_keys=True) + "\n", encoding="utf-8")
        for run in staging.glob("*/run.json"):
            info = {k: v for k, v in json.loads(run.read_text(encoding="utf-8")).items() if k not in _MACHINE_TIMES}
            if base is not None:
                info["base"] = f"../{base}"
            run.write_text(json.dumps(info, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        for dirpath, _, filenames in os.walk(staging):
            os.chmod(dirpath, 0o755)
            for name in filenames:
                os.chmod(os.path.join(dirpath, name), 0o644)
        if target.exists():  # an unfinished or stale copy of this key
            shutil.rmtree(target)
        staging.rename(target)
    finally:
        if staging.exists():
            shutil.rmtree(staging)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m toolkit.pipelines.prebuilt", description=__doc__.splitlines()[0])
    ap.add_argument("configs", nargs="*", help="experiment YAML files or names in configs/ (quickstart, ...)")
    ap.add_argument("--from-run", metavar="RUN_DIR",
                    help="copy the base and RMIA's reference models of this finished run (`toolkit run CONFIG --out "
                         "RUN_DIR`) when their keys are the config's, instead of building them")
    ap.add_argument("--ship", metavar="STEP_DIR", action="append", default=[],
                    help="copy this finished step's folder into --into under its key (notebook 05's model: "
                         "outputs/work/05_vocabulary_scrubbing/model after the notebook ran)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a config value as a notebook sets it, for the reference models (make demo's "
                         "corpus.n_individuals: notebooks/demo.yaml)")
    ap.add_argument("--into", default="prebuilt", help="the folder of --ship (default: prebuilt)")
    args = ap.parse_args(argv)
    from toolkit.config.experiment import parse_overrides
    from toolkit.threads import use_cores

    use_cores()  # every core, OpenMP waiting passively (as `toolkit run`): torch's defaults spin on a shared machine
    try:
        overrides = parse_overrides(args.set) if args.set else None
        for step_dir in args.ship:
            print(f"{step_dir}: {ship_step(step_dir, args.into)}")
        for c in args.configs:
            path = _build_base(c, from_run=args.from_run)
            refs = build_prebuilt_references(c, path, from_run=args.from_run, overrides=overrides)
            for what, p in (("base", path), ("RMIA reference models", refs)):
                if p is not None:
                    size = sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
                    print(f"{c}: {what} {p} ({size / 1e6:.1f} MB)")
    except ToolkitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
