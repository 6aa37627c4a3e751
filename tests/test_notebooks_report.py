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
    # compact: one table row per model, the details folded; no column that no run measured (issue 55, problem 7)
    assert "deciding figure (interval)" in text and "s verdict in full (statement" in text  # text is a repr: \\'s
    assert "strongest membership attack, AUC [95% interval]" in text
    import nbformat

    nb = nbformat.read(tmp_path / "06_results_and_report.ipynb", as_version=4)
    cell = next(c for c in nb.cells if "verdicts_html(runs, compact=True)" in c.source)
    block = next(o["data"]["text/html"] for o in cell.outputs if "text/html" in o.get("data", {}))
    table_part = block.split("<details>")[0]
    assert len(table_part) < 1200 * table_part.count("<tr")  # a short row per model; the prose is folded
    assert len(table_part) < len(block) and "Also triggered" not in table_part
    table = next(c for c in nb.cells if "summary.drop(columns=empty)" in c.source)
    shown = next(o["data"]["text/html"] for o in table.outputs if o.get("output_type") == "execute_result")
    from toolkit.plots.runs import last_checkpoints
    from toolkit.report import collect_run

    runs = [collect_run(run_dir, "tiny"), collect_run(old, "before the battery")]
    full = last_checkpoints(runs)
    empty = [c for c in full.columns if full[c].isna().all()]
    assert all(f"<th>{c}</th>" not in shown for c in empty)  # no all-empty column is shown ...
    assert all(f"<th>{c}</th>" in shown for c in full.columns if c not in empty)  # ... and every other one is
    assert not empty or "Not measured by any run here, left out" in text
    assert "every attack, last checkpoints" in text
    html = report.read_text(encoding="utf-8")
    assert 'id="run1-tradeoff"' in html and "tiny" in html and 'id="run2-tradeoff"' in html
    assert 'id="run3-' not in html and html.count('class="verdict verdict-') == 3


def test_a_run_without_verdicts_says_why_in_the_words_of_its_kind():
    """04's extraction and 05's scrubbing runs have no battery by design; only a run audited before the battery
    existed is told that (issue 55, problem 7)."""
    from types import SimpleNamespace

    import pandas as pd

    from toolkit.report.verdicts import MISSING_BY_KIND, missing_verdict, verdicts_compact_html

    def run(**kw):
        base = {"label": "r", "extraction": None, "anonymity": [], "reviews": [], "audits": {},
                "attack_models": lambda: {}}
        return SimpleNamespace(**(base | kw))

    extraction = run(label="04", extraction=pd.DataFrame({"checkpoint": [0, 1]}))
    scrubbing = run(label="05", anonymity=[{"n_predictions": 10}])
    old = run(label="old", audits={("mlm", 1): {}})
    assert missing_verdict(extraction) == MISSING_BY_KIND["extraction"] and "by design" in missing_verdict(extraction)
    assert missing_verdict(scrubbing) == MISSING_BY_KIND["scrubbing"] and "anonymity test" in missing_verdict(scrubbing)
    assert missing_verdict(old) == MISSING and missing_verdict(run()) == MISSING_BY_KIND["empty"]
    for r in (extraction, scrubbing):
        assert "before the attack battery" not in missing_verdict(r)
    page = verdicts_compact_html([extraction, scrubbing, old])
    assert page.count("No verdict by design") == 2 and MISSING in page and "<table" not in page


def test_compact_verdicts_are_one_row_per_model_with_the_details_folded():
    from types import SimpleNamespace

    from toolkit.report.verdicts import RULES, verdicts_compact_html, verdicts_html

    red = {"level": "red", "rule": "membership_tpr", "attack": "loss", "figure": "TPR 40% at FPR 1% [31%, 50%]",
           "reasons": ["loss: TPR 40%", "min_k: AUC 0.9 [0.85, 0.95]"], "not_measured": ["canary exposure"]}
    green = {"level": "green", "rule": "none", "detectable_auc": 0.61, "reasons": []}
    battery = {"strongest": "loss", "n_members": 40, "n_nonmembers": 40,
               "attacks": {"loss": {"auc": 0.93, "auc_ci": [0.88, 0.97]}, "zlib": {"auc": 0.8}}}
    models = {"mlm": {"strategy": "mlm", "verdict": red, "attacks": battery},
              "mlm_dp": {"strategy": "mlm_dp", "verdict": green, "attacks": {"n_members": 40, "n_nonmembers": 40}}}
    run = SimpleNamespace(label="02", extraction=None, anonymity=[], reviews=[], audits={("mlm", 1): {}},
                          attack_models=lambda: models)
    page = verdicts_compact_html([run])
    assert page.count('class="verdict verdict-') == 2 and page.count("<tr") == 3  # header + one row per model
    table, details = page.split("<details>")
    assert "membership_tpr" in table and "TPR 40% at FPR 1% [31%, 50%]" in table
    assert "smallest detectable AUC ≈ 0.610 with 40 members and 40 non-members" in table
    assert "min_k: AUC 0.9" not in table and "AUC 0.9 [0.85, 0.95]" in details and "canary exposure" in details
    assert RULES["membership_tpr"] in table  # the plain words, on hover
    assert "AUC 0.930 [0.880, 0.970]" in table  # the strongest attack with its recorded interval
    assert verdicts_html([run], compact=True) == page and len(page) < len(verdicts_html([run])) * 3
