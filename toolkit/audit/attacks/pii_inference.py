"""PII inference (after Lukas et al., "Analyzing Leakage of Personally Identifiable Information in Language Models",
IEEE S&P 2023; ``microsoft/analysing_pii_leakage``, perplexity-based inference/reconstruction).

For each occurrence of a direct identifier of category ``c`` in a member document, the attacker knows the text
around it and a set of candidates: the true identifier and ``n_candidates - 1`` identifiers of category ``c`` drawn
(seeded) from *other* individuals (terms the occurrence's own individual also uses are excluded). Each candidate is
put in the slot by text substitution, and scored by the model's log-likelihood of the window with the candidate in
place:

.. math:: \\hat c = \\arg\\max_{c \\in C} \\log p_f(w[c]) ,

``log p_f`` the summed token log-likelihood of the window (causal) or its pseudo-log-likelihood (masked, Salazar et
al. 2020), as the peer code ranks candidates by perplexity of the filled-in sequence. Top-1 accuracy is reported per
category and overall, against chance (:math:`1/|C|`) and against the same attack on a reference model.

Choices: not only the target occurrence is replaced but every copy of the answer in the window (:func:`substitute`):
each case-insensitive whole-word occurrence of the whole value, and of each of its parts (the words of a name:
``"Mr. Smith"``, ``"JOHN SMITH"``, ``"Smith's"`` when ``"John Smith"`` is attacked; the other identifiers of the same
individual that share a part) by the candidate's corresponding part, in the case of the text replaced; one-letter
initials, titles and generic words (:data:`STOP_PARTS`) are left, and a value holding a digit is replaced whole only.
So the windows of the candidates differ by the candidate alone, and a model that never saw the text cannot copy the
answer from the context. The candidates have the true identifier's *shape*
(:func:`shape`: digits, lower- and upper-case letters, punctuation; e.g. ``03/12/2019`` vs ``2019-03-12``, ``Okafor``
vs ``okafor``), another individual's identifier taken in the case that gives that shape, so that the form of a
candidate (a date format, a lower-case name after "d/w dr.") does not give the answer away — a model that never saw
the text would otherwise beat chance by the form alone; only when no candidate of that shape exists are the others
drawn as they are (``n_shape_fallback``); ties for the highest score share the credit
(:math:`1/\\#\\text{tied}` when the true identifier is among them), which makes chance exactly :math:`1/|C|`.
The window is the audit window around the occurrence (:func:`occurrence_window`, at most the models' position
tables: :func:`audit_window`), with 16 tokens left free so that a longer candidate still fits. Causal models score
every token of it, the first too: a GPT-2-style tokenizer adds no BOS, so the first token is scored given the BOS
alone (:func:`toolkit.audit.losses.leading_token`) and a window that starts at the identifier still scores all of
its tokens.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable

import numpy as np
import pandas as pd

from toolkit.audit.losses import candidate_log_likelihoods, model_max_tokens, model_name, sequence_log_likelihoods
from toolkit.corpus import Corpus

#: tokens left free in a PII-inference window for candidates longer than the true identifier
SLACK_TOKENS = 16


def normalize(term: str) -> str:
    return unicodedata.normalize("NFKC", term).strip().lower()


def shape(term: str) -> str:
    """The form of a term: digits → ``0``, lower-case letters → ``a``, upper-case → ``A``, other characters kept, runs
    collapsed (``"03/12/2019"`` → ``"0/0/0"``, ``"Okafor"`` → ``"Aa"``, ``"John Smith"`` → ``"Aa Aa"``)."""
    out = re.sub(r"\d", "0", term)
    out = re.sub(r"[^\W\d_]", lambda m: "A" if m.group().isupper() else "a", out)
    return re.sub(r"(.)\1+", r"\1", out)


def _in_shape(surfaces, want: str) -> str | None:
    """A surface (or its lower / upper / title case) of the given shape, if any."""
    for surf in sorted(surfaces):
        for variant in (surf, surf.lower(), surf.upper(), surf.title()):
            if shape(variant) == want:
                return variant
    return None


def occurrence_window(text: str, start: int, end: int, tokenizer, window: int | None,
                      slack: int = SLACK_TOKENS) -> tuple[str, int, int]:
    """``(window_text, start', end')``: at most ``window - slack`` tokens (special tokens counted) of ``text`` around ``text[start:end]``, the identifier centred
    when the document is longer; offsets relative to the window."""
    if tokenizer is None or window is None:
        return text, start, end
    offs = np.asarray(tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"],
                      dtype=np.int64).reshape(-1, 2)
    n_special = tokenizer.num_special_tokens_to_add(pair=False)
    budget = max(1, window - n_special - slack)
    if len(offs) <= budget:
        return text, start, end
    inside = np.flatnonzero((offs[:, 0] < end) & (offs[:, 1] > start))
    a = int(inside[0]) if inside.size else int(np.searchsorted(offs[:, 0], start))
    b = int(inside[-1]) + 1 if inside.size else a
    lo = max(0, a - max(0, budget - (b - a)) // 2)
    hi = min(len(offs), max(lo + budget, b))
    lo = max(0, min(lo, hi - budget))
    cs, ce = min(int(offs[lo, 0]), start), max(int(offs[hi - 1, 1]), end)
    return text[cs:ce], start - cs, end - cs


#: parts of an identifier never replaced on their own (:func:`substitute`): titles, name particles and suffixes,
#: month and day names, generic words of institution and address names. They are common words of the text around an
#: identifier, not copies of it, and replacing them by a candidate's part would make the wrong candidates' windows
#: less fluent (which favours the true one as much as a leaked part does).
STOP_PARTS = frozenset("""
    mr mrs ms mx miss dr prof sir dame rev fr sr jr ii iii iv md phd rn np pa do dds
    de da di du del della der den la le van von ter ten bin ben al el st saint
    the of and at on in for
    january february march april may june july august september october november december
    jan feb mar apr jun jul aug sep sept oct nov dec
    monday tuesday wednesday thursday friday saturday sunday
    hospital hospitals medical center centre clinic clinics health healthcare care community general regional
    university college institute infirmary county city state
    street road avenue lane drive way ways court place square terrace parkway route boulevard highway trail circle
    crescent apt apartment suite unit floor building north south east west lake port mount fort
    rd ave ln blvd ct pl sq hwy ste
""".split())
#: the shortest part (letters and digits) replaced on its own: a one-letter initial is left
MIN_PART = 2

_PART = re.compile(r"[^\W_]+")


def parts(value: str) -> list[str]:
    """The parts of an identifier: its maximal runs of letters and digits (``"Lamb, John"`` → ``["Lamb", "John"]``,
    ``"O'Brien"`` → ``["O", "Brien"]``)."""
    return _PART.findall(value)


def replaced_parts(value: str, stop=STOP_PARTS) -> list[int]:
    """Indices of the parts of ``value`` that :func:`substitute` replaces on their own: at least :data:`MIN_PART`
    characters, at least one letter, not in ``stop`` (case-insensitive). None for a value holding a digit (a number,
    a date, a code, an address with a house number): only the whole value is replaced then."""
    if any(ch.isdigit() for ch in value):
        return []
    return [i for i, p in enumerate(parts(value))
            if len(p) >= MIN_PART and any(ch.isalpha() for ch in p) and p.lower() not in stop]


def part_map(n_true: int, n_candidate: int) -> list[int]:
    """Index of the candidate part that replaces each of ``n_true`` true parts: part ``i`` → part ``i`` when the
    counts agree (the usual case: candidates have the true identifier's shape), else aligned by relative position,
    first to first and last to last, a middle part to the nearest, a tie to the earlier (``"Mary Ann Lee"`` →
    ``"Ada Okafor"``: Mary, Ann → Ada, Lee → Okafor); a one-part value → the candidate's last part (a surname)."""
    if n_true <= 1:
        return [max(0, n_candidate - 1)] * n_true
    return [math.ceil(i * (n_candidate - 1) / (n_true - 1) - 0.5) for i in range(n_true)]


def in_case(slot: str, new: str, own: str) -> str:
    """``new`` in the case pattern of ``slot``, the text it replaces (``own``: the true identifier's own form of that
    text). The form of the true identifier itself → ``new`` as it is (the candidates already have the true
    identifier's shape); all upper-case → upper (``"SMITH"`` → ``"OKAFOR"``); all lower-case → lower; title case →
    title; anything else → ``new`` as it is. The true identifier put in its own slots gives the text back."""
    if slot == own:
        return new
    if slot.isupper():
        return new.upper()
    if slot.islower():
        return new.lower()
    if slot == slot.title():
        return new.title()
    return new


def _whole(value: str) -> re.Pattern:
    """Case-insensitive whole-word pattern of ``value``, any run of white space matching any other."""
    body = r"\s+".join(re.escape(w) for w in value.split())
    return re.compile(rf"(?<!\w){body}(?!\w)", re.IGNORECASE)


def audit_window(window: int | None, *models) -> int | None:
    """``window`` capped by the position table of every model given (``None`` entries skipped): the windows built for
    one model are scored by the reference too, and a window longer than a model's table would be cut at its end."""
    limits = [n for n in (window, *(model_max_tokens(m) for m in models if m is not None)) if n is not None]
    return min(limits) if limits else None


def substitute(text: str, start: int, end: int, candidate: str, *, stop=STOP_PARTS) -> str:
    """:func:`substitute_spans`' text."""
    return substitute_spans(text, start, end, candidate, stop=stop)[0]


def substitute_spans(text: str, start: int, end: int, candidate: str, *,
                     stop=STOP_PARTS) -> tuple[str, list[tuple[int, int]]]:
    """``(new_text, spans)``: ``text`` with the identifier ``text[start:end]`` replaced by ``candidate`` there and wherever else it or one of
    its parts occurs, so that no copy of the answer stays in the window.

    1. the slot, and every case-insensitive whole-word occurrence of the whole value → ``candidate``;
    2. then every case-insensitive whole-word occurrence (outside those) of a part of the value that
       :func:`replaced_parts` selects → the candidate's corresponding part (:func:`part_map`): ``"Mr. Smith"`` →
       ``"Mr. Okafor"``, ``"Smith's"`` → ``"Okafor's"`` (the ``'s`` is not part of the word);
    3. each replacement in the case pattern of the text it replaces (:func:`in_case`).

    A value holding a digit has no parts replaced on their own (numbers, dates: the whole value only). Left in place:
    one-letter initials (``"J. Smith"`` → ``"J. Okafor"``), parts in ``stop``, and other forms of the same value that
    share no part with it (``"March 12, 2019"`` for ``"03/12/2019"``).

    ``spans``: where the replacements stand in ``new_text`` (``(start, end)``, in order) — the candidate's own
    characters, which candidate-token PLL scores (:mod:`toolkit.audit.pll`).
    """
    value = text[start:end]
    spans: list[tuple[int, int, str]] = [(start, end, in_case(value, candidate, value))]

    def free(s: int, e: int) -> bool:
        return all(e <= a or s >= b for a, b, _ in spans)

    if value.strip():
        for m in _whole(value).finditer(text):
            if free(m.start(), m.end()):
                spans.append((m.start(), m.end(), in_case(m.group(), candidate, value)))
    own, theirs = parts(value), parts(candidate)
    where = part_map(len(own), len(theirs))
    for i in replaced_parts(value, stop):
        new = theirs[where[i]] if theirs else candidate
        for m in _whole(own[i]).finditer(text):
            if free(m.start(), m.end()):
                spans.append((m.start(), m.end(), in_case(m.group(), new, own[i])))
    out, pos, at, where_new = [], 0, 0, []
    for s, e, new in sorted(spans):
        out += [text[pos:s], new]
        at += s - pos
        where_new.append((at, at + len(new)))
        at += len(new)
        pos = e
    out.append(text[pos:])
    return "".join(out), where_new


def identifier_occurrences(corpus: Corpus, positions: pd.DataFrame, *, direct_only: bool = True) -> pd.DataFrame:
    """Occurrences ``doc_id, person_id, start, end, category, term, surface, key`` of identifiers in ``corpus``.

    ``positions`` needs ``doc_id, start, end, category`` (e.g. ``IdentifierAnalysis.positions()`` or a span table);
    ``term`` defaults to the text slice. With a ``direct`` column and ``direct_only``, only direct identifiers are
    kept. Rows of documents outside the corpus or without a category are dropped.
    """
    missing = [c for c in ("doc_id", "start", "end", "category") if c not in positions.columns]
    if missing:
        raise ValueError(f"the positions table lacks column(s) {missing}")
    pos = positions
    if direct_only and "direct" in pos.columns:
        pos = pos[pos["direct"].astype(bool)]
    ids = {d.doc_id for d in corpus}
    pos = pos[pos["doc_id"].astype(str).isin(ids) & pos["category"].notna() & (pos["category"].astype(str) != "")]
    rows = []
    for r in pos.itertuples(index=False):
        d = corpus.get(str(r.doc_id))
        s, e = int(r.start), int(r.end)
        surface = d.text[s:e]
        term = getattr(r, "term", None) if "term" in pos.columns else None
        term = surface if not isinstance(term, str) else term
        rows.append((d.doc_id, d.person_id, s, e, str(r.category), term, surface, normalize(term)))
    return pd.DataFrame(rows, columns=["doc_id", "person_id", "start", "end", "category", "term", "surface", "key"])


def _top1(scores: np.ndarray) -> float:
    """Credit of the true candidate (index 0): 1 / number of candidates tied at the maximum, if it is among them."""
    best = scores.max()
    return 1.0 / int((scores == best).sum()) if scores[0] == best else 0.0


def _default_scorer(model, tokenizer, batch_size, progress, pll_copies=None, spans=None) -> Callable:
    """Each candidate window's log-likelihood: (pseudo-)log-likelihood, or candidate-token PLL over ``spans``."""
    if pll_copies == "candidate":  # a window without candidate tokens (nan) ranks last
        return lambda texts: np.nan_to_num(candidate_log_likelihoods(
            model, tokenizer, texts, spans, window=None, batch_size=batch_size, progress=progress,
            label="PII inference"), nan=-np.inf)
    return lambda texts: sequence_log_likelihoods(model, tokenizer, texts, window=None, batch_size=batch_size,
                                                  progress=progress, label="PII inference", pll_copies=pll_copies)


def _pll_record(model, pll_copies) -> dict | None:
    """The masked estimator the candidates were scored with (:func:`toolkit.audit.pll.estimator`); None for causal."""
    from toolkit.audit.pll import check_pii_estimator, estimator
    from toolkit.models import model_kind

    if model is None or model_kind(model) != "mlm":
        return None
    return estimator(None, 0, check_pii_estimator(pll_copies, "pll_copies"))


def pii_inference(model, tokenizer, corpus: Corpus, positions: pd.DataFrame, *, reference=None,
                  n_candidates: int = 50, max_occurrences: int | None = 200, window: int | None = 256, seed: int = 0,
                  batch_size: int | None = None, scorer: Callable[[list[str]], np.ndarray] | None = None,
                  reference_scorer: Callable[[list[str]], np.ndarray] | None = None, reference_name: str | None = None,
                  return_table: bool = False, progress: bool = True, population: pd.DataFrame | None = None,
                  public_keys=None, pll_copies: int | str | None = None):
    """Top-1 accuracy of PII inference on the member documents ``corpus`` (see the module docstring).

    Parameters
    ----------
    positions : DataFrame
        Identifier occurrences (``doc_id, start, end, category[, term, direct]``), see :func:`identifier_occurrences`.
    reference : (model, tokenizer), optional
        The reference model for the same attack (usually the base model).
    max_occurrences : int or None
        At most this many occurrences (a seeded sample) are attacked; ``None``: all.
    scorer, reference_scorer : callable, optional
        ``texts -> log-likelihoods``; replace the model's (dependency injection, e.g. in tests).
    population : DataFrame, optional
        The identifier occurrences (:func:`identifier_occurrences`) the candidates come from and that say who shares
        an identifier (default: those of ``corpus``). The verdict attacks the members' and the non-members' notes
        with the same population (both groups), so that the two figures are comparable (:func:`pii_member_advantage`).
    public_keys : set of str, optional
        Normalised identifiers that occur in the public split (:func:`public_identifier_keys`): their occurrences are
        *public* (``sharing``), reported and never a finding against the members.
    pll_copies : int, "all", "candidate" or None
        Masked models: the candidates' windows scored by strided pseudo-log-likelihood with K masked copies per
        window (:func:`toolkit.audit.pll.strided_groups`; the audit's membership estimator, methods.md §10) instead of
        one copy per token (exact, the default), or (``"candidate"``) by candidate-token pseudo-log-likelihood: each
        window over the tokens of the candidate and its copies only (the characters :func:`substitute_spans`
        replaced), each token masked alone (:mod:`toolkit.audit.pll`). Causal models: ignored. Recorded as ``pll``.

    Returns
    -------
    dict
        ``n_occurrences``, ``n_without_candidates``, ``n_shape_fallback``, ``n_candidates``, ``window``, ``seed``,
        ``model``, ``reference``, ``overall`` and ``by_category`` (each ``n``, ``top1``, ``chance``,
        ``reference_top1``, ``ratio_to_chance``), ``by_sharing`` (the same per ``private`` — one individual's
        identifier —, ``shared`` — several individuals' — and ``public`` — named in the public split), ``n_public``,
        JSON-ready (``identifiers.json``). With ``return_table``, also the per-occurrence table (with ``sharing``).
    """
    rng = np.random.default_rng(seed)
    window = audit_window(window, model, reference[0] if reference is not None else None)
    occ = identifier_occurrences(corpus, positions)
    every = occ if population is None else population
    pool: dict[str, dict[str, tuple[set, set]]] = {}
    for r in every.itertuples(index=False):
        surfaces, people = pool.setdefault(r.category, {}).setdefault(r.key, (set(), set()))
        surfaces.add(r.surface)
        people.add(r.person_id)
    n_total = len(occ)
    if max_occurrences is not None and n_total > max_occurrences:
        occ = occ.iloc[np.sort(rng.choice(n_total, size=max_occurrences, replace=False))]
    texts, spans, rows, n_without, n_fallback = [], [], [], 0, 0
    for r in occ.itertuples(index=False):
        others = [surfaces for key, (surfaces, people) in pool.get(r.category, {}).items()
                  if key != r.key and r.person_id not in people]
        cands = sorted(c for c in (_in_shape(sf, shape(r.surface)) for sf in others) if c is not None)
        if not cands and others:
            n_fallback += 1
            cands = sorted(min(sf) for sf in others)
        if not cands:
            n_without += 1
            continue
        drawn = rng.choice(len(cands), size=min(n_candidates - 1, len(cands)), replace=False)
        wt, s, e = occurrence_window(corpus.get(r.doc_id).text, r.start, r.end, tokenizer, window)
        made = [substitute_spans(wt, s, e, c) for c in [wt[s:e]] + [cands[j] for j in drawn]]
        texts += [t for t, _ in made]
        spans += [sp for _, sp in made]
        sharing = ("public" if public_keys is not None and r.key in public_keys else
                   "shared" if len(pool.get(r.category, {}).get(r.key, ((), ()))[1]) > 1 else "private")
        rows.append((r.doc_id, r.person_id, r.category, r.term, 1 + drawn.size, sharing))
    table = pd.DataFrame(rows, columns=["doc_id", "person_id", "category", "term", "n_candidates", "sharing"])
    bounds = np.r_[0, np.cumsum(table["n_candidates"].to_numpy(dtype=np.int64))]

    def credits(fn) -> np.ndarray:
        ll = np.asarray(fn(texts), dtype=float) if texts else np.zeros(0)
        return np.array([_top1(ll[bounds[i]:bounds[i + 1]]) for i in range(len(table))])

    scorer_given = scorer is not None
    scorer = scorer or _default_scorer(model, tokenizer, batch_size, progress, pll_copies, spans)
    table["top1"] = credits(scorer)
    table["chance"] = 1.0 / table["n_candidates"]
    ref_name = None
    if reference is not None or reference_scorer is not None:
        if reference_scorer is None:
            reference_scorer = _default_scorer(reference[0], reference[1], batch_size, progress, pll_copies, spans)
        table["reference_top1"] = credits(reference_scorer)
        ref_name = reference_name or (model_name(reference[0]) if reference is not None else "reference")

    def summary(t: pd.DataFrame) -> dict:
        top1, chance = float(t["top1"].mean()), float(t["chance"].mean())
        ref = float(t["reference_top1"].mean()) if "reference_top1" in t else None
        return {"n": int(len(t)), "top1": top1, "chance": chance, "reference_top1": ref,
                "ratio_to_chance": top1 / chance if chance else None}

    empty = {"n": 0, "top1": None, "chance": None, "reference_top1": None, "ratio_to_chance": None}
    out = {"n_occurrences": int(len(table)), "n_occurrences_total": int(n_total),
           "n_without_candidates": int(n_without), "n_shape_fallback": int(n_fallback),
           "n_candidates": int(n_candidates), "window": window,
           "seed": seed, "model": model_name(model) if model is not None else None, "reference": ref_name,
           "pll": None if scorer_given else _pll_record(model, pll_copies),
           "overall": summary(table) if len(table) else empty,
           "by_category": {c: summary(t) for c, t in table.groupby("category", sort=True)},
           "by_sharing": {c: summary(t) for c, t in table.groupby("sharing", sort=True)},
           "n_public": int((table["sharing"] == "public").sum())}
    return (out, table) if return_table else out


def public_identifier_keys(keys, public_texts) -> set[str]:
    """The identifiers among ``keys`` (normalised, :func:`normalize`) that occur in the public split's
    ``public_texts`` as a run of whole words (case-insensitive, white space collapsed): public, never a finding
    against the members (methods.md §11). Word n-grams of the public texts up to the longest key's length are
    collected once, so the cost is linear in the public split."""
    keys = {k for k in keys if k}
    if not keys:
        return set()
    words_of = {k: tuple(normalize(w) for w in re.findall(r"[^\W_]+", k)) for k in keys}
    longest = max((len(w) for w in words_of.values()), default=0)
    wanted = {w for w in words_of.values() if w}
    seen: set[tuple[str, ...]] = set()
    for text in public_texts:
        words = [normalize(w) for w in re.findall(r"[^\W_]+", text)]
        for n in range(1, longest + 1):
            for i in range(len(words) - n + 1):
                g = tuple(words[i:i + n])
                if g in wanted:
                    seen.add(g)
    return {k for k, w in words_of.items() if w and w in seen}


def pii_member_advantage(members_table: pd.DataFrame, nonmembers_table: pd.DataFrame, *, seed: int = 0,
                         n_permutations: int = 9999) -> dict[str, dict]:
    """Do members' identifiers get inferred more often than non-members'? Per scope — ``overall``, each category,
    ``private`` and ``shared`` — over the occurrences that are not public (``sharing``): the members' and the
    non-members' top-1 and the permutation test over individuals
    (:func:`toolkit.metrics.significance.member_advantage_test`), with the members' mean chance (``chance``) and the
    reference model's top-1 (``reference_top1``) where measured; where the reference model was run on both groups,
    ``beyond_reference``: the same test on each occurrence's top-1 minus the reference's (the members' excess over
    the reference against the non-members'; the verdict reads it where the split is confounded). The verdict reads
    it (methods.md §11)."""
    from toolkit.metrics.significance import member_advantage_test

    def usable(t):
        return t[t["sharing"] != "public"] if "sharing" in t else t

    m, n = usable(members_table), usable(nonmembers_table)
    scopes = [("overall", None, None)] + [(c, "category", c) for c in sorted(set(m["category"]) | set(n["category"]))]
    scopes += [(s, "sharing", s) for s in ("private", "shared")]
    out = {}
    for scope, col, value in scopes:
        a = m if col is None else m[m[col] == value]
        b = n if col is None else n[n[col] == value]
        if not len(a):
            continue
        ga = a.groupby("person_id", sort=True)["top1"].agg(["sum", "size"])
        gb = b.groupby("person_id", sort=True)["top1"].agg(["sum", "size"])
        row = member_advantage_test(ga["sum"], ga["size"], gb["sum"], gb["size"], seed=seed,
                                    n_permutations=n_permutations)
        row["chance"] = float(a["chance"].mean())
        row["nonmembers_chance"] = float(b["chance"].mean()) if len(b) else None
        row["reference_top1"] = float(a["reference_top1"].mean()) if "reference_top1" in a else None
        if "reference_top1" in a and "reference_top1" in b and len(b) and a["reference_top1"].notna().all() \
                and b["reference_top1"].notna().all():
            # beyond the reference model (saw neither group): each occurrence credits top-1 − the reference's
            # top-1; read by the verdict where the split is confounded (methods.md §11)
            ca = a.assign(d=a["top1"] - a["reference_top1"]).groupby("person_id", sort=True)["d"].agg(["sum", "size"])
            cb = b.assign(d=b["top1"] - b["reference_top1"]).groupby("person_id", sort=True)["d"].agg(["sum", "size"])
            row["beyond_reference"] = member_advantage_test(ca["sum"], ca["size"], cb["sum"], cb["size"], seed=seed,
                                                            n_permutations=n_permutations)
        out[scope] = row
    return out
