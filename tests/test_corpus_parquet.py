"""Parquet corpora (toolkit.corpus.formats.parquet): the same Corpus as the equivalent JSON Lines, natively or with
named columns; streamed by the out-of-core identifier engine with outputs identical to JSON Lines; hostile tables
(missing column, null text, duplicate ids, wrong types, not Parquet) give one-line errors naming the file and the
row, never a cell."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from toolkit.cli import main
from toolkit.corpus import CorpusError, detect_format, load_corpus, read_parquet, write_jsonl
from toolkit.identifiers.engine import analyze_to_disk
from toolkit.identifiers.stream import JsonlBatches, ParquetBatches, streamed

from test_identifiers_engine import assert_same_sets

ROOT = Path(__file__).resolve().parents[1]
NOTES = ROOT / "data_samples" / "clinical" / "notes.jsonl"
SECRET = "Zebulon Quayle-Marchetti"


@pytest.fixture(scope="module")
def notes():
    """The first 120 sample notes (gold spans, splits, labels)."""
    return load_corpus(NOTES)[:120]


def _table(rows: list[dict], path: Path, schema: pa.Schema | None = None, row_group_size: int | None = None) -> Path:
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path, row_group_size=row_group_size)
    return path


def test_native_parquet_is_the_same_corpus_as_jsonl(notes, tmp_path):
    jsonl = write_jsonl(notes, tmp_path / "notes.jsonl")
    native = _table([d.to_dict() for d in notes], tmp_path / "notes.parquet", row_group_size=50)
    assert detect_format(native) == "parquet"
    expected = list(load_corpus(jsonl))
    assert list(load_corpus(native)) == expected
    assert sum(len(d.spans) for d in expected) > 100 and {d.split for d in expected} >= {"train", "heldout"}
    assert all(d.labels for d in expected)  # labels went through the struct column
    # spans and labels stored as JSON text read alike
    as_text = [{**d.to_dict(), "spans": json.dumps(d.to_dict()["spans"]), "labels": json.dumps(d.labels)}
               for d in notes]
    assert list(read_parquet(_table(as_text, tmp_path / "text.parquet"))) == expected


def test_named_columns_as_csv_and_jsonl(notes, tmp_path):
    """A data-lake export (integer note ids, other column names): the same documents as the JSONL export with the
    same field mapping."""
    rows = [{"note_id": i, "patient": d.person_id, "note": d.text, "cohort": d.split} for i, d in enumerate(notes)]
    jsonl = tmp_path / "export.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    mapping = {"text_field": "note", "person_field": "patient", "id_field": "note_id", "split_field": "cohort"}
    parquet = _table(rows, tmp_path / "export.parquet")
    assert list(load_corpus(parquet, **mapping)) == list(load_corpus(jsonl, **mapping))
    per_row = read_parquet(parquet, text_field="note", person_field="@row", id_field="@row", split_field=None)
    assert [(d.doc_id, d.person_id, d.split) for d in per_row[:2]] == [("export-1", "export-1", None),
                                                                       ("export-2", "export-2", None)]


@pytest.mark.parametrize("k, n", [(2, 1), (3, 2)])
def test_out_of_core_engine_same_outputs_as_jsonl(notes, tmp_path, k, n):
    jsonl = write_jsonl(notes, tmp_path / "notes.jsonl")
    parquet = _table([d.to_dict() for d in notes], tmp_path / "notes.parquet", row_group_size=40)
    kw = {"detector": "oracle+patterns", "k": k, "n": n, "progress": False, "memory_limit": "256MB", "threads": 1}
    a = JsonlBatches(jsonl, split=["train", "heldout"], batch_documents=23)
    b = ParquetBatches(parquet, split=["train", "heldout"], batch_documents=23)
    analyze_to_disk(a, tmp_path / "jsonl", **kw)
    analyze_to_disk(b, tmp_path / "parquet", **kw)
    assert a.n_documents == b.n_documents > 50
    assert b.bytes_read == b.total_bytes == parquet.stat().st_size
    assert_same_sets(tmp_path / "jsonl", tmp_path / "parquet")


def test_cli_streams_parquet(notes, tmp_path, capsys):
    write_jsonl(notes, tmp_path / "notes.jsonl")
    _table([{"note_id": d.doc_id, "patient": d.person_id, "note": d.text, "cohort": d.split, "spans": d.to_dict()[
        "spans"]} for d in notes], tmp_path / "notes.parquet")
    fields = ["--text-field", "note", "--person-field", "patient", "--id-field", "note_id", "--split-field", "cohort"]
    common = ["--detector", "oracle", "--split", "train", "--quiet", "--threads", "1"]
    assert streamed(tmp_path / "notes.parquet", "parquet", text_field="note", person_field="patient",
                    id_field="note_id", split_field="cohort") is not None
    assert main(["identifiers", str(tmp_path / "notes.jsonl"), *common, "--out", str(tmp_path / "a")]) == 0
    assert main(["identifiers", str(tmp_path / "notes.parquet"), *common, *fields, "--out", str(tmp_path / "b")]) == 0
    printed = capsys.readouterr().out.split("wrote")
    assert printed[0] == printed[1].split("\n", 1)[1]
    assert_same_sets(tmp_path / "a", tmp_path / "b")


def _hostile(tmp_path: Path) -> dict[str, tuple[Path, dict, str]]:
    """name -> (file, reader options, the expected message); every text cell holds SECRET."""
    ok = {"doc_id": "a", "person_id": "p", "text": f"{SECRET} was seen."}
    return {
        "missing column": (_table([{"doc_id": "a", "patient": "p", "text": SECRET}], tmp_path / "m.parquet"), {},
                           "missing column(s) 'person_id'; the table's columns: doc_id, patient, text. Name the "
                           "columns with --text-field, --person-field"),
        "null text": (_table([ok, {"doc_id": "b", "person_id": "q", "text": None}], tmp_path / "n.parquet"), {},
                      "record 2: null in column 'text' (the text)"),
        "null person": (_table([ok, {"doc_id": "b", "person_id": None, "text": SECRET}], tmp_path / "p.parquet"), {},
                        "record 2: null in column 'person_id' (the person)"),
        "duplicate id": (_table([ok, {**ok, "person_id": "q"}], tmp_path / "d.parquet"), {},
                         "record 2: duplicate doc_id (first seen at record 1)"),
        "text not text": (_table([{"doc_id": "a", "person_id": "p", "text": 3}], tmp_path / "t.parquet"), {},
                          "column 'text' (text) holds int64, not text"),
        "bad spans": (_table([{**ok, "spans": [{"start": 0, "end": 999, "label": "X"}]}], tmp_path / "s.parquet"),
                      {}, "record 1: span #0 [0, 999) X lies outside the text"),
        "typo": (_table([ok], tmp_path / "y.parquet"), {"split_field": "fold"}, "missing column(s) 'fold'"),
        "not parquet": ((tmp_path / "x.parquet"), {}, "not a readable Parquet file"),
        "empty": (_table([], tmp_path / "e.parquet", schema=pa.schema([("doc_id", pa.string()),
                                                                         ("person_id", pa.string()),
                                                                         ("text", pa.string())])), {},
                  "the corpus is empty"),
    }


def test_hostile_tables_give_one_line_errors(tmp_path):
    (tmp_path / "x.parquet").write_bytes(b"PAR1" + SECRET.encode() + b"PAR1")
    for name, (path, options, expected) in _hostile(tmp_path).items():
        with pytest.raises(CorpusError) as exc:
            load_corpus(path, **options)
        message = str(exc.value)
        assert message.startswith(f"{path}") and expected in message, (name, message)
        assert "\n" not in message and SECRET.split()[0] not in message, name
        if name in ("null text", "null person", "bad spans"):  # row-level: the streamed reader says the same
            with pytest.raises(CorpusError) as streamed_exc:
                for _ in ParquetBatches(path, **options):
                    pass
            assert expected in str(streamed_exc.value), name


def test_skip_lists_bad_rows_without_cells(tmp_path):
    ok = {"doc_id": "a", "person_id": "p", "text": "fine"}
    path = _table([ok, {"doc_id": "b", "person_id": "q", "text": None}, {**ok, "text": SECRET},
                   {"doc_id": "c", "person_id": None, "text": SECRET}, {"doc_id": "d", "person_id": "r", "text": "ok"}],
                  tmp_path / "bad.parquet")
    with pytest.warns(Warning, match="skipped 3"):
        corpus = read_parquet(path, on_error="skip")
    assert [d.doc_id for d in corpus] == ["a", "d"]
    assert [s.record for s in corpus.skipped] == ["2", "3", "4"]
    source = ParquetBatches(path, on_error="skip")
    # a doc_id repeated across rows is the engine's to find (analyze_to_disk), as for streamed JSON Lines
    assert [d.doc_id for b in source for d in b] == ["a", "a", "d"]
    assert [s.record for s in source.skipped] == ["2", "4"]
    assert all(SECRET.split()[0] not in s.reason for s in (*corpus.skipped, *source.skipped))
