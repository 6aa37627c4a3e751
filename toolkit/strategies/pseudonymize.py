"""Rewriting the PII spans of a text or a corpus (:func:`rewrite_corpus`), and carrying word positions over to the
rewritten text.

Used by every strategy whose text variant is not the original (methods.md §3): ``mlm_pseudo`` / ``clm_pseudo`` (paper
000 "MLMA": every span becomes the single word ``X``), the ``*_category`` strategies (``[NAME]``, ``[DATE]`` …) and the
``*_surrogate`` strategies (made-up values of the same category, :mod:`toolkit.strategies.surrogates`).

**Regions.** A span becomes the run of whole words it overlaps, from the start of its first word to the end of its
last (:func:`word_regions`; methods.md §2: a word half inside a PII span is still PII, so no remainder of it may stay in
the text, while punctuation at a span's edge is not identifying and stays); regions that overlap are merged, and a
span that overlaps no word (punctuation or spaces only: nothing to hide) is dropped. A region therefore starts and
ends on a word boundary and the characters beside it are not word characters, so the words outside the regions are
exactly the same words before and after rewriting (only shifted).

**Positions.** The identifier positions (``positions.parquet``: one row per protected word, offsets into the
original text) are carried over by :func:`remap_positions`: a word outside every region moves by the length change
of the regions before it; the words of a region are replaced by the words of its replacement, which are direct
identifier positions (they stand for one, so ``protect=("direct",)`` keeps them out of the targets) and never
indirect ones (a replacement carries nothing of the original: an ``X``, a category, a surrogate drawn at random).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from toolkit.identifiers.categories import pii_category
from toolkit.identifiers.words import iter_words, normalize_term
from toolkit.strategies.surrogates import SurrogateMaker, placeholder


def rewrite(text: str, regions: Sequence[tuple[int, int, str]]) -> tuple[str, np.ndarray]:
    """Replace each ``(start, end, replacement)`` region (sorted or not, non-overlapping) of ``text``.

    Returns the new text and ``origin``: ``origin[i]`` is the offset in ``text`` of character ``i`` of the new text
    (characters of a replacement point at the start of the region they replace).
    """
    parts, origin, pos = [], [], 0
    for start, end, replacement in sorted(regions, key=lambda r: (r[0], r[1])):
        if start < pos:
            raise ValueError(f"overlapping spans at {start}")
        parts.append(text[pos:start])
        origin.append(np.arange(pos, start))
        parts.append(replacement)
        origin.append(np.full(len(replacement), start))
        pos = end
    parts.append(text[pos:])
    origin.append(np.arange(pos, len(text)))
    return "".join(parts), np.concatenate(origin).astype(np.int64) if origin else np.zeros(0, dtype=np.int64)


def pseudonymize(text: str, spans: Sequence[tuple[int, int]], replacement: str = "X") -> tuple[str, np.ndarray]:
    """Replace each ``(start, end)`` span (non-overlapping) by ``replacement``; see :func:`rewrite`."""
    return rewrite(text, [(s, e, replacement) for s, e in spans])


def word_regions(text: str, spans: Sequence[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """``(start, end, i)`` per region: each span as the run of whole words it overlaps, merged where they overlap,
    spans overlapping no word dropped (``i``: index in ``spans`` of the region's first span, whose label the region
    keeps), sorted by start."""
    if not len(spans):
        return []
    words = np.asarray(iter_words(text), dtype=np.int64).reshape(-1, 2)
    ws, we = words[:, 0], words[:, 1]
    out: list[list[int]] = []
    for i in sorted(range(len(spans)), key=lambda j: (spans[j][0], spans[j][1])):
        s, e = int(spans[i][0]), int(spans[i][1])
        if e <= s:
            continue
        first = int(np.searchsorted(we, s, side="right"))  # first word ending after s
        last = int(np.searchsorted(ws, e, side="left")) - 1  # last word starting before e
        if first > last:
            continue
        s, e = int(ws[first]), int(we[last])
        if out and s < out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e, i])
    return [(s, e, i) for s, e, i in out]


def remap_positions(positions: pd.DataFrame, regions: Sequence[tuple[int, int]],
                    replacements: Sequence[str], categories: Sequence[str]) -> pd.DataFrame:
    """The positions of one document (``start, end, direct, indirect[, category]``) on its rewritten text.

    ``regions`` (sorted, non-overlapping, as :func:`word_regions` gives them) were replaced by ``replacements``
    (:func:`rewrite`). Rows outside the regions keep their flags and move; each region contributes one row per word
    of its replacement, ``direct`` True, ``indirect`` False, ``category`` the region's (``categories``). Returns
    ``start, end, direct, indirect, category`` sorted by start.
    """
    category = positions["category"].astype(object).to_numpy() if "category" in positions else \
        np.full(len(positions), "", dtype=object)
    return pd.DataFrame(remap_arrays(positions["start"].to_numpy(dtype=np.int64),
                                     positions["end"].to_numpy(dtype=np.int64),
                                     positions["direct"].to_numpy(dtype=bool),
                                     positions["indirect"].to_numpy(dtype=bool),
                                     category, regions, replacements, categories))


def remap_arrays(start: np.ndarray, end: np.ndarray, direct: np.ndarray, indirect: np.ndarray, category: np.ndarray,
                 regions: Sequence[tuple[int, int]], replacements: Sequence[str],
                 categories: Sequence[str]) -> dict[str, np.ndarray]:
    """:func:`remap_positions` on the columns of one document (arrays), returned as columns sorted by start."""
    rs = np.asarray([r[0] for r in regions], dtype=np.int64)
    re_ = np.asarray([r[1] for r in regions], dtype=np.int64)
    growth = np.asarray([len(t) for t in replacements], dtype=np.int64) - (re_ - rs)
    shift = np.concatenate([[0], np.cumsum(growth)])  # shift[k]: length change of the first k regions
    idx = np.searchsorted(rs, end, side="left") - 1  # last region starting before the word ends
    inside = idx >= 0
    inside[inside] &= re_[idx[inside]] > start[inside]
    keep = ~inside
    moved = shift[np.searchsorted(re_, start[keep], side="right")]  # regions ending at or before the word
    out = {"start": [start[keep] + moved], "end": [end[keep] + moved], "direct": [direct[keep]],
           "indirect": [indirect[keep]], "category": [category[keep]]}
    for k, (text, cat) in enumerate(zip(replacements, categories)):
        spans = np.asarray(iter_words(text), dtype=np.int64).reshape(-1, 2) + rs[k] + shift[k]
        n = len(spans)
        out["start"].append(spans[:, 0])
        out["end"].append(spans[:, 1])
        out["direct"].append(np.ones(n, dtype=bool))
        out["indirect"].append(np.zeros(n, dtype=bool))
        out["category"].append(np.full(n, cat, dtype=object))
    cols = {k: np.concatenate(v) for k, v in out.items()}
    order = np.argsort(cols["start"], kind="stable")
    return {k: v[order] for k, v in cols.items()}


def plan_replacements(corpus, variant: str, spans: pd.DataFrame, *, surrogate_key: bytes | None = None,
                      avoid: Iterable[str] = (), tokenizer=None) -> list[list[tuple[int, int, str, str]]]:
    """Per document of ``corpus`` (in order), ``(start, end, category, replacement)`` of each region of its spans
    (``doc_id, start, end`` and ``category`` or ``label``), regions as :func:`word_regions` makes them.

    ``variant``: ``pseudo`` (``X``), ``category`` (``[NAME]`` …) or ``surrogate`` (a made-up value of the category,
    consistent per individual, drawn under ``surrogate_key``; None: a fresh random key, so surrogates differ from
    call to call; :mod:`toolkit.strategies.surrogates`) whose words avoid the normalised words ``avoid`` and, with
    ``tokenizer``, are as many tokens long as the original's (names, hospital names).
    """
    if variant not in ("pseudo", "category", "surrogate"):
        raise ValueError(f"unknown text variant {variant!r}")
    spans = spans.assign(category=spans["category"].astype(str) if "category" in spans.columns
                         else spans["label"].astype(str).map(pii_category))
    by_doc = {k: list(zip(g["start"].astype(int), g["end"].astype(int), g["category"]))
              for k, g in spans.groupby("doc_id", sort=False)}
    regions = {d.doc_id: [(s, e, by_doc[d.doc_id][i][2]) for s, e, i in
                          word_regions(d.text, [(s, e) for s, e, _ in by_doc.get(d.doc_id, [])])] for d in corpus}
    if variant == "surrogate":
        maker = SurrogateMaker(surrogate_key if surrogate_key is not None else os.urandom(32),
                               ((d.person_id, c, d.text[s:e]) for d in corpus for s, e, c in regions[d.doc_id]),
                               outside_words(corpus, regions), avoid, tokenizer=tokenizer)
        return [[(s, e, c, maker.surrogate(d.person_id, c, d.text[s:e])) for s, e, c in regions[d.doc_id]]
                for d in corpus]
    return [[(s, e, c, "X" if variant == "pseudo" else placeholder(c)) for s, e, c in regions[d.doc_id]]
            for d in corpus]


def rewrite_corpus(corpus, variant: str, spans: pd.DataFrame, positions: pd.DataFrame | None = None, *,
                   surrogate_key: bytes | None = None, tokenizer=None) -> tuple[list[str], pd.DataFrame | None]:
    """The texts of ``corpus`` with the regions of ``spans`` replaced as :func:`plan_replacements` says, and
    ``positions`` (when given) carried over to them (:func:`remap_positions`).

    Surrogates avoid the indirect identifiers of ``positions`` (their ``term``). Returns the new texts (corpus
    order) and the positions on them (``doc_id, start, end, direct, indirect, category``; None without
    ``positions``).
    """
    avoid = set()
    if positions is not None and "term" in positions:
        avoid = {normalize_term(str(w)) for w in positions.loc[positions["indirect"].astype(bool), "term"].unique()}
    plan = plan_replacements(corpus, variant, spans, surrogate_key=surrogate_key, avoid=avoid, tokenizer=tokenizer)
    if positions is not None:  # the columns of the positions, grouped by document in corpus order
        index = positions["doc_id"].astype(str).map({d.doc_id: i for i, d in enumerate(corpus)})
        index = index.fillna(len(corpus)).to_numpy(dtype=np.int64)
        order = np.argsort(index, kind="stable")
        cols = (positions["start"].to_numpy(dtype=np.int64)[order], positions["end"].to_numpy(dtype=np.int64)[order],
                positions["direct"].to_numpy(dtype=bool)[order], positions["indirect"].to_numpy(dtype=bool)[order],
                (positions["category"].astype(object).to_numpy() if "category" in positions
                 else np.full(len(positions), "", dtype=object))[order])
        bounds = np.searchsorted(index[order], np.arange(len(corpus) + 1), side="left")
    texts, parts = [], []
    for j, (d, regions) in enumerate(zip(corpus, plan)):
        texts.append(rewrite(d.text, [(s, e, r) for s, e, _, r in regions])[0])
        if positions is not None:
            a, b = bounds[j], bounds[j + 1]
            moved = remap_arrays(*(c[a:b] for c in cols), [(s, e) for s, e, _, _ in regions],
                                 [r for *_, r in regions], [c for _, _, c, _ in regions])
            parts.append({"doc_id": np.full(len(moved["start"]), d.doc_id, dtype=object), **moved})
    if positions is None:
        return texts, None
    return texts, pd.DataFrame({k: np.concatenate([p[k] for p in parts]) for k in parts[0]})


def outside_words(corpus, regions: dict[str, list[tuple[int, int, str]]]) -> set[str]:
    """Normalised words of ``corpus`` outside the given regions (``doc_id -> [(start, end, _), ...]``, sorted)."""
    out: set[str] = set()
    for d in corpus:
        cuts = regions.get(d.doc_id, [])
        starts = np.asarray([s for s, _, _ in cuts], dtype=np.int64)
        ends = np.asarray([e for _, e, _ in cuts], dtype=np.int64)
        words = np.asarray(iter_words(d.text), dtype=np.int64).reshape(-1, 2)
        k = np.searchsorted(starts, words[:, 1], side="left") - 1  # last region starting before the word ends
        hit = k >= 0
        hit[hit] = ends[k[hit]] > words[hit, 0]
        out.update(normalize_term(d.text[s:e]) for s, e in words[~hit].tolist())
    return out


__all__ = ["outside_words", "plan_replacements", "pseudonymize", "remap_arrays", "remap_positions", "rewrite",
           "rewrite_corpus", "word_regions"]
