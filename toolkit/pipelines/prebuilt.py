"""Pre-built tiny base models (``make prebuilt``): the ``base`` step of an experiment run ahead of time and kept
under ``model.prebuilt`` in a sub-folder named by the step's key, so that a workshop's first run copies it instead of
pre-training: the quick start's base (notebook 00, 4 MB, about 40 s of CPU saved), the masked-LM experiment's
(notebook 02, ``configs/cpu_masked.yaml``: about 3 min) and the causal-LM experiment's (notebook 03,
``configs/cpu_causal.yaml``: about 3.3 min), 4 MB each.

The cache rule makes this safe: the key is a hash of the base's inputs (architecture, pre-training schedule, the
public split's fingerprint), so a copy is used only by a run that would have built exactly this base; a changed
config or corpus builds its own. Regenerate after changing a config's model or the sample data:

    python -m toolkit.pipelines.prebuilt configs/quickstart.yaml configs/cpu_masked.yaml configs/cpu_causal.yaml

``--from-run RUN_DIR`` copies the base of a finished run of the same config instead of building it again; it is taken
only when its step key is this config's.
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


def build_prebuilt(config, *, progress: bool = True, from_run: str | Path | None = None) -> Path:
    """Build the tiny base of ``config`` (a path or a name in ``configs/``) into its ``model.prebuilt`` folder, or
    copy it from the run directory ``from_run`` when that run's base has the same key; returns the sub-folder (one
    that already holds a finished base of this key is kept: nothing to do)."""
    from toolkit.config.experiment import load_experiment, resolved_settings
    from toolkit.pipelines import registry
    from toolkit.pipelines.cache import StepCache, is_current
    from toolkit.pipelines.lm_experiment import base_step, load_data, tiny_base_inputs
    from toolkit.pipelines.manifest import Manifest
    from toolkit.training import corpus_fingerprint

    cfg = load_experiment(config)
    if cfg.model.prebuilt is None:
        raise ToolkitError(f"{cfg.source}: model.prebuilt names no folder to build into")
    settings = resolved_settings(cfg)
    if isinstance(settings["base"], str):
        raise ToolkitError(f"{cfg.source}: the base is a pre-trained model ({settings['base']}), not a tiny base")
    data = load_data(cfg)
    key = registry.key("base", tiny_base_inputs(settings, corpus_fingerprint(data.public)))
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


def _ship(base_dir: Path, target: Path) -> None:
    """Copy a finished base into ``target`` (through a temporary sibling, then renamed), readable by everyone (it is
    a repository file, trained on synthetic data only), its ``step.json`` without this machine's times."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        shutil.copytree(base_dir, staging, dirs_exist_ok=True)
        step = json.loads((staging / "step.json").read_text(encoding="utf-8"))
        # the step record is kept (the key and inputs are what a run checks), without this machine's times
        (staging / "step.json").write_text(json.dumps({k: v for k, v in step.items() if k not in (
            "started", "finished", "seconds")}, indent=1, sort_keys=True) + "\n", encoding="utf-8")
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
    ap.add_argument("configs", nargs="+", help="experiment YAML files or names in configs/ (quickstart, ...)")
    ap.add_argument("--from-run", metavar="RUN_DIR",
                    help="copy the base of this finished run (`toolkit run CONFIG --out RUN_DIR`) when its key is "
                         "the config's, instead of building it")
    args = ap.parse_args(argv)
    try:
        for c in args.configs:
            path = build_prebuilt(c, from_run=args.from_run)
            size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
            print(f"{c}: {path} ({size / 1e6:.1f} MB)")
    except ToolkitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
