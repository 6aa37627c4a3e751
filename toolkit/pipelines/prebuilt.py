"""Pre-built tiny base models (``make prebuilt``): the ``base`` step of an experiment run ahead of time and kept
under ``model.prebuilt`` in a sub-folder named by the step's key, so that a workshop's first run copies it instead of
pre-training (the quick start's base: 4 MB, about 40 s of CPU saved).

The cache rule makes this safe: the key is a hash of the base's inputs (architecture, pre-training schedule, the
public split's fingerprint), so a copy is used only by a run that would have built exactly this base; a changed
config or corpus builds its own. Regenerate after changing the quick start's model or the sample data:

    python -m toolkit.pipelines.prebuilt configs/quickstart.yaml
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from toolkit.errors import ToolkitError


def build_prebuilt(config, *, progress: bool = True) -> Path:
    """Build the tiny base of ``config`` (a path or a name in ``configs/``) into its ``model.prebuilt`` folder; returns
    the sub-folder (existing ones of the same key are kept: nothing to do)."""
    from toolkit.config.experiment import load_experiment, resolved_settings
    from toolkit.pipelines.cache import StepCache
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
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp)
        cache = StepCache(Manifest(run_dir, cfg, settings), echo=progress)
        base_dir, key = base_step(cfg, settings, data, {"public": corpus_fingerprint(data["public"])}, run_dir,
                                  cache, cache.manifest, progress=progress)
        target = Path(cfg.model.prebuilt) / key
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(base_dir, target)
            step = json.loads((target / "step.json").read_text(encoding="utf-8"))
            # the step record is kept (the key and inputs are what a run checks), without this machine's times
            (target / "step.json").write_text(json.dumps({k: v for k, v in step.items() if k not in (
                "started", "finished", "seconds")}, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return target


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m toolkit.pipelines.prebuilt", description=__doc__.splitlines()[0])
    ap.add_argument("configs", nargs="+", help="experiment YAML files or names in configs/ (quickstart, ...)")
    args = ap.parse_args(argv)
    try:
        for c in args.configs:
            path = build_prebuilt(c)
            size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
            print(f"{c}: {path} ({size / 1e6:.1f} MB)")
    except ToolkitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
