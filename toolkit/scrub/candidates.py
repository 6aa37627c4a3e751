"""Step 3 of the two-step method (methods.md §7.3–7.4, paper 003 §4.3): fill-masked-name probing and candidate ranking.

:func:`fill_mask` runs the model on sentences whose name was replaced by the mask and keeps the top ``k`` tokens
(40 in the paper) with their probabilities — batched through :func:`toolkit.audit.probe_masked.topk_at_masks` (sorted
by length, padded batches, LM head only at the mask). :func:`rank_candidates` groups the predicted tokens by their
surface form and pre-sorts them for the human review by a **name-likeness score** (methods.md §7.4)::

    score = w_ner · ner_share + w_cap · capitalised + w_rare · (1 − common_word) + w_freq · frequency

for alphabetic tokens of two letters or more (every other token — punctuation, numbers, special tokens, the NER tags
and already scrubbed ``unk…`` tokens — scores 0 and is not a candidate), where

* ``ner_share`` — share of (up to ``ner_sentences``) sentences, filled with the token, in which spaCy's NER labels the
  token ``PERSON`` (configurable labels);
* ``capitalised`` — 1 when the token starts with an upper-case letter;
* ``common_word`` — 1 when the lower-cased token is in the common-word list (spaCy's English stop words and a list of
  common English words shipped with Faker, plus any ``word_list`` file, e.g. a Dutch list for Dutch notes);
* ``frequency`` — the number of sentences whose top ``k`` hold the token, divided by the largest such number.

Default weights 0.4 / 0.2 / 0.3 / 0.1 sum to 1. The score only orders the review; a person decides.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from toolkit.errors import ToolkitError
from toolkit.identifiers.detectors import DEFAULT_SPACY_MODEL
from toolkit.models import vocabulary_surfaces
from toolkit.scrub.sentences import MASK, with_model_mask

SCRUBBED_RE = re.compile(r"unk\d{13}")
WORD_RE = re.compile(r"[^\W\d_]{2,}(?:['’-][^\W\d_]+)*|[^\W\d_](?:['’-][^\W\d_]+)+")
PREDICTION_COLUMNS = ["sentence_index", "rank", "token_id", "token", "prob"]


def token_kind(surface: str, *, specials: set[str] = frozenset(), tags: Sequence[str] = ("PERSON", "GPE")) -> str:
    """``special``, ``scrubbed`` (``unk`` + 13 digits, methods.md §7.5), ``tag`` (one or more NER tags run together,
    e.g. ``PERSONGPE``), ``word`` (letters, ≥ 2, inner apostrophes/hyphens allowed) or ``other``."""
    if surface in specials:
        return "special"
    if SCRUBBED_RE.fullmatch(surface):
        return "scrubbed"
    if tags and re.fullmatch("(?:" + "|".join(re.escape(t) for t in tags) + ")+", surface):
        return "tag"
    if WORD_RE.fullmatch(surface):
        return "word"
    return "other"


def max_positions(model, tokenizer) -> int:
    from toolkit.audit.probe_masked import max_positions as mp

    return mp(model, tokenizer, 1_000_000)


def fill_mask(model, tokenizer, sentences: Sequence[str], *, top_k: int = 40, batch_size: int = 64,
              progress: bool = True, device=None) -> pd.DataFrame:
    """Top ``top_k`` predictions at the single :data:`~toolkit.scrub.sentences.MASK` of each sentence.

    Returns one row per (sentence, rank): ``sentence_index`` (position in ``sentences``), ``rank`` (1 = most
    probable), ``token_id``, ``token`` (surface form, :func:`vocabulary_surfaces`), ``prob`` (softmax probability).
    A sentence without exactly one mask, or longer than the model's window, is a :class:`ToolkitError`.
    """
    from toolkit.audit.probe_masked import topk_at_masks

    if top_k < 1:
        raise ToolkitError(f"top_k must be >= 1, got {top_k}")
    texts = with_model_mask(sentences, tokenizer)
    mask_id = tokenizer.mask_token_id
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    limit = max_positions(model, tokenizer)
    enc = tokenizer(texts, add_special_tokens=True)["input_ids"]
    seqs = []
    for i, ids in enumerate(enc):
        ids = np.asarray(ids, dtype=np.int64)
        where = np.flatnonzero(ids == mask_id)
        if len(where) != 1:
            raise ToolkitError(f"sentence {i}: {len(where)} mask tokens after tokenisation; exactly one '{MASK}' is "
                               f"needed")
        if len(ids) > limit:
            raise ToolkitError(f"sentence {i}: {len(ids)} tokens, longer than the model's {limit}")
        seqs.append((ids, where))
    k = min(int(top_k), len(tokenizer))
    tops, _ = topk_at_masks(model, seqs, mask_id=mask_id, pad_id=pad_id, k=k, batch_size=batch_size,
                            progress=progress, device=device, desc="fill-mask", with_probs=True)
    if not seqs:
        return pd.DataFrame(columns=PREDICTION_COLUMNS)
    ids = np.concatenate([t[0] for t in tops]).reshape(len(seqs), k)
    probs = np.concatenate([t[1] for t in tops]).reshape(len(seqs), k)
    surf = vocabulary_surfaces(tokenizer, np.unique(ids))
    flat = ids.ravel()
    return pd.DataFrame({"sentence_index": np.repeat(np.arange(len(seqs)), k),
                         "rank": np.tile(np.arange(1, k + 1), len(seqs)), "token_id": flat.astype(np.int64),
                         "token": [surf[int(i)] for i in flat], "prob": probs.ravel().astype(float)},
                        columns=PREDICTION_COLUMNS)


@dataclass
class NameScoreConfig:
    """Name-likeness score settings (methods.md §7.4; formula in the module docstring)."""

    weights: dict[str, float] = field(default_factory=lambda: {"ner": 0.4, "capitalised": 0.2, "rare": 0.3,
                                                               "frequency": 0.1})
    word_list: str | None = None  # extra common words, one per line (UTF-8)
    use_ner: bool = True
    spacy_model: str = DEFAULT_SPACY_MODEL
    ner_labels: tuple[str, ...] = ("PERSON",)
    ner_sentences: int = 3
    tags: tuple[str, ...] = ("PERSON", "GPE")

    def __post_init__(self) -> None:
        unknown = set(self.weights) - {"ner", "capitalised", "rare", "frequency"}
        if unknown:
            raise ToolkitError(f"unknown name-score weights {sorted(unknown)}; use ner, capitalised, rare, frequency")
        self.ner_labels = tuple(self.ner_labels)
        self.tags = tuple(self.tags)


def common_words(word_list: str | Path | None = None) -> frozenset[str]:
    """Lower-cased common words: spaCy's English stop words, Faker's en_US word list, and ``word_list`` (a file,
    one word per line) when given."""
    from faker.providers.lorem.en_US import Provider
    from spacy.lang.en.stop_words import STOP_WORDS

    words = {w.lower() for w in STOP_WORDS} | {w.lower() for w in Provider.word_list}
    if word_list is not None:
        p = Path(word_list)
        try:
            words |= {w.strip().lower() for w in p.read_text(encoding="utf-8").splitlines() if w.strip()}
        except (OSError, UnicodeDecodeError) as exc:
            raise ToolkitError(f"{p}: cannot read the word list ({exc})") from None
    return frozenset(words)


def ner_shares(tokens: Sequence[str], examples: Sequence[Sequence[str]], config: NameScoreConfig,
               progress: bool = False) -> np.ndarray:
    """For each token, the share of its example sentences (first ``config.ner_sentences``), with :data:`MASK`
    replaced by the token, in which spaCy labels the token's characters with one of ``config.ner_labels``."""
    from toolkit.identifiers.detectors import SpacyDetector
    from toolkit.progress import progress_bar

    jobs = []  # (token index, filled text, token start, token end)
    for i, (tok, exs) in enumerate(zip(tokens, examples)):
        for s in list(exs)[:config.ner_sentences]:
            a = s.index(MASK)
            jobs.append((i, s[:a] + tok + s[a + len(MASK):], a, a + len(tok)))
    hits = np.zeros(len(tokens))
    counts = np.zeros(len(tokens))
    if not jobs:
        return hits
    nlp = SpacyDetector(model=config.spacy_model).load()
    labels = set(config.ner_labels)
    # the bar wraps the shorter side of the zip (the jobs): zip stops on the first exhausted iterator, so a bar
    # around nlp.pipe was never exhausted, never closed, and stayed at 0% in notebook 05's executed copy
    for (i, _, a, b), doc in zip(progress_bar(jobs, desc="NER on filled sentences", unit="sent", enabled=progress),
                                 nlp.pipe((j[1] for j in jobs), batch_size=256)):
        counts[i] += 1
        hits[i] += any(e.label_ in labels and e.start_char < b and a < e.end_char for e in doc.ents)
    return np.divide(hits, counts, out=np.zeros_like(hits), where=counts > 0)


def score_tokens(stats: pd.DataFrame, config: NameScoreConfig | None = None, *, specials: set[str] = frozenset(),
                 progress: bool = False) -> pd.DataFrame:
    """Add ``kind``, ``capitalised``, ``common_word``, ``ner_share``, ``frequency`` and ``score`` to a table with one
    row per distinct ``token`` and the columns ``n_sentences`` and ``examples`` (masked sentences, best first)."""
    cfg = config or NameScoreConfig()
    out = stats.copy()
    common = common_words(cfg.word_list)
    out["kind"] = [token_kind(t, specials=specials, tags=cfg.tags) for t in out["token"]]
    word = (out["kind"] == "word").to_numpy()
    out["capitalised"] = [bool(t) and t[0].isupper() for t in out["token"]]
    out["common_word"] = [t.lower() in common for t in out["token"]]
    ner = np.zeros(len(out))
    if cfg.use_ner and word.any():
        ner[word] = ner_shares(out["token"][word].tolist(), out["examples"][word].tolist(), cfg, progress=progress)
    out["ner_share"] = ner
    n = out["n_sentences"].to_numpy(dtype=float)
    out["frequency"] = n / n.max() if len(n) and n.max() > 0 else 0.0
    w = cfg.weights
    score = (w.get("ner", 0) * out["ner_share"] + w.get("capitalised", 0) * out["capitalised"]
             + w.get("rare", 0) * (~out["common_word"]) + w.get("frequency", 0) * out["frequency"])
    out["score"] = np.where(word, score.to_numpy(dtype=float), 0.0).round(4)
    return out


def token_statistics(predictions: pd.DataFrame, sentences: pd.DataFrame, *, n_examples: int = 5) -> pd.DataFrame:
    """One row per distinct predicted token: ``token``, ``token_ids``, ``n_predictions``, ``n_sentences``,
    ``n_seen``/``n_unseen`` (sentences per source), ``best_rank``, ``mean_prob``, and ``examples`` /
    ``example_ids`` (up to ``n_examples`` masked sentences and their ids, best rank first)."""
    sent = sentences.reset_index(drop=True)
    p = predictions.merge(sent[["sentence", "source", "sentence_id"]], left_on="sentence_index", right_index=True)
    p = p.sort_values(["token", "rank", "sentence_index"], kind="stable")
    rows = []
    for tok, g in p.groupby("token", sort=False):
        per_sent = g.drop_duplicates("sentence_index")
        rows.append({"token": tok, "token_ids": sorted(set(int(i) for i in g["token_id"])),
                     "n_predictions": len(g), "n_sentences": len(per_sent),
                     "n_seen": int((per_sent["source"] == "seen").sum()),
                     "n_unseen": int((per_sent["source"] == "unseen").sum()),
                     "best_rank": int(g["rank"].min()), "mean_prob": float(g["prob"].mean()),
                     "examples": per_sent["sentence"].head(n_examples).tolist(),
                     "example_ids": per_sent["sentence_id"].head(n_examples).tolist()})
    return pd.DataFrame(rows, columns=["token", "token_ids", "n_predictions", "n_sentences", "n_seen", "n_unseen",
                                       "best_rank", "mean_prob", "examples", "example_ids"])


CANDIDATE_COLUMNS = ["token", "score", "n_sentences", "n_seen", "n_unseen", "n_predictions", "best_rank", "mean_prob",
                     "capitalised", "common_word", "ner_share", "frequency", "kind", "token_ids", "examples",
                     "example_ids"]


def rank_candidates(predictions: pd.DataFrame, sentences: pd.DataFrame, config: NameScoreConfig | None = None, *,
                    tokenizer=None, n_examples: int = 5, progress: bool = False) -> pd.DataFrame:
    """Candidate tokens for the review (methods.md §7.4): the word-like predicted tokens, highest name-likeness first.

    ``predictions`` from :func:`fill_mask` on ``sentences`` (a frame with ``sentence``, ``source``, ``sentence_id``,
    in the order given to :func:`fill_mask`). ``df.attrs`` counts the distinct predicted tokens by kind.
    """
    stats = token_statistics(predictions, sentences, n_examples=n_examples)
    specials = set(tokenizer.all_special_tokens) if tokenizer is not None else set()
    scored = score_tokens(stats, config, specials=specials, progress=progress)
    kinds = scored["kind"].value_counts().to_dict()
    cand = scored[scored["kind"] == "word"].sort_values(["score", "n_sentences", "token"],
                                                         ascending=[False, False, True], kind="stable")
    cand = cand[CANDIDATE_COLUMNS].reset_index(drop=True)
    cand.attrs.update({"n_predicted_tokens": int(len(scored)), "kinds": {k: int(v) for k, v in kinds.items()},
                       "n_sentences": int(len(sentences)),
                       "top_k": int(predictions["rank"].max()) if len(predictions) else 0})
    return cand


def save_candidates(candidates: pd.DataFrame, path: str | Path) -> Path:
    """Write the candidate table (Parquet, atomic) — the input of the review widget and the Voilà app."""
    from toolkit.io import atomic_write_parquet

    return atomic_write_parquet(candidates, path)


def load_candidates(path: str | Path) -> pd.DataFrame:
    """Read a candidate table written by :func:`save_candidates` (``token`` and ``examples`` columns required)."""
    p = Path(path)
    if not p.is_file():
        raise ToolkitError(f"{p}: candidate file not found (run notebook 05 or `python -m toolkit candidates`)")
    try:
        frame = pd.read_parquet(p)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a bad file
        raise ToolkitError(f"{p}: not a candidate table ({type(exc).__name__}: {exc})") from None
    missing = {"token", "examples", "score"} - set(frame.columns)
    if missing:
        raise ToolkitError(f"{p}: missing columns {sorted(missing)}")
    if frame["token"].duplicated().any():
        raise ToolkitError(f"{p}: duplicate tokens in the candidate table")
    frame["examples"] = frame["examples"].map(lambda v: [str(x) for x in v] if v is not None else [])
    return frame


__all__ = ["CANDIDATE_COLUMNS", "NameScoreConfig", "common_words", "fill_mask", "load_candidates", "ner_shares",
           "rank_candidates", "save_candidates", "score_tokens", "token_kind", "token_statistics",
           "vocabulary_surfaces"]
