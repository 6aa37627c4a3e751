"""The experiment's identifier step runs the out-of-core engine: the same tables as the in-memory analysis; canary
ranges are not part of the notes, for every n."""

from __future__ import annotations

from toolkit.corpus import Corpus
from toolkit.identifiers import analyze, load_identifiers
from toolkit.pipelines import steps
from test_identifiers_engine import assert_same_sets
from test_ner_cache import NOTES


def test_identifier_step_writes_what_the_in_memory_analysis_writes(tmp_path):
    from toolkit.corpus import load_corpus

    docs = Corpus(list(load_corpus(NOTES))[:80])
    analyze(docs, detector="oracle+patterns", n=2, progress=False).save(tmp_path / "memory")
    got = steps.identifiers(docs, tmp_path / "step", detector="oracle+patterns", n=2)
    assert_same_sets(tmp_path / "memory", tmp_path / "step")
    assert got["summary"]["n_words"] == load_identifiers(tmp_path / "memory")["summary"]["n_words"]
    first = docs[0]
    exclude = {first.doc_id: [(s.start, s.end) for s in first.spans]}
    assert exclude[first.doc_id]
    cut = steps.identifiers(docs, tmp_path / "cut", exclude=exclude, detector="oracle+patterns", n=2)
    pos = cut["positions"][cut["positions"]["doc_id"] == first.doc_id]
    for a, b in exclude[first.doc_id]:
        assert not ((pos["start"] < b) & (pos["end"] > a)).any()
    assert cut["summary"]["canaries_excluded"] == {"n_ranges": len(exclude[first.doc_id]), "n_documents": 1,
                                                   "n_characters": sum(b - a for a, b in exclude[first.doc_id])}
    assert cut["summary"]["n_protected_positions"] == len(cut["positions"]) < len(got["positions"])


def test_canaries_are_excluded_for_every_n(tmp_path):
    """With canaries inserted and their ranges excluded, the analysis at n = 2 finds what the analysis of the notes
    before insertion finds (an independent run on the original texts): the same terms of every n with the same
    individuals and occurrences, the same identifier sets, and the same protected positions once the offsets are
    moved back past the insertions — so no canary word joins an n-gram or counts towards a term's individuals."""
    import numpy as np

    from toolkit.audit.attacks import canary_ranges
    from toolkit.audit.attacks.canaries import canaries_into_corpus
    from toolkit.audit.evaluate import identifier_sets
    from toolkit.corpus import load_corpus

    docs = Corpus([d for d in load_corpus(NOTES) if d.split == "train"][:60])
    inserted, table = canaries_into_corpus(docs, 6, repeats=(1, 4, 16), seed=3)
    ranges = canary_ranges(inserted, table, with_separator=True)
    assert sum(map(len, ranges.values())) == 6 * 7
    plain = steps.identifiers(docs, tmp_path / "plain", detector="oracle+patterns", n=2, k=2)
    cut = steps.identifiers(inserted, tmp_path / "cut", exclude=ranges, detector="oracle+patterns", n=2, k=2)
    cols = ["term", "n", "n_individuals", "n_occurrences", "direct", "indirect"]
    a = plain["terms"][cols].sort_values(["n", "term"], ignore_index=True)
    b = cut["terms"][cols].sort_values(["n", "term"], ignore_index=True)
    assert (b["n"] == 2).any() and b["indirect"].any()
    assert a.astype(str).equals(b.astype(str))
    for key in ("I_direct", "I_indirect"):
        assert identifier_sets(plain)[key] == identifier_sets(cut)[key]

    def moved_back(pos):  # offsets in the inserted texts → offsets in the original ones
        out = []
        for doc_id, start, term in zip(pos["doc_id"], pos["start"], pos["term"].astype(str)):
            cut_before = sum(b - a for a, b in ranges.get(doc_id, []) if b <= start)
            out.append((doc_id, int(start) - cut_before, term))
        return sorted(out)

    assert moved_back(cut["positions"]) == sorted(zip(plain["positions"]["doc_id"],
                                                      np.asarray(plain["positions"]["start"], int).tolist(),
                                                      plain["positions"]["term"].astype(str)))
    # the tables cover the notes as they are (canaries in): training's coverage check accepts them
    from toolkit.identifiers.storage import check_coverage
    check_coverage(inserted, cut["positions"], table="positions")
    # the old rule only re-flagged unigrams; a bigram of a canary word and its neighbour must not exist either
    words = {w.lower() for name in table["name"] for w in name.split()}
    bigrams = cut["terms"][cut["terms"]["n"] == 2]["term"].astype(str)
    assert not any(set(t.split()) & words for t in bigrams)
