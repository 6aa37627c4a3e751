"""Identifier analysis out of core: documents streamed in batches, the term graph in DuckDB (methods.md §2).

:func:`analyze_to_disk` writes the same identifier set as ``analyze(corpus, config).save(out_dir)`` (terms,
individuals, positions, spans, documents, summary and manifest; the same rows, values and dtypes; a property test
compares the two) without holding the corpus, its word occurrences or the graph in memory:

1. **first pass, per batch** (Python, bounded by the batch): detect spans, segment words
   (:func:`~toolkit.identifiers.words.segment_corpus`), mark direct positions
   (:func:`~toolkit.identifiers.analysis.mark_direct`); write the batch's word occurrences, its vocabulary and
   direct-category counts as Parquet to a work folder, and stream ``spans`` and ``documents`` into the output set;
2. **the graph** (DuckDB, :class:`~toolkit.identifiers.engine_sql.GraphStore`, under ``memory_limit``, spilling to
   the work folder): global vocabulary, individuals × terms edges, term degrees, per-individual counts; for n ≥ 2 the
   m-gram occurrences are written per batch from the word files and aggregated the same way;
3. **second pass, per batch**: indirect and protected positions from each batch's words and its terms' flags,
   streamed into ``positions``; then ``terms`` (DuckDB's sorted output), ``individuals`` and the summary; the set is
   committed as :func:`~toolkit.identifiers.storage.save_identifiers` commits it.

Memory is the batch (documents of :data:`~toolkit.identifiers.stream.BATCH_CHARS` characters), DuckDB's
``memory_limit`` (its hash tables grow up to it, then spill), and the individuals' ids with a few counters each.
Disk: the work folder (LZ4 Parquet batch files and the DuckDB database) holds roughly 10 to 15 bytes per word
occurrence until the run ends.

Why DuckDB rather than Polars: ``benchmarks/identifiers_scale.py --engines`` runs the graph step (global vocabulary,
unigram edges, term degrees, per-individual counts) of both on the same batch files; on 27M words they were equal
(DuckDB 5.8 s and 1.06 GB peak, Polars' streaming engine 5.6 s and 1.17 GB, on a shared 2-CPU machine). DuckDB
was chosen because it enforces a hard ``memory_limit`` and spills joins, aggregations and sorts to disk beyond it
(Polars' streaming engine has no memory limit to set), and because one SQL engine also writes the sorted terms table
and the per-batch partitions (``COPY ... PARTITION_BY``) that the second pass reads.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from toolkit.corpus import Document
from toolkit.errors import CorpusError, ToolkitError
from toolkit.identifiers.analysis import IdentifierConfig, summary_config
from toolkit.identifiers.categories import CATEGORIES
from toolkit.identifiers.detectors import Detector
from toolkit.identifiers.engine_passes import EngineRun, TableSink
from toolkit.identifiers.engine_sql import GraphStore
from toolkit.identifiers.storage import StagedIdentifiers
from toolkit.identifiers.stream import corpus_batches
from toolkit.progress import progress_bar

#: Default DuckDB memory limit: this share of the machine's memory (or of the cgroup's limit, when lower).
DEFAULT_MEMORY_SHARE = 0.25
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(B|KB|MB|GB|TB|KIB|MIB|GIB|TIB)?\s*$", re.IGNORECASE)
_UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30,
          "TIB": 2**40}


def machine_memory() -> int:
    """Bytes of memory this process may use: physical memory, or the cgroup (v2) limit when lower."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit.isdigit():
            total = min(total, int(limit))
    except OSError:
        pass
    return int(total)


def memory_limit_bytes(value: str | int | None) -> int:
    """``"8GB"``, ``"512MiB"``, ``"2.5GB"`` or a number of bytes; ``None``: :data:`DEFAULT_MEMORY_SHARE` of
    :func:`machine_memory`. At least 64 MiB."""
    if value is None:
        return max(64 * 2**20, int(machine_memory() * DEFAULT_MEMORY_SHARE))
    m = _SIZE.match(str(value))
    if m is None:
        raise ToolkitError(f"memory limit must be a size such as 8GB, 512MB or 4GiB, got {value!r}")
    size = int(float(m.group(1)) * _UNITS[(m.group(2) or "B").upper()])
    if size < 64 * 2**20:
        raise ToolkitError(f"memory limit {value!r} is below 64MiB: DuckDB needs more to build the term graph")
    return size


def default_threads() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _prefetched(batches: Iterable[Sequence[Document]], timings: dict[str, float]) -> Iterable[Sequence[Document]]:
    """The batches, the next one read in a background thread while the current one is analysed (reading is
    Python; segmentation, Parquet and DuckDB release the GIL, so the two overlap). ``timings["wait_read_s"]``: time
    spent waiting for the reader."""
    import queue
    import threading

    q: queue.Queue = queue.Queue(maxsize=1)
    done = object()
    stop = threading.Event()

    def put(item) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    def reader():
        try:
            for batch in batches:
                if not put(batch):
                    return
            put(done)
        except BaseException as exc:  # noqa: BLE001 -- handed to the consumer, raised there
            put(exc)

    thread = threading.Thread(target=reader, name="identifiers-reader", daemon=True)
    thread.start()
    timings.setdefault("wait_read_s", 0.0)
    try:
        while True:
            t0 = time.perf_counter()
            item = q.get()
            timings["wait_read_s"] += time.perf_counter() - t0
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        thread.join()


def analyze_to_disk(documents: Sequence[Document] | Iterable[Sequence[Document]], out_dir: str | Path,
                    config: IdentifierConfig | None = None, *, memory_limit: str | int | None = None,
                    threads: int | None = None, work_dir: str | Path | None = None, progress: bool = True,
                    on_batch: Callable[..., Any] | None = None, detect_with: Detector | None = None,
                    **overrides: Any) -> dict[str, Any]:
    """Analyse a corpus out of core and write its identifier set to ``out_dir``; returns the summary.

    Parameters
    ----------
    documents:
        A corpus (any sequence of documents: cut into batches by :func:`~toolkit.identifiers.stream.corpus_batches`)
        or an iterable of batches such as :class:`~toolkit.identifiers.stream.JsonlBatches` (read as it goes; its
        ``total_bytes``/``bytes_read`` drive the progress bar).
    out_dir:
        The identifiers folder, replaced as one set (see :mod:`toolkit.identifiers.storage`).
    config, overrides:
        As for :func:`~toolkit.identifiers.analysis.analyze`.
    memory_limit:
        DuckDB's memory limit (``"8GB"``; default :data:`DEFAULT_MEMORY_SHARE` of the machine's memory).
    threads:
        DuckDB and segmentation threads (default: the CPUs available).
    work_dir:
        Where the intermediate files and DuckDB's spill go (default: a hidden folder beside ``out_dir``); removed
        at the end.
    on_batch:
        Called as ``on_batch(docs, words, spans)`` for every batch of the first pass, with its documents, their
        :class:`~toolkit.identifiers.words.WordTable` and the detector's spans (e.g. to score the detector against
        gold spans without reading the corpus twice).
    detect_with:
        Detects in place of ``config``'s detector, which still names the run (summary, ``run_key``): e.g. the spans
        a cluster's workers wrote (:mod:`toolkit.identifiers.distributed`); its spans are checked as a user's
        detector's are.
    """
    cfg = config or IdentifierConfig()
    if overrides:
        cfg = IdentifierConfig(**{**asdict(cfg), **overrides})
    limit = memory_limit_bytes(memory_limit)
    threads = int(threads or default_threads())
    if threads < 1:
        raise ToolkitError(f"threads must be >= 1, got {threads}")
    is_corpus = isinstance(documents, Sequence) and (not documents or isinstance(documents[0], Document))
    batches = corpus_batches(documents) if is_corpus else documents
    sized = getattr(documents, "total_bytes", None)
    total = sized if sized is not None else (len(documents) if is_corpus else None)
    target = Path(out_dir)
    parent = Path(work_dir) if work_dir is not None else target.resolve().parent
    parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}.work.", dir=parent))
    run: EngineRun | None = None
    try:
        with StagedIdentifiers(target) as staged:
            run = EngineRun(cfg, staged, work, threads, detect_progress=progress, on_batch=on_batch,
                            detector=detect_with)
            bar = progress_bar(total=total, unit="B" if sized is not None else "doc", unit_scale=sized is not None,
                               desc="identifiers", enabled=progress, delay=2.0)
            start = time.perf_counter()
            with bar:
                for docs in _prefetched(batches, run.timings):
                    if not docs:
                        continue
                    run.add_batch(docs)
                    bar.update((documents.bytes_read - bar.n) if sized is not None else len(docs))
                    bar.set_postfix_str(f"{run.n_words / max(time.perf_counter() - start, 1e-9):,.0f} words/s",
                                        refresh=False)
            if run.n_docs == 0:
                raise ToolkitError("cannot analyse an empty corpus")
            run.spans.close()
            run.documents.close()
            summary = _graph_and_tables(run, limit)
            summary["run_key"] = run.key.hexdigest()
            t0 = time.perf_counter()
            staged.commit(summary)
            summary["timings_s"]["commit_s"] = round(time.perf_counter() - t0, 3)
        return summary
    finally:
        if run is not None:
            run.detector.close()  # the pattern detector's worker processes
        shutil.rmtree(work, ignore_errors=True)


def _graph_and_tables(run: EngineRun, limit: int) -> dict[str, Any]:
    cfg, work = run.cfg, run.work
    t0 = time.perf_counter()
    store = GraphStore(work, memory_limit=f"{limit // 2**20}MiB", threads=run.threads)
    try:
        dup = store.first_duplicate_document()
        if dup is not None:
            raise CorpusError(f"duplicate doc_id: documents #{dup[0] + 1} and #{dup[1] + 1} have the same doc_id")
        store.build_unigrams()
        store.export_flags(cfg.k)
        stats = store.unigram_stats(cfg.k, cfg.generic_ratio)
        P = len(run.persons)
        n_distinct, n_direct_terms, n_indirect = (np.zeros(P, np.int64) for _ in range(3))
        p, a, b, c = store.person_unigram_counts(cfg.k)
        n_distinct[p], n_direct_terms[p], n_indirect[p] = a, b, c
        n_indirect_uni = n_indirect.copy()
        by_n = {1: stats["n_I_indirect"]} if stats["n_terms"] else {}
        if cfg.n >= 2:
            for batch in range(run.n_batches):
                run.write_mgrams(batch)
        for m in range(2, cfg.n + 1):
            store.build_mgrams(m, cfg.k)
            n_terms_m, n_ind_m = store.mgram_stats(m, cfg.k)
            if n_terms_m:
                by_n[m] = n_ind_m
            p, cnt = store.person_mgram_counts(m, cfg.k)
            n_indirect[p] += cnt
        run.timings["graph_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        n_ind_occ, n_prot = np.zeros(P, np.int64), np.zeros(P, np.int64)
        positions = TableSink(run.staged.path("positions"), "positions")
        n_indirect_pos, n_protected_pos = run.write_positions(positions, n_ind_occ, n_prot)
        positions.close()
        terms = TableSink(run.staged.path("terms"), "terms")
        for rb in store.term_batches(cfg.n, cfg.k, cfg.generic_ratio):
            terms.write(rb)
        terms.close()
    finally:
        store.close()
    import toolkit.io

    individuals = pd.DataFrame({
        "person_id": list(run.persons), "n_documents": run.n_docs_p.get(P), "n_words": run.n_words_p.get(P),
        "n_distinct_words": n_distinct, "n_direct": n_direct_terms, "n_direct_occurrences": run.n_dir_p.get(P),
        "n_indirect": n_indirect, "n_indirect_unigrams": n_indirect_uni, "n_indirect_occurrences": n_ind_occ,
        "n_protected": n_prot})
    toolkit.io.atomic_write_parquet(individuals, run.staged.path("individuals"))
    run.timings["tables_s"] = time.perf_counter() - t0
    n_words = run.n_words
    order = sorted(range(len(CATEGORIES)), key=lambda i: (-run.by_category[i], i))
    return {
        "config": summary_config(cfg),
        "n_documents": run.n_docs,
        "n_individuals": P,
        "n_words": n_words,
        "n_distinct_words": stats["n_terms"],
        "n_direct_positions": run.n_direct,
        "n_indirect_positions": n_indirect_pos,
        "n_protected_positions": n_protected_pos,
        "share_protected_positions": float(n_protected_pos / max(n_words, 1)),
        "n_I_direct": stats["n_I_direct"],
        "n_generic_words_removed": stats["seen_in_spans"] - stats["n_I_direct"],
        "n_I_indirect": stats["n_I_indirect"],
        "n_I": stats["n_I"],
        "n_indirect_terms_by_n": by_n,
        "share_distinct_words_below_k": float(stats["n_I_indirect"] / stats["n_terms"]) if stats["n_terms"] else 0.0,
        "share_occurrences_below_k": float(stats["occ_below_k"] / max(n_words, 1)),
        "direct_positions_by_category": {CATEGORIES[i]: int(run.by_category[i]) for i in order
                                         if run.by_category[i]},
        "timings_s": {k: round(v, 3) for k, v in run.timings.items()},
    }


__all__ = ["DEFAULT_MEMORY_SHARE", "analyze_to_disk", "default_threads", "machine_memory", "memory_limit_bytes"]
