"""The detection pass on a Dask cluster (``python -m toolkit identifiers CORPUS --scheduler ADDRESS``).

Detection is the whole cost of a first run with a real detector (spaCy NER at ~10,500 words/s on 2 cores) and it is
embarrassingly parallel: every document's spans depend on its text alone. :func:`analyze_on_cluster` runs it in two
passes:

1. **on the cluster**: the corpus is cut into partitions (:class:`Partition`): byte ranges of a JSON Lines file cut
   at line ends (:func:`~toolkit.identifiers.stream.jsonl_ranges`; each worker reads its range itself, so the file
   must be on a path the workers share), or, for any other corpus, its documents in consecutive groups sent with the
   task. Each worker runs the detectors of the spec (``oracle`` excepted: the gold spans travel with the documents)
   and writes one file per partition and detector, ``<store>/<detector>/p-<partition>.parquet``, in the NER cache's
   Parquet format (:data:`~toolkit.identifiers.ner_cache.SCHEMA`: per document, in corpus order, the SHA-256 of its
   text and its spans' starts, ends and labels; **no text**), written under a temporary name and renamed into place
   (:func:`toolkit.io.atomic_path`), so a file that exists is whole. Partitions go out a few per worker at a time
   (the client never holds the corpus); a worker that dies has its partitions run again elsewhere (the scheduler's
   own bookkeeping) and the re-run writes the same file; a partition that makes three workers die in a row, or a
   record a detector fails on, stops the run with a one-line :class:`~toolkit.errors.CorpusError` naming the file
   and the line (or record), never the text.
2. **on this machine**: the out-of-core engine (:func:`~toolkit.identifiers.engine.analyze_to_disk`, DuckDB) reads
   the corpus again for the words and the graph, and takes each batch's spans from the store (:class:`ClusterSpans`:
   each document's digest checked against its text, the detectors' spans merged as
   :class:`~toolkit.identifiers.detectors.CombinedDetector` merges them). The outputs are those of the engine without
   a cluster, table by table (``tests/test_identifiers_distributed.py``).

``--scheduler local`` starts a :class:`distributed.LocalCluster` of worker *processes* (one thread each) on this
machine, talking TCP as a real cluster does; any other value is the address of a running scheduler
(``tcp://host:8786``: ``dask scheduler`` on one machine, ``dask worker tcp://host:8786`` on each of the others, with
the toolkit installed). The store lives in ``work_dir`` (default: beside the output), which a remote cluster's
workers must share with this machine; it is removed at the end. Why Dask and not Ray: ARCHITECTURE.md.
"""

from __future__ import annotations

import logging
import math
import os
import re
import shutil
import tempfile
import time
import uuid
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence, Sized
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from toolkit.corpus import Document, Span
from toolkit.errors import CorpusError, ToolkitError
from toolkit.identifiers.analysis import IdentifierConfig
from toolkit.identifiers.detectors import Detector, check_spans, detector_names, make_detector, merge_spans
from toolkit.identifiers.engine import analyze_to_disk
from toolkit.identifiers.ner import error_words
from toolkit.identifiers.ner_cache import SCHEMA, piece_digest
from toolkit.identifiers.stream import DocumentBatches, JsonlBatches, jsonl_ranges
from toolkit.io import atomic_path
from toolkit.progress import progress_bar
from toolkit.threads import core_count, process_count, thread_count

#: The largest partition: bytes of a JSON Lines file, or characters of text of documents sent with their task.
PARTITION_BYTES = 8 * 2**20
#: Partitions per worker at least (smaller partitions below :data:`PARTITION_BYTES`), so that the work evens out.
PARTITIONS_PER_WORKER = 4
_MIN_PARTITION = 64 * 2**10


@dataclass(frozen=True)
class Partition:
    """One task's share of the corpus: a byte range of a JSON Lines file (``reader``, read by the worker) or
    ``documents`` sent with the task, with the line or record number of each (``records``) for errors."""

    index: int
    source: str
    reader: JsonlBatches | None = None
    documents: tuple[Document, ...] = ()
    records: tuple[int, ...] = ()
    by_line: bool = False

    def read(self) -> tuple[list[Document], list[int]]:
        """The partition's documents and their line or record numbers."""
        if self.reader is None:
            return list(self.documents), list(self.records)
        docs, records = [], []
        for doc in self.reader.documents():
            docs.append(doc)
            records.append(self.reader.record_number)
        return docs, records

    def error(self, message: str, record: int | None = None) -> CorpusError:
        """A :class:`CorpusError` naming the corpus file and the line (JSON Lines) or record."""
        if record is None:
            return CorpusError(f"{message} (partition {self.index})", self.source)
        if self.by_line:
            return CorpusError(message, self.source, line=record)
        return CorpusError(message, self.source, record=str(record))


def partitions(documents: Sequence[Document] | Iterable[Sequence[Document]], n_workers: int, *,
               part_bytes: int | None = None, source: str = "corpus") -> Iterator[Partition]:
    """The corpus as :class:`Partition` s, lazily: byte ranges of a :class:`~toolkit.identifiers.stream.JsonlBatches`
    file, else consecutive groups of documents (a streamed reader's, with its record numbers; an in-memory corpus's,
    numbered from 1; ``source`` names it in errors). Size: ``part_bytes``, else at least
    :data:`PARTITIONS_PER_WORKER` per worker and at most :data:`PARTITION_BYTES`."""
    total = getattr(documents, "total_bytes", None)
    is_corpus = isinstance(documents, Sequence) and (not documents or isinstance(documents[0], Document))
    if total is None and is_corpus:
        total = sum(len(d.text) for d in documents)
    size = part_bytes or max(_MIN_PARTITION, min(PARTITION_BYTES, math.ceil((total or PARTITION_BYTES) /
                                                                            (PARTITIONS_PER_WORKER * n_workers))))
    if isinstance(documents, JsonlBatches):
        path = documents.path.resolve()
        whole = documents.part(0, 0, 1)
        whole.path = path
        for i, (start, stop, line) in enumerate(jsonl_ranges(path, size)):
            yield Partition(i, str(path), reader=whole.part(start, stop, line), by_line=True)
        return
    if isinstance(documents, DocumentBatches):
        source = str(documents.path)
        numbered: Iterable[tuple[int, Document]] = ((documents.record_number, d) for d in documents.documents())
    else:
        docs = documents if is_corpus else (d for batch in documents for d in batch)
        numbered = enumerate(docs, start=1)
    group: list[tuple[int, Document]] = []
    chars = index = 0
    for record, doc in numbered:
        if group and chars + len(doc.text) > size:
            yield Partition(index, source, documents=tuple(d for _, d in group), records=tuple(r for r, _ in group))
            group, chars, index = [], 0, index + 1
        group.append((record, doc))
        chars += len(doc.text)
    if group:
        yield Partition(index, source, documents=tuple(d for _, d in group), records=tuple(r for r, _ in group))


# ---- on a worker ------------------------------------------------------------------------------------------------
_DETECTORS: dict[tuple, Detector] = {}


def _worker_detector(cfg: IdentifierConfig, part: str) -> Detector:
    """The detector ``part`` of ``cfg``, built once per worker process (a spaCy model loads once), in one process
    (the cluster is the parallelism)."""
    key = (part, cfg.spacy_model, tuple(cfg.spacy_labels), cfg.batch_size, cfg.cache_dir, cfg.ner_cache)
    if key not in _DETECTORS:
        _DETECTORS[key] = make_detector(part, spacy_model=cfg.spacy_model, spacy_labels=cfg.spacy_labels,
                                        n_process=1, batch_size=cfg.batch_size, cache_dir=cfg.cache_dir,
                                        ner_cache=cfg.ner_cache)
    return _DETECTORS[key]


def _what(exc: BaseException) -> str:
    """An exception in words that hold no text: a toolkit error's own message (never text, by convention), else its
    type and a spaCy error code."""
    return str(exc) if isinstance(exc, ToolkitError) else error_words(exc)


def _detect(det: Detector, part: str, docs: list[Document], records: list[int],
            partition: Partition) -> list[list[Span]]:
    try:
        return check_spans(det.detect(docs, progress=False), docs, source=f"the {part} detector")
    except Exception as exc:  # noqa: BLE001 -- located below, re-raised naming the record
        for doc, record in zip(docs, records):
            try:
                check_spans(det.detect([doc], progress=False), [doc], source=f"the {part} detector")
            except Exception as one:  # noqa: BLE001
                raise partition.error(f"the {part} detector failed on this record: {_what(one)}", record) from None
        raise partition.error(f"the {part} detector failed: {_what(exc)}") from None


def spans_file(store: str | Path, part: str, index: int) -> Path:
    """Where the worker that detects partition ``index`` with detector ``part`` writes its spans."""
    return Path(store) / part / f"p-{index:06d}.parquet"


def detect_partition(partition: Partition, cfg: IdentifierConfig, parts: tuple[str, ...], store: str) -> dict:
    """A worker's task: read the partition, run each detector of ``parts`` on it and write its spans (module
    docstring); returns counts and seconds."""
    t0 = time.perf_counter()
    docs, records = partition.read()
    digests = [piece_digest(d.text) for d in docs]
    for part in parts:
        spans = _detect(_worker_detector(cfg, part), part, docs, records, partition)
        table = pa.table({"digest": digests, "starts": [[s.start for s in per] for per in spans],
                          "ends": [[s.end for s in per] for per in spans],
                          "labels": [[s.label for s in per] for per in spans]},
                         schema=SCHEMA.with_metadata({"partition": str(partition.index), "detector": part}))
        with atomic_path(spans_file(store, part, partition.index)) as tmp:
            pq.write_table(table, tmp, compression="zstd")
    return {"documents": len(docs), "chars": sum(len(d.text) for d in docs), "seconds": time.perf_counter() - t0}


# ---- on this machine ----------------------------------------------------------------------------------------------
class ClusterSpans(Detector):
    """The spans the workers wrote, read back in corpus order: one reader per detector of the spec (the gold spans
    for ``oracle``), merged as :class:`~toolkit.identifiers.detectors.CombinedDetector` merges them. Each
    document's digest must be its text's: a corpus that changed since the workers read it is an error, never
    wrong spans."""

    def __init__(self, spec: str, store: str | Path, n_partitions: int):
        self.name = spec
        self.parts = detector_names(spec)
        self.store, self.n_partitions = Path(store), n_partitions
        self._rows = {p: self._read(p) for p in dict.fromkeys(self.parts) if p != "oracle"}
        self._seen = 0

    def _read(self, part: str) -> Iterator[tuple[bytes, list, list, list]]:
        for i in range(self.n_partitions):
            path = spans_file(self.store, part, i)
            try:
                table = pq.read_table(path)
            except (OSError, pa.ArrowException) as exc:
                raise ToolkitError(f"{path}: the {part} spans of partition {i} cannot be read "
                                   f"({type(exc).__name__})") from None
            if not table.schema.remove_metadata().equals(SCHEMA):
                raise ToolkitError(f"{path}: not a spans file (unexpected columns)")
            yield from zip(*(table.column(c).to_pylist() for c in SCHEMA.names))

    def _take(self, part: str, docs: Sequence[Document]) -> list[list[Span]]:
        out = []
        for i, doc in enumerate(docs):
            row = next(self._rows[part], None)
            if row is None or row[0] != piece_digest(doc.text):
                raise ToolkitError(f"the {part} spans the workers wrote do not match document #{self._seen + i + 1} "
                                   f"of the corpus (changed while the identifiers were computed?); run again")
            out.append([Span(int(s), int(e), str(lab)) for s, e, lab in zip(row[1], row[2], row[3])])
        return out

    def detect(self, docs: Sequence[Document], *, progress: bool = True) -> list[list[Span]]:
        taken = {p: self._take(p, docs) for p in self._rows}
        per_part = [[list(d.spans) for d in docs] if p == "oracle" else taken[p] for p in self.parts]
        self._seen += len(docs)
        return per_part[0] if len(per_part) == 1 else [merge_spans(lists) for lists in zip(*per_part)]


@contextmanager
def environ_kept() -> Iterator[None]:
    """This process's environment as it was before the block, whatever the block did to it. A Dask Nanny sets its
    pre-spawn environment (``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``, ``OPENBLAS_NUM_THREADS`` = 1, ...) in the process
    that starts it and never takes it back: a notebook kernel or a test process would compute every later step (and
    spawn every later worker) on one thread. Wrap a ``LocalCluster`` started here in it."""
    saved = dict(os.environ)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextmanager
def connect(scheduler: str, workers: int | None = None) -> Iterator[Any]:
    """A :class:`distributed.Client` of the scheduler at ``scheduler`` (``tcp://host:port``), or of a
    :class:`distributed.LocalCluster` of ``workers`` processes (default: one per core) over TCP for ``"local"``."""
    from distributed import Client, LocalCluster

    if scheduler == "local":
        n = workers or process_count() or thread_count() or core_count()
        env = {"OMP_NUM_THREADS": "1", "TOOLKIT_THREADS": "1", "TOOLKIT_PROGRESS": "log"}
        # no dashboard; the scheduler's own HTTP endpoint on a free port (not 8787, which another cluster may hold)
        with environ_kept(), \
                LocalCluster(n_workers=n, threads_per_worker=1, processes=True, protocol="tcp", host="127.0.0.1",
                             dashboard_address=None, scheduler_kwargs={"dashboard_address": ":0"},
                             silence_logs=logging.ERROR, env=env) as cluster, \
                Client(cluster) as client:
            yield client
        return
    if workers is not None:
        raise ToolkitError("--workers sets the size of a local cluster (--scheduler local); a running cluster has "
                           "the workers started for it")
    if not re.fullmatch(r"(tcp|tls)://[^\s/]+:\d+", scheduler):
        raise ToolkitError(f"--scheduler must be 'local' or a Dask scheduler's address such as tcp://host:8786, got "
                           f"{scheduler!r}")
    try:
        client = Client(scheduler, timeout="30s")
    except (OSError, TimeoutError) as exc:
        raise ToolkitError(f"cannot reach the Dask scheduler at {scheduler} ({type(exc).__name__}); start it with "
                           f"`dask scheduler` and workers with `dask worker {scheduler}`, or use --scheduler "
                           f"local") from None
    with client:
        try:
            client.wait_for_workers(1, timeout=60)
        except TimeoutError:
            raise ToolkitError(f"the Dask scheduler at {scheduler} has no worker (waited 60 s); start workers "
                               f"with `dask worker {scheduler}`") from None
        yield client


def detect_on_cluster(client: Any, parts_of_corpus: Iterable[Partition], cfg: IdentifierConfig,
                      detectors: tuple[str, ...], store: Path, *, progress: bool = True) -> int:
    """Run :func:`detect_partition` for every partition on ``client``'s workers, a few per worker at a time;
    returns the number of partitions. The first error stops the run (its partition named)."""
    from distributed import as_completed
    from distributed.scheduler import KilledWorker

    n_workers = max(1, sum(client.nthreads().values()))
    token, todo, live = uuid.uuid4().hex[:12], iter(parts_of_corpus), {}
    done = as_completed()

    def submit(p: Partition) -> None:
        with warnings.catch_warnings():  # documents sent with their task: large, on purpose (a re-run needs them)
            warnings.filterwarnings("ignore", message="Sending large graph")
            fut = client.submit(detect_partition, p, cfg, detectors, str(store), key=f"detect-{token}-{p.index}",
                                pure=False)
        live[fut.key] = (fut, p)
        done.add(fut)

    n = 0
    for p in islice(todo, 2 * n_workers + 2):
        submit(p)
        n += 1
    total = len(parts_of_corpus) if isinstance(parts_of_corpus, Sized) else None
    bar = progress_bar(total=total, desc=f"detection ({n_workers} workers)", unit="partition", enabled=progress)
    try:
        with bar:
            for fut in done:
                _, p = live.pop(fut.key)
                try:
                    fut.result()
                except KilledWorker:
                    raise p.error("the workers died while detecting this partition, three times in a row (out "
                                  "of memory, or a crash inside a detector)") from None
                except OSError as exc:
                    raise ToolkitError(f"a worker could not read {p.source} or write to {store} "
                                       f"({type(exc).__name__}): the corpus and --work-dir must be on paths the "
                                       f"workers share with this machine") from None
                fut.release()
                bar.update(1)
                for nxt in islice(todo, 1):
                    submit(nxt)
                    n += 1
    finally:
        client.cancel([f for f, _ in live.values()])
    return n


def analyze_on_cluster(documents: Sequence[Document] | Iterable[Sequence[Document]], out_dir: str | Path,
                       config: IdentifierConfig | None = None, *, scheduler: str = "local", workers: int | None = None,
                       work_dir: str | Path | None = None, part_bytes: int | None = None, source: str = "corpus",
                       progress: bool = True, memory_limit: str | int | None = None, threads: int | None = None,
                       on_batch: Callable[..., Any] | None = None, **overrides: Any) -> dict[str, Any]:
    """:func:`~toolkit.identifiers.engine.analyze_to_disk` with the detection pass on a Dask cluster (module
    docstring); the same outputs. ``documents`` is read twice (a corpus, or a re-iterable batch reader such as
    :class:`~toolkit.identifiers.stream.JsonlBatches`); ``scheduler``, ``workers``: :func:`connect`; ``part_bytes``:
    :func:`partitions`; ``source``: the corpus file, for errors about an in-memory corpus; the other options and
    ``overrides`` (of ``config``) as for the engine. The returned summary adds ``cluster`` (workers, partitions,
    seconds of the detection pass)."""
    cfg = config or IdentifierConfig()
    if overrides:
        cfg = IdentifierConfig(**{**asdict(cfg), **overrides})
    engine = {"memory_limit": memory_limit, "threads": threads, "work_dir": work_dir, "progress": progress,
              "on_batch": on_batch}
    if not isinstance(cfg.detector, str):
        raise ToolkitError("a cluster builds its detectors from their names ('spacy+patterns'), not from a "
                           "Detector object")
    detectors = tuple(p for p in dict.fromkeys(detector_names(cfg.detector)) if p != "oracle")
    if not detectors:  # gold spans only: nothing to detect
        return analyze_to_disk(documents, out_dir, cfg, **engine)
    if iter(documents) is documents:
        raise ToolkitError("the cluster's detection reads the corpus twice: pass a corpus or a batch reader, not an "
                           "iterator")
    target = Path(out_dir)
    parent = Path(work_dir) if work_dir is not None else target.resolve().parent
    parent.mkdir(parents=True, exist_ok=True)
    store = Path(tempfile.mkdtemp(prefix=f".{target.name}.spans.", dir=parent)).resolve()
    try:
        t0 = time.perf_counter()
        with connect(scheduler, workers) as client:
            n_workers = max(1, sum(client.nthreads().values()))
            parts: Iterable[Partition] = partitions(documents, n_workers, part_bytes=part_bytes, source=source)
            if isinstance(documents, JsonlBatches):
                parts = list(parts)  # byte ranges: small, and a count for the progress bar
            n = detect_on_cluster(client, parts, cfg, detectors, store, progress=progress)
        seconds = time.perf_counter() - t0
        summary = analyze_to_disk(documents, out_dir, cfg, detect_with=ClusterSpans(cfg.detector, store, n),
                                  **engine)
        summary["cluster"] = {"workers": n_workers, "partitions": n, "detect_s": round(seconds, 3)}
        return summary
    finally:
        shutil.rmtree(store, ignore_errors=True)


__all__ = ["PARTITIONS_PER_WORKER", "PARTITION_BYTES", "ClusterSpans", "Partition", "analyze_on_cluster", "connect",
           "detect_on_cluster", "detect_partition", "environ_kept", "partitions", "spans_file"]
