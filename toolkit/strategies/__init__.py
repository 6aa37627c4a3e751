"""Fine-tuning strategies (SPEC §3): which text a model trains on and which words may be targets.

Every strategy shares one data pipeline (:func:`training_examples`) and one trainer (``toolkit.training``); a strategy
is data — the text variant, the protected identifier kinds, whether DP-SGD is used — not code.

Masked LM (whole-word masking, 15% of eligible words afresh each epoch, 80/10/10): ``mlm``, ``mlm_pseudo``,
``ppmlm``, ``dppmlm``, ``ippmlm``, ``mlm_dp``. Causal LM (protected tokens stay in the input with label -100):
``clm``, ``clm_pseudo``, ``ppclm``, ``dppclm``, ``ippclm``, ``clm_dp``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from toolkit.corpus import Corpus
from toolkit.errors import ToolkitError
from toolkit.identifiers.storage import check_coverage
from toolkit.identifiers.words import WordTable, segment_corpus
from toolkit.strategies.encoding import EncodedCorpus, encode_corpus, special_template
from toolkit.strategies.pseudonymize import pseudonymize


@dataclass(frozen=True)
class Strategy:
    """One row of SPEC §3's tables."""

    name: str
    kind: str  # "mlm" | "clm"
    text: str = "original"  # "original" | "pseudo"
    protect: tuple[str, ...] = ()  # subset of ("direct", "indirect")
    dp: bool = False
    description: str = ""


STRATEGIES: dict[str, Strategy] = {s.name: s for s in [
    Strategy("mlm", "mlm", description="masked LM on the original text, every word may be a target"),
    Strategy("mlm_pseudo", "mlm", text="pseudo", description="MLMA: PII spans replaced by the word X"),
    Strategy("ppmlm", "mlm", protect=("direct", "indirect"),
             description="PPMLM: direct and indirect identifiers never targets, visible as context"),
    Strategy("dppmlm", "mlm", protect=("direct",), description="direct identifiers protected only"),
    Strategy("ippmlm", "mlm", protect=("indirect",), description="indirect identifiers protected only"),
    Strategy("mlm_dp", "mlm", dp=True, description="masked LM with DP-SGD (Opacus)"),
    Strategy("clm", "clm", description="causal LM on the original text, every token a target"),
    Strategy("clm_pseudo", "clm", text="pseudo", description="PII spans replaced by X (a normal target)"),
    Strategy("ppclm", "clm", protect=("direct", "indirect"),
             description="PPclm: tokens of protected words get label -100 but stay in the input"),
    Strategy("dppclm", "clm", protect=("direct",), description="direct identifiers protected only"),
    Strategy("ippclm", "clm", protect=("indirect",), description="indirect identifiers protected only"),
    Strategy("clm_dp", "clm", dp=True, description="causal LM with DP-SGD (Opacus)"),
]}


def get_strategy(name: str) -> Strategy:
    try:
        return STRATEGIES[name]
    except KeyError:
        raise ToolkitError(f"unknown strategy {name!r}; available: {', '.join(STRATEGIES)}") from None


def word_rows_of_positions(words: WordTable, doc_ids: list[str], positions: pd.DataFrame) -> np.ndarray:
    """Word-table rows of the ``(doc_id, start)`` word occurrences in ``positions`` (an identifiers output).

    Raises :class:`ToolkitError` when a position does not start a word of the corpus (identifiers computed on another
    corpus or another segmentation).
    """
    index = {d: i for i, d in enumerate(doc_ids)}
    doc = positions["doc_id"].map(index)
    if doc.isna().any():
        missing = positions.loc[doc.isna(), "doc_id"].iloc[0]
        raise ToolkitError(f"identifier positions mention document {missing!r}, which is not in the corpus")
    stride = np.int64(max(int(words.end.max(initial=0)), int(positions["end"].max()) if len(positions) else 0) + 1)
    keys = words.doc.astype(np.int64) * stride + words.start
    want = doc.to_numpy(dtype=np.int64) * stride + positions["start"].to_numpy(dtype=np.int64)
    rows = np.searchsorted(keys, want)
    bad = (rows >= len(keys)) | (keys[np.minimum(rows, len(keys) - 1)] != want)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ToolkitError(f"identifier position {positions.iloc[i]['doc_id']}:{int(positions.iloc[i]['start'])} "
                           f"does not start a word of the corpus (identifiers from another corpus?)")
    return rows


def protected_words(words: WordTable, doc_ids: list[str], positions: pd.DataFrame,
                    protect: tuple[str, ...]) -> np.ndarray:
    """Boolean per word-table row: protected under ``protect`` (``direct`` and/or ``indirect`` columns)."""
    mask = np.zeros(len(words), dtype=bool)
    if not protect or positions is None or len(positions) == 0:
        return mask
    sel = np.zeros(len(positions), dtype=bool)
    for kind in protect:
        sel |= positions[kind].to_numpy(dtype=bool)
    mask[word_rows_of_positions(words, doc_ids, positions[sel])] = True
    return mask


def strategy_texts(corpus: Corpus, strategy: Strategy, spans: pd.DataFrame | None) -> list[str]:
    """The training texts of a strategy: original, or pseudonymised with the detector's PII spans."""
    texts = [d.text for d in corpus]
    if strategy.text == "original":
        return texts
    if strategy.text == "pseudo":
        if spans is None:
            raise ToolkitError(f"strategy {strategy.name} needs the detector's PII spans (spans.parquet)")
        by_doc = {k: list(zip(g["start"], g["end"])) for k, g in spans.groupby("doc_id", sort=False)}
        return [pseudonymize(d.text, by_doc.get(d.doc_id, []))[0] for d in corpus]
    raise ToolkitError(f"unknown text variant {strategy.text!r}")


def require_identifiers(corpus: Corpus, strategy: Strategy, positions: pd.DataFrame | None,
                        spans: pd.DataFrame | None) -> None:
    """Refuse to build a strategy's data unless the identifiers it reads exist and cover every document of
    ``corpus``, made from exactly its text (:func:`toolkit.identifiers.check_coverage`: document fingerprints carried
    by the tables ``load_identifiers`` / ``IdentifierAnalysis`` return). Without this, a document the identifiers
    miss, or whose text changed since, would be trained on with nothing protected or pseudonymised."""
    if strategy.protect:
        if positions is None:
            raise ToolkitError(f"strategy {strategy.name} needs identifier positions (positions.parquet)")
        check_coverage(corpus, positions, table="positions")
    if strategy.text == "pseudo":
        if spans is None:
            raise ToolkitError(f"strategy {strategy.name} needs the detector's PII spans (spans.parquet)")
        check_coverage(corpus, spans, table="spans")


@dataclass
class TrainingSet:
    """The examples of one epoch (see :func:`training_examples`) and, for each, the individual (``person_id`` of its
    document) it comes from: the privacy unit of DP-SGD's per-individual sampling."""

    examples: list[dict]
    person_ids: list[str] = field(default_factory=list)


def training_set(corpus: Corpus, tokenizer, strategy: Strategy | str, *, positions: pd.DataFrame | None,
                 spans: pd.DataFrame | None = None, max_length: int, progress: bool = True) -> TrainingSet:
    """:func:`training_examples` with the individual of every example."""
    strategy = get_strategy(strategy) if isinstance(strategy, str) else strategy
    require_identifiers(corpus, strategy, positions, spans)
    texts = strategy_texts(corpus, strategy, spans)
    words = segment_corpus(texts, progress=False)
    protected = protected_words(words, [d.doc_id for d in corpus], positions, strategy.protect)
    enc = encode_corpus(texts, tokenizer, max_length=max_length, words=words, progress=progress)
    people = [d.person_id for d in corpus]
    return TrainingSet(examples_from_encoding(enc, protected, strategy.kind),
                       [people[i] for i in enc.chunk_doc.tolist()])


def training_examples(corpus: Corpus, tokenizer, strategy: Strategy | str, *, positions: pd.DataFrame | None,
                      spans: pd.DataFrame | None = None, max_length: int, progress: bool = True) -> list[dict]:
    """The examples one epoch of a strategy trains on.

    Masked LM: ``{"input_ids", "special_tokens_mask", "word_ids"}`` where ``special_tokens_mask`` is 1 for every
    token that may never be a target (special tokens, tokens outside words, tokens overlapping a protected word) and
    ``word_ids`` numbers the words of the chunk (-1: none) for whole-word masking.
    Causal LM: ``{"input_ids", "labels"}`` with label -100 on every token overlapping a protected word.

    A strategy that reads identifiers refuses documents they do not cover (:func:`require_identifiers`).
    """
    return training_set(corpus, tokenizer, strategy, positions=positions, spans=spans, max_length=max_length,
                        progress=progress).examples


def examples_from_encoding(enc: EncodedCorpus, protected: np.ndarray, kind: str) -> list[dict]:
    """Examples from an encoding and the per-word ``protected`` flags: a token is protected when its characters
    overlap any protected word (``enc.overlap``; without it, when the word of its last character is protected)."""
    cum = np.concatenate([[0], np.cumsum(protected, dtype=np.int64)])
    out = []
    for c, (ids, rows) in enumerate(zip(enc.input_ids, enc.word_row)):
        in_word = rows >= 0
        prot = np.zeros(len(rows), dtype=bool)
        prot[in_word] = protected[rows[in_word]]
        if enc.overlap is not None:
            first, last = enc.overlap[c][:, 0], enc.overlap[c][:, 1]
            hit = first >= 0
            prot[hit] |= cum[last[hit] + 1] > cum[first[hit]]
        if kind == "mlm":
            local = np.full(len(rows), -1, dtype=np.int64)
            if in_word.any():
                _, local[in_word] = np.unique(rows[in_word], return_inverse=True)
            out.append({"input_ids": ids.tolist(), "special_tokens_mask": (~in_word | prot).astype(np.int64).tolist(),
                        "word_ids": local.tolist()})
        else:
            labels = ids.copy()
            labels[prot] = -100
            out.append({"input_ids": ids.tolist(), "labels": labels.tolist()})
    return out


__all__ = ["STRATEGIES", "EncodedCorpus", "Strategy", "TrainingSet", "encode_corpus", "examples_from_encoding",
           "get_strategy", "protected_words", "pseudonymize", "require_identifiers", "special_template",
           "strategy_texts", "training_examples", "training_set", "word_rows_of_positions"]
