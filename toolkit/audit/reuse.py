"""Scores computed once per process and reused (:mod:`toolkit.audit.losses`, "Reuse").

A model's losses depend only on its weights and the token ids it reads. A run audits every checkpoint against the
same reference model (the base) on the same windows, so the reference's scores are the same for every checkpoint.
A model loaded by :func:`toolkit.audit.losses.load_audit_model` from a local folder carries :func:`files_signature`
(as ``model.toolkit_files``); a result is kept under (that signature, what was computed, a digest of the token ids)
in a small least-recently-used table of this process. A model without a signature (a hub id, a model built or
changed in memory) is never reused.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from pathlib import Path

import numpy as np

#: the kept results of this process, least recently used first
_KEPT: OrderedDict[tuple, object] = OrderedDict()
SIZE = 16


def files_signature(path, *extra) -> str | None:
    """SHA-256 of a local model folder's files (relative path, size, modification time) and ``extra`` (e.g. the
    dtype it was loaded in); None for anything else (a hub id). Saving a model again changes it."""
    root = Path(str(path))
    if not root.is_dir():
        return None
    h = hashlib.sha256(str(root.resolve()).encode("utf-8", "surrogatepass"))
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        st = f.stat()
        h.update(f"\0{f.relative_to(root).as_posix()}\0{st.st_size}\0{st.st_mtime_ns}".encode("utf-8",
                                                                                            "surrogatepass"))
    h.update(repr(extra).encode())
    return h.hexdigest()


def reuse_key(model, what: str, encoded, *arrays) -> tuple | None:
    """(the model's files, ``what``, digest of every document's token ids and of each of ``arrays`` — further
    per-document integer arrays that change what is computed, e.g. the positions masked together), or None for a
    model without files."""
    files = getattr(model, "toolkit_files", None)
    if files is None:
        return None
    h = hashlib.sha256()
    for per_document in ([e[0] for e in encoded], *arrays):
        h.update(b"|")
        for a in per_document:
            ids = np.ascontiguousarray(a, dtype=np.int64)
            h.update(len(ids).to_bytes(8, "little"))
            h.update(ids.tobytes())
    return (files, what, h.hexdigest())


def reused(key: tuple):
    """The result kept under ``key`` (now the most recently used), or None."""
    found = _KEPT.get(key)
    if found is not None:
        _KEPT.move_to_end(key)
    return found


def remember(key: tuple, result) -> None:
    """Keep ``result`` under ``key``, dropping the least recently used beyond :data:`SIZE`."""
    _KEPT[key] = result
    while len(_KEPT) > SIZE:
        _KEPT.popitem(last=False)


__all__ = ["SIZE", "files_signature", "remember", "reuse_key", "reused"]
