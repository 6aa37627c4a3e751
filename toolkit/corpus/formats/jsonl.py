"""JSON Lines: the native format (reader and atomic writer, methods.md §1) and foreign exports with named fields."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from toolkit.io import atomic_path
from toolkit.errors import CorpusError
from toolkit.corpus.model import Corpus, Document, make_document
from toolkit.corpus.formats.common import (ROW, Builder, PathLike, decode, existing, read_bytes, short,
                                           undecodable)

__all__ = ["JsonlFields", "jsonl_line_document", "parse_json_line", "read_jsonl", "write_jsonl"]

_JSONL_FIELDS = ("doc_id", "person_id", "text", "spans", "split", "labels")
_JSONL_REQUIRED = ("doc_id", "person_id", "text")


def _json_object_no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {short(key)} in a JSON object")
        out[key] = value
    return out


def read_jsonl(path: PathLike, *, text_field: str = "text", person_field: str = "person_id",
               id_field: str | None = "doc_id", split_field: str | None = "split",
               on_error: str = "strict") -> Corpus:
    """Read JSON Lines: one JSON object per line, one document per object. Blank lines are skipped.

    With the default field names this is the native format: each object has exactly the fields ``doc_id``,
    ``person_id``, ``text`` (required), and optionally ``spans`` (a list of ``{"start", "end", "label"}`` with
    character offsets, ``end`` exclusive), ``split`` and ``labels`` (an object); an unknown field is an error, with a
    suggestion for typos such as ``personid``. Naming any other field reads a foreign export: the named fields (and
    ``spans``, ``labels`` when present) are used and every other field is ignored.

    Parameters
    ----------
    path : str or os.PathLike
        The ``.jsonl`` file (UTF-8).
    text_field, person_field, id_field, split_field : str
        The fields holding the text, the individual, the document id and the split (CLI ``--text-field``,
        ``--person-field``, ``--id-field``, ``--split-field``). ``person_field="@row"``: no person field, each
        document is its own individual (``person_id = doc_id``). ``id_field="@row"`` or ``None``: no id field,
        ``doc_id = "<file stem>-<line number>"``. ``split_field=None``: no split. A named field missing from an
        object is an error (except the split, which is optional).
    on_error : {"strict", "skip"}, default "strict"
        ``"skip"``: a bad line (invalid JSON, a missing field, bad spans, invalid UTF-8, a duplicate ``doc_id``) is
        left out and listed in ``Corpus.skipped`` (line and reason, no text) instead of stopping the read.

    Returns
    -------
    Corpus

    Raises
    ------
    CorpusError
        With the file and line: invalid JSON, a line that is not an object, a missing or unknown field, a duplicate
        key, bad spans (outside the text, overlapping), non-UTF-8 bytes (with the byte offset), an empty corpus or
        a duplicate ``doc_id`` (naming the line of the first).

    See Also
    --------
    write_jsonl : writes this format.
    """
    p = existing(path)
    builder = Builder(p, on_error)
    fields = JsonlFields(text_field, person_field, id_field, split_field, p)
    text = decode(read_bytes(p), p, hint="re-encode the file as UTF-8", lenient=builder.lenient)

    def one(line: str, lineno: int) -> None:
        bad = undecodable(line) if builder.lenient else None
        if bad is not None:
            raise CorpusError(bad.replace("of the record", "of the line"), p, line=lineno)
        builder.add(fields.document(parse_json_line(line, p, lineno), p, lineno), line=lineno)

    for lineno, line in enumerate(text.split("\n"), start=1):
        if line.strip(" \t\r"):
            builder.attempt(lambda: one(line, lineno))
    return builder.corpus()


class JsonlFields:
    """The field mapping of :func:`read_jsonl` (and of the streamed reader,
    :class:`toolkit.identifiers.stream.JsonlBatches`): which JSON field holds which part of a document."""

    def __init__(self, text: str, person: str, doc_id: str | None, split: str | None, path: Path):
        for name, value in (("text_field", text), ("person_field", person), ("id_field", doc_id),
                            ("split_field", split)):
            if value is not None and (not isinstance(value, str) or not value):
                raise CorpusError(f"{name} must be a non-empty field name, got {value!r}", path)
        if text is None or text == ROW:
            raise CorpusError("text_field must name a field (every document needs a text)", path)
        if person is None:
            raise CorpusError("person_field must name a field, or be '@row' (--person-field @row) to make each "
                              "document its own individual", path)
        self.text, self.person, self.split = text, person, split
        self.doc_id = None if doc_id == ROW else doc_id
        self.native = (text, person, doc_id, split) == ("text", "person_id", "doc_id", "split")

    def document(self, obj: dict[str, Any], path: Path, lineno: int) -> Document:
        if self.native:
            return _native_document(obj, path, lineno)
        named = [f for f in (self.doc_id, self.person, self.text) if f is not None and f != ROW]
        missing = [f for f in named if f not in obj]
        if missing:
            raise CorpusError(f"missing field(s) {', '.join(map(repr, missing))} (the fields are named by "
                              "--text-field, --person-field, --id-field)", path, line=lineno)
        doc_id = obj[self.doc_id] if self.doc_id is not None else f"{path.stem}-{lineno}"
        person = doc_id if self.person == ROW else obj[self.person]
        split = obj.get(self.split) if self.split is not None else None
        names = {role: f for role, f in (("doc_id", self.doc_id), ("person_id", self.person), ("text", self.text),
                                         ("split", self.split)) if f is not None and f != ROW}
        return _make(obj, doc_id, person, obj[self.text], split, path, lineno, names)


def _native_document(obj: dict[str, Any], path: Path, lineno: int) -> Document:
    problems = []
    unknown = [k for k in obj if k not in _JSONL_FIELDS]
    if unknown:
        shown = []
        for k in unknown[:10]:
            close = difflib.get_close_matches(k, _JSONL_FIELDS, n=1) if len(k) <= 40 else []
            shown.append(f"{k!r} (did you mean {close[0]!r}?)" if close else short(k))
        more = f" and {len(unknown) - 10} more" if len(unknown) > 10 else ""
        problems.append(f"unknown field(s) {', '.join(shown)}{more}; allowed fields: {', '.join(_JSONL_FIELDS)} "
                        "(to read a foreign export, name its fields with --text-field, --person-field, --id-field)")
    missing = [k for k in _JSONL_REQUIRED if k not in obj]
    if missing:
        problems.append(f"missing field(s) {', '.join(repr(k) for k in missing)}")
    if problems:
        raise CorpusError("; ".join(problems), path, line=lineno)
    return _make(obj, obj["doc_id"], obj["person_id"], obj["text"], obj.get("split"), path, lineno)


def _make(obj: dict[str, Any], doc_id: Any, person: Any, text: Any, split: Any, path: Path, lineno: int,
          names: dict[str, str] | None = None) -> Document:
    spans = obj.get("spans")
    if spans is not None and not isinstance(spans, list):
        raise CorpusError(f"field 'spans' must be a list of {{start, end, label}} objects, got "
                          f"{type(spans).__name__}", path, line=lineno)
    return make_document(doc_id, person, text, spans, split, obj.get("labels"), path=path, line=lineno, names=names)


def parse_json_line(line: str, path: Path, lineno: int) -> dict[str, Any]:
    """One line of a JSON Lines corpus as a JSON object: the one parser of the format (a duplicate key, invalid JSON,
    nesting beyond the recursion limit or a value that is not an object is a :class:`CorpusError` naming the line)."""
    try:
        obj = json.loads(line, object_pairs_hook=_json_object_no_duplicates)
    except json.JSONDecodeError as e:
        raise CorpusError(f"invalid JSON: {e.msg} (column {e.colno})", path, line=lineno) from e
    except ValueError as e:  # duplicate key, or an integer with more digits than Python converts
        raise CorpusError(str(e), path, line=lineno) from e
    except RecursionError as e:  # "[[[[..." nested deeper than the parser's recursion limit
        raise CorpusError("invalid JSON: nested too deeply", path, line=lineno) from e
    if not isinstance(obj, dict):
        raise CorpusError(f"expected a JSON object with fields {', '.join(_JSONL_FIELDS)}; got a "
                          f"{type(obj).__name__}", path, line=lineno)
    return obj


def jsonl_line_document(raw: bytes, path: Path, lineno: int, fields: JsonlFields) -> Document | None:
    """The document of one line of a JSON Lines file read in binary (its ``\\n`` included), or ``None`` for a blank
    line: for readers that go line by line instead of decoding the whole file (:mod:`toolkit.identifiers.stream`).

    The same rules as :func:`read_jsonl`: strict UTF-8 (an invalid byte names its position in the line), a leading
    byte-order mark on line 1 dropped, lines end at ``\\n`` only, :func:`parse_json_line`, then ``fields``."""
    if raw.endswith(b"\n"):
        raw = raw[:-1]
    if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CorpusError(f"not valid utf-8: byte(s) {raw[e.start:e.end].hex(' ')} at byte {e.start + 1} of the "
                          f"line: {e.reason}; re-encode the file as UTF-8", path, line=lineno) from e
    if not line.strip(" \t\r"):
        return None
    return fields.document(parse_json_line(line, path, lineno), path, lineno)


def write_jsonl(corpus: Iterable[Document], path: PathLike) -> Path:
    """Write documents in the native JSON Lines format, atomically.

    One document per line, fields in the order ``doc_id, person_id, text, spans, split, labels`` (``split`` and
    ``labels`` omitted when ``None``/empty), UTF-8 without ASCII escaping, ``\\n`` line ends. The file is written to a
    temporary file in the same folder and moved into place (:func:`toolkit.io.atomic_path`), so a reader never sees a
    half written file and an existing file survives a failure. A new file is owner-only (0600); an existing file keeps
    its permissions.

    Parameters
    ----------
    corpus : Corpus or iterable of Document
        The documents (at least one).
    path : str or os.PathLike
        Destination; missing parent folders are created.

    Returns
    -------
    Path
        The written file.
    """
    p = Path(path)
    docs = list(corpus)
    if not docs:
        raise CorpusError("refusing to write an empty corpus (it could not be read back)", p)
    lines = [_dump_document(doc, p) for doc in docs]
    with atomic_path(p) as tmp:
        with open(tmp, "wb") as fh:
            fh.writelines(lines)
    return p


def _dump_document(doc: Document, path: Path) -> bytes:
    if not isinstance(doc, Document):
        raise CorpusError(f"expected a Document, got {type(doc).__name__}", path)
    try:
        return (json.dumps(doc.to_dict(), ensure_ascii=False) + "\n").encode("utf-8")
    except (TypeError, ValueError) as e:  # UnicodeEncodeError (lone surrogates) is a ValueError
        raise CorpusError(f"cannot write document as JSON: {e}", path, record=doc.doc_id) from e
