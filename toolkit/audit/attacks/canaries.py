"""Canaries and exposure (Carlini et al., "The Secret Sharer", USENIX Security 2019).

Seeded synthetic records (a template sentence with a made-up name and an 8-digit record number) are inserted ``r``
times into members' texts before fine-tuning. The exposure of a canary whose secret is ``s`` among the space ``R``
of all possible secrets (:math:`|R| = 10^8`) is

.. math:: \\mathrm{exposure}(s) = \\log_2 |R| - \\log_2 \\mathrm{rank}(s),

``rank`` the position of ``s`` when every ``r ∈ R`` is sorted by the model's log-likelihood of the record (1 = most
likely). Scoring :math:`10^8` records is out of reach, so the rank is extrapolated as in TensorFlow Privacy's
``compute_exposure_extrapolation`` (``tensorflow_privacy/privacy/privacy_tests/secret_sharer/exposures.py``): a
skew-normal distribution (``scipy.stats.skewnorm.fit``) is fitted to the log-likelihoods of 10,000 random secrets,
and :math:`\\mathrm{rank}(s) \\approx 1 + (|R| - 1) \\Pr[\\mathrm{LL} > \\mathrm{LL}(s)]` (TF Privacy fits
perplexities and uses the CDF, the same tail; the ``1 +`` keeps the rank ≥ 1, so exposure ∈ [0, log2 |R|]).
A secret at the median of the random ones has exposure ≈ 1 bit.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np
import pandas as pd

from toolkit.audit.losses import candidate_log_likelihoods, sequence_log_likelihoods
from toolkit.corpus import Corpus, Span

TEMPLATE = "The record number of {name} is {number}."
_SYLLABLES = ("ka", "ro", "mi", "tel", "van", "zu", "quo", "bre", "lin", "dor", "sa", "nex", "vi", "thar", "pel",
              "gon", "ise", "mur", "ca", "fen", "ol", "wy", "sto", "rik")


def _name(rng: np.random.Generator) -> str:
    def word(n: int) -> str:
        return "".join(_SYLLABLES[j] for j in rng.integers(0, len(_SYLLABLES), size=n)).capitalize()
    return f"{word(int(rng.integers(2, 4)))} {word(int(rng.integers(2, 4)))}"


def make_canaries(n: int, *, seed: int = 0, template: str = TEMPLATE, digits: int = 8) -> pd.DataFrame:
    """``n`` seeded canaries: ``canary_id``, ``name`` (made up), ``number`` (``digits`` digits, zero-padded,
    distinct), ``prefix``/``suffix`` (the template around the number) and ``text``."""
    if "{number}" not in template or "{name}" not in template:
        raise ValueError("the template needs {name} and {number}")
    rng = np.random.default_rng(seed)
    names: list[str] = []
    while len(names) < n:
        nm = _name(rng)
        if nm not in names:
            names.append(nm)
    numbers: list[str] = []
    while len(numbers) < n:
        num = f"{int(rng.integers(0, 10 ** digits)):0{digits}d}"
        if num not in numbers:
            numbers.append(num)
    rows = []
    for i, (nm, num) in enumerate(zip(names, numbers)):
        prefix, suffix = template.split("{number}", 1)
        prefix, suffix = prefix.format(name=nm), suffix.format(name=nm)
        rows.append({"canary_id": f"canary-{i:04d}", "name": nm, "number": num, "prefix": prefix, "suffix": suffix,
                     "text": prefix + num + suffix})
    return pd.DataFrame(rows)


def insert_canaries(texts: Sequence[str], canaries: pd.DataFrame, repeats: Sequence[int] = (1, 4, 16), *,
                    seed: int = 0, avoid: Sequence[Sequence[tuple[int, int]]] | None = None
                    ) -> tuple[list[str], pd.DataFrame]:
    """Insert canary ``i`` into ``repeats[i % len(repeats)]`` distinct texts (seeded), each time at the start of a
    seeded sentence (after ``". "``, ``"\\n"`` or at position 0), followed by a space.

    ``avoid[j]`` (optional) lists character spans of text ``j`` that no insertion may split (e.g. its gold PII
    spans: ``"St. Mary"`` holds a sentence-like break).

    Returns the new texts (the inputs are not changed) and the canary table with ``repeats``, ``doc_indices`` and
    ``positions`` (character offsets of the insertions in the *original* texts; a gold span at or after a position
    moves right by ``len(text) + 1``).
    """
    texts = list(texts)
    if not texts:
        raise ValueError("no texts to insert canaries into")
    rng = np.random.default_rng(seed)
    todo: dict[int, list[tuple[int, str]]] = {}
    table = canaries.copy()
    reps, idx_col, pos_col = [], [], []
    for i, r in enumerate(table.itertuples(index=False)):
        rep = int(repeats[i % len(repeats)])
        if rep > len(texts):
            raise ValueError(f"{rep} repeats need {rep} texts, only {len(texts)} given")
        docs = np.sort(rng.choice(len(texts), size=rep, replace=False))
        positions = []
        for d in docs:
            t = texts[d]
            starts = [0] + [m + 2 for m in range(len(t)) if t.startswith(". ", m)] + \
                     [m + 1 for m in range(len(t)) if t[m] == "\n"]
            inside = avoid[d] if avoid is not None else ()
            starts = sorted({p for p in starts if not any(a < p < b for a, b in inside)})
            p = int(starts[int(rng.integers(0, len(starts)))])
            positions.append(p)
            todo.setdefault(int(d), []).append((p, r.text + " "))
        reps.append(rep)
        idx_col.append([int(d) for d in docs])
        pos_col.append(positions)
    out = list(texts)
    for d, ins in todo.items():
        t = texts[d]
        for p, s in sorted(ins, key=lambda x: x[0], reverse=True):  # right to left: earlier offsets stay valid
            t = t[:p] + s + t[p:]
        out[d] = t
    table["repeats"], table["doc_indices"], table["positions"] = reps, idx_col, pos_col
    return out, table


def canaries_into_corpus(corpus: Corpus, n: int, repeats: Sequence[int] = (1, 4, 16), *,
                         seed: int = 0) -> tuple[Corpus, pd.DataFrame]:
    """``corpus`` with ``n`` seeded canaries (:func:`make_canaries`) inserted into its texts
    (:func:`insert_canaries`, never inside a gold span), gold spans moved with the text; and the canary table, with the
    ``doc_ids`` of the documents holding each canary. Documents keep their ids, individuals, splits and labels."""
    docs = list(corpus)
    table = make_canaries(n, seed=seed)
    texts, table = insert_canaries([d.text for d in docs], table, repeats, seed=seed,
                                   avoid=[[(s.start, s.end) for s in d.spans] for d in docs])
    shifts: dict[int, list[tuple[int, int]]] = {}
    for r in table.itertuples(index=False):
        for d, p in zip(r.doc_indices, r.positions):
            shifts.setdefault(d, []).append((p, len(r.text) + 1))
    out = []
    for i, d in enumerate(docs):
        moves = shifts.get(i, [])
        spans = [(s.start + sum(k for p, k in moves if p <= s.start), s.end + sum(k for p, k in moves if p <= s.start),
                  s.label) for s in d.spans]
        out.append(replace(d, text=texts[i], spans=tuple(Span(a, b, lab) for a, b, lab in spans)))
    table["doc_ids"] = [[docs[j].doc_id for j in idx] for idx in table["doc_indices"]]
    return Corpus(out, source=corpus.source), table


def canary_ranges(corpus: Corpus, canaries: pd.DataFrame, *,
                  with_separator: bool = False) -> dict[str, list[tuple[int, int]]]:
    """``doc_id -> [(start, end), ...]``: where the canaries' records stand in the texts of ``corpus`` (every
    occurrence of a canary's ``text`` in the documents named by its ``doc_ids``). ``with_separator``: each range
    also covers the space :func:`insert_canaries` put after the record (when one follows), so that cutting the
    ranges out gives back the text as it was before insertion."""
    out: dict[str, list[tuple[int, int]]] = {}
    for r in canaries.itertuples(index=False):
        for doc_id in dict.fromkeys(r.doc_ids):
            text = corpus.get(doc_id).text
            start = text.find(r.text)
            while start >= 0:
                end = start + len(r.text)
                out.setdefault(doc_id, []).append((start, end + (with_separator and text[end:end + 1] == " ")))
                start = text.find(r.text, start + 1)
    return {k: sorted(v) for k, v in out.items()}


def exposure_from_samples(secret_ll, reference_ll, space: float) -> tuple[np.ndarray, np.ndarray]:
    """``(exposure, rank)`` of secrets with log-likelihoods ``secret_ll`` among ``space`` possible secrets, by a
    skew-normal fit of ``reference_ll`` (log-likelihoods of random secrets): rank = 1 + (space − 1) · P(LL > s)."""
    from scipy.stats import FitError, skewnorm

    ref = np.asarray(reference_ll, dtype=float)
    s = np.atleast_1d(np.asarray(secret_ll, dtype=float))
    log_sf = None
    if np.ptp(ref) > 1e-9 * max(1.0, float(np.abs(ref).max())):
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                log_sf = skewnorm.logsf(s, *skewnorm.fit(ref))
        except FitError:  # nearly identical samples: the optimiser leaves the allowed range
            log_sf = None
    if log_sf is None or not np.all(np.isfinite(log_sf) | (log_sf == -np.inf)):
        # fallback: the empirical tail of the samples themselves (a tie counts half)
        sf = ((ref[None, :] > s[:, None]).sum(1) + 0.5 * (ref[None, :] == s[:, None]).sum(1)) / ref.size
        with np.errstate(divide="ignore"):
            log_sf = np.log(sf)
    log_rank = np.logaddexp(0.0, np.log(space - 1.0) + log_sf)  # natural log of 1 + (space-1) * sf
    exposure = np.log2(space) - log_rank / np.log(2.0)
    return np.clip(exposure, 0.0, np.log2(space)), np.exp(log_rank)


def exposure(model, tokenizer, canaries: pd.DataFrame, *, n_reference: int = 10_000, digits: int = 8, seed: int = 0,
             kind: str | None = None, batch_size: int | None = None,
             scorer: Callable[[list[str]], np.ndarray] | None = None, progress: bool = True,
             pll_copies: int | str | None = None) -> pd.DataFrame:
    """Exposure of every canary under ``model`` (see the module docstring).

    The ``n_reference`` random numbers (seeded, distinct, none equal to a canary's) are the same for all canaries;
    each canary's records are its ``prefix + number + suffix``, scored by the summed log-likelihood (causal) or
    pseudo-log-likelihood (masked; exact, or strided with ``pll_copies = K`` masked copies per record — exact when a
    record has at most K tokens) of the whole record, or with ``pll_copies = "candidate"`` the candidate-token PLL
    of the secret's tokens alone, each masked alone (:mod:`toolkit.audit.pll`; the records differ by the secret)
    (``scorer`` replaces the model's). Any deterministic score keeps an uninserted canary's rank uniform, so the
    exposure test (methods.md §11) holds for every estimator.

    Returns the canary table with ``log_likelihood``, ``rank`` (estimated) and ``exposure`` added.
    """
    space = 10 ** digits
    rng = np.random.default_rng(seed)
    taken = {int(x) for x in canaries["number"]}
    draws = [int(x) for x in rng.integers(0, space, size=int(n_reference * 1.2) + 16)]
    numbers = [x for x in dict.fromkeys(draws) if x not in taken][:n_reference]
    if len(numbers) < n_reference:
        raise ValueError(f"cannot draw {n_reference} distinct numbers out of {space}")

    def score(recs: list[str], start: int) -> np.ndarray:  # the secret stands at [start, start + digits)
        if scorer is not None:
            return scorer(recs)
        if pll_copies == "candidate":
            return candidate_log_likelihoods(model, tokenizer, recs, [[(start, start + digits)]] * len(recs),
                                             kind=kind, window=None, batch_size=batch_size, progress=progress,
                                             label="canary")
        return sequence_log_likelihoods(model, tokenizer, recs, kind=kind, window=None, batch_size=batch_size,
                                        progress=progress, label="canary", pll_copies=pll_copies)

    out = canaries.copy()
    lls, expos, ranks = [], [], []
    for r in canaries.itertuples(index=False):
        recs = [r.prefix + r.number + r.suffix] + [f"{r.prefix}{x:0{digits}d}{r.suffix}" for x in numbers]
        ll = np.asarray(score(recs, len(r.prefix)), dtype=float)
        e, rank = exposure_from_samples(ll[0], ll[1:], space)
        lls.append(float(ll[0]))
        expos.append(float(e[0]))
        ranks.append(float(rank[0]))
    out["log_likelihood"], out["rank"], out["exposure"] = lls, ranks, expos
    out.attrs["log2_space"] = float(np.log2(space))
    return out


def exposure_summary(table: pd.DataFrame, digits: int = 8) -> dict:
    """Exposure per repeat count: ``{"log2_space", "by_repeats": {"1": {"n", "mean", "median", "max"}, ...}}``."""
    log2_space = float(table.attrs.get("log2_space", digits * np.log2(10)))
    groups = table.groupby("repeats", sort=True) if "repeats" in table else [(None, table)]
    by = {str(k): {"n": int(len(t)), "mean": float(t["exposure"].mean()), "median": float(t["exposure"].median()),
                   "max": float(t["exposure"].max())} for k, t in groups}
    return {"log2_space": log2_space, "by_repeats": by}
