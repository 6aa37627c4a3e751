"""docs/cheatsheet.md, the notebooks' one-page glossary (issue 55): every term of the report's glossary
(toolkit/report/glossary.py, the source of truth) is in it, in bold; the verdict colours it states are the report's;
every metric the issue names has a row; and every notebook links it from its take-away."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHEET = ROOT / "docs" / "cheatsheet.md"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))


def _sheet() -> str:
    return SHEET.read_text(encoding="utf-8")


def test_every_term_of_the_report_s_glossary_is_in_the_cheat_sheet():
    from toolkit.report.glossary import glossary

    missing = [term for term, _ in glossary() if f"**{term}**" not in _sheet()]
    assert not missing, missing


def test_the_verdict_colours_are_the_report_s():
    from toolkit.report.verdicts import COLORS

    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| \*\*(\w+)\*\* \([^)]*?(#[0-9a-f]{6})", _sheet(), re.M)}
    assert rows == COLORS


@pytest.mark.parametrize("term", ["gain retained", "held-out utility", "training-note utility", "AUC", "TPR@FPR",
                                  "ROC", "MaxTER", "AURC", "%²", "TER / SER", "ε", "k and n", "PLL", "MDP",
                                  "smallest detectable AUC", "n/r"])
def test_every_metric_the_notebooks_show_has_an_entry(term):
    assert term in _sheet()


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_notebook_links_the_cheat_sheet_from_its_take_away(notebook):
    """The take-away (the last markdown cell, tagged `takeaway`) links the cheat sheet (the notebooks' narrative is
    written on its own branch: this holds once it is merged)."""
    import jupytext

    nb = jupytext.read(notebook)
    md = [c for c in nb.cells if c.cell_type == "markdown"]
    assert md and "takeaway" in md[-1].metadata.get("tags", []), f"{notebook.name}: no take-away cell last"
    assert md[-1].source.lstrip().startswith("### Take-away")
    assert "[cheat sheet](../docs/cheatsheet.md)" in md[-1].source
