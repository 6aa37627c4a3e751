"""Identifier analysis out of core: documents streamed in batches, the term graph in DuckDB (SPEC.md §2).

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
``memory_limit``, and a few integers per individual and per document (person index, counts). Disk: the work folder
holds about 15 bytes per word occurrence (compressed) until the run ends.

Why DuckDB rather than Polars: ``benchmarks/identifiers_scale.py --engines`` runs the graph step of both on the
same batch files; DuckDB spills joins, aggregations and sorts to disk under a hard memory limit, while Polars'
streaming engine held the edge table in memory at the sizes measured (see the benchmark's docstring).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from tqdm.auto import tqdm

from toolkit.corpus import Corpus, Document, make_document
from toolkit.errors import CorpusError, ToolkitError
from toolkit.identifiers.analysis import IdentifierConfig, analyze, mark_direct, summary_config
from toolkit.identifiers.categories import CATEGORIES, pii_category
from toolkit.identifiers.detectors import check_spans
from toolkit.identifiers.engine_sql import GraphStore
from toolkit.identifiers.storage import RunKey, StagedIdentifiers, text_sha256
from toolkit.identifiers.stream import corpus_batches
from toolkit.identifiers.words import segment_corpus

#: Default DuckDB memory limit: this share of the machine's memory (or of the cgroup's limit, when lower).
DEFAULT_MEMORY_SHARE = 0.25
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(B|KB|MB|GB|TB|KIB|MIB|GIB|TIB)?\s*$", re.IGNORECASE)
_UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30,
          "TIB": 2**40}
_PARQUET = {"compression": "zstd", "compression_level": 1}


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


@functools.cache
def _templates() -> dict[str, tuple[pa.Schema, pd.DataFrame]]:
    """Per table, the Parquet schema (pandas metadata included) the in-memory analysis writes for a non-empty table,
    and its empty table: taken from that analysis itself on two tiny corpora, so both engines write the same."""
    full = analyze(Corpus([make_document("a", "A", "Ann x", [(0, 3, "PATIENT")]), make_document("b", "B", "x y")]),
                   detector="oracle", n=2, progress=False)
    empty = analyze(Corpus([make_document("a", "A", "")]), detector="oracle", progress=False)

    def tables(r):
        return {"terms": r.terms, "individuals": r.individuals, "positions": r.positions(), "spans": r.span_table(),
                "documents": r.documents()}

    out = {}
    for name, frame in tables(full).items():
        frame = frame.copy(deep=False)
        frame.attrs = {}
        empty_frame = tables(empty)[name].copy(deep=False)
        empty_frame.attrs = {}
        out[name] = (pa.Schema.from_pandas(frame, preserve_index=False), empty_frame)
    return out


class _Sink:
    """One output table streamed into its Parquet file with the in-memory engine's schema (or, if it stays
    empty, that engine's empty table)."""

    def __init__(self, path: Path, name: str):
        self.path, self.name = path, name
        self.schema, self.empty = _templates()[name]
        self.writer: pq.ParquetWriter | None = None
        self.rows = 0

    def write(self, table: pa.Table | pa.RecordBatch) -> None:
        if table.num_rows == 0:
            return
        if self.writer is None:
            self.writer = pq.ParquetWriter(self.path, self.schema, compression="snappy")
        if isinstance(table, pa.RecordBatch):
            table = pa.Table.from_batches([table])
        self.writer.write_table(table.cast(self.schema))
        self.rows += table.num_rows

    def close(self) -> None:
        import toolkit.io

        if self.writer is not None:
            self.writer.close()
        else:
            toolkit.io.atomic_write_parquet(self.empty, self.path)


class _Grow:
    """An int64 counter per individual that grows with the number of individuals seen."""

    def __init__(self):
        self.a = np.zeros(1024, dtype=np.int64)

    def add(self, index: np.ndarray, weights: np.ndarray | None = None, size: int = 0) -> None:
        if size > len(self.a):
            self.a = np.concatenate([self.a, np.zeros(max(size, 2 * len(self.a)) - len(self.a), np.int64)])
        if len(index):
            self.a[:size] += np.bincount(index, weights=weights, minlength=size)[:size].astype(np.int64)

    def get(self, size: int) -> np.ndarray:
        return self.a[:size].copy() if size <= len(self.a) else np.r_[self.a, np.zeros(size - len(self.a), np.int64)]


def _write(table: pa.Table, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, **_PARQUET)


def _batch_file(work: Path, kind: str, b: int) -> Path:
    return work / kind / f"b={b}" / "data.parquet"


def _read_dir(folder: Path, columns: list[str]) -> pa.Table | None:
    files = sorted(folder.glob("*.parquet")) if folder.is_dir() else []
    if not files:
        return None
    return pa.concat_tables([pq.read_table(f, columns=columns) for f in files])


class EngineRun:
    """The state of one :func:`analyze_to_disk` run: the first pass (:meth:`add_batch`) writes the batch files that
    the graph step reads (``benchmarks/identifiers_scale.py --engines`` reuses it to compare engines)."""

    def __init__(self, cfg: IdentifierConfig, staged: StagedIdentifiers, work: Path, threads: int):
        self.cfg, self.staged, self.work, self.threads = cfg, staged, work, threads
        self.detector = cfg.make_detector()
        self.custom = not isinstance(cfg.detector, str)
        self.persons: dict[str, int] = {}
        self.n_docs_p, self.n_words_p, self.n_dir_p = _Grow(), _Grow(), _Grow()
        self.n_batches = self.n_docs = self.n_words = self.n_direct = 0
        self.word_offsets: list[int] = []
        self.by_category = np.zeros(len(CATEGORIES), dtype=np.int64)
        self.key = RunKey(summary_config(cfg))
        self.timings = {"detect_s": 0.0, "segment_s": 0.0, "graph_s": 0.0, "tables_s": 0.0}
        self.spans = _Sink(staged.path("spans"), "spans")
        self.documents = _Sink(staged.path("documents"), "documents")

    # ---- first pass ---------------------------------------------------------------------------------------------
    def add_batch(self, docs: Sequence[Document]) -> int:
        b = self.n_batches
        t0 = time.perf_counter()
        spans = self.detector.detect(docs, progress=False)
        if self.custom:  # a user's Detector object: hold it to the same contract
            spans = check_spans(spans, list(docs), source=f"detector {self.detector!r}")
        t1 = time.perf_counter()
        for d in docs:
            if len(d.text) >= 2**31:
                raise ToolkitError(f"document {d.doc_id!r}: text of {len(d.text)} characters, more than 2^31")
        words = segment_corpus([d.text for d in docs], lowercase=self.cfg.lowercase, progress=False,
                               n_threads=self.threads)
        direct, category = mark_direct(words, spans)
        pod = np.fromiter((self.persons.setdefault(d.person_id, len(self.persons)) for d in docs), dtype=np.int64,
                          count=len(docs))
        n_people = len(self.persons)
        per_doc = np.diff(words.doc_ptr)
        pw = np.repeat(pod, per_doc)
        self.n_docs_p.add(pod, size=n_people)
        self.n_words_p.add(pw, size=n_people)
        self.n_dir_p.add(pw[direct], size=n_people)
        hit = direct & (category >= 0)
        self.by_category += np.bincount(category[hit], minlength=len(CATEGORIES))[:len(CATEGORIES)]
        width = len(CATEGORIES)
        keys, counts = np.unique(words.term[hit].astype(np.int64) * width + category[hit], return_counts=True)
        _write(pa.table({"p": pw.astype(np.int32), "t": words.term, "s": words.start.astype(np.int32),
                         "e": words.end.astype(np.int32), "d": direct, "c": category}),
               _batch_file(self.work, "words", b))
        _write(pa.table({"t": np.arange(len(words.vocab), dtype=np.int32),
                         "term": pa.array(words.vocab.tolist(), type=pa.string())}), _batch_file(self.work, "vocab", b))
        _write(pa.table({"t": (keys // width).astype(np.int32), "c": (keys % width).astype(np.int8), "n": counts}),
               _batch_file(self.work, "cats", b))
        doc_ids = [d.doc_id for d in docs]
        _write(pa.table({"i": np.arange(self.n_docs, self.n_docs + len(docs), dtype=np.int64), "doc_id": doc_ids,
                         "nw": per_doc.astype(np.int64)}), _batch_file(self.work, "docs", b))
        shas = [text_sha256(d.text) for d in docs]
        for doc_id, sha in zip(doc_ids, shas):
            self.key.add(doc_id, sha)
        self.documents.write(pa.table({"doc_id": doc_ids, "text_sha256": shas}))
        rows = [(d.doc_id, s.start, s.end, s.label, pii_category(s.label)) for d, per in zip(docs, spans) for s in per]
        if rows:
            cols = list(zip(*rows))
            self.spans.write(pa.table({"doc_id": cols[0], "start": pa.array(cols[1], pa.int64()),
                                       "end": pa.array(cols[2], pa.int64()), "label": cols[3], "category": cols[4]}))
        self.word_offsets.append(self.n_words)
        self.n_batches += 1
        self.n_docs += len(docs)
        self.n_words += len(words)
        self.n_direct += int(direct.sum())
        self.timings["detect_s"] += t1 - t0
        self.timings["segment_s"] += time.perf_counter() - t1
        return len(words)

    # ---- m-gram occurrences (n >= 2) ------------------------------------------------------------------------------
    def flags(self, b: int, vocab_size: int) -> tuple[np.ndarray, np.ndarray]:
        """Per local term of batch ``b``: its global id and whether it is an indirect unigram."""
        gid = np.zeros(vocab_size, dtype=np.int32)
        ind = np.zeros(vocab_size, dtype=bool)
        t = _read_dir(self.work / "flags" / f"b={b}", ["t", "gid", "ind"])
        if t is not None:
            local = t.column("t").to_numpy()
            gid[local] = t.column("gid").to_numpy()
            ind[local] = t.column("ind").to_numpy()
        return gid, ind

    def write_mgrams(self, b: int) -> None:
        w = pq.read_table(_batch_file(self.work, "words", b), columns=["p", "t"])
        per_doc = pq.read_table(_batch_file(self.work, "docs", b), columns=["nw"]).column("nw").to_numpy()
        vocab_size = pq.read_metadata(_batch_file(self.work, "vocab", b)).num_rows
        gid_of, _ = self.flags(b, vocab_size)
        t, p = w.column("t").to_numpy(), w.column("p").to_numpy()
        gid = gid_of[t]
        doc = np.repeat(np.arange(len(per_doc)), per_doc)
        for m in range(2, self.cfg.n + 1):
            starts = np.arange(max(len(t) - m + 1, 0))
            pos = starts[doc[starts + m - 1] == doc[starts]]
            cols = {f"g{j + 1}": gid[pos + j] for j in range(m)}
            cols.update(p=p[pos], pos=pos.astype(np.int64) + self.word_offsets[b])
            _write(pa.table(cols), self.work / "occ" / f"m={m}" / f"b={b}" / "data.parquet")

    # ---- second pass: positions ----------------------------------------------------------------------------------
    def write_positions(self, sink: _Sink, n_ind_p: np.ndarray, n_prot_p: np.ndarray) -> tuple[int, int]:
        cats = pa.array(list(CATEGORIES) + [""], type=pa.string())
        n_indirect = n_protected = 0
        for b in range(self.n_batches):
            w = pq.read_table(_batch_file(self.work, "words", b))
            docs = pq.read_table(_batch_file(self.work, "docs", b), columns=["doc_id", "nw"])
            vocab = pq.read_table(_batch_file(self.work, "vocab", b)).column("term")
            _, ind_of = self.flags(b, len(vocab))
            t = w.column("t").to_numpy()
            direct = w.column("d").to_numpy()
            indirect = ind_of[t]
            for m in range(2, self.cfg.n + 1):
                st = _read_dir(self.work / "istart" / f"m={m}" / f"b={b}", ["pos"])
                if st is not None:
                    local = st.column("pos").to_numpy() - self.word_offsets[b]
                    for j in range(m):
                        indirect[local + j] = True
            protected = direct | indirect
            p = w.column("p").to_numpy()
            n_ind_p += np.bincount(p[indirect], minlength=len(n_ind_p))
            n_prot_p += np.bincount(p[protected], minlength=len(n_prot_p))
            n_indirect += int(indirect.sum())
            n_protected += int(protected.sum())
            sel = np.flatnonzero(protected)
            doc = np.repeat(np.arange(docs.num_rows), docs.column("nw").to_numpy())[sel]
            c = w.column("c").to_numpy()[sel]
            sink.write(pa.table({
                "doc_id": docs.column("doc_id").take(doc), "start": w.column("s").to_numpy()[sel].astype(np.int64),
                "end": w.column("e").to_numpy()[sel].astype(np.int64), "term": vocab.take(t[sel]),
                "direct": direct[sel], "indirect": indirect[sel],
                "category": cats.take(np.where(c >= 0, c, len(CATEGORIES)))}))
        return n_indirect, n_protected


def analyze_to_disk(documents: Sequence[Document] | Iterable[Sequence[Document]], out_dir: str | Path,
                    config: IdentifierConfig | None = None, *, memory_limit: str | int | None = None,
                    threads: int | None = None, work_dir: str | Path | None = None, progress: bool = True,
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
    try:
        with StagedIdentifiers(target) as staged:
            run = EngineRun(cfg, staged, work, threads)
            bar = tqdm(total=total, unit="B" if sized is not None else "doc", unit_scale=sized is not None,
                       desc="identifiers", disable=not progress, mininterval=1.0)
            start = time.perf_counter()
            with bar:
                for docs in batches:
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
            staged.commit(summary)
        return summary
    finally:
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
        positions = _Sink(run.staged.path("positions"), "positions")
        n_indirect_pos, n_protected_pos = run.write_positions(positions, n_ind_occ, n_prot)
        positions.close()
        terms = _Sink(run.staged.path("terms"), "terms")
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
