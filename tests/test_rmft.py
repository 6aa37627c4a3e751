"""RMFT and PII-aware dedup (methods.md §6): one original occurrence per address, look-alikes never equal to a real
address, seeded reproducibility, text outside addresses unchanged, spans kept aligned; dedup removes exactly the
header lines that repeat an address; the CLI writes the corpus and a count-only summary."""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from toolkit.cli import main
from toolkit.corpus import Corpus, load_corpus, make_document
from toolkit.strategies.dedup import dedup
from toolkit.identifiers.addresses import parse_address
from toolkit.strategies.rmft import rmft
from toolkit.identifiers.addresses import edit_document
from toolkit.strategies.rmft import Stores, look_alike

ROOT = Path(__file__).resolve().parents[1]
ADDR = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")  # independent copy of the pattern


@pytest.fixture(scope="module")
def mail() -> Corpus:
    return load_corpus(ROOT / "data_samples/email/train.jsonl")[:600]


@pytest.fixture(scope="module")
def mail_rmft(mail):
    return rmft(mail, seed=0)


def _outside(text: str) -> list[str]:
    """The text between addresses."""
    return ADDR.split(text)


def test_rmft_keeps_exactly_the_first_occurrence_of_each_address(mail, mail_rmft):
    before = [(m.group().lower(), i, m.start()) for i, d in enumerate(mail) for m in ADDR.finditer(d.text)]
    first = {}
    for addr, i, start in before:
        first.setdefault(addr, (i, start))
    original = set(first)
    after = Counter(m.group().lower() for d in mail_rmft.corpus for m in ADDR.finditer(d.text))
    assert {a: c for a, c in after.items() if a in original} == {a: 1 for a in original}
    # the surviving original is the first one: same document, and every earlier occurrence in that document is
    # a look-alike
    for addr, (i, start) in first.items():
        text = mail_rmft.corpus[i].text
        hits = [m for m in ADDR.finditer(text) if m.group().lower() == addr]
        assert len(hits) == 1
        n_before = sum(1 for m in ADDR.finditer(mail[i].text) if m.start() < start)
        assert sum(1 for m in ADDR.finditer(text) if m.start() < hits[0].start()) == n_before
    s = mail_rmft.summary
    assert s["after"]["original_max_repetition"] == 1 and s["before"]["original_max_repetition"] > 100
    assert s["n_replaced"] == len(before) - len(original) == len(mail_rmft.replacements)


def test_rmft_never_produces_a_real_address(mail, mail_rmft):
    original = {m.group().lower() for d in mail for m in ADDR.finditer(d.text)}
    rep = mail_rmft.replacements
    assert (rep["replacement"].str.lower() != rep["address"]).all()
    assert not set(rep["replacement"].str.lower()) & original
    assert all(ADDR.fullmatch(r) for r in rep["replacement"])
    assert set(rep["anchor"]) <= {"first", "last", "local", "domain"}
    # the anchor part is kept, the others are drawn
    for _, r in rep.head(300).iterrows():
        o, n = parse_address(r["address"]), parse_address(r["replacement"].lower())
        if r["anchor"] == "domain":
            assert (o.domain, o.tld) == (n.domain, n.tld)
        elif r["anchor"] in ("first", "local"):
            assert o.first == n.first and (o.domain, o.tld) != (n.domain, n.tld)
        else:
            assert o.last == n.last and (o.domain, o.tld) != (n.domain, n.tld)


def test_rmft_text_outside_addresses_is_byte_identical_and_spans_follow(mail, mail_rmft):
    for a, b in zip(mail, mail_rmft.corpus):
        assert (a.doc_id, a.person_id, a.split) == (b.doc_id, b.person_id, b.split)
        assert _outside(a.text) == _outside(b.text)
        assert len(ADDR.findall(a.text)) == len(ADDR.findall(b.text))
        # gold EMAIL spans still cover exactly the (new) addresses; other spans keep their text
        assert [(s.start, s.end) for s in b.spans if s.label == "EMAIL"] == \
            [(m.start(), m.end()) for m in ADDR.finditer(b.text)]
        assert [a.text[s.start:s.end] for s in a.spans if s.label != "EMAIL"] == \
            [b.text[s.start:s.end] for s in b.spans if s.label != "EMAIL"]
    rep = mail_rmft.replacements.head(200)
    for _, r in rep.iterrows():
        assert mail_rmft.corpus.get(r["doc_id"]).text[r["new_start"]:r["new_end"]] == r["replacement"]
        assert mail.get(r["doc_id"]).text[r["start"]:r["end"]].lower() == r["address"]


def test_rmft_is_reproducible_with_a_seed(mail, mail_rmft):
    again = rmft(mail, seed=0)
    assert [d.text for d in again.corpus] == [d.text for d in mail_rmft.corpus]
    pd.testing.assert_frame_equal(again.replacements, mail_rmft.replacements)
    other = rmft(mail, seed=1)
    assert [d.text for d in other.corpus] != [d.text for d in mail_rmft.corpus]


EDGE = [
    ("m1", 'From: "Doe, Jane" <Jane.Doe@Enron.com>\nTo: JDOE@XMAIL.COM, bob_k@acme.org\n\nHi.\n'),
    ("m2", "From: jane.doe+news@enron.com\nTo: jdoe@xmail.com\n\nWrite to <Jane.Doe@Enron.com> or "
           "jdoe@xmail.com.\nJANE.DOE@ENRON.COM\n"),
    ("m3", "Cc: bob_k@acme.org, carl.cole@acme.org\n\n-- bob_k@acme.org\n"),
]


def _edge_corpus():
    return Corpus([make_document(i, "p", t, [(m.start(), m.end(), "EMAIL") for m in ADDR.finditer(t)])
                   for i, t in EDGE])


def test_rmft_edge_cases_case_plus_brackets_quotes_no_separator():
    corpus = _edge_corpus()
    res = rmft(corpus, seed=3)
    t1, t2, t3 = (d.text for d in res.corpus)
    assert t1 == EDGE[0][1]  # every address of the first message is a first occurrence
    # "jane.doe+news" is not "jane.doe": its own address, kept; later forms of Jane.Doe@Enron.com are replaced
    assert t2.startswith("From: jane.doe+news@enron.com\n")
    reps = res.replacements.set_index(["doc_id", "start"])
    for (doc, start), r in reps.iterrows():
        new = r["replacement"]
        if r["address"] == "jdoe@xmail.com":  # separator-less local part
            assert "." not in new.split("@")[0] and "_" not in new.split("@")[0]
        if r["address"] == "jane.doe@enron.com":
            old = corpus.get(doc).text[start:start + len("jane.doe@enron.com")]
            if old.isupper():
                assert new.isupper() or not any(c.isalpha() for c in new)
            elif old == "Jane.Doe@Enron.com":
                local, domain = new.split("@")
                assert local.split(".")[0][0].isupper() and local.split(".")[1][0].isupper()
                assert domain[0].isupper()
    assert "<" in t2 and ">" in t2.split("<", 1)[1] and t2.count("<") == 1
    assert _outside(t2) == _outside(EDGE[1][1]) and _outside(t3) == _outside(EDGE[2][1])
    assert Counter(a.lower() for a in ADDR.findall(t3))["bob_k@acme.org"] == 0  # both later occurrences replaced


def test_parse_address_and_forced_anchors():
    p = parse_address("Jane.Doe+news@Mail.Enron.com")
    assert (p.first, p.sep, p.last, p.tag, p.domain, p.tld) == ("Jane", ".", "Doe", "+news", "Mail.Enron", "com")
    assert p.render() == "Jane.Doe+news@Mail.Enron.com"
    q = parse_address("jdoe@x.org")
    assert (q.first, q.last, q.sep) == ("jdoe", None, "")
    assert parse_address(".ab@x.com").last is None  # a leading separator does not split
    stores = Stores.from_addresses(["jane.doe@enron.com", "bob.kent@acme.org", "al.wu@acme.org", "jdoe@x.org",
                                    "kim@y.net"])
    rng = random.Random(0)
    forbidden = {"jane.doe@enron.com", "bob.kent@acme.org", "al.wu@acme.org", "jdoe@x.org", "kim@y.net"}
    for anchor in ("first", "last", "domain"):
        for _ in range(20):
            new, a = look_alike("Jane.Doe@Enron.com", stores, rng, forbidden, anchor=anchor)
            assert a == anchor and new.lower() not in forbidden
            n = parse_address(new)
            if anchor == "first":
                assert n.first == "Jane" and n.last != "Doe"
            elif anchor == "last":
                assert n.last == "Doe" and n.first != "Jane"
            else:
                assert (n.domain, n.tld) == ("Enron", "com") and n.first != "Jane" and n.last != "Doe"


def test_edit_document_moves_and_drops_spans():
    doc = make_document("d", "p", "ab XYZ cd EFG hi", [(0, 2, "A"), (3, 6, "B"), (7, 9, "C"), (10, 13, "D")])
    res = edit_document(doc, [(3, 6, "Q"), (9, 14, "")])
    assert res.document.text == "ab Q cdhi"
    assert [(s.start, s.end, s.label) for s in res.document.spans] == [(0, 2, "A"), (3, 4, "B"), (5, 7, "C")]
    assert res.n_spans_dropped == 1


# ---------------------------------------------------------------------------------------------------------------------
# dedup

DEDUP_DOCS = [
    ("d1", "From: a@x.com\nTo: b@y.com\nSubject: hi\n\nBody mentions a@x.com again.\n"),
    ("d2", "From: Bee <b@y.com>\nTo: c@z.com\nCc: d@w.com\nSubject: re\n\nThanks\n-----Original Message-----\n"
           "From: a@x.com\nSent: Monday\nTo: e@v.com\n\nold body\n"),
    ("d3", 'To: "Zed, C" <C@Z.COM>,\n\tf@u.com\nSubject: x\n\nSee c@z.com\n> From: g@t.com\n'),
    ("d4", "From: f@u.com\nTo: h@s.com\n\nsignature f@u.com\n"),
]
DEDUP_EXPECTED = [
    "From: a@x.com\nTo: b@y.com\nSubject: hi\n\nBody mentions a@x.com again.\n",
    "To: c@z.com\nCc: d@w.com\nSubject: re\n\nThanks\n-----Original Message-----\nSent: Monday\nTo: e@v.com\n\n"
    "old body\n",
    "Subject: x\n\nSee c@z.com\n> From: g@t.com\n",
    "To: h@s.com\n\nsignature f@u.com\n",
]


def test_dedup_removes_only_header_lines_with_a_repeated_address():
    corpus = Corpus([make_document(i, "p", t, [(m.start(), m.end(), "EMAIL") for m in ADDR.finditer(t)])
                     for i, t in DEDUP_DOCS])
    res = dedup(corpus)
    assert [d.text for d in res.corpus] == DEDUP_EXPECTED
    assert res.removed[["doc_id", "field", "n_addresses", "n_repeated"]].values.tolist() == [
        ["d2", "From", 1, 1], ["d2", "From", 1, 1], ["d3", "To", 2, 1], ["d4", "From", 1, 1]]
    for d in res.corpus:  # spans follow the text
        assert [(s.start, s.end) for s in d.spans] == [(m.start(), m.end()) for m in ADDR.finditer(d.text)]
    s = res.summary
    assert s["n_lines_removed"] == 4 and s["n_documents_changed"] == 3
    assert s["before"]["n_occurrences"] == 15 and s["after"]["n_occurrences"] == 10
    assert s["n_spans_dropped"] == 5


def test_dedup_on_the_sample_keeps_bodies(mail):
    res = dedup(mail)
    for a, b in zip(mail, res.corpus):
        body_a = [ln for ln in a.text.split("\n") if not re.match(r"[ \t>]*(From|To|Cc|Bcc)\s*:", ln, re.I)]
        body_b = [ln for ln in b.text.split("\n") if not re.match(r"[ \t>]*(From|To|Cc|Bcc)\s*:", ln, re.I)]
        assert body_a == body_b
    assert res.summary["after"]["original_max_repetition"] < res.summary["before"]["original_max_repetition"]


# ---------------------------------------------------------------------------------------------------------------------
# CLI


def test_cli_rmft_and_dedup_round_trip(tmp_path, capsys):
    src = tmp_path / "mail.jsonl"
    rows = [{"doc_id": i, "person_id": "p", "text": t} for i, t in DEDUP_DOCS]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert main(["rmft", str(src), "--out", str(tmp_path / "r.jsonl"), "--seed", "4", "--quiet"]) == 0
    assert main(["dedup", str(src), "--out", str(tmp_path / "d.jsonl"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert not ADDR.search(out)  # counts only, never an address
    r = load_corpus(tmp_path / "r.jsonl")
    assert Counter(a.lower() for d in r for a in ADDR.findall(d.text))["a@x.com"] == 1
    summary = json.loads((tmp_path / "r.summary.json").read_text())
    assert summary["before"]["original_max_repetition"] == 3 and summary["after"]["original_max_repetition"] == 1
    assert not ADDR.search(json.dumps(summary))
    assert len(pd.read_parquet(tmp_path / "r.replacements.parquet")) == summary["n_replaced"]
    assert [d.text for d in load_corpus(tmp_path / "d.jsonl")] == DEDUP_EXPECTED
    assert json.loads((tmp_path / "d.summary.json").read_text())["n_lines_removed"] == 4
    again = tmp_path / "r2.jsonl"
    assert main(["rmft", str(src), "--out", str(again), "--seed", "4", "--quiet"]) == 0
    assert again.read_bytes() == (tmp_path / "r.jsonl").read_bytes()


def test_cli_bad_input_is_one_clear_line(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"doc_id": "a", "person_id": "p", "text": "x"}\n{oops\n', encoding="utf-8")
    assert main(["rmft", str(bad), "--out", str(tmp_path / "o.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "bad.jsonl" in err and "line 2" in err and "Traceback" not in err
