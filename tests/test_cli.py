"""The command line: outputs of `identifiers`, clear errors with exit status 2, `--version`, help for every option,
commands grouped by task, `report`'s default output, and `probe` / `mia` on masked and causal checkpoints."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from toolkit.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]

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


# ---------------------------------------------------------------------------------------------------------------------
# the parser: version, help for every option, commands grouped by task


def test_version(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"python -m toolkit {version('lm-anonymity-toolkit')}"


def test_every_option_has_help_and_commands_are_grouped_by_task():
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    missing = [f"{name} {a.option_strings or a.dest}" for name, sp in sub.choices.items() for a in sp._actions
               if not a.help]
    assert not missing
    assert list(sub.choices) == ["run", "report", "demo", "frontier", "probe", "mia", "audit", "identifiers", "samples", "base",
                                 "train",
                                 "rmft", "dedup", "email-train", "email-base", "extract", "maxter", "anonymize", "sentences",
                                 "candidates", "review-compare", "scrub", "anonymity-test", "review", "purge"]
    epilog = parser.format_help().split("commands by task:", 1)[1]
    assert " ".join(epilog.split()) == (
        "run & report run, report, demo privacy-utility frontier probe probe, mia audit audit data & identifiers identifiers, samples training base, train "
        "e-mail rmft, dedup, email-train, email-base, extract, maxter scrubbing anonymize, sentences, candidates, review-compare, "
        "scrub, anonymity-test review review privacy purge")


def test_report_out_defaults_to_the_run_dir(tmp_path, monkeypatch, capsys):
    written = {}

    def fake_build_report(run_dirs, out, **kw):
        written.update(run_dirs=list(run_dirs), out=Path(out))
        Path(out).write_text("<html></html>", encoding="utf-8")
        return Path(out)

    monkeypatch.setattr("toolkit.report.build_report", fake_build_report)
    assert main(["report", str(tmp_path), str(tmp_path / "other")]) == 0
    assert written == {"run_dirs": [str(tmp_path), str(tmp_path / "other")], "out": tmp_path / "report.html"}
    assert f"wrote {tmp_path / 'report.html'}" in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------------------------------
# probe and mia pick the probe from the checkpoint's architecture


@pytest.fixture(scope="module")
def tiny_bases(tmp_path_factory):
    """Untrained tiny masked and causal bases (as test_reliability builds them), 6 training and 6 held-out sample notes
    and their oracle identifiers."""
    import torch

    from toolkit.corpus import Corpus, load_corpus, write_jsonl
    from toolkit.identifiers import analyze
    from toolkit.models import TinyModelConfig, init_model, train_tokenizer

    root = tmp_path_factory.mktemp("cli_probe")
    notes = load_corpus(ROOT / "data_samples/clinical/notes.jsonl")
    docs = Corpus(list(notes.filter(split="train")[:6]) + list(notes.filter(split="heldout")[:6]))
    bases = {}
    for kind in ("mlm", "clm"):
        tok = train_tokenizer((d.text for d in notes.filter(split="public")[:40]), kind, 400)
        cfg = TinyModelConfig(kind=kind, vocab_size=400, hidden_size=32, num_layers=1, num_heads=2,
                              intermediate_size=64, max_length=64)
        torch.manual_seed(0)
        bases[kind] = root / f"base_{kind}"
        init_model(tok, cfg, seed=0).save_pretrained(bases[kind])
        tok.save_pretrained(bases[kind])
    analyze(docs, detector="oracle", k=2, n=1, progress=False).save(root / "ids")
    members = {d.person_id for d in docs if d.split == "train"}
    nonmembers = {d.person_id for d in docs if d.split == "heldout"}
    assert members and nonmembers and not members & nonmembers
    return {**bases, "corpus": write_jsonl(docs, root / "notes.jsonl"), "ids": root / "ids", "members": members,
            "nonmembers": nonmembers}


@pytest.mark.parametrize("kind", ["clm", "mlm"])
def test_probe_and_mia_pick_the_probe_from_the_architecture(tiny_bases, kind, tmp_path, capsys):
    common = ["--corpus", str(tiny_bases["corpus"]), "--identifiers", str(tiny_bases["ids"]), "--window", "64",
              "--quiet"]
    assert main(["probe", str(tiny_bases[kind]), "--out", str(tmp_path / "probe")] + common) == 0, \
        capsys.readouterr().err
    assert capsys.readouterr().out.startswith("utility ")
    report = json.loads((tmp_path / "probe" / "metrics.json").read_text())
    preds = pd.read_parquet(tmp_path / "probe" / "predictions.parquet")
    assert report["checkpoint"] == str(tiny_bases[kind]) and len(preds) > 100
    assert set(preds["doc_id"]) <= {d["doc_id"] for d in map(json.loads, open(tiny_bases["corpus"]))}
    assert set(preds["person_id"]) == tiny_bases["members"]  # the train split only
    if kind == "clm":  # teacher-forced next-word probe: one pass, token accuracy reported
        assert 0.0 <= report["token_accuracy"] <= 1.0 and set(preds["pass_index"]) == {0}
    else:  # fill-mask: ceil(1 / 0.15) passes
        assert "token_accuracy" not in report and preds["pass_index"].max() > 0

    assert main(["mia", str(tiny_bases[kind]), "--out", str(tmp_path / "mia"), "--bootstrap", "20"] + common) == 0
    assert capsys.readouterr().out.startswith("AUC ")
    roc = json.loads((tmp_path / "mia" / "roc.json").read_text())
    scores = pd.read_parquet(tmp_path / "mia" / "scores.parquet")
    assert 0.0 <= roc["auc"] <= 1.0 and roc["checkpoint"] == str(tiny_bases[kind])
    assert set(scores["person_id"]) == tiny_bases["members"] | tiny_bases["nonmembers"]
    assert set(scores.loc[scores["member"], "person_id"]) == tiny_bases["members"]
