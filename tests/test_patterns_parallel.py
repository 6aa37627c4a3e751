"""The pattern detector on every core (issue 36): worker processes over the engine's batches, outputs identical."""

from __future__ import annotations

import json
import multiprocessing

import pytest
from pandas.testing import assert_frame_equal

from toolkit.corpus import Corpus, make_document
from toolkit.errors import ToolkitError
from toolkit.identifiers import PatternDetector, load_identifiers, make_detector
from toolkit.identifiers.detectors import pattern_processes
from toolkit.identifiers.engine import analyze_to_disk
from toolkit.identifiers.ner import MULTIPROCESS_CHARS
from toolkit.identifiers.storage import TABLES
from toolkit.identifiers.stream import corpus_batches


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    """Generated notes (dates, record numbers, phones, ages in their text) and a few hostile texts for the regexes:
    an empty one, a long run of dots and at-signs, a colour code."""
    from toolkit.samples import generate_clinical

    docs = [make_document(r["doc_id"], r["person_id"], r["text"], [(s["start"], s["end"], s["label"])
                                                                    for s in r["spans"]])
            for r in generate_clinical(n_individuals=120, seed=36)]
    docs += [make_document("empty", "px", ""), make_document("dots", "px", "a." * 3000 + "@" * 50),
             make_document("colour", "py", '<font color="#000066">deal #580271, MRN 1234567</font>')]
    return Corpus(docs)


def _children() -> set:
    return {p.pid for p in multiprocessing.active_children()}


def test_processes_give_the_one_process_spans(corpus):
    before = _children()
    one = PatternDetector(n_process=1).detect(list(corpus), progress=False)
    det = PatternDetector(n_process=2)
    try:
        two = det.detect(list(corpus), progress=False)
        again = det.detect(list(corpus)[::-1], progress=False)  # the pool is kept between calls
        assert det._pool is not None and det._pool[0] == 2
    finally:
        det.close()
    assert two == one and again == one[::-1]
    assert sum(map(len, one)) > 500  # the corpus does exercise the rules
    assert _children() <= before  # close() stopped the workers


@pytest.mark.slow  # worker pools started per case (14 s); rarely touched — make test runs it
@pytest.mark.parametrize("spec", ["patterns", "oracle+patterns"])
def test_engine_tables_identical_one_process_and_two(corpus, tmp_path, spec):
    """Every output table of `identifiers`, 1 process vs 2, over several batches; the summary too, but its timings
    and the ``n_process`` it records as asked for (as it does for spaCy's), hence its ``run_key``."""
    before = _children()
    for n_process in (1, 2):
        analyze_to_disk(corpus_batches(list(corpus), batch_documents=90), tmp_path / f"p{n_process}",
                        detector=spec, n=2, n_process=n_process, progress=False, threads=1)
    assert _children() <= before  # the engine closes the detector's pool
    a, b = load_identifiers(tmp_path / "p1"), load_identifiers(tmp_path / "p2")
    for name in TABLES:
        assert_frame_equal(a[name], b[name], check_exact=True, obj=name)
    for summary, n_process in ((a["summary"], 1), (b["summary"], 2)):
        assert summary.pop("config").pop("n_process") == n_process
        summary.pop("timings_s"), summary.pop("run_key")
    assert a["summary"] == b["summary"] and a["summary"]["n_direct_positions"] > 0


@pytest.mark.slow  # the CLI on a pool of two processes (6 s); rarely touched — make test runs it
def test_cli_patterns_on_two_processes_same_set(corpus, tmp_path, monkeypatch):
    from toolkit.cli import main

    path = tmp_path / "notes.jsonl"
    path.write_text("".join(json.dumps(d.to_dict()) + "\n" for d in corpus), encoding="utf-8")
    for n in ("1", "2"):
        assert main(["identifiers", str(path), "--detector", "patterns", "--n-process", n, "--out",
                     str(tmp_path / f"cli{n}"), "--quiet"]) == 0
    a, b = load_identifiers(tmp_path / "cli1"), load_identifiers(tmp_path / "cli2")
    for name in TABLES:
        assert_frame_equal(a[name], b[name], check_exact=True, obj=name)


def test_how_many_processes():
    big = MULTIPROCESS_CHARS
    assert pattern_processes(3, 10) == 3  # told
    assert pattern_processes(0, big - 1, {"TOOLKIT_THREADS": "8"}) == 1  # too little text for workers
    assert pattern_processes(0, big, {"TOOLKIT_THREADS": "6"}) == 6
    assert pattern_processes(0, big, {"TOOLKIT_THREADS": "6", "TOOLKIT_PROCESSES": "1"}) == 1
    assert pattern_processes(0, big, {"TOOLKIT_PROCESSES": "3"}) == 3
    assert pattern_processes(0, big, {"OMP_NUM_THREADS": "1"}) >= 1  # kept OpenMP setting: the CPUs
    with pytest.raises(ToolkitError, match="TOOLKIT_PROCESSES='x'"):
        pattern_processes(0, big, {"TOOLKIT_PROCESSES": "x"})
    assert make_detector("spacy+patterns", n_process=3).detectors[1].n_process == 3


@pytest.mark.slow  # a pool started to be pickled around (8 s); rarely touched — make test runs it
def test_a_detector_with_a_pool_pickles_without_it(corpus):
    import pickle

    det = PatternDetector(n_process=2)
    try:
        det.detect(list(corpus)[:4], progress=False)
        copy = pickle.loads(pickle.dumps(det))
        assert copy._pool is None and copy.rules == det.rules
    finally:
        det.close()
