"""What the detector missed, and whether the model learnt it (methods.md §2.1).

Every identifier finding of the audit (PII inference, memorisation, regurgitation) tests what the run's detector
found, and every PP* strategy protects only that. Where the corpus carries gold spans, this module lists the gold
identifiers the protection left visible and runs the same attacks on them.

**Missed**, at the word level (the unit the identifier analysis protects and the i2b2 2014 token measure counts, as
:mod:`toolkit.identifiers.evaluation`): a word of a document (:func:`toolkit.identifiers.words.iter_words`) is a
*gold word* when it shares a character with a gold span, and *protected* when it shares a character with a row of
the run's protected positions (direct ∪ indirect: the identifiers step's ``positions`` table, the positions the
PP* strategies never train on). A gold span (one annotated occurrence) is **missed** when at least one of its words
is not protected — the leak view of the entity-level recall (:func:`~toolkit.identifiers.evaluation.entity_scores`:
one visible word of a name is a leak) — and **wholly missed** when none of them is. A gold span covering no word is
not counted. A **missed identifier** is a distinct ``(category, normalised value)`` with at least one missed
occurrence; its occurrences and individuals are counted among the members and among the non-members.

For each missed occurrence (members and non-members alike):

* **PII inference** (:func:`toolkit.audit.attacks.pii_inference`, unchanged): the true value against
  ``n_candidates - 1`` gold values of the same category and shape from other individuals (the population: every gold
  span of both groups), the model's top-1 credit and, with a reference model, the reference's;
* **regurgitation** (causal models, :func:`toolkit.audit.probe_causal.regurgitation_rate`, unchanged): the missed
  words as targets (a word of a missed span left unprotected, holding a letter, at least
  :data:`~toolkit.audit.attacks.pii_inference.MIN_PART` characters and not a generic part
  (:data:`~toolkit.audit.attacks.pii_inference.STOP_PARTS`); or a number of at least 4 digits), reproduced or not by
  the greedy continuation of each document's first tokens.

Per missed identifier: ``inferred`` — ranked first alone in at least one of its attacked member occurrences;
``reproduced`` — one of its target words reproduced in a member's continuation; ``recovered`` = either. By chance
alone a candidate is ranked first with probability :math:`1/|C|`, so one identifier's flag is no evidence; the
evidence is the members' rate against the non-members', by the test the verdict uses for detected identifiers
(:func:`~toolkit.audit.attacks.pii_member_advantage` and
:func:`~toolkit.audit.probe_causal.with_nonmembers`: the permutation test over individuals,
:func:`toolkit.metrics.significance.member_advantage_test`).

Nothing written names an identifier: values are :func:`toolkit.audit.hashing.hash_term` of the normalised value
under the run's key, with category and counts; never a text, a word or a person id.
"""

from __future__ import annotations

import secrets
from typing import Any

import numpy as np
import pandas as pd

from toolkit.audit.attacks.pii_inference import (MIN_PART, STOP_PARTS, identifier_occurrences, normalize,
                                                 pii_inference, pii_member_advantage, public_identifier_keys)
from toolkit.audit.hashing import SCHEME, active_key, hash_term
from toolkit.corpus import Corpus
from toolkit.identifiers.categories import pii_category
from toolkit.identifiers.words import iter_words, normalize_term

#: the columns of :func:`missed_spans`
SPAN_COLUMNS = ["doc_id", "person_id", "start", "end", "label", "category", "term", "key", "n_words",
                "n_missed_words", "missed_words", "missed"]
#: what ``missed.json`` says "missed" means
DEFINITION = ("a gold span is missed when at least one of its words (a word sharing a character with it) shares no "
              "character with a protected position (direct or indirect identifier), wholly missed when none of its "
              "words is protected (methods.md §2.1)")


def _overlaps(starts: np.ndarray, ends: np.ndarray, s: int, e: int) -> bool:
    return bool(np.any((starts < e) & (ends > s)))


def missed_spans(corpus: Corpus, positions: pd.DataFrame) -> pd.DataFrame:
    """Every gold span of ``corpus`` that covers a word, with how many of its words ``positions`` leaves visible.

    Parameters
    ----------
    corpus : Corpus
        Documents with their gold spans (``Document.spans``).
    positions : DataFrame
        The protected word positions (``doc_id, start, end``; the identifiers step's ``positions`` table).

    Returns
    -------
    DataFrame
        One row per gold span (:data:`SPAN_COLUMNS`): its category (:func:`pii_category` of the label), text
        (``term``, in memory only) and normalised value (``key``), ``n_words``, ``n_missed_words``, the normalised
        unprotected words (``missed_words``, a tuple) and ``missed`` (``n_missed_words > 0``).
    """
    by_doc = {str(k): (g["start"].to_numpy(np.int64), g["end"].to_numpy(np.int64))
              for k, g in positions.groupby(positions["doc_id"].astype(str), sort=False)} if len(positions) else {}
    none = (np.zeros(0, np.int64), np.zeros(0, np.int64))
    rows = []
    for d in corpus:
        if not d.spans:
            continue
        words = iter_words(d.text)
        ps, pe = by_doc.get(d.doc_id, none)
        for sp in sorted(d.spans, key=lambda x: (x.start, x.end)):
            inside = [(s, e) for s, e in words if s < sp.end and e > sp.start]
            if not inside:
                continue
            visible = tuple(normalize_term(d.text[s:e]) for s, e in inside if not _overlaps(ps, pe, s, e))
            term = d.text[sp.start:sp.end]
            rows.append((d.doc_id, d.person_id, sp.start, sp.end, sp.label, pii_category(sp.label), term,
                         normalize(term), len(inside), len(visible), visible, bool(visible)))
    return pd.DataFrame(rows, columns=SPAN_COLUMNS)


def regurgitation_targets(words) -> set[str]:
    """The missed words that regurgitation looks for (module docstring): holding a letter, at least
    :data:`MIN_PART` characters and not in :data:`STOP_PARTS`; or a number of at least 4 digits."""
    return {w for w in words if (len(w) >= MIN_PART and any(c.isalpha() for c in w) and w not in STOP_PARTS)
            or (len(w) >= 4 and w.isdigit())}


def _group_counts(spans: pd.DataFrame) -> dict[tuple[str, str], dict[str, int]]:
    missed = spans[spans["missed"]]
    out = {}
    for (cat, key), g in missed.groupby(["category", "key"], sort=True):
        out[(cat, key)] = {"occurrences": int(len(g)), "individuals": int(g["person_id"].nunique()),
                           "wholly_missed": int((g["n_missed_words"] == g["n_words"]).sum())}
    return out


def _side_counts(spans: pd.DataFrame) -> dict[str, int]:
    m = spans[spans["missed"]] if len(spans) else spans
    return {"gold_spans": int(len(spans)), "gold_words": int(spans["n_words"].sum()) if len(spans) else 0,
            "missed_spans": int(len(m)),
            "wholly_missed_spans": int((m["n_missed_words"] == m["n_words"]).sum()) if len(m) else 0,
            "missed_words": int(m["n_missed_words"].sum()) if len(m) else 0,
            "gold_identifiers": int(spans.groupby(["category", "key"]).ngroups) if len(spans) else 0,
            "missed_identifiers": int(m.groupby(["category", "key"]).ngroups) if len(m) else 0,
            "individuals_with_missed": int(m["person_id"].nunique()) if len(m) else 0}


def _pii_side(table: pd.DataFrame) -> dict[tuple[str, str], dict[str, Any]]:
    out = {}
    if not len(table):
        return out
    t = table.assign(key=table["term"].map(normalize))
    for (cat, key), g in t.groupby(["category", "key"], sort=True):
        ref = float(g["reference_top1"].mean()) if "reference_top1" in g else None
        out[(cat, key)] = {"n": int(len(g)), "top1": float(g["top1"].mean()), "chance": float(g["chance"].mean()),
                           "reference_top1": ref, "ranked_first": int((g["top1"] >= 1.0).sum())}
    return out


def missed_audit(model, tokenizer, members: Corpus, nonmembers: Corpus, members_positions: pd.DataFrame,
                 nonmembers_positions: pd.DataFrame, *, reference=None, reference_name: str | None = None,
                 public_texts=None, n_candidates: int = 50, max_occurrences: int | None = 100,
                 window: int | None = 256, seed: int = 0, batch_size: int | None = None, pll_copies=None,
                 regurgitation: dict[str, int] | None = None, hash_key: bytes | None = None, scorer=None,
                 reference_scorer=None, progress: bool = False) -> dict[str, Any]:
    """The missed gold identifiers of members and non-members and what the model does with them (module docstring).

    Parameters
    ----------
    model, tokenizer
        The audited model.
    members, nonmembers : Corpus
        The audited documents, with their gold spans.
    members_positions, nonmembers_positions : DataFrame
        The protected positions of each group (``doc_id, start, end``): the members' identifier table (what training
        protected) and that of members ∪ non-members.
    reference : (model, tokenizer), optional
        The reference model, attacked on the same occurrences (PII inference).
    public_texts : list of str, optional
        The public split: missed values it names are *public*, never counted for the members' advantage.
    n_candidates, max_occurrences, window, seed, batch_size, pll_copies
        PII inference's settings (:func:`~toolkit.audit.attacks.pii_inference`), per group.
    regurgitation : dict, optional
        ``prefix_tokens`` and ``max_new_tokens`` of :func:`~toolkit.audit.probe_causal.regurgitation_rate` (cut to
        the model's position table when they do not fit: half of it at most for the prompt, the rest for the
        continuation; the result records what was used); None, or a masked model: not measured.
    hash_key : bytes, optional
        The run's key (default: :func:`~toolkit.audit.hashing.active_key`, else a one-off key nobody keeps).
    scorer, reference_scorer : callable, optional
        Replace the models' log-likelihoods in PII inference (tests).

    Returns
    -------
    dict
        JSON-ready (``missed.json``): ``definition``, ``hash``, ``members`` / ``nonmembers`` (counts: gold and missed
        spans, words, identifiers), ``by_category`` (gold and missed spans per group), ``identifiers`` (one record
        per missed identifier: ``hash``, ``category``, occurrences, individuals and wholly missed occurrences per
        group, ``pii_inference`` per group, ``regurgitation`` per group as ``[targets, reproduced]``, ``inferred``,
        ``reproduced``, ``recovered``), ``pii_inference`` (each group's summary and ``member_advantage``),
        ``regurgitation`` (the members' result with the non-members' and ``member_advantage``, or None).
    """
    from toolkit.models import model_kind

    key = hash_key if hash_key is not None else active_key()
    scheme = f"{SCHEME} with " + ("the run's key" if key is not None else "a one-off key nobody kept")
    key = key if key is not None else secrets.token_bytes(32)
    spans = {"members": missed_spans(members, members_positions),
             "nonmembers": missed_spans(nonmembers, nonmembers_positions)}
    out: dict[str, Any] = {"definition": DEFINITION, "hash": scheme,
                           **{g: _side_counts(s) for g, s in spans.items()}}
    cats = sorted(set().union(*(set(s["category"]) for s in spans.values())))
    out["by_category"] = {c: {g: {"gold_spans": int((s["category"] == c).sum()),
                                  "missed_spans": int(((s["category"] == c) & s["missed"]).sum())}
                              for g, s in spans.items()} for c in cats}
    groups = {g: _group_counts(s) for g, s in spans.items()}

    # PII inference on the missed occurrences, candidates from every gold span of both groups
    both = Corpus(list(members) + list(nonmembers))
    gold = pd.concat([s[["doc_id", "start", "end", "category", "term"]] for s in spans.values()], ignore_index=True)
    population = identifier_occurrences(both, gold)
    public = public_identifier_keys(set(population["key"]), public_texts) if public_texts is not None else None
    kw = dict(reference=reference, n_candidates=n_candidates, max_occurrences=max_occurrences, window=window,
              seed=seed, batch_size=batch_size, scorer=scorer, reference_scorer=reference_scorer,
              reference_name=reference_name, return_table=True, progress=progress, population=population,
              public_keys=public, pll_copies=pll_copies)
    pii, tables = {}, {}
    for g, corpus in (("members", members), ("nonmembers", nonmembers)):
        occ = spans[g][spans[g]["missed"]][["doc_id", "start", "end", "category", "term"]]
        pii[g], tables[g] = pii_inference(model, tokenizer, corpus, occ, **kw)
    pii["member_advantage"] = pii_member_advantage(tables["members"], tables["nonmembers"], seed=seed)
    out["pii_inference"] = pii
    per_pii = {g: _pii_side(t) for g, t in tables.items()}

    # regurgitation of the missed words (causal models)
    reg, per_type = None, {"members": {}, "nonmembers": {}}
    words = {g: {k: regurgitation_targets(w for ws in grp["missed_words"] for w in ws)
                     for k, grp in s[s["missed"]].groupby(["category", "key"], sort=True)} for g, s in spans.items()}
    targets = set().union(*(t for g in words.values() for t in g.values()))
    if regurgitation is not None and model is not None and model_kind(model) == "clm" and targets:
        from toolkit.audit.probe_causal import regurgitation_rate, with_nonmembers

        from toolkit.audit.losses import model_max_tokens

        prefix, new = int(regurgitation["prefix_tokens"]), int(regurgitation["max_new_tokens"])
        limit = model_max_tokens(model)
        if limit is not None and prefix + new + 1 > limit:  # prompt, BOS and continuation in the position table
            prefix = min(prefix, limit // 2)
            new = max(1, limit - prefix - 1)
        rkw = dict(prefix_tokens=prefix, max_new_tokens=new, progress=progress, hash_key=key, n_examples=0,
                   by_type=True)
        if batch_size:
            rkw["batch_size"] = batch_size
        r_m = regurgitation_rate(model, tokenizer, members, targets, **rkw)
        r_n = regurgitation_rate(model, tokenizer, nonmembers, targets, **rkw)
        per_type = {"members": r_m["by_type"], "nonmembers": r_n["by_type"]}
        reg = with_nonmembers(r_m, r_n, seed=seed)
        reg.pop("examples_hashed", None)
        reg.pop("examples_hash", None)
    out["regurgitation"] = reg

    records = []
    for cat, value in sorted(set(groups["members"]) | set(groups["nonmembers"])):
        k = (cat, value)
        rec: dict[str, Any] = {"hash": hash_term(value, key), "category": cat}
        for g in ("members", "nonmembers"):
            rec[g] = groups[g].get(k, {"occurrences": 0, "individuals": 0, "wholly_missed": 0})
        rec["pii_inference"] = {g: per_pii[g].get(k) for g in ("members", "nonmembers")}
        if reg is not None:
            mine = words["members"].get(k, set()) | words["nonmembers"].get(k, set())
            rec["regurgitation"] = {g: [int(sum(per_type[g].get(w, (0, 0))[i] for w in mine)) for i in (0, 1)]
                                    for g in ("members", "nonmembers")}
        else:
            rec["regurgitation"] = None
        p = rec["pii_inference"]["members"]
        rec["inferred"] = bool(p and p["ranked_first"] > 0)
        rec["reproduced"] = bool(rec["regurgitation"] and rec["regurgitation"]["members"][1] > 0)
        rec["recovered"] = rec["inferred"] or rec["reproduced"]
        records.append(rec)
    records.sort(key=lambda r: (r["category"], -r["members"]["occurrences"], -r["nonmembers"]["occurrences"],
                                r["hash"]))
    out["identifiers"] = records
    out["n_recovered"] = {"members": int(sum(r["recovered"] for r in records if r["members"]["occurrences"])),
                          "nonmembers_inferred": int(sum(bool(r["pii_inference"]["nonmembers"]
                                                              and r["pii_inference"]["nonmembers"]["ranked_first"])
                                                         for r in records))}
    return out


def has_gold_spans(*corpora: Corpus) -> bool:
    """True when a document of ``corpora`` carries a gold span."""
    return any(d.spans for c in corpora for d in c)


def detector_uses_gold(detector: str | None) -> bool:
    """True for a detector that includes the gold spans (``oracle``, alone or in a ``+`` combination): nothing is
    missed by definition."""
    return detector is not None and "oracle" in {p.strip().lower() for p in str(detector).split("+")}


def gold_fingerprint(corpus: Corpus) -> str:
    """SHA-256 of every document's id and gold spans (offsets and labels): what the missed step reads besides the
    texts (no text)."""
    import hashlib

    h = hashlib.sha256()
    for d in corpus:
        h.update(d.doc_id.encode("utf-8", "surrogatepass") + b"\0")
        for s in sorted(d.spans, key=lambda x: (x.start, x.end, x.label)):
            h.update(f"{s.start}:{s.end}:{s.label}\0".encode("utf-8", "surrogatepass"))
        h.update(b"\1")
    return h.hexdigest()


__all__ = ["DEFINITION", "SPAN_COLUMNS", "detector_uses_gold", "gold_fingerprint", "has_gold_spans", "missed_audit",
           "missed_spans", "regurgitation_targets"]
