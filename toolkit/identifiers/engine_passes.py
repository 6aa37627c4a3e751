"""The two per-batch passes of the out-of-core engine (:mod:`toolkit.identifiers.engine`) and its output tables.

:class:`EngineRun` holds a run's state: :meth:`~EngineRun.add_batch` (first pass: detect, segment, mark direct
positions, write the batch files), :meth:`~EngineRun.write_mgrams` (m-gram occurrences per batch, n ≥ 2) and
:meth:`~EngineRun.write_positions` (second pass). :class:`TableSink` streams an output table into its Parquet file with
the schema the in-memory analysis writes (pandas metadata included), so that both engines' files read back alike.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from toolkit.corpus import Corpus, Document, make_document
from toolkit.errors import ToolkitError
from toolkit.identifiers.analysis import IdentifierConfig, analyze, mark_direct, summary_config
from toolkit.identifiers.categories import CATEGORIES, pii_category
from toolkit.identifiers.detectors import Detector, check_spans
from toolkit.identifiers.storage import RunKey, StagedIdentifiers, text_sha256
from toolkit.identifiers.words import segment_corpus

#: The work files: written once, read twice; no dictionary pages (costly to build for integer columns).
_PARQUET = {"compression": "lz4", "use_dictionary": False}
#: Characters of text per segmentation chunk (RE2 over one joined chunk is fastest around this size).
CHUNK_CHARS = 2_000_000


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


class TableSink:
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
    """The state of one :func:`toolkit.identifiers.engine.analyze_to_disk` run: the first pass (:meth:`add_batch`)
    writes the batch files that the graph step reads (``benchmarks/identifiers_scale.py --engines`` reuses it to
    compare engines)."""

    def __init__(self, cfg: IdentifierConfig, staged: StagedIdentifiers, work: Path, threads: int, *,
                 detect_progress: bool = False, on_batch: Callable[..., Any] | None = None,
                 detector: Detector | None = None):
        self.cfg, self.staged, self.work, self.threads = cfg, staged, work, threads
        self.on_batch = on_batch
        self.detector = cfg.make_detector() if detector is None else detector
        # NER is the slow step: its own bar (words/s, ETA for the batch); the fast detectors run silently
        self.detect_progress = detect_progress and "spacy" in self.detector.name
        self.custom = detector is not None or not isinstance(cfg.detector, str)
        self.persons: dict[str, int] = {}
        self.n_docs_p, self.n_words_p, self.n_dir_p = _Grow(), _Grow(), _Grow()
        self.n_batches = self.n_docs = self.n_words = self.n_direct = 0
        self.word_offsets: list[int] = []
        self.by_category = np.zeros(len(CATEGORIES), dtype=np.int64)
        self.key = RunKey(summary_config(cfg))
        self.timings = {"detect_s": 0.0, "segment_s": 0.0, "graph_s": 0.0, "tables_s": 0.0}
        self.spans = TableSink(staged.path("spans"), "spans")
        self.documents = TableSink(staged.path("documents"), "documents")

    # ---- first pass ---------------------------------------------------------------------------------------------
    def add_batch(self, docs: Sequence[Document]) -> int:
        b = self.n_batches
        t0 = time.perf_counter()
        spans = self.detector.detect(docs, progress=self.detect_progress)
        if self.custom:  # a user's Detector object: hold it to the same contract
            spans = check_spans(spans, list(docs), source=f"detector {self.detector!r}")
        t1 = time.perf_counter()
        for d in docs:
            if len(d.text) >= 2**31:
                raise ToolkitError(f"document {d.doc_id!r}: text of {len(d.text)} characters, more than 2^31")
        chars = sum(len(d.text) for d in docs)
        chunk = min(-(-len(docs) // (2 * self.threads)), max(1, CHUNK_CHARS * len(docs) // max(chars, 1)))
        words = segment_corpus([d.text for d in docs], lowercase=self.cfg.lowercase, progress=False,
                               n_threads=self.threads, chunk_size=max(chunk, 1))
        direct, category = mark_direct(words, spans)
        if self.on_batch is not None:
            self.on_batch(docs, words, spans)
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
    def write_positions(self, sink: TableSink, n_ind_p: np.ndarray, n_prot_p: np.ndarray) -> tuple[int, int]:
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


__all__ = ["CHUNK_CHARS", "EngineRun", "TableSink"]
