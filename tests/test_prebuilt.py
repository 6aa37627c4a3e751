"""Pre-built tiny bases (``model.prebuilt``, ``make prebuilt``): a run copies a base built ahead only when its own
``base`` step has the same key, and the copies shipped in ``prebuilt/`` match the configs of notebooks 00, 02 and 03
(quick start, masked-LM and causal-LM experiments)."""

from __future__ import annotations

import copy
import filecmp
import json
import shutil
from pathlib import Path

import pytest
from _experiment_fixtures import TINY, write_config

from toolkit.config.experiment import load_experiment, resolved_settings
from toolkit.errors import ToolkitError
from toolkit.pipelines.cache import StepCache, is_current
from toolkit.pipelines.lm_experiment import base_step, load_data, tiny_base_inputs
from toolkit.pipelines.manifest import Manifest
from toolkit.pipelines.prebuilt import build_prebuilt
from toolkit.pipelines.registry import key as step_key
from toolkit.training import corpus_fingerprint

ROOT = Path(__file__).resolve().parents[1]


SHIPPED = {"quickstart": "clm", "cpu_masked": "mlm", "cpu_causal": "clm"}  # notebooks 00, 02, 03


@pytest.mark.parametrize("config, kind", SHIPPED.items())
def test_shipped_base_matches_its_config(config, kind):
    cfg = load_experiment(config)
    assert cfg.model.prebuilt == str((ROOT / "prebuilt").resolve()) and cfg.model.kind == kind
    data = load_data(cfg)
    key = step_key("base", tiny_base_inputs(resolved_settings(cfg), corpus_fingerprint(data.public)))
    shipped = ROOT / "prebuilt" / key
    assert is_current(shipped, key, "config.json"), f"stale prebuilt/ base of {config}: run `make prebuilt`"
    assert json.loads((shipped / "config.json").read_text())["model_type"] == {"clm": "gpt2", "mlm": "bert"}[kind]
    assert sum(f.stat().st_size for f in shipped.rglob("*") if f.is_file()) <= 10_000_000


def test_every_shipped_folder_is_a_base_of_a_config():
    """No stale folder left behind: each sub-folder of prebuilt/ is the current base of one shipped config."""
    keys = set()
    for config in SHIPPED:
        cfg = load_experiment(config)
        public = corpus_fingerprint(load_data(cfg).public)
        keys.add(step_key("base", tiny_base_inputs(resolved_settings(cfg), public)))
    assert {p.name for p in (ROOT / "prebuilt").iterdir() if p.is_dir()} == keys


def _base(cfg, run_dir: Path):
    settings = resolved_settings(cfg)
    data = load_data(cfg)
    manifest = Manifest(run_dir, cfg, settings)
    cache = StepCache(manifest, echo=False)
    path, _ = base_step(cfg, settings, data, {"public": corpus_fingerprint(data.public)}, run_dir, cache, manifest,
                        progress=False)
    return path, {s["name"]: s["status"] for s in manifest.data["steps"]}["base"]


@pytest.mark.slow  # pre-trains two tiny bases
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
    other = load_experiment(write_config(tmp_path / "c2.yaml", data))
    _, status = _base(other, tmp_path / "run2")
    assert status == "ran"

    # --from-run: a finished run's base is shipped when its key is the config's, refused otherwise
    shutil.rmtree(built)
    with pytest.raises(ToolkitError, match="no finished base of this config's key"):
        build_prebuilt(cfg.source, from_run=tmp_path / "run2")
    assert not built.exists()
    shipped = build_prebuilt(other.source, from_run=tmp_path / "run2")
    assert shipped.parent == tmp_path / "pre" and shipped != built
    same, differ, missing = filecmp.cmpfiles(tmp_path / "run2" / "base_clm", shipped,
                                             ["model.safetensors", "config.json", "tokenizer.json"], shallow=False)
    assert len(same) == 3 and not differ and not missing
    assert "seconds" not in json.loads((shipped / "step.json").read_text())
    assert (shipped / "model.safetensors").stat().st_mode & 0o777 == 0o644
