"""How every command reads a corpus as users hold it: `--format` (Enron layout and Parquet included), the
CSV/JSONL/Parquet field mapping (`--text-field`, `--person-field @row`, `--id-field`, `--split-field`), TAB's
`--annotator`, `--person-rule` routed to the reader's ``person`` or ``person_rule``, and `--on-error skip` writing
`skipped.jsonl` (file, line, record, reason; never the text). The options are declared once
(:class:`toolkit.corpus.CorpusReading`) and every command that reads a corpus parses them to the same value. Errors
name the flags (`--format`, `--annotator`), not the library's keywords."""

from __future__ import annotations

import argparse
import dataclasses
import html
import inspect
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from toolkit import corpus as corpus_module
from toolkit.cli import build_parser, main
from toolkit.cli.common import reading_from_args
from toolkit.corpus import FORMATS, CorpusReading, load_corpus

ROOT = Path(__file__).resolve().parents[1]
ENRON = ROOT / "tests/data/real/enron"
TAB = ROOT / "tests/data/real/tab/echr_dev_first_record.json"
READERS = {"jsonl": "read_jsonl", "csv": "read_csv", "parquet": "read_parquet", "i2b2": "read_i2b2",
           "tab": "read_tab", "mbox": "read_mbox", "maildir": "read_maildir", "enron": "read_enron",
           "txt": "read_txt_folder"}
#: Every command that reads a corpus, with the arguments it needs besides the reading options.
CORPUS_COMMANDS = {
    "identifiers": ["C", "--out", "O"],
    "rmft": ["C", "--out", "O"],
    "dedup": ["C", "--out", "O"],
    "anonymize": ["C", "--out", "O"],
    "base": ["--kind", "mlm", "--corpus", "C", "--out", "O"],
    "train": ["--strategy", "mlm", "--corpus", "C", "--base", "B", "--out", "O"],
    "email-train": ["--technique", "baseline", "--corpus", "C", "--base", "B", "--out", "O"],
    "probe": ["CKPT", "--corpus", "C", "--identifiers", "I", "--out", "O"],
    "mia": ["CKPT", "--corpus", "C", "--identifiers", "I", "--out", "O"],
    "extract": ["RUN", "--prompts", "P", "--corpus", "C", "--out", "O"],
    "sentences": ["A", "--original", "C", "--out", "O"],
    "audit": ["MODEL", "--corpus", "C", "--members", "train", "--nonmembers", "heldout", "--out", "O"],
}
#: Options naming a corpus (their commands must take the reading options); a secondary corpus read with the defaults
#: (`probe --base-corpus`, `extract --heldout`) is not listed.
CORPUS_DESTS = {"corpus", "original"}
READING = ["--format", "csv", "--text-field", "note", "--person-field", "patient", "--id-field", "note_id",
           "--split-field", "cohort", "--annotator", "a2", "--person-rule", "^([0-9]+)-", "--on-error", "skip"]
SECRET = "Zebulon Quayle-Marchetti"


def _subparsers():
    parser = build_parser()
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


def test_the_reading_options_match_the_readers():
    assert CorpusReading.option("format").metadata["choices"] == ("auto", *FORMATS)
    assert set(READERS) == set(FORMATS)
    routed = {"text_field", "person_field", "id_field", "split_field", "annotator", "person_rule", "person"}
    for fmt, name in READERS.items():
        params = {n for n, p in inspect.signature(getattr(corpus_module, name)).parameters.items()
                  if p.kind is inspect.Parameter.KEYWORD_ONLY}
        flagged = {f.metadata["keywords"][fmt] for f in CorpusReading.routed() if fmt in f.metadata["keywords"]}
        assert flagged <= params, fmt  # every routed keyword exists
        assert params & routed == flagged, fmt  # and every such keyword of the reader has its flag


def test_every_command_naming_a_corpus_is_listed():
    sub = _subparsers()
    reading = {name for name, p in sub.items() if {a.dest for a in p._actions} & CORPUS_DESTS}
    assert reading == set(CORPUS_COMMANDS)


@pytest.mark.parametrize("command", sorted(CORPUS_COMMANDS))
def test_every_corpus_command_parses_the_same_reading(command):
    parser = build_parser()
    args = parser.parse_args([command, *CORPUS_COMMANDS[command], *READING])
    assert reading_from_args(args) == CorpusReading(format="csv", text_field="note", person_field="patient",
                                                    id_field="note_id", split_field="cohort", annotator="a2",
                                                    person_rule="^([0-9]+)-", on_error="skip")
    assert reading_from_args(parser.parse_args([command, *CORPUS_COMMANDS[command]])) == CorpusReading()
    sub = _subparsers()[command]
    flags = {f.metadata["flag"] for f in dataclasses.fields(CorpusReading)}
    assert flags <= {o for a in sub._actions for o in a.option_strings}
    assert all(a.help for a in sub._actions)


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


def test_reading_rejects_unknown_values():
    with pytest.raises(corpus_module.ToolkitError, match="unknown --format 'xls'"):
        CorpusReading(format="xls")
    with pytest.raises(corpus_module.ToolkitError, match="unknown --on-error 'ignore'"):
        CorpusReading(on_error="ignore")


def _notes_table() -> tuple[pd.DataFrame, list]:
    """A hospital export of the sample notes: columns note_id, patient, note, cohort (and the gold spans as JSON);
    4 train and 4 held-out patients, one note each."""
    notes = load_corpus(ROOT / "data_samples/clinical/notes.jsonl")
    docs = []
    for split in ("train", "heldout"):
        part = notes.filter(split=split)
        docs += [next(d for d in part if d.person_id == p) for p in part.person_ids[:4]]
    table = pd.DataFrame({"note_id": [d.doc_id for d in docs], "patient": [d.person_id for d in docs],
                          "note": [d.text for d in docs], "cohort": [d.split for d in docs],
                          "spans": [json.dumps([s.to_dict() for s in d.spans]) for d in docs]})
    return table, docs


@pytest.mark.usefixtures("one_thread")
def test_audit_reads_a_csv_with_named_columns(tmp_path, capsys):
    """Issue 26: `audit` refused a CSV with columns note_id, patient, note, cohort and its error named flags it did
    not take; it takes the same reading options as every other command. Its report called the model (fine-tuned
    outside the toolkit) "finetuned after 0 epochs": the epochs are unknown."""
    from toolkit.models import TinyModelConfig, init_model, train_tokenizer

    table, docs = _notes_table()
    table.to_csv(tmp_path / "notes.csv", index=False)
    tok = train_tokenizer([d.text for d in docs], "clm", 300)
    model = tmp_path / "external"
    init_model(tok, TinyModelConfig(kind="clm", vocab_size=300, hidden_size=16, num_layers=1, num_heads=2,
                                    intermediate_size=32, max_length=64), seed=0).save_pretrained(model)
    tok.save_pretrained(model)
    common = [str(model), "--corpus", str(tmp_path / "notes.csv"), "--members", "train", "--nonmembers", "heldout",
              "--reference", "none", "--detector", "oracle", "--window", "32", "--bootstrap", "0", "--quiet"]
    assert main(["audit", *common, "--out", str(tmp_path / "refused")]) == 2
    err = capsys.readouterr().err
    assert "--text-field" in err and "unrecognized" not in err
    out = tmp_path / "audit"
    assert main(["audit", *common, "--text-field", "note", "--person-field", "patient", "--id-field", "note_id",
                 "--split-field", "cohort", "--out", str(out)]) == 0, capsys.readouterr().err
    attacks = json.loads((out / "attacks.json").read_text())
    assert (attacks["n_members"], attacks["n_nonmembers"]) == (4, 4)
    # a model fine-tuned outside the toolkit: its epochs are unknown, never "0"
    page = re.sub(r"<script.*?</script>", "", (out / "report.html").read_text(encoding="utf-8"), flags=re.S)
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())
    assert "external (fine-tuned outside this run: epochs unknown)" in text
    assert "external (epochs unknown)" in text  # the ROC legend and the TPR table
    assert "after 0 epochs" not in text and "(epoch 0)" not in text and "epoch None" not in text


def test_audited_models_have_unknown_epochs(tmp_path):
    """An audit folder's models (``audit/<label>/``) were trained outside the run: epoch None, not 0."""
    from toolkit.results.layout import RunLayout, epoch_text

    for part in ("base", "external", "mlm/epoch-2"):
        (tmp_path / "audit" / part).mkdir(parents=True)
        for name in ("metrics.json", "roc.json"):
            (tmp_path / "audit" / part / name).write_text("{}")
    assert sorted((k for k, _ in RunLayout(tmp_path).audit_dirs()), key=str) == [
        ("base", 0), ("external", None), ("mlm", 2)]
    assert (epoch_text(None), epoch_text(0), epoch_text(8)) == ("epochs unknown", "epoch 0", "epoch 8")
