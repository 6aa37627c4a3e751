"""The command line: outputs of `identifiers`, clear errors with exit status 2."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd

from toolkit.cli import main

NOTES = [
    {"doc_id": "a1", "person_id": "A", "text": "Alice takes aspirin daily.", "spans": [{"start": 0, "end": 5,
                                                                                      "label": "PATIENT"}]},
    {"doc_id": "b1", "person_id": "B", "text": "Bob takes aspirin daily.", "spans": []},
    {"doc_id": "c1", "person_id": "C", "text": "Carol takes insulin daily.", "spans": [], "split": "train"},
]


def write_corpus(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_identifiers_cli_writes_tables(tmp_path, capsys):
    corpus = write_corpus(tmp_path / "c.jsonl", NOTES)
    out = tmp_path / "ids"
    assert main(["identifiers", str(corpus), "--out", str(out), "--detector", "oracle", "--k", "2", "--n", "2",
                 "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "3 documents, 3 individuals" in printed
    assert "alice" not in printed.lower()  # counts only, never identifiers
    terms = pd.read_parquet(out / "terms.parquet")
    assert {"term", "n", "n_individuals", "n_occurrences", "direct", "indirect"} <= set(terms.columns)
    t = terms[terms["n"] == 1].set_index("term")
    assert t.loc["aspirin", "n_individuals"] == 2 and not t.loc["aspirin", "indirect"]
    assert t.loc["alice", "direct"] and t.loc["alice", "indirect"]
    assert set(terms["n"]) == {1, 2}
    ind = pd.read_parquet(out / "individuals.parquet")
    assert list(ind.columns[:4]) == ["person_id", "n_documents", "n_words", "n_distinct_words"]
    assert {"n_direct", "n_indirect"} <= set(ind.columns)
    assert ind.set_index("person_id").loc["A", "n_direct"] == 1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_documents"] == 3 and summary["config"]["k"] == 2 and summary["config"]["n"] == 2
    pos = pd.read_parquet(out / "positions.parquet")
    assert len(pos) == summary["n_protected_positions"]


def test_identifiers_cli_split_filter(tmp_path, capsys):
    corpus = write_corpus(tmp_path / "c.jsonl", NOTES)
    assert main(["identifiers", str(corpus), "--out", str(tmp_path / "o"), "--detector", "oracle", "--split",
                 "train", "--quiet"]) == 0
    assert "1 documents, 1 individuals" in capsys.readouterr().out


def test_bad_input_is_one_clear_line(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(NOTES[0]) + "\n{not json\n", encoding="utf-8")
    assert main(["identifiers", str(bad), "--out", str(tmp_path / "o"), "--detector", "oracle"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "bad.jsonl" in err and "line 2" in err
    assert "Traceback" not in err


def test_bad_parameter_is_a_clear_error(tmp_path, capsys):
    corpus = write_corpus(tmp_path / "c.jsonl", NOTES)
    assert main(["identifiers", str(corpus), "--out", str(tmp_path / "o"), "--k", "1"]) == 2
    assert "k must be an integer >= 2" in capsys.readouterr().err


def test_module_entry_point(tmp_path):
    corpus = write_corpus(tmp_path / "c.jsonl", NOTES)
    proc = subprocess.run([sys.executable, "-m", "toolkit", "identifiers", str(corpus), "--out", str(tmp_path / "o"),
                           "--detector", "patterns", "--quiet"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "o" / "terms.parquet").is_file()
