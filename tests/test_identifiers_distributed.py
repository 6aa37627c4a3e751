"""The detection pass on a Dask cluster (issue 36): two worker processes over TCP write the spans, the graph is built
here; the outputs equal the engine's without a cluster, table by table; a worker killed mid-run has its partitions
run again; a record a detector fails on is a one-line error naming file and line, never the text."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from toolkit.cli import main
from toolkit.corpus import Corpus, CorpusError, make_document
from toolkit.errors import ToolkitError
from toolkit.identifiers import IdentifierConfig, make_detector
from toolkit.identifiers.distributed import (ClusterSpans, Partition, analyze_on_cluster, detect_partition,
                                             environ_kept, partitions, spans_file)
from toolkit.identifiers.engine import analyze_to_disk
from toolkit.identifiers.ner_cache import SCHEMA, piece_digest
from toolkit.identifiers.stream import JsonlBatches

from test_identifiers_engine import assert_same_sets  # the engine's own table-by-table check

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def notes(tmp_path_factory) -> Path:
    """~270k characters of generated notes (dates, record numbers, phones, ages) as JSON Lines, with a blank line."""
    from toolkit.samples import generate_clinical

    path = tmp_path_factory.mktemp("corpus") / "notes.jsonl"
    lines = [json.dumps(r, ensure_ascii=False) + "\n" for r in generate_clinical(n_individuals=120, seed=36)]
    lines.insert(40, "\n")
    path.write_text("".join(lines), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def cluster():
    """A scheduler and two worker processes (one thread each) talking TCP, shared by the module's tests: they reach it
    by its address, as they would a remote cluster's. The environment its Nanny sets in this process (one thread for
    OpenMP and MKL) is taken back after, as ``connect`` does, so the test process's later tests are not changed."""
    with environ_kept(), distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, protocol="tcp",
                                  host="127.0.0.1", dashboard_address=None,
                                  scheduler_kwargs={"dashboard_address": ":0"}, silence_logs=40) as lc, \
            distributed.Client(lc) as client:
        yield lc.scheduler_address, client


@pytest.fixture(scope="module")
def reference(notes, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ref") / "ids"
    analyze_to_disk(JsonlBatches(notes), out, detector="oracle+patterns", n=2, n_process=1, progress=False)
    return out


def test_partitions_cover_the_file_with_its_line_numbers(notes):
    whole = [d.doc_id for batch in JsonlBatches(notes) for d in batch]
    parts = list(partitions(JsonlBatches(notes, split="train"), 2, part_bytes=20_000))
    assert len(parts) > 8 and all(p.by_line and p.reader is not None for p in parts)
    read = [p.read() for p in parts]
    lines = {json.loads(raw)["doc_id"]: i for i, raw in enumerate(notes.read_bytes().split(b"\n"), start=1)
             if raw.strip()}
    docs = [d for ds, _ in read for d in ds]
    assert [d.doc_id for d in docs] == [d for d in whole if d in {x.doc_id for x in docs}]
    assert all(d.split == "train" for d in docs)
    assert [r for _, rs in read for r in rs] == [lines[d.doc_id] for d in docs]
    corpus = Corpus([make_document("a", "A", "x" * 10), make_document("b", "B", "y" * 10)])
    shipped = list(partitions(corpus, 1, part_bytes=10))
    assert [(p.records, len(p.documents)) for p in shipped] == [((1,), 1), ((2,), 1)]


def test_spans_store_is_read_in_order_and_checked(tmp_path):
    """What the workers write is read back whole files only (a temporary file beside them is never read), in corpus
    order; a missing partition or a document whose text changed is an error, never wrong spans."""
    docs = [make_document(f"d{i}", "p", f"seen 2020-01-0{i} MRN 123456{i}") for i in range(1, 5)]
    cfg = IdentifierConfig(detector="patterns+oracle", n_process=1)
    for i in range(2):
        detect_partition(Partition(i, "c.jsonl", documents=tuple(docs[2 * i:2 * i + 2]), records=(1, 2)), cfg,
                         ("patterns",), str(tmp_path))
    (tmp_path / "patterns" / ".p-000000.parquet.x.tmp").write_bytes(b"half a file")
    table = pq.read_table(spans_file(tmp_path, "patterns", 0))
    assert table.schema.remove_metadata().equals(SCHEMA) and table.column("digest")[0].as_py() == piece_digest(
        docs[0].text)
    assert "text" not in table.column_names
    got = ClusterSpans("patterns+oracle", tmp_path, 2).detect(docs, progress=False)
    assert got == make_detector("patterns+oracle", n_process=1).detect(docs, progress=False)
    assert [[s.label for s in per] for per in got] == [["DATE", "ID"]] * 4
    with pytest.raises(ToolkitError, match="cannot be read"):
        ClusterSpans("patterns", tmp_path, 3).detect(docs + docs[:1], progress=False)
    changed = docs[:1] + [make_document("d2", "p", "another text")]
    with pytest.raises(ToolkitError, match="do not match document #2"):
        ClusterSpans("patterns", tmp_path, 2).detect(changed, progress=False)
    pq.write_table(pa.table({"x": [1]}), spans_file(tmp_path, "patterns", 1))
    with pytest.raises(ToolkitError, match="not a spans file"):
        ClusterSpans("patterns", tmp_path, 2).detect(docs, progress=False)


def test_cluster_outputs_equal_the_engine_table_by_table(notes, reference, cluster, tmp_path):
    address, client = cluster
    summary = analyze_on_cluster(JsonlBatches(notes), tmp_path / "ids", detector="oracle+patterns", n=2,
                                 n_process=1, scheduler=address, part_bytes=30_000, progress=False)
    assert summary["cluster"]["workers"] == 2 and summary["cluster"]["partitions"] > 4
    assert_same_sets(reference, tmp_path / "ids")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ids"]  # the spans store and work folder removed
    # an in-memory corpus: its documents go with their tasks
    from toolkit.corpus import load_corpus

    analyze_on_cluster(load_corpus(notes), tmp_path / "mem", detector="oracle+patterns", n=2, n_process=1,
                       scheduler=address, part_bytes=50_000, progress=False)
    assert_same_sets(reference, tmp_path / "mem")
    # a Parquet table: its rows go with their tasks, numbered as the file's
    from toolkit.identifiers.stream import ParquetBatches

    rows = [{"doc_id": d.doc_id, "person_id": d.person_id, "text": d.text, "split": d.split}
            for d in load_corpus(notes)]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "notes.parquet", row_group_size=50)
    analyze_to_disk(ParquetBatches(tmp_path / "notes.parquet"), tmp_path / "pq-ref", detector="patterns",
                    n_process=1, progress=False)
    analyze_on_cluster(ParquetBatches(tmp_path / "notes.parquet"), tmp_path / "pq", detector="patterns", n_process=1,
                       scheduler=address, part_bytes=50_000, progress=False)
    assert_same_sets(tmp_path / "pq-ref", tmp_path / "pq")


class KillOnce(distributed.WorkerPlugin):
    """Kills its worker process (SIGKILL, no goodbye) when the first detection task starts executing there; the
    marker file makes it once for the whole cluster."""

    def __init__(self, marker: str):
        self.marker = marker

    def transition(self, key, start, finish, **kwargs):
        if finish != "executing" or not str(key).startswith("detect-"):
            return
        try:
            os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return
        os.kill(os.getpid(), signal.SIGKILL)


@pytest.mark.slow  # a worker killed and replaced (7 s); rarely touched — make test runs it
def test_a_worker_killed_mid_run_has_its_partitions_run_again(notes, reference, cluster, tmp_path):
    import cloudpickle

    address, client = cluster
    client.wait_for_workers(2, timeout=60)
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    marker = tmp_path / "killed"
    client.register_plugin(KillOnce(str(marker)), name="kill-once")
    try:
        analyze_on_cluster(JsonlBatches(notes), tmp_path / "ids", detector="oracle+patterns", n=2, n_process=1,
                           scheduler=address, part_bytes=30_000, progress=False)
    finally:
        client.unregister_worker_plugin("kill-once")
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    assert marker.exists()  # a worker did die while detecting
    assert_same_sets(reference, tmp_path / "ids")
    client.wait_for_workers(2, timeout=60)  # its nanny started it again


def _fail_on_marker():
    """Make the workers' pattern detector fail on a text holding a marker (run on each worker)."""
    from toolkit.identifiers.detectors import PatternDetector

    original = PatternDetector.spans

    def spans(self, text):
        if "HOSTILE-RECORD" in text:
            raise ValueError(f"cannot match {text!r}")
        return original(self, text)

    PatternDetector._original_spans = original
    PatternDetector.spans = spans


def _restore():
    from toolkit.identifiers.detectors import PatternDetector

    PatternDetector.spans = PatternDetector.__dict__.get("_original_spans", PatternDetector.spans)


def test_a_hostile_record_is_one_line_naming_file_and_line(notes, cluster, tmp_path):
    address, client = cluster
    client.wait_for_workers(2, timeout=60)
    lines = notes.read_text(encoding="utf-8").splitlines(keepends=True)
    secret = "HOSTILE-RECORD patient Zebulon Quist"
    bad = json.loads(lines[70])
    bad["text"] += " " + secret
    lines[70] = json.dumps(bad) + "\n"
    path = tmp_path / "hostile.jsonl"
    path.write_text("".join(lines), encoding="utf-8")
    client.run(_fail_on_marker)
    try:
        with pytest.raises(CorpusError) as err:
            analyze_on_cluster(JsonlBatches(path), tmp_path / "ids", detector="patterns", n_process=1,
                               scheduler=address, part_bytes=30_000, progress=False)
    finally:
        client.run(_restore)
    message = str(err.value)
    assert message == f"{path.resolve()}, line 71: the patterns detector failed on this record: ValueError"
    assert "\n" not in message and "Zebulon" not in message and not (tmp_path / "ids").exists()
    lines[70] = '{"doc_id": "x", "text": \n'  # not JSON: the worker's reader says where, as the engine's does
    path.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(CorpusError, match=rf"^{re.escape(str(path.resolve()))}, line 71: ") as err:
        analyze_on_cluster(JsonlBatches(path), tmp_path / "ids", detector="patterns", n_process=1,
                           scheduler=address, part_bytes=30_000, progress=False)
    assert "\n" not in str(err.value)


def test_cli_scheduler_writes_the_set_without_it(notes, cluster, tmp_path, capsys):
    address, client = cluster
    client.wait_for_workers(2, timeout=60)
    base = ["identifiers", str(notes), "--detector", "patterns", "--n-process", "1", "--quiet"]
    assert main(base + ["--out", str(tmp_path / "here")]) == 0
    assert main(base + ["--out", str(tmp_path / "there"), "--scheduler", address]) == 0
    assert "detection on a Dask cluster: 2 workers" in capsys.readouterr().out
    assert_same_sets(tmp_path / "here", tmp_path / "there")
    for bad, what in ((["--scheduler", "my-cluster"], "tcp://host:8786"), (["--workers", "2"], "--scheduler local"),
                      (["--scheduler", address, "--engine", "memory"], "drop --engine memory")):
        assert main(base + ["--out", str(tmp_path / "no")] + bad) != 0
        assert what in capsys.readouterr().err


@pytest.mark.slow  # a cluster of its own started and stopped (22 s); rarely touched — make test runs it
def test_scheduler_local_starts_worker_processes(notes, reference, tmp_path):
    """``--scheduler local``: a LocalCluster of worker processes started for the run, and gone after it — with the
    caller's environment as it was (a Nanny sets MKL_NUM_THREADS=1 and others in the process that starts it)."""
    before = dict(os.environ)
    analyze_on_cluster(JsonlBatches(notes), tmp_path / "ids", detector="oracle+patterns", n=2, n_process=1,
                       scheduler="local", workers=2, part_bytes=60_000, progress=False)
    assert_same_sets(reference, tmp_path / "ids")
    assert dict(os.environ) == before
