"""Pre-built tiny bases (``model.prebuilt``, ``make prebuilt``): a run copies a base built ahead only when its own
``base`` step has the same key, and the copy shipped in ``prebuilt/`` matches the quick start."""

from __future__ import annotations

import copy
import filecmp
import json
from pathlib import Path

from _experiment_fixtures import TINY, write_config

from toolkit.config.experiment import load_experiment, resolved_settings
from toolkit.pipelines.cache import StepCache, is_current, step_key
from toolkit.pipelines.lm_experiment import base_step, load_data, tiny_base_inputs
from toolkit.pipelines.manifest import Manifest
from toolkit.pipelines.prebuilt import build_prebuilt
from toolkit.training import corpus_fingerprint

ROOT = Path(__file__).resolve().parents[1]


def test_shipped_base_matches_the_quick_start():
    cfg = load_experiment("quickstart")
    assert cfg.model.prebuilt == str((ROOT / "prebuilt").resolve())
    data = load_data(cfg)
    key = step_key("base", tiny_base_inputs(resolved_settings(cfg), corpus_fingerprint(data["public"])))
    shipped = ROOT / "prebuilt" / key
    assert is_current(shipped, key, "config.json"), "stale prebuilt/ base: run `make prebuilt`"
    assert sum(f.stat().st_size for f in shipped.rglob("*") if f.is_file()) <= 10_000_000


def _base(cfg, run_dir: Path):
    settings = resolved_settings(cfg)
    data = load_data(cfg)
    manifest = Manifest(run_dir, cfg, settings)
    cache = StepCache(manifest, echo=False)
    path, _ = base_step(cfg, settings, data, {"public": corpus_fingerprint(data["public"])}, run_dir, cache, manifest,
                        progress=False)
    return path, {s["name"]: s["status"] for s in manifest.data["steps"]}["base"]


def test_a_run_copies_a_base_of_its_own_key_and_builds_any_other(tmp_path):
    data = copy.deepcopy(TINY)
    data["model"]["prebuilt"] = str(tmp_path / "pre")
    cfg = load_experiment(write_config(tmp_path / "c.yaml", data))
    built = build_prebuilt(cfg.source, progress=False)
    assert built.parent == tmp_path / "pre" and (built / "model.safetensors").is_file()
    assert "seconds" not in json.loads((built / "step.json").read_text())

    path, status = _base(cfg, tmp_path / "run")
    assert status == "prebuilt"
    assert not filecmp.dircmp(built, path).diff_files and (path / "model.safetensors").stat().st_mode & 0o077 == 0
    path, status = _base(cfg, tmp_path / "run")  # now in the run: cached as any step
    assert status == "cached"

    data["model"]["pretrain"] = {"epochs": [2]}  # another key: built, not copied
    other = load_experiment(write_config(tmp_path / "c.yaml", data))
    _, status = _base(other, tmp_path / "run2")
    assert status == "ran"
