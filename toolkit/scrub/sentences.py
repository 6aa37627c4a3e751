"""Development and test sentences for the fill-masked-name task (methods.md §7.3, §7.6; paper 003 §4.3, §5).

A sentence qualifies when it contains **exactly one** occurrence of the target tag (``PERSON`` by default; other
tags may occur in it, as in the MedRoBERTa.nl test set) and has ``min_words``–``max_words`` words (methods.md §1 words).
That tag becomes :data:`MASK` (``<mask>``), which :func:`with_model_mask` turns into the model's own mask token.
Sentences come from *seen* documents (the model's training split) and *unseen* ones (its validation split). Identical
masked sentences are kept once (a template sentence repeated in many notes would otherwise fill the set with copies
of one fill-mask query); :func:`split_dev_test` draws a development set and a disjoint test set from each source.

Sentence boundaries: each line is split by spaCy's rule-based ``sentencizer`` (a blank pipeline: no model needed).

The original name behind each masked tag is kept **hashed** (``original_hashes``: SHA-256 of each NFKC lower-cased word
of the replaced entity, see :func:`word_hash`) so that the anonymity test can tell whether a prediction equals the
original name without the sentence file holding names.

Files: JSONL (``sentence_id, source, sentence, original_hashes, doc_id``), CSV, Parquet, and the MedRoBERTa.nl CSV
format (one column ``sentences``, ``<mask>`` where the name was; ``data_external/``), read by
:func:`read_sentences`.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from toolkit.errors import CorpusError, ToolkitError
from toolkit.identifiers.words import normalize_term, word_pattern
from toolkit.io import atomic_write, atomic_write_parquet

MASK = "<mask>"
SENTENCE_COLUMNS = ["sentence_id", "source", "sentence", "original_hashes", "doc_id"]


def word_hash(word: str) -> str:
    """SHA-256 (hex) of a word after NFKC + lower-casing (methods.md §1 normalisation)."""
    return hashlib.sha256(normalize_term(word.strip()).encode("utf-8")).hexdigest()


def split_sentences(texts: Sequence[str]) -> list[list[tuple[int, int]]]:
    """Sentence spans ``(start, end)`` of each text: lines, then spaCy's ``sentencizer`` inside each line; spans are
    stripped of surrounding whitespace and empty ones dropped."""
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    nlp.max_length = max(nlp.max_length, 10_000_000)
    lines: list[tuple[int, int, str]] = []
    for d, text in enumerate(texts):
        pos = 0
        for line in text.split("\n"):
            if line.strip():
                lines.append((d, pos, line))
            pos += len(line) + 1
    out: list[list[tuple[int, int]]] = [[] for _ in texts]
    for (d, off, line), parsed in zip(lines, nlp.pipe((x[2] for x in lines), batch_size=256)):
        for sent in parsed.sents:
            a, b = sent.start_char, sent.end_char
            while a < b and line[a].isspace():
                a += 1
            while b > a and line[b - 1].isspace():
                b -= 1
            if b > a:
                out[d].append((off + a, off + b))
    return out


def _as_set(x: str | Iterable[str] | None) -> set[str]:
    if x is None:
        return set()
    return {x} if isinstance(x, str) else set(x)


def tag_sentences(anonymized, *, tag: str = "PERSON", seen_splits: str | Iterable[str] = "train",
                  unseen_splits: str | Iterable[str] = ("heldout", "validation"), min_words: int = 4,
                  max_words: int = 40, original=None, gold_labels: Iterable[str] | None = None) -> pd.DataFrame:
    """Every sentence of an anonymised corpus with exactly one ``tag`` (methods.md §7.3), the tag replaced by
    :data:`MASK`.

    Parameters
    ----------
    anonymized:
        :class:`~toolkit.scrub.anonymize.Anonymized` (its corpus and offset map).
    tag:
        The tag to mask (``PERSON``).
    seen_splits, unseen_splits:
        Document splits that are the model's training data (*seen*) and its validation data (*unseen*); documents in
        neither are skipped.
    min_words, max_words:
        Length filter, in methods.md §1 words of the anonymised sentence.
    original:
        The corpus before anonymisation: when given, ``original_hashes`` holds the hashes of the replaced entity's
        words (:func:`word_hash`).
    gold_labels:
        Keep only sentences whose masked entity overlaps a gold span of one of these labels in ``original`` (e.g.
        ``PATIENT, DOCTOR``): the paper chose by hand sentences "for which it was clear that there must have been a
        name" (003 §4.3), because NER also tags drugs or lab values as ``PERSON``; gold spans make that choice here.

    Returns
    -------
    DataFrame with ``sentence_id`` (``seen-…`` / ``unseen-…``), ``source``, ``sentence``, ``original_hashes``,
    ``doc_id``, ``start``/``end`` (sentence offsets in the anonymised document), ``n_words``, ``n_copies`` (identical
    masked sentences merged into this one; the first occurrence, seen before unseen, is kept).
    """
    seen, unseen = _as_set(seen_splits), _as_set(unseen_splits)
    gold = _as_set(gold_labels)
    if gold and original is None:
        raise ToolkitError("gold_labels needs the original corpus (its gold spans)")
    if seen & unseen:
        raise ToolkitError(f"splits {sorted(seen & unseen)} are both seen and unseen")
    docs = [d for d in anonymized.corpus if d.split in seen | unseen]
    if not docs:
        raise ToolkitError(f"no document in the splits {sorted(seen | unseen)}; available: "
                           f"{anonymized.corpus.splits}")
    offs = anonymized.offsets
    offs = offs[offs["tag"] == tag]
    by_doc = {k: g[["start", "end", "orig_start", "orig_end"]].to_numpy() for k, g in offs.groupby("doc_id", sort=False)}
    wp = word_pattern()
    rows = []
    for doc, sents in zip(docs, split_sentences([d.text for d in docs])):
        tags = by_doc.get(doc.doc_id)
        if tags is None:
            continue
        for a, b in sents:
            inside = tags[(tags[:, 0] >= a) & (tags[:, 1] <= b)]
            if len(inside) != 1:
                continue
            ts, te, os_, oe = (int(v) for v in inside[0])
            if gold and not any(sp.label in gold and sp.start < oe and os_ < sp.end
                                for sp in original.get(doc.doc_id).spans):
                continue
            n_words = len(wp.findall(doc.text, a, b))
            if not min_words <= n_words <= max_words:
                continue
            hashes = []
            if original is not None:
                hashes = [word_hash(w) for w in wp.findall(original.get(doc.doc_id).text, os_, oe)]
            rows.append({"source": "seen" if doc.split in seen else "unseen", "doc_id": doc.doc_id,
                         "sentence": doc.text[a:ts] + MASK + doc.text[te:b], "original_hashes": hashes,
                         "start": a, "end": b, "n_words": n_words})
    frame = pd.DataFrame(rows, columns=["source", "doc_id", "sentence", "original_hashes", "start", "end", "n_words"])
    frame = frame.sort_values("source", kind="stable", key=lambda s: s.map({"seen": 0, "unseen": 1}))
    frame["n_copies"] = frame.groupby("sentence")["sentence"].transform("size").astype(np.int64)
    frame = frame.drop_duplicates("sentence", keep="first").reset_index(drop=True)
    frame["sentence_id"] = frame["source"] + "-" + frame.groupby("source").cumcount().add(1).astype(str).str.zfill(5)
    return frame[["sentence_id", "source", "sentence", "original_hashes", "doc_id", "start", "end", "n_words",
                  "n_copies"]]


def split_dev_test(pool: pd.DataFrame, *, n_seen: int = 100, n_unseen: int = 100,
                   seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A development set and a disjoint test set (methods.md §7.3, §7.6): ``n_seen`` + ``n_unseen`` sentences each,
    drawn at random (seeded) from the pool of :func:`tag_sentences`. A source with fewer than twice the wanted number of
    sentences is split in two equal halves (a warning says so)."""
    rng = np.random.default_rng(seed)
    dev, test = [], []
    for source, n in (("seen", n_seen), ("unseen", n_unseen)):
        part = pool[pool["source"] == source]
        k = min(int(n), len(part) // 2)
        if k < n:
            warnings.warn(f"only {len(part)} distinct {source} sentences with one tag: {k} for development and {k} "
                          f"for test instead of {n}", stacklevel=2)
        order = rng.permutation(len(part))
        dev.append(part.iloc[np.sort(order[:k])])
        test.append(part.iloc[np.sort(order[k:2 * k])])
    return pd.concat(dev, ignore_index=True), pd.concat(test, ignore_index=True)


def with_model_mask(sentences: Iterable[str], tokenizer) -> list[str]:
    """Sentences with :data:`MASK` replaced by the tokenizer's mask token (``[MASK]`` for BERT)."""
    mask = getattr(tokenizer, "mask_token", None)
    if not mask:
        raise ToolkitError("the tokenizer has no mask token: fill-mask probing needs a masked language model")
    return [s.replace(MASK, mask) for s in sentences]


def read_sentences(path: str | Path, *, source: str = "unknown") -> pd.DataFrame:
    """Read fill-mask sentences: the MedRoBERTa.nl file (a ``sentences`` header line, then one raw sentence per line,
    commas unquoted) or the toolkit's JSONL / CSV / Parquet (column ``sentence``; optional ``sentence_id``,
    ``source``, ``original_hashes``, ``doc_id``).

    Every sentence must hold exactly one ``<mask>``; a problem is a :class:`CorpusError` naming the file and line.
    ``source`` labels the sentences of a file without a ``source`` column (the MedRoBERTa.nl set is ``unseen``).
    """
    p = Path(path)
    if not p.is_file():
        raise CorpusError("sentence file not found", p)
    suffix = p.suffix.lower()
    try:
        if suffix == ".csv" and p.read_text(encoding="utf-8").split("\n", 1)[0].strip().lstrip("\ufeff") == "sentences":
            # MedRoBERTa.nl format: a one-column header, then one raw sentence per line (commas and quotes unescaped)
            lines_ = p.read_text(encoding="utf-8").split("\n")[1:]
            keep = [(i, ln.rstrip("\r")) for i, ln in enumerate(lines_, 2) if ln.strip()]
            frame = pd.DataFrame({"sentences": [ln for _, ln in keep], "_line": [i for i, _ in keep]})
            first_line = None
        elif suffix == ".csv":
            frame = pd.read_csv(p, dtype=str, keep_default_na=False, encoding="utf-8")
            first_line = 2  # header on line 1
        elif suffix == ".jsonl":
            records = []
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise CorpusError(f"invalid JSON ({exc.msg})", p, line=i) from None
                if not isinstance(rec, dict):
                    raise CorpusError("expected a JSON object", p, line=i)
                rec["_line"] = i
                records.append(rec)
            frame = pd.DataFrame(records)
            first_line = None
        elif suffix == ".parquet":
            frame = pd.read_parquet(p)
            first_line = None
        else:
            raise CorpusError("unknown sentence file type: use .csv (MedRoBERTa format or toolkit columns), .jsonl "
                              "or .parquet", p)
    except UnicodeDecodeError as exc:
        raise CorpusError(f"not UTF-8 ({exc.reason} at byte {exc.start})", p) from None
    except (pd.errors.ParserError, ValueError) as exc:
        if isinstance(exc, CorpusError):
            raise
        raise CorpusError(f"cannot parse ({exc})", p) from None
    col = "sentence" if "sentence" in frame.columns else "sentences" if "sentences" in frame.columns else None
    if col is None:
        raise CorpusError(f"no 'sentence' or 'sentences' column (columns: {list(frame.columns)})", p)
    if frame.empty:
        raise CorpusError("no sentences", p)
    lines = frame["_line"].tolist() if "_line" in frame.columns else (
        [first_line + i for i in range(len(frame))] if first_line else [None] * len(frame))
    out = pd.DataFrame({"sentence": frame[col].astype(str).str.strip()})
    for i, (s, line) in enumerate(zip(out["sentence"], lines)):
        n = s.count(MASK)
        if n != 1:
            raise CorpusError(f"sentence has {n} '{MASK}' markers; exactly one is needed", p, line=line,
                              record=None if line else f"row {i + 1}")
    out["sentence_id"] = frame["sentence_id"].astype(str) if "sentence_id" in frame.columns else \
        [f"s{i + 1:05d}" for i in range(len(frame))]
    if out["sentence_id"].duplicated().any():
        raise CorpusError(f"duplicate sentence_id {out['sentence_id'][out['sentence_id'].duplicated()].iloc[0]!r}", p)
    out["source"] = frame["source"].astype(str) if "source" in frame.columns else source
    if "original_hashes" in frame.columns:
        out["original_hashes"] = [_hash_list(v) for v in frame["original_hashes"]]
    else:
        out["original_hashes"] = [[] for _ in range(len(frame))]
    out["doc_id"] = frame["doc_id"].astype(str) if "doc_id" in frame.columns else None
    return out[SENTENCE_COLUMNS]


def _hash_list(v) -> list[str]:
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return []
    if isinstance(v, str):
        return v.split()
    return [str(x) for x in v]


def write_sentences(frame: pd.DataFrame, path: str | Path) -> Path:
    """Write sentences as JSONL, CSV (hashes space-separated) or Parquet, atomically (:mod:`toolkit.io`)."""
    p = Path(path)
    cols = [c for c in SENTENCE_COLUMNS if c in frame.columns]
    out = frame[cols].copy()
    if "original_hashes" in out:
        out["original_hashes"] = out["original_hashes"].map(lambda v: list(v) if v is not None else [])
    suffix = p.suffix.lower()
    if suffix == ".jsonl":
        recs = out.to_dict(orient="records")
        atomic_write(p, lambda fh: fh.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in recs))
    elif suffix == ".csv":
        if "original_hashes" in out:
            out["original_hashes"] = out["original_hashes"].map(" ".join)
        atomic_write(p, lambda fh: out.to_csv(fh, index=False))
    elif suffix == ".parquet":
        atomic_write_parquet(out, p)
    else:
        raise ToolkitError(f"{p}: write sentences as .jsonl, .csv or .parquet")
    return p


__all__ = ["MASK", "SENTENCE_COLUMNS", "read_sentences", "split_dev_test", "split_sentences", "tag_sentences",
           "with_model_mask", "word_hash", "write_sentences"]
