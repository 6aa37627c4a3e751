"""Audit metrics: pure functions on arrays, sets and DataFrames (methods.md §4, §5).

Nothing here loads a model or reads a file. The probing code (``toolkit.audit``) produces a *predictions* frame with
one row per probed word position and at least the columns

``doc_id``, ``person_id``
    the document probed and the individual it is about;
``original``
    the word at that position in the training text;
``predicted``
    the word the model predicted there (NaN/None when nothing was predicted: such rows predict no type);
``protected``
    whether the position is protected (methods.md §2); utility is computed over the other positions.

Every word is compared after :func:`normalize_word` (NFKC + lower-case, methods.md §1), applied here again to both sides
so that a caller who passes raw strings gets the same numbers as one who passes normalised ones.

Definitions (methods.md §4, paper 000 §5.1, 001 §5.3):

* **Utility** = ``mean(normalize(predicted) == normalize(original))`` over non-protected positions: the whole
  prediction is compared with the word (``": okafor"`` at the position of ``okafor`` is wrong).
* **Privacy** = ``1 − |L ∩ I| / |I|`` with ``L`` the set of word types predicted *anywhere* (any row, protected or
  not, at the right place or not) and ``I`` the identifier vocabulary; direct / indirect / novel privacy use
  ``I_direct``, ``I_indirect`` and ``I ∩ novel``. A prediction is the decoded string of the arg-max tokens at a
  word's positions, which need not be one word (``": okafor"``, ``"al okafor"``): it enters ``L`` as **its words**,
  split by the word rule of methods.md §1 (maximal runs of letters and digits with combining marks attached,
  :func:`toolkit.identifiers.words.iter_words`) and normalised (:func:`prediction_words`), so that ``"al Okafor"``
  adds ``al`` and ``okafor``. Comparing whole strings with word types instead would miss every identifier the model
  wrote next to punctuation or another word, i.e. under-count leaks. The regurgitation table and the count
  membership attack (:mod:`toolkit.metrics.mia`) use the same ``L``.

The membership attacks' ROC figures are in :mod:`toolkit.metrics.mia`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from toolkit.identifiers.words import iter_words, normalize_term

__all__ = ["check_columns", "heldout_gain_interval", "heldout_utility", "leaked", "leaked_by_category", "norm_series",
           "norm_set", "normalize_word", "predicted_types", "prediction_words", "privacy", "privacy_report",
           "regurgitation_table", "utility"]

# ---------------------------------------------------------------------------------------------------------------------
# normalisation helpers


def normalize_word(w: str) -> str:
    """NFKC-normalise and lower-case one word (methods.md §1); the same as ``toolkit.identifiers.normalize_term(w)``."""
    return normalize_term(w, lowercase=True)


def norm_set(words: Iterable[str] | None) -> set[str]:
    """Normalised set of ``words``; missing values (None/NaN) are dropped."""
    if words is None:
        return set()
    return {normalize_word(w) for w in words if isinstance(w, str)}


def norm_series(values) -> pd.Series:
    """Normalise a column of words, calling :func:`normalize_word` once per distinct value; non-strings → NaN."""
    s = pd.Series(values, copy=False) if not isinstance(values, pd.Series) else values
    s = s.astype(object)
    uniq = pd.unique(s)
    mapping = {u: normalize_word(u) for u in uniq if isinstance(u, str)}
    return s.map(mapping)  # values absent from the mapping (None, NaN, numbers) become NaN


def _words_of(prediction: str) -> tuple[str, ...]:
    """The normalised words of one prediction string, in order (duplicates kept)."""
    return tuple(normalize_word(prediction[s:e]) for s, e in iter_words(prediction))


def prediction_words(values) -> pd.Series:
    """The words of each prediction (module docstring): a tuple of normalised word types per value, split by the word
    rule of methods.md §1, ``()`` for a missing prediction (None/NaN) or one without a letter or digit (``"."``).

    Each distinct value is split once. ``": Okafor"`` → ``("okafor",)``; ``"al Okafor"`` → ``("al", "okafor")``.
    """
    s = pd.Series(values, copy=False) if not isinstance(values, pd.Series) else values
    s = s.astype(object)
    mapping = {u: _words_of(u) for u in pd.unique(s) if isinstance(u, str)}
    return pd.Series([mapping.get(v, ()) if isinstance(v, str) else () for v in s.to_numpy()], index=s.index,
                     dtype=object)


def predicted_types(values) -> set[str]:
    """``L``: the normalised word types of all predictions in ``values`` (a column of predicted strings, or a
    predictions frame: its ``predicted`` column), each prediction split into words (:func:`prediction_words`)."""
    if isinstance(values, pd.DataFrame):
        check_columns(values, ("predicted",))
        values = values["predicted"]
    uniq = pd.unique(pd.Series(values, copy=False).astype(object))
    return {w for u in uniq if isinstance(u, str) for w in _words_of(u)}


def _accuracy(pred: pd.Series, orig: pd.Series) -> float:
    """Share of rows with equal (already normalised) words; a missing prediction is wrong; empty → nan."""
    if len(pred) == 0:
        return float("nan")
    eq = (pred.to_numpy(dtype=object) == orig.to_numpy(dtype=object)) & pred.notna().to_numpy()
    return float(np.mean(eq))


def check_columns(predictions: pd.DataFrame, columns: Sequence[str]) -> None:
    missing = [c for c in columns if c not in predictions.columns]
    if missing:
        raise ValueError(f"predictions frame lacks column(s) {missing}; it has {list(predictions.columns)}")


# ---------------------------------------------------------------------------------------------------------------------
# utility and privacy (methods.md §4)


def utility(predicted: Sequence[str], original: Sequence[str]) -> float:
    """Fill-mask / next-word utility: accuracy of normalised equality (methods.md §4 *Utility*; 000 §5.1).

    .. math:: U = \\frac{1}{N} \\sum_{i=1}^{N} [\\mathrm{norm}(\\hat w_i) = \\mathrm{norm}(w_i)]

    Callers pass only the non-protected positions. A missing prediction (None/NaN) counts as wrong.

    Returns
    -------
    float
        The accuracy in [0, 1]; ``nan`` when there are no positions.
    """
    if len(predicted) != len(original):
        raise ValueError(f"predicted and original differ in length ({len(predicted)} != {len(original)})")
    return _accuracy(norm_series(list(predicted)), norm_series(list(original)))


def heldout_utility(predictions: pd.DataFrame, person_ids: Iterable[str]) -> float:
    """Utility on documents the model never trained on (methods.md §4 *Held-out utility*).

    .. math:: U_{\\text{held-out}} = \\frac{1}{|H|} \\sum_{i \\in H} [\\mathrm{norm}(\\hat w_i) = \\mathrm{norm}(w_i)]

    with ``H`` the non-protected rows of ``predictions`` whose ``person_id`` is in ``person_ids`` (the non-members).
    §4's utility is measured on the training documents, so it also rewards memorising them — the very thing a
    privacy-preserving strategy should not do; this one measures what the fine-tuning taught about notes in general.
    ``nan`` when there are no such rows.
    """
    correct, scored = _heldout_counts(predictions, sorted(set(person_ids)))
    return float(correct.sum() / scored.sum()) if scored.sum() else float("nan")


def _heldout_counts(predictions: pd.DataFrame, people: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Per individual of ``people`` (in order): correct and scored non-protected words (:func:`heldout_utility`'s)."""
    check_columns(predictions, ("person_id", "predicted", "original", "protected"))
    held = predictions[predictions["person_id"].isin(set(people)) & ~predictions["protected"].astype(bool)]
    pred, orig = norm_series(held["predicted"]), norm_series(held["original"])
    ok = (pred.to_numpy(dtype=object) == orig.to_numpy(dtype=object)) & pred.notna().to_numpy()
    by = pd.DataFrame({"p": held["person_id"].to_numpy(), "ok": ok}).groupby("p")["ok"].agg(["sum", "count"])
    by = by.reindex(people, fill_value=0)
    return by["sum"].to_numpy(float), by["count"].to_numpy(float)


def heldout_gain_interval(model: pd.DataFrame, base: pd.DataFrame, plain: pd.DataFrame, person_ids: Iterable[str],
                          *, n_bootstrap: int = 2000, confidence: float = 0.95,
                          seed: int = 0) -> tuple[float, float, float]:
    """The gain retained on held-out notes and its percentile interval, by a bootstrap over individuals:

    .. math:: G = \\frac{U - U_{\\text{base}}}{U_{\\text{plain}} - U_{\\text{base}}}, \\qquad
              U_m = \\frac{\\sum_{i \\in H} c_{m,i}}{\\sum_{i \\in H} n_{m,i}}

    with ``c_{m,i}`` / ``n_{m,i}`` the correct / scored non-protected words of non-member ``i`` in model ``m``'s
    predictions (:func:`heldout_utility` per individual; ``model``, ``base`` and ``plain``: the probe's prediction
    tables of the model, the untouched base and plain fine-tuning, on the same notes). Each resample draws the
    individuals of ``person_ids`` with replacement — one draw for all three models, so the comparison is paired and
    the words of one patient's notes move together (they are not independent) — and recomputes G; the interval is the
    resamples' (1 − confidence)/2 and (1 + confidence)/2 quantiles (a resample with U_plain = U_base is left out).
    Returns ``(G, low, high)``; all ``nan`` where G is undefined (no scored word, or U_plain ≤ U_base) or not
    estimable: where plain fine-tuning's own gain U_plain − U_base, resampled the same way, is not above 0 at that
    confidence (its (1 − confidence)/2 quantile ≤ 0). A ratio whose denominator may be 0 has an unbounded confidence
    set (Fieller, 1954), and its point swings from large negative to large positive values: a base pre-trained on
    300 patients, which plain fine-tuning on 100 did not improve (0.7716 against 0.7729), gave DP models "gains
    retained" of 67% [−405%, 510%] and −128% [−1161%, 1223%] (CHANGELOG.md, 2026-11-29, the defect fixed).

    Why: the frontier's DP rows keep a few percent of the gain at these sizes, and whether two of them differ, or
    one from zero, is a question of the held-out sample (methods.md §4; the frontier, docs/results.md).
    """
    people = sorted(set(person_ids))
    counts = [_heldout_counts(t, people) for t in (model, base, plain)]
    (c, n), (cb, nb), (cp, npl) = counts

    def gain(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """G and plain's gain U_plain − U_base, per row of weights."""
        with np.errstate(divide="ignore", invalid="ignore"):
            u, ub, up = ((w @ x) / (w @ y) for x, y in ((c, n), (cb, nb), (cp, npl)))
            return (u - ub) / (up - ub), up - ub

    point, plain_gain = (float(x[0]) for x in gain(np.ones((1, len(people))))) if people else (math.nan, math.nan)
    if not math.isfinite(point) or not plain_gain > 0:
        return math.nan, math.nan, math.nan
    rng = np.random.default_rng(seed)
    weights = rng.multinomial(len(people), np.full(len(people), 1 / len(people)), size=n_bootstrap).astype(float)
    draws, plain_draws = gain(weights)
    tail = (1 - confidence) / 2
    if not np.quantile(plain_draws[np.isfinite(plain_draws)], tail) > 0:  # plain's gain not significant: no ratio
        return math.nan, math.nan, math.nan
    draws = draws[np.isfinite(draws)]
    return point, float(np.quantile(draws, tail)), float(np.quantile(draws, 1 - tail))


def leaked(predictions: Iterable[str], identifiers: Iterable[str]) -> set[str]:
    """``L ∩ I``: the normalised identifier types that were predicted at least once (methods.md §4 *Privacy*).

    ``predictions``: predicted strings (or word types); each is split into words (:func:`predicted_types`).
    """
    return predicted_types(list(predictions)) & norm_set(identifiers)


def privacy(predictions: Iterable[str], identifiers: Iterable[str]) -> float:
    """Privacy = 1 − |L ∩ I| / |I| (methods.md §4 *Privacy*; 000 §5.1 "Metrics", 001 §5.3).

    ``L`` is the set of word types predicted anywhere (at the right place or not): the words of every string in
    ``predictions`` (:func:`predicted_types`); ``I`` the identifier vocabulary; both are compared after
    :func:`normalize_word`. Privacy = 1 means no identifier was ever predicted, 0 that all were.

    Returns
    -------
    float
        In [0, 1]. **1.0 when** ``I`` **is empty**: there is nothing to leak (choice; the alternative, nan, would
        make an empty identifier category poison averages).
    """
    ids = norm_set(identifiers)
    if not ids:
        return 1.0
    return 1.0 - len(predicted_types(list(predictions)) & ids) / len(ids)


def _privacy_counts(L: set[str], ids: set[str]) -> tuple[float, int, int]:
    n_leaked = len(L & ids)
    return (1.0 - n_leaked / len(ids) if ids else 1.0), len(ids), n_leaked


def privacy_report(predictions: pd.DataFrame, i_direct: set, i_indirect: set, *,
                   novel: set | None = None) -> dict:
    """Utility and privacy of one probed checkpoint (methods.md §4).

    Parameters
    ----------
    predictions : DataFrame
        One row per probed position with columns ``predicted``, ``original``, ``protected`` (bool), ``doc_id``,
        ``person_id`` (see the module docstring).
    i_direct, i_indirect : set of str
        The identifier vocabulary ``I_direct`` and ``I_indirect`` (methods.md §2); ``I = I_direct ∪ I_indirect``.
    novel : set of str, optional
        Identifier types absent from the base model's training data. When given, privacy is also reported over
        ``I_novel = I ∩ novel`` (types in ``novel`` that are not identifiers are ignored).

    Returns
    -------
    dict
        ``utility`` (over rows with ``protected == False``; nan when there are none), ``n_utility_positions``,
        ``privacy``, ``direct_privacy``, ``indirect_privacy`` (each ``1 − |L ∩ X| / |X|``, 1.0 for an empty ``X``),
        ``n_identifiers``, ``n_leaked``, ``n_direct``, ``n_direct_leaked``, ``n_indirect``, ``n_indirect_leaked``,
        and with ``novel``: ``novel_privacy``, ``n_novel``, ``n_novel_leaked``. ``L`` is the set of words predicted
        in **all** rows, protected or not, each prediction split into its words (:func:`predicted_types`).
    """
    check_columns(predictions, ("predicted", "original", "protected"))
    unprotected = ~predictions["protected"].astype(bool).to_numpy()
    pred = norm_series(predictions["predicted"])
    orig = norm_series(predictions["original"])
    L = predicted_types(predictions["predicted"])
    direct, indirect = norm_set(i_direct), norm_set(i_indirect)
    all_ids = direct | indirect

    out: dict = {"utility": _accuracy(pred[unprotected], orig[unprotected]),
                 "n_utility_positions": int(unprotected.sum())}
    out["privacy"], out["n_identifiers"], out["n_leaked"] = _privacy_counts(L, all_ids)
    out["direct_privacy"], out["n_direct"], out["n_direct_leaked"] = _privacy_counts(L, direct)
    out["indirect_privacy"], out["n_indirect"], out["n_indirect_leaked"] = _privacy_counts(L, indirect)
    if novel is not None:
        out["novel_privacy"], out["n_novel"], out["n_novel_leaked"] = _privacy_counts(L, all_ids & norm_set(novel))
    return out


def leaked_by_category(predictions: pd.DataFrame, identifier_categories: dict[str, str]) -> pd.DataFrame:
    """Identifiers and leaked identifiers per category (methods.md §2 categories, §4 *Privacy*).

    Parameters
    ----------
    predictions : DataFrame
        With a ``predicted`` column; ``L`` = the words of all predictions (:func:`predicted_types`).
    identifier_categories : dict
        Identifier type → category (a PII category for direct identifiers, or e.g. a biomedical NER class for
        indirect ones, 001 Fig. 7). Terms are normalised; when two spellings normalise to one term, the first
        category wins.

    Returns
    -------
    DataFrame
        Columns ``category``, ``n_identifiers`` (distinct types), ``n_leaked`` (of those, predicted at least once),
        one row per category, sorted by category.
    """
    check_columns(predictions, ("predicted",))
    L = predicted_types(predictions)
    t = pd.DataFrame({"term": [normalize_word(k) for k in identifier_categories],
                      "category": list(identifier_categories.values())}).drop_duplicates("term")
    t["leaked"] = t["term"].isin(L)
    out = (t.groupby("category", sort=True)
           .agg(n_identifiers=("term", "size"), n_leaked=("leaked", "sum"))
           .reset_index())
    out["n_leaked"] = out["n_leaked"].astype(np.int64)
    out["n_identifiers"] = out["n_identifiers"].astype(np.int64)
    return out


def regurgitation_table(predictions: pd.DataFrame, train_frequency: dict[str, int] | pd.Series,
                        identifiers: set) -> pd.DataFrame:
    """How often each identifier type was predicted, against its training frequency (methods.md §4 *Regurgitation*;
    000 Fig. 5).

    Parameters
    ----------
    predictions : DataFrame
        Columns ``predicted`` and ``original``.
    train_frequency : dict or Series
        Term → number of occurrences in the training data (keys normalised and summed when they collide;
        an identifier missing here gets 0).
    identifiers : set of str
        The identifier types to report (usually ``I``).

    Returns
    -------
    DataFrame
        One row per normalised identifier type, with columns ``term``, ``train_frequency``,
        ``n_predicted`` (rows whose prediction has the term among its words, anywhere: :func:`prediction_words`,
        the ``L`` of :func:`privacy_report`) and ``n_predicted_correct`` (of those, rows at one of the term's own
        positions: ``original == term``). Sorted by
        ``n_predicted`` (descending), then ``train_frequency`` (descending), then ``term``. Identifiers never
        predicted are kept with 0.
    """
    check_columns(predictions, ("predicted", "original"))
    hits = pd.DataFrame({"word": prediction_words(predictions["predicted"]).to_numpy(),
                         "original": norm_series(predictions["original"]).to_numpy()})
    hits["row"] = np.arange(len(hits))
    hits = hits.explode("word").dropna(subset=["word"]).drop_duplicates(["row", "word"])  # a row counts a word once
    n_pred = hits["word"].value_counts()
    n_correct = hits.loc[hits["word"] == hits["original"], "word"].value_counts()
    freq = pd.Series(train_frequency, dtype=float) if not isinstance(train_frequency, pd.Series) \
        else train_frequency.astype(float)
    if len(freq):
        freq = freq.groupby(norm_series(pd.Series(freq.index, index=freq.index)).to_numpy()).sum()
    terms = sorted(norm_set(identifiers))
    out = pd.DataFrame({
        "term": terms,
        "train_frequency": freq.reindex(terms).fillna(0).to_numpy(dtype=np.int64),
        "n_predicted": n_pred.reindex(terms).fillna(0).to_numpy(dtype=np.int64),
        "n_predicted_correct": n_correct.reindex(terms).fillna(0).to_numpy(dtype=np.int64),
    })
    return out.sort_values(["n_predicted", "train_frequency", "term"], ascending=[False, False, True],
                           kind="stable").reset_index(drop=True)
