"""The out-of-core engine (DuckDB) writes exactly what the in-memory analysis writes; documents streamed in batches."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pandas.testing import assert_frame_equal

from toolkit.cli import main
from toolkit.corpus import Corpus, CorpusError, make_document
from toolkit.errors import ToolkitError
from toolkit.identifiers import analyze, load_identifiers
from toolkit.identifiers.engine import analyze_to_disk, memory_limit_bytes
from toolkit.identifiers.stream import JsonlBatches, corpus_batches, iter_jsonl_batches

ROOT = Path(__file__).resolve().parents[1]
NOTES = ROOT / "data_samples" / "clinical" / "notes.jsonl"
TABLES = ("terms", "individuals", "positions", "spans", "documents")


def assert_same_sets(reference: Path, other: Path) -> None:
    a, b = load_identifiers(reference), load_identifiers(other)
    for name in TABLES:
        assert_frame_equal(a[name], b[name], check_exact=True, obj=name)
    a["summary"].pop("timings_s"), b["summary"].pop("timings_s")
    assert a["summary"] == b["summary"]
    assert a["positions"].attrs == b["positions"].attrs


@pytest.fixture(scope="module")
def sample():
    from toolkit.corpus import load_corpus

    return load_corpus(NOTES)


@pytest.mark.parametrize("k, n, batch", [(2, 1, 500), (3, 2, 300),
                                            pytest.param(2, 3, 1000, marks=pytest.mark.slow)])  # 14 s
def test_sample_data_same_as_in_memory(sample, tmp_path, k, n, batch):
    analyze(sample, detector="oracle+patterns", k=k, n=n, progress=False).save(tmp_path / "ref")
    summary = analyze_to_disk(corpus_batches(sample, batch_documents=batch), tmp_path / "new",
                              detector="oracle+patterns", k=k, n=n, progress=False, memory_limit="256MB", threads=2)
    assert summary["n_words"] == load_identifiers(tmp_path / "ref")["summary"]["n_words"]
    assert_same_sets(tmp_path / "ref", tmp_path / "new")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new", "ref"]  # no work or staging folder left


def test_streamed_jsonl_with_split_same_as_in_memory(sample, tmp_path):
    train = sample.filter(split="train")
    analyze(train, detector="oracle", progress=False).save(tmp_path / "ref")
    source = JsonlBatches(NOTES, split="train", batch_documents=97)
    analyze_to_disk(source, tmp_path / "new", detector="oracle", progress=False)
    assert source.n_documents == len(train) and source.bytes_read == NOTES.stat().st_size
    assert_same_sets(tmp_path / "ref", tmp_path / "new")


_ALPHABET = list("abcAB 9 .\n'-é\u0301ﬁ½\ufdfa") + ["Ärz", "x y", "ǅ"]


@st.composite
def corpora(draw):
    n_docs = draw(st.integers(1, 9))
    docs = []
    for i in range(n_docs):
        text = "".join(draw(st.lists(st.sampled_from(_ALPHABET), max_size=25)))
        cuts = sorted(set(draw(st.lists(st.integers(0, len(text)), max_size=6))))
        spans = [(a, b, draw(st.sampled_from(["PATIENT", "DATE", "ID", "WEIRD"])))
                 for a, b in zip(cuts[::2], cuts[1::2]) if b > a]
        docs.append(make_document(f"d{i}", f"p{draw(st.integers(0, 3))}", text, spans))
    return Corpus(docs)


@pytest.mark.slow  # 30 random corpora (10 s); the fixed cases of this file stay fast
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(corpus=corpora(), k=st.integers(2, 4), n=st.integers(1, 3), lowercase=st.booleans(),
       batch=st.integers(1, 4), ratio=st.sampled_from([0.0, 0.5, 1.0]))
def test_property_same_as_in_memory(tmp_path_factory, corpus, k, n, lowercase, batch, ratio):
    """Random corpora (NFKC expansions, combining marks, empty texts, people sharing words, spans cutting words):
    every table and the summary are identical, whatever the batch cut."""
    tmp = tmp_path_factory.mktemp("prop")
    cfg = {"detector": "oracle", "k": k, "n": n, "lowercase": lowercase, "generic_ratio": ratio}
    analyze(corpus, progress=False, **cfg).save(tmp / "ref")
    analyze_to_disk(corpus_batches(corpus, batch_documents=batch), tmp / "new", progress=False,
                    memory_limit="128MB", threads=1, **cfg)
    assert_same_sets(tmp / "ref", tmp / "new")


def test_category_ties_go_to_the_first_category(tmp_path):
    """'x' is seen once as a DATE and once as an ID: DATE comes first in CATEGORIES, in both engines."""
    corpus = Corpus([make_document("a", "A", "x x", [(0, 1, "ID"), (2, 3, "DATE")])])
    r = analyze(corpus, detector="oracle", progress=False)
    assert r.terms.set_index("term").loc["x", "category"] == "DATE"
    r.save(tmp_path / "ref")
    analyze_to_disk(corpus, tmp_path / "new", detector="oracle", progress=False)
    assert_same_sets(tmp_path / "ref", tmp_path / "new")


def test_duplicate_doc_id_across_batches_keeps_the_previous_set(tmp_path):
    good = Corpus([make_document("a", "A", "one"), make_document("b", "B", "two")])
    analyze_to_disk(good, tmp_path / "ids", detector="oracle", progress=False)
    before = {p.name: p.read_bytes() for p in (tmp_path / "ids").iterdir()}
    batches = [[make_document("a", "A", "one")], [make_document("b", "B", "x")], [make_document("a", "C", "y")]]
    with pytest.raises(CorpusError, match="duplicate doc_id: documents #1 and #3"):
        analyze_to_disk(iter(batches), tmp_path / "ids", detector="oracle", progress=False)
    assert {p.name: p.read_bytes() for p in (tmp_path / "ids").iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["ids"]
    with pytest.raises(ToolkitError, match="empty corpus"):
        analyze_to_disk(iter([]), tmp_path / "ids", detector="oracle", progress=False)


def test_memory_limit_values():
    assert memory_limit_bytes("8GB") == 8 * 10**9 and memory_limit_bytes("512MiB") == 512 * 2**20
    assert memory_limit_bytes(None) >= 64 * 2**20
    for bad in ("lots", "8 parsecs", "1MB"):
        with pytest.raises(ToolkitError, match="memory limit"):
            memory_limit_bytes(bad)


# ---- the streaming JSONL reader -------------------------------------------------------------------------------------

def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_jsonl_batches_bounds_and_bom(tmp_path):
    rows = [json.dumps({"doc_id": f"d{i}", "person_id": "p", "text": "x" * (i + 1)}) for i in range(7)]
    path = tmp_path / "c.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + "\n\n".join(rows).encode() + b"\n")
    batches = list(iter_jsonl_batches(path, 3))
    assert [[d.doc_id for d in b] for b in batches] == [["d0", "d1", "d2"], ["d3", "d4", "d5"], ["d6"]]
    by_chars = list(JsonlBatches(path, batch_chars=5))
    assert all(sum(len(d.text) for d in b) <= 5 or len(b) == 1 for b in by_chars)
    assert [d.doc_id for b in by_chars for d in b] == [f"d{i}" for i in range(7)]


def test_jsonl_batches_errors_name_the_line_never_the_text(tmp_path):
    secret = "Zebulon Quayle"
    path = _write(tmp_path / "c.jsonl", [json.dumps({"doc_id": "a", "person_id": "p", "text": "ok"}),
                                         json.dumps({"doc_id": "b", "text": secret}),
                                         "{" + secret,
                                         json.dumps({"doc_id": "c", "person_id": "p", "text": secret, "x": 1}),
                                         json.dumps({"doc_id": "d", "person_id": "p", "text": "ab",
                                                     "spans": [{"start": 0, "end": 9, "label": "X"}]})])
    with pytest.raises(CorpusError, match="line 2: missing field") as exc:
        list(JsonlBatches(path))
    assert secret not in str(exc.value)
    source = JsonlBatches(path, on_error="skip")
    assert [d.doc_id for b in source for d in b] == ["a"]
    assert [s.line for s in source.skipped] == [2, 3, 4, 5]
    assert all(secret not in s.reason for s in source.skipped)
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"doc_id": "a", "person_id": "p", "text": "\xff"}\n')
    with pytest.raises(CorpusError, match="line 1: not valid utf-8"):
        list(JsonlBatches(bad))
    with pytest.raises(CorpusError, match="no documents left after filtering"):
        list(JsonlBatches(path, split="test", on_error="skip"))
    foreign = _write(tmp_path / "f.jsonl", [json.dumps({"body": "hi", "who": "w"})])
    docs = [d for b in JsonlBatches(foreign, text_field="body", person_field="who", id_field="@row") for d in b]
    assert [(d.doc_id, d.person_id, d.text) for d in docs] == [("f-1", "w", "hi")]


# ---- the command line ---------------------------------------------------------------------------------------------

def test_cli_engines_write_the_same_set(tmp_path, capsys):
    common = [str(NOTES), "--detector", "oracle", "--k", "3", "--n", "2", "--split", "train,heldout", "--quiet"]
    assert main(["identifiers", *common, "--out", str(tmp_path / "mem"), "--engine", "memory"]) == 0
    assert main(["identifiers", *common, "--out", str(tmp_path / "duck"), "--memory-limit", "300MB",
                 "--threads", "1", "--work-dir", str(tmp_path / "work")]) == 0
    printed = capsys.readouterr().out.split("wrote")
    assert printed[0] == printed[1].split("\n", 1)[1]  # the same counts printed
    assert_same_sets(tmp_path / "mem", tmp_path / "duck")
    assert list((tmp_path / "work").iterdir()) == []  # the work folder is cleaned up
    assert main(["identifiers", *common, "--out", str(tmp_path / "x"), "--memory-limit", "lots"]) == 2
    assert "memory limit must be a size" in capsys.readouterr().err
