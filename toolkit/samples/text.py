"""Text with gold spans: :class:`TextBuilder` writes text piece by piece and records a span for every PII piece.

Shared by the clinical and the e-mail generators, with the template parser (``"a {x} b"``: literal text and named
slots), the word splitter the sample statistics use and the record writer (native JSONL field order).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple, Union

from toolkit.io import atomic_write

_PLACEHOLDER = re.compile(r"\{(\w+)\}")
_WORD = re.compile(r"[^\W_]+")


class Phi(NamedTuple):
    """A PII value to be written with a gold span: the surface text and its label."""

    text: str
    label: str


#: What a template slot may hold: plain text, a PII value, or a callable giving either (called at each use).
Slot = Union[str, Phi, Callable[[], Union[str, Phi]]]


@lru_cache(maxsize=None)
def parse_template(template: str) -> tuple[tuple[str, str | None], ...]:
    """Split ``"a {x} b"`` into ``(("a ", "x"), (" b", None))``: literal text, then the slot that follows it."""
    out: list[tuple[str, str | None]] = []
    pos = 0
    for m in _PLACEHOLDER.finditer(template):
        out.append((template[pos:m.start()], m.group(1)))
        pos = m.end()
    out.append((template[pos:], None))
    return tuple(out)


def words_of(text: str) -> list[str]:
    """Words as the samples' statistics count them: runs of letters/digits, lower-cased."""
    return _WORD.findall(text.lower())


class TextBuilder:
    """Append text piece by piece and record a span for every PII piece.

    >>> b = TextBuilder(); b.add("Seen by Dr. "); b.phi("Lee", "DOCTOR"); b.add(".")
    >>> b.text(), b.spans
    ('Seen by Dr. Lee.', [(12, 15, 'DOCTOR')])
    """

    __slots__ = ("parts", "spans", "pos")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.spans: list[tuple[int, int, str]] = []
        self.pos = 0

    def add(self, s: str) -> None:
        """Append plain text (no PII)."""
        if s:
            self.parts.append(s)
            self.pos += len(s)

    def phi(self, s: str, label: str) -> None:
        """Append a PII value and record its span."""
        if not s:
            raise ValueError(f"empty {label} value")
        self.spans.append((self.pos, self.pos + len(s), label))
        self.parts.append(s)
        self.pos += len(s)

    def put(self, value: Slot) -> None:
        """Append a slot value: text, a :class:`Phi`, or the result of calling it."""
        if callable(value):
            value = value()
        if isinstance(value, Phi):
            self.phi(value.text, value.label)
        else:
            self.add(value)

    def fill(self, template: str, slots: Mapping[str, Slot]) -> None:
        """Append ``template`` with each ``{name}`` replaced by ``slots[name]`` (a missing slot is a KeyError)."""
        for literal, name in parse_template(template):
            self.add(literal)
            if name is not None:
                self.put(slots[name])

    def text(self) -> str:
        return "".join(self.parts)

    def word_count(self) -> int:
        """Whitespace-separated tokens written so far (a cheap length measure)."""
        return len(self.text().split())


def make_record(doc_id: str, person_id: str, text: str, spans: Iterable[tuple[int, int, str]], split: str | None,
                labels: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A document dict in the native JSONL field order (``split``/``labels`` omitted when empty, as ``write_jsonl``)."""
    out: dict[str, Any] = {"doc_id": doc_id, "person_id": person_id, "text": text,
                           "spans": [{"start": s, "end": e, "label": lab} for s, e, lab in spans]}
    if split is not None:
        out["split"] = split
    if labels:
        out["labels"] = dict(labels)
    return out


def write_records(records: Iterable[Mapping[str, Any]], path: Path) -> Path:
    """Write one JSON object per line (UTF-8, no ASCII escaping, ``\\n`` line ends) atomically."""
    return atomic_write(path, lambda fh: fh.writelines(json.dumps(rec, ensure_ascii=False) + "\n" for rec in records))


def article(word: str) -> str:
    """``a`` or ``an`` before a word, by its first sound (good enough for the curated lists)."""
    w = word.lower()
    if w.startswith(("uni", "use", "uro", "uke", "eu", "one")):
        return "a"
    if w.startswith(("hour", "honest", "herb")):
        return "an"
    return "an" if w[:1] in "aeiou" else "a"


def weighted_choice(rng: random.Random, items: Sequence[Any], weights: Sequence[float]) -> Any:
    """One item drawn with the given weights (a thin wrapper to keep call sites short)."""
    return rng.choices(items, weights=weights, k=1)[0]


__all__ = ["Phi", "Slot", "TextBuilder", "article", "make_record", "parse_template", "weighted_choice",
           "words_of", "write_records"]
