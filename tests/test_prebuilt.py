"""Pre-built steps (``model.prebuilt``, ``make prebuilt``): a run copies a base or RMIA's reference models built ahead
only when its own step has the same key, and the copies shipped in ``prebuilt/`` match the configs of notebooks 00, 02
and 03 (quick start, masked-LM and causal-LM experiments) and notebook 04's e-mail base."""

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
from toolkit.pipelines.cache import StepCache, cached_step, is_current
from toolkit.pipelines.lm_experiment import base_step, load_data, tiny_base_inputs
from toolkit.pipelines.manifest import Manifest
from toolkit.pipelines.prebuilt import build_prebuilt, email_base_key, references_plan
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


#: the notebooks of the shipped experiment configs (their ``config`` parameter)
NOTEBOOK_OF = {"cpu_masked": "02_masked_lm_strategies", "cpu_causal": "03_causal_lm_strategies"}


def demo_overrides() -> list[tuple[str, dict]]:
    """``(config, overrides)`` of the reference models ``make demo`` trains (notebooks/demo.yaml): the reference
    models train on as many public individuals as the notebook has members, so a notebook run at the demo's
    ``n_individuals`` needs its own."""
    from toolkit.pipelines.notebooks import read_demo_parameters

    demo = read_demo_parameters(ROOT / "notebooks" / "demo.yaml")
    return [(config, {"corpus.n_individuals": demo[nb]["n_individuals"]})
            for config, nb in NOTEBOOK_OF.items() if "n_individuals" in demo.get(nb, {})]


REFERENCES = [(config, None) for config in SHIPPED] + demo_overrides()


@pytest.mark.parametrize("config, overrides", REFERENCES)
def test_shipped_reference_models_match_their_config(config, overrides):
    """RMIA's reference models of notebooks 00, 02 and 03 (at their defaults and at make demo's sizes) are shipped
    for the config's current key, without the trainer's resume state or this machine's paths and times, and name the
    shipped base they were fine-tuned from."""
    cfg, plan = references_plan(config, Path("base"), overrides)
    key = step_key("rmia_references", plan[1])
    shipped = ROOT / "prebuilt" / key
    assert is_current(shipped, key, "references.json"), f"stale prebuilt/ reference models of {config}: make prebuilt"
    refs = json.loads((shipped / "references.json").read_text())["checkpoints"]
    assert refs and all((shipped / r / "model.safetensors").is_file() for r in refs)
    assert not list(shipped.rglob("trainer")) and not list(shipped.rglob("optimizer.pt"))
    base = step_key("base", tiny_base_inputs(resolved_settings(cfg), corpus_fingerprint(load_data(cfg).public)))
    for run in shipped.glob("ref-*/run.json"):
        info = json.loads(run.read_text())
        assert info["base"] == f"../{base}" and info["status"] == "done" and "started" not in info
    assert "seconds" not in json.loads((shipped / "step.json").read_text())
    assert sum(f.stat().st_size for f in shipped.rglob("*") if f.is_file()) <= 10_000_000


def test_reference_models_are_the_same_step_at_every_dp_setting():
    """RMIA's reference models are plain fine-tunings of the model's kind: the run's DP settings (training.dp — each ε
    of a frontier — and the DP strategies' dp_schedule) change neither their key nor what they are trained with, so a
    frontier trains them once per size, not once per ε (and attacks its base once). What does change them — the
    fine-tuning schedule — still changes the key."""
    config = ROOT / "configs" / "cpu_causal.yaml"
    _, (_, default, _, kwargs) = references_plan(config, Path("base"))
    keys = {step_key("rmia_references", default)}
    for overrides in ({"training.dp.epsilon": 1.0}, {"training.dp.epsilon": 16.0, "training.dp.delta": 1e-6},
                      {"training.dp.max_grad_norm": 1.0, "training.dp_schedule.learning_rate": 5e-5}):
        _, (_, inputs, _, other) = references_plan(config, Path("base"), overrides)
        keys.add(step_key("rmia_references", inputs))
        assert other["config"] == kwargs["config"] and other["kind"] == kwargs["kind"] == "clm"
    assert len(keys) == 1
    _, (_, moved, _, _) = references_plan(config, Path("base"), {"training.learning_rate": 1e-3})
    assert step_key("rmia_references", moved) not in keys


def _email_key() -> str:
    """Notebook 04's e-mail base key at its defaults (its public messages are the sample generator's)."""
    from toolkit.config import load_profile
    from toolkit.samples.email import public_email_corpus

    return email_base_key("cpu", public_email_corpus(load_profile("cpu").email.public_documents))


def test_shipped_email_base_is_notebook_04_s():
    key = _email_key()
    shipped = ROOT / "prebuilt" / key
    assert is_current(shipped, key, "config.json"), "stale prebuilt/ e-mail base: make prebuilt"
    assert json.loads((shipped / "config.json").read_text())["model_type"] == "gpt2"


def notebook_defaults(name: str) -> dict:
    """The parameters cell of ``notebooks/<name>.py`` (its jupytext script), evaluated: the notebook's defaults."""
    text = (ROOT / "notebooks" / f"{name}.py").read_text(encoding="utf-8")
    cell = text.split('# %% tags=["parameters"]', 1)[1].split("\n# %%", 1)[0]
    found: dict = {}
    exec(compile(cell, name, "exec"), {}, found)  # our own notebook's assignments of literals
    return found


def test_the_notebooks_run_the_configs_named_here():
    assert {notebook_defaults(nb)["config"]: nb for nb in NOTEBOOK_OF.values()} == NOTEBOOK_OF


def _scrubbing_model_folders() -> list[Path]:
    """Shipped folders of a masked LM trained from scratch on a corpus (notebook 05's ``ensure_model`` step)."""
    out = []
    for p in (ROOT / "prebuilt").iterdir():
        inputs = (json.loads((p / "step.json").read_text()) if (p / "step.json").is_file() else {}).get("inputs", {})
        if {"corpus", "tiny", "config"} <= set(inputs):
            out.append(p)
    return out


def test_every_shipped_folder_is_a_step_of_a_config():
    """No stale folder left behind: each sub-folder of prebuilt/ is the current base or reference models of one
    shipped config, notebook 04's e-mail base, or notebook 05's model at the notebook's own schedule (its corpus
    fingerprint, which takes spaCy's NER of the sample, is checked by the slow test below)."""
    keys = {_email_key()}
    for config in SHIPPED:
        cfg = load_experiment(config)
        public = corpus_fingerprint(load_data(cfg).public)
        keys.add(step_key("base", tiny_base_inputs(resolved_settings(cfg), public)))
    for config, overrides in REFERENCES:
        keys.add(step_key("rmia_references", references_plan(config, Path("base"), overrides)[1][1]))
    scrubbing = _scrubbing_model_folders()
    assert len(scrubbing) == 1, "prebuilt/ should hold notebook 05's model once"
    defaults = notebook_defaults("05_vocabulary_scrubbing")
    config = json.loads((scrubbing[0] / "step.json").read_text())["inputs"]["config"]
    assert config["epochs"] == [defaults["pretrain_epochs"]] and config["seed"] == defaults["seed"]
    # prebuilt/notebooks/ holds the shipped results of whole notebook runs, checked by tests/test_workshop.py
    assert {p.name for p in (ROOT / "prebuilt").iterdir() if p.is_dir() and p.name != "notebooks"} == \
        keys | {scrubbing[0].name}


@pytest.mark.slow  # spaCy's NER of the sample's train and heldout notes (about 20 s)
def test_shipped_scrubbing_model_is_notebook_05_s():
    """The key of notebook 05's model at the notebook's defaults, recomputed as the notebook computes it (the NER
    anonymisation, the seen split, the profile's tiny masked LM at the notebook's epochs and seed), is shipped."""
    from toolkit.config import load_profile
    from toolkit.corpus import Corpus, load_corpus
    from toolkit.pipelines.registry import BaseInputs
    from toolkit.scrub.anonymize import AnonymizeConfig, anonymize_corpus

    d = notebook_defaults("05_vocabulary_scrubbing")
    assert d["profile"] == "cpu" and d["n_documents"] is None
    corpus = load_corpus(ROOT / "notebooks" / d["corpus_path"])
    original = Corpus([doc for s in (d["seen_split"], d["unseen_split"]) for doc in corpus.filter(split=s)])
    anon = anonymize_corpus(original, AnonymizeConfig(labels=d["labels"], spacy_model=d["spacy_model"]),
                            progress=False)
    prof = load_profile("cpu")
    tiny, pretrain = prof.base["mlm"], prof.pretrain["mlm"]
    pretrain.epochs, pretrain.seed = [int(d["pretrain_epochs"])], d["seed"]
    key = step_key("base", BaseInputs.from_scratch(corpus_fingerprint(anon.corpus.filter(split=d["seen_split"])),
                                                   tiny, pretrain))
    assert is_current(ROOT / "prebuilt" / key, key, "config.json"), \
        "stale prebuilt/ model of notebook 05: run the notebook, then python -m toolkit.pipelines.prebuilt --ship " \
        "outputs/work/05_vocabulary_scrubbing/model"


def test_a_single_step_copies_a_prebuilt_output_of_its_key_only(tmp_path):
    """cached_step's ``prebuilt`` (notebook 04's e-mail base, the scrubbing model): the output of the step's key is
    copied (owner-only) instead of computed; another key computes."""
    from toolkit.pipelines.cache import step_key as raw_key  # the cache rule itself, below the registry

    inputs = {"x": 1}
    key = raw_key("base", inputs)
    made = tmp_path / "pre" / key
    made.mkdir(parents=True)
    (made / "config.json").write_text("{}")
    (made / "step.json").write_text(json.dumps({"step": "base", "key": key, "status": "done"}))
    calls = []

    def compute(out):
        calls.append(out)
        (out / "config.json").write_text("{}")
        return "computed"

    got = cached_step("base", tmp_path / "a", inputs, lambda: compute(tmp_path / "a"), lambda: "loaded",
                      check="config.json", prebuilt=tmp_path / "pre")
    assert got == "loaded" and not calls and (tmp_path / "a" / "config.json").is_file()
    assert (tmp_path / "a" / "config.json").stat().st_mode & 0o077 == 0
    got = cached_step("base", tmp_path / "b", {"x": 2}, lambda: compute(tmp_path / "b"), lambda: "loaded",
                      check="config.json", prebuilt=tmp_path / "pre")
    assert got == "computed" and calls == [tmp_path / "b"]


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

    # RMIA's reference models were built beside the base, and a run copies them instead of training them
    from toolkit.pipelines.reference_models import run_reference_models
    from toolkit.pipelines.registry import prebuilt_ready

    _, plan = references_plan(cfg.source, path)
    assert prebuilt_ready("rmia_references", plan[1], cfg.model.prebuilt)
    exp = load_data(cfg)
    manifest = Manifest(tmp_path / "run", cfg, resolved_settings(cfg))
    refs = run_reference_models(cfg, StepCache(manifest, echo=False), tmp_path / "run", public=exp.public,
                                base=path, base_key=step_key("base", tiny_base_inputs(resolved_settings(cfg),
                                                                                     corpus_fingerprint(exp.public))),
                                public_fingerprint=corpus_fingerprint(exp.public), progress=False,
                                n_train=len(set(exp.members.person_ids)))
    assert {s["name"]: s["status"] for s in manifest.data["steps"]}["rmia_references"] == "prebuilt"
    assert all(p.is_file() for r in refs.paths for p in [r / "model.safetensors"])
    assert not (tmp_path / "run" / "rmia_references" / "ref-0" / "trainer").exists()
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
    with pytest.raises(ToolkitError, match="no finished reference models of this config's key"):
        build_prebuilt(other.source, from_run=tmp_path / "run2")  # run2 ran its base step alone
    shipped = build_prebuilt(other.source, from_run=tmp_path / "run2", references=False)
    assert shipped.parent == tmp_path / "pre" and shipped != built
    same, differ, missing = filecmp.cmpfiles(tmp_path / "run2" / "base_clm", shipped,
                                             ["model.safetensors", "config.json", "tokenizer.json"], shallow=False)
    assert len(same) == 3 and not differ and not missing
    assert "seconds" not in json.loads((shipped / "step.json").read_text())
    assert (shipped / "model.safetensors").stat().st_mode & 0o777 == 0o644
