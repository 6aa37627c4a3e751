"""Tests of the corpus readers and writer (toolkit.corpus.formats, toolkit.corpus.load).

All fixtures are tiny, synthetic and written into ``tmp_path``; every name in them is invented.
"""

from __future__ import annotations

import json
import mailbox
import os
import warnings
from pathlib import Path

import pytest

from toolkit.corpus import (
    FORMATS,
    Corpus,
    CorpusError,
    CorpusWarning,
    Document,
    Span,
    ToolkitError,
    detect_format,
    load_corpus,
    make_document,
    read_csv,
    read_enron,
    read_i2b2,
    read_jsonl,
    read_maildir,
    read_mbox,
    read_tab,
    read_txt_folder,
    write_jsonl,
)

# ------------------------------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------------------------------


def surfaces(doc: Document) -> list[tuple[str, str]]:
    return [(doc.text[s.start:s.end], s.label) for s in doc.spans]


def write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, str):
        content = content.encode("utf-8")
    path.write_bytes(content)
    return path


def jsonl_line(**fields) -> str:
    return json.dumps(fields, ensure_ascii=False)


def expect_error(fn, *args, contains: tuple[str, ...] = (), **kwargs) -> CorpusError:
    with pytest.raises(CorpusError) as info:
        fn(*args, **kwargs)
    msg = str(info.value)
    for part in contains:
        assert part in msg, f"{part!r} not in {msg!r}"
    return info.value


# ------------------------------------------------------------------------------------------------------------------
# JSONL
# ------------------------------------------------------------------------------------------------------------------

GOOD_JSONL_TEXT_1 = "Patient Alma Qorvath, seen 2031-04-02 by Dr. Wenzel Pharro.\u2028Ward 7."
GOOD_JSONL_TEXT_2 = "Zoë Ärger 🙂 wrote to Bertil Ynsk."


@pytest.fixture
def good_jsonl(tmp_path: Path) -> Path:
    t1 = GOOD_JSONL_TEXT_1
    lines = [
        jsonl_line(doc_id="n1", person_id="p1", text=t1,
                   spans=[{"start": t1.index("Wenzel"), "end": t1.index("Wenzel") + len("Wenzel Pharro"),
                           "label": "DOCTOR"},
                          {"start": 8, "end": 20, "label": "PATIENT"}],
                   split="train", labels={"smoking": "NON-SMOKER"}),
        "",
        "   ",
        jsonl_line(doc_id=2, person_id="p2", text=GOOD_JSONL_TEXT_2,
                   spans=[{"start": 0, "end": 9, "label": "NAME"}, {"start": 21, "end": 32, "label": "NAME"}]),
        jsonl_line(doc_id="n3", person_id="p1", text="line one\r\nline two", split="test"),
    ]
    return write(tmp_path / "notes.jsonl", "\n".join(lines[:4]) + "\r\n" + lines[4] + "\n")


def test_read_jsonl_good(good_jsonl: Path):
    corpus = read_jsonl(good_jsonl)
    assert isinstance(corpus, Corpus)
    assert [d.doc_id for d in corpus] == ["n1", "2", "n3"]
    assert [d.person_id for d in corpus] == ["p1", "p2", "p1"]
    assert [d.split for d in corpus] == ["train", None, "test"]
    n1, n2, n3 = corpus
    assert n1.text == GOOD_JSONL_TEXT_1  # U+2028 inside a JSON string is not a line break
    assert surfaces(n1) == [("Alma Qorvath", "PATIENT"), ("Wenzel Pharro", "DOCTOR")]  # sorted by start
    assert n1.labels == {"smoking": "NON-SMOKER"}
    assert n2.text == GOOD_JSONL_TEXT_2
    assert surfaces(n2) == [("Zoë Ärger", "NAME"), ("Bertil Ynsk", "NAME")]
    assert n3.text == "line one\r\nline two" and n3.spans == ()
    assert corpus.source == str(good_jsonl)


def test_read_jsonl_bom_is_dropped(tmp_path: Path):
    p = write(tmp_path / "bom.jsonl", b"\xef\xbb\xbf" + jsonl_line(doc_id="a", person_id="x", text="hi").encode())
    assert read_jsonl(p)[0].text == "hi"


@pytest.mark.parametrize("bad_line, expected", [
    ('{"doc_id": "b", "person_id": "x", "text": "oops"', "invalid JSON"),
    ('["b", "x", "text"]', "expected a JSON object"),
    ('{"doc_id": "b", "text": "no person"}', "missing field(s) 'person_id'"),
    ('{"doc_id": "b", "personid": "x", "text": "t"}', "did you mean 'person_id'?"),
    ('{"doc_id": "b", "person_id": "x", "text": "short", "spans": [{"start": 2, "end": 9, "label": "NAME"}]}',
     "outside the text"),
    ('{"doc_id": "b", "person_id": "x", "text": "Alma Qorvath", '
     '"spans": [{"start": 0, "end": 8, "label": "NAME"}, {"start": 5, "end": 12, "label": "NAME"}]}',
     "spans overlap"),
    ('{"doc_id": "b", "person_id": "x", "text": "t", "spans": "Alma"}', "must be a list"),
    ('{"doc_id": "b", "person_id": "x", "person_id": "y", "text": "t"}', "duplicate key 'person_id'"),
    ('{"doc_id": "a", "person_id": "y", "text": "again"}', "duplicate doc_id (first seen at line 1)"),
])
def test_read_jsonl_errors_name_file_and_line(tmp_path: Path, bad_line: str, expected: str):
    p = write(tmp_path / "bad.jsonl", "\n".join([jsonl_line(doc_id="a", person_id="x", text="fine"), "", bad_line]))
    err = expect_error(read_jsonl, p, contains=("bad.jsonl", "line 3", expected))
    assert err.path == str(p) and err.line == 3
    assert isinstance(err, ToolkitError) and isinstance(err, ValueError)


def test_read_jsonl_invalid_json_is_chained(tmp_path: Path):
    p = write(tmp_path / "bad.jsonl", "{not json}\n")
    err = expect_error(read_jsonl, p, contains=("bad.jsonl", "line 1", "column 2"))
    assert isinstance(err.__cause__, json.JSONDecodeError)


def test_read_jsonl_unknown_field_names_all_unknown(tmp_path: Path):
    p = write(tmp_path / "typo.jsonl", '{"doc_id": "a", "person_id": "x", "txet": "t", "colour": 1}\n')
    expect_error(read_jsonl, p, contains=("typo.jsonl", "line 1", "'txet' (did you mean 'text'?)", "'colour'",
                                          "missing field(s) 'text'"))


def test_read_jsonl_non_utf8_reports_line_and_byte_offset(tmp_path: Path):
    first = jsonl_line(doc_id="a", person_id="x", text="ok").encode() + b"\n"
    second = b'{"doc_id": "b", "person_id": "x", "text": "caf\xe9"}\n'
    p = write(tmp_path / "latin.jsonl", first + second)
    offset = len(first) + second.index(b"\xe9")
    err = expect_error(read_jsonl, p, contains=("latin.jsonl", "line 2", f"byte offset {offset}", "e9"))
    assert isinstance(err.__cause__, UnicodeDecodeError)


def test_read_jsonl_empty_corpus(tmp_path: Path):
    p = write(tmp_path / "empty.jsonl", "\n  \n\n")
    expect_error(read_jsonl, p, contains=("empty.jsonl", "empty"))


def test_read_jsonl_missing_file(tmp_path: Path):
    expect_error(read_jsonl, tmp_path / "nope.jsonl", contains=("nope.jsonl", "file not found"))


def test_write_jsonl_round_trip_and_format(good_jsonl: Path, tmp_path: Path):
    corpus = read_jsonl(good_jsonl)
    out = write_jsonl(corpus, tmp_path / "sub" / "copy.jsonl")
    assert out == tmp_path / "sub" / "copy.jsonl"
    again = read_jsonl(out)
    assert list(again) == list(corpus)
    raw = out.read_bytes().decode("utf-8")
    lines = raw.split("\n")
    assert lines[-1] == "" and len(lines) == 4  # one document per line, final newline
    first = json.loads(lines[0])
    assert list(first) == ["doc_id", "person_id", "text", "spans", "split", "labels"]
    second = json.loads(lines[1])
    assert list(second) == ["doc_id", "person_id", "text", "spans"]  # split/labels omitted when empty
    assert "🙂" in lines[1] and "\\u" not in lines[1]  # ensure_ascii=False
    assert sorted(os.listdir(out.parent)) == ["copy.jsonl"]  # no temporary file left


def test_write_jsonl_is_atomic_on_failure(tmp_path: Path):
    target = write(tmp_path / "keep.jsonl", jsonl_line(doc_id="old", person_id="x", text="old") + "\n")
    before = target.read_bytes()
    bad = make_document("d", "p", "text", labels={"when": object()})
    expect_error(write_jsonl, [make_document("ok", "p", "fine"), bad], target,
                 contains=("keep.jsonl", "record d", "cannot write"))
    assert target.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["keep.jsonl"]


def test_write_jsonl_rejects_empty(tmp_path: Path):
    expect_error(write_jsonl, [], tmp_path / "e.jsonl", contains=("e.jsonl", "empty"))


# ------------------------------------------------------------------------------------------------------------------
# CSV
# ------------------------------------------------------------------------------------------------------------------


def test_read_csv_good(tmp_path: Path):
    spans = json.dumps([{"start": 8, "end": 20, "label": "PATIENT"}]).replace('"', '""')
    content = (
        "\ufeffdoc_id,person_id,text,split,spans,smoking\r\n"
        f'd1,p1,"Patient Alma Qorvath, admitted.\r\nSecond line, with comma.",train,"{spans}",NON-SMOKER\r\n'
        "\r\n"
        "d2,p2,Plain note about Bertil Ynsk,,,CURRENT\r\n"
    )
    p = write(tmp_path / "notes.csv", content)
    corpus = read_csv(p, label_fields=["smoking"])
    assert [d.doc_id for d in corpus] == ["d1", "d2"]
    assert [d.person_id for d in corpus] == ["p1", "p2"]
    assert [d.split for d in corpus] == ["train", None]
    d1, d2 = corpus
    assert d1.text == "Patient Alma Qorvath, admitted.\r\nSecond line, with comma."
    assert surfaces(d1) == [("Alma Qorvath", "PATIENT")]
    assert d1.labels == {"smoking": "NON-SMOKER"} and d2.labels == {"smoking": "CURRENT"}
    assert d2.spans == ()


def test_read_csv_custom_columns_and_generated_doc_ids(tmp_path: Path):
    p = write(tmp_path / "mail.csv", "author,body\nqorvath,hello\nynsk,\"multi\nline\"\nqorvath,bye\n")
    corpus = read_csv(p, text_field="body", person_field="author")
    assert [d.doc_id for d in corpus] == ["mail-1", "mail-2", "mail-3"]
    assert [d.person_id for d in corpus] == ["qorvath", "ynsk", "qorvath"]
    assert corpus[1].text == "multi\nline"


def test_read_csv_missing_columns_suggests_near_misses_only(tmp_path: Path):
    p = write(tmp_path / "cols.csv", "id,Person-ID,body\n1,a,b\n")
    err = expect_error(read_csv, p, contains=("cols.csv", "line 1", "missing column(s) 'text',",
                                              "'person_id' (did you mean 'Person-ID'?)", "3 column(s)",
                                              "--text-field", "--person-field @row"))
    assert "'body'" not in str(err) and "'id'" not in str(err)  # header cells are not listed


def test_read_csv_nondefault_optional_column_must_exist(tmp_path: Path):
    p = write(tmp_path / "c.csv", "person_id,text\na,b\n")
    expect_error(read_csv, p, split_field="fold", contains=("c.csv", "missing column(s) 'fold'"))


def test_read_csv_record_errors_report_record_and_start_line(tmp_path: Path):
    # record 1 spans lines 2-4; record 2 starts on line 5 and has a field too many
    p = write(tmp_path / "rows.csv", 'doc_id,person_id,text\nd1,p1,"a\nb\nc"\nd2,p2,text,extra\n')
    err = expect_error(read_csv, p, contains=("rows.csv", "line 5", "record 2", "4 field(s) but the header has 3"))
    assert err.line == 5 and err.record == "2"


@pytest.mark.parametrize("row, expected", [
    ('d2,p2,Alma,"[{""start"": 0, ""end"": 99, ""label"": ""NAME""}]"', "outside the text"),
    ('d2,p2,Alma,"[{""start"": 0"', "not valid JSON"),
    ('d2,p2,Alma,"{}"', "must hold a JSON list"),
    ('d1,p2,Alma,', "duplicate doc_id (first seen at line 2, record 1)"),
    (',p2,Alma,', "missing field 'doc_id'"),
])
def test_read_csv_bad_records(tmp_path: Path, row: str, expected: str):
    p = write(tmp_path / "bad.csv", f"doc_id,person_id,text,spans\nd1,p1,ok,\n{row}\n")
    expect_error(read_csv, p, contains=("bad.csv", "line 3", "record 2", expected))


def test_read_csv_malformed_quoting(tmp_path: Path):
    p = write(tmp_path / "quote.csv", 'person_id,text\np1,ok\np2,"bad"quote\n')
    err = expect_error(read_csv, p, contains=("quote.csv", "line 3", "malformed CSV"))
    assert err.__cause__ is not None


def test_read_csv_non_utf8(tmp_path: Path):
    p = write(tmp_path / "latin.csv", b"person_id,text\np1,ok\np2,Gr\xfc\xdfe\n")
    expect_error(read_csv, p, contains=("latin.csv", "line 3", "byte offset 26"))


@pytest.mark.parametrize("content", ["", "\n\n", "person_id,text\n"])
def test_read_csv_empty(tmp_path: Path, content: str):
    p = write(tmp_path / "empty.csv", content)
    expect_error(read_csv, p, contains=("empty.csv", "empty"))


# ------------------------------------------------------------------------------------------------------------------
# i2b2 2006 / n2c2 2014 XML
# ------------------------------------------------------------------------------------------------------------------

I2B2_2006 = """<?xml version="1.0" encoding="UTF-8"?>
<ROOT>
<RECORD ID="101">
<TEXT>
Admission for <PHI TYPE="PATIENT">Alma Qorvath</PHI>
on <PHI TYPE="DATE">04/02</PHI> at <PHI TYPE="HOSPITAL">St. Ynsk &amp; Co</PHI>.
</TEXT>
</RECORD>
<RECORD ID="102">
<TEXT>No identifiers here.</TEXT>
</RECORD>
</ROOT>
"""


def test_read_i2b2_2006(tmp_path: Path):
    p = write(tmp_path / "deid_2006.xml", I2B2_2006)
    corpus = read_i2b2(p)
    assert [d.doc_id for d in corpus] == ["101", "102"]
    assert [d.person_id for d in corpus] == ["101", "102"]
    d = corpus[0]
    assert d.text == "\nAdmission for Alma Qorvath\non 04/02 at St. Ynsk & Co.\n"
    assert surfaces(d) == [("Alma Qorvath", "PATIENT"), ("04/02", "DATE"), ("St. Ynsk & Co", "HOSPITAL")]
    assert corpus[1].text == "No identifiers here." and corpus[1].spans == ()


def test_read_i2b2_2006_person_rule(tmp_path: Path):
    p = write(tmp_path / "deid_2006.xml", I2B2_2006)
    assert read_i2b2(p, person_rule=r"^(\d\d)").person_ids == ["10"]
    assert read_i2b2(p, person_rule=lambda rid: f"pt{rid}")[1].person_id == "pt102"
    expect_error(read_i2b2, p, person_rule=r"^(9\d+)",
                 contains=("deid_2006.xml", "record 101", "does not match '101'"))
    expect_error(read_i2b2, p, person_rule=r"^\d+", contains=("deid_2006.xml", "no capturing group"))
    expect_error(read_i2b2, p, person_rule=r"^(\d+", contains=("deid_2006.xml", "valid regular expression"))


@pytest.mark.parametrize("record, expected", [
    ('<RECORD><TEXT>x</TEXT></RECORD>', "record RECORD #1"),
    ('<RECORD ID="7"><TEXT>a <B>b</B></TEXT></RECORD>', "unexpected element <B>"),
    ('<RECORD ID="7"><TEXT>a <PHI>b</PHI></TEXT></RECORD>', "without a TYPE"),
    ('<RECORD ID="7"><TEXT>a <PHI TYPE="DATE"></PHI></TEXT></RECORD>', "empty <PHI"),
    ('<RECORD ID="7"></RECORD>', "without a <TEXT>"),
])
def test_read_i2b2_2006_errors(tmp_path: Path, record: str, expected: str):
    p = write(tmp_path / "bad2006.xml", f"<ROOT>{record}</ROOT>")
    expect_error(read_i2b2, p, contains=("bad2006.xml", expected))


def n2c2_2014(text: str, tags: list[tuple[str, str, int, int, str | None, str]]) -> str:
    rendered = []
    for tid, elem, start, end, surface, type_ in tags:
        attr_text = "" if surface is None else f' text="{surface}"'
        rendered.append(f'<{elem} id="{tid}" start="{start}" end="{end}"{attr_text} TYPE="{type_}" comment="" />')
    return ('<?xml version="1.0" encoding="UTF-8" ?>\n<deIdi2b2>\n<TEXT><![CDATA[' + text + "]]></TEXT>\n<TAGS>\n"
            + "\n".join(rendered) + "\n</TAGS>\n</deIdi2b2>\n")


TEXT_2014 = "Record date: 2069-04-07\n\nAlma Qorvath is a 64 yo woman <seen> by Dr. Pharro & team."


def tags_2014(text: str = TEXT_2014):
    def at(s: str) -> tuple[int, int]:
        i = text.index(s)
        return i, i + len(s)

    return [("P0", "DATE", *at("2069-04-07"), "2069-04-07", "DATE"),
            ("P1", "NAME", *at("Alma Qorvath"), "Alma Qorvath", "PATIENT"),
            ("P2", "AGE", *at("64"), None, "AGE"),
            ("P3", "NAME", *at("Pharro"), "Pharro", "DOCTOR")]


def test_read_i2b2_2014_folder(tmp_path: Path):
    folder = tmp_path / "n2c2"
    write(folder / "110-01.xml", n2c2_2014(TEXT_2014, tags_2014()))
    write(folder / "110-02.xml", n2c2_2014("Follow-up, no PHI.", []))
    write(folder / "sub" / "205-01.xml", n2c2_2014("Dr. Pharro", [("P0", "NAME", 4, 10, "Pharro", "DOCTOR")]))
    corpus = read_i2b2(folder, split="train")
    assert [d.doc_id for d in corpus] == ["110-01", "110-02", "205-01"]
    assert [d.person_id for d in corpus] == ["110", "110", "205"]
    assert corpus.splits == ["train"]
    d = corpus[0]
    assert d.text == TEXT_2014  # CDATA kept verbatim (<seen>, &)
    assert surfaces(d) == [("2069-04-07", "DATE"), ("Alma Qorvath", "PATIENT"), ("64", "AGE"), ("Pharro", "DOCTOR")]
    assert read_i2b2(folder, person_rule=r"-(\d+)$").person_ids == ["01", "02"]


def test_read_i2b2_2014_crlf_is_normalised_and_offsets_count_on_lf(tmp_path: Path):
    # Offsets are counted on the text as the XML parser returns it (\r\n -> \n).
    text_lf = "Line one\nAlma Qorvath\n"
    s = text_lf.index("Alma")
    raw = n2c2_2014(text_lf, [("P0", "NAME", s, s + 12, "Alma Qorvath", "PATIENT")])
    p = write(tmp_path / "300-01.xml", raw.replace("\n", "\r\n"))  # every line end is CRLF in the file
    assert b"Line one\r\nAlma Qorvath\r\n]]>" in p.read_bytes()
    d = read_i2b2(p)[0]
    assert d.text == text_lf
    assert surfaces(d) == [("Alma Qorvath", "PATIENT")]


def test_read_i2b2_2014_offset_text_mismatch(tmp_path: Path):
    tags = tags_2014()
    tags[1] = ("P1", "NAME", tags[1][2] + 1, tags[1][3] + 1, "Alma Qorvath", "PATIENT")
    p = write(tmp_path / "110-01.xml", n2c2_2014(TEXT_2014, tags))
    start = TEXT_2014.index("Alma Qorvath")
    err = expect_error(read_i2b2, p, contains=("110-01.xml", "tag P1", "mismatch", f"text[{start + 1}:{start + 13}] "
                                               "(length 12)", "text attribute (length 12)",
                                               f"occurs at offset {start} (shift -1)"))
    assert "Qorvath" not in str(err) and "lma" not in str(err)  # the strings are personal data


@pytest.mark.parametrize("tag, expected", [
    (("P9", "NAME", 5, 999, None, "PATIENT"), "outside the text"),
    (("P9", "NAME", "x", 4, None, "PATIENT"), "integer start and end"),
])
def test_read_i2b2_2014_bad_offsets(tmp_path: Path, tag, expected):
    p = write(tmp_path / "1-1.xml", n2c2_2014("Alma Qorvath", [tag]))
    expect_error(read_i2b2, p, contains=("1-1.xml", "tag P9", expected))


def test_read_i2b2_2014_overlap_policy(tmp_path: Path):
    text = "Alma Qorvath"
    p = write(tmp_path / "5-1.xml", n2c2_2014(text, [("P0", "NAME", 0, 4, "Alma", "PATIENT"),
                                                       ("P1", "NAME", 0, 12, "Alma Qorvath", "PATIENT")]))
    with pytest.warns(CorpusWarning, match=r"dropped 1 overlapping tag.*5-1\.xml: 1"):
        d = read_i2b2(p)[0]
    assert surfaces(d) == [("Alma Qorvath", "PATIENT")]
    expect_error(read_i2b2, p, strict=True, contains=("5-1.xml", "overlapping", "P0", "P1"))


def test_read_i2b2_invalid_xml_and_unknown_root(tmp_path: Path):
    p = write(tmp_path / "broken.xml", "<deIdi2b2>\n<TEXT>\n<oops></TEXT>\n</deIdi2b2>\n")
    err = expect_error(read_i2b2, p, contains=("broken.xml", "line 3", "invalid XML"))
    assert err.__cause__ is not None
    p = write(tmp_path / "other.xml", "<html><body/></html>")
    expect_error(read_i2b2, p, contains=("other.xml", "root element <html>"))
    expect_error(read_i2b2, write(tmp_path / "empty" / "x.txt", "t").parent, contains=("no .xml files",))


def test_read_i2b2_duplicate_doc_id_across_files(tmp_path: Path):
    write(tmp_path / "a" / "1-01.xml", n2c2_2014("x", []))
    write(tmp_path / "b" / "1-01.xml", n2c2_2014("y", []))
    expect_error(read_i2b2, tmp_path, contains=(str(Path("b") / "1-01.xml"), "duplicate doc_id (first seen at",
                                                str(Path("a") / "1-01.xml")))


# ------------------------------------------------------------------------------------------------------------------
# TAB
# ------------------------------------------------------------------------------------------------------------------

TAB_TEXT = "The applicant, Mr Bertil Ynsk, was born in 1961 and lives in Qorvath."


def mention(text: str, surface: str, etype: str, itype: str, mid: str, occurrence: int = 0) -> dict:
    start = -1
    for _ in range(occurrence + 1):
        start = text.index(surface, start + 1)
    return {"entity_type": etype, "entity_mention_id": mid, "start_offset": start,
            "end_offset": start + len(surface), "span_text": surface, "edit_type": "check",
            "identifier_type": itype, "entity_id": mid.split("_")[0], "confidential_status": "NOT_CONFIDENTIAL"}


def tab_docs() -> list[dict]:
    t = TAB_TEXT
    return [
        {"doc_id": "001-1001", "text": t, "dataset_type": "train", "task": "ANNOTATION",
         "meta": {"applicant": "Bertil Ynsk", "countries": "Qorvath"},
         "annotations": {
             "annotator9": {"entity_mentions": [mention(t, "Mr Bertil Ynsk", "PERSON", "DIRECT", "e1_m1"),
                                                mention(t, "Bertil Ynsk", "PERSON", "DIRECT", "e1_m2"),
                                                mention(t, "1961", "DATETIME", "QUASI", "e2_m1"),
                                                mention(t, "Qorvath", "LOC", "NO_MASK", "e3_m1")]},
             "annotator2": {"entity_mentions": [mention(t, "Bertil Ynsk", "PERSON", "DIRECT", "e1_m1"),
                                                mention(t, "Qorvath", "LOC", "QUASI", "e3_m1")]},
         }},
        {"doc_id": "001-1002", "text": "Ms Alma Qorvath complained.", "dataset_type": "test",
         "meta": {"applicant": "Alma Qorvath"},
         "annotations": {"annotator2": {"entity_mentions": [
             mention("Ms Alma Qorvath complained.", "Alma Qorvath", "PERSON", "DIRECT", "e1_m1")]}}},
    ]


def write_tab(path: Path, docs: list[dict]) -> Path:
    return write(path, json.dumps(docs, indent=1, ensure_ascii=False))


def test_read_tab_default_annotator(tmp_path: Path):
    p = write_tab(tmp_path / "echr_dev.json", tab_docs())
    with pytest.warns(CorpusWarning, match=r"1 document\(s\) have several annotators and no 'quality_checked'"):
        corpus = read_tab(p)
    assert [d.doc_id for d in corpus] == ["001-1001", "001-1002"]
    assert [d.person_id for d in corpus] == ["001-1001", "001-1002"]
    assert [d.split for d in corpus] == ["train", "test"]
    d = corpus[0]
    assert d.text == TAB_TEXT
    assert d.labels["annotator"] == "annotator2"  # no quality_checked: first in sorted order
    assert d.labels["task"] == "ANNOTATION" and d.labels["meta"]["applicant"] == "Bertil Ynsk"
    assert surfaces(d) == [("Bertil Ynsk", "PERSON/DIRECT"), ("Qorvath", "LOC/QUASI")]
    assert surfaces(corpus[1]) == [("Alma Qorvath", "PERSON/DIRECT")]


def test_read_tab_quality_checked_annotator_is_the_default(tmp_path: Path):
    docs = tab_docs()
    docs[0]["quality_checked"] = ["annotator9"]
    p = write_tab(tmp_path / "echr_dev.json", docs)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CorpusWarning)
        with pytest.warns(CorpusWarning, match="dropped 1 overlapping mention"):  # annotator9's nested mention
            d = read_tab(p)[0]
    assert d.labels["annotator"] == "annotator9"
    assert surfaces(d) == [("Mr Bertil Ynsk", "PERSON/DIRECT"), ("1961", "DATETIME/QUASI")]
    docs[0]["quality_checked"] = ["annotator7"]
    expect_error(read_tab, write_tab(tmp_path / "bad_qc.json", docs),
                 contains=("record #1 (001-1001)", "'quality_checked' names ['annotator7']",
                           "['annotator2', 'annotator9']", "--annotator"))


REAL = Path(__file__).parent / "data" / "real"


def test_read_tab_real_record_oracle_spans_are_the_quality_checked_annotators():
    """The real TAB record: its two annotators disagree on 11 DIRECT/QUASI mentions; the oracle detector must see
    exactly the mentions of the annotator the record marks as quality-checked."""
    from toolkit.identifiers import OracleDetector

    path = REAL / "tab" / "echr_dev_first_record.json"
    record = json.loads(path.read_text(encoding="utf-8"))[0]
    (checked,) = record["quality_checked"]

    def direct_and_quasi(annotator: str) -> list[tuple[int, int, str]]:
        return sorted((m["start_offset"], m["end_offset"], f"{m['entity_type']}/{m['identifier_type']}")
                      for m in record["annotations"][annotator]["entity_mentions"]
                      if m["identifier_type"] in ("DIRECT", "QUASI"))

    others = [a for a in record["annotations"] if a != checked]
    assert others and all(direct_and_quasi(a) != direct_and_quasi(checked) for a in others)
    assert sorted(record["annotations"])[0] != checked  # the old rule (first in sorted order) picked another
    with warnings.catch_warnings():
        warnings.simplefilter("error", CorpusWarning)  # no overlaps to resolve, no annotator guessed
        corpus = load_corpus(path)
    doc = corpus[0]
    assert doc.labels["annotator"] == checked and doc.doc_id == record["doc_id"] and doc.split == "dev"
    oracle = OracleDetector().detect(corpus)[0]
    assert [(s.start, s.end, s.label) for s in oracle] == direct_and_quasi(checked)
    assert all(doc.text[s.start:s.end] for s in oracle)
    chosen = load_corpus(path, annotator=others[0])[0]
    assert [(s.start, s.end, s.label) for s in chosen.spans] == direct_and_quasi(others[0])


def test_read_tab_chosen_annotator_overlap_and_no_mask(tmp_path: Path):
    p = write_tab(tmp_path / "echr.json", tab_docs()[:1])
    with pytest.warns(CorpusWarning, match=r"dropped 1 overlapping mention.*001-1001: 1"):
        d = read_tab(p, annotator="annotator9")[0]
    # nested "Bertil Ynsk" inside "Mr Bertil Ynsk" dropped (longer kept); NO_MASK "Qorvath" skipped
    assert surfaces(d) == [("Mr Bertil Ynsk", "PERSON/DIRECT"), ("1961", "DATETIME/QUASI")]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        only_quasi = read_tab(p, annotator="annotator9", identifier_types="QUASI")[0]
    assert surfaces(only_quasi) == [("1961", "DATETIME/QUASI")]
    expect_error(read_tab, p, annotator="annotator9", strict=True,
                 contains=("echr.json", "record #1 (001-1001)", "overlapping", "e1_m1", "e1_m2"))


def test_read_tab_person_field(tmp_path: Path):
    p = write_tab(tmp_path / "echr.json", tab_docs())
    assert read_tab(p, person_field="applicant", annotator="annotator2").person_ids == ["Bertil Ynsk", "Alma Qorvath"]
    expect_error(read_tab, p, person_field="respondent",
                 contains=("echr.json", "record #1 (001-1001)", "'respondent'", "applicant"))


def test_read_tab_missing_annotator(tmp_path: Path):
    p = write_tab(tmp_path / "echr.json", tab_docs())
    expect_error(read_tab, p, annotator="annotator9",
                 contains=("echr.json", "record #2 (001-1002)", "annotator 'annotator9' not found",
                           "['annotator2']"))


def test_read_tab_span_text_mismatch(tmp_path: Path):
    docs = tab_docs()
    docs[1]["annotations"]["annotator2"]["entity_mentions"][0]["start_offset"] += 1
    docs[1]["annotations"]["annotator2"]["entity_mentions"][0]["end_offset"] += 1
    p = write_tab(tmp_path / "echr.json", docs)
    err = expect_error(read_tab, p, contains=("echr.json", "record #2 (001-1002), mention e1_m1", "mismatch",
                                              "text[4:16] (length 12) differs from span_text (length 12)",
                                              "occurs at offset 3 (shift -1)"))
    assert "Qorvath" not in str(err)


@pytest.mark.parametrize("content, expected", [
    ('{"doc_id": "x"}', "expected a JSON list"),
    ("[\n{\"doc_id\": \"x\",\n}\n]", "line 3"),
    ("[]", "empty"),
    ('[{"doc_id": "x", "text": "t"}]', "missing field(s) 'annotations'"),
    ('[{"doc_id": "x", "text": "t", "annotations": {}}, {"doc_id": "x", "text": "u", "annotations": {}}]',
     "duplicate doc_id (first seen at record #1 (x))"),
])
def test_read_tab_bad_files(tmp_path: Path, content: str, expected: str):
    p = write(tmp_path / "tab.json", content)
    expect_error(read_tab, p, contains=("tab.json", expected))


# ------------------------------------------------------------------------------------------------------------------
# mbox / Maildir
# ------------------------------------------------------------------------------------------------------------------

MSG_PLAIN = b"""From: "Ynsk, Bertil" <Bertil.Ynsk@Example.org>
To: alma@example.org,
 wenzel@example.org
Subject: Lunch =?utf-8?q?caf=C3=A9?=
Date: Mon, 3 Jan 2000 10:00:00 -0800
Message-ID: <m1@example.org>
Content-Type: text/plain; charset=utf-8
Content-Transfer-Encoding: 8bit

Hi Alma, caf\xc3\xa9 at noon?
"""

MSG_MULTIPART = b"""From: alma@example.org
To: "Ynsk, Bertil" <bertil.ynsk@example.org>
Subject: Re: Lunch
Content-Type: multipart/alternative; boundary="BOUNDARY"

--BOUNDARY
Content-Type: text/html

<p>Gern!</p>
--BOUNDARY
Content-Type: text/plain; charset=iso-8859-1
Content-Transfer-Encoding: quoted-printable

Gern, Gr=FC=DFe
--BOUNDARY--
"""

MSG_HTML_ONLY = b"""From: wenzel@example.org
Subject: html only
Message-ID: <m3@example.org>
Content-Type: text/html

<p>Hallo</p>
"""


def make_mbox(path: Path, messages: list[bytes]) -> Path:
    data = b"".join(b"From MAILER-DAEMON Mon Jan  3 10:00:00 2000\n" + m + b"\n" for m in messages)
    return write(path, data)


def test_read_mbox_sender(tmp_path: Path):
    p = make_mbox(tmp_path / "ynsk.mbox", [MSG_PLAIN, MSG_MULTIPART])
    corpus = read_mbox(p)
    assert [d.doc_id for d in corpus] == ["m1@example.org", "ynsk.mbox#2"]
    assert [d.person_id for d in corpus] == ["bertil.ynsk@example.org", "alma@example.org"]
    assert corpus[0].text == ('From: "Ynsk, Bertil" <Bertil.Ynsk@Example.org>\n'
                              "To: alma@example.org, wenzel@example.org\n"
                              "Subject: Lunch café\n"
                              "Date: Mon, 3 Jan 2000 10:00:00 -0800\n"
                              "\n"
                              "Hi Alma, café at noon?\n")
    # the line break before a MIME boundary belongs to the boundary (RFC 2046), so no final "\n" here
    assert corpus[1].text.endswith("Subject: Re: Lunch\n\nGern, Grüße")


def test_read_mbox_owner_and_html_warning(tmp_path: Path):
    p = make_mbox(tmp_path / "ynsk.mbox", [MSG_PLAIN, MSG_HTML_ONLY])
    with pytest.warns(CorpusWarning, match="1 message"):
        corpus = read_mbox(p, person="owner")
    assert corpus.person_ids == ["ynsk"]
    assert corpus[1].text == "From: wenzel@example.org\nSubject: html only\n\n"
    with pytest.warns(CorpusWarning):
        assert read_mbox(p, person="owner", owner="bertil").person_ids == ["bertil"]


def test_read_mbox_bad_charset(tmp_path: Path):
    bad = MSG_PLAIN.replace(b"charset=utf-8", b"charset=us-ascii").replace(b"m1@", b"m9@")
    p = make_mbox(tmp_path / "box.mbox", [MSG_MULTIPART, bad])
    err = expect_error(read_mbox, p, contains=("box.mbox", "message 2", "us-ascii", "charset_errors"))
    assert isinstance(err.__cause__, UnicodeDecodeError)
    assert read_mbox(p, charset_errors="replace")[1].text.endswith("caf\ufffd\ufffd at noon?\n")
    unknown = MSG_PLAIN.replace(b"charset=utf-8", b"charset=x-klingon")
    expect_error(read_mbox, make_mbox(tmp_path / "k.mbox", [unknown]), contains=("k.mbox", "message 1", "x-klingon"))


def test_read_mbox_raw_8bit_header_not_utf8(tmp_path: Path):
    p = make_mbox(tmp_path / "h.mbox", [MSG_PLAIN.replace(b"Subject: Lunch", b"Subject: Gr\xfc\xdfe")])
    expect_error(read_mbox, p, contains=("h.mbox", "message 1", "header Subject"))


def test_read_mbox_errors(tmp_path: Path):
    no_from = MSG_HTML_ONLY.replace(b"From: wenzel@example.org\n", b"")
    p = make_mbox(tmp_path / "nofrom.mbox", [MSG_PLAIN, no_from])
    expect_error(read_mbox, p, contains=("nofrom.mbox", "message 2", "no From address"))
    dup = make_mbox(tmp_path / "dup.mbox", [MSG_PLAIN, MSG_PLAIN])
    err = expect_error(read_mbox, dup, contains=("dup.mbox", "record message 2", "duplicate doc_id (first seen at "
                                                 "record message 1)"))
    assert "m1@" not in str(err)  # a Message-ID often holds an address
    empty = write(tmp_path / "empty.mbox", "just text, no From_ line\n")
    expect_error(read_mbox, empty, contains=("empty.mbox", "empty"))
    expect_error(read_mbox, p, person="recipient", contains=("'sender' or 'owner'",))


def test_read_maildir(tmp_path: Path):
    folder = tmp_path / "alma"
    box = mailbox.Maildir(folder, create=True)
    box.add(mailbox.MaildirMessage(MSG_PLAIN))
    box.add(mailbox.MaildirMessage(MSG_MULTIPART))
    box.close()
    corpus = read_maildir(folder, person="owner")
    assert len(corpus) == 2 and corpus.person_ids == ["alma"]
    ids = sorted(d.doc_id for d in corpus)
    assert ids[0] in ("alma#1", "alma#2") and ids[1] == "m1@example.org"  # fallback id: "<folder>#<n>"
    assert {d.text.split("\n\n", 1)[1] for d in corpus} == {"Hi Alma, café at noon?\n", "Gern, Grüße"}
    assert set(read_maildir(folder).person_ids) == {"bertil.ynsk@example.org", "alma@example.org"}
    expect_error(read_maildir, write(tmp_path / "plain" / "x.txt", "x").parent,
                 contains=("plain", "not a Maildir", "cur"))


# ------------------------------------------------------------------------------------------------------------------
# Enron original layout (real messages of the public corpus, tests/data/real/enron)
# ------------------------------------------------------------------------------------------------------------------

ENRON = Path(__file__).parent / "data" / "real" / "enron"
ENRON_IDS = ["allen-p/_sent_mail/285", "allen-p/_sent_mail/575", "allen-p/all_documents/97", "allen-p/straw/1",
             "allen-p/straw/7", "guzman-m/_sent_mail/206", "guzman-m/discussion_threads/1906",
             "guzman-m/notes_inbox/1677", "guzman-m/notes_inbox/1683"]


def test_read_enron_collection_mailbox_and_folder_agree():
    corpus = load_corpus(ENRON)
    assert detect_format(ENRON) == "enron"
    assert [d.doc_id for d in corpus] == ENRON_IDS  # folder order, then message number
    assert corpus.person_ids == ["allen-p", "guzman-m"]
    assert [d.person_id for d in corpus] == [i.split("/")[0] for i in ENRON_IDS]
    mailbox_ = load_corpus(ENRON / "allen-p")
    folder = load_corpus(ENRON / "allen-p" / "straw")
    assert detect_format(ENRON / "allen-p") == detect_format(ENRON / "allen-p" / "straw") == "enron"
    assert [d.doc_id for d in mailbox_] == ENRON_IDS[:5] and [d.doc_id for d in folder] == ENRON_IDS[3:5]
    assert set(folder.person_ids) == {"allen-p"}  # the owner of a mail folder is its mailbox
    for doc in list(mailbox_) + list(folder):
        assert corpus.get(doc.doc_id) == doc


def test_read_enron_text_is_headers_then_the_stored_body():
    corpus = read_enron(ENRON)
    raw = (ENRON / "allen-p" / "_sent_mail" / "285.").read_bytes()
    doc = corpus.get("allen-p/_sent_mail/285")
    assert doc.text == ("From: phillip.allen@enron.com\nTo: ina.rangel@enron.com\n"
                        "Subject: Meeting-THURSDAY, MARCH 23 - 11:15 AM\nDate: Wed, 22 Mar 2000 05:48:00 -0800 (PST)"
                        "\n\n" + raw.split(b"\r\n\r\n", 1)[1].decode("ascii"))
    assert "X-From" not in doc.text and "X-Folder" not in doc.text and "Message-ID" not in doc.text.split("\n\n")[0]
    many = corpus.get("guzman-m/notes_inbox/1683").text.split("\n\n", 1)[0]
    to_line = next(line for line in many.split("\n") if line.startswith("To: "))
    assert "murray.o'neil@enron.com" in to_line and to_line.count("@") > 20  # unfolded multi-recipient line
    assert corpus.get("allen-p/straw/7").text.startswith("From: owner-strawbale@crest.org\nSubject: \nDate: ")


def test_read_enron_person_sender():
    corpus = load_corpus(ENRON, person="sender")
    sender = {d.doc_id: d.person_id for d in corpus}
    assert sender["allen-p/_sent_mail/285"] == sender["allen-p/_sent_mail/575"] == "phillip.allen@enron.com"
    assert sender["allen-p/straw/1"] == "bobregon@bga.com"
    assert sender["guzman-m/_sent_mail/206"] == "mark.guzman@enron.com"
    assert len(corpus.person_ids) == 7


def enron_message(sender: str = "alma@example.org", body: str = "Hello.") -> bytes:
    return (f"Message-ID: <1.JavaMail.x@y>\r\nDate: Mon, 3 Jan 2000 10:00:00 -0800 (PST)\r\nFrom: {sender}\r\n"
            f"To: bertil@example.org\r\nSubject: s\r\nX-From: Alma\r\n\r\n{body}\r\n").encode()


def test_read_enron_layout_rules(tmp_path: Path):
    root = tmp_path / "maildir"
    write(root / "qorvath-a" / "inbox" / "10.", enron_message(body="ten"))
    write(root / "qorvath-a" / "inbox" / "2.", enron_message(body="two"))
    write(root / "qorvath-a" / "inbox" / "projects" / "1", enron_message(body="nested, dot lost"))
    write(root / "qorvath-a" / "notes.txt", "not a message")
    write(root / "ynsk-b" / "sent" / "1.", enron_message("bertil@example.org"))
    assert detect_format(root) == "enron"
    corpus = read_enron(root)
    assert [d.doc_id for d in corpus] == ["qorvath-a/inbox/2", "qorvath-a/inbox/10", "qorvath-a/inbox/projects/1",
                                          "ynsk-b/sent/1"]
    assert corpus.person_ids == ["qorvath-a", "ynsk-b"]
    assert corpus.get("qorvath-a/inbox/10").text.endswith("\n\nten\r\n")
    # "1." and "1" in one folder are the same doc_id
    write(root / "ynsk-b" / "sent" / "1", enron_message())
    expect_error(read_enron, root, contains=(str(Path("sent") / "1"), "duplicate doc_id (first seen at",
                                             str(Path("sent") / "1.")))


def test_read_enron_errors_and_detection(tmp_path: Path):
    expect_error(read_enron, write(tmp_path / "1.", enron_message()), contains=("got a file",))
    (tmp_path / "empty" / "inbox").mkdir(parents=True)
    expect_error(read_enron, tmp_path / "empty", contains=("no message files",))
    expect_error(read_enron, ENRON, person="recipient", contains=("'sender' or 'owner'",))
    box = tmp_path / "box"
    write(box / "inbox" / "1.", enron_message())
    write(box / "inbox" / "2.", enron_message(sender=""))
    expect_error(read_enron, box, person="sender", contains=(str(Path("inbox") / "2."), "no From address"))
    notes = tmp_path / "notes"
    write(notes / "1.", "A note, no header.")
    write(notes / "a.txt", "Alma")
    assert detect_format(notes) == "txt"  # a file named like a message but holding no header is not Enron


# ------------------------------------------------------------------------------------------------------------------
# folders of .txt files
# ------------------------------------------------------------------------------------------------------------------


@pytest.fixture
def txt_folder(tmp_path: Path) -> Path:
    root = tmp_path / "letters"
    write(root / "alma" / "2031-01.txt", "Dear Alma Qorvath,\r\nthanks.\n")
    write(root / "alma" / "2031-02.txt", "Zoë 🙂\u2028end")
    write(root / "bertil" / "2031-01.txt", "Bertil Ynsk")
    write(root / "bertil" / "notes.md", "not read")
    return root


def test_read_txt_folder_rules(txt_folder: Path):
    corpus = read_txt_folder(txt_folder, person_rule="parent", split="public")
    assert [d.doc_id for d in corpus] == ["alma/2031-01", "alma/2031-02", "bertil/2031-01"]
    assert [d.person_id for d in corpus] == ["alma", "alma", "bertil"]
    assert corpus[0].text == "Dear Alma Qorvath,\r\nthanks.\n"  # kept exactly
    assert corpus[1].text == "Zoë 🙂\u2028end"
    assert corpus.splits == ["public"]
    assert [d.person_id for d in read_txt_folder(txt_folder)] == ["2031-01", "2031-02", "2031-01"]  # stem
    assert read_txt_folder(txt_folder, person_rule=r"^(\w)").person_ids == ["a", "b"]
    assert read_txt_folder(txt_folder, person_rule=lambda rel: rel.upper()).person_ids[0] == "ALMA/2031-01.TXT"
    assert len(read_txt_folder(txt_folder, pattern="**/*.md")) == 1


def test_read_txt_folder_bad_regex(txt_folder: Path):
    expect_error(read_txt_folder, txt_folder, person_rule=r"^alma/(.*)",
                 contains=(str(Path("bertil") / "2031-01.txt"), "does not match 'bertil/2031-01.txt'"))
    expect_error(read_txt_folder, txt_folder, person_rule=r"^alma", contains=("letters", "no capturing group"))


def test_read_txt_folder_non_utf8(txt_folder: Path):
    write(txt_folder / "bertil" / "2031-02.txt", b"line one\nGr\xfc\xdfe\n")
    expect_error(read_txt_folder, txt_folder,
                 contains=(str(Path("bertil") / "2031-02.txt"), "line 2", "byte offset 11", "encoding="))
    corpus = read_txt_folder(txt_folder, person_rule="parent", encoding="latin-1")
    assert corpus.get("bertil/2031-02").text == "line one\nGrüße\n"
    expect_error(read_txt_folder, txt_folder, encoding="no-such-codec", contains=("unknown text encoding",))


def test_read_txt_folder_empty_and_duplicates(tmp_path: Path):
    root = tmp_path / "t"
    write(root / "a.md", "x")
    expect_error(read_txt_folder, root, contains=("t", "empty", "**/*.txt"))
    write(root / "a.txt", "one")
    write(root / "a.text", "two")
    expect_error(read_txt_folder, root, pattern="a.t*", contains=("a.txt", "duplicate doc_id (first seen at",
                                                                  "a.text"))


# ------------------------------------------------------------------------------------------------------------------
# load_corpus / detect_format
# ------------------------------------------------------------------------------------------------------------------


@pytest.fixture
def one_of_each(tmp_path: Path, good_jsonl: Path) -> dict[str, Path]:
    maildir = tmp_path / "maildir_alma"
    box = mailbox.Maildir(maildir, create=True)
    box.add(mailbox.MaildirMessage(MSG_PLAIN))
    box.close()
    txt = tmp_path / "txts"
    write(txt / "a" / "one.txt", "Alma")
    return {
        "jsonl": good_jsonl,
        "ndjson": write(tmp_path / "copy.ndjson", good_jsonl.read_bytes()),
        "csv": write(tmp_path / "t.csv", "person_id,text\np,Alma\n"),
        "i2b2": write(tmp_path / "110-01.xml", n2c2_2014(TEXT_2014, tags_2014())),
        "i2b2_folder": (write(tmp_path / "xmls" / "1-1.xml", n2c2_2014("x", [])).parent),
        "tab": write_tab(tmp_path / "echr.json", tab_docs()[1:]),
        "mbox": make_mbox(tmp_path / "box.mbox", [MSG_PLAIN]),
        "mbox_nosuffix": make_mbox(tmp_path / "inbox", [MSG_PLAIN]),
        "maildir": maildir,
        "txt": txt,
    }


@pytest.mark.parametrize("key, fmt, n_docs", [
    ("jsonl", "jsonl", 3), ("ndjson", "jsonl", 3), ("csv", "csv", 1), ("i2b2", "i2b2", 1),
    ("i2b2_folder", "i2b2", 1), ("tab", "tab", 1), ("mbox", "mbox", 1), ("mbox_nosuffix", "mbox", 1),
    ("maildir", "maildir", 1), ("txt", "txt", 1),
])
def test_load_corpus_auto_detects(one_of_each: dict[str, Path], key: str, fmt: str, n_docs: int):
    path = one_of_each[key]
    assert detect_format(path) == fmt
    corpus = load_corpus(path)
    assert isinstance(corpus, Corpus) and len(corpus) == n_docs
    assert len(load_corpus(str(path), format=fmt)) == n_docs


def test_load_corpus_options_and_errors(tmp_path: Path, one_of_each: dict[str, Path]):
    assert load_corpus(one_of_each["txt"], person_rule="parent").person_ids == ["a"]
    assert load_corpus(one_of_each["tab"], annotator="annotator2")[0].labels["annotator"] == "annotator2"
    expect_error(load_corpus, tmp_path / "missing.jsonl", contains=("missing.jsonl", "file not found"))
    expect_error(load_corpus, write(tmp_path / "x.docx", b"PK\x03\x04"),
                 contains=("x.docx", "cannot detect", "--format", "jsonl, csv, parquet, i2b2, tab, mbox, maildir, "
                           "enron, txt"))
    expect_error(load_corpus, write(tmp_path / "x.parquet", b"PAR1"), contains=("x.parquet", "not a readable Parquet"))
    expect_error(load_corpus, one_of_each["csv"], format="excel", contains=("unknown format 'excel'", "jsonl"))
    expect_error(load_corpus, one_of_each["csv"], textcolumn="body",
                 contains=("t.csv", "no option(s) textcolumn", "text_field", "on_error"))
    empty_dir = tmp_path / "nothing"
    empty_dir.mkdir()
    expect_error(load_corpus, empty_dir, contains=("nothing", "cannot detect"))


def test_formats_and_exports():
    assert FORMATS == ("jsonl", "csv", "parquet", "i2b2", "tab", "mbox", "maildir", "enron", "txt")
    assert issubclass(CorpusError, ToolkitError) and Span(0, 1, "X").label == "X"


# ------------------------------------------------------------------------------------------------------------------
# field mapping (CSV, JSONL)
# ------------------------------------------------------------------------------------------------------------------


def test_read_csv_person_per_row_only_when_asked(tmp_path: Path):
    p = write(tmp_path / "reviews.csv", "review_id,body,fold\nr1,Alma liked it,train\nr2,Bertil did not,test\n")
    expect_error(read_csv, p, text_field="body", id_field="review_id",
                 contains=("missing column(s) 'person_id'", "--person-field @row"))
    corpus = read_csv(p, text_field="body", person_field="@row", id_field="review_id", split_field="fold")
    assert [(d.doc_id, d.person_id, d.split) for d in corpus] == [("r1", "r1", "train"), ("r2", "r2", "test")]
    generated = load_corpus(p, text_field="body", person_field="@row", id_field="@row")
    assert [(d.doc_id, d.person_id) for d in generated] == [("reviews-1", "reviews-1"), ("reviews-2", "reviews-2")]


def test_read_jsonl_foreign_export_with_named_fields(tmp_path: Path):
    lines = [jsonl_line(id="m1", author="alma@example.org", body="Hi Bertil", date="2001-05-01", fold="train"),
             jsonl_line(id="m2", author="bertil@example.org", body="Hi Alma", date="2001-05-02", fold="test")]
    p = write(tmp_path / "mail.jsonl", "\n".join(lines) + "\n")
    expect_error(read_jsonl, p, contains=("line 1", "unknown field(s) 'id'", "--text-field"))  # native: strict
    corpus = read_jsonl(p, text_field="body", person_field="author", id_field="id", split_field="fold")
    assert [(d.doc_id, d.person_id, d.text, d.split) for d in corpus] == [
        ("m1", "alma@example.org", "Hi Bertil", "train"), ("m2", "bertil@example.org", "Hi Alma", "test")]
    rows = load_corpus(p, text_field="body", person_field="@row", id_field=None, split_field=None)
    assert [(d.doc_id, d.person_id, d.split) for d in rows] == [("mail-1", "mail-1", None), ("mail-2", "mail-2", None)]
    expect_error(read_jsonl, p, text_field="text_body", person_field="author",
                 contains=("mail.jsonl", "line 1", "missing field(s) 'doc_id', 'text_body'"))
    expect_error(read_jsonl, p, text_field="@row", contains=("text_field must name a field",))


# ------------------------------------------------------------------------------------------------------------------
# lenient reading: on_error="skip"
# ------------------------------------------------------------------------------------------------------------------


def skipped_of(corpus: Corpus) -> list[tuple[int | None, str | None, str]]:
    return [(s.line, s.record, s.reason) for s in corpus.skipped]


def read_skipping(fn, *args, **kwargs) -> Corpus:
    with pytest.warns(CorpusWarning, match=r"skipped \d+ bad record"):
        return fn(*args, on_error="skip", **kwargs)


def test_on_error_skip_jsonl(tmp_path: Path):
    good = jsonl_line(doc_id="a", person_id="x", text="Alma Qorvath")
    lines = [good.encode(), b'{"doc_id": "b", "person_id": "x", "text": "Gr\xfc\xdfe Bertil"}', b"{not json",
             jsonl_line(doc_id="a", person_id="y", text="Alma again").encode(),
             jsonl_line(doc_id="c", person_id="z", text="Wenzel").encode()]
    p = write(tmp_path / "notes.jsonl", b"\n".join(lines) + b"\n")
    expect_error(read_jsonl, p, contains=("line 2", "not valid utf-8"))  # strict stays the default
    corpus = read_skipping(read_jsonl, p)
    assert [d.doc_id for d in corpus] == ["a", "c"] and corpus[0].text == "Alma Qorvath"
    skipped = skipped_of(corpus)
    assert [line for line, _, _ in skipped] == [2, 3, 4]
    assert "not valid utf-8: byte fc" in skipped[0][2] and "invalid JSON" in skipped[1][2]
    assert skipped[2][2] == "duplicate doc_id (first seen at line 1)"
    assert all(s.file == str(p) for s in corpus.skipped)
    assert not any(name in repr(corpus.skipped) for name in ("Alma", "Bertil", "Gr"))


def test_on_error_skip_csv(tmp_path: Path):
    content = (b'doc_id,person_id,text\nd1,p1,Alma\nd2,p2,too,many\nd3,p3,"bad"quote\nd4,p4,Gr\xfc\xdfe\n'
               b"d5,p5,Bertil\n")
    p = write(tmp_path / "t.csv", content)
    corpus = read_skipping(read_csv, p)
    assert [d.doc_id for d in corpus] == ["d1", "d5"]
    assert [(line, record) for line, record, _ in skipped_of(corpus)] == [(3, "2"), (4, "3"), (5, "4")]
    reasons = [r for _, _, r in skipped_of(corpus)]
    assert "4 field(s)" in reasons[0] and "malformed CSV" in reasons[1] and "not valid utf-8" in reasons[2]
    headless = write(tmp_path / "h.csv", "d1,p1,Alma\n")  # a header problem still stops the read
    expect_error(read_csv, headless, on_error="skip", contains=("missing column(s)",))


def test_on_error_skip_i2b2_file_record_and_tag(tmp_path: Path):
    tags = tags_2014()
    tags[1] = ("P1", "NAME", tags[1][2] + 1, tags[1][3] + 1, "Alma Qorvath", "PATIENT")
    write(tmp_path / "110-01.xml", n2c2_2014(TEXT_2014, tags))
    write(tmp_path / "111-01.xml", "<deIdi2b2><TEXT>unclosed")
    write(tmp_path / "112-01.xml", n2c2_2014("Bertil", []))
    corpus = read_skipping(read_i2b2, tmp_path)
    assert [d.doc_id for d in corpus] == ["110-01", "112-01"]
    assert [label for _, label in surfaces(corpus[0])] == ["DATE", "AGE", "DOCTOR"]  # the shifted tag only is out
    records = [(Path(s.file).name, s.record) for s in corpus.skipped]
    assert records == [("110-01.xml", "tag P1"), ("111-01.xml", None)]
    assert "offset/text mismatch" in corpus.skipped[0].reason and "invalid XML" in corpus.skipped[1].reason


def test_on_error_skip_tab_mentions_and_records(tmp_path: Path):
    docs = tab_docs()
    docs[1]["annotations"]["annotator2"]["entity_mentions"][0]["start_offset"] += 1
    docs.append({"doc_id": "001-1003", "text": "t", "annotations": {"annotator5": {"entity_mentions": []}}})
    p = write_tab(tmp_path / "echr.json", docs)
    corpus = read_skipping(read_tab, p, annotator="annotator2")
    assert [d.doc_id for d in corpus] == ["001-1001", "001-1002"] and corpus[1].spans == ()
    assert [s.record for s in corpus.skipped] == ["#2 (001-1002), mention e1_m1", "#3 (001-1003)"]
    assert "annotator 'annotator2' not found" in corpus.skipped[1].reason


def test_on_error_skip_mail_and_txt(tmp_path: Path):
    nofrom = MSG_PLAIN.replace(b'From: "Ynsk, Bertil" <Bertil.Ynsk@Example.org>\n', b"")
    p = make_mbox(tmp_path / "box.mbox", [nofrom, MSG_MULTIPART])
    corpus = read_skipping(read_mbox, p)
    assert corpus.person_ids == ["alma@example.org"]
    assert skipped_of(corpus) == [(None, "message 1", "the message has no From address (use person='owner' to "
                                                      "group by mailbox)")]
    folder = tmp_path / "txt"
    write(folder / "a.txt", "Alma")
    write(folder / "b.txt", b"Gr\xfc\xdfe")
    corpus = read_skipping(read_txt_folder, folder)
    assert [d.doc_id for d in corpus] == ["a"] and Path(corpus.skipped[0].file).name == "b.txt"


def test_load_corpus_writes_skipped_jsonl(tmp_path: Path):
    lines = [jsonl_line(doc_id="alma@example.org", person_id="x", text="Alma"), "{oops",
             jsonl_line(doc_id="alma@example.org", person_id="y", text="Alma")]
    p = write(tmp_path / "n.jsonl", "\n".join(lines) + "\n")
    out = tmp_path / "run" / "skipped.jsonl"
    with pytest.warns(CorpusWarning, match="skipped 2 bad record"):
        corpus = load_corpus(p, on_error="skip", skipped_path=out)
    assert len(corpus) == 1
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [(r["line"], r["record"]) for r in rows] == [(2, None), (3, None)]
    assert all(set(r) == {"file", "line", "record", "reason"} and r["file"] == str(p) for r in rows)
    assert "alma" not in out.read_text(encoding="utf-8").lower()
    assert oct(out.stat().st_mode & 0o777) == "0o600"
    clean = load_corpus(one := write(tmp_path / "ok.jsonl", lines[0] + "\n"), skipped_path=tmp_path / "run")
    assert len(clean) == 1 and (tmp_path / "run" / "skipped.jsonl").read_text() == ""  # a folder: skipped.jsonl
    assert one.exists()
    expect_error(load_corpus, p, on_error="ignore", contains=("on_error must be one of strict, skip",))
    expect_error(load_corpus, p, skipped_path=tmp_path / "never.jsonl", contains=("line 2", "invalid JSON"))
    assert not (tmp_path / "never.jsonl").exists()
    everything_bad = write(tmp_path / "bad.jsonl", "{oops\n[]\n")
    with pytest.warns(CorpusWarning):
        expect_error(load_corpus, everything_bad, on_error="skip",
                     contains=("every record was skipped (2; the first at", "line 1", "invalid JSON"))


def test_an_empty_person_id_names_the_users_column(tmp_path: Path):
    """``--person-field patient``: an empty cell is reported in the user's column, not the toolkit's role name, and
    never with the record's text (issue 57)."""
    p = write(tmp_path / "notes.csv", "patient,note\nqorvath,Seen today.\n,Secret note of nobody.\n")
    err = expect_error(read_csv, p, text_field="note", person_field="patient",
                       contains=("notes.csv", "record 2", "missing field 'patient' (the person id)"))
    assert "Secret" not in str(err) and "'person_id'" not in str(err)
    # the default column keeps its own name
    q = write(tmp_path / "plain.csv", "person_id,text\n,x\n")
    expect_error(read_csv, q, contains=("plain.csv", "missing field 'person_id'"))
    # JSON Lines with named fields, the same
    j = tmp_path / "notes.jsonl"
    j.write_text('{"patient": " ", "note": "Secret"}\n', encoding="utf-8")
    err = expect_error(read_jsonl, j, text_field="note", person_field="patient", id_field="@row",
                       contains=("notes.jsonl", "missing field 'patient' (the person id)"))
    assert "Secret" not in str(err)
