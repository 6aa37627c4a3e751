"""Loading a corpus in any supported format (methods.md §1): format detection and dispatch to the readers in
:mod:`toolkit.corpus.formats`.

Every reader returns a :class:`~toolkit.corpus.model.Corpus` and reports any problem as a
:class:`~toolkit.errors.CorpusError` naming the file, the line or record, and what is wrong. Exceptions of
the parsing libraries (``json``, ``csv``, ``xml.etree``, ``email``, codecs) never escape bare: they are re-raised as
``CorpusError`` chained with ``from``.

Supported formats (:data:`FORMATS`):

========== ===================================================================================================
``jsonl``  the native format, one document per line (:func:`read_jsonl`, :func:`write_jsonl`)
``csv``    a CSV table with a header (:func:`read_csv`)
``parquet`` an Apache Parquet table, one document per row (:func:`read_parquet`)
``i2b2``   i2b2 2006 / n2c2 2014 de-identification XML, a file or a folder (:func:`read_i2b2`)
``tab``    Text Anonymization Benchmark JSON (:func:`read_tab`)
``mbox``   a Unix mbox file (:func:`read_mbox`)
``maildir`` a Maildir folder with ``cur/`` and ``new/`` (:func:`read_maildir`)
``enron``  the Enron corpus' own layout: mailbox folders, one message file ``1.``, ``2.`` ... each (:func:`read_enron`)
``txt``    a folder of plain-text files, one document per file (:func:`read_txt_folder`)
========== ===================================================================================================

Text is kept exactly as stored: files are read as bytes and decoded without newline translation. The only
exceptions are documented where they happen: a leading UTF-8 byte-order mark is dropped (it is an encoding marker,
not text), XML parsers normalise line ends (see :func:`read_i2b2`), and e-mail headers are RFC 2047-decoded and
unfolded (see :func:`read_mbox`).

Every reader takes ``on_error="strict"`` (stop at the first bad record) or ``"skip"`` (leave bad records, or bad
gold spans, out and list them in ``Corpus.skipped``); :func:`load_corpus` can write that list to a file. Error
messages and the skipped list name the file, the record and the problem, never the text of a record.
"""

from __future__ import annotations

import contextlib
import inspect
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toolkit.io import atomic_path
from toolkit.errors import CorpusError
from toolkit.corpus.model import Corpus
from toolkit.corpus.formats.common import PathLike, existing
from toolkit.corpus.formats.csv import read_csv
from toolkit.corpus.formats.enron import looks_like_enron, read_enron
from toolkit.corpus.formats.i2b2 import read_i2b2
from toolkit.corpus.formats.jsonl import read_jsonl
from toolkit.corpus.formats.mail import read_maildir, read_mbox
from toolkit.corpus.formats.parquet import read_parquet
from toolkit.corpus.formats.tab import read_tab
from toolkit.corpus.formats.txt import read_txt_folder

__all__ = ["FORMATS", "detect_format", "load_corpus"]

FORMATS: tuple[str, ...] = ("jsonl", "csv", "parquet", "i2b2", "tab", "mbox", "maildir", "enron", "txt")

_READERS: dict[str, Callable[..., Corpus]] = {
    "jsonl": read_jsonl,
    "csv": read_csv,
    "parquet": read_parquet,
    "i2b2": read_i2b2,
    "tab": read_tab,
    "mbox": read_mbox,
    "maildir": read_maildir,
    "enron": read_enron,
    "txt": read_txt_folder,
}

_SUFFIXES = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".parquet": "parquet", ".xml": "i2b2", ".json": "tab",
             ".mbox": "mbox", ".txt": "txt"}


def detect_format(path: PathLike) -> str:
    """Guess the format of ``path`` (one of :data:`FORMATS`).

    Files by suffix: ``.jsonl``/``.ndjson`` → jsonl, ``.csv`` → csv, ``.parquet`` → parquet, ``.xml`` → i2b2,
    ``.json`` → tab, ``.mbox`` → mbox (also a suffix-less file starting with ``"From "``), ``.txt`` → txt. Folders: with ``cur/``
    and ``new/`` → maildir; else holding files named ``1.``, ``2.`` ... of which the first found starts with a mail
    header → enron; else containing ``.xml`` files → i2b2; else containing ``.txt`` files → txt.

    Raises
    ------
    CorpusError
        A missing path ("file not found") or an undetectable one (listing the formats).
    """
    p = existing(path)
    known = f"name it with --format (one of {', '.join(FORMATS)})"
    if p.is_dir():
        if (p / "cur").is_dir() and (p / "new").is_dir():
            return "maildir"
        if looks_like_enron(p):
            return "enron"
        if any(f.is_file() for f in p.rglob("*.xml")):
            return "i2b2"
        if any(f.is_file() for f in p.rglob("*.txt")):
            return "txt"
        raise CorpusError("cannot detect the format of this folder: no cur/ and new/ subfolders (maildir), no message "
                          f"files named 1., 2., ... (enron), no .xml files (i2b2) and no .txt files (txt); {known}", p)
    suffix = p.suffix.lower()
    if suffix in _SUFFIXES:
        return _SUFFIXES[suffix]
    if not suffix:
        with contextlib.suppress(OSError), open(p, "rb") as fh:
            if fh.read(5) == b"From ":
                return "mbox"
    raise CorpusError(f"cannot detect the format from the suffix {suffix or '(none)'!r} (known suffixes: "
                      f"{', '.join(sorted(_SUFFIXES))}); {known}", p)


def load_corpus(path: PathLike, format: str = "auto", *, on_error: str = "strict",
                skipped_path: PathLike | None = None, **options: Any) -> Corpus:
    """Read a corpus in any supported format.

    Parameters
    ----------
    path : str or os.PathLike
        File or folder.
    format : str, default "auto"
        One of :data:`FORMATS` (``"jsonl"``, ``"csv"``, ``"parquet"``, ``"i2b2"``, ``"tab"``, ``"mbox"``, ``"maildir"``,
        ``"enron"``, ``"txt"``) or ``"auto"`` to detect it with :func:`detect_format` (CLI ``--format``).
    on_error : {"strict", "skip"}, default "strict"
        Passed to the reader (CLI ``--on-error``): ``"skip"`` leaves bad records out and lists them in
        ``Corpus.skipped`` (file, line, record, reason; never text) instead of stopping at the first.
    skipped_path : str or os.PathLike, optional
        Where to write that list as JSON Lines, one ``{"file", "line", "record", "reason"}`` object per skipped
        record (written, empty, when nothing was skipped; atomically, owner-only). An existing folder gets a file
        ``skipped.jsonl`` inside it.
    **options
        Keyword options of the reader (e.g. ``text_field=`` for csv and jsonl, ``annotator=`` for tab).

    Returns
    -------
    Corpus

    Raises
    ------
    CorpusError
        A missing path ("file not found"), an unknown or undetectable format (listing the formats), an option the
        reader does not take (listing those it takes), or any error of the reader.

    Examples
    --------
    >>> corpus = load_corpus("notes.jsonl")                          # doctest: +SKIP
    >>> corpus = load_corpus("cases.json", annotator="annotator2")   # doctest: +SKIP
    >>> corpus = load_corpus("maildir", on_error="skip", skipped_path="run/skipped.jsonl")  # doctest: +SKIP
    """
    p = existing(path)
    fmt = detect_format(p) if format == "auto" else format
    if fmt not in _READERS:
        raise CorpusError(f"unknown format {format!r} (--format); known formats: {', '.join(FORMATS)} (or 'auto')",
                          p)
    reader = _READERS[fmt]
    params = inspect.signature(reader).parameters
    accepted = [name for name, prm in params.items() if prm.kind is inspect.Parameter.KEYWORD_ONLY]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise CorpusError(f"the {fmt} reader takes no option(s) {', '.join(unknown)}; its options are: "
                          f"{', '.join(accepted) or '(none)'}", p)
    corpus = reader(p, on_error=on_error, **options)
    if skipped_path is not None:
        _write_skipped(corpus, Path(skipped_path))
    return corpus


def _write_skipped(corpus: Corpus, path: Path) -> Path:
    """Write ``corpus.skipped`` as JSON Lines (locations and reasons only, no record text)."""
    if path.is_dir():
        path = path / "skipped.jsonl"
    with atomic_path(path) as tmp:
        with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
            fh.writelines(json.dumps(s.to_dict(), ensure_ascii=False) + "\n" for s in corpus.skipped)
    return path
