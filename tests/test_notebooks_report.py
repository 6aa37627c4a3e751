"""Notebooks 00 (quick start) and 06 (results and report) execute headless with reduced parameters."""

from __future__ import annotations

import shutil

import pytest
from _experiment_fixtures import tiny_run, write_config
from test_notebooks import execute


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
    assert "cached" in text and "privacy" in text and "TPR @ FPR 10%" in text
    assert "membership attack AUC" in text  # the computed findings
    html = report.read_text(encoding="utf-8")
    assert 'id="run1-mia"' in html and "Opinion 28/2024" in html


@pytest.mark.slow
def test_notebook_06_results_and_report(tmp_path, run_dir):
    report = tmp_path / "report.html"
    text = execute(tmp_path, "06_results_and_report.ipynb",
                   {"run_dirs": {"tiny": str(run_dir), "04 e-mail extraction": str(tmp_path / "not_there")},
                    "report_path": str(report)})
    assert "missing: skipped" in text and "found" in text
    assert "Report written" in text and "No extraction results found" in text
    html = report.read_text(encoding="utf-8")
    assert 'id="run1-tradeoff"' in html and "tiny" in html and 'id="run2-' not in html
