"""Notebooks 00 (quick start) and 06 (results and report) execute headless with reduced parameters."""

from __future__ import annotations

import shutil

import pytest
from _experiment_fixtures import tiny_run, write_config
from test_notebooks import check_course, check_findings_match_verdicts, check_privacy_utility_figures, execute

from toolkit.report.verdicts import MISSING


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return tiny_run(tmp_path_factory)


@pytest.mark.slow
def test_notebook_00_quickstart(tmp_path, run_dir):
    work = tmp_path / "work"
    shutil.copytree(run_dir, work)  # the tiny run, already made: the notebook finds every step cached
    report = tmp_path / "quickstart.html"
    text = execute(tmp_path, "00_quickstart.ipynb",
                   {"config": str(write_config(tmp_path / "tiny.yaml")), "work_dir": str(work),
                    "report_path": str(report)})
    import nbformat

    assert "cached" in text and "privacy" in text
    assert "TPR @ FPR 10%" in text or "TPR at FPR 0.1%, 1%, 10% is left out" in text
    assert "[run]" not in text  # one compact step table, no log lines
    nb = nbformat.read(tmp_path / "00_quickstart.ipynb", as_version=4)
    check_course(nb)
    lines = check_findings_match_verdicts(nb, work)  # the computed findings say what the verdicts say
    assert any("the papers' metrics: privacy" in line for line in lines)
    assert check_privacy_utility_figures(nb) == 1
    # it ends with the verdict of each audited model, read from the run directory's attack files
    assert (work / "attacks" / "base" / "verdict.json").is_file()
    assert text.count('class="verdict verdict-') == 3 and "smallest detectable AUC" in text
    assert text.index("Report: <a") < text.index('class="verdict verdict-')  # the last output: after the report
    html = report.read_text(encoding="utf-8")
    assert 'id="run1-mia"' in html and "Opinion 28/2024" in html
    assert html.index('<section id="verdict">') < html.index('id="summary"')


@pytest.mark.slow
def test_notebook_06_results_and_report(tmp_path, run_dir):
    report = tmp_path / "report.html"
    old = tmp_path / "old"  # a run made before the attack battery: no attacks/ folder
    shutil.copytree(run_dir, old, ignore=shutil.ignore_patterns("attacks"))
    text = execute(tmp_path, "06_results_and_report.ipynb",
                   {"run_dirs": {"tiny": str(run_dir), "before the battery": str(old),
                                 "04 e-mail extraction": str(tmp_path / "not_there")},
                    "report_path": str(report)})
    assert "missing: skipped" in text and "found" in text
    assert "Report written" in text and "No extraction results found" in text
    # the verdicts of every run: badges for the run with attack results, a note for the one without
    assert text.count('class="verdict verdict-') == 3 and MISSING in text
    assert "every attack, last checkpoints" in text
    html = report.read_text(encoding="utf-8")
    assert 'id="run1-tradeoff"' in html and "tiny" in html and 'id="run2-tradeoff"' in html
    assert 'id="run3-' not in html and html.count('class="verdict verdict-') == 3
