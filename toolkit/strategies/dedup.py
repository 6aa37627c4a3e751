"""PII-aware deduplication (SPEC.md §6, paper 002 §4.1.2): header lines that repeat an address are removed, bodies
stay.

The corpus is read in order, document by document and line by line. A **header line** is a line that starts (after
optional spaces, tabs or ``>`` quoting) with an address-bearing header field — :data:`HEADER_FIELDS`: ``From``,
``To``, ``Cc``, ``Bcc``, ``Reply-To``, ``Sender`` and the Enron ``X-From``/``X-To``/``X-cc``/``X-bcc`` … —
followed by ``:``, together with its folded continuation lines (RFC 5322: following lines that start with a space
or tab). Header lines inside quoted replies and forwards (``-----Original Message-----`` blocks) count too: they
are where addresses repeat most. **(choices)**

A header line is removed (with its line end) when it holds an address **already seen earlier in the corpus** —
anywhere earlier, in a header or a body, in the original text order; the addresses of a line count as seen from
that line on, whether the line is kept or removed (SPEC: "already seen earlier in the corpus"). So the first
header occurrence of an address survives unless its line also repeats another address. Body lines (greetings,
sentences, signatures, "please contact …" mentions) are never removed. Gold spans move with the edits; spans
inside removed lines are dropped (counted in the summary).

Cost: one pass over the lines with a set of seen addresses — linear in the corpus.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pandas as pd
from tqdm.auto import tqdm

from toolkit.corpus import Corpus
from toolkit.identifiers.addresses import EMAIL_RE, address_summary, edit_document, occurrence_table, rebuild_corpus

#: Header fields that carry addresses (compared case-insensitively).
HEADER_FIELDS: tuple[str, ...] = ("From", "To", "Cc", "Bcc", "Reply-To", "Sender", "Return-Path", "Delivered-To",
                                  "Resent-From", "Resent-To", "Resent-Cc", "Resent-Bcc", "X-From", "X-To", "X-cc",
                                  "X-bcc")
HEADER_RE = re.compile(r"[ \t>]*(?:" + "|".join(re.escape(f) for f in HEADER_FIELDS) + r")[ \t]*:", re.IGNORECASE)

REMOVED_COLUMNS = ["doc_id", "doc_index", "start", "end", "field", "n_addresses", "n_repeated"]


def _logical_lines(text: str):
    """``(start, end, is_header)`` of every line (end includes the line break); a header line absorbs its folded
    continuation lines."""
    out = []
    pos, n = 0, len(text)
    while pos < n:
        nl = text.find("\n", pos)
        end = n if nl < 0 else nl + 1
        out.append([pos, end, HEADER_RE.match(text, pos, end) is not None])
        pos = end
    merged = []
    for s, e, h in out:
        if (merged and merged[-1][2] and not h and e - s > 1 and text[s] in " \t"
                and text[s:e].strip()):  # folded continuation of a header line
            merged[-1][1] = e
        else:
            merged.append([s, e, h])
    return merged


@dataclass
class DedupResult:
    """Output of :func:`dedup`.

    Attributes
    ----------
    corpus:
        The deduplicated corpus (same documents and ids; removed header lines gone, spans moved).
    removed:
        One row per removed header line (:data:`REMOVED_COLUMNS`: ``doc_id``, ``doc_index``, ``start``/``end`` in
        the original text, ``field`` (the header name), ``n_addresses`` on the line, ``n_repeated`` already seen).
        No text and no addresses.
    summary:
        Counts only: occurrences, distinct addresses and maximum repetition before and after, lines removed.
    """

    corpus: Corpus
    removed: pd.DataFrame
    summary: dict = field(default_factory=dict)


def dedup(corpus: Corpus, *, progress: bool = False) -> DedupResult:
    """PII-aware deduplication of ``corpus`` (module docstring; SPEC §6)."""
    seen: set[str] = set()
    docs, rows, dropped, changed = [], [], 0, 0
    for i, doc in enumerate(tqdm(corpus, desc="PII-aware dedup", unit="doc", disable=not progress,
                                 mininterval=1.0)):
        text = doc.text
        edits = []
        for s, e, is_header in _logical_lines(text):
            found = [m.group().lower() for m in EMAIL_RE.finditer(text, s, e)]
            if not found:
                continue
            if is_header:
                repeated = sum(a in seen for a in found)
                if repeated:
                    edits.append((s, e, ""))
                    name = HEADER_RE.match(text, s, e).group().strip(" \t>:").strip()
                    rows.append((doc.doc_id, i, s, e, name, len(found), repeated))
            seen.update(found)
        if edits:
            res = edit_document(doc, edits)
            dropped += res.n_spans_dropped
            docs.append(res.document)
            changed += 1
        else:
            docs.append(doc)
    out = rebuild_corpus(corpus, docs)
    before = occurrence_table(corpus)
    original = set(before["address"])
    summary = {
        "technique": "dedup", "n_documents": len(corpus), "n_documents_changed": changed,
        "n_lines_removed": len(rows), "n_spans_dropped": int(dropped),
        "n_characters_before": int(sum(len(d.text) for d in corpus)),
        "n_characters_after": int(sum(len(d.text) for d in out)),
        "before": address_summary(before, original), "after": address_summary(occurrence_table(out), original),
    }
    return DedupResult(out, pd.DataFrame(rows, columns=REMOVED_COLUMNS), summary)


__all__ = ["HEADER_FIELDS", "HEADER_RE", "REMOVED_COLUMNS", "DedupResult", "dedup"]
