"""Give the heap that a long scoring pass freed back to the operating system.

A masked model's pseudo-log-likelihood runs thousands of forward passes whose tensors differ in size (windows sorted
by length, batches halved on an out-of-memory error). glibc's allocator raises its mmap threshold each time a large
block is freed, so later blocks of that size come from the heap, and the heap keeps what is freed between them: the
process' resident memory grew by ~1.1 MB per scored text and never came down (PII inference of 1,500 occurrences ×
20 candidates on the CPU profile's masked model reached 20 GiB of 23, measured 2026-11-28, docs/performance.md).
:func:`release_heap` (glibc's ``malloc_trim(0)``) returns the free pages; the passes call :func:`release_heap_often`
after every batch (at most once every 5 s: a release makes the next batches fault their pages in again; one pass over
782 windows had reached 14.8 GiB with a release at its end only) and :func:`release_heap` at their end. Elsewhere (macOS, musl, Windows)
both do nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import time


@functools.lru_cache(maxsize=1)
def _trim():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc.malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None


def release_heap() -> bool:
    """Return the heap's free pages to the operating system (glibc ``malloc_trim(0)``); True if memory was released,
    False where nothing was or the C library has no such call."""
    trim = _trim()
    return bool(trim(0)) if trim is not None else False


_last = [0.0]


def release_heap_often(seconds: float = 5.0) -> bool:
    """:func:`release_heap` if the last release was ``seconds`` ago or more (a batch loop calls it every batch)."""
    now = time.monotonic()
    if now - _last[0] < seconds:
        return False
    _last[0] = now
    return release_heap()


__all__ = ["release_heap", "release_heap_often"]
