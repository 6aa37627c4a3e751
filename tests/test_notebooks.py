"""Notebooks execute top to bottom headless (papermill) with reduced parameters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolkit.pipelines.notebooks import run_notebook

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
#: the attack battery at a test's size (the config's sizes are the demo's; each attack's figures are checked against
#: independent computations in test_attacks.py and test_pll_budget.py)
SMALL_ATTACKS = {"pii_occurrences": 20, "pii_candidates": 5, "pii_window": 64, "memorisation_occurrences": 50,
                 "canary_references": 100,
                 # a masked model's windows scored from 4 strided copies instead of the profile's K (the notebook's
                 # flow is tested here; the estimator against exact in test_pll_budget.py); causal models ignore it
                 "pll_copies": 4}


def execute(tmp_path, name: str, parameters: dict) -> str:
    """Run a notebook with papermill, check that no cell failed, return the text of all outputs."""
    import nbformat  # here, not at collection: its import takes seconds (jsonschema's format checkers)
    executed = run_notebook(NOTEBOOKS / name, tmp_path, parameters)
    nb = nbformat.read(executed, as_version=4)
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
    return "".join(str(o) for c in nb.cells for o in c.get("outputs", []))


LEVELS = ("red", "amber", "incomplete", "green")


def check_course(nb, n_exercises: tuple[int, int] = (2, 4)) -> None:
    """An executed notebook's exercises and take-away: 2–4 markdown cells tagged ``exercise`` starting
    ``**Exercise N.**`` (N = 1, 2, …), each followed by a code cell tagged ``solution`` that ran (an output, no error)
    and a markdown cell interpreting it; the last markdown cell tagged ``takeaway``, starting ``### Take-away``, 3–5
    bullets, linking the cheat sheet."""
    cells = nb.cells
    exercises = [i for i, c in enumerate(cells) if "exercise" in c.metadata.get("tags", [])]
    assert n_exercises[0] <= len(exercises) <= n_exercises[1], len(exercises)
    for n, i in enumerate(exercises, start=1):
        assert cells[i].cell_type == "markdown" and cells[i].source.startswith(f"**Exercise {n}.**")
        solution, reading = cells[i + 1], cells[i + 2]
        assert solution.cell_type == "code" and "solution" in solution.metadata.get("tags", [])
        outputs = solution.get("outputs", [])
        assert outputs and not any(o.get("output_type") == "error" for o in outputs), solution.source
        assert reading.cell_type == "markdown" and not reading.metadata.get("tags")
    markdown = [c for c in cells if c.cell_type == "markdown"]
    last = markdown[-1]
    assert "takeaway" in last.metadata.get("tags", []) and last.source.startswith("### Take-away")
    assert 3 <= sum(line.startswith("- ") for line in last.source.splitlines()) <= 5
    assert "[cheat sheet](../docs/cheatsheet.md)" in last.source


def check_findings_match_verdicts(nb, work: Path, marker: str = "run_findings(run, results)") -> list[str]:
    """The closing findings (the output of the cell calling ``marker``) name each model's colour exactly as its
    ``verdict.json`` does — one line per model, no other colour for it; returns the findings' lines."""
    from toolkit.results import collect_run

    cell = next(c for c in nb.cells if c.cell_type == "code" and marker in c.source)
    text = "".join(str(o.get("data", {}).get("text/markdown", "")) for o in cell.get("outputs", []))
    lines = [line.removeprefix("- ") for line in text.splitlines()]
    verdicts = collect_run(work).verdicts
    assert verdicts
    for label, v in verdicts.items():
        own = [line for line in lines if line.startswith(f"{label}: verdict ")]
        assert len(own) == 1, (label, lines)
        assert own[0].startswith(f"{label}: verdict {v['level'].upper()}"), (label, v["level"], own[0])
    return lines


def check_privacy_utility_figures(nb) -> int:
    """Every privacy–utility figure of the executed notebook plots held-out utility and draws the base model's
    point; returns how many there are."""
    figures = [o["data"]["application/vnd.plotly.v1+json"] for c in nb.cells for o in c.get("outputs", [])
               if "application/vnd.plotly.v1+json" in o.get("data", {})]
    tradeoff = [f for f in figures if str(f["layout"].get("title", {}).get("text", "")).startswith("Privacy")]
    for f in tradeoff:
        axes = [v.get("title", {}).get("text", "") for k, v in f["layout"].items() if k.startswith("xaxis")]
        assert any("held-out utility" in a for a in axes), axes
        assert any(t.get("name") == "base model (before fine-tuning)" for t in f["data"])
    return len(tradeoff)


@pytest.mark.slow
def test_notebook_01_identifier_analysis(tmp_path):
    import nbformat  # here, not at collection: its import takes seconds (jsonschema's format checkers)
    out_ids = tmp_path / "identifiers"
    text = execute(tmp_path, "01_identifier_analysis.ipynb",
                   {"max_documents": 150, "ns": [1, 2], "ks": [2, 3], "out_dir": str(out_ids)})
    assert (out_ids / "terms.parquet").is_file() and (out_ids / "summary.json").is_file()
    assert (tmp_path / "01_identifier_analysis.html").stat().st_size > 10_000
    assert "of distinct words are used by fewer than k=2" in text
    nb = nbformat.read(tmp_path / "01_identifier_analysis.ipynb", as_version=4)
    table = next(str(o) for c in nb.cells if "recall {c}" in c.source for o in c.get("outputs", [])
                 if o.get("output_type") == "execute_result")
    assert "recall NAME" in table and "NaN" not in table  # one row per detector, no undefined cells
    bars = [o for c in nb.cells for o in c.get("outputs", [])
            if "%|" in str(o.get("data", {}).get("text/plain", ""))]
    # a finished bar leaves no text behind (toolkit.progress: none frozen at 99%); at most one, spaCy's, ran
    assert len(bars) <= 1 and all("spaCy NER" in str(b) and "100%" in str(b) for b in bars), bars
    check_course(nb)
    assert "word types join at k=3" in text  # exercise 1's solution, computed


@pytest.mark.slow
def test_notebook_02_masked_lm_strategies(tmp_path):
    import nbformat  # here, not at collection: its import takes seconds (jsonschema's format checkers)
    text = execute(tmp_path, "02_masked_lm_strategies.ipynb",
                   {"n_individuals": 6, "epochs": [1, 2], "dp_epochs": [1],
                    "strategies": ["mlm", "mlm_pseudo", "ppmlm", "mlm_dp"], "n_bootstrap": 20,
                    "attacks": SMALL_ATTACKS, "downstream_epochs": 1, "work_dir": str(tmp_path / "work")})
    assert "count-attack MIA AUC" in text and "privacy" in text and "held-out utility" in text
    assert (tmp_path / "work" / "audit" / "ppmlm" / "epoch-2" / "metrics.json").is_file()
    nb = nbformat.read(tmp_path / "02_masked_lm_strategies.ipynb", as_version=4)
    check_course(nb)
    lines = check_findings_match_verdicts(nb, tmp_path / "work")
    assert any(line.startswith("mlm_dp (epoch 1): verdict ") and "gain retained" in line for line in lines)
    assert check_privacy_utility_figures(nb) == 2  # privacy–utility and its variants
    assert "TPR @ FPR" not in text  # 6 non-members resolve no FPR ≤ 10%: the columns are left out, and it is said
    assert "TPR at FPR 0.1%, 1%, 10% is left out" in text

    # the notebook goes through the step cache: a new k re-runs the identifier step (and what depends on it), not
    # the training of mlm, which reads no identifier
    work = tmp_path / "work"
    step = json.loads((work / "identifiers_members" / "step.json").read_text())
    execute(tmp_path / "again", "02_masked_lm_strategies.ipynb",
            {"n_individuals": 6, "epochs": [1, 2], "dp_epochs": [1], "k": 3,
             "strategies": ["mlm", "ppmlm"], "n_bootstrap": 20, "attacks": {"enabled": False},
             "downstream_epochs": 0, "work_dir": str(work)})
    again = json.loads((work / "identifiers_members" / "step.json").read_text())
    assert again["key"] != step["key"] and again["inputs"]["identifiers"]["k"] == 3
    status = {s["name"]: s["status"] for s in json.loads((work / "manifest.json").read_text())["steps"]}
    assert status["identifiers_members"] == "ran" and status["train/ppmlm"] == "ran"
    assert status["train/mlm"] == "cached" and status["base"] == "cached"


@pytest.mark.slow
def test_notebook_03_causal_lm_strategies(tmp_path):
    import nbformat  # here, not at collection: its import takes seconds (jsonschema's format checkers)
    text = execute(tmp_path, "03_causal_lm_strategies.ipynb",
                   {"n_individuals": 6, "epochs": [1, 2], "dp_epochs": [1],
                    "strategies": ["clm", "clm_pseudo", "ppclm", "clm_dp"], "n_bootstrap": 20,
                    "attacks": SMALL_ATTACKS, "regurgitation_new_tokens": 8, "work_dir": str(tmp_path / "work")})
    assert "count-attack MIA AUC" in text and "share_reproduced" in text
    assert "PII inference top-1" in text  # what each strategy protects: the table after the battery
    assert (tmp_path / "work" / "audit" / "ppclm" / "epoch-2" / "metrics.json").is_file()
    nb = nbformat.read(tmp_path / "03_causal_lm_strategies.ipynb", as_version=4)
    check_course(nb)
    lines = check_findings_match_verdicts(nb, tmp_path / "work")
    assert any(line.startswith("clm_dp (epoch 1): verdict ") and "gain retained" in line for line in lines)
    assert check_privacy_utility_figures(nb) == 2
