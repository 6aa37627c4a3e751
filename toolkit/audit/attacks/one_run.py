"""The one-run privacy audit (Steinke, Nasr & Jagielski, "Privacy Auditing with One (1) Training Run", NeurIPS 2023;
methods.md §10): an empirical lower bound on ε from the model trained once, beside the DP accountant's ε.

1. :func:`one_run_canaries_into_corpus`: ``m`` seeded canaries — a template sentence with a made-up name and an
   8-digit code (:func:`~toolkit.audit.attacks.canaries.make_canaries`, another template and seed stream than the
   exposure canaries) — are each marked *included* independently with probability ½ (seeded, recorded in the table).
   Every canary, included or not, gets a host individual (uniform among the members) and ``repeats`` insertion
   points at sentence starts of the host's documents (never inside a gold span or another canary); only the included
   ones are inserted. The draws do not depend on the inclusion of any other canary, and a canary changes its host's
   documents only. The accountant's (ε, δ) is for adding or removing one individual (the DP unit,
   ``DPConfig.unit = "individual"``); including a canary *changes* its host's notes — a removal and an addition — so
   by group privacy training is (2ε, (1 + e^ε)δ)-DP with respect to each canary's inclusion, which is what the
   theorem needs: the bound of a DP model is computed at that δ and compared with 2ε (``claimed_epsilon``).
2. :func:`one_run_audit`: after training, every canary's record is scored by the audited model with the battery's
   one-pass token losses (:func:`~toolkit.audit.losses.token_losses`): the ``reference`` score (mean token loss under
   the reference model minus under the audited one, :func:`~toolkit.audit.attacks.reference.reference_score`) when a
   reference model is given, else ``loss`` (−mean token loss); then
   :func:`toolkit.metrics.one_run.one_run_epsilon_score` guesses and bounds ε at 95% confidence, for δ the
   accountant's (``training_log.json`` of a DP checkpoint, :func:`accountant_privacy`) or 1e-5.

:func:`without_canaries` gives the membership battery the members' notes with the audit canaries cut out (and the
identifier tables' offsets moved), so that no attack scores them as evidence of a note's membership.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from toolkit.audit.attacks.canaries import canary_ranges, make_canaries
from toolkit.corpus import Corpus, Span
from toolkit.metrics.one_run import OneRunBound, one_run_epsilon_score

__all__ = ["DEFAULT_DELTA", "TEMPLATE", "OneRunAudit", "accountant_privacy", "make_one_run_canaries",
           "one_run_audit", "one_run_canaries_into_corpus", "one_run_scores", "without_canaries"]

TEMPLATE = "The audit code of {name} is {number}."
#: δ of the bound where the model has no accountant's δ (a model trained without DP, the base model)
DEFAULT_DELTA = 1e-5
_STREAMS = {"canaries": 0x1A, "inclusion": 0x1B, "placement": 0x1C}  # independent seeded generators


def _seed(seed: int, stream: str) -> int:
    return int(np.random.SeedSequence([int(seed), _STREAMS[stream]]).generate_state(1)[0])


def make_one_run_canaries(m: int, *, seed: int = 0, template: str = TEMPLATE) -> pd.DataFrame:
    """``m`` audit canaries (``canary_id`` ``audit-0000`` …, ``name``, ``number``, ``prefix``, ``suffix``, ``text``)
    and ``included``: each True independently with probability ½ (seeded)."""
    if m < 1:
        raise ValueError(f"the one-run audit needs at least 1 canary, got {m}")
    table = make_canaries(m, seed=_seed(seed, "canaries"), template=template)
    table["canary_id"] = [f"audit-{i:04d}" for i in range(m)]
    table["included"] = np.random.default_rng(_seed(seed, "inclusion")).random(m) < 0.5
    return table


def _starts(text: str, avoid: Sequence[tuple[int, int]]) -> list[int]:
    """Sentence starts of ``text`` (0, after ". ", after a newline) not strictly inside a range of ``avoid``."""
    starts = {0} | {i + 2 for i in range(len(text)) if text.startswith(". ", i)} | \
             {i + 1 for i, c in enumerate(text) if c == "\n"}
    return sorted(p for p in starts if not any(a < p < b for a, b in avoid))


def one_run_canaries_into_corpus(corpus: Corpus, m: int, *, repeats: int = 1, seed: int = 0,
                                 avoid: dict[str, list[tuple[int, int]]] | None = None
                                 ) -> tuple[Corpus, pd.DataFrame]:
    """``corpus`` with the included canaries of :func:`make_one_run_canaries` inserted (each ``repeats`` times into
    its host individual's documents, followed by a space), gold spans moved with the text; and the table with
    ``person_id`` (the host, drawn for every canary), ``repeats`` (0 for an excluded canary) and ``doc_ids`` (one entry
    per insertion). ``avoid``: ``doc_id → [(start, end)]`` ranges no insertion may split (e.g. other canaries)."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    docs = list(corpus)
    if not docs:
        raise ValueError("no documents to insert the audit canaries into")
    table = make_one_run_canaries(m, seed=seed)
    by_person: dict[str, list[int]] = {}
    for i, d in enumerate(docs):
        by_person.setdefault(d.person_id, []).append(i)
    people = list(by_person)
    rng = np.random.default_rng(_seed(seed, "placement"))
    starts: dict[int, list[int]] = {}
    todo: dict[int, list[tuple[int, str]]] = {}
    hosts, doc_ids = [], []
    for r in table.itertuples(index=False):
        host = people[int(rng.integers(0, len(people)))]
        where = []
        for _ in range(repeats):  # drawn for every canary: the data given S does not depend on the other draws
            j = by_person[host][int(rng.integers(0, len(by_person[host])))]
            if j not in starts:
                d = docs[j]
                starts[j] = _starts(d.text, [(s.start, s.end) for s in d.spans] + list((avoid or {}).get(d.doc_id, ())))
            where.append((j, starts[j][int(rng.integers(0, len(starts[j])))]))
        hosts.append(host)
        doc_ids.append([docs[j].doc_id for j, _ in where] if r.included else [])
        if r.included:
            for j, p in where:
                todo.setdefault(j, []).append((p, r.text + " "))
    out = list(docs)
    for j, ins in todo.items():
        d, text = docs[j], docs[j].text
        for p, s in sorted(ins, key=lambda x: x[0], reverse=True):  # right to left: earlier offsets stay valid
            text = text[:p] + s + text[p:]

        def moved(x: int, ins=ins) -> int:
            return x + sum(len(s) for p, s in ins if p <= x)

        out[j] = replace(d, text=text, spans=tuple(Span(moved(s.start), moved(s.start) + s.end - s.start, s.label)
                                                   for s in d.spans))
    table["person_id"], table["doc_ids"] = hosts, doc_ids
    table["repeats"] = [len(x) for x in doc_ids]
    return Corpus(out, source=corpus.source), table


def without_canaries(corpus: Corpus, table: pd.DataFrame, identifiers: dict[str, Any] | None = None
                     ) -> tuple[Corpus, dict[str, Any] | None]:
    """``corpus`` with every inserted record of ``table`` (and the space after it) cut out, gold spans moved back;
    and ``identifiers`` (an identifiers-step dict) with the ``start``/``end`` of its ``spans`` and ``positions``
    frames moved the same way (the canaries hold no identifier: none lies inside a cut range)."""
    ranges = canary_ranges(corpus, table, with_separator=True)
    if not ranges:
        return corpus, identifiers

    def shift(doc_id: str, x) -> np.ndarray:
        x = np.asarray(x, dtype=np.int64)
        cut = ranges.get(doc_id, [])
        return x - sum(np.where(x >= b, b - a, 0) for a, b in cut) if cut else x

    out = []
    for d in corpus:
        cut = ranges.get(d.doc_id)
        if not cut:
            out.append(d)
            continue
        keep, at = [], 0
        for a, b in cut:
            keep.append(d.text[at:a])
            at = max(at, b)
        keep.append(d.text[at:])
        spans = tuple(Span(int(shift(d.doc_id, s.start)), int(shift(d.doc_id, s.end)), s.label) for s in d.spans)
        out.append(replace(d, text="".join(keep), spans=spans))
    if identifiers is None:
        return Corpus(out, source=corpus.source), None
    ids = dict(identifiers)
    for key in ("spans", "positions"):
        frame = ids.get(key)
        if isinstance(frame, pd.DataFrame) and len(frame) and {"doc_id", "start", "end"} <= set(frame.columns):
            frame = frame.copy()
            for col in ("start", "end"):
                frame[col] = [int(shift(doc, x)) for doc, x in zip(frame["doc_id"], frame[col])]
            ids[key] = frame
    return Corpus(out, source=corpus.source), ids


def one_run_scores(model, tokenizer, texts: Sequence[str], *, reference=None, batch_size: int | None = None,
                   progress: bool = True) -> tuple[np.ndarray, str]:
    """``(scores, attack)``: each canary record's membership score under ``model`` from its token losses (the whole
    record, exact: a record is a few tokens), ``reference`` (a ``(model, tokenizer)`` pair) → the ``reference``
    attack (token means, or per byte when the vocabularies differ), else ``loss``."""
    from toolkit.audit.attacks.battery import same_vocabulary
    from toolkit.audit.attacks.loss import loss_score
    from toolkit.audit.attacks.reference import reference_score
    from toolkit.audit.losses import token_losses

    texts = list(texts)
    tl = token_losses(model, tokenizer, texts, window=None, batch_size=batch_size, moments=False, progress=progress,
                      label="one-run audit")
    if reference is None:
        return np.asarray(loss_score(tl), dtype=float), "loss"
    ref_model, ref_tok = reference
    rtl = token_losses(ref_model, ref_tok, texts, window=None, batch_size=batch_size, moments=False,
                       progress=progress, label="one-run audit (reference)")
    norm = "token-mean" if same_vocabulary(tokenizer, ref_tok) else "per-byte"
    return np.asarray(reference_score(tl, reference_losses=rtl, normalisation=norm), dtype=float), "reference"


def accountant_privacy(model_dir: str | Path) -> dict[str, Any] | None:
    """``{"epsilon", "delta", "unit"}`` spent by DP-SGD training of the checkpoint ``model_dir`` (its
    ``training_log.json``, :mod:`toolkit.training.dp`); None for a model trained without DP (or not by the toolkit)."""
    path = Path(model_dir) / "training_log.json"
    try:
        dp = json.loads(path.read_text(encoding="utf-8")).get("dp")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(dp, dict) or dp.get("spent_epsilon") is None:
        return None
    return {"epsilon": float(dp["spent_epsilon"]), "delta": float(dp.get("delta", DEFAULT_DELTA)),
            "unit": dp.get("unit")}


@dataclass
class OneRunAudit:
    """The one-run audit of one model: the :class:`~toolkit.metrics.one_run.OneRunBound`, the ``attack`` that scored
    the canaries, the accountant's ε / δ / unit (None without DP), where δ came from (``"accountant"`` or
    ``"default"``) and the per-canary ``scores`` (``canary_id``, ``included``, ``score``: made-up records only)."""

    bound: OneRunBound
    attack: str
    accountant_epsilon: float | None = None
    accountant_unit: str | None = None
    #: the ε the accountant implies for one canary's inclusion (2ε: a change of one individual's notes)
    claimed_epsilon: float | None = None
    delta_source: str = "default"
    scores: pd.DataFrame = field(default_factory=pd.DataFrame)

    def to_json(self) -> dict[str, Any]:
        """The ``one_run`` entry of ``attacks.json`` (methods.md §10)."""
        return {**self.bound.to_dict(), "attack": self.attack, "delta_source": self.delta_source,
                "accountant_epsilon": self.accountant_epsilon, "accountant_unit": self.accountant_unit,
                "claimed_epsilon": self.claimed_epsilon}


def one_run_audit(model, tokenizer, canaries: pd.DataFrame, *, reference=None, accountant: dict | None = None,
                  confidence: float = 0.95, guesses: Sequence[tuple[int, int]] | None = None,
                  batch_size: int | None = None, progress: bool = True) -> OneRunAudit:
    """The one-run audit of ``model`` on the ``canaries`` of :func:`one_run_canaries_into_corpus` (module docstring):
    every record scored (:func:`one_run_scores`), then the ε lower bound at ``confidence`` for δ = the
    ``accountant``'s (:func:`accountant_privacy`) or :data:`DEFAULT_DELTA`, over the ``guesses`` pairs (default:
    :func:`toolkit.metrics.one_run.default_guesses`)."""
    if "included" not in canaries or not len(canaries):
        raise ValueError("the one-run audit needs the canary table with its 'included' column")
    scores, attack = one_run_scores(model, tokenizer, list(canaries["text"]), reference=reference,
                                    batch_size=batch_size, progress=progress)
    included = canaries["included"].to_numpy(dtype=bool)
    claimed = None
    if accountant:  # one canary changes one individual's notes: group privacy of 2 (module docstring)
        eps = float(accountant["epsilon"])
        claimed, delta = 2 * eps, min(1.0, (1 + float(np.exp(eps))) * float(accountant["delta"]))
    else:
        delta = DEFAULT_DELTA
    bound = one_run_epsilon_score(scores, included, delta=delta, confidence=confidence, guesses=guesses)
    table = pd.DataFrame({"canary_id": list(canaries["canary_id"]), "included": included, "score": scores})
    return OneRunAudit(bound=bound, attack=attack,
                       accountant_epsilon=float(accountant["epsilon"]) if accountant else None,
                       accountant_unit=accountant.get("unit") if accountant else None, claimed_epsilon=claimed,
                       delta_source="accountant" if accountant else "default", scores=table)
