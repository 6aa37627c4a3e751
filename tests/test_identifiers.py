"""Identifier analysis against a hand-computed corpus (methods.md §2)."""

from __future__ import annotations

import numpy as np
import pytest

from toolkit.corpus import Corpus, make_document
from toolkit.errors import ToolkitError
from toolkit.identifiers import (IdentifierConfig, PatternDetector, analyze, detector_scores, make_detector,
                                 segment_corpus)

A1 = "Alice takes aspirin daily. Alice likes chess."
B1 = "Bob takes aspirin daily"
B2 = "Bob likes golf"
C1 = "Carol takes insulin daily"


@pytest.fixture()
def corpus() -> Corpus:
    return Corpus([
        make_document("a1", "A", A1, [(0, 5, "PATIENT"), (27, 32, "PATIENT")]),
        make_document("b1", "B", B1),
        make_document("b2", "B", B2),
        # a silly DATE span on "daily": "daily" is then seen in a PII span once out of 3 occurrences (generic)
        make_document("c1", "C", C1, [(20, 25, "DATE")]),
    ])


def words_of(result, doc_index: int, mask) -> list[str]:
    w = result.words
    lo, hi = w.doc_ptr[doc_index], w.doc_ptr[doc_index + 1]
    return [w.vocab[t] for t, keep in zip(w.term[lo:hi], mask[lo:hi]) if keep]


def test_segmentation_rules():
    w = segment_corpus(["cafe\u0301 O'Brien x_y 42 🙂 — naïve\r\n", ""], progress=False)
    assert list(w.vocab[w.term]) == ["café", "o", "brien", "x", "y", "42", "naïve"]
    assert w.doc_ptr.tolist() == [0, 7, 7]
    # offsets refer to the original text
    assert (w.start[0], w.end[0]) == (0, 5)


def test_segmentation_fallbacks_agree():
    """Texts Arrow cannot take (lone surrogate) or holding every marker character use the stdlib route."""
    texts = ["abc \ud800 déf", "".join(chr(c) for c in range(0xFDD0, 0xFDF0)) + " xy z", "plain words"]
    w = segment_corpus(texts, progress=False, chunk_size=1)
    assert [w.vocab[t] for t in w.term] == ["abc", "déf", "xy", "z", "plain", "words"]
    assert w.doc.tolist() == [0, 0, 1, 1, 2, 2]


def test_nfkc_and_lowercase_option():
    w = segment_corpus(["ﬁle FILE File"], progress=False)
    assert set(w.vocab) == {"file"}
    w = segment_corpus(["File FILE"], lowercase=False, progress=False)
    assert set(w.vocab) == {"File", "FILE"}


def test_unigram_indirect_identifiers_k2(corpus):
    r = analyze(corpus, detector="oracle", k=2, n=1, progress=False)
    assert r.I_indirect == {"alice", "chess", "bob", "golf", "carol", "insulin"}
    t = r.terms.set_index("term")
    assert t.loc["takes", "n_individuals"] == 3 and t.loc["takes", "n_occurrences"] == 3
    assert t.loc["aspirin", "n_individuals"] == 2
    ind = r.individuals.set_index("person_id")
    assert ind["n_indirect"].to_dict() == {"A": 2, "B": 2, "C": 2}
    assert ind["n_words"].to_dict() == {"A": 7, "B": 7, "C": 4}
    assert ind["n_documents"].to_dict() == {"A": 1, "B": 2, "C": 1}


def test_k3_adds_terms_shared_by_two(corpus):
    r = analyze(corpus, detector="oracle", k=3, n=1, progress=False)
    assert r.I_indirect == {"alice", "chess", "bob", "golf", "carol", "insulin", "aspirin", "likes"}
    # k is free to change on the same graph
    counts = r.indirect_counts(ks=(2, 3, 4), ns=(1,)).pivot(index="person_id", columns="k", values="n_indirect")
    assert counts[2].to_dict() == {"A": 2, "B": 2, "C": 2}
    assert counts[3].to_dict() == {"A": 4, "B": 4, "C": 2}
    assert counts[4].to_dict() == {"A": 6, "B": 6, "C": 4}  # + "takes" and "daily" (3 individuals each)


def test_bigrams_never_cross_documents_and_count(corpus):
    r = analyze(corpus, detector="oracle", k=2, n=2, progress=False)
    bi = r.terms[r.terms["n"] == 2].set_index("term")
    assert len(bi) == 12
    assert "daily bob" not in bi.index  # b1 ends with "daily", b2 starts with "Bob"
    assert "daily alice" in bi.index     # inside one document, across a full stop (choice: consecutive words)
    assert set(bi.index[~bi["indirect"]]) == {"takes aspirin", "aspirin daily"}
    ind = r.individuals.set_index("person_id")
    assert ind["n_indirect"].to_dict() == {"A": 6, "B": 5, "C": 5}
    assert ind["n_indirect_unigrams"].to_dict() == {"A": 2, "B": 2, "C": 2}
    assert r.summary["n_indirect_terms_by_n"] == {1: 6, 2: 10}


def test_protected_positions_unigram_vs_ngram(corpus):
    r1 = analyze(corpus, detector="oracle", k=2, n=1, progress=False)
    assert words_of(r1, 0, r1.protected) == ["alice", "alice", "chess"]
    assert words_of(r1, 3, r1.protected) == ["carol", "insulin", "daily"]  # daily: direct (gold span)
    assert words_of(r1, 3, r1.direct) == ["daily"]
    # n = 2: every word covered by an indirect bigram occurrence is protected (occurrence level)
    r2 = analyze(corpus, detector="oracle", k=2, n=2, progress=False)
    assert words_of(r2, 0, ~r2.protected) == ["aspirin"]
    assert words_of(r2, 1, ~r2.protected) == ["aspirin", "daily"]
    # character spans of the protected words
    assert r1.protected_spans(0, "direct") == [(0, 5), (27, 32)]
    assert r1.protected_spans(0, "indirect") == [(0, 5), (27, 32), (39, 44)]


def test_generic_word_rule(corpus):
    r = analyze(corpus, detector="oracle", k=2, n=1, progress=False)
    # "daily" is inside a PII span once out of 3 occurrences: share outside 2/3 > 0.5 -> generic, not in I_direct
    assert r.I_direct == {"alice"}
    assert r.summary["n_generic_words_removed"] == 1
    r_all = analyze(corpus, detector="oracle", k=2, n=1, generic_ratio=1.0, progress=False)
    assert r_all.I_direct == {"alice", "daily"}
    assert r.vocabulary == r.I_direct | r.I_indirect


def test_partial_overlap_counts_as_direct():
    c = Corpus([make_document("d", "P", "Bobby went home", [(0, 3, "PATIENT")]),
                make_document("e", "Q", "home went Bobby")])
    r = analyze(c, detector="oracle", progress=False)
    assert words_of(r, 0, r.direct) == ["bobby"]
    assert r.terms.set_index("term").loc["bobby", "category"] == "NAME"


def test_summary_shares_and_tables(corpus):
    r = analyze(corpus, detector="oracle", k=2, n=1, progress=False)
    s = r.summary
    assert s["n_words"] == 18 and s["n_distinct_words"] == 10
    assert s["share_distinct_words_below_k"] == pytest.approx(6 / 10)
    # occurrences of the 6 single-individual words: alice 2, chess, bob 2, golf, carol, insulin = 8 of 18
    assert s["share_occurrences_below_k"] == pytest.approx(8 / 18)
    pos = r.positions()
    assert set(pos.columns) >= {"doc_id", "start", "end", "term", "direct", "indirect", "category"}
    assert len(pos) == int(r.protected.sum())
    for row in pos.itertuples():
        text = corpus.get(row.doc_id).text
        assert text[row.start:row.end].lower() == row.term


def test_config_validation():
    with pytest.raises(ToolkitError, match="k must be an integer >= 2"):
        IdentifierConfig(k=1)
    with pytest.raises(ToolkitError, match="n must be"):
        IdentifierConfig(n=0)
    with pytest.raises(ToolkitError, match="unknown detector"):
        IdentifierConfig(detector="regex")
    with pytest.raises(ToolkitError, match="generic_ratio"):
        IdentifierConfig(generic_ratio=2)


def test_graph_matches_brute_force_on_random_corpus():
    """Term degrees and per-individual indirect counts equal a dict-of-sets computation."""
    rng = np.random.default_rng(0)
    vocab = [f"w{i}" for i in range(60)]
    docs = []
    for i in range(40):
        n_words = int(rng.integers(0, 30))
        text = " ".join(rng.choice(vocab, size=n_words, p=np.r_[np.full(10, 0.06), np.full(50, 0.4 / 50)]))
        docs.append(make_document(f"d{i}", f"p{i % 13}", text))
    corpus = Corpus(docs)
    r = analyze(corpus, detector="oracle", k=3, n=3, progress=False)
    users: dict[str, set[str]] = {}
    for d in corpus:
        toks = d.text.split()
        for m in (1, 2, 3):
            for j in range(len(toks) - m + 1):
                users.setdefault(" ".join(toks[j:j + m]), set()).add(d.person_id)
    got = dict(zip(r.terms["term"], r.terms["n_individuals"]))
    assert got == {t: len(u) for t, u in users.items()}
    expected_counts = {p: sum(1 for u in users.values() if p in u and len(u) < 3) for p in r.person_ids}
    assert dict(zip(r.individuals["person_id"], r.individuals["n_indirect"])) == expected_counts
    # notebook 01's k/n read-out (and its static grid): share of occurrences covered, median per individual
    from toolkit import plots

    shares = r.graph.indirect_shares([2, 3, 4], [1, 2, 3])
    assert len(shares) == 9
    for k, n, share, median in shares.itertuples(index=False):
        covered, total, per_person = 0, 0, {p: 0 for p in r.person_ids}
        for t, u in users.items():
            if len(t.split()) <= n and len(u) < k:
                for p in u:
                    per_person[p] += 1
        for d in corpus:
            toks = d.text.split()
            hit = [False] * len(toks)
            for m in range(1, n + 1):
                for j in range(len(toks) - m + 1):
                    if len(users[" ".join(toks[j:j + m])]) < k:
                        hit[j:j + m] = [True] * m
            covered, total = covered + sum(hit), total + len(toks)
        assert share == pytest.approx(covered / total) and median == np.median(list(per_person.values()))
    fig = plots.indirect_share_grid(shares)
    assert fig.data[0].text[1][0] == f"{shares.query('k == 2 and n == 2')['share'].item():.1%}"


def test_pattern_detector():
    det = PatternDetector()
    text = ("Contact jane.doe@example.org or (617) 555-0199, MRN: 48213377, seen 03/14/2019 and on "
            "March 3, 2020; a 67-year-old man, see https://example.org/x.")
    found = {(text[s.start:s.end], s.label) for s in det.spans(text)}
    assert ("jane.doe@example.org", "EMAIL") in found
    assert ("(617) 555-0199", "PHONE") in found
    assert ("48213377", "ID") in found
    assert ("03/14/2019", "DATE") in found
    assert ("March 3, 2020", "DATE") in found
    assert ("67", "AGE") in found
    assert ("https://example.org/x", "URL") in found


def _found(text: str) -> set[tuple[str, str]]:
    return {(text[s.start:s.end], s.label) for s in PatternDetector().spans(text)}


def test_pattern_detector_case_numbers():
    """ECHR-style application numbers are one ID with their year (TAB annotates ``40593/04`` as one CODE)."""
    assert _found("(application no. 40593/04) lodged") == {("40593/04", "ID")}
    assert _found("applications nos. 40593/04 and 1234/05") == {("40593/04", "ID"), ("1234/05", "ID")}
    assert _found("joined with 40593/04.") == {("40593/04", "ID")}
    assert _found("Application No. 123/98") == {("123/98", "ID")}
    # blood pressures, fractions and dates stay what they were
    assert _found("BP 120/80, HR 72, ratio 3/4") == set()
    assert _found("seen 03/14/2019") == {("03/14/2019", "DATE")}
    assert _found("MRN: 48213377") == {("48213377", "ID")}


def test_pattern_detector_skips_html_colour_codes():
    """``#000066`` inside an HTML tag or after a colour property is a colour, not a record number; elsewhere a
    ``#`` number stays an ID."""
    for text in ('<font color="#000066" size=2>Hi</font>', "<td bgcolor=#FFFFFF><font color=#000066>",
                 '<p style="border: 1px solid #336699; color: #000000">', "a { color: #000066; }",
                 "<body text=#000000 link=#0000ff>"):
        assert not {x for x in _found(text) if x[1] == "ID"}, text
    assert _found("deal #580271 was booked") == {("580271", "ID")}
    assert _found("color: red; ticket #123456") == {("123456", "ID")}
    assert _found("<b>Ticket #123456</b>") == {("123456", "ID")}


def test_spacy_detector_and_scores():
    text = "Dr. John Smith examined the patient at Boston General Hospital on March 3, 2020."
    c = Corpus([make_document("d", "P", text, [(4, 14, "DOCTOR"), (39, 63, "HOSPITAL"), (67, 80, "DATE")])])
    det = make_detector("spacy+patterns")
    spans = det.detect(list(c), progress=False)[0]
    covered = {text[s.start:s.end] for s in spans}
    assert "John Smith" in covered
    r = analyze(c, detector="oracle", progress=False)
    scores = detector_scores(r.words, [spans], [list(c[0].spans)]).set_index("category")
    assert scores.loc["all", "support"] == 2 + 3 + 3
    assert 0 < scores.loc["all", "recall"] <= 1
    assert scores.loc["NAME", "recall"] == 1.0


def test_missing_spacy_model_is_a_clear_error():
    c = Corpus([make_document("d", "P", "John Smith")])
    with pytest.raises(ToolkitError, match="not installed"):
        analyze(c, detector="spacy", spacy_model="xx_no_such_model", progress=False)


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from(list("ab Z9_\n.'-é\u0301\u05d0🙂\x00\r\ufdd0\u0663")), max_size=40),
                min_size=1, max_size=6), st.integers(min_value=1, max_value=4))
def test_segmentation_matches_finditer_reference(texts, chunk_size):
    """The chunked split-based segmenter gives exactly the spans of a per-document finditer loop."""
    from toolkit.identifiers import normalize_term, word_pattern

    w = segment_corpus(texts, progress=False, chunk_size=chunk_size, n_threads=2)
    ref = [(d, *m.span()) for d, t in enumerate(texts) for m in word_pattern().finditer(t)]
    assert list(zip(w.doc.tolist(), w.start.tolist(), w.end.tolist())) == ref
    assert [w.vocab[t] for t in w.term] == [normalize_term(texts[d][s:e]) for d, s, e in ref]
    for d in range(len(texts)):
        assert w.doc_ptr[d + 1] - w.doc_ptr[d] == sum(1 for r in ref if r[0] == d)


# ---- combined detectors: the union of what they cover ---------------------------------------------------------------

class _Fixed:
    """A detector returning fixed spans (one list per document)."""

    def __init__(self, name: str, spans):
        self.name, self.spans = name, spans

    def detect(self, docs, *, progress: bool = True):
        from toolkit.corpus import Span

        return [[Span(s, e, label) for s, e, label in self.spans] for _ in docs]


def test_combined_detector_covers_every_character_of_every_detector():
    from toolkit.identifiers import CombinedDetector

    doc = make_document("x", "X", "Seen by Alice Smith-Jones on 2019-03-04 at noon, room 12345678 today.")
    first = _Fixed("a", [(8, 19, "PERSON"), (54, 62, "ID")])
    second = _Fixed("b", [(14, 25, "NAME"), (26, 39, "DATE"), (60, 68, "ID2")])  # overlaps both of first's spans
    spans = CombinedDetector([first, second]).detect([doc], progress=False)[0]
    covered = {i for sp in spans for i in range(sp.start, sp.end)}
    for s, e, _ in first.spans + second.spans:
        assert set(range(s, e)) <= covered
    assert covered == set(range(8, 25)) | set(range(26, 39)) | set(range(54, 68))
    assert [(sp.start, sp.end, sp.label) for sp in spans] == [(8, 25, "PERSON"), (26, 39, "DATE"),
                                                              (54, 68, "ID")]  # label: the earliest detector's
    assert all(a.end <= b.start for a, b in zip(spans, spans[1:]))  # the analysis needs non-overlapping spans


def test_oracle_plus_patterns_keeps_the_pattern_part_beyond_a_gold_span():
    text = "Admitted on March 3, 2019 with chest pain."
    doc = make_document("x", "X", text, [(12, 19, "DATE")])  # gold span: "March 3" only
    r = analyze(Corpus([doc]), detector="oracle+patterns", progress=False)
    assert [(s.start, s.end) for s in r.spans[0]] == [(12, 25)]
    assert words_of(r, 0, r.direct) == ["march", "3", "2019"]


# ---- identifier outputs: one consistent set --------------------------------------------------------------------------

def test_saved_identifiers_carry_document_fingerprints(corpus, tmp_path):
    import hashlib

    from toolkit.identifiers import load_identifiers

    analyze(corpus, detector="oracle", progress=False).save(tmp_path / "ids")
    ids = load_identifiers(tmp_path / "ids")
    docs = ids["documents"]
    assert docs["doc_id"].tolist() == ["a1", "b1", "b2", "c1"]
    assert docs["text_sha256"].tolist() == [hashlib.sha256(d.text.encode()).hexdigest() for d in corpus]
    assert ids["positions"].attrs["identifier_documents"]["b2"] == hashlib.sha256(B2.encode()).hexdigest()


@pytest.mark.parametrize("name", ["positions.parquet", "terms.parquet", "summary.json"])
def test_a_folder_mixing_two_runs_is_refused(corpus, tmp_path, name):
    import shutil

    from toolkit.identifiers import load_identifiers

    analyze(corpus, detector="oracle", k=2, progress=False).save(tmp_path / "k2")
    analyze(corpus, detector="oracle", k=3, progress=False).save(tmp_path / "k3")
    assert len(load_identifiers(tmp_path / "k2")["positions"]) != len(load_identifiers(tmp_path / "k3")["positions"])
    shutil.copy(tmp_path / "k3" / name, tmp_path / "k2" / name)  # what a kill or a concurrent run used to leave
    with pytest.raises(ToolkitError, match=rf"{name}: not the file manifest.json lists"):
        load_identifiers(tmp_path / "k2")


def test_a_folder_without_manifest_is_refused(corpus, tmp_path):
    from toolkit.identifiers import load_identifiers

    analyze(corpus, detector="oracle", progress=False).save(tmp_path / "ids")
    (tmp_path / "ids" / "manifest.json").unlink()
    with pytest.raises(ToolkitError, match="manifest.json: missing"):
        load_identifiers(tmp_path / "ids")


def test_an_interrupted_save_leaves_the_previous_set(corpus, tmp_path, monkeypatch):
    import toolkit.io
    from toolkit.identifiers import load_identifiers

    out = tmp_path / "ids"
    analyze(corpus, detector="oracle", k=2, progress=False).save(out)
    (out / "step.json").write_text("{}")  # a file of the pipeline beside the outputs: carried over
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    real = toolkit.io.atomic_write_parquet

    def dies_at_spans(frame, path):
        if str(path).endswith("spans.parquet"):
            raise KeyboardInterrupt  # killed after positions.parquet of the new run was written
        return real(frame, path)

    monkeypatch.setattr(toolkit.io, "atomic_write_parquet", dies_at_spans)
    with pytest.raises(KeyboardInterrupt):
        analyze(corpus, detector="oracle", k=3, progress=False).save(out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["ids"]  # no temporary folder left behind
    assert load_identifiers(out)["summary"]["config"]["k"] == 2
    monkeypatch.setattr(toolkit.io, "atomic_write_parquet", real)
    analyze(corpus, detector="oracle", k=3, progress=False).save(out)
    assert load_identifiers(out)["summary"]["config"]["k"] == 3
    assert (out / "step.json").read_text() == "{}" and [p.name for p in tmp_path.iterdir()] == ["ids"]


def test_concurrent_saves_leave_one_complete_set(corpus, tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from toolkit.identifiers import load_identifiers

    results = {k: analyze(corpus, detector="oracle", k=k, progress=False) for k in (2, 3)}
    out = tmp_path / "ids"
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda k: [results[k].save(out) for _ in range(6)], (2, 3)))
    ids = load_identifiers(out)
    k = ids["summary"]["config"]["k"]
    assert len(ids["positions"]) == len(results[k].positions())
    assert [p.name for p in tmp_path.iterdir()] == ["ids"]


def test_replacing_without_an_atomic_exchange_moves_the_previous_set_aside_first(corpus, tmp_path, monkeypatch):
    """Where ``renameat2(RENAME_EXCHANGE)`` is missing the previous set is renamed aside, the new one renamed in,
    then the previous one removed: the result is the same complete set, extra files kept, nothing left over."""
    import toolkit.identifiers.storage as storage
    from toolkit.identifiers import load_identifiers

    monkeypatch.setattr(storage, "_exchange", lambda a, b: False)
    out = tmp_path / "ids"
    analyze(corpus, detector="oracle", k=2, progress=False).save(out)
    (out / "notes").mkdir()
    (out / "notes" / "a.txt").write_text("kept")
    analyze(corpus, detector="oracle", k=3, progress=False).save(out)
    assert load_identifiers(out)["summary"]["config"]["k"] == 3
    assert (out / "notes" / "a.txt").read_text() == "kept" and [p.name for p in tmp_path.iterdir()] == ["ids"]
