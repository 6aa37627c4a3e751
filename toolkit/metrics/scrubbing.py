"""Measuring the two-step method on a corpus with gold name spans (the synthetic sample; methods.md §7).

On real data a person judges which predictions are names (paper 003). On a corpus with gold spans the judgement can
be measured: the words of gold name spans (``PATIENT``, ``DOCTOR`` …) are the names. These helpers give

* :func:`gold_name_words` — that name list (NFKC lower-cased words);
* :func:`gold_review_script` — a scripted review that marks exactly the gold names (the headless notebook run);
* :func:`missed_names` — the names NER left in the training text, how often, whether each is a vocabulary entry,
  predicted in the development set, judged a name, and still in the vocabulary after scrubbing;
* :func:`presort_quality` — how well the automatic name-likeness score orders the candidates (average precision,
  ranks of the names).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import numpy as np
import pandas as pd

from toolkit.identifiers.words import normalize_term, word_pattern

NAME_LABELS = ("PATIENT", "DOCTOR")


def gold_name_words(corpus, labels: Iterable[str] = NAME_LABELS) -> set[str]:
    """NFKC lower-cased words of every gold span with one of ``labels``."""
    wanted, wp = set(labels), word_pattern()
    return {normalize_term(w) for d in corpus for sp in d.spans if sp.label in wanted
            for w in wp.findall(d.text, sp.start, sp.end)}


def gold_review_script(candidates: pd.DataFrame, names: set[str]) -> pd.DataFrame:
    """``token, decision``: ``name`` for candidates whose lower-cased form is a gold name word, else ``not_name``."""
    dec = ["name" if normalize_term(t) in names else "not_name" for t in candidates["token"]]
    return pd.DataFrame({"token": candidates["token"].to_numpy(), "decision": dec})


def missed_names(anonymized_corpus, tokenizer, *, labels: Iterable[str] = NAME_LABELS, min_count: int = 1,
                 candidates: pd.DataFrame | None = None, judged: Iterable[str] = (),
                 scrubbed_tokenizer=None) -> pd.DataFrame:
    """Gold name words that NER left in the (anonymised) text, one row per word type (NFKC lower-cased).

    Columns: ``name``, ``count`` (occurrences left), ``in_vocabulary`` (a vocabulary entry's surface equals the word,
    any case), ``predicted`` (a development-set candidate), ``judged_name``, ``in_vocabulary_after`` (after
    scrubbing, when ``scrubbed_tokenizer`` is given). Sorted by count.
    """
    from toolkit.models import vocabulary_surfaces

    wanted, wp = set(labels), word_pattern()
    counts: Counter[str] = Counter(normalize_term(w) for d in anonymized_corpus for sp in d.spans
                                   if sp.label in wanted for w in wp.findall(d.text, sp.start, sp.end))
    vocab = {normalize_term(s) for s in vocabulary_surfaces(tokenizer).values()}
    cand = {normalize_term(t) for t in candidates["token"]} if candidates is not None else set()
    judged_l = {normalize_term(t) for t in judged}
    rows = [{"name": n, "count": c, "in_vocabulary": n in vocab, "predicted": n in cand,
             "judged_name": n in judged_l} for n, c in counts.items() if c >= min_count]
    out = pd.DataFrame(rows, columns=["name", "count", "in_vocabulary", "predicted", "judged_name"])
    if scrubbed_tokenizer is not None:
        after = {normalize_term(s) for s in vocabulary_surfaces(scrubbed_tokenizer).values()}
        out["in_vocabulary_after"] = out["name"].isin(after)
    return out.sort_values(["count", "name"], ascending=[False, True]).reset_index(drop=True)


def presort_quality(candidates: pd.DataFrame, names: set[str]) -> dict:
    """How the name-likeness score orders the candidates against the gold names: average precision
    (``sklearn.metrics.average_precision_score``; the share of names among candidates is its chance level),
    the ranks (1-based, in score order) of the names, and how many names are in the first quarter."""
    from sklearn.metrics import average_precision_score

    y = np.array([normalize_term(t) in names for t in candidates["token"]])
    order = np.argsort(-candidates["score"].to_numpy(dtype=float), kind="stable")
    ranks = (np.flatnonzero(y[order]) + 1).tolist()
    n = len(candidates)
    return {"n_candidates": n, "n_names": int(y.sum()),
            "average_precision": float(average_precision_score(y, candidates["score"])) if y.any() and not y.all()
            else None,
            "chance": float(y.mean()) if n else None, "name_ranks": ranks,
            "names_in_first_quarter": int(sum(r <= max(1, n // 4) for r in ranks))}


def findings(reports: dict[str, dict], missed: pd.DataFrame, quality: dict, manifest: dict,
             by_review: pd.DataFrame | None = None, circular: bool = False) -> str:
    """Markdown bullets summarising a notebook-05 run from its measured results (nothing written in advance).

    ``by_review``: :func:`toolkit.scrub.anonymity.anonymity_by_review` (the name-like predictions split by what
    the review knew of them); ``circular``: the review was scripted from the name list the test counts, so its
    "after" figure is stated beside the non-circular one (names the review never saw)."""
    lines = []
    if len(missed):
        after = (f"; after scrubbing **{int(missed['in_vocabulary_after'].sum())}** are still vocabulary entries"
                 if "in_vocabulary_after" in missed else "")
        lines.append(f"- **Step 1–2**: NER left {len(missed)} name words 5 times or more in the training text; "
                     f"{int(missed['in_vocabulary'].sum())} became vocabulary entries, "
                     f"{int(missed['predicted'].sum())} are among the model's guesses for the development name "
                     f"slots (review candidates){after}.")
    if quality.get("average_precision") is not None:
        lines.append(f"- **Step 3**: {quality['n_names']} of {quality['n_candidates']} review candidates are names; "
                     f"the automatic score ranks them with average precision {quality['average_precision']:.2f} "
                     f"(chance {quality['chance']:.2f}).")
    lines.append(f"- **Step 4**: {manifest['n_renamed']} vocabulary entries renamed for "
                 f"{manifest['n_names_in_vocabulary']} judged names found in the vocabulary.")
    for label, r in reports.items():
        b = r.get("best_rank_by_source", {})
        lines.append(f"- **Anonymity test, {label}**: {r['n_name_like']} of {r['n_predictions']} predictions "
                     f"name-like ({r['share_name_like']:.2%}; paper 0.2%), best rank {b.get('seen') or '–'} (seen) / "
                     f"{b.get('unseen') or '–'} (unseen), {r['n_sentences_with_name']} of {r['n_sentences']} "
                     f"sentences with a name, the original name guessed in {r['n_original_name_predicted']} of "
                     f"{r['n_sentences_with_original']} sentences; {r['n_scrubbed_predicted']} scrubbed `unk…` "
                     f"predictions.")
        if by_review is not None and label in by_review.index:
            x = by_review.loc[label]
            lines.append(f"  - of these, {x['judged a name']} are of names the review judged, "
                         f"{x['shown, judged not a name']} of names it was shown and judged not a name, and "
                         f"**{x['never seen by the review']}** ({x['share never seen']:.2%} of the predictions) of "
                         "names it never saw" + (" — the figure the scripted review's circularity cannot produce"
                                                 if circular else "") + ".")
    if circular:
        lines.append("- **Circularity**: the review was scripted from the same gold names the test counts, so every "
                     "gold name among the candidates was judged and scrubbed; the 'after scrubbing' share holds "
                     "only names the review never saw. A human review misses names a script does not.")
    return "\n".join(lines)


__all__ = ["NAME_LABELS", "findings", "gold_name_words", "gold_review_script", "missed_names", "presort_quality"]
