"""HTML views of RMFT and dedup on one message, for notebooks (methods.md §6).

Shows text, so use it on synthetic or already-approved data only (the notebooks' ``show_examples`` switch).
"""

from __future__ import annotations

import html

from toolkit.corpus import Corpus
from toolkit.identifiers.addresses import EMAIL_RE
from toolkit.strategies.dedup import DedupResult
from toolkit.strategies.rmft import RMFTResult

KEPT, REPLACED, REMOVED = "#b7e4c7", "#ffd6a5", "#f4a6a6"


def _marked(text: str, spans: list[tuple[int, int, str, str]]) -> str:
    """``text`` with ``(start, end, colour, title)`` spans marked (non-overlapping, any order)."""
    out, pos = [], 0
    for s, e, colour, title in sorted(spans):
        if s < pos:
            continue
        out.append(html.escape(text[pos:s]))
        style = f"background:{colour}" + (";text-decoration:line-through" if colour == REMOVED else "")
        out.append(f'<mark style="{style}" title="{html.escape(title)}">{html.escape(text[s:e])}</mark>')
        pos = e
    out.append(html.escape(text[pos:]))
    return "".join(out)


def pick_example(corpus: Corpus, rmft_result: RMFTResult, dedup_result: DedupResult, max_chars: int = 1400) -> int:
    """Index of the shortest message (up to ``max_chars``) that both techniques change, else the first changed."""
    replaced = set(rmft_result.replacements["doc_index"])
    removed = set(dedup_result.removed["doc_index"])
    both = [i for i in sorted(replaced & removed) if len(corpus[i].text) <= max_chars]
    pool = both or sorted(replaced | removed) or [0]
    return min(pool, key=lambda i: (-len(EMAIL_RE.findall(corpus[i].text)) if both else 0, len(corpus[i].text)))


def before_after_html(corpus: Corpus, rmft_result: RMFTResult, dedup_result: DedupResult,
                      doc_index: int | None = None) -> str:
    """Three panels — original (dedup's removed header lines struck through), after RMFT (kept first occurrences
    green, look-alikes orange) and after dedup — of one message (default: :func:`pick_example`)."""
    i = pick_example(corpus, rmft_result, dedup_result) if doc_index is None else int(doc_index)
    doc = corpus[i]
    rem = dedup_result.removed[dedup_result.removed["doc_index"] == i]
    orig_spans = [(int(r.start), int(r.end), REMOVED, "header line removed by dedup") for r in rem.itertuples()]
    covered = [(s, e) for s, e, _, _ in orig_spans]
    for m in EMAIL_RE.finditer(doc.text):
        if not any(s <= m.start() < e for s, e in covered):
            orig_spans.append((m.start(), m.end(), KEPT, "address"))
    rep = rmft_result.replacements[rmft_result.replacements["doc_index"] == i]
    new_text = rmft_result.corpus[i].text
    rmft_spans = [(int(r.new_start), int(r.new_end), REPLACED, f"look-alike (anchor: {r.anchor})")
                  for r in rep.itertuples()]
    starts = {s for s, _, _, _ in rmft_spans}
    rmft_spans += [(m.start(), m.end(), KEPT, "first occurrence, kept") for m in EMAIL_RE.finditer(new_text)
                   if m.start() not in starts]
    dd_text = dedup_result.corpus[i].text
    dd_spans = [(m.start(), m.end(), KEPT, "address") for m in EMAIL_RE.finditer(dd_text)]
    panel = ('<div style="flex:1;min-width:18em"><b>{}</b><div style="white-space:pre-wrap;font-family:monospace;'
             'font-size:80%;border:1px solid #ddd;padding:.4em">{}</div></div>')
    legend = (f'<div style="font-size:80%">message {html.escape(doc.doc_id)} · '
              f'<mark style="background:{KEPT}">address kept</mark> '
              f'<mark style="background:{REPLACED}">look-alike</mark> '
              f'<mark style="background:{REMOVED};text-decoration:line-through">header line removed</mark></div>')
    return ('<div style="display:flex;gap:1em;flex-wrap:wrap">'
            + panel.format("original", _marked(doc.text, orig_spans))
            + panel.format(f"RMFT ({len(rep)} replaced)", _marked(new_text, rmft_spans))
            + panel.format(f"dedup ({len(rem)} lines removed)", _marked(dd_text, dd_spans))
            + "</div>" + legend)


__all__ = ["before_after_html", "pick_example"]
