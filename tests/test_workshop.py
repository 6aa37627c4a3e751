"""Workshop mode (toolkit/pipelines/workshop.py, docs/workshop.md): a notebook reads the shipped results of a finished
run. Shipping leaves weights out and machine paths; installing puts the folder back where the notebook's cache finds
every step; a stale shipped result — a step whose key the current code or config no longer gives — fails here by the
one cache rule, as a stale pre-built base fails tests/test_prebuilt.py; a step that would run in workshop mode, or a
model whose weights were not shipped, stops with a one-line error instead of retraining."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from toolkit.errors import ToolkitError
from toolkit.pipelines import workshop
from toolkit.pipelines.cache import REQUIRE_CACHED, cached_step

ROOT = Path(__file__).resolve().parents[1]


def _fake_work(tmp_path: Path) -> Path:
    """A small finished work folder: two steps, one a checkpoint with weights, tokenizer and its own files."""
    work = tmp_path / "outputs" / "work" / "00_x"
    ck = work / "runs" / "clm" / "epoch-2"
    ck.mkdir(parents=True)
    for name, text in (("model.safetensors", "W" * 1000), ("tokenizer.json", "{}"), ("config.json", "{}"),
                       ("training_log.json", json.dumps({"loss": 1.0}))):
        (ck / name).write_text(text)
    (work / "runs" / "clm" / "trainer").mkdir()
    (work / "runs" / "clm" / "trainer" / "optimizer.pt").write_text("O")
    (work / "runs" / "clm" / "step.json").write_text(json.dumps({"step": "train/clm", "key": "k1", "status": "done",
                                                                 "started": "2026-12-02T03:00:00"}))
    audit = work / "audit" / "clm"
    audit.mkdir(parents=True)
    (audit / "step.json").write_text(json.dumps({"step": "audit", "key": "k2", "status": "done"}))
    (audit / "metrics.json").write_text(json.dumps({"privacy": 0.9, "checkpoint": str(ck)}))
    (work / ".lock").write_text("{}")
    (work / "manifest.json").write_text("{}")
    return work


def test_ship_leaves_weights_trainer_state_and_machine_paths_out_and_install_puts_it_back(tmp_path, monkeypatch):
    from toolkit.models import WEIGHTS_NOT_SHIPPED

    work = _fake_work(tmp_path)
    into = tmp_path / "shipped"
    monkeypatch.setattr(workshop, "default_work_dir", lambda name, *a: tmp_path / "home" / name)
    out = workshop.ship("00_x", work_dir=work, into=into, parameters={"n": 1})
    files = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    assert files == {"runs/clm/epoch-2/config.json", "runs/clm/epoch-2/training_log.json",
                     f"runs/clm/epoch-2/{WEIGHTS_NOT_SHIPPED}", "runs/clm/step.json", "audit/clm/step.json",
                     "audit/clm/metrics.json", workshop.RECORD}
    record = workshop.read_record(out)
    assert record["steps"] == {"audit/clm": "k2", "runs/clm": "k1"} and record["parameters"] == {"n": 1}
    assert record["weights_left_out"] == 1 and record["work_dir"].endswith("home/00_x")
    assert "started" not in json.loads((out / "runs/clm/step.json").read_text())
    shipped_text = "".join(p.read_text() for p in out.rglob("*.json") if p.name != workshop.RECORD)
    assert str(tmp_path) not in shipped_text and "{work_dir}/runs/clm/epoch-2" in shipped_text

    # installed into the notebook's own work folder, the paths written for it
    notebooks = tmp_path / "nb"
    notebooks.mkdir()
    target = (notebooks / record["work_dir"]).resolve()
    assert workshop.install(into, notebooks=notebooks) == {"00_x": "copied"}
    assert json.loads((target / "audit/clm/metrics.json").read_text())["checkpoint"] == str(target / "runs/clm/epoch-2")
    assert not (target / workshop.RECORD).exists()
    assert workshop.install(into, notebooks=notebooks) == {"00_x": "in place"}
    (target / "audit/clm/step.json").write_text(json.dumps({"key": "other", "status": "done"}))  # a live run's
    with pytest.raises(ToolkitError, match="holds results of another run"):
        workshop.install(into, notebooks=notebooks)
    assert workshop.install(into, notebooks=notebooks, force=True) == {"00_x": "copied"}


def test_an_unfinished_step_is_not_shipped(tmp_path):
    work = _fake_work(tmp_path)
    (work / "audit/clm/step.json").write_text(json.dumps({"step": "audit", "key": "k2", "status": "running"}))
    with pytest.raises(ToolkitError, match="is not finished"):
        workshop.ship("00_x", work_dir=work, into=tmp_path / "s", parameters={})


def test_a_step_that_would_run_in_workshop_mode_stops_with_its_name(tmp_path, monkeypatch):
    out = tmp_path / "step"
    assert cached_step("audit", out, {"a": 1}, lambda: 1) == 1  # computes, live
    ran = []
    monkeypatch.setenv(REQUIRE_CACHED, "1")
    assert cached_step("audit", out, {"a": 1}, lambda: ran.append(1), lambda: "loaded") == "loaded"  # cached: fine
    with pytest.raises(ToolkitError, match=r"step audit would run \(its key is .*, the shipped one"):
        cached_step("audit", out, {"a": 2}, lambda: ran.append(2))
    assert not ran and (out / "step.json").is_file()  # nothing computed, nothing removed


def test_a_checkpoint_shipped_without_weights_is_a_clear_error(tmp_path):
    from toolkit.models import WEIGHTS_NOT_SHIPPED, load_model

    (tmp_path / "config.json").write_text("{}")
    (tmp_path / WEIGHTS_NOT_SHIPPED).write_text("x")
    with pytest.raises(ToolkitError, match="shipped result without its model weights"):
        load_model(tmp_path)


def test_the_work_dir_is_the_notebook_s_parameter():
    assert workshop.default_work_dir("00_quickstart") == ROOT / "outputs" / "work" / "00_quickstart"


def test_every_shipped_run_is_a_notebook_with_its_workshop_parameters():
    from toolkit.pipelines.notebooks import read_demo_parameters

    params = read_demo_parameters(workshop.PARAMETERS)
    names = {p.stem for p in (ROOT / "notebooks").glob("*.ipynb")}
    for name, folder in workshop.shipped().items():
        record = workshop.read_record(folder)
        assert name in names and record["notebook"] == name
        assert record["parameters"] == params.get(name, {}), f"{name}: shipped at other parameters than workshop.yaml"
        assert (ROOT / "notebooks" / record["work_dir"]).resolve() == workshop.default_work_dir(name)
        assert not [p for p in folder.rglob("*") if p.name.endswith(workshop.WEIGHT_SUFFIXES)]
    assert "00_quickstart" in workshop.shipped()


@pytest.mark.parametrize("name", sorted(workshop.shipped()))
def test_a_shipped_run_is_current(name):
    """The shipped run repeated over a copy of it with every step required cached (about 10 s for 00 on 2 cores): a
    step key that the current code or config no longer gives fails here, naming the step — re-ship with
    ``python -m toolkit.pipelines.workshop --ship NAME`` after running the notebook at workshop.yaml's parameters."""
    folder = workshop.shipped()[name]
    if "experiment" not in workshop.read_record(folder):
        pytest.skip(f"{name}: no experiment config; checked by running the notebook in workshop mode")
    workshop.check_shipped(folder)


def test_a_stale_shipped_run_fails_the_check(tmp_path):
    folder = workshop.shipped()["00_quickstart"]
    copy = tmp_path / "00_quickstart"
    shutil.copytree(folder, copy)
    step = copy / "audit" / "ppclm" / "epoch-12" / "step.json"
    info = json.loads(step.read_text())
    step.write_text(json.dumps({**info, "key": "0" * 64}))  # as if the audit's inputs had changed since shipping
    with pytest.raises(ToolkitError, match="step audit/ppclm/epoch-12 would run"):
        workshop.check_shipped(copy)


def test_make_workshop_runs_the_demo_in_workshop_mode():
    make = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "demo --workshop" in make.split("\nworkshop:", 1)[1].split("\n\n", 1)[0]


@pytest.mark.parametrize("notebook", sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py")), ids=lambda p: p.stem)
def test_every_notebook_has_two_to_four_exercises_each_with_a_solution(notebook):
    """The workshop's exercises (issue 55): 2–4 markdown cells tagged ``exercise``, each starting ``**Exercise N.**``
    (numbered from 1) and followed by a code cell tagged ``solution`` (the notebooks' narrative is written on its own
    branch: this holds once it is merged)."""
    import jupytext

    cells = jupytext.read(notebook).cells
    found = [i for i, c in enumerate(cells) if "exercise" in c.metadata.get("tags", [])]
    assert 2 <= len(found) <= 4, f"{notebook.name}: {len(found)} exercises"
    for n, i in enumerate(found, 1):
        assert cells[i].cell_type == "markdown" and cells[i].source.lstrip().startswith(f"**Exercise {n}.**")
        nxt = cells[i + 1] if i + 1 < len(cells) else None
        assert nxt is not None and nxt.cell_type == "code" and "solution" in nxt.metadata.get("tags", [])


def test_workshop_mode_runs_the_shipped_and_the_listed_notebooks_and_names_the_others(tmp_path, monkeypatch):
    work = _fake_work(tmp_path)
    into = tmp_path / "shipped"
    monkeypatch.setattr(workshop, "default_work_dir", lambda name, *a: tmp_path / "outputs" / "work" / name)
    workshop.ship("00_x", work_dir=work, into=into, parameters={})
    shutil.rmtree(work)  # a fresh clone: no work folder yet
    notebooks = tmp_path / "nb"
    notebooks.mkdir()
    for name in ("00_x", "01_y", "02_z"):
        (notebooks / f"{name}.ipynb").write_text("{}")
    listed = tmp_path / "workshop.yaml"
    listed.write_text("01_y: {}\n")
    plan = workshop.prepare_workshop(notebooks, parameters=listed, into=into)
    assert plan.shipped == {"00_x"} and plan.run == ["00_x", "01_y"] and plan.parameters == listed
    assert plan.lines == ["00_x: shipped results copied",
                          "workshop mode: no shipped results for 02_z (run them live: make demo)"]
    home = (notebooks / workshop.read_record(into / "00_x")["work_dir"]).resolve()  # relative to the notebooks
    assert (home / "audit/clm/metrics.json").is_file()  # copied where the notebook's cache finds it
    assert workshop.prepare_workshop(notebooks, parameters=listed, into=into, only=["02"]).run == []
