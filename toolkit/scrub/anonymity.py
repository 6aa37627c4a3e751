"""The anonymity test (methods.md §7.6, paper 003 §5): how often does the model still fill a name slot with a name?

On test sentences disjoint from the development set (100 seen + 100 unseen by default) the top ``k`` = 20 predictions
at the mask are collected (4,000 predictions). A prediction is **name-like** when it is a word (``kind == "word"``,
:func:`~toolkit.scrub.candidates.token_kind`) and

* its NFKC lower-cased form is in the ``names`` list (the reviewed names, a name list, or — on the synthetic sample —
  every word of a gold PATIENT/DOCTOR span), or
* its automatic name-likeness score (:func:`~toolkit.scrub.candidates.score_tokens` on the test predictions) is at
  least ``threshold`` (when a score config is given).

Scrubbed tokens (``unk`` + 13 digits) are never name-like; they are counted apart (``n_scrubbed_predicted``).

``anonymity.json`` (written by :func:`write_anonymity` and ``python -m toolkit anonymity-test``)::

    top_k                     predictions kept per sentence (20)
    n_sentences               test sentences, and n_sentences_by_source {"seen": .., "unseen": ..}
    n_predictions             n_sentences × top_k (paper: 4,000)
    n_name_like               name-like predictions (paper: 8)            + n_name_like_by_source
    share_name_like           n_name_like / n_predictions (paper: 0.2%)
    best_rank                 best (smallest, 1-based) rank of a name-like prediction; null when none
                              (paper: 6 seen, 14 unseen)                  + best_rank_by_source
    n_sentences_with_name     sentences with at least one name-like prediction (paper: 8 of 200) + _by_source
    n_distinct_name_like      distinct name-like tokens; max_name_repeats: most predictions of one of them
    n_sentences_with_original sentences whose original name is known (hashed, ``original_hashes``)
    n_original_name_predicted sentences where a top-k prediction equals a word of the original name (paper: 0)
                              + _by_source
    n_scrubbed_predicted      predictions of scrubbed ``unk…`` tokens
    n_in_name_list, n_auto_name_like   the two parts of the name-like rule; name_like_rule, threshold: the rule
    model                     the model tested

``predictions.parquet`` beside it has one row per prediction (sentence_id, source, rank, token_id, token, prob, kind,
in_name_list, auto_score, name_like, scrubbed, original). Counts only go to the terminal.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from toolkit.errors import ToolkitError
from toolkit.identifiers.words import normalize_term
from toolkit.scrub.candidates import NameScoreConfig, fill_mask, score_tokens, token_kind, token_statistics
from toolkit.scrub.sentences import word_hash

ANONYMITY_KEYS = ("n_predictions", "n_name_like", "share_name_like", "best_rank", "n_sentences_with_name",
                  "n_original_name_predicted")


def _by_source(frame: pd.DataFrame, fn) -> dict[str, Any]:
    return {str(s): fn(g) for s, g in frame.groupby("source", sort=True)}


def _best_rank(g: pd.DataFrame) -> int | None:
    r = g.loc[g["name_like"], "rank"]
    return int(r.min()) if len(r) else None


def anonymity_test(model, tokenizer, sentences: pd.DataFrame, *, top_k: int = 20,
                   names: Iterable[str] | None = None, score_config: NameScoreConfig | None = None,
                   threshold: float = 0.5, batch_size: int = 64, progress: bool = False,
                   model_name: str | None = None) -> tuple[dict[str, Any], pd.DataFrame]:
    """Run the methods.md §7.6 test; returns ``(report, predictions)`` (fields in the module docstring).

    ``sentences``: a frame from :func:`~toolkit.scrub.sentences.read_sentences` /
    :func:`~toolkit.scrub.sentences.split_dev_test` (``sentence``, ``sentence_id``, ``source``,
    ``original_hashes``). ``names``: the name list; ``score_config``: enables the automatic part of the rule.
    """
    if names is None and score_config is None:
        raise ToolkitError("the anonymity test needs a name list, an automatic name-likeness score, or both")
    sent = sentences.reset_index(drop=True)
    if sent.empty:
        raise ToolkitError("no test sentences")
    for col, default in (("source", "unknown"), ("sentence_id", None), ("original_hashes", None)):
        if col not in sent:
            sent[col] = [f"s{i + 1:05d}" for i in range(len(sent))] if col == "sentence_id" else (
                [[] for _ in range(len(sent))] if col == "original_hashes" else default)
    preds = fill_mask(model, tokenizer, sent["sentence"].tolist(), top_k=top_k, batch_size=batch_size,
                      progress=progress)
    name_set = {normalize_term(n.strip()) for n in (names or ()) if n and n.strip()}
    specials = set(tokenizer.all_special_tokens)
    tags = score_config.tags if score_config is not None else ("PERSON", "GPE")
    uniq = preds["token"].unique()
    kind = {t: token_kind(t, specials=specials, tags=tags) for t in uniq}
    auto = dict.fromkeys(uniq, 0.0)
    if score_config is not None:
        stats = token_statistics(preds, sent)
        scored = score_tokens(stats, score_config, specials=specials, progress=progress)
        auto.update(dict(zip(scored["token"], scored["score"].astype(float))))
    preds = preds.merge(sent[["sentence_id", "source", "original_hashes"]], left_on="sentence_index",
                        right_index=True)
    preds["kind"] = preds["token"].map(kind)
    is_word = preds["kind"] == "word"
    preds["in_name_list"] = is_word & preds["token"].map(lambda t: normalize_term(t) in name_set)
    preds["auto_score"] = preds["token"].map(auto).astype(float)
    auto_like = is_word & (preds["auto_score"] >= threshold) if score_config is not None else is_word & False
    preds["name_like"] = preds["in_name_list"] | auto_like
    preds["scrubbed"] = preds["kind"] == "scrubbed"
    hashes = {t: word_hash(t) for t in uniq}
    preds["original"] = [hashes[t] in set(h) if h is not None and len(h) else False
                         for t, h in zip(preds["token"], preds["original_hashes"])]
    preds = preds.drop(columns=["original_hashes", "sentence_index"])
    preds = preds[["sentence_id", "source", "rank", "token_id", "token", "prob", "kind", "in_name_list",
                   "auto_score", "name_like", "scrubbed", "original"]].reset_index(drop=True)

    has_orig = sent["original_hashes"].map(lambda h: h is not None and len(h) > 0)
    with_name = preds.groupby("sentence_id")["name_like"].any()
    with_orig = preds.groupby("sentence_id")["original"].any()
    src_of = dict(zip(sent["sentence_id"], sent["source"]))
    like = preds[preds["name_like"]]
    n_pred = int(len(preds))
    report: dict[str, Any] = {
        "model": model_name, "top_k": int(top_k), "n_sentences": int(len(sent)),
        "n_sentences_by_source": {str(k): int(v) for k, v in sent["source"].value_counts().sort_index().items()},
        "n_predictions": n_pred, "n_name_like": int(len(like)),
        "share_name_like": float(len(like) / n_pred) if n_pred else 0.0,
        "n_name_like_by_source": _by_source(preds, lambda g: int(g["name_like"].sum())),
        "best_rank": _best_rank(preds), "best_rank_by_source": _by_source(preds, _best_rank),
        "n_sentences_with_name": int(with_name.sum()),
        "n_sentences_with_name_by_source": {s: int(sum(v for k, v in with_name.items() if src_of[k] == s))
                                            for s in sorted(set(src_of.values()))},
        "n_distinct_name_like": int(like["token"].nunique()),
        "max_name_repeats": int(like["token"].value_counts().max()) if len(like) else 0,
        "n_sentences_with_original": int(has_orig.sum()),
        "n_original_name_predicted": int(with_orig.sum()),
        "n_original_name_predicted_by_source": {s: int(sum(v for k, v in with_orig.items() if src_of[k] == s))
                                                for s in sorted(set(src_of.values()))},
        "n_scrubbed_predicted": int(preds["scrubbed"].sum()),
        "n_in_name_list": int(preds["in_name_list"].sum()), "n_auto_name_like": int(auto_like.sum()),
        "name_like_rule": "word token and (in the name list" + (f" or name-likeness score >= {threshold})"
                                                               if score_config is not None else ")"),
        "threshold": float(threshold) if score_config is not None else None,
        "n_names_in_list": len(name_set),
    }
    return report, preds


def write_anonymity(report: dict[str, Any], predictions: pd.DataFrame, out_dir: str | Path) -> Path:
    """Write ``anonymity.json`` and ``predictions.parquet`` into ``out_dir`` (atomic, :mod:`toolkit.io`)."""
    from toolkit.io import atomic_write_json, atomic_write_parquet

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_parquet(predictions, out / "predictions.parquet")
    atomic_write_json(report, out / "anonymity.json")
    return out / "anonymity.json"


def prediction_count_table(predictions: pd.DataFrame, *, source: str | None = None, single_from: int = 100,
                           bins: Sequence[int] = (60, 30, 10, 4), hide: Iterable[str] = ()) -> pd.DataFrame:
    """Paper 003 Tables 1–2: the tokens predicted at least ``bins[-1]`` times, grouped by how often.

    Tokens predicted ``single_from`` times or more get a row each (``PERSON 179``); the others are grouped in the
    ranges ``bins[0] ≤ t < single_from``, ``bins[1] ≤ t < bins[0]``, … (most frequent first inside a row).
    Tokens in ``hide`` are shown as ``‹name›``. ``source``: ``seen`` / ``unseen`` / ``None`` (all).
    """
    p = predictions if source is None else predictions[predictions["source"] == source]
    counts = p["token"].value_counts()
    hidden = set(hide)
    show = lambda t: "‹name›" if t in hidden else (t if t.strip() else repr(t))  # noqa: E731
    rows = [{"tokens": show(t), "times predicted": str(int(n))} for t, n in counts[counts >= single_from].items()]
    edges = [single_from] + list(bins)
    for hi, lo in zip(edges, edges[1:]):
        sel = counts[(counts >= lo) & (counts < hi)]
        if len(sel):
            rows.append({"tokens": "; ".join(show(t) for t in sel.index),
                         "times predicted": f"{lo} ≤ t < {hi}" if hi != single_from or lo < single_from
                         else f"{lo} ≤ t"})
    return pd.DataFrame(rows, columns=["tokens", "times predicted"])


def anonymity_summary(reports: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """One row per report (e.g. ``before`` / ``after`` scrubbing) with the methods.md §7.6 numbers."""
    rows = {}
    for name, r in reports.items():
        b = r.get("best_rank_by_source", {})
        rows[name] = {"predictions": r["n_predictions"], "name-like": r["n_name_like"],
                      "share name-like": f"{r['share_name_like']:.2%}",
                      "best rank (seen / unseen)": f"{b.get('seen') or '–'} / {b.get('unseen') or '–'}",
                      "sentences with a name": f"{r['n_sentences_with_name']} of {r['n_sentences']}",
                      "original name predicted": f"{r['n_original_name_predicted']} of "
                                                 f"{r['n_sentences_with_original']}",
                      "scrubbed tokens predicted": r["n_scrubbed_predicted"]}
    return pd.DataFrame(rows).T


def anonymity_by_review(predictions: dict[str, pd.DataFrame], shown: Iterable[str], judged: Iterable[str]
                        ) -> pd.DataFrame:
    """The anonymity test's name-like predictions split by what the review knew of them, one row per model.

    When the review is scripted from the same name list the test counts (notebook 05's headless ``"gold"`` review),
    the test is close to circular: every listed name among the review's candidates is judged a name and scrubbed,
    so after scrubbing it cannot be predicted. The split makes that visible: name-like predictions of tokens the
    review **judged a name**, of tokens it was **shown but judged not a name**, and of tokens it **never saw** (not
    among its candidates). Only the last is evidence the review's circularity cannot produce: names the model
    still guesses that the review had no chance to remove. ``predictions``: label → the predictions frame of
    :func:`anonymity_test`; ``shown``: the review's candidate tokens; ``judged``: the tokens judged names. Tokens
    compare by their NFKC lower-cased form. Columns: ``predictions``, ``name-like``, ``judged a name``,
    ``shown, judged not a name``, ``never seen by the review``, ``share never seen``, ``best rank, never seen``.
    """
    seen = {normalize_term(t) for t in shown}
    names = {normalize_term(t) for t in judged}
    rows = {}
    for label, p in predictions.items():
        like = p[p["name_like"]]
        norm = like["token"].map(normalize_term)
        never = like[~norm.isin(seen) & ~norm.isin(names)]
        rows[label] = {"predictions": int(len(p)), "name-like": int(len(like)),
                       "judged a name": int(norm.isin(names).sum()),
                       "shown, judged not a name": int((norm.isin(seen) & ~norm.isin(names)).sum()),
                       "never seen by the review": int(len(never)),
                       "share never seen": float(len(never) / len(p)) if len(p) else 0.0,
                       "best rank, never seen": int(never["rank"].min()) if len(never) else None}
    return pd.DataFrame.from_dict(rows, orient="index")


__all__ = ["ANONYMITY_KEYS", "anonymity_by_review", "anonymity_summary", "anonymity_test", "prediction_count_table",
           "write_anonymity"]
