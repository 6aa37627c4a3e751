"""``make measure`` (benchmarks/measure.py): it reads what pytest and ``make demo`` print, and writes the same figures
into README.md and docs/performance.md as tests/test_docs.py reads them back."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from toolkit.pipelines.notebooks import NotebookRun, timing_table

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("measure", ROOT / "benchmarks" / "measure.py")
measure = importlib.util.module_from_spec(spec)
spec.loader.exec_module(measure)


def test_parse_pytest_last_line_and_skip_reasons():
    text = ("....s\n=== slowest 40 durations ===\n382.30s call     tests/test_notebooks.py::test_notebook_02\n"
            "63.73s setup    tests/test_experiment.py::test_run_writes_every_step\n"
            "=== 3 skipped ===\n3 skipped: needs chromium\n"
            "========= 894 passed, 3 skipped, 2 deselected in 2308.12s (0:38:28) =========\n")
    got = measure.parse_pytest(text)
    assert got["durations"] == [
        {"seconds": 382.3, "phase": "call", "test": "tests/test_notebooks.py::test_notebook_02"},
        {"seconds": 63.73, "phase": "setup", "test": "tests/test_experiment.py::test_run_writes_every_step"}]
    assert (got["passed"], got["skipped"], got["deselected"], got["failed"]) == (894, 3, 2, 0)
    assert got["pytest_seconds"] == pytest.approx(2308.12) and got["skip_reasons"] == ["3 skipped: needs chromium"]
    bad = measure.parse_pytest("== 1 failed, 10 passed, 1 error in 5.00s ==")
    assert (bad["failed"], bad["passed"], bad["errors"]) == (1, 10, 1)
    with pytest.raises(ValueError):
        measure.parse_pytest("no summary")


def test_parse_demo_reads_the_demo_table():
    runs = [NotebookRun("00_quickstart", True, 95.3), NotebookRun("02_masked_lm_strategies", False, 380.2, "boom")]
    got = measure.parse_demo("[1/2] ...\n" + timing_table(runs) + "\n1/2 notebooks ran\n")
    assert got["notebooks"] == {"00_quickstart": {"ok": True, "seconds": 95.3},
                                "02_masked_lm_strategies": {"ok": False, "seconds": 380.2}}
    assert (got["ok"], got["of"], got["notebook_seconds"]) == (1, 2, pytest.approx(475.5))


def test_parse_demo_reads_the_demo_s_own_sizes_and_the_readme_says_them():
    runs = [NotebookRun("00_quickstart", True, 95.3), NotebookRun("02_masked_lm_strategies", True, 380.2)]
    text = ("[1/2] 00_quickstart ...\n[2/2] 02_masked_lm_strategies ... (n_individuals=12, strategies=['mlm'])\n"
            + timing_table(runs) + "\n2/2 notebooks ran\n")
    got = measure.parse_demo(text)
    assert got["notebooks"]["02_masked_lm_strategies"]["parameters"] == "n_individuals=12, strategies=['mlm']"
    assert "parameters" not in got["notebooks"]["00_quickstart"]
    record = {"commit": "abcdef0123456789", "date": "2026-11-28", "machine": {"cores": 2, "memory_gib": 24},
              "steps": {"install": {"seconds": 60.0}, "demo": {"seconds": 1700.2, **got}}}
    assert "at the demo's sizes of notebooks/demo.yaml" in measure.readme_lines(record)["make demo"]
    del got["notebooks"]["02_masked_lm_strategies"]["parameters"]
    assert "demo's sizes" not in measure.readme_lines(record)["make demo"]


def test_written_documents_state_the_record(tmp_path):
    import test_docs

    (tmp_path / "docs").mkdir()
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    shutil.copy(ROOT / "docs" / "performance.md", tmp_path / "docs" / "performance.md")
    record = {"commit": "abcdef0123456789", "date": "2026-11-28", "machine": {"cores": 2, "memory_gib": 24},
              "steps": {"install": {"seconds": 250.4, "load_before": 0.1},
                        "quickstart": {"seconds": 88.0, "load_before": 0.2},
                        "test": {"seconds": 801.6, "passed": 900, "failed": 0, "errors": 0, "skipped": 3,
                                 "deselected": 0, "pytest_seconds": 790.0, "load_before": 0.3,
                                 "durations": [{"seconds": 120.5, "phase": "call", "test": "tests/test_x.py::test_y"}]},
                        "test-fast": {"seconds": 150.0, "passed": 820, "failed": 0, "errors": 0, "skipped": 0,
                                      "deselected": 83, "pytest_seconds": 140.0, "load_before": 0.2},
                        "demo": {"seconds": 1700.2, "ok": 8, "of": 8, "notebook_seconds": 1690.0, "load_before": 0.4,
                                 "notebooks": {"00_quickstart": {"ok": True, "seconds": 90.0}}}}}
    measure.write_docs(record, root=tmp_path)
    readme = (tmp_path / "README.md").read_text(encoding="utf-8")
    perf = (tmp_path / "docs" / "performance.md").read_text(encoding="utf-8")
    line = next(x for x in readme.splitlines() if x.startswith("`make test` —"))
    assert test_docs._seconds(line) == 802 and "`abcdef0`, 2026-11-28" in line and "900 tests" in line
    quick = next(x for x in readme.splitlines() if x.startswith("This took "))
    assert "1 min 28 s" in quick and "`abcdef0`, 2026-11-28" in quick
    demo = next(x for x in readme.splitlines() if x.startswith("`make demo` —"))
    assert test_docs._seconds(demo) == 1700 and "8/8 notebooks" in demo
    row = next(x for x in perf.splitlines() if x.startswith("| `make test` |"))
    assert test_docs._seconds(row) == 802 and "`abcdef0`, 2026-11-28" in row and ", idle," in row
    assert any(x.startswith("| quick start:") and "1 min 28 s" in x for x in perf.splitlines())
    assert (tmp_path / "docs" / "measurements.json").is_file()
    assert "| 120.5 | call | `tests/test_x.py::test_y` |" in perf
    measure.write_docs(record, root=tmp_path)  # again: lines and the durations section replaced, not added
    perf2 = (tmp_path / "docs" / "performance.md").read_text(encoding="utf-8")
    readme2 = (tmp_path / "README.md").read_text(encoding="utf-8")
    assert perf2 == perf and readme2 == readme
    assert len(json.loads((tmp_path / "docs" / "measurements.json").read_text(encoding="utf-8"))) == 2


def test_the_workshop_step_times_each_notebook_and_docs_workshop_states_it(tmp_path):
    """``make workshop`` is a step of the measurement (before ``make demo``: a fresh clone's work folders); its table
    is read like the demo's and written to docs/workshop.md's "Measured times", replaced on the next measurement."""
    assert measure.STEPS.index("workshop") < measure.STEPS.index("demo")
    assert measure.COMMANDS["workshop"] == ["make", "workshop"]
    text = ("[1/2] 00_quickstart ...\n[1/2] 00_quickstart: done in 41.2 s\nnotebook  status  seconds  time\n"
            "00_quickstart  ok  41.2  0:41\n01_identifier_analysis  FAILED  20.0  0:20\ntotal  1/2  61.2  1:01\n")
    got = measure.parse_demo(text)
    (tmp_path / "docs").mkdir()
    for name in ("README.md", "docs/performance.md", "docs/workshop.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    record = {"commit": "abcdef0123456789", "date": "2026-12-02", "machine": {"cores": 2, "memory_gib": 24},
              "steps": {"install": {"seconds": 250.4, "load_before": 0.1},
                        "workshop": {"seconds": 70.3, "load_before": 0.2, **got}}}
    measure.write_docs(record, root=tmp_path)
    plan = (tmp_path / "docs" / "workshop.md").read_text(encoding="utf-8")
    assert "| 00_quickstart | ok | 41.2 |" in plan and "| 01_identifier_analysis | FAILED | 20.0 |" in plan
    assert "1 min 10 s wall, 1/2 notebooks ok; commit `abcdef0`, 2026-12-02" in plan
    measure.write_docs(record, root=tmp_path)
    assert (tmp_path / "docs" / "workshop.md").read_text(encoding="utf-8") == plan
    assert plan.count(measure.WORKSHOP_HEADING) == 1
