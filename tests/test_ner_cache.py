"""The NER cache across runs: a piece any run has parsed is not parsed again; outputs equal an uncached run; the
cache holds spans and digests, no text; damaged files are ignored with a warning, never read as wrong spans."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from toolkit.cli import main
from toolkit.corpus import Corpus, load_corpus, make_document
from toolkit.errors import ToolkitError
from toolkit.identifiers import SpacyDetector, analyze
from toolkit.identifiers.engine import analyze_to_disk
from toolkit.identifiers.ner import pieces
from toolkit.identifiers.ner_cache import default_cache_dir
from toolkit.pipelines.purge import purge_ner_cache
from test_identifiers_engine import assert_same_sets
from test_identifiers_ner import _Ent, _Parsed  # the stand-in spaCy results

ROOT = Path(__file__).resolve().parents[1]
NOTES = ROOT / "data_samples" / "clinical" / "notes.jsonl"


class CountingNLP:
    """A stand-in pipeline: capitalised words are PERSON, four-digit numbers DATE; records every text it parses."""

    meta = {"lang": "xx", "name": "counting", "version": "1.0"}
    pipe_names = ["ner"]

    def __init__(self):
        self.seen: list[str] = []

    def __call__(self, text):
        ents = [_Ent(m.start(), m.end(), "PERSON") for m in re.finditer(r"\b[A-Z][a-z]+", text)]
        ents += [_Ent(m.start(), m.end(), "DATE") for m in re.finditer(r"\b\d{4}\b", text)]
        return _Parsed(sorted(ents, key=lambda e: e.start_char))

    def pipe(self, texts, batch_size=64, n_process=1):
        for t in texts:
            self.seen.append(t.strip("\n"))
            yield self(t)


@pytest.fixture
def nlp(monkeypatch, tmp_path):
    fake = CountingNLP()
    monkeypatch.setattr(SpacyDetector, "load", lambda self: fake)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))  # nothing reaches the user's cache
    return fake


@pytest.fixture(scope="module")
def sample():
    return list(load_corpus(NOTES))[:60]


def _keys(docs) -> set[str]:
    return {p.key for d in docs for p in pieces(d.text)}


def test_second_analysis_parses_nothing_and_both_engines_share_the_cache(nlp, sample, tmp_path):
    cache = tmp_path / "ner"
    first = analyze(Corpus(sample), detector="spacy+patterns", n=2, cache_dir=str(cache), progress=False)
    assert set(nlp.seen) == _keys(sample) and len(nlp.seen) == len(_keys(sample))
    nlp.seen.clear()
    again = analyze(Corpus(sample), detector="spacy+patterns", n=2, k=3, cache_dir=str(cache), progress=False)
    assert nlp.seen == []  # another k, the same text: no piece parsed
    analyze_to_disk(sample, tmp_path / "disk", detector="spacy+patterns", n=2, cache_dir=str(cache),
                    progress=False, memory_limit="256MB", threads=1)
    assert nlp.seen == []  # the out-of-core engine reads the same cache
    first.save(tmp_path / "cached")
    uncached = analyze(Corpus(sample), detector="spacy+patterns", n=2, ner_cache=False, progress=False)
    uncached.save(tmp_path / "uncached")
    assert len(nlp.seen) == len(_keys(sample))  # ner_cache=False parses everything
    assert_same_sets(tmp_path / "uncached", tmp_path / "cached")
    assert_same_sets(tmp_path / "uncached", tmp_path / "disk")
    assert again.summary["config"] == {**first.summary["config"], "k": 3}  # where the cache lives is not config
    assert "cache_dir" not in first.summary["config"] and len(list(cache.glob("*/part-*.parquet"))) == 1


def test_ten_percent_new_documents_parse_only_their_new_pieces(nlp, sample, tmp_path):
    old, new = sample[:54], sample[54:]
    analyze_to_disk(old, tmp_path / "a", detector="spacy", progress=False, memory_limit="256MB", threads=1)
    assert (default_cache_dir() / "CACHEDIR.TAG").is_file()  # the default folder, under XDG_CACHE_HOME
    nlp.seen.clear()
    analyze_to_disk(old + new, tmp_path / "b", detector="spacy", progress=False, memory_limit="256MB", threads=1)
    fresh = _keys(new) - _keys(old)
    assert len(fresh) > 20 and sorted(nlp.seen) == sorted(fresh)
    analyze_to_disk(old + new, tmp_path / "c", detector="spacy", ner_cache=False, progress=False,
                    memory_limit="256MB", threads=1)
    assert_same_sets(tmp_path / "c", tmp_path / "b")


def _blobs(cache: Path) -> list[bytes]:
    return [p.read_bytes() for p in cache.rglob("*") if p.is_file()]


def test_cache_files_hold_no_text(nlp, sample, tmp_path):
    cache = tmp_path / "ner"
    analyze(Corpus(sample), detector="spacy", cache_dir=str(cache), progress=False)
    SpacyDetector(cache_dir=str(tmp_path / "control")).detect([make_document("x", "p", "Zq.")], progress=False)
    blobs = _blobs(cache)
    for f in cache.glob("*/part-*.parquet"):  # the decoded columns too (the files are compressed)
        table = pq.read_table(f)
        assert table.column_names == ["digest", "starts", "ends", "labels"]
        blobs.append(json.dumps(table.drop(["digest"]).to_pylist()).encode())  # random bytes: raw only
    words = {w for d in sample for w in re.findall(r"\w{5,}", d.text)} - {"PERSON"}
    names = {n for d in sample for s in d.spans if len(n := d.text[s.start:s.end]) >= 5}
    # words any cache file holds whatever the corpus (file layout, the namespace record, CACHEDIR.TAG)
    layout = {w for w in words | names if any(w.encode() in blob for blob in _blobs(tmp_path / "control"))}
    assert len(layout) < 12 and not names & layout
    words -= layout
    assert len(words) > 300 and len(names) > 50
    for blob in blobs:
        assert not [w for w in words | names if w.encode() in blob]


def _part(cache: Path) -> Path:
    (part,) = cache.glob("*/part-*.parquet")
    return part


@pytest.mark.parametrize("damage", ["truncated", "not parquet", "zeroed pages", "edited row"])
def test_a_damaged_cache_file_is_ignored_with_a_warning(nlp, sample, tmp_path, damage):
    cache = tmp_path / "ner"
    docs = sample[:20]
    ref = SpacyDetector(cache_dir=str(cache)).detect(docs, progress=False)
    part = _part(cache)
    if damage == "truncated":
        part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])
    elif damage == "not parquet":
        part.write_bytes(b"PAR1" + b"\0" * 100)
    elif damage == "zeroed pages":  # footer intact, data pages overwritten
        blob = bytearray(part.read_bytes())
        blob[100:len(blob) // 2] = bytes(len(blob) // 2 - 100)
        part.write_bytes(bytes(blob))
    else:  # a valid Parquet file whose spans were moved by one character: its rows' checks no longer match
        table = pq.read_table(part)
        rows = table.to_pylist()
        for r in rows:
            r["ends"] = [e - 1 if e - 1 > s else e for s, e in zip(r["starts"], r["ends"])]
        pq.write_table(table.from_pylist(rows, schema=table.schema), part)
    nlp.seen.clear()
    with pytest.warns(RuntimeWarning, match=r"part-[0-9a-f]+\.parquet: NER cache file ignored \("):
        got = SpacyDetector(cache_dir=str(cache)).detect(docs, progress=False)
    assert got == ref and sorted(nlp.seen) == sorted(_keys(docs))
    with warnings.catch_warnings():  # the pieces parsed again were stored anew: the next run reads them quietly
        warnings.simplefilter("ignore")
        nlp.seen.clear()
        assert SpacyDetector(cache_dir=str(cache)).detect(docs, progress=False) == ref and nlp.seen == []


def test_model_or_options_change_the_namespace(nlp, tmp_path):
    cache = tmp_path / "ner"
    docs = [make_document("a", "p", "Anna saw Bob in 2020.")]
    SpacyDetector(cache_dir=str(cache)).detect(docs, progress=False)
    SpacyDetector(cache_dir=str(cache), labels=("PERSON",)).detect(docs, progress=False)
    SpacyDetector(cache_dir=str(cache), unit="document").detect(docs, progress=False)
    nlp.meta = {**CountingNLP.meta, "version": "2.0"}
    SpacyDetector(cache_dir=str(cache)).detect(docs, progress=False)
    assert len(nlp.seen) == 4 and len(list(cache.glob("*/namespace.json"))) == 4
    nlp.seen.clear()
    del nlp.meta  # back to version 1.0: its entries are found again
    got = SpacyDetector(cache_dir=str(cache), labels=("PERSON",)).detect(docs, progress=False)
    assert nlp.seen == [] and [(s.start, s.end, s.label) for s in got[0]] == [(0, 4, "PERSON"), (9, 12, "PERSON")]


def test_purge_removes_the_cache_and_refuses_other_folders(nlp, tmp_path, capsys):
    cache = tmp_path / "ner"
    SpacyDetector(cache_dir=str(cache)).detect([make_document("a", "p", "Anna saw Bob.")], progress=False)
    assert purge_ner_cache(cache, dry_run=True).n_files == 3 and _part(cache).is_file()
    assert main(["purge", "--ner-cache", "--cache-dir", str(cache)]) == 0
    assert "removed the NER cache: 3 files" in capsys.readouterr().out and not cache.exists()
    assert purge_ner_cache(cache).n_files == 0  # nothing there: nothing to do
    other = tmp_path / "home"
    (other / "0123456789abcdef0123456789abcdef").mkdir(parents=True)
    with pytest.raises(ToolkitError, match=r"not an NER cache of this toolkit .*nothing removed"):
        purge_ner_cache(other)
    assert (other / "0123456789abcdef0123456789abcdef").is_dir()
    assert main(["purge"]) == 2 and "give a RUN_DIR, --ner-cache, or both" in capsys.readouterr().err


def test_real_pipeline_second_run_parses_nothing(tmp_path):
    text = ("Patient John Smith was seen at Boston General Hospital on March 3, 2020.\n"
            "Lungs clear.\nJohn Smith will follow up in Chicago.")
    docs = [make_document("d1", "p", text), make_document("d2", "q", text.replace("John Smith", "Mary Jones"))]
    first = SpacyDetector(n_process=1, cache_dir=str(tmp_path / "ner"))
    got = first.detect(docs, progress=False)
    second = SpacyDetector(n_process=1, cache_dir=str(tmp_path / "ner"))
    assert second.detect(docs, progress=False) == got
    assert second.last_stats["ner_pieces"] == 0 and second.last_stats["disk_pieces"] == first.last_stats["ner_pieces"]
    assert got == SpacyDetector(n_process=1, persist=False).detect(docs, progress=False)
