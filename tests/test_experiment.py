"""Experiment configs (validation errors name the file and the key) and `run` (cached steps, manifest)."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest
from _experiment_fixtures import CORPUS, ROOT, TINY, tiny_run, write_config

from toolkit.cli import main
from toolkit.pipelines import steps
from toolkit.errors import ToolkitError
from toolkit.config.experiment import (CONFIG_DIR, ExperimentConfig, load_experiment, parse_overrides,
                                       resolved_settings)
from toolkit.pipelines.lm_experiment import results_lines, run_experiment

# ---------------------------------------------------------------------------------------------------------------------
# config validation


def _cfg(**changes) -> dict:
    """TINY with dotted-key changes (value None deletes the key)."""
    data = copy.deepcopy(TINY)
    for dotted, value in changes.items():
        node = data
        *parents, last = dotted.split("__")
        for p in parents:
            node = node.setdefault(p, {})
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value
    return data


@pytest.mark.parametrize("changes, key, message", [
    ({"training__strategies": ["clm", "ppclm_x"]}, "training.strategies[1]", "unknown strategy 'ppclm_x'"),
    ({"training__strategies": ["ppmlm"]}, "training.strategies[0]", "ppmlm trains a mlm model but model.kind is clm"),
    ({"training__strategies": []}, "training.strategies", "non-empty list"),
    ({"training__epochs": [0, 2]}, "training.epochs", "positive integers"),
    ({"training__epochs": "four"}, "training.epochs", "positive integers"),
    ({"training__dp_epochs": [-1]}, "training.dp_epochs", "positive integers"),
    ({"training__dp_schedule": {"learning_rte": 1e-4}}, "training.dp_schedule", "unknown key(s) ['learning_rte']"),
    ({"training__dp_schedule": {"epochs": [2]}, "training__dp_epochs": [1]}, "training.dp_schedule.epochs",
     "give the DP strategies' epochs once"),
    ({"training__dp_schedule": {"batch_size": 0}}, "training.dp_schedule", "batch_size"),
    ({"training__dp_schedule": {"dp": {"max_norm": 1}}}, "training.dp_schedule.dp", "unknown key(s) ['max_norm']"),
    ({"model__pretrain": {"epochs": []}}, "model.pretrain.epochs", "positive integers"),
    ({"corpus__path": "no/such/notes.jsonl"}, "corpus.path", "does not exist"),
    ({"corpus__n_individuals": 0}, "corpus.n_individuals", "integer >= 1"),
    ({"corpus__nonmember_split": "train"}, "corpus.nonmember_split", "must differ"),
    ({"colour": "blue"}, "", "unknown key(s) ['colour']"),
    ({"audit__n_boostrap": 5}, "audit", "unknown key(s) ['n_boostrap']"),
    ({"training__learning_rte": 0.1}, "training", "unknown key(s) ['learning_rte']"),
    ({"model__architecture": {"hidden": 3}}, "model.architecture", "unknown key(s) ['hidden']"),
    ({"model__kind": "seq2seq"}, "model.kind", "must be one of"),
    ({"identifiers__k": 1}, "identifiers", "k must be an integer >= 2"),
    ({"identifiers__detector": "magic"}, "identifiers", "magic"),
    ({"profile": "gpu_cluster"}, "profile", "not found"),
    ({"audit__checkpoints": "some"}, "audit.checkpoints", "'all' or 'last'"),
    ({"training__seed": 3}, "training.seed", "top-level `seed`"),
    ({"corpus": None}, "", "missing required key(s) ['corpus']"),
    ({"models": ["gpt2"]}, "", "exactly one of `training`"),
    ({"training": None}, "", "exactly one of `training`"),
    ({"training": None, "models": ["gpt2"]}, "model", "each model's kind is read from its architecture"),
    ({"model": None}, "", "missing required key(s) ['model']"),
    ({"audit__reference": "gpt2"}, "audit.reference", "for `models:` configs only"),
    ({"training__canaries": {"n": 0}}, "training.canaries.n", "integer >= 1"),
    ({"training__canaries": {"repeats": [0, 4]}}, "training.canaries.repeats", "positive integers"),
    ({"training__canaries": {"count": 3}}, "training.canaries", "unknown key(s) ['count']"),
    ({"audit__attacks": {"pii_candidates": 1}}, "audit.attacks.pii_candidates", "integer >= 2"),
    ({"audit__attacks": {"windw": 64}}, "audit.attacks", "unknown key(s) ['windw']"),
    ({"audit__attacks": {"enabled": "yes"}}, "audit.attacks.enabled", "true or false"),
])
def test_config_errors_name_file_and_key(tmp_path, changes, key, message):
    path = write_config(tmp_path / "bad.yaml", _cfg(**changes))
    with pytest.raises(ToolkitError) as err:
        load_experiment(path)
    text = str(err.value)
    assert text.startswith(str(path)), text
    if key:
        assert f": {key}:" in text, text
    assert message in text, text


def test_regurgitation_needs_a_causal_model(tmp_path):
    data = _cfg(model__kind="mlm", training__strategies=["mlm"])
    with pytest.raises(ToolkitError, match=r"audit\.regurgitation: free-running regurgitation needs a causal LM"):
        load_experiment(write_config(tmp_path / "c.yaml", data))


def test_duplicate_and_invalid_yaml(tmp_path):
    p = tmp_path / "dup.yaml"
    p.write_text("name: a\nseed: 1\nseed: 2\ncorpus: {path: x}\nmodel: {kind: clm}\ntraining: {strategies: [clm]}\n")
    with pytest.raises(ToolkitError, match=r"dup\.yaml: invalid YAML .*duplicate key 'seed' \(first on line 2\)"):
        load_experiment(p)
    p.write_text("name: [unclosed\n")
    with pytest.raises(ToolkitError, match="invalid YAML"):
        load_experiment(p)
    with pytest.raises(ToolkitError, match="not found"):
        load_experiment(tmp_path / "missing.yaml")


def test_overrides_and_resolution(tmp_path):
    path = write_config(tmp_path / "c.yaml")
    cfg = load_experiment(path, parse_overrides(["training.epochs=[2, 6]", "seed=7", "audit.n_bootstrap=0"]))
    assert isinstance(cfg, ExperimentConfig)
    s = resolved_settings(cfg)
    assert s["finetune"].epochs == [2, 6] and s["finetune"].seed == 7 and s["pretrain"].seed == 7
    assert s["finetune"].batch_size == 4 and s["finetune"].learning_rate == 2e-3  # config + cpu profile
    assert s["base"].hidden_size == 64 and s["base"].num_layers == 2
    assert cfg.audit.n_bootstrap == 0
    # DP strategies: dp_schedule over the schedule (their own learning rate, batch size), the rest shared
    dp = resolved_settings(load_experiment(path, parse_overrides(
        ["training.dp_schedule={learning_rate: 5.0e-4, batch_size: 64, epochs: [3], dp: {max_grad_norm: 1.0}}",
         "training.dp={epsilon: 4.0}"])))
    assert dp["dp_finetune"].learning_rate == 5e-4 and dp["dp_finetune"].batch_size == 64
    assert dp["dp_finetune"].dp.max_grad_norm == 1.0 and dp["dp_finetune"].dp.epsilon == 4.0
    assert dp["finetune"].dp == s["finetune"].dp.__class__(epsilon=4.0)  # the plain strategies' schedule untouched
    assert dp["dp_finetune"].epochs == [3] and dp["finetune"].learning_rate == 2e-3 and dp["finetune"].batch_size == 4
    assert dp["dp_finetune"].max_length == dp["finetune"].max_length
    assert s["dp_finetune"] == s["finetune"]  # none given: the same schedule
    with pytest.raises(ToolkitError, match=r"\(override\): training.strategies: is not a mapping"):
        load_experiment(path, {"training.strategies.x": 1})
    with pytest.raises(ToolkitError, match="KEY=VALUE"):
        parse_overrides(["epochs"])
    # relative corpus paths are resolved against the config's folder
    (tmp_path / "sub" / "data").mkdir(parents=True)
    (tmp_path / "sub" / "data" / "notes.jsonl").symlink_to(CORPUS)
    rel = _cfg(corpus__path="data/notes.jsonl")
    got = load_experiment(write_config(tmp_path / "sub" / "c.yaml", rel)).corpus.path
    assert got == [str((tmp_path / "sub" / "data" / "notes.jsonl").resolve())] == [str(CORPUS.resolve())]
    with pytest.raises(ToolkitError, match="corpus.path: .*data/notes.jsonl does not exist"):
        load_experiment(write_config(tmp_path / "c2.yaml", rel))


@pytest.mark.parametrize("name", sorted(p.stem for p in CONFIG_DIR.glob("*.yaml")
                                         if not p.stem.startswith("frontier")))  # frontier configs: test_frontier.py
def test_example_configs_load(name):
    cfg = load_experiment(name)
    s = resolved_settings(cfg)
    if name.startswith("paper_"):
        assert cfg.profile == "paper" and isinstance(s["base"], str) and s["pretrain"] is None
        assert s["finetune"].epochs == [4, 8, 16, 32] and s["finetune"].lr_schedule == "linear"
    else:
        assert cfg.profile == "cpu" and not isinstance(s["base"], str)


def test_cli_config_error_exit_status(tmp_path, capsys):
    path = write_config(tmp_path / "bad.yaml", _cfg(training__strategies=["nope"]))
    assert main(["run", str(path), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "training.strategies[0]" in err and "unknown strategy 'nope'" in err
    assert main(["run", str(path), "--set", "oops"]) == 2


# ---------------------------------------------------------------------------------------------------------------------
# the run: cache keys and manifest


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return tiny_run(tmp_path_factory)


def _statuses(run_dir: Path) -> dict[str, str]:
    m = json.loads((run_dir / "manifest.json").read_text())
    return {s["name"]: s["status"] for s in m["steps"]}


ATTACK_STEPS = {"attacks/base", "attacks/clm/epoch-8", "attacks/ppclm/epoch-8"}
ALL_STEPS = {"data", "base", "identifiers_members", "identifiers_all", "train/clm", "train/ppclm", "audit/base",
             "audit/clm/epoch-4", "audit/clm/epoch-8", "audit/ppclm/epoch-4", "audit/ppclm/epoch-8",
             "regurgitation/base", "regurgitation/clm", "regurgitation/ppclm"} | ATTACK_STEPS | {"rmia_references"}
#: steps that run only with the attacks (RMIA's reference models: shared by every attack step, keyed without them)
WITH_ATTACKS = ATTACK_STEPS | {"rmia_references"}


@pytest.mark.slow
def test_run_writes_every_step(run_dir):
    assert set(_statuses(run_dir)) == ALL_STEPS
    for d in ("base_clm", "identifiers_members", "identifiers_all", "runs/clm", "runs/ppclm/epoch-8",
              "audit/ppclm/epoch-8", "regurgitation/clm"):
        assert (run_dir / d).is_dir(), d
    for d in ("audit/clm/epoch-4", "runs/ppclm", "identifiers_all"):
        step = json.loads((run_dir / d / "step.json").read_text())
        assert step["status"] == "done" and len(step["key"]) == 64
    assert (run_dir / "audit/clm/epoch-8/metrics.json").is_file()
    assert json.loads((run_dir / "regurgitation/clm/regurgitation.json").read_text())["epoch"] == 8


@pytest.mark.slow
def test_privacy_probe_uses_the_training_identifiers_and_the_attack_the_auditors(run_dir):
    """docs/methods.md §4 and §5: utility and privacy are measured on the training documents with the identifiers the
    strategy was trained with (a utility position is a word the model trained on), the count attack on members and
    non-members with the auditor's identifiers over both. The two sets differ here (k=2 over 8 vs 16 patients)."""
    from toolkit.identifiers import load_identifiers

    train = load_identifiers(run_dir / "identifiers_members")["positions"]
    every = load_identifiers(run_dir / "identifiers_all")["positions"]
    key = lambda f: set(zip(f["doc_id"], f["start"]))  # noqa: E731
    members = set(train["doc_id"])
    only_train = key(train) - key(every[every["doc_id"].isin(members)])
    assert only_train, "the test needs words protected for training but not by the auditor's graph"
    audit = steps.load_audit(run_dir / "audit" / "ppclm" / "epoch-8")
    preds = audit["predictions"]
    assert set(preds["doc_id"]) <= members  # the §4 probe reads the training documents only
    utility_rows = key(preds[~preds["protected"]])
    assert not utility_rows & key(train)  # no protected training word counts for utility
    assert audit["metrics"]["n_utility_positions"] == int((~preds["protected"]).sum())
    assert key(preds[preds["protected"]]) <= key(train)
    mia = audit["mia_predictions"]
    assert set(mia["doc_id"]) > members and key(mia[mia["protected"]]) <= key(every)
    # held-out utility (§4): the non-members' unprotected words of the same probe, recounted by hand
    from toolkit.metrics import normalize_word

    held = [normalize_word(p) == normalize_word(o) if isinstance(p, str) else False
            for d, p, o, prot in zip(mia["doc_id"], mia["predicted"], mia["original"], mia["protected"])
            if d not in members and not prot]
    assert len(held) > 100 and audit["metrics"]["heldout_utility"] == pytest.approx(sum(held) / len(held))


@pytest.mark.slow
def test_cache_reruns_only_dependent_steps(run_dir, tmp_path):
    work = tmp_path / "copy"
    shutil.copytree(run_dir, work)
    cfg_path = write_config(tmp_path / "c.yaml")

    def again(**overrides):
        run_experiment(load_experiment(cfg_path, overrides), work, progress=False, echo=False)
        st = _statuses(work)
        return {n for n, s in st.items() if s == "ran"} - {"data"}, {n for n, s in st.items() if s == "cached"}

    ran, cached = again()
    assert ran == set() and cached == ALL_STEPS - {"data"}

    ran, _ = again(**{"audit.n_bootstrap": 10})
    assert ran == {s for s in ALL_STEPS if s.startswith("audit/")} | ATTACK_STEPS
    assert json.loads((work / "audit/clm/epoch-8/step.json").read_text())["inputs"]["audit"]["n_bootstrap"] == 10

    ran, _ = again(**{"audit.n_bootstrap": 10, "audit.regurgitation.max_new_tokens": 4})
    assert ran == {"regurgitation/base", "regurgitation/clm", "regurgitation/ppclm"} | ATTACK_STEPS  # verdict input

    ran, _ = again(**{"audit.n_bootstrap": 10, "audit.regurgitation.max_new_tokens": 4, "audit.attacks.window": 64})
    assert ran == ATTACK_STEPS
    # from here on without the attacks (they would re-run with every audit): no attack step at all
    off = {"audit.n_bootstrap": 10, "audit.regurgitation.max_new_tokens": 4, "audit.attacks.enabled": False}
    ran, cached = again(**off)
    assert ran == set() and cached == ALL_STEPS - {"data"} - WITH_ATTACKS

    # k changes the identifiers: ppclm (which protects them) retrains, clm (which ignores them) does not
    before = (work / "runs/clm/epoch-8/model.safetensors").stat().st_mtime_ns
    ran, cached = again(**off, **{"identifiers.k": 3})
    assert ran == ALL_STEPS - {"data", "base", "train/clm"} - WITH_ATTACKS
    assert {"base", "train/clm"} <= cached
    assert (work / "runs/clm/epoch-8/model.safetensors").stat().st_mtime_ns == before
    assert json.loads((work / "identifiers_members/summary.json").read_text())["config"]["k"] == 3

    # an interrupted (non-resumable) step runs again; the others stay cached
    step = work / "audit/ppclm/epoch-4/step.json"
    info = json.loads(step.read_text())
    step.write_text(json.dumps({**info, "status": "running"}))
    ran, _ = again(**off, **{"identifiers.k": 3})
    assert ran == {"audit/ppclm/epoch-4"}


@pytest.mark.slow
def test_manifest_is_complete(run_dir):
    m = json.loads((run_dir / "manifest.json").read_text())
    assert m["status"] == "done" and m["name"] == "tiny_causal" and m["total_seconds"] >= 0
    env = m["environment"]
    for pkg in ("torch", "transformers", "tokenizers", "accelerate", "opacus", "pandas", "plotly"):
        assert env["packages"][pkg], pkg
    assert env["python"].startswith("3.") and env["hardware"]["cpu_count"] >= 1
    assert env["git"] is None or len(env["git"]["commit"]) == 40
    assert m["seeds"]["seed"] == 0 and m["seeds"]["training"] == 0 and m["seeds"]["pretraining"] == 0
    assert m["config"]["training"]["strategies"] == ["clm", "ppclm"] and m["config_sha256"]
    assert m["settings"]["finetune"]["epochs"] == [4, 8] and m["settings"]["base"]["hidden_size"] == 64
    ds = m["datasets"]
    assert ds["corpus_files"][0]["sha256"] and ds["corpus_files"][0]["bytes"] == CORPUS.stat().st_size
    for role, people in (("members", 8), ("nonmembers", 8), ("public", 20)):
        assert ds[role]["n_individuals"] == people and ds[role]["n_documents"] >= people
        assert len(ds[role]["sha256"]) == 64
    assert m["identifiers"]["members"]["n_individuals"] == 8 and m["identifiers"]["all"]["n_individuals"] == 16
    assert m["identifiers"]["members"]["n_I_direct"] > 0
    steps = {s["name"]: s for s in m["steps"]}
    assert set(steps) == ALL_STEPS
    for s in steps.values():
        assert s["status"] in ("ran", "cached") and s["seconds"] >= 0
        if s["status"] == "cached":
            assert s["original_seconds"] is not None
    # the manifest holds no document text: no member's text fragment of 40 characters appears in it
    from toolkit.corpus import load_corpus

    text = json.dumps(m)
    docs = load_corpus(CORPUS).filter(split="train")
    assert not any(d.text[100:140] in text for d in list(docs)[:20])


@pytest.mark.slow
def test_cli_run_reuses_the_cached_run(run_dir, tmp_path, capsys):
    cfg_path = write_config(tmp_path / "c.yaml")
    work = tmp_path / "run"
    shutil.copytree(run_dir, work)  # the shared run is only read (tests/_experiment_fixtures.py)
    assert main(["run", str(cfg_path), "--out", str(work), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "0 steps ran" not in out  # the data step always runs
    assert " up to date; report: python -m toolkit report" in out
    # --quiet: a few lines, ending with the results table (one row per audited model, each with its verdict)
    lines = out.strip().splitlines()
    assert len(lines) <= 15
    head = next(i for i, line in enumerate(lines) if line.startswith("model "))
    rows = lines[head + 1:]
    assert [r.split()[0] for r in rows] == ["base", "clm", "ppclm"]
    assert all(any(level in r for level in ("green", "amber", "red", "incomplete")) for r in rows)


ATTACK_FILES = ("attacks.json", "roc.json", "scores.parquet", "identifiers.json", "verdict.json")


@pytest.mark.slow
def test_attack_steps_files_verdicts_and_results_lines(run_dir, tmp_path):
    for sub in ATTACK_STEPS:
        for name in ATTACK_FILES:
            assert (run_dir / sub / name).is_file(), (sub, name)
    assert not (run_dir / "attacks/clm/epoch-4").exists()  # the last checkpoint of each strategy only
    base = json.loads((run_dir / "attacks/base/attacks.json").read_text())
    clm = json.loads((run_dir / "attacks/clm/epoch-8/attacks.json").read_text())
    assert base["reference"] is None and "reference" not in base["attacks"]
    assert Path(clm["reference"]).resolve() == (run_dir / "base_clm").resolve()
    assert set(clm["attacks"]) == {"loss", "zlib", "min_k", "min_k_plus_plus", "reference", "identifier_count",
                                   "rmia", "ez", "dc_pdd", "recall", "blind"}  # the battery of 2026-12-02
    # RMIA's population is the non-members, OUT for the base too: the base model's non-members get spread ranks (with
    # the public split as population — the base's pre-training text — every score of the base was 0)
    import pandas as pd

    assert "non-members" in base["rmia"]["population"]
    base_scores = pd.read_parquet(run_dir / "attacks/base/scores.parquet")
    assert base_scores.loc[~base_scores["member"], "rmia"].nunique() > 1
    # identifier_count is the §4 audit's count attack on the same individuals
    roc = json.loads((run_dir / "audit/clm/epoch-8/roc.json").read_text())
    assert clm["attacks"]["identifier_count"]["auc"] == pytest.approx(roc["auc"])
    ids = json.loads((run_dir / "attacks/clm/epoch-8/identifiers.json").read_text())
    assert set(ids) == {"pii_inference", "memorisation"} and ids["memorisation"]["overall"]["n_types"] > 0
    assert json.loads((run_dir / "attacks/base/identifiers.json").read_text())["memorisation"]["overall"] is None
    work = tmp_path / "run"
    shutil.copytree(run_dir, work)  # the shared run is only read (tests/_experiment_fixtures.py)
    result = run_experiment(load_experiment(write_config(tmp_path / "c.yaml")), work, progress=False, echo=False)
    assert set(result.verdicts) == {("base", 0), ("clm", 8), ("ppclm", 8)}
    assert result.steps("ran") == ["data"]  # the copy is up to date: the same verdicts, read back
    assert result.verdicts[("clm", 8)] == json.loads((run_dir / "attacks/clm/epoch-8/verdict.json").read_text())
    assert result.verdicts[("clm", 8)]["level"] != "green"  # 8 epochs on 8 patients: the members stand out
    lines = results_lines(result)
    assert lines[0].split()[:2] == ["model", "privacy"] and len(lines) == 4
    assert [ln.split()[0] for ln in lines[1:]] == ["base", "clm", "ppclm"] and "clm epoch 8" in lines[2]
    for ln, key in zip(lines[1:], [("base", 0), ("clm", 8), ("ppclm", 8)]):
        assert result.verdicts[key]["level"] in ln
        assert f"{result.audits[key]['metrics']['privacy']:.3f}" in ln


@pytest.mark.slow
def test_models_config_audits_without_training(run_dir, tmp_path):
    data = copy.deepcopy(TINY)
    del data["model"], data["training"]
    data["models"] = [str(run_dir / "runs/clm/epoch-8")]
    data["audit"] = {"n_bootstrap": 20, "max_length": 128}
    cfg = load_experiment(write_config(tmp_path / "only.yaml", data))
    assert cfg.training is None and cfg.model is None and cfg.models == [str((run_dir / "runs/clm/epoch-8").resolve())]
    out = tmp_path / "only"
    res = run_experiment(cfg, out, progress=False, echo=False)
    label = "clm-epoch-8"
    assert set(res.verdicts) == {(label, 0)} and res.checkpoints == {}
    for name in ATTACK_FILES:
        assert (out / "attacks" / label / name).is_file(), name
    for name in ("attacks.json", "identifiers.json", "verdicts.json", "manifest.json"):
        assert (out / name).is_file(), name
    att = json.loads((out / "attacks" / label / "attacks.json").read_text())
    assert Path(att["reference"]) == (run_dir / "base_clm").resolve()  # the base named by the run's run.json
    assert {s["name"] for s in res.manifest["steps"]} == {"data", "identifiers_members", "identifiers_all",
                                                          f"audit/{label}", f"attacks/{label}"}
    # the same checkpoint, data and reference as the training run's attack step: the same figures. Not the
    # identifier-count attack: it reads the §4 probe, which scores the notes as they were trained — with the one-run
    # audit's canaries inside — while this run reads the corpus, which never had them (the battery cuts them out)
    trained = json.loads((run_dir / "attacks/clm/epoch-8/attacks.json").read_text())
    assert trained["one_run"]["m"] > 0 and "identifier_count" in att["attacks"]
    for name in ("loss", "zlib", "reference"):
        assert att["attacks"][name]["auc"] == pytest.approx(trained["attacks"][name]["auc"]), name
    assert results_lines(res)[1].startswith(label)
    assert run_experiment(cfg, out, progress=False, echo=False).steps("ran") == ["data"]


@pytest.mark.slow
def test_canaries_inserted_not_protected_and_exposed(run_dir, tmp_path):
    import pandas as pd

    from toolkit.audit.attacks import canary_ranges
    from toolkit.audit.evaluate import identifier_sets

    work = tmp_path / "run"
    shutil.copytree(run_dir, work)  # the tiny base is reused
    data = copy.deepcopy(TINY)
    data["training"] = {**data["training"], "strategies": ["ppclm"], "epochs": [2],
                        "canaries": {"n": 4, "repeats": [1, 4]}}
    res = run_experiment(load_experiment(write_config(tmp_path / "c.yaml", data)), work, progress=False, echo=False)
    assert {s["name"]: s["status"] for s in res.manifest["steps"]}["base"] == "cached"
    table = pd.read_parquet(work / "canaries/canaries.parquet")
    assert table["repeats"].tolist() == [1, 4, 1, 4] and table["number"].str.fullmatch(r"\d{8}").all()
    members = res.data.members
    for r in table.itertuples():
        assert sum(d.text.count(r.text) for d in members) == r.repeats
    # the canaries are not identifiers: no protected position inside one, their names and numbers not in I
    pos = res.identifiers["members"]["positions"]
    for doc_id, ranges in canary_ranges(members, table).items():
        sel = pos[pos["doc_id"] == doc_id]
        assert not any(((sel["start"] < b) & (sel["end"] > a)).any() for a, b in ranges)
    words = {w.lower() for n in table["name"] for w in n.split()} | set(table["number"])
    sets = identifier_sets(res.identifiers["members"])
    assert not words & (sets["I_direct"] | sets["I_indirect"])
    # the exposure canaries and the one-run audit's included ones
    assert res.identifiers["members"]["summary"]["canaries_excluded"]["n_ranges"] > table["repeats"].sum()
    # exposure per repeat count, for the base model (never saw them) and the trained checkpoint
    for key in (("base", 0), ("ppclm", 2)):
        can = res.attacks[key]["identifiers"]["canaries"]
        assert set(can["by_repeats"]) == {"1", "4"} and len(can["canaries"]) == 4
        assert all(0 <= c["exposure"] <= can["log2_space"] for c in can["canaries"])


@pytest.mark.slow
def test_two_processes_with_torchrun(tmp_path):
    """`torchrun --nproc_per_node 2 -m toolkit run` (what `accelerate launch` starts): the HF Trainer splits the
    batches between the processes (half the optimizer steps of one process), Opacus DP-SGD trains once in the main
    process, every checkpoint is complete and the steps are announced once."""
    import subprocess
    import sys

    data = copy.deepcopy(TINY)
    data["training"] = {**data["training"], "strategies": ["ppclm"], "epochs": [1, 2]}
    data["audit"]["attacks"] = {"enabled": False}  # training on two processes is the point; audits run once anyway
    cfg = write_config(tmp_path / "c.yaml", data)
    out = tmp_path / "run"
    run_experiment(load_experiment(cfg), out, progress=False, echo=False)  # the base is built on one process
    data["training"]["strategies"] = ["clm", "ppclm", "clm_dp"]
    write_config(cfg, data)
    torchrun = Path(sys.executable).with_name("torchrun")
    proc = subprocess.run([str(torchrun), "--nproc_per_node", "2", "-m", "toolkit", "run", str(cfg), "--out", str(out)],
                          capture_output=True, text=True, timeout=600,
                          env={**__import__("os").environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["environment"]["hardware"]["world_size"] == 2
    steps = {s: json.loads((out / "runs" / s / "run.json").read_text())["steps"] for s in ("clm", "ppclm", "clm_dp")}
    assert steps["ppclm"] >= 2 * steps["clm"] - 2  # ppclm ran on one process earlier, clm on two
    assert steps["clm"] < steps["ppclm"]
    for s in ("clm", "ppclm", "clm_dp"):
        for e in (1, 2):
            assert (out / "runs" / s / f"epoch-{e}" / "config.json").is_file()
    log = proc.stdout + proc.stderr
    assert log.count("[run] base: up to date (cached)") == 1  # only the main process announces and writes
    assert log.count("[run] train/clm_dp: running") == 1 and log.count("[run] train/clm: running") == 1
    assert "resuming" not in log
    assert log.count("tiny_causal: ") == 1 and "steps ran" in log  # one results summary, from the main process
    assert {st["name"]: st["status"] for st in manifest["steps"]}["audit/clm_dp/epoch-2"] == "ran"
