"""The identifier outputs on disk: one consistent set, written at once, checked when read.

Layout of an identifiers folder (``IdentifierAnalysis.save``)::

    terms.parquet  individuals.parquet  positions.parquet  spans.parquet
    documents.parquet   doc_id, text_sha256: the text each document's identifiers were made from
    summary.json        headline counts, the config and ``run_key``
    manifest.json       {"format", "run_key", "files": {name: SHA-256 of the file}}

``run_key`` is a SHA-256 of the analysis config and of the documents' fingerprints: two folders share it exactly
when they were computed with the same settings from the same texts.

**Written as a set.** The files go to a fresh hidden folder beside the target (``.NAME.*.tmp``), the manifest last;
that folder then takes the target's place in one rename (Linux ``renameat2(RENAME_EXCHANGE)``: the previous set
stays readable until the swap; elsewhere two renames, the previous set moved aside first). A run killed midway
leaves the previous set untouched and a ``.NAME.*.tmp`` folder; two concurrent runs leave one complete set, never a
mix. Entries of the target that are not identifier outputs (a pipeline's ``step.json``) are carried over.

**Checked when read.** :func:`load_identifiers` refuses a folder without a manifest (an older toolkit version or a
run that never finished), a file whose SHA-256 differs from the manifest's (files of different runs, or an edited
file) and a summary whose ``run_key`` is not the manifest's.

**Fingerprints travel with the tables.** ``positions`` and ``spans`` carry the documents' fingerprints in
``DataFrame.attrs["identifier_documents"]`` (doc_id → SHA-256 of the text), so that training can refuse documents
the identifiers do not cover or were not made from (:func:`check_coverage`), whoever passed the tables along.
"""

from __future__ import annotations

import ctypes
import hashlib
import io
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from toolkit.errors import ToolkitError

TABLES = ("terms", "individuals", "positions", "spans", "documents")
FILES = tuple(f"{t}.parquet" for t in TABLES) + ("summary.json",)
MANIFEST = "manifest.json"
FORMAT = 1
DOCUMENTS_ATTR = "identifier_documents"
_RERUN = "re-run `python -m toolkit identifiers`"


def text_sha256(text: str) -> str:
    """SHA-256 of a document's text (UTF-8; lone surrogates kept as they are)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class DocumentFingerprints(dict):
    """``doc_id → text SHA-256``, read-only. Held in ``DataFrame.attrs``: pandas deep-copies ``attrs`` into every
    derived frame or column, so the one instance is shared instead of copied (a copy per operation would cost time
    proportional to the corpus)."""

    def __deepcopy__(self, memo):
        return self

    def __copy__(self):
        return self

    def __reduce__(self):  # pickled as a plain dict's items (the default would go through __setitem__)
        return (DocumentFingerprints, (dict(self),))

    def _read_only(self, *args, **kw):
        raise TypeError("DocumentFingerprints is read-only")

    __setitem__ = __delitem__ = update = pop = popitem = clear = setdefault = _read_only  # type: ignore[assignment]


def attach_documents(frame: pd.DataFrame, documents: Mapping[str, str] | pd.DataFrame) -> pd.DataFrame:
    """Attach the documents' fingerprints (a mapping, or a frame with doc_id and text_sha256) to ``frame``."""
    if isinstance(documents, pd.DataFrame):
        documents = dict(zip(documents["doc_id"].astype(str), documents["text_sha256"].astype(str)))
    frame.attrs[DOCUMENTS_ATTR] = documents if isinstance(documents, DocumentFingerprints) else \
        DocumentFingerprints(documents)
    return frame


def documents_of(frame: pd.DataFrame | None) -> Mapping[str, str] | None:
    """The fingerprints attached to an identifier table (None when it carries none)."""
    found = getattr(frame, "attrs", {}).get(DOCUMENTS_ATTR) if frame is not None else None
    return found if isinstance(found, Mapping) else None


def check_coverage(docs: Iterable, frame: pd.DataFrame, *, table: str) -> None:
    """Refuse unless every document of ``docs`` is covered by identifiers made from exactly its text.

    ``frame`` is the identifier table training reads (``positions`` or ``spans``) with its fingerprints attached.
    The error gives counts only: neither document ids nor text.
    """
    docs = list(docs)
    known = documents_of(frame)
    if known is None:
        raise ToolkitError(f"the identifier {table} carry no document fingerprints (identifiers from an older toolkit "
                           f"version, or a table built by hand), so it cannot be checked that they cover the "
                           f"{len(docs)} training documents; {_RERUN} on the training documents")
    missing = changed = 0
    for d in docs:
        h = known.get(d.doc_id)
        if h is None:
            missing += 1
        elif h != text_sha256(d.text):
            changed += 1
    if missing or changed:
        raise ToolkitError(f"the identifiers do not protect the training documents: {missing} of {len(docs)} are "
                           f"not covered by them and {changed} were changed since the identifiers were made; "
                           f"{_RERUN} on the training documents")


class RunKey:
    """:func:`run_key` fed one document at a time (for analyses that stream their documents)."""

    def __init__(self, config: Mapping[str, Any]):
        self._h = hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode())

    def add(self, doc_id: str, sha: str) -> None:
        self._h.update(f"\0{doc_id}\0{sha}".encode("utf-8", "surrogatepass"))

    def hexdigest(self) -> str:
        return self._h.hexdigest()


def run_key(config: Mapping[str, Any], documents: pd.DataFrame) -> str:
    """SHA-256 of the analysis config and the documents' fingerprints (see the module docstring)."""
    key = RunKey(config)
    for doc_id, sha in zip(documents["doc_id"], documents["text_sha256"]):
        key.add(doc_id, sha)
    return key.hexdigest()


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux ``renameat2`` with ``RENAME_EXCHANGE``); False where unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (38, 22, 95):  # ENOSYS, EINVAL, EOPNOTSUPP: no exchange on this kernel or file system
        return False
    raise OSError(err, os.strerror(err), str(b))


def _carry_over(old: Path, new: Path) -> None:
    """Hard-link (or copy) the entries of ``old`` that are not identifier outputs into ``new``."""
    ours = set(FILES) | {MANIFEST}
    for entry in old.iterdir():
        if entry.name in ours or (new / entry.name).exists():
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, new / entry.name, symlinks=True, copy_function=_link_or_copy)
        else:
            _link_or_copy(entry, new / entry.name)


def _link_or_copy(src, dst) -> None:
    try:
        os.link(src, dst, follow_symlinks=False)
    except OSError:
        shutil.copy2(src, dst, follow_symlinks=False)


def replace_dir(tmp: Path, target: Path) -> None:
    """Put folder ``tmp`` in the place of ``target`` (see the module docstring); ``tmp`` is consumed."""
    from toolkit.io import fsync_dir

    for _ in range(20):  # a concurrent writer may create or swap the target in between: try again
        if not target.exists() and not target.is_symlink():
            try:
                os.rename(tmp, target)
                break
            except OSError:
                continue
        if not target.is_dir() or target.is_symlink():
            raise ToolkitError(f"{target}: exists and is not a folder")
        _carry_over(target, tmp)
        try:
            swapped = _exchange(tmp, target)
        except FileNotFoundError:  # the target was moved meanwhile
            continue
        if swapped:
            shutil.rmtree(tmp)  # now the previous set
            break
        aside = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.old")
        try:
            os.rename(target, aside)
        except FileNotFoundError:
            continue
        os.rename(tmp, target)
        shutil.rmtree(aside)
        break
    else:
        raise ToolkitError(f"{target}: could not be replaced (another process keeps writing it)")
    fsync_dir(target.parent)


class StagedIdentifiers:
    """A fresh hidden folder beside ``out_dir`` (``.NAME.*.tmp``, 0700) where the identifier files are written one by
    one (:meth:`path`); :meth:`commit` adds ``summary.json`` and the manifest and puts the folder in the target's place
    (:func:`replace_dir`). Used as a context manager, whatever was not committed is removed on exit, so a run killed or
    failing midway leaves the previous set untouched. The out-of-core engine streams its tables straight into it.
    """

    def __init__(self, out_dir: str | Path):
        from toolkit.io import make_private_dir

        target = Path(out_dir)
        if target.is_symlink():  # a link to the outputs' folder: replace the folder it points to, keep the link
            target = target.resolve()
        make_private_dir(target.parent)
        self.target = target
        self.dir = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))  # 0700

    def path(self, name: str) -> Path:
        """Where table ``name`` (:data:`TABLES`) goes."""
        if name not in TABLES:
            raise ValueError(f"unknown identifier table {name!r}")
        return self.dir / f"{name}.parquet"

    def commit(self, summary: dict[str, Any]) -> Path:
        """Write ``summary.json`` (holding ``run_key``) and ``manifest.json``, then swap the set in."""
        from toolkit.io import atomic_write_json

        missing = [f for f in FILES[:-1] if not (self.dir / f).is_file()]
        if missing:
            raise ToolkitError(f"{self.target}: identifier outputs incomplete, {', '.join(missing)} not written")
        atomic_write_json(summary, self.dir / "summary.json")
        atomic_write_json({"format": FORMAT, "run_key": summary["run_key"],
                           "files": {f: _sha256_file(self.dir / f) for f in FILES}}, self.dir / MANIFEST)
        replace_dir(self.dir, self.target)
        return self.target

    def discard(self) -> None:
        if self.dir.exists():
            shutil.rmtree(self.dir)

    def __enter__(self) -> "StagedIdentifiers":
        return self

    def __exit__(self, *exc) -> None:
        self.discard()


def save_identifiers(tables: Mapping[str, pd.DataFrame], summary: dict[str, Any], out_dir: str | Path) -> Path:
    """Write the identifier ``tables`` (:data:`TABLES`) and ``summary`` (holding ``run_key``) to ``out_dir`` as one
    set with its manifest (see the module docstring)."""
    import toolkit.io

    with StagedIdentifiers(out_dir) as staged:
        for name in TABLES:
            frame = tables[name].copy(deep=False)
            frame.attrs = {}  # the fingerprints live in documents.parquet, not in every file's metadata
            toolkit.io.atomic_write_parquet(frame, staged.path(name))
        return staged.commit(summary)


def _read(path: Path, sha: str | None) -> Any:
    if not path.is_file():
        raise ToolkitError(f"{path}: missing (expected the output of `python -m toolkit identifiers`)")
    try:
        data = path.read_bytes()
        value = pd.read_parquet(io.BytesIO(data)) if path.suffix == ".parquet" else json.loads(data.decode("utf-8"))
    except (OSError, ValueError, UnicodeDecodeError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise ToolkitError(f"{path}: unreadable or corrupt ({type(exc).__name__}: {str(exc)[:200]}); "
                           f"{_RERUN}") from exc
    if sha is not None and hashlib.sha256(data).hexdigest() != sha:
        raise ToolkitError(f"{path}: not the file {MANIFEST} lists (its SHA-256 differs): the folder mixes the "
                           f"outputs of different identifier runs, or the file was edited; {_RERUN}")
    return value


def load_identifiers(directory: str | Path) -> dict[str, Any]:
    """Read what :meth:`IdentifierAnalysis.save` wrote: ``{"terms", "individuals", "positions", "spans",
    "documents", "summary"}``; ``positions`` and ``spans`` carry the documents' fingerprints.

    A missing, damaged or inconsistent file (see the module docstring) raises :class:`ToolkitError` naming it.
    """
    d = Path(directory)
    mpath = d / MANIFEST
    if not mpath.is_file():
        raise ToolkitError(f"{mpath}: missing: {d} is not a complete identifier output of this toolkit version "
                           f"(written by an older version, or by a run that did not finish); {_RERUN}")
    manifest = _read(mpath, None)
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, dict) or manifest.get("format") != FORMAT or set(files) != set(FILES):
        raise ToolkitError(f"{mpath}: not a manifest of identifier format {FORMAT}; {_RERUN}")
    out = {name: _read(d / f"{name}.parquet", files[f"{name}.parquet"]) for name in TABLES}
    out["summary"] = _read(d / "summary.json", files["summary.json"])
    if not isinstance(out["summary"], dict) or out["summary"].get("run_key") != manifest.get("run_key"):
        raise ToolkitError(f"{d / 'summary.json'}: its run_key is not the one {MANIFEST} names (files of different "
                           f"identifier runs); {_RERUN}")
    fingerprints = DocumentFingerprints(zip(out["documents"]["doc_id"].astype(str),
                                            out["documents"]["text_sha256"].astype(str)))
    attach_documents(out["positions"], fingerprints)
    attach_documents(out["spans"], fingerprints)
    return out


__all__ = ["DOCUMENTS_ATTR", "DocumentFingerprints", "FILES", "MANIFEST", "RunKey", "TABLES", "StagedIdentifiers",
           "attach_documents", "check_coverage", "documents_of", "load_identifiers", "replace_dir", "run_key",
           "save_identifiers", "text_sha256"]
