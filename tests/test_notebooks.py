"""Notebooks execute top to bottom headless (papermill) with reduced parameters."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from toolkit.notebooks import run_notebook

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"


@pytest.mark.slow
def test_notebook_01_identifier_analysis(tmp_path):
    out_ids = tmp_path / "identifiers"
    executed = run_notebook(NOTEBOOKS / "01_identifier_analysis.ipynb", tmp_path,
                            {"max_documents": 150, "ns": [1, 2], "ks": [2, 3], "out_dir": str(out_ids)})
    nb = nbformat.read(executed, as_version=4)
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
    assert (out_ids / "terms.parquet").is_file() and (out_ids / "summary.json").is_file()
    assert (tmp_path / "01_identifier_analysis.html").stat().st_size > 10_000
    text = "".join(str(o) for c in nb.cells for o in c.get("outputs", []))
    assert "of distinct words are used by fewer than k=2" in text
