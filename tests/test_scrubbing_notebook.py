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
