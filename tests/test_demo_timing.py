"""The time of long steps is visible: ``make demo`` ends with a table of every notebook's time, and every bar of the
package goes through ``toolkit.progress.progress_bar`` (labelled, with an ETA; one line every 30 s in a log)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from toolkit.errors import ToolkitError
from toolkit.pipelines import notebooks
from toolkit.pipelines.notebooks import NotebookRun, timing_table

PKG = Path(__file__).resolve().parents[1] / "toolkit"


def test_timing_table_has_a_row_per_notebook_and_the_total():
    runs = [NotebookRun("00_quickstart", True, 95.3), NotebookRun("02_masked_lm_strategies", False, 3800.2, "boom"),
            NotebookRun("06_results_and_report", True, 11.1)]
    lines = timing_table(runs).splitlines()
    assert len(lines) == 5 and lines[0].split() == ["notebook", "status", "seconds", "time"]
    assert lines[1].split() == ["00_quickstart", "ok", "95.3", "1:35"]
    assert lines[2].split() == ["02_masked_lm_strategies", "FAILED", "3800.2", "1:03:20"]
    assert lines[4].split() == ["total", "2/3", "3906.6", "1:05:07"]
    assert len({len(line) for line in lines}) == 1  # aligned columns


def test_run_notebooks_prints_each_time_and_the_table(tmp_path, monkeypatch, capsys):
    nb_dir = tmp_path / "nb"
    nb_dir.mkdir()
    for name in ("01_a.ipynb", "02_b.ipynb"):
        (nb_dir / name).write_text("{}", encoding="utf-8")
    ran = []

    def fake_run(path, out_dir, parameters=None, **kw):
        ran.append((path.name, parameters))
        if path.name.startswith("02"):
            raise RuntimeError("cell failed")
        return out_dir / path.name

    monkeypatch.setattr(notebooks, "run_notebook", fake_run)
    results = notebooks.run_notebooks(nb_dir, tmp_path / "out", profile="cpu")
    out = capsys.readouterr().out
    assert [r.ok for r in results] == [True, False] and ran[0] == ("01_a.ipynb", {"profile": "cpu"})
    assert re.search(r"\[1/2\] 01_a: done in \d+\.\d s", out) and "[2/2] 02_b: FAILED" in out
    table = out[out.index("notebook  "):]
    assert re.search(r"^01_a\s+ok\s+\d+\.\d\s+0:00$", table, re.M) and re.search(r"^total\s+1/2\s", table, re.M)
    assert (tmp_path / "out" / "index.html").is_file()


def test_no_bar_bypasses_progress_bar():
    """tqdm is imported by toolkit/progress.py only: every other bar is a progress_bar (the rule of issue 24)."""
    offenders = [str(p.relative_to(PKG)) for p in PKG.rglob("*.py") if p.name != "progress.py"
                 and re.search(r"^\s*(from tqdm\b|import tqdm\b)", p.read_text(encoding="utf-8"), re.M)]
    assert not offenders, offenders


def test_a_notebook_s_own_demo_parameters_go_to_it_alone(tmp_path, monkeypatch):
    nb_dir = tmp_path / "nb"
    nb_dir.mkdir()
    for name in ("01_a.ipynb", "02_b.ipynb"):
        (nb_dir / name).write_text("{}", encoding="utf-8")
    ran = {}
    monkeypatch.setattr(notebooks, "run_notebook",
                        lambda path, out_dir, parameters=None, **kw: ran.setdefault(path.stem, parameters))
    notebooks.run_notebooks(nb_dir, tmp_path / "out", profile="cpu", parameters={"seed": 1},
                            per_notebook={"02_b": {"seed": 2, "n_individuals": 12}})
    assert ran == {"01_a": {"profile": "cpu", "seed": 1}, "02_b": {"profile": "cpu", "seed": 2, "n_individuals": 12}}
    assert "n_individuals=12" in (tmp_path / "out" / "index.html").read_text(encoding="utf-8")
    with pytest.raises(ToolkitError, match="'03_c', which is no notebook"):
        notebooks.run_notebooks(nb_dir, tmp_path / "out", per_notebook={"03_c": {"seed": 2}})


def test_demo_parameters_file_errors_name_the_file_and_entry(tmp_path):
    bad = tmp_path / "demo.yaml"
    bad.write_text("02_b: 12\n", encoding="utf-8")
    with pytest.raises(ToolkitError, match=r"demo\.yaml: '02_b': expected a mapping"):
        notebooks.read_demo_parameters(bad)
    bad.write_text("- 1\n", encoding="utf-8")
    with pytest.raises(ToolkitError, match="expected a mapping of notebook names"):
        notebooks.read_demo_parameters(bad)


def test_make_demo_s_parameters_are_parameters_of_their_notebooks():
    """Every entry of notebooks/demo.yaml names a notebook and parameters its parameters cell defines (papermill
    would only warn of an unknown one, and the notebook would run its default)."""
    root = PKG.parent
    for name, params in notebooks.read_demo_parameters(root / "notebooks" / "demo.yaml").items():
        script = (root / "notebooks" / f"{name}.py").read_text(encoding="utf-8")
        cell = script.split('# %% tags=["parameters"]', 1)[1].split("\n# %%", 1)[0]
        defined = {t.id for node in ast.parse(cell).body if isinstance(node, ast.Assign) for t in node.targets
                   if isinstance(t, ast.Name)}
        assert set(params) <= defined, (name, set(params) - defined)
    assert "--parameters notebooks/demo.yaml" in (root / "Makefile").read_text(encoding="utf-8")
