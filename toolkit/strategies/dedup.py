"""PII-aware deduplication (methods.md §6, paper 002 §4.1.2): header lines that repeat an address are removed, bodies
stay.

The corpus is read in order, document by document and line by line. A **header line** is a line that starts (after
optional spaces, tabs or ``>`` quoting) with an address-bearing header field — :data:`HEADER_FIELDS`: ``From``,
``To``, ``Cc``, ``Bcc``, ``Reply-To``, ``Sender`` and the Enron ``X-From``/``X-To``/``X-cc``/``X-bcc`` … —
followed by ``:``, together with its folded continuation lines (RFC 5322: following lines that start with a space
or tab). Header lines inside quoted replies and forwards (``-----Original Message-----`` blocks) count too: they
are where addresses repeat most. **(choices)**

A header line is removed (with its line end) when it holds an address **already seen earlier in the corpus** —
anywhere earlier, in a header or a body, in the original text order; the addresses of a line count as seen from
that line on, whether the line is kept or removed (methods.md: "already seen earlier in the corpus"). So the first
header occurrence of an address survives unless its line also repeats another address. Body lines (greetings,
sentences, signatures, "please contact …" mentions) are never removed. Gold spans move with the edits; spans
inside removed lines are dropped (counted in the summary).

**Granularity.** ``granularity="line"`` (the default, the paper's technique) removes the whole line as above. On
real multi-recipient mail that removes far more than the repeats: one already-seen recipient on a 60-address ``To:``
line takes the 59 others with it, first occurrences included, and most distinct addresses of a mailbox vanish from
the corpus. ``granularity="address"`` removes only the repeats: the header value is split into its mailboxes at the
commas and semicolons outside quotes and angle brackets (``"Doe, Jane" <jane@x.com>`` is one mailbox), and a mailbox
all of whose addresses were seen before it (earlier in the corpus, or earlier on the same line) is removed with its
display name and one list separator; the line, its other mailboxes and every first occurrence stay. A line left
without any mailbox is removed whole, as in line mode. **(choice)**

Cost: one pass over the lines with a set of seen addresses — linear in the corpus.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pandas as pd

from toolkit.corpus import Corpus
from toolkit.errors import ToolkitError
from toolkit.identifiers.addresses import EMAIL_RE, address_summary, edit_document, occurrence_table, rebuild_corpus
from toolkit.strategies.rmft import pseudonymise_persons
from toolkit.progress import progress_bar

#: Header fields that carry addresses (compared case-insensitively).
HEADER_FIELDS: tuple[str, ...] = ("From", "To", "Cc", "Bcc", "Reply-To", "Sender", "Return-Path", "Delivered-To",
                                  "Resent-From", "Resent-To", "Resent-Cc", "Resent-Bcc", "X-From", "X-To", "X-cc",
                                  "X-bcc")
HEADER_RE = re.compile(r"[ \t>]*(?:" + "|".join(re.escape(f) for f in HEADER_FIELDS) + r")[ \t]*:", re.IGNORECASE)

REMOVED_COLUMNS = ["doc_id", "doc_index", "start", "end", "field", "n_addresses", "n_repeated", "unit"]
#: Values of :func:`dedup`'s ``granularity`` (CLI ``--granularity``).
GRANULARITIES = ("line", "address")


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
        One row per removed range (:data:`REMOVED_COLUMNS`: ``doc_id``, ``doc_index``, ``start``/``end`` in the
        original text, ``field`` (the header name), ``n_addresses`` in the range, ``n_repeated`` already seen,
        ``unit``: ``"line"`` for a whole header line, ``"address"`` for mailboxes cut from a line). No text and no
        addresses.
    summary:
        Counts only: occurrences, distinct addresses and maximum repetition before and after, lines removed,
        mailboxes removed from kept lines (address mode), distinct addresses that vanished from the corpus.
    """

    corpus: Corpus
    removed: pd.DataFrame
    summary: dict = field(default_factory=dict)


def _mailboxes(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """``(start, end)`` of each mailbox of the header value ``text[start:end]``, whitespace trimmed: the pieces
    between commas and semicolons outside double quotes and angle brackets; empty pieces are left out."""
    cuts, quoted, angle, i = [], False, 0, start
    while i < end:
        ch = text[i]
        if quoted:
            if ch == "\\":
                i += 1
            elif ch == '"':
                quoted = False
        elif ch == '"':
            quoted = True
        elif ch == "<":
            angle += 1
        elif ch == ">":
            angle = max(angle - 1, 0)
        elif ch in ",;" and angle == 0:
            cuts.append(i)
        i += 1
    items = []
    for a, b in zip([start] + [c + 1 for c in cuts], cuts + [end]):
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        if b > a:
            items.append((a, b))
    return items


def _address_edits(text: str, s: int, e: int, seen: set[str]) -> tuple[list[tuple[int, int, str]], int, bool]:
    """Deletions of the mailboxes of header line ``text[s:e]`` whose addresses were all seen (module docstring).

    Returns ``(edits, number of mailboxes removed, whether the whole line goes)``; ``seen`` is updated with every
    address of the line. A run of removed mailboxes is deleted with the separator after it (or, when it ends the
    line, with the separator before it), so the kept mailboxes stay a well-formed list and the line end stays.
    """
    items = _mailboxes(text, HEADER_RE.match(text, s, e).end(), e)
    removed = []
    for a, b in items:
        found = [m.group().lower() for m in EMAIL_RE.finditer(text, a, b)]
        removed.append(bool(found) and all(x in seen for x in found))
        seen.update(found)
    if not any(removed):
        return [], 0, False
    if all(removed):
        return [(s, e, "")], len(items), True
    edits, i = [], 0
    while i < len(items):
        if not removed[i]:
            i += 1
            continue
        j = i
        while j + 1 < len(items) and removed[j + 1]:
            j += 1
        if j + 1 < len(items):  # a kept mailbox follows: delete up to its start
            edits.append((items[i][0], items[j + 1][0], ""))
        else:  # the run ends the line: delete from the end of the kept mailbox before it
            edits.append((items[i - 1][1], items[j][1], ""))
        i = j + 1
    return edits, sum(removed), False


def dedup(corpus: Corpus, *, granularity: str = "line", person_key: bytes | None = None,
          progress: bool = False) -> DedupResult:
    """PII-aware deduplication of ``corpus`` (module docstring; methods.md §6).

    ``granularity="line"`` (default, the paper's) removes every header line holding an already-seen address;
    ``"address"`` removes only the already-seen mailboxes from such a line (CLI ``--granularity``). With
    ``person_key`` the documents' ``person_id`` are replaced by keyed pseudonyms
    (:func:`~toolkit.strategies.rmft.pseudonymise_persons`, CLI ``--pseudonymise-person``).
    """
    if granularity not in GRANULARITIES:
        raise ToolkitError(f"dedup granularity must be one of {', '.join(GRANULARITIES)} (--granularity), "
                           f"got {granularity!r}")
    seen: set[str] = set()
    docs, rows, dropped, changed, n_lines, n_boxes = [], [], 0, 0, 0, 0
    for i, doc in enumerate(progress_bar(corpus, desc="PII-aware dedup", unit="doc", enabled=progress)):
        text = doc.text
        edits = []
        for s, e, is_header in _logical_lines(text):
            found = [m.group().lower() for m in EMAIL_RE.finditer(text, s, e)]
            if not found:
                continue
            name = HEADER_RE.match(text, s, e).group().strip(" \t>:").strip() if is_header else ""
            if is_header and granularity == "address":
                line_edits, n_box, whole = _address_edits(text, s, e, seen)
                edits += line_edits
                n_lines += whole
                n_boxes += 0 if whole else n_box
                for a, b, _ in line_edits:  # every address of a removed range is a repeat
                    n = len(EMAIL_RE.findall(text, a, b))
                    rows.append((doc.doc_id, i, a, b, name, n, n, "line" if whole else "address"))
                continue
            if is_header:
                repeated = sum(a in seen for a in found)
                if repeated:
                    edits.append((s, e, ""))
                    rows.append((doc.doc_id, i, s, e, name, len(found), repeated, "line"))
                    n_lines += 1
            seen.update(found)
        if edits:
            res = edit_document(doc, edits)
            dropped += res.n_spans_dropped
            docs.append(res.document)
            changed += 1
        else:
            docs.append(doc)
    out = rebuild_corpus(corpus, docs)
    if person_key is not None:
        out = pseudonymise_persons(out, person_key)
    before = occurrence_table(corpus)
    after = occurrence_table(out)
    original = set(before["address"])
    summary = {
        "technique": "dedup", "granularity": granularity, "n_documents": len(corpus), "n_documents_changed": changed,
        "n_lines_removed": n_lines, "n_mailboxes_removed": n_boxes, "n_spans_dropped": int(dropped),
        "n_characters_before": int(sum(len(d.text) for d in corpus)),
        "n_characters_after": int(sum(len(d.text) for d in out)),
        "n_addresses_vanished": len(original - set(after["address"])),
        "person_pseudonymised": person_key is not None,
        "before": address_summary(before, original), "after": address_summary(after, original),
    }
    return DedupResult(out, pd.DataFrame(rows, columns=REMOVED_COLUMNS), summary)


__all__ = ["GRANULARITIES", "HEADER_FIELDS", "HEADER_RE", "REMOVED_COLUMNS", "DedupResult", "dedup"]
