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
    assert len(bars) == 1 and "spaCy NER" in str(bars[0]), bars  # one labelled bar; spaCy runs once


@pytest.mark.slow
def test_notebook_02_masked_lm_strategies(tmp_path):
    text = execute(tmp_path, "02_masked_lm_strategies.ipynb",
                   {"n_individuals": 6, "epochs": [1, 2], "dp_epochs": [1],
                    "strategies": ["mlm", "mlm_pseudo", "ppmlm", "mlm_dp"], "n_bootstrap": 20,
                    "attacks": SMALL_ATTACKS, "downstream_epochs": 1, "work_dir": str(tmp_path / "work")})
    assert "MIA AUC" in text and "privacy" in text
    assert (tmp_path / "work" / "audit" / "ppmlm" / "epoch-2" / "metrics.json").is_file()

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
    text = execute(tmp_path, "03_causal_lm_strategies.ipynb",
                   {"n_individuals": 6, "epochs": [1, 2], "dp_epochs": [1],
                    "strategies": ["clm", "clm_pseudo", "ppclm", "clm_dp"], "n_bootstrap": 20,
                    "attacks": SMALL_ATTACKS, "regurgitation_new_tokens": 8, "work_dir": str(tmp_path / "work")})
    assert "MIA AUC" in text and "share_reproduced" in text
    assert "PII inference top-1" in text  # what each strategy protects: the table after the battery
    assert (tmp_path / "work" / "audit" / "ppclm" / "epoch-2" / "metrics.json").is_file()
