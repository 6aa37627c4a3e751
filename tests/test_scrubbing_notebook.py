"""Notebook 05 (vocabulary scrubbing) executes top to bottom headless with reduced parameters."""

from __future__ import annotations

import json

import pytest
from test_notebooks import execute

from toolkit.scrub.anonymity import ANONYMITY_KEYS
from toolkit.review.store import read_review


@pytest.mark.slow
def test_notebook_05_vocabulary_scrubbing(tmp_path):
    work = tmp_path / "work"
    text = execute(tmp_path, "05_vocabulary_scrubbing.ipynb",
                   {"n_documents": 40, "pretrain_epochs": 1, "n_seen": 12, "n_unseen": 12, "work_dir": str(work)})
    report = json.loads((work / "anonymity" / "anonymity.json").read_text(encoding="utf-8"))
    assert set(ANONYMITY_KEYS) <= set(report)
    before = json.loads((work / "anonymity_before" / "anonymity.json").read_text(encoding="utf-8"))
    assert report["n_predictions"] == before["n_predictions"] == 24 * 20
    assert report["n_name_like"] <= before["n_name_like"]
    decisions = read_review(work / "review.jsonl")
    assert decisions and {r["decision"] for r in decisions} <= {"name", "not_name"}
    assert (work / "model_scrubbed" / "scrub_manifest.json").is_file()
    assert "Table 1 — seen sentences, after scrubbing" in text
    assert "Anonymity test, after scrubbing" in text and "[MASK] is in bed verzorgd" in text
    # the circularity is said, with the non-circular figure beside it (issue 55, problem 6)
    assert "Name-like guesses by what the review knew of them" in text and "never seen by the review" in text
    assert "**Circularity**" in text
    # the token tables are not cut by pandas at the tokens they are about
    import nbformat

    nb = nbformat.read(tmp_path / "05_vocabulary_scrubbing.ipynb", as_version=4)
    tables = "".join(o.get("data", {}).get("text/html", "") for c in nb.cells if "prediction_count_table(" in c.source
                     for o in c.get("outputs", []))
    import html

    import pandas as pd

    from toolkit.scrub.anonymity import prediction_count_table

    for folder in ("anonymity_before", "anonymity"):
        preds = pd.read_parquet(work / folder / "predictions.parquet")
        for source in ("seen", "unseen"):
            for cell in prediction_count_table(preds, source=source)["tokens"]:
                assert html.escape(cell) in tables, cell  # in full, not cut at 50 characters
    assert sum("**Exercise" in c.source for c in nb.cells if "exercise" in c.metadata.get("tags", [])) >= 2
    assert "takeaway" in nb.cells[-1].metadata.get("tags", []) and "../docs/cheatsheet.md" in nb.cells[-1].source


def test_anonymity_by_review_splits_name_guesses_by_what_the_review_knew():
    import pandas as pd

    from toolkit.scrub.anonymity import anonymity_by_review

    preds = pd.DataFrame({"token": ["Okafor", "okafor", "Jansen", "Smit", "the", "unk1234567890123"],
                          "rank": [1, 4, 2, 7, 3, 1], "name_like": [True, True, True, True, False, False]})
    out = anonymity_by_review({"before": preds}, shown=["okafor", "jansen", "the"], judged=["Okafor"]).loc["before"]
    assert out["name-like"] == 4 and out["judged a name"] == 2  # both cases of okafor
    assert out["shown, judged not a name"] == 1  # Jansen: shown, not judged
    assert out["never seen by the review"] == 1 and out["best rank, never seen"] == 7  # Smit
    assert out["share never seen"] == pytest.approx(1 / 6)
