"""The corpus model (methods.md §1): documents about individuals, with optional gold PII spans.

A :class:`Document` is one text about one individual (``person_id``: a patient, a judgment, a mailbox). A
:class:`Corpus` is an ordered collection of documents with unique ``doc_id``; every per-individual figure in the
toolkit groups documents by ``person_id``.

Validation happens here, once, for every reader: spans must lie inside the text, must not overlap, and labels must be
non-empty strings. Readers pass ``source`` (file, line/record) so that a problem is reported where it is. Messages name
positions, lengths and types, never the text of a record: an error message ends up in terminals and logs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolkit.errors import CorpusError

#: UTF-16 surrogate code points: a Python string can hold them (e.g. from an unpaired ``\ud800`` JSON escape), but they
#: are not Unicode scalar values, cannot be encoded as UTF-8 and make Arrow, Parquet and tokenizers fail later.
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True, slots=True)
class Span:
    """A gold PII span ``text[start:end]`` with a label (e.g. ``PATIENT``, ``DATE``); ``end`` is exclusive."""

    start: int
    end: int
    label: str

    def to_dict(self) -> dict[str, Any]:
        return {"start": self.start, "end": self.end, "label": self.label}


@dataclass(frozen=True, slots=True)
class Document:
    """One document about one individual.

    Attributes
    ----------
    doc_id, person_id:
        Identifiers; ``doc_id`` is unique within a corpus.
    text:
        The document text (any Unicode).
    spans:
        Gold PII spans, sorted by start, non-overlapping, inside the text. Empty when the corpus has no gold.
    split:
        Optional split name (``public``, ``train``, ``heldout``, ``test``, ``validation`` ...).
    labels:
        Optional downstream labels, e.g. ``{"smoking": "NON-SMOKER"}``.
    """

    doc_id: str
    person_id: str
    text: str
    spans: tuple[Span, ...] = ()
    split: str | None = None
    labels: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"doc_id": self.doc_id, "person_id": self.person_id, "text": self.text,
                               "spans": [s.to_dict() for s in self.spans]}
        if self.split is not None:
            out["split"] = self.split
        if self.labels:
            out["labels"] = dict(self.labels)
        return out


def _field_name(name: str, names: Mapping[str, str] | None) -> str:
    """A field in an error: the user's own column or key (``names[name]``, e.g. ``--person-field patient``) with the
    role it plays, else the role's name."""
    user = (names or {}).get(name)
    return repr(name) if not user or user == name else f"{user!r} (the {name.replace('_', ' ')})"


def make_document(doc_id: Any, person_id: Any, text: Any, spans: Iterable[Any] | None = None,
                  split: Any = None, labels: Any = None, *, path: Any = None, line: int | None = None,
                  record: str | None = None, names: Mapping[str, str] | None = None) -> Document:
    """Build a validated :class:`Document`; any problem raises :class:`CorpusError` naming ``path``/``line``/``record``.

    ``spans`` may hold :class:`Span` objects, ``{"start", "end", "label"}`` mappings or ``(start, end, label)`` tuples.
    Spans are sorted by start; overlapping spans, spans outside ``[0, len(text)]``, empty spans and non-integer
    offsets are errors (never silently dropped). A lone surrogate code point in ``text``, an id, ``split`` or a span
    label is an error too: it is not Unicode text and would only fail later, inside Arrow or a tokenizer.
    ``names`` (optional): the user's own field or column of each role (``{"person_id": "patient"}``), which the
    errors name.
    """

    def fail(msg: str) -> CorpusError:
        return CorpusError(msg, path, line=line, record=record)

    for name, value in (("doc_id", doc_id), ("person_id", person_id)):
        if value is None or (isinstance(value, str) and not value.strip()):
            raise fail(f"missing field {_field_name(name, names)}")
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise fail(f"field {_field_name(name, names)} must be a string or integer, got {type(value).__name__}")
    if text is None:
        raise fail(f"missing field {_field_name('text', names)}")
    if not isinstance(text, str):
        raise fail(f"field {_field_name('text', names)} must be a string, got {type(text).__name__}")
    for name, value in (("doc_id", doc_id), ("person_id", person_id), ("text", text), ("split", split)):
        bad = _SURROGATE.search(value) if isinstance(value, str) else None
        if bad is not None:
            raise fail(f"field {_field_name(name, names)} holds a lone surrogate U+{ord(bad.group()):04X} at character {bad.start()}: "
                       "not valid Unicode text (in JSON, an unpaired \\uD800-\\uDFFF escape; read leniently, a byte "
                       "not valid in the file's encoding); fix the export")
    if split is not None and not isinstance(split, str):
        raise fail(f"field 'split' must be a string, got {type(split).__name__}")
    if labels is None:
        labels = {}
    if not isinstance(labels, dict):
        raise fail(f"field 'labels' must be an object/mapping, got {type(labels).__name__}")

    parsed: list[Span] = []
    for i, s in enumerate(spans or ()):
        if isinstance(s, Span):
            start, end, label = s.start, s.end, s.label
        elif isinstance(s, dict):
            missing = [k for k in ("start", "end", "label") if k not in s]
            if missing:
                raise fail(f"span #{i} is missing {', '.join(repr(m) for m in missing)}")
            start, end, label = s["start"], s["end"], s["label"]
        elif isinstance(s, (tuple, list)) and len(s) == 3:
            start, end, label = s
        else:
            raise fail(f"span #{i} must be an object with start, end, label; got a {type(s).__name__}")
        if isinstance(start, bool) or isinstance(end, bool) or not isinstance(start, int) or not isinstance(end, int):
            raise fail(f"span #{i} offsets must be integers, got start of type {type(start).__name__}, end of type "
                       f"{type(end).__name__}")
        if not isinstance(label, str) or not label.strip() or _SURROGATE.search(label):
            kind = "an empty string" if isinstance(label, str) and not label.strip() else \
                "a string with a lone surrogate" if isinstance(label, str) else f"a {type(label).__name__}"
            raise fail(f"span #{i} label must be a non-empty string of valid Unicode, got {kind}")
        if not 0 <= start < end <= len(text):
            raise fail(f"span #{i} [{start}, {end}) {label} lies outside the text (length {len(text)}) or is empty")
        parsed.append(Span(start, end, label))
    parsed.sort(key=lambda sp: (sp.start, sp.end))
    for a, b in zip(parsed, parsed[1:]):
        if b.start < a.end:
            raise fail(f"spans overlap: [{a.start}, {a.end}) {a.label} and [{b.start}, {b.end}) {b.label}")
    return Document(str(doc_id), str(person_id), text, tuple(parsed), split, dict(labels))


@dataclass(frozen=True, slots=True)
class SkippedRecord:
    """A record (or one gold span of a record) that a reader left out under ``on_error="skip"``.

    It says where the record is and why it was left out, never what it holds: ``reason`` is the message the strict
    reader would have raised, and those messages name positions, lengths and types only.
    """

    file: str | None
    line: int | None
    record: str | None
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "record": self.record, "reason": self.reason}


class Corpus(Sequence[Document]):
    """An ordered, immutable collection of documents with unique ``doc_id``.

    Raises :class:`CorpusError` on an empty corpus or a duplicate ``doc_id`` (naming both positions, not the id: an
    id can be an address or a Message-ID). ``skipped`` lists what a lenient reader left out (:class:`SkippedRecord`);
    it describes the reading, so slices and :meth:`filter` results have none.
    """

    def __init__(self, documents: Iterable[Document], *, source: Any = None, allow_empty: bool = False,
                 skipped: Iterable[SkippedRecord] = ()):
        docs = list(documents)
        self.source = str(source) if source is not None else None
        self.skipped: tuple[SkippedRecord, ...] = tuple(skipped)
        if not docs and not allow_empty:
            raise CorpusError("the corpus is empty (no documents found)", source)
        seen: dict[str, int] = {}
        for i, d in enumerate(docs):
            if d.doc_id in seen:
                raise CorpusError(f"duplicate doc_id: documents #{seen[d.doc_id] + 1} and #{i + 1} have the same "
                                  "doc_id", source, record=f"document #{i + 1}")
            seen[d.doc_id] = i
        self._docs = docs
        self._index = seen

    # Sequence protocol
    def __len__(self) -> int:
        return len(self._docs)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return Corpus(self._docs[i], source=self.source, allow_empty=True)
        return self._docs[i]

    def __iter__(self) -> Iterator[Document]:
        return iter(self._docs)

    def __repr__(self) -> str:
        return (f"Corpus({len(self)} documents, {len(self.person_ids)} individuals"
                + (f", source={self.source!r}" if self.source else "") + ")")

    def get(self, doc_id: str) -> Document:
        return self._docs[self._index[doc_id]]

    @property
    def person_ids(self) -> list[str]:
        """Distinct individuals, in order of first appearance."""
        return list(dict.fromkeys(d.person_id for d in self._docs))

    @property
    def splits(self) -> list[str]:
        return sorted({d.split for d in self._docs if d.split is not None})

    def filter(self, *, split: str | Iterable[str] | None = None, person_ids: Iterable[str] | None = None) -> "Corpus":
        """Documents in the given split(s) and/or about the given individuals (an empty result is an error)."""
        docs = self._docs
        if split is not None:
            wanted = {split} if isinstance(split, str) else set(split)
            docs = [d for d in docs if d.split in wanted]
        if person_ids is not None:
            people = set(person_ids)
            docs = [d for d in docs if d.person_id in people]
        if not docs:
            raise CorpusError(f"no documents left after filtering (split={split!r}); available splits: "
                              f"{self.splits}", self.source)
        return Corpus(docs, source=self.source)

    def by_person(self) -> dict[str, list[Document]]:
        out: dict[str, list[Document]] = {}
        for d in self._docs:
            out.setdefault(d.person_id, []).append(d)
        return out

    def to_frame(self):
        """A pandas DataFrame with one row per document (spans kept as lists of dicts)."""
        import pandas as pd

        return pd.DataFrame([d.to_dict() for d in self._docs],
                            columns=["doc_id", "person_id", "text", "spans", "split", "labels"])
