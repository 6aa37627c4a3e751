"""The experiment's identifier step runs the out-of-core engine: the same tables as the in-memory analysis; canary
ranges excluded afterwards."""

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
    assert cut["summary"]["canaries_excluded"]["n_positions"] > 0
    assert cut["summary"]["n_protected_positions"] == len(cut["positions"]) < len(got["positions"])
