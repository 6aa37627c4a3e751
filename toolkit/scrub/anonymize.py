"""Step 1 of the two-step method (methods.md §7.1, paper 003 §4.2): anonymise the training text with NER.

Every entity that spaCy labels ``PERSON`` becomes the word ``PERSON``, every ``GPE``/``LOC`` the word ``GPE`` (the
*tag*; the label → tag mapping and the spaCy pipeline are configurable, e.g. ``nl_core_news_lg`` with
``PER=PERSON``). An **offset map** records each replacement — ``(doc_id, start, end)`` in the anonymised text and
``(orig_start, orig_end)`` in the original — so that the original sentence behind any anonymised one can be recovered
for the anonymity test (methods.md §7.6: "whether a predicted name equals the original name of that sentence").

Gold spans (when the corpus has them) are carried over to the anonymised text: the parts of a gold span that NER did
not replace are kept, shifted (so ``summary["gold_missed"]`` counts, per gold label, the names NER left in the text —
the names that can end up in the vocabulary of a model trained on it, paper 003 §4.3); the replaced parts go.

Files written by :meth:`Anonymized.save` for ``--out anon.jsonl``: ``anon.jsonl`` (native corpus format),
``anon.offsets.parquet`` (the offset map) and ``anon.summary.json`` (counts only).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from toolkit.corpus import Corpus, Document, Span
from toolkit.errors import ToolkitError
from toolkit.identifiers.detectors import DEFAULT_SPACY_MODEL, SpacyDetector
from toolkit.io import atomic_write_json, atomic_write_parquet

#: methods.md §7.1: PERSON → ``PERSON``, GPE and LOC → ``GPE``.
DEFAULT_TAGS: dict[str, str] = {"PERSON": "PERSON", "GPE": "GPE", "LOC": "GPE"}
OFFSET_COLUMNS = ["doc_id", "start", "end", "orig_start", "orig_end", "label", "tag"]
_TAG_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


def parse_labels(spec: str | Sequence[str] | Mapping[str, str] | None) -> dict[str, str]:
    """NER label → tag mapping from ``"PERSON,GPE,LOC=GPE"`` (a bare label is its own tag), a list or a mapping.

    ``None`` gives :data:`DEFAULT_TAGS`. Tags must be single words (letters, digits, ``_``) so that a tokenizer sees
    them as one word.
    """
    if spec is None:
        return dict(DEFAULT_TAGS)
    if isinstance(spec, Mapping):
        items = [(str(k), str(v)) for k, v in spec.items()]
    else:
        parts = [p.strip() for p in (spec.split(",") if isinstance(spec, str) else spec) if str(p).strip()]
        items = []
        for p in parts:
            label, _, tag = str(p).partition("=")
            items.append((label.strip(), (tag or label).strip()))
    if not items:
        raise ToolkitError(f"no NER labels given in {spec!r}; e.g. PERSON,GPE or PERSON,GPE,LOC=GPE")
    for label, tag in items:
        if not label or not _TAG_RE.match(tag):
            raise ToolkitError(f"bad label mapping {label}={tag!r}: the tag must be one word of letters, digits or _")
    return dict(items)


@dataclass
class AnonymizeConfig:
    """NER anonymisation settings (methods.md §7.1)."""

    labels: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_TAGS))
    spacy_model: str = DEFAULT_SPACY_MODEL
    batch_size: int = 64
    n_process: int = 1

    def __post_init__(self) -> None:
        self.labels = parse_labels(self.labels)


def replace_spans(text: str, spans: Sequence[tuple[int, int, str]]) -> tuple[str, list[tuple[int, int, int, int]]]:
    """Replace each ``(start, end, tag)`` span (sorted, non-overlapping) of ``text`` by its tag.

    Returns the new text and one ``(start, end, orig_start, orig_end)`` row per replacement, ``start, end`` being
    where the tag sits in the new text.
    """
    out, rows, pos, shift = [], [], 0, 0
    for start, end, tag in spans:
        if start < pos or end <= start or end > len(text):
            raise ToolkitError(f"spans must be sorted, non-overlapping and inside the text; got [{start}, {end})")
        out.append(text[pos:start])
        new_start = start + shift
        out.append(tag)
        rows.append((new_start, new_start + len(tag), start, end))
        shift += len(tag) - (end - start)
        pos = end
    out.append(text[pos:])
    return "".join(out), rows


def _carry_gold(text: str, spans: Sequence[Span],
                replaced: Sequence[tuple[int, int, int, int]]) -> tuple[list[Span], list[str]]:
    """Gold spans moved to the anonymised text: their parts outside the replacements (trimmed to start and end on a
    letter or digit), shifted; and the gold labels of the spans left whole or in part (missed by NER)."""
    kept: list[Span] = []
    missed: list[str] = []
    if not spans:
        return kept, missed
    orig_starts = np.array([r[2] for r in replaced], dtype=np.int64)
    deltas = np.cumsum([0] + [(r[1] - r[0]) - (r[3] - r[2]) for r in replaced])

    def shift(pos: int) -> int:  # pos in the original text, outside every replaced span
        return pos + int(deltas[np.searchsorted(orig_starts, pos, side="right")])

    for sp in spans:
        pieces, cur = [], sp.start
        for _, _, os_, oe in replaced:
            if oe <= cur or os_ >= sp.end:
                continue
            if os_ > cur:
                pieces.append((cur, os_))
            cur = max(cur, oe)
        if cur < sp.end:
            pieces.append((cur, sp.end))
        any_kept = False
        for a, b in pieces:
            while a < b and not text[a].isalnum():
                a += 1
            while b > a and not text[b - 1].isalnum():
                b -= 1
            if b > a:
                kept.append(Span(shift(a), shift(b), sp.label))
                any_kept = True
        if any_kept:
            missed.append(sp.label)
    return kept, missed


def _anonymize_doc(doc: Document, ents: Sequence[Span], labels: Mapping[str, str]):
    chosen = [s for s in ents if s.label in labels]
    text, rows = replace_spans(doc.text, [(s.start, s.end, labels[s.label]) for s in chosen])
    gold, missed = _carry_gold(doc.text, doc.spans, rows)
    new = Document(doc.doc_id, doc.person_id, text, tuple(gold), doc.split, dict(doc.labels))
    offsets = [(doc.doc_id, s, e, os_, oe, ent.label, labels[ent.label]) for (s, e, os_, oe), ent in zip(rows, chosen)]
    return new, offsets, missed


@dataclass
class Anonymized:
    """An NER-anonymised corpus with its offset map and summary counts."""

    corpus: Corpus
    offsets: pd.DataFrame  # OFFSET_COLUMNS, sorted by doc order then start
    summary: dict[str, Any]

    def save(self, path: str | Path) -> Path:
        """Write ``path`` (JSONL corpus), ``<stem>.offsets.parquet`` and ``<stem>.summary.json`` atomically."""
        from toolkit.corpus import write_jsonl

        p = Path(path)
        write_jsonl(self.corpus, p)
        atomic_write_parquet(self.offsets, offsets_path(p))
        atomic_write_json(self.summary, summary_path(p))
        return p

    def to_original(self, doc_id: str, start: int, end: int) -> tuple[int, int]:
        """Original ``(start, end)`` of the anonymised span ``[start, end)`` of ``doc_id``.

        A boundary inside a tag maps to the edge of the entity it replaced (start → its start, end → its end).
        """
        rows = self.offsets[self.offsets["doc_id"] == doc_id]
        return _map_back(rows, start, left=True), _map_back(rows, end, left=False)

    def original_sentence(self, original: Corpus, doc_id: str, start: int, end: int) -> str:
        """The original text behind ``[start, end)`` of an anonymised document (``original``: the corpus before)."""
        a, b = self.to_original(doc_id, start, end)
        return original.get(doc_id).text[a:b]


def _map_back(rows: pd.DataFrame, pos: int, *, left: bool) -> int:
    starts, ends = rows["start"].to_numpy(), rows["end"].to_numpy()
    i = int(np.searchsorted(starts, pos, side="right")) - 1  # last replacement starting at or before pos
    if i < 0:
        return pos
    if pos >= ends[i]:
        return int(rows["orig_end"].iloc[i]) + (pos - int(ends[i]))
    if pos == starts[i] or left:
        return int(rows["orig_start"].iloc[i])
    return int(rows["orig_end"].iloc[i])  # inside a tag, as an end boundary


def offsets_path(path: str | Path) -> Path:
    p = Path(path)
    return p.with_name(f"{p.stem}.offsets.parquet")


def summary_path(path: str | Path) -> Path:
    p = Path(path)
    return p.with_name(f"{p.stem}.summary.json")


def anonymize_corpus(corpus: Corpus, config: AnonymizeConfig | None = None, *, entities=None,
                     progress: bool = True) -> Anonymized:
    """Replace NER entities of ``config.labels`` by their tags (methods.md §7.1), keeping an offset map.

    ``entities`` (one span list per document, spaCy labels) may be passed to skip the NER run (tests, or spans from
    another recogniser); otherwise :class:`~toolkit.identifiers.detectors.SpacyDetector` runs ``nlp.pipe`` batched.
    """
    cfg = config or AnonymizeConfig()
    docs = list(corpus)
    if entities is None:
        det = SpacyDetector(model=cfg.spacy_model, labels=tuple(cfg.labels), batch_size=cfg.batch_size,
                            n_process=cfg.n_process)
        entities = det.detect(docs, progress=progress)
    if len(entities) != len(docs):
        raise ToolkitError(f"{len(entities)} entity lists for {len(docs)} documents")
    new_docs, rows = [], []
    per_label: Counter[str] = Counter()
    gold_total: Counter[str] = Counter()
    gold_missed: Counter[str] = Counter()
    for doc, ents in zip(docs, entities):
        new, offs, missed = _anonymize_doc(doc, ents, cfg.labels)
        new_docs.append(new)
        rows.extend(offs)
        per_label.update(o[5] for o in offs)
        gold_total.update(s.label for s in doc.spans)
        gold_missed.update(missed)
    offsets = pd.DataFrame(rows, columns=OFFSET_COLUMNS).astype(
        {"start": "int64", "end": "int64", "orig_start": "int64", "orig_end": "int64"})
    per_tag: Counter[str] = Counter(offsets["tag"])
    summary = {"n_documents": len(docs), "spacy_model": cfg.spacy_model, "labels": cfg.labels,
               "n_replaced": int(len(offsets)), "replaced_by_label": dict(sorted(per_label.items())),
               "replaced_by_tag": dict(sorted(per_tag.items())),
               "gold_spans": dict(sorted(gold_total.items())), "gold_missed": dict(sorted(gold_missed.items()))}
    return Anonymized(Corpus(new_docs, source=corpus.source), offsets, summary)


def load_anonymized(path: str | Path) -> Anonymized:
    """Read what :meth:`Anonymized.save` wrote (a missing offset map is a :class:`ToolkitError`)."""
    from toolkit.corpus import read_jsonl

    p = Path(path)
    op, sp = offsets_path(p), summary_path(p)
    if not op.is_file():
        raise ToolkitError(f"{p}: no offset map {op.name} beside it — not written by `python -m toolkit anonymize`")
    summary = json.loads(sp.read_text(encoding="utf-8")) if sp.is_file() else {}
    offsets = pd.read_parquet(op)
    missing = set(OFFSET_COLUMNS) - set(offsets.columns)
    if missing:
        raise ToolkitError(f"{op}: missing columns {sorted(missing)}")
    return Anonymized(read_jsonl(p), offsets[OFFSET_COLUMNS], summary)


__all__ = ["DEFAULT_TAGS", "OFFSET_COLUMNS", "AnonymizeConfig", "Anonymized", "anonymize_corpus", "load_anonymized",
           "parse_labels", "replace_spans"]
