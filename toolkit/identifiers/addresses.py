"""E-mail addresses in a corpus: the regex, the occurrence table and text edits that keep gold spans aligned
(methods.md §6, paper 002 §4.1.1).

* :data:`EMAIL_RE` — the address pattern, the same one as the ``EMAIL`` rule of the ``patterns`` detector
  (:data:`toolkit.identifiers.detectors.PATTERNS`), so that the addresses RMFT and dedup edit are the ones the
  identifier analysis protects. It is the practical subset of RFC 5322's ``addr-spec`` real mail uses: a local part
  of word characters and ``.``, ``+``, ``'``, ``-`` (``murray.o'neil``, ``jane+news``, ``j-doe``; at most 64, RFC
  5321), a domain of labels of word characters and ``-`` (subdomains: ``mail.ect.enron.com``) and a TLD of 2-63
  letters, matched case-insensitively. It finds bare addresses, addresses in angle brackets (``"Doe, Jane"
  <jane.doe@enron.com>``), in quotes (``'jane.doe@enron.com'``) and capitalised ones (``Jane.Doe@Enron.com``). A
  trailing full stop is not part of the address. Every quantifier is bounded, so a match costs time linear in the
  text (the detector's hostile-input tests). An earlier pattern here left ``'`` out of the local part: it found
  ``neil@enron.com`` inside ``murray.o'neil@enron.com``, and RMFT's look-alike left ``murray.o'`` in the text.
* Addresses are compared **case-insensitively** (:func:`normalize_address` = lower case): ``Jane.Doe@Enron.com``
  and ``jane.doe@enron.com`` are one address (the domain is case-insensitive by RFC 5321; local parts are in
  practice) **(choice)**.
* :func:`occurrence_table` — methods.md §6's table of ``(address, document index, start, end)`` sorted by
  ``(document, start)``; built with one ``re.finditer`` pass per document (linear in the corpus size).
* :func:`edit_document` — applies non-overlapping replacements / deletions to a document's text and moves every
  gold span with them (spans inside a deleted range are dropped and counted), so a transformed corpus stays a valid
  :class:`~toolkit.corpus.Corpus` with correct offsets.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from toolkit.corpus import Corpus, Document, make_document

#: The e-mail address pattern (module docstring): the ``EMAIL`` rule of the ``patterns`` detector, character for
#: character, compiled with :data:`EMAIL_FLAGS` as the detector compiles it.
EMAIL_PATTERN = r"\b[\w.+'-]{1,64}@[\w-]{1,63}(?:\.[\w-]{1,63})*\.[a-z]{2,63}\b"
#: Flags of :data:`EMAIL_PATTERN`: case-insensitive (``Jane.Doe@Enron.COM``).
EMAIL_FLAGS = re.IGNORECASE
EMAIL_RE = re.compile(EMAIL_PATTERN, EMAIL_FLAGS)

#: Characters that separate first and last name in a local part (``jane.doe``, ``jane_d``, ``jane-doe``).
SEPARATORS = "._-"

OCCURRENCE_COLUMNS = ["address", "doc_index", "doc_id", "start", "end", "surface"]


def normalize_address(address: str) -> str:
    """The comparison key of an address: lower case (methods.md §6 compares addresses case-insensitively — choice)."""
    return address.lower()


def find_addresses(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, surface)`` of every address in ``text``, in order."""
    return [(m.start(), m.end(), m.group()) for m in EMAIL_RE.finditer(text)]


def addresses_in(text: str) -> set[str]:
    """The normalised addresses occurring in ``text``."""
    return {normalize_address(m.group()) for m in EMAIL_RE.finditer(text)}


def occurrence_table(corpus: Iterable[Document]) -> pd.DataFrame:
    """Every address occurrence, sorted by ``(doc_index, start)`` (methods.md §6).

    Columns: ``address`` (normalised), ``doc_index`` (position of the document in the corpus), ``doc_id``,
    ``start``, ``end`` (character offsets, end exclusive), ``surface`` (the address as written).
    """
    rows_addr, rows_doc, rows_id, rows_s, rows_e, rows_surf = [], [], [], [], [], []
    for i, doc in enumerate(corpus):
        for m in EMAIL_RE.finditer(doc.text):
            surf = m.group()
            rows_addr.append(surf.lower())
            rows_doc.append(i)
            rows_id.append(doc.doc_id)
            rows_s.append(m.start())
            rows_e.append(m.end())
            rows_surf.append(surf)
    return pd.DataFrame({"address": pd.Series(rows_addr, dtype=object), "doc_index": np.asarray(rows_doc, np.int64),
                         "doc_id": pd.Series(rows_id, dtype=object), "start": np.asarray(rows_s, np.int64),
                         "end": np.asarray(rows_e, np.int64), "surface": pd.Series(rows_surf, dtype=object)},
                        columns=OCCURRENCE_COLUMNS)


def address_counts(corpus: Iterable[Document] | pd.DataFrame) -> pd.Series:
    """Occurrences per normalised address, most frequent first (ties by address): the rank-frequency table of 002
    Fig. 1. Accepts a corpus or an :func:`occurrence_table`."""
    occ = corpus if isinstance(corpus, pd.DataFrame) else occurrence_table(corpus)
    counts = Counter(occ["address"])
    items = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return pd.Series([c for _, c in items], index=pd.Index([a for a, _ in items], name="address"), name="count",
                     dtype=np.int64)


def address_summary(occ: pd.DataFrame, original: set[str] | None = None) -> dict:
    """Counts for a before/after table: occurrences, distinct addresses, maximum repetition.

    With ``original`` (the addresses of the untransformed corpus) the ``original_*`` figures count only those
    addresses: after RMFT every original address occurs once, while look-alikes make up the other occurrences.
    """
    counts = Counter(occ["address"])
    out = {"n_occurrences": int(len(occ)), "n_distinct": len(counts),
           "max_repetition": int(max(counts.values(), default=0))}
    if original is not None:
        orig = {a: c for a, c in counts.items() if a in original}
        out.update({"n_original_occurrences": int(sum(orig.values())), "n_original_distinct": len(orig),
                    "original_max_repetition": int(max(orig.values(), default=0))})
    return out


# ---------------------------------------------------------------------------------------------------------------------
# address structure


@dataclass(frozen=True)
class AddressParts:
    """An address split as RMFT needs it (methods.md §6): first name, last name (when the local part has a separator),
    domain name and TLD; ``tag`` is a plus-address suffix (``+news``), kept as it is.

    ``first`` holds the whole local part (without tag) when there is no separator (``jdoe``); then ``sep`` is ``""``
    and ``last`` is ``None``.
    """

    first: str
    sep: str
    last: str | None
    tag: str
    domain: str
    tld: str

    @property
    def separated(self) -> bool:
        return self.last is not None

    def render(self) -> str:
        local = self.first + (self.sep + self.last if self.last is not None else "")
        return f"{local}{self.tag}@{self.domain}.{self.tld}"


def parse_address(address: str) -> AddressParts:
    """Split ``address`` into :class:`AddressParts` (case preserved).

    The local part's plus-tag (``jane.doe+news``) is set aside; the first separator (``.``, ``_``, ``-``) that is
    neither the first nor the last character splits first from last name (``f.last`` → ``f`` / ``last``,
    ``a.b.c`` → ``a`` / ``b.c``); the domain's last label is the TLD.
    """
    local, _, domain = address.rpartition("@")
    plus = local.find("+")
    base, tag = (local[:plus], local[plus:]) if plus > 0 else (local, "")
    cut = next((i for i, ch in enumerate(base) if ch in SEPARATORS and 0 < i < len(base) - 1), -1)
    name, _, tld = domain.rpartition(".")
    if cut < 0:
        return AddressParts(base, "", None, tag, name, tld)
    return AddressParts(base[:cut], base[cut], base[cut + 1:], tag, name, tld)


def case_style(part: str) -> str:
    """``"upper"``, ``"title"`` or ``"lower"``: how a part of an address is capitalised."""
    letters = [c for c in part if c.isalpha()]
    if letters and all(c.isupper() for c in letters) and len(letters) > 1:
        return "upper"
    if letters and part[:1].isupper():
        return "title"
    return "lower"


def apply_case(part: str, style: str) -> str:
    """``part`` (lower case) written in ``style`` (see :func:`case_style`)."""
    if style == "upper":
        return part.upper()
    if style == "title":
        return part[:1].upper() + part[1:]
    return part


# ---------------------------------------------------------------------------------------------------------------------
# text edits that keep gold spans aligned


@dataclass
class EditResult:
    document: Document
    n_spans_dropped: int


def _map_positions(pos: np.ndarray, starts: np.ndarray, ends: np.ndarray, new_starts: np.ndarray,
                   new_ends: np.ndarray, *, side: str) -> np.ndarray:
    """New offsets of ``pos`` after edits ``[starts, ends) -> [new_starts, new_ends)`` (sorted, non-overlapping).

    A position inside an edited range moves to the new range's start (``side="start"``) or end (``side="end"``).
    """
    if len(starts) == 0:
        return pos.copy()
    k = np.searchsorted(ends, pos, side="right") - 1  # last edit ending at or before pos
    shift = np.where(k >= 0, new_ends[np.maximum(k, 0)] - ends[np.maximum(k, 0)], 0)
    out = pos + shift
    j = np.searchsorted(starts, pos, side="right") - 1  # last edit starting at or before pos
    inside = (j >= 0) & (pos > starts[np.maximum(j, 0)]) & (pos < ends[np.maximum(j, 0)])
    if inside.any():
        jj = j[inside]
        out[inside] = new_starts[jj] if side == "start" else new_ends[jj]
    return out


def edit_document(doc: Document, edits: Sequence[tuple[int, int, str]]) -> EditResult:
    """Replace each ``text[start:end]`` by its new string (``""`` deletes) and move the gold spans.

    ``edits`` must be sorted and non-overlapping. A span that ends up empty (it lay inside a deleted range) is
    dropped and counted in ``n_spans_dropped``; all other spans keep their label with shifted offsets.
    """
    if not edits:
        return EditResult(doc, 0)
    text = doc.text
    pieces, prev = [], 0
    starts = np.fromiter((e[0] for e in edits), np.int64, len(edits))
    ends = np.fromiter((e[1] for e in edits), np.int64, len(edits))
    new_starts = np.empty(len(edits), np.int64)
    new_ends = np.empty(len(edits), np.int64)
    pos_new = 0
    for i, (s, e, new) in enumerate(edits):
        if s < prev or e < s:
            raise ValueError(f"edits of {doc.doc_id} overlap or are not sorted")
        pieces.append(text[prev:s])
        pos_new += s - prev
        new_starts[i] = pos_new
        pieces.append(new)
        pos_new += len(new)
        new_ends[i] = pos_new
        prev = e
    pieces.append(text[prev:])
    new_text = "".join(pieces)
    spans, dropped = [], 0
    if doc.spans:
        s0 = np.fromiter((sp.start for sp in doc.spans), np.int64, len(doc.spans))
        e0 = np.fromiter((sp.end for sp in doc.spans), np.int64, len(doc.spans))
        s1 = _map_positions(s0, starts, ends, new_starts, new_ends, side="start")
        e1 = _map_positions(e0, starts, ends, new_starts, new_ends, side="end")
        for sp, a, b in zip(doc.spans, s1.tolist(), e1.tolist()):
            if b > a:
                spans.append((a, b, sp.label))
            else:
                dropped += 1
    new_doc = make_document(doc.doc_id, doc.person_id, new_text, spans, doc.split, doc.labels,
                            record=doc.doc_id)
    return EditResult(new_doc, dropped)


def rebuild_corpus(corpus: Corpus, documents: list[Document]) -> Corpus:
    """A corpus of ``documents`` with the source of ``corpus``."""
    return Corpus(documents, source=corpus.source, allow_empty=True)


__all__ = ["EMAIL_FLAGS", "EMAIL_PATTERN", "EMAIL_RE", "OCCURRENCE_COLUMNS", "AddressParts", "EditResult",
           "address_counts", "address_summary", "addresses_in", "apply_case", "case_style", "edit_document",
           "find_addresses", "normalize_address", "occurrence_table", "parse_address", "rebuild_corpus"]
