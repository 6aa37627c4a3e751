"""spaCy NER spans kept across runs: a piece of text is parsed once, by any run, on this machine.

:class:`~toolkit.identifiers.ner.PieceCache` remembers the entities of each distinct piece within a run;
:class:`PersistentPieceCache` adds a store on disk shared by every run (:class:`NerCache`), so that re-running an
analysis with another ``k`` or ``n``, or on a corpus with new documents, runs the model only on pieces no run has
parsed before.

**What is stored.** One row per piece: ``digest`` (SHA-256 of the piece's UTF-8 text, :func:`piece_digest`) and its
entities as three lists (``starts``, ``ends``: character offsets into the piece; ``labels``). **No text**: not the piece, not an
entity's words. A SHA-256 cannot be turned back into the piece, but whoever guesses a whole piece (a line holding
only a name) can confirm the guess by hashing it, so the cache is handled like the identifier tables (PRIVACY.md).

**Keyed by model and options.** Entries live under ``CACHE_DIR/<namespace>/``, where the namespace is a SHA-256 of
:func:`namespace_of`: the pipeline's name and version, the spaCy version, a SHA-256 of the bytes of its tokenizer
and components (a retrained pipeline saved under the same name and version gets a new namespace), the entity labels
kept and the text wrapped around each piece. ``CACHE_DIR`` defaults to ``$XDG_CACHE_HOME/lm-anonymity-toolkit/ner``
(``~/.cache/...`` without ``XDG_CACHE_HOME``, :func:`default_cache_dir`), holds a ``CACHEDIR.TAG`` (backup tools skip
it; ``toolkit purge --ner-cache`` refuses a folder without it) and is owner-only (0700 folders, 0600 files).

**Concurrent runs.** Nothing is ever modified: each run appends new entries as a new Parquet file
named by its content (``part-<first 32 hex digits of the file's SHA-256>.parquet``), written under a hidden
temporary name and renamed into place, so a reader sees whole files only, and two runs writing at once write two
files (or, with the same content, the same file). A piece parsed by two runs at once is stored twice (the same
spans); the reader keeps one.

**Damaged files.** Each file is checked once per process before it is read: its bytes against the SHA-256 in its
name, then its columns and namespace. A file that fails (truncated, overwritten, edited, not Parquet, written for
another namespace), or with offsets that do not fit the piece, is ignored as a whole with one warning naming the
file; its pieces are parsed again. Wrong spans are never returned.

Lookups scan the ``digest`` column of the namespace's files in DuckDB (a semi-join with the batch's digests; the
entities are read for matching rows only), so memory is bounded by the batch, not by the cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from toolkit.identifiers.ner import PieceCache
from toolkit.io import atomic_write_text, fsync_dir, make_private_dir

#: Folder name under the user's cache directory.
APP_DIR = "lm-anonymity-toolkit"
FORMAT = 1
TAG = "CACHEDIR.TAG"
_TAG_TEXT = ("Signature: 8a477f597d28d172789f06886806bc55\n"
             "# spaCy NER spans of lm-anonymity-toolkit (offsets and labels, no text); see PRIVACY.md.\n")
#: The columns of a cache file (also of the spans a cluster's workers write, :mod:`toolkit.identifiers.distributed`).
SCHEMA = pa.schema([("digest", pa.binary()), ("starts", pa.list_(pa.int32())), ("ends", pa.list_(pa.int32())),
                    ("labels", pa.list_(pa.string()))])

Entities = tuple[tuple[int, int, str], ...]


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/lm-anonymity-toolkit/ner`` (an absolute ``XDG_CACHE_HOME`` only, as the XDG rules say),
    else ``~/.cache/lm-anonymity-toolkit/ner``."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / APP_DIR / "ner"


def resolve_cache_dir(cache_dir: str | os.PathLike | None) -> Path:
    """``cache_dir`` (``~`` expanded), or :func:`default_cache_dir` when it is None or empty."""
    return Path(cache_dir).expanduser() if cache_dir else default_cache_dir()


def piece_digest(key: str) -> bytes:
    """SHA-256 of a piece's text (UTF-8; lone surrogates kept as they are)."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()


def namespace_of(nlp: Any, labels: Iterable[str], wrap: str) -> dict[str, Any]:
    """What the spans of a piece depend on besides its text (see the module docstring); JSON-able, no text."""
    import spacy

    meta = getattr(nlp, "meta", {}) or {}
    h = hashlib.sha256()
    for part in [getattr(nlp, "tokenizer", None)] + [proc for _, proc in getattr(nlp, "pipeline", [])]:
        to_bytes = getattr(part, "to_bytes", None)
        h.update(to_bytes() if callable(to_bytes) else repr(type(part)).encode())
    return {"format": FORMAT, "model": f"{meta.get('lang', '')}_{meta.get('name', '')}",
            "model_version": str(meta.get("version", "")), "spacy_version": spacy.__version__,
            "pipeline": list(getattr(nlp, "pipe_names", [])), "weights_sha256": h.hexdigest(),
            "labels": sorted(set(labels)), "wrap": wrap}


class NerCache:
    """The on-disk store of one namespace (module docstring): :meth:`lookup` and :meth:`add`."""

    def __init__(self, cache_dir: str | os.PathLike | None, namespace: Mapping[str, Any]):
        self.root = resolve_cache_dir(cache_dir)
        self.namespace = dict(namespace)
        self.ns_id = hashlib.sha256(json.dumps(self.namespace, sort_keys=True).encode()).hexdigest()[:32]
        self.dir = self.root / self.ns_id
        self.bad: set[str] = set()
        self.verified: set[str] = set()
        self.writable = True

    def files(self) -> list[Path]:
        """The namespace's complete part files, minus those found damaged in this process."""
        if not self.dir.is_dir():
            return []
        return sorted(p for p in self.dir.glob("part-*.parquet") if p.name not in self.bad)

    def _ignore(self, path: Path, why: str) -> None:
        self.bad.add(path.name)
        warnings.warn(f"{path}: NER cache file ignored ({why}); its pieces are parsed again", RuntimeWarning,
                      stacklevel=3)

    def _readable(self, files: list[Path]) -> list[Path]:
        """``files`` minus those whose bytes, schema or namespace are wrong (each checked and warned about once)."""
        ok = []
        for f in files:
            if f.name in self.verified:
                ok.append(f)
                continue
            try:
                blob = f.read_bytes()
            except OSError as exc:  # removed meanwhile (a purge), or unreadable
                self._ignore(f, f"unreadable: {type(exc).__name__}")
                continue
            if f"part-{hashlib.sha256(blob).hexdigest()[:32]}.parquet" != f.name:
                self._ignore(f, "its bytes do not match the SHA-256 in its name: damaged or edited")
                continue
            try:
                meta = pq.read_schema(pa.BufferReader(blob))
            except pa.ArrowException as exc:
                self._ignore(f, f"not a readable Parquet file: {type(exc).__name__}")
                continue
            ns = (meta.metadata or {}).get(b"namespace", b"").decode("utf-8", "replace")
            if not meta.remove_metadata().equals(SCHEMA):
                self._ignore(f, "unexpected columns")
            elif ns != self.ns_id:
                self._ignore(f, "written for another model or options")
            else:
                self.verified.add(f.name)
                ok.append(f)
        return ok

    def lookup(self, keys: Mapping[bytes, str]) -> dict[bytes, Entities]:
        """Entities of the pieces ``digest -> text`` found on disk (text used only to check offsets)."""
        files = self._readable(self.files()) if keys else []
        if not files:
            return {}
        import duckdb

        wanted = pa.table({"digest": pa.array(list(keys), pa.binary())})
        con = duckdb.connect(config={"threads": 1, "memory_limit": "512MB"})
        try:
            con.register("wanted", wanted)
            while files:
                try:
                    found = con.sql(
                        "SELECT c.digest, c.starts, c.ends, c.labels, c.filename FROM read_parquet($files, "
                        "filename = true) c SEMI JOIN wanted w ON c.digest = w.digest",
                        params={"files": [str(f) for f in files]}).to_arrow_table()
                    break
                except duckdb.Error as exc:  # a file damaged beyond its footer: find it, drop it, scan the rest
                    kept = self._scannable(con, files)
                    if len(kept) == len(files):  # no single file to blame: read nothing rather than guess
                        warnings.warn(f"{self.dir}: NER cache not read ({type(exc).__name__}); the pieces are "
                                      f"parsed again", RuntimeWarning, stacklevel=2)
                        return {}
                    files = kept
            else:
                return {}
        finally:
            con.close()
        return self._checked(found.to_pylist(), keys)

    def _scannable(self, con, files: list[Path]) -> list[Path]:
        import duckdb

        ok = []
        for f in files:
            try:
                con.execute("SELECT count(*), sum(length(digest)), sum(len(starts)), sum(len(ends)), "
                            "sum(len(labels)) FROM read_parquet(?)", [str(f)]).fetchall()
                ok.append(f)
            except duckdb.Error as exc:
                self._ignore(f, f"unreadable data: {type(exc).__name__}")
        return ok

    def _checked(self, rows: list[dict], keys: Mapping[bytes, str]) -> dict[bytes, Entities]:
        labels = set(self.namespace.get("labels", ()))
        by_file: dict[str, dict[bytes, Entities]] = {}
        broken: set[str] = set()
        for r in rows:
            name = r["filename"]
            if name in broken:
                continue
            d, st, en, lab = r["digest"], r["starts"], r["ends"], r["labels"]
            n = len(keys[d])
            valid = (st is not None and en is not None and lab is not None and len(st) == len(en) == len(lab)
                     and all(0 <= a < b <= n for a, b in zip(st, en)) and all(x in labels for x in lab)
                     and all(en[i] <= st[i + 1] for i in range(len(st) - 1)))
            if not valid:
                broken.add(name)
                continue
            by_file.setdefault(name, {})[d] = tuple(zip(st, en, lab))
        out: dict[bytes, Entities] = {}
        for name, entries in sorted(by_file.items()):
            if name not in broken:
                for d, ents in entries.items():
                    out.setdefault(d, ents)
        for name in sorted(broken):
            self._ignore(Path(name), "offsets that do not fit their piece")
        return out

    def add(self, entries: Mapping[bytes, Entities]) -> Path | None:
        """Write ``entries`` (digest -> entities) as one new part file, atomically; None if there was nothing to
        write or the folder is not writable (one warning, then the run goes on without storing)."""
        if not entries or not self.writable:
            return None
        digests = list(entries)
        cols = {"digest": digests, "starts": [[int(e[0]) for e in entries[d]] for d in digests],
                "ends": [[int(e[1]) for e in entries[d]] for d in digests],
                "labels": [[str(e[2]) for e in entries[d]] for d in digests]}
        buf = pa.BufferOutputStream()
        pq.write_table(pa.table(cols, schema=SCHEMA.with_metadata({"namespace": self.ns_id})), buf,
                       compression="zstd")
        blob = buf.getvalue().to_pybytes()
        path = self.dir / f"part-{hashlib.sha256(blob).hexdigest()[:32]}.parquet"
        tmp = self.dir / f".part-{uuid.uuid4().hex}.parquet.tmp"
        try:
            self._prepare()
            with open(tmp, "wb") as fh:
                fh.write(blob)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, 0o600)
            os.replace(tmp, path)
            fsync_dir(self.dir)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            self.writable = False
            warnings.warn(f"{self.root}: NER cache not written ({type(exc).__name__}: {exc.strerror or exc}); "
                          f"this run goes on without storing its spans", RuntimeWarning, stacklevel=2)
            return None
        return path

    def _prepare(self) -> None:
        make_private_dir(self.dir)
        if not (self.root / TAG).exists():
            atomic_write_text(_TAG_TEXT, self.root / TAG)
        if not (self.dir / "namespace.json").exists():
            atomic_write_text(json.dumps(self.namespace, indent=2, sort_keys=True) + "\n", self.dir / "namespace.json")


class PersistentPieceCache(PieceCache):
    """:class:`~toolkit.identifiers.ner.PieceCache` backed by a :class:`NerCache`: :meth:`prefetch` loads the
    entries of a batch's pieces from disk, :meth:`update` stores the pieces just parsed. ``hits``: pieces found on
    disk by the last :meth:`prefetch`."""

    def __init__(self, size: int, store: NerCache):
        super().__init__(size)
        self.store = store
        self.hits = 0

    def prefetch(self, keys: Iterable[str]) -> int:
        missing = {piece_digest(k): k for k in keys if k not in self.data}
        found = self.store.lookup(missing)
        for d, ents in found.items():
            self.data[missing[d]] = ents  # held until update(): the batch maps its offsets from them
        self.hits = len(found)
        return self.hits

    def update(self, fresh: dict[str, Entities]) -> None:
        self.store.add({piece_digest(k): v for k, v in fresh.items()})
        super().update(fresh)
        for _ in range(len(self.data) - self.size):
            del self.data[next(iter(self.data))]


__all__ = ["APP_DIR", "SCHEMA", "NerCache", "PersistentPieceCache", "default_cache_dir", "namespace_of",
           "piece_digest", "resolve_cache_dir"]
