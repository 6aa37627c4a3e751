"""How every command reads a corpus as users hold it: `--format` (Enron layout included), the CSV/JSONL field
mapping (`--text-field`, `--person-field @row`, `--id-field`, `--split-field`), TAB's `--annotator`, `--person-rule`
routed to the reader's ``person`` or ``person_rule``, and `--on-error skip` writing `skipped.jsonl` (file, line,
record, reason; never the text). Errors name the flags (`--format`, `--annotator`), not the library's keywords."""

from __future__ import annotations

import argparse
import inspect
import json
from pathlib import Path

import pandas as pd
import pytest

from toolkit import corpus as corpus_module
from toolkit.cli import build_parser, main
from toolkit.cli.common import FORMAT_CHOICES, READ_OPTIONS
from toolkit.corpus import FORMATS, load_corpus

ROOT = Path(__file__).resolve().parents[1]
ENRON = ROOT / "tests/data/real/enron"
TAB = ROOT / "tests/data/real/tab/echr_dev_first_record.json"
READERS = {"jsonl": "read_jsonl", "csv": "read_csv", "i2b2": "read_i2b2", "tab": "read_tab", "mbox": "read_mbox",
           "maildir": "read_maildir", "enron": "read_enron", "txt": "read_txt_folder"}
#: Commands that read a corpus, with the arguments they need besides the reading options.
CORPUS_COMMANDS = ["identifiers", "rmft", "dedup", "anonymize", "base", "train", "email-train", "probe", "mia",
                   "extract", "sentences"]
SECRET = "Zebulon Quayle-Marchetti"


def _subparsers():
    parser = build_parser()
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


def test_the_reading_options_match_the_readers():
    assert FORMAT_CHOICES == ("auto", *FORMATS)
    assert set(READERS) == set(FORMATS)
    routed = {"text_field", "person_field", "id_field", "split_field", "annotator", "person_rule", "person"}
    for fmt, name in READERS.items():
        params = {n for n, p in inspect.signature(getattr(corpus_module, name)).parameters.items()
                  if p.kind is inspect.Parameter.KEYWORD_ONLY}
        flagged = {keywords[fmt] for _, _, keywords, _ in READ_OPTIONS if fmt in keywords}
        assert flagged <= params, fmt  # every routed keyword exists
        assert params & routed == flagged, fmt  # and every such keyword of the reader has its flag


def test_every_corpus_command_has_the_reading_options():
    sub = _subparsers()
    flags = {"--format", "--on-error", *(flag for _, flag, _, _ in READ_OPTIONS)}
    for name in CORPUS_COMMANDS:
        options = {o for a in sub[name]._actions for o in a.option_strings}
        assert flags <= options, name
        assert all(a.help for a in sub[name]._actions), name


def test_csv_without_a_person_column_reads_with_field_mapping(tmp_path, capsys):
    csv = tmp_path / "export.csv"
    csv.write_text('note_text,ward,part\n"Seen by Dr Adams.",A,train\n"Call 555-123-4567.",B,test\n'
                   '"Adams again.",A,train\n', encoding="utf-8")
    out = tmp_path / "ids"
    assert main(["identifiers", str(csv), "--out", str(out), "--detector", "patterns", "--quiet",
                 "--text-field", "note_text"]) == 2
    assert "--person-field @row" in capsys.readouterr().err  # the error names the flag that fixes it
    assert main(["identifiers", str(csv), "--out", str(out), "--detector", "patterns", "--quiet",
                 "--text-field", "note_text", "--person-field", "@row", "--id-field", "@row",
                 "--split-field", "part", "--split", "train"]) == 0
    assert "2 documents, 2 individuals" in capsys.readouterr().out
    ind = pd.read_parquet(out / "individuals.parquet")
    assert sorted(ind["person_id"]) == ["export-1", "export-3"]
    # the same columns name the individual when asked
    assert main(["identifiers", str(csv), "--out", str(tmp_path / "w"), "--detector", "patterns", "--quiet",
                 "--text-field", "note_text", "--person-field", "ward"]) == 0
    assert "3 documents, 2 individuals" in capsys.readouterr().out


def test_tab_annotator_and_enron_person_rule(tmp_path, capsys):
    counts = {}
    for annotator in ("annotator1", "annotator10"):
        out = tmp_path / annotator
        assert main(["identifiers", str(TAB), "--annotator", annotator, "--detector", "oracle", "--out", str(out),
                     "--quiet"]) == 0
        counts[annotator] = json.loads((out / "summary.json").read_text())["n_direct_positions"]
    assert counts["annotator1"] != counts["annotator10"]
    assert main(["identifiers", str(TAB), "--annotator", "annotator7", "--out", str(tmp_path / "x"),
                 "--detector", "oracle"]) == 2
    assert "annotator7" in capsys.readouterr().err
    for rule, n in (("owner", 2), ("sender", len({d.person_id for d in load_corpus(ENRON, person="sender")}))):
        assert main(["identifiers", str(ENRON), "--format", "enron", "--person-rule", rule, "--detector",
                     "patterns", "--out", str(tmp_path / rule), "--quiet"]) == 0
        assert f"9 documents, {n} individuals" in capsys.readouterr().out
    assert n > 2


@pytest.mark.parametrize("argv, expected", [
    (["--annotator", "a1"], "--annotator applies to --format tab, not to this corpus"),
    (["--text-field", "body"], "--text-field applies to --format csv, jsonl"),
    (["--person-rule", "from"], "--person-rule for --format enron is sender or owner, got 'from'"),
    (["--format", "jsonl"], "expected a file, got a folder"),
    (["--format", "i2b2", "--person-rule", "[0-9]+"], "--person-rule '[0-9]+' has no capturing group"),
    (["--format", "txt", "--person-rule", "(oops"], "--person-rule '(oops' is not a valid regular expression"),
])
def test_reading_errors_name_the_flags(tmp_path, capsys, argv, expected):
    assert main(["rmft", str(ENRON), "--out", str(tmp_path / "r.jsonl"), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and expected in err and "Traceback" not in err
    assert "format=" not in err and "annotator=" not in err


def test_unknown_or_undetectable_format_names_the_flag(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["identifiers", str(ENRON), "--format", "eml", "--out", str(tmp_path / "o")])
    assert exc.value.code == 2 and "--format" in capsys.readouterr().err
    odd = tmp_path / "notes.docx"
    odd.write_bytes(b"PK\x03\x04")
    assert main(["identifiers", str(odd), "--out", str(tmp_path / "o")]) == 2
    assert "--format" in capsys.readouterr().err


def _bad_jsonl(path: Path) -> Path:
    rows = [json.dumps({"doc_id": "a", "person_id": "p", "text": "From: a@x.com\nHello."}),
            json.dumps({"doc_id": "b", "text": f"{SECRET} wrote from a@x.com"}),  # no person_id
            "{" + SECRET + " not json",
            json.dumps({"doc_id": "c", "person_id": "q", "text": "To: a@x.com\nHi."})]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_on_error_skip_writes_skipped_jsonl_without_text(tmp_path, capsys):
    src = _bad_jsonl(tmp_path / "mail.jsonl")
    assert main(["identifiers", str(src), "--out", str(tmp_path / "ids"), "--detector", "patterns", "--quiet"]) == 2
    assert SECRET not in capsys.readouterr().err
    assert main(["identifiers", str(src), "--out", str(tmp_path / "ids"), "--detector", "patterns", "--quiet",
                 "--on-error", "skip"]) == 0
    printed = capsys.readouterr().out
    assert "skipped 2 bad record(s)" in printed and "2 documents" in printed
    skipped = tmp_path / "ids" / "skipped.jsonl"
    rows = [json.loads(line) for line in skipped.read_text(encoding="utf-8").splitlines()]
    assert [(Path(r["file"]).name, r["line"]) for r in rows] == [("mail.jsonl", 2), ("mail.jsonl", 3)]
    assert all(set(r) == {"file", "line", "record", "reason"} and r["reason"] for r in rows)
    assert SECRET.split()[0] not in skipped.read_text(encoding="utf-8")
    assert (tmp_path / "ids" / "terms.parquet").is_file()
    # a command writing a corpus file lists them beside it
    assert main(["rmft", str(src), "--out", str(tmp_path / "mail" / "r.jsonl"), "--on-error", "skip",
                 "--quiet"]) == 0
    beside = tmp_path / "mail" / "r.skipped.jsonl"
    assert len(beside.read_text(encoding="utf-8").splitlines()) == 2 and str(beside) in capsys.readouterr().out
    assert len(load_corpus(tmp_path / "mail" / "r.jsonl")) == 2
    # nothing bad: the list is written, empty, and the count is 0
    assert main(["dedup", str(ENRON), "--out", str(tmp_path / "d.jsonl"), "--on-error", "skip", "--quiet"]) == 0
    assert "skipped 0 bad record(s)" in capsys.readouterr().out
    assert (tmp_path / "d.skipped.jsonl").read_text(encoding="utf-8") == ""
