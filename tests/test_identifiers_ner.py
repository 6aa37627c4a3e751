"""NER at scale: bounded pieces, one model run per distinct piece, offsets mapped back, failures named by document."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit.corpus import make_document
from toolkit.errors import ToolkitError
from toolkit.identifiers import SpacyDetector
from toolkit.identifiers.ner import PieceCache, detect_entities, pieces


@pytest.fixture(autouse=True)
def private_ner_cache(monkeypatch, tmp_path):
    """The NER cache across runs (tests/test_ner_cache.py) goes to a temporary folder, never the user's."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab A.!? \t\n\u00a0Dr.J")), max_size=80),
       st.sampled_from(["sentence", "line", "document"]), st.integers(1, 12))
def test_pieces_are_bounded_disjoint_and_cover_the_text(text, unit, max_chars):
    ps = pieces(text, unit, max_chars)
    covered = set()
    for a, b in zip(ps, ps[1:]):
        assert a.end <= b.start
    for p in ps:
        assert p.key == text[p.start:p.end] and 0 < len(p.key) <= max_chars and p.key.strip()
        if unit != "document":
            assert "\n" not in p.key and p.key == p.key.strip(" \t\r\f\v\u00a0")
        covered.update(range(p.start, p.end))
    assert all(i in covered for i, ch in enumerate(text) if not ch.isspace())


def test_sentences_are_not_cut_after_titles_or_initials():
    text = "Seen by Dr. Adams and J. Smith today. Plan discussed.  Follow up in 2 weeks!"
    assert [p.key for p in pieces(text)] == ["Seen by Dr. Adams and J. Smith today.", "Plan discussed.",
                                             "Follow up in 2 weeks!"]


class _Ent:
    def __init__(self, start, end, label):
        self.start_char, self.end_char, self.label_ = start, end, label


class _Parsed:
    def __init__(self, ents):
        self.ents = ents


class FakeNLP:
    """Marks every capitalised word as PERSON; records what it was given; fails on texts holding BOOM."""

    def __init__(self):
        self.seen: list[str] = []

    def __call__(self, text):
        if "BOOM" in text:
            raise ValueError(f"[E088] cannot parse {text[:40]!r}")
        return _Parsed([_Ent(m.start(), m.end(), "PERSON") for m in re.finditer(r"\b[A-Z][a-z]+", text)])

    def pipe(self, texts, batch_size=64, n_process=1):
        for t in texts:
            self.seen.append(t)
            yield self(t)


@pytest.mark.slow  # a 10 MB document (11 s): scale, rarely touched
def test_a_10mb_document_is_parsed_in_bounded_pieces_each_distinct_once():
    unit = "Alice met the doctor today and she feels better. " * 3 + "Vitals stable per Bob. "
    text = unit * (10_000_000 // len(unit))
    doc = make_document("huge-note", "p", text)
    nlp = FakeNLP()
    spans, stats = detect_entities(nlp, [doc], {"PERSON"}, cache=PieceCache(100), max_chars=2000, progress=False)
    assert max(map(len, nlp.seen)) <= 2002 and len(nlp.seen) == 2  # two distinct sentences, wrapped in newlines
    assert stats["pieces"] > 200_000 and stats["distinct_pieces"] == 2
    assert {text[s.start:s.end] for s in spans[0]} == {"Alice", "Vitals", "Bob"}
    assert len(spans[0]) == text.count("Alice") + text.count("Vitals") + text.count("Bob")
    blob = make_document("no-breaks", "p", "alpha Beta " * 1_000_000)  # one 11 MB sentence: windows of 2000
    nlp = FakeNLP()
    spans, stats = detect_entities(nlp, [blob], {"PERSON"}, cache=PieceCache(100), progress=False)
    assert max(map(len, nlp.seen)) <= 2002 and stats["pieces"] > 5000 and len(nlp.seen) < 20
    assert len(spans[0]) == 1_000_000 and {blob.text[s.start:s.end] for s in spans[0]} == {"Beta"}


def test_cache_and_offsets_across_batches():
    nlp = FakeNLP()
    cache = PieceCache(10)
    a = make_document("a", "p", "  Carol is here.\n\tCarol is here.")
    b = make_document("b", "q", "x\n   Carol is here.  ")
    first, _ = detect_entities(nlp, [a], {"PERSON"}, cache=cache, progress=False)
    second, stats = detect_entities(nlp, [b], {"PERSON"}, cache=cache, progress=False)
    assert nlp.seen == ["\nCarol is here.\n", "\nx\n"]  # the repeated sentence ran once, in the first batch
    assert [(s.start, s.end) for s in first[0]] == [(2, 7), (18, 23)]
    assert [(s.start, s.end) for s in second[0]] == [(5, 10)] and stats["ner_pieces"] == 1


def test_a_failure_names_the_document_not_the_text():
    docs = [make_document("ok", "p", "Fine."), make_document("bad-note", "p", "Zebulon said BOOM here.")]
    with pytest.raises(ToolkitError, match=r"document 'bad-note', characters 0-23: ValueError \[E088\]") as exc:
        detect_entities(FakeNLP(), docs, {"PERSON"}, cache=PieceCache(10), progress=False)
    assert "Zebulon" not in str(exc.value)


def test_spacy_sentence_pieces_match_uncached_runs():
    text = ("Patient John Smith was seen at Boston General Hospital on March 3, 2020.\n"
            "Lungs clear.   Lungs clear.\n  John Smith will follow up in Chicago.")
    docs = [make_document("d1", "p", text), make_document("d2", "q", text.replace("John Smith", "Mary Jones"))]
    cached = SpacyDetector(n_process=1)
    got = cached.detect(docs, progress=False)
    assert cached.last_stats["distinct_pieces"] < cached.last_stats["pieces"]
    fresh = SpacyDetector(n_process=1, cache_size=0, persist=False).detect(docs[::-1], progress=False)[::-1]
    assert got == fresh
    assert "John Smith" in {text[s.start:s.end] for s in got[0]}
    assert "Mary Jones" in {docs[1].text[s.start:s.end] for s in got[1]}
