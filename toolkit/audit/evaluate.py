"""From probe predictions to the audit's figures (methods.md §4, §5): privacy / utility metrics, leaked identifier
types, regurgitation, and the count-based membership inference attack.

Inputs are the identifiers step's outputs (``load_identifiers(dir)``: terms, positions, spans) and the probe's
DataFrame (one row per word occurrence); outputs are JSON-serialisable dicts and DataFrames.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from toolkit import metrics
from toolkit.corpus import Corpus
from toolkit.identifiers.words import segment_corpus


def identifier_sets(ids: dict[str, Any]) -> dict[str, Any]:
    """``I_direct``, ``I_indirect`` (unigram types), term → category and training frequency (methods.md §2)."""
    t = ids["terms"]
    uni = t[t["n"] == 1]
    categories = {str(r.term): (r.category or "INDIRECT") for r in uni.itertuples() if r.direct or r.indirect}
    return {
        "I_direct": set(uni.loc[uni["direct"], "term"].astype(str)),
        "I_indirect": set(uni.loc[uni["indirect"], "term"].astype(str)),
        "categories": categories,
        "train_frequency": pd.Series(uni["n_occurrences"].to_numpy(), index=uni["term"].astype(str)),
    }


def indirect_by_person(ids: dict[str, Any], corpus: Corpus) -> dict[str, set[str]]:
    """Each individual's unigram indirect-identifier types, from the protected positions of their documents."""
    sets = identifier_sets(ids)
    pos = ids["positions"]
    return _terms_by_person(pos[pos["indirect"] & pos["term"].astype(str).isin(sets["I_indirect"])], corpus)


def _terms_by_person(positions: pd.DataFrame, corpus: Corpus) -> dict[str, set[str]]:
    """The ``term`` types of ``positions`` per individual of ``corpus`` (every individual, possibly empty)."""
    person = {d.doc_id: d.person_id for d in corpus}
    out: dict[str, set[str]] = {p: set() for p in corpus.person_ids}
    for doc_id, term in zip(positions["doc_id"], positions["term"].astype(str)):
        if doc_id in person:
            out[person[doc_id]].add(term)
    return out


def corpus_word_types(corpus: Corpus) -> set[str]:
    """Normalised word types of a corpus (e.g. the base model's ``public`` data, for *novel* identifiers)."""
    w = segment_corpus([d.text for d in corpus], progress=False)
    return set(w.vocab.tolist())


def evaluate_predictions(predictions: pd.DataFrame, ids: dict[str, Any], *,
                         base_vocabulary: set[str] | None = None) -> dict[str, Any]:
    """The ``metrics.json`` of a probe: utility, privacy, direct/indirect (and novel) privacy, leaked types by category.

    ``base_vocabulary``: word types of the base model's training data; identifiers outside it are *novel* (methods.md
    §4).
    """
    sets = identifier_sets(ids)
    novel = None
    if base_vocabulary is not None:
        novel = (sets["I_direct"] | sets["I_indirect"]) - base_vocabulary
    report = metrics.privacy_report(predictions, sets["I_direct"], sets["I_indirect"], novel=novel)
    by_cat = metrics.leaked_by_category(predictions, sets["categories"])
    report["leaked_by_category"] = {str(r.category): {"n_identifiers": int(r.n_identifiers),
                                                      "n_leaked": int(r.n_leaked)} for r in by_cat.itertuples()}
    report["n_predictions"] = int(len(predictions))
    return {k: (float(v) if isinstance(v, float) else v) for k, v in report.items()}


def novel_member_advantage(predictions: pd.DataFrame, ids: dict[str, Any], corpus: Corpus, members: set[str],
                           nonmembers: set[str], *, base_vocabulary: set[str], n_permutations: int = 9999,
                           seed: int = 0) -> dict[str, Any]:
    """Novel-identifier privacy judged as the members' advantage over the non-members (methods.md §4, §11).

    For each individual :math:`p` of ``corpus``: :math:`N_p` = the *novel* identifier types of their documents (the
    unigram identifiers of ``ids`` — the auditor's, over both groups — at ``ids["positions"]`` of :math:`p`'s
    documents, absent from ``base_vocabulary``), :math:`L_p` = the word types predicted on :math:`p`'s own probed
    positions (``predictions``: the probe of members and non-members alike, ``mia_predictions``); hits
    :math:`|N_p \\cap L_p|` of :math:`|N_p|` trials. The members' and the non-members' shares are compared by the
    permutation test over individuals (:func:`toolkit.metrics.significance.member_advantage_test`): a model that
    writes out the identifiers of people it never saw as often as its members' (clinicians many notes share, words
    it can copy from the note's context) shows knowledge of the population, not of its members.

    Returns the test's dict (``members_rate``: the members' share written out, 1 − their per-individual novel
    privacy; ``nonmembers_rate``; ``p_value``) with ``n_novel_types`` (distinct novel types over both groups).
    """
    from toolkit.metrics.significance import member_advantage_test

    found = novel_identifiers_by_person(predictions, ids, corpus, base_vocabulary=base_vocabulary)

    def counts(group):
        ps = sorted(p for p in group if p in found)
        return [len(found[p][0] & found[p][1]) for p in ps], [len(found[p][0]) for p in ps]

    (hm, tm), (hn, tn) = counts(members), counts(nonmembers)
    out = member_advantage_test(hm, tm, hn, tn, n_permutations=n_permutations, seed=seed)
    out["n_novel_types"] = len(set().union(*(t for t, _ in found.values()))) if found else 0
    return out


def novel_identifiers_by_person(predictions: pd.DataFrame, ids: dict[str, Any], corpus: Corpus, *,
                                base_vocabulary: set[str]) -> dict[str, tuple[set[str], set[str]]]:
    """``{person: (N_p, L_p)}`` of :func:`novel_member_advantage`: each individual's novel identifier types and the
    word types predicted on their own probed positions (both normalised)."""
    from toolkit.metrics.probing import norm_set, predicted_types

    sets = identifier_sets(ids)
    novel = norm_set((sets["I_direct"] | sets["I_indirect"]) - base_vocabulary)  # as evaluate_predictions
    types = _terms_by_person(ids["positions"], corpus)
    said = {str(p): predicted_types(g["predicted"]) for p, g in predictions.groupby("person_id", sort=False)}
    return {p: (norm_set(t) & novel, said.get(p, set())) for p, t in types.items()}


def novel_evidence(metrics_json: dict[str, Any]) -> dict[str, Any]:
    """The verdict's novel-identifier input from a probe's ``metrics.json``: ``novel_privacy`` and, where the
    non-members were probed alike, ``member_advantage`` (:func:`novel_member_advantage`)."""
    return {"novel_privacy": metrics_json.get("novel_privacy"),
            "member_advantage": metrics_json.get("novel_member_advantage")}


def regurgitation(predictions: pd.DataFrame, ids: dict[str, Any]) -> pd.DataFrame:
    """Times each identifier type was predicted vs its training frequency (000 Fig. 5)."""
    sets = identifier_sets(ids)
    return metrics.regurgitation_table(predictions, sets["train_frequency"], sets["I_direct"] | sets["I_indirect"])


def membership_scores(predictions: pd.DataFrame, ids: dict[str, Any], corpus: Corpus, *,
                      restrict_to: set[str] | None = None) -> pd.Series:
    """methods.md §5 score: number of an individual's indirect-identifier types predicted on their own documents."""
    return metrics.mia_scores(predictions, indirect_by_person(ids, corpus), restrict_to=restrict_to)


def membership_report(scores: pd.Series, members: set[str], nonmembers: set[str], **kw) -> dict[str, Any]:
    """ROC, AUC, TPR at FPR 0.1% / 1% / 10% (None where unresolvable), bootstrap intervals (methods.md §5)."""
    m = scores[scores.index.isin(members)].to_numpy()
    n = scores[scores.index.isin(nonmembers)].to_numpy()
    return metrics.mia_report(m, n, **kw)
