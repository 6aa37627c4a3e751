"""RMFT and PII-aware dedup on real mail, read as distributed (the Enron excerpt in `tests/data/real/enron/`, the
corpus' own layout): one address pattern for RMFT, dedup and the `patterns` detector (apostrophes, plus-tags,
hyphens, subdomains); after RMFT no original address and no piece of one beyond its first occurrence; dedup's address
mode keeps every first occurrence where line mode loses most addresses; `--pseudonymise-person`; the commands run on
the folder without conversion.

The checks on the RMFT output do not use the pattern under test: an address is a whitespace- and
delimiter-bounded token holding ``@`` and a dotted domain (:func:`tokens`), so a look-alike glued to the leftover of
an address the pattern matched only in part (``murray.o'`` + look-alike, as the pattern without ``'`` left) is a
token that is neither an original address nor a replacement.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from toolkit.cli import main
from toolkit.corpus import Corpus, load_corpus, make_document
from toolkit.identifiers.addresses import EMAIL_RE, find_addresses
from toolkit.identifiers.detectors import PatternDetector
from toolkit.strategies.dedup import HEADER_RE, dedup
from toolkit.strategies.rmft import pseudonymise_persons, rmft

ROOT = Path(__file__).resolve().parents[1]
ENRON = ROOT / "tests/data/real/enron"

#: A token with ``@``: delimited by whitespace, angle brackets, double quotes, parentheses, commas, semicolons, colons.
TOKEN = re.compile(r"""[^\s<>"(),;:\[\]]+@[^\s<>"(),;:\[\]]+""")
DOTTED = re.compile(r"@[^@]*\.[A-Za-z]{2,}$")


def tokens(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, token)`` of the address-like tokens of ``text``: quotes and a final full stop stripped, only
    tokens whose domain has a dot (``Allen/HOU/ECT@ECT`` is a Notes name, not an address)."""
    out = []
    for m in TOKEN.finditer(text):
        s, e = m.span()
        while s < e and text[s] == "'":
            s += 1
        while e > s and text[e - 1] in "'.":
            e -= 1
        if DOTTED.search(text[s:e]):
            out.append((s, e, text[s:e]))
    return out


@pytest.fixture(scope="module")
def enron() -> Corpus:
    return load_corpus(ENRON)


# ---------------------------------------------------------------------------------------------------------------------
# one pattern


ADDRESS_CASES = [
    "To: murray.o'neil@enron.com, d'arcy.smith@x.co.uk",
    "Cc: jane.doe+news@mail.ect.enron.com; bob-k@acme-corp.org",
    "From: \"Doe, Jane\" <Jane.Doe@Enron.COM>\n> To: 'Mark.Guzman@enron.com'",
    "Write to first_last@sub.domain.example.net. Or o'brien-smith+tag@a-b.c.io!",
    "Not addresses: Allen/HOU/ECT@ECT, user@localhost, @enron.com, a@b.c",
]


def test_addresses_and_the_patterns_detector_find_the_same_addresses(enron):
    """RMFT and dedup edit exactly the addresses the identifier analysis protects as EMAIL."""
    detector = PatternDetector()
    texts = ADDRESS_CASES + [d.text for d in enron]
    for text in texts:
        found = [(s, e) for s, e, _ in find_addresses(text)]
        detected = [(sp.start, sp.end) for sp in detector.spans(text) if sp.label == "EMAIL"]
        assert found == detected
    whole = [t for _, _, t in find_addresses("\n".join(ADDRESS_CASES))]
    assert whole == ["murray.o'neil@enron.com", "d'arcy.smith@x.co.uk", "jane.doe+news@mail.ect.enron.com",
                     "bob-k@acme-corp.org", "Jane.Doe@Enron.COM", "Mark.Guzman@enron.com",
                     "first_last@sub.domain.example.net", "o'brien-smith+tag@a-b.c.io"]
    # on the real messages every address-like token is one address, matched whole
    for d in enron:
        assert [(s, e) for s, e, _ in tokens(d.text)] == [(m.start(), m.end()) for m in EMAIL_RE.finditer(d.text)]


# ---------------------------------------------------------------------------------------------------------------------
# RMFT


def test_rmft_leaves_no_original_address_or_piece_of_one_beyond_the_first_occurrence(enron):
    res = rmft(enron, seed=0)
    before = [(i, s, t.lower()) for i, d in enumerate(enron) for s, _, t in tokens(d.text)]
    first: dict[str, tuple[int, int]] = {}
    for i, s, a in before:
        first.setdefault(a, (i, s))
    assert "murray.o'neil@enron.com" in first and len(before) > len(first)  # the excerpt repeats it
    replaced = {(int(r.doc_index), int(r.new_start), int(r.new_end)): r.replacement
                for r in res.replacements.itertuples()}
    after = [(i, s, e, t) for i, d in enumerate(res.corpus) for s, e, t in tokens(d.text)]
    assert len(after) == len(before)  # no address split, merged or lost
    kept = Counter()
    for i, s, e, t in after:
        if t.lower() in first:
            kept[t.lower()] += 1
            assert first[t.lower()][0] == i  # the surviving occurrence is in the document of the first one
        else:  # anything else is exactly a look-alike, nothing of the original glued to it
            assert replaced.get((i, s, e)) == t
    assert kept == {a: 1 for a in first}
    assert len(replaced) == len(before) - len(first) == res.summary["n_replaced"]
    # no local part of an address with a separator survives a replacement whole (one of its parts is always drawn)
    locals_ = {a.split("@")[0] for a in first if re.search(r"[._-]", a.split("@")[0][1:-1])}
    assert not [t for t in replaced.values() if t.lower().split("@")[0] in locals_]


def test_pseudonymised_persons_are_keyed_consistent_and_never_the_address():
    docs = [make_document(f"d{i}", p, "x") for i, p in enumerate(["kay.mann@enron.com", "bob@x.org",
                                                                   "kay.mann@enron.com"])]
    corpus = Corpus(docs)
    key = bytes(range(32))
    a = pseudonymise_persons(corpus, key)
    ids = [d.person_id for d in a]
    assert ids[0] == ids[2] != ids[1]
    assert all(re.fullmatch(r"p-[0-9a-f]{12}", p) for p in ids)
    assert [d.person_id for d in pseudonymise_persons(corpus, key)] == ids
    assert [d.person_id for d in pseudonymise_persons(corpus, bytes(32))] != ids  # keyed: another key, others
    assert [d.text for d in a] == [d.text for d in corpus]
    res = rmft(corpus, person_key=key)
    assert [d.person_id for d in res.corpus] == ids and res.summary["person_pseudonymised"]
    assert [d.person_id for d in rmft(corpus).corpus] == [d.person_id for d in corpus]


# ---------------------------------------------------------------------------------------------------------------------
# dedup: line mode (the paper's) and address mode


def test_dedup_address_mode_keeps_every_first_occurrence_on_real_mail(enron):
    original = [(i, t.lower()) for i, d in enumerate(enron) for _, _, t in tokens(d.text)]
    first_doc: dict[str, int] = {}
    for i, a in original:
        first_doc.setdefault(a, i)
    line = dedup(enron)
    res = dedup(enron, granularity="address")
    after = {(i, t.lower()) for i, d in enumerate(res.corpus) for _, _, t in tokens(d.text)}
    assert all((i, a) in after for a, i in first_doc.items())  # every first occurrence, in its document
    assert res.summary["n_addresses_vanished"] == 0
    left_by_line = {t.lower() for d in line.corpus for _, _, t in tokens(d.text)}
    assert line.summary["n_addresses_vanished"] == len(set(first_doc) - left_by_line) > len(first_doc) // 2
    assert res.summary["after"]["n_occurrences"] < res.summary["before"]["n_occurrences"]
    assert set(res.removed["unit"]) == {"line", "address"}
    # removed ranges hold only addresses seen before them; lines other than header lines are untouched
    seen: set[str] = set()
    for doc, new in zip(enron, res.corpus):
        for r in res.removed[res.removed["doc_id"] == doc.doc_id].itertuples():
            earlier = {m.group().lower() for m in EMAIL_RE.finditer(doc.text, 0, r.start)}
            assert {m.group().lower() for m in EMAIL_RE.finditer(doc.text, r.start, r.end)} <= seen | earlier
        seen |= {m.group().lower() for m in EMAIL_RE.finditer(doc.text)}
        assert _plain_lines(new.text) == _plain_lines(doc.text)


def _plain_lines(text: str) -> list[str]:
    """The lines that are neither header lines nor folded continuations."""
    return [ln for ln in text.split("\n") if not HEADER_RE.match(ln) and not ln[:1].isspace()]


MAILBOX_DOCS = [
    ("d1", 'From: a@x.com\nTo: "Doe, Jane" <j@y.com>, b@y.com\n\nHi.\n'),
    ("d2", 'From: c@z.com\nTo: "Doe, Jane" <J@Y.COM>, d@w.com,\n\tb@y.com\nCc: a@x.com; b@y.com\n\nBody a@x.com\n'),
    ("d3", "To: e@v.com, a@x.com, e@v.com\nBcc: Notes Name/HOU/ECT@ECT, c@z.com\n\nsee c@z.com\n"),
]
MAILBOX_EXPECTED = [
    MAILBOX_DOCS[0][1],
    "From: c@z.com\nTo: d@w.com\n\nBody a@x.com\n",
    "To: e@v.com\nBcc: Notes Name/HOU/ECT@ECT\n\nsee c@z.com\n",
]


def test_dedup_address_mode_cuts_repeated_mailboxes_and_keeps_the_list_well_formed():
    corpus = Corpus([make_document(i, "p", t, [(m.start(), m.end(), "EMAIL") for m in EMAIL_RE.finditer(t)])
                     for i, t in MAILBOX_DOCS])
    res = dedup(corpus, granularity="address")
    assert [d.text for d in res.corpus] == MAILBOX_EXPECTED
    for d in res.corpus:  # gold spans follow the cuts
        assert [(s.start, s.end) for s in d.spans] == [(m.start(), m.end()) for m in EMAIL_RE.finditer(d.text)]
    assert res.removed[["doc_id", "field", "n_addresses", "unit"]].values.tolist() == [
        ["d2", "To", 1, "address"], ["d2", "To", 1, "address"], ["d2", "Cc", 2, "line"],
        ["d3", "To", 2, "address"], ["d3", "Bcc", 1, "address"]]
    s = res.summary
    assert (s["granularity"], s["n_lines_removed"], s["n_mailboxes_removed"], s["n_addresses_vanished"]) == \
        ("address", 1, 5, 0)
    line = dedup(corpus)
    assert line.summary["n_addresses_vanished"] == 2  # d@w.com and e@v.com went with their To: lines
    with pytest.raises(Exception, match="--granularity"):
        dedup(corpus, granularity="word")


# ---------------------------------------------------------------------------------------------------------------------
# the commands, on the folder as distributed


def test_identifiers_rmft_and_dedup_run_on_the_enron_folder(tmp_path, capsys):
    assert main(["identifiers", str(ENRON), "--out", str(tmp_path / "ids"), "--detector", "patterns",
                 "--quiet"]) == 0
    assert "9 documents, 2 individuals" in capsys.readouterr().out
    assert (tmp_path / "ids" / "terms.parquet").is_file()

    out = tmp_path / "mail"
    assert main(["rmft", str(ENRON), "--out", str(out / "r.jsonl"), "--person-rule", "sender",
                 "--pseudonymise-person", "--quiet"]) == 0
    assert main(["dedup", str(ENRON), "--out", str(out / "d.jsonl"), "--granularity", "address",
                 "--person-rule", "sender", "--pseudonymise-person", "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert not EMAIL_RE.search(printed)  # counts only
    assert "0 of 100 distinct addresses no longer occur" in printed
    senders = [d.person_id for d in load_corpus(ENRON, person="sender")]
    r, d = load_corpus(out / "r.jsonl"), load_corpus(out / "d.jsonl")
    assert [x.doc_id for x in r] == [x.doc_id for x in load_corpus(ENRON)]
    assert [x.person_id for x in r] == [x.person_id for x in d]  # one key per folder: the same pseudonyms
    assert not set(senders) & {x.person_id for x in r}
    assert len({x.person_id for x in r}) == len(set(senders))
    assert (out / ".hash_key").stat().st_mode & 0o077 == 0
    summary = json.loads((out / "r.summary.json").read_text())
    assert summary["person_pseudonymised"] and not EMAIL_RE.search(json.dumps(summary))
    assert len(pd.read_parquet(out / "r.replacements.parquet")) == summary["n_replaced"]
    assert json.loads((out / "d.summary.json").read_text())["n_addresses_vanished"] == 0


def test_email_training_corpus_takes_the_dedup_granularity(enron):
    from toolkit.pipelines.email_extraction import technique_corpus

    line, s_line = technique_corpus(enron, "dedup")
    addr, s_addr = technique_corpus(enron, "dedup", granularity="address")
    assert (s_line["granularity"], s_addr["granularity"]) == ("line", "address")
    assert s_addr["n_addresses_vanished"] == 0 < s_line["n_addresses_vanished"]
    assert sum(len(d.text) for d in addr) > sum(len(d.text) for d in line)
