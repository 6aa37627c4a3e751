"""The evidence a run's verdicts rest on, one row per attacked model, and the sentences read off it (notebooks 00, 02,
03 and the report's summary read them: their closing findings say what the verdict says).

* :func:`evidence_table` — per model (the base model, each strategy's last checkpoint): the verdict's colour, rule,
  attack and figure (``verdict.json``), the strongest attack of the battery with its interval (``attacks.json``),
  held-out utility beside training-note utility (methods.md §4), the gain retained over the base model with its
  bootstrap interval (:func:`toolkit.results.frontier.gain_retained`,
  :func:`toolkit.metrics.probing.heldout_gain_interval`), and the papers' own metrics (privacy and the count
  attack's AUC, methods.md §4–5) labelled as such;
* :func:`findings` — one plain-text line per model from that table, the papers' metrics beside the verdict's and,
  where they disagree, the sentence that says so; then what the held-out utilities of the run show together;
* :func:`heldout_summary` — whether every fine-tuned model's held-out utility is below the base model's.

Nothing here trains or probes: every figure is one the run wrote.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from toolkit.results.collect import RunData
from toolkit.results.frontier import GAIN_BOOTSTRAP, gain_retained
from toolkit.results.layout import epoch_text

#: a green verdict whose smallest detectable AUC is at least this is weak evidence: an attack separating members
#: from non-members this well (AUC 0.7, the conventional threshold of "acceptable discrimination", Hosmer &
#: Lemeshow, *Applied Logistic Regression*, 2000, §5.2.4) would be a leak, and the sample could not have seen it
WEAK_DETECTABLE_AUC = 0.7

#: a gain retained whose interval contains 0 (or, without an interval, below this): the model kept nothing
#: distinguishable from the base model
NOTHING_KEPT = 0.05

#: the columns of :func:`evidence_table`, in order
COLUMNS = ("model", "strategy", "epoch", "dp", "pp", "verdict", "verdict_rule", "verdict_attack", "verdict_figure",
           "verdict_attack_auc", "verdict_attack_auc_low", "verdict_attack_auc_high", "detectable_auc", "strongest_attack", "attack_auc", "attack_auc_low", "attack_auc_high", "n_members",
           "n_nonmembers", "heldout_utility", "utility", "base_heldout_utility", "gain_retained",
           "gain_retained_low", "gain_retained_high", "gain_note", "privacy", "count_auc", "count_auc_low",
           "count_auc_high")


def _text(v: Any) -> str | None:
    """A text cell of the table, None where it is empty (None or nan)."""
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)


def _num(v: Any) -> float | None:
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) else v


def plain_strategy(strategies) -> str | None:
    """Plain fine-tuning of the run's kind (``clm`` for causal strategies, ``mlm`` for masked ones), the reference of
    the gain retained; None when the strategies are of neither kind (audited models)."""
    from toolkit.strategies import STRATEGIES

    kinds = {STRATEGIES[s].kind for s in strategies if s in STRATEGIES}
    return "clm" if "clm" in kinds else "mlm" if "mlm" in kinds else None


def gain_with_interval(run: RunData, strategy: str, epoch: int | None, plain: str | None,
                       n_bootstrap: int = GAIN_BOOTSTRAP) -> tuple[float, float, float, str]:
    """``(G, low, high, note)``: the gain retained of one checkpoint over the run's base model, relative to ``plain``'s
    last checkpoint (:func:`toolkit.results.frontier.gain_retained`), and its 95% paired bootstrap interval over the
    held-out individuals (:func:`toolkit.metrics.probing.heldout_gain_interval`, read from the three audits'
    ``mia_predictions.parquet``; the non-members are its people who are not in the model's member predictions, as
    the frontier counts them). ``note`` says why G is undefined (``nan``): no base audit, no ``plain`` in the run,
    plain's held-out utility not above the base's (as :data:`~toolkit.results.frontier.GAIN_UNDEFINED` says) or above
    it but not significantly; "" when defined. Without the prediction files the interval is ``nan`` and G the point value."""
    from toolkit.metrics.probing import heldout_gain_interval

    nan = math.nan
    base = run.audits.get(("base", 0))
    mine = run.audits.get((strategy, epoch))
    ref = run.last(plain) if plain else None
    if base is None or mine is None:
        return nan, nan, nan, "undefined: the run has no audit of the base model"
    if ref is None:
        return nan, nan, nan, f"undefined: no plain fine-tuning ({plain or 'clm / mlm'}) in this run to compare with"
    u, u_base, u_plain = (_num(a["metrics"].get("heldout_utility")) for a in (mine, base, ref[1]))
    point = gain_retained(u, u_base, u_plain)
    if math.isnan(point):
        if None in (u, u_base, u_plain):
            return nan, nan, nan, "undefined: held-out utility was not measured"
        return nan, nan, nan, (f"undefined: plain fine-tuning ({plain}) is not above the base model on held-out "
                               f"notes ({u_plain:.3f} against {u_base:.3f}), so there is no gain to retain")
    paths = [a["dir"] / "mia_predictions.parquet" for a in (mine, base, ref[1])]
    member_file = mine["dir"] / "predictions.parquet"
    if not all(p.is_file() for p in paths) or not member_file.is_file():
        return point, nan, nan, ""
    model, base_p, plain_p = (pd.read_parquet(p) for p in paths)
    members = set(pd.read_parquet(member_file, columns=["person_id"])["person_id"])
    held = set(model["person_id"]) - members
    g, lo, hi = heldout_gain_interval(model, base_p, plain_p, held, n_bootstrap=n_bootstrap, seed=0)
    if math.isnan(g):
        return nan, nan, nan, (f"undefined: {plain}'s held-out gain over the base ({u_plain:.3f} against "
                               f"{u_base:.3f}) is not significant at 95%, so there is no gain to retain")
    return g, lo, hi, ""


def evidence_table(run: RunData, n_bootstrap: int = GAIN_BOOTSTRAP) -> pd.DataFrame:
    """One row per model with attack files (:meth:`RunData.attack_models`: the base model, each strategy's last
    checkpoint), or — in a run without the battery — per audited base model and last checkpoint, columns
    :data:`COLUMNS`: ``verdict*`` from ``verdict.json`` (None without one; ``verdict_attack_auc*``: the AUC and
    interval of the attack the deciding rule names, from ``attacks.json``), ``strongest_attack`` / ``attack_auc*`` the
    battery's highest-AUC attack with its interval (it can differ from the verdict's: a rule decides on its own
    test, e.g. TPR at low FPR, not on the highest AUC), ``utility`` (training notes, the papers' metric) beside
    ``heldout_utility``, ``gain_*`` from :func:`gain_with_interval` (plain fine-tuning's own gain is 1 by definition;
    the base model has none), ``privacy`` and ``count_auc*`` the papers' metrics (methods.md §4–5)."""
    from toolkit.strategies import STRATEGIES

    models = run.attack_models()
    keys: list[tuple[str, Any, dict]] = [(m["strategy"], m["epoch"], m) for m in models.values()]
    if not keys:  # no battery: the base model and the last checkpoints the run audited
        keys = [("base", 0, {})] if ("base", 0) in run.audits else []
        keys += [(s, run.last(s)[0], {}) for s in run.strategies]
    plain = plain_strategy(run.strategies)
    rows = []
    for strategy, epoch, m in keys:
        audit = run.audits.get((strategy, 0 if strategy == "base" and epoch is None else epoch)) or {}
        metrics, roc = audit.get("metrics") or {}, audit.get("roc") or {}
        att = m.get("attacks") or {}
        reports = att.get("attacks") or {}
        best = att.get("strongest") or (max(reports, key=lambda a: reports[a].get("auc") or 0) if reports else None)
        rep = reports.get(best) or {}
        ci = rep.get("auc_ci") or (None, None)
        v = m.get("verdict") or {}
        own = reports.get(v.get("attack")) or {}
        own_ci = own.get("auc_ci") or (None, None)
        strat = STRATEGIES.get(strategy)
        if strategy == "base" or strat is None:
            g = (math.nan, math.nan, math.nan, "")
        elif strategy == plain:
            g = (1.0, math.nan, math.nan, "plain fine-tuning: 1 by definition")
        else:
            g = gain_with_interval(run, strategy, epoch, plain, n_bootstrap)
        base_audit = run.audits.get(("base", 0)) or {}
        count_ci = roc.get("auc_ci") or (None, None)
        label = m.get("label") or (f"{strategy} ({epoch_text(epoch)})" if epoch is not None else strategy)
        rows.append({
            "model": label,
            "strategy": strategy, "epoch": epoch, "dp": bool(strat and strat.dp),
            "pp": bool(strat and strat.protect and strat.text == "original"),
            "verdict": v.get("level"), "verdict_rule": v.get("rule"), "verdict_attack": v.get("attack"),
            "verdict_figure": v.get("figure"), "verdict_attack_auc": _num(own.get("auc")),
            "verdict_attack_auc_low": _num(own_ci[0]), "verdict_attack_auc_high": _num(own_ci[1]),
            "detectable_auc": _num(v.get("detectable_auc")),
            "strongest_attack": best, "attack_auc": _num(rep.get("auc")), "attack_auc_low": _num(ci[0]),
            "attack_auc_high": _num(ci[1]), "n_members": att.get("n_members"), "n_nonmembers": att.get("n_nonmembers"),
            "heldout_utility": _num(metrics.get("heldout_utility")), "utility": _num(metrics.get("utility")),
            "base_heldout_utility": _num((base_audit.get("metrics") or {}).get("heldout_utility")),
            "gain_retained": g[0], "gain_retained_low": g[1], "gain_retained_high": g[2], "gain_note": g[3],
            "privacy": _num(metrics.get("privacy")), "count_auc": _num(roc.get("auc")),
            "count_auc_low": _num(count_ci[0]), "count_auc_high": _num(count_ci[1])})
    return pd.DataFrame(rows, columns=list(COLUMNS))


def heldout_summary(table: pd.DataFrame) -> str | None:
    """The sentence on the run's held-out utilities together: every fine-tuned model below the base model's (then
    fine-tuning taught nothing that carries to unseen notes at this size, and what a model gained on its training
    notes is memorisation — said with the figures of the models that gained there), or how many are above it; None
    without the base's or any fine-tuned model's figure."""
    base = table.loc[table["strategy"] == "base", "heldout_utility"].dropna()
    tuned = table.loc[table["strategy"] != "base"].dropna(subset=["heldout_utility"])
    if not len(base) or not len(tuned):
        return None
    b, lo, hi = float(base.iloc[0]), float(tuned["heldout_utility"].min()), float(tuned["heldout_utility"].max())
    above = tuned[tuned["heldout_utility"] > b]
    span = f"{lo:.3f}" if lo == hi else f"{lo:.3f}–{hi:.3f}"
    if not len(above):
        text = (f"Every fine-tuned model's held-out utility is below the base model's (base {b:.3f}; fine-tuned "
                f"{span}): at this size fine-tuning taught nothing that carries to notes of unseen people")
        base_train = table.loc[table["strategy"] == "base", "utility"].dropna()
        gained = tuned[tuned["utility"] > float(base_train.iloc[0])] if len(base_train) else tuned.iloc[:0]
        if len(gained):
            text += (f"; what {', '.join(gained['strategy'])} gained on the training notes (utility "
                     f"{gained['utility'].min():.3f}–{gained['utility'].max():.3f} against the base's "
                     f"{float(base_train.iloc[0]):.3f}) is memorisation of those notes")
        return text + "."
    return (f"{len(above)} of {len(tuned)} fine-tuned models have a held-out utility above the base model's "
            f"{b:.3f} ({', '.join(above['strategy'])}); fine-tuned models span {span}.")


def _interval(lo: float | None, hi: float | None, digits: int = 2) -> str:
    return "" if lo is None or hi is None or pd.isna(lo) or pd.isna(hi) else f" [{lo:.{digits}f}, {hi:.{digits}f}]"


def _gain_text(r: Mapping[str, Any]) -> str:
    g = r["gain_retained"]
    if r["strategy"] == "base":
        return ""
    if pd.isna(g):
        return f"gain retained {_text(r['gain_note']) or 'undefined'}"
    if _text(r["gain_note"]):  # plain fine-tuning
        return ""
    lo, hi = r["gain_retained_low"], r["gain_retained_high"]
    text = f"gain retained {g:.0%}" + (f" [{lo:.0%}, {hi:.0%}]" if pd.notna(lo) else "")
    if (pd.notna(lo) and lo <= 0 <= hi) or (pd.isna(lo) and abs(g) < NOTHING_KEPT):
        text += " — not distinguishable from learning nothing beyond the base model"
    return text


def gain_texts(table: pd.DataFrame) -> dict[str, str]:
    """``strategy → "gain retained 3% [−9%, 14%]"`` (or ``"gain retained undefined"``) of every fine-tuned strategy
    but plain fine-tuning: the legend entries of :func:`toolkit.plots.privacy_utility`."""
    out = {}
    for _, r in table.iterrows():
        if r["strategy"] == "base" or (_text(r["gain_note"]) or "").startswith("plain fine-tuning"):
            continue
        g, lo, hi = r["gain_retained"], r["gain_retained_low"], r["gain_retained_high"]
        out[r["strategy"]] = ("gain retained undefined" if pd.isna(g) else f"gain retained {g:.0%}"
                              + (f" [{lo:.0%}, {hi:.0%}]" if pd.notna(lo) else ""))
    return out


def _verdict_text(r: Mapping[str, Any], names: Mapping[str, str], rules: Mapping[str, str]) -> str:
    level, rule_key = _text(r["verdict"]), _text(r["verdict_rule"])
    attack, figure = _text(r["verdict_attack"]), _text(r["verdict_figure"])
    if not level:
        return "no verdict (the run has no attack results)"
    text = f"verdict {level.upper()}"
    if level in ("red", "amber") and rule_key:
        rule = rules.get(rule_key, rule_key)
        detail = ", ".join(x for x in (names.get(attack, attack) if attack else None, figure) if x)
        text += f" — {rule}" + (f"; {detail}" if detail else "")
    elif level in ("green", "incomplete") and pd.notna(r["detectable_auc"]):
        text += f" at a smallest detectable AUC of {r['detectable_auc']:.2f}"
        if level == "green" and r["detectable_auc"] >= WEAK_DETECTABLE_AUC:
            text += (f" — weak evidence: an attack up to AUC {r['detectable_auc']:.2f} could have gone unseen "
                     + (f"with {int(r['n_members'])} + {int(r['n_nonmembers'])} people" if pd.notna(r["n_members"])
                        else "at this sample size"))
    return text


def disagreement(r: Mapping[str, Any], names: Mapping[str, str]) -> str | None:
    """The sentence where the papers' metrics and the verdict disagree: the papers' count attack does not separate
    members (its interval contains 0.5, or its AUC is ≤ 0.5 without one) while the verdict is red or amber — on a
    membership rule said with both AUCs, and for a PP strategy (identifiers kept as inputs, never as targets) why; on
    another rule (regurgitation, novel identifiers …) the rule named; None where they agree or a figure is missing."""
    if r["verdict"] not in ("red", "amber") or pd.isna(r["count_auc"]):
        return None
    membership = (_text(r["verdict_rule"]) or "").startswith("membership")
    count_chance = (r["count_auc_low"] <= 0.5 if pd.notna(r["count_auc_low"]) else r["count_auc"] <= 0.5)
    if not count_chance:
        return None
    key = _text(r["verdict_attack"])
    if key and pd.notna(r["verdict_attack_auc"]):
        auc, lo, hi = r["verdict_attack_auc"], r["verdict_attack_auc_low"], r["verdict_attack_auc_high"]
    else:
        key, auc, lo, hi = _text(r["strongest_attack"]), r["attack_auc"], r["attack_auc_low"], r["attack_auc_high"]
    if not membership:  # decided by another rule (regurgitation, novel identifiers, PII inference …)
        rule = _text(r["verdict_rule"]) or "its rule"
        return (f"{r['model']}: the papers' count attack does not tell members from non-members (AUC "
                f"{r['count_auc']:.2f}{_interval(r['count_auc_low'], r['count_auc_high'])}), but the verdict is "
                f"{r['verdict'].upper()} by another rule ({rule.replace('_', ' ')})"
                + (f" and {names.get(key, key)} reaches AUC {auc:.2f}{_interval(lo, hi)}" if key and pd.notna(auc)
                   else "") + ".")
    if not key or pd.isna(auc):
        return None
    privacy = f"; identifiers' privacy {r['privacy']:.2f}" if pd.notna(r["privacy"]) else ""
    text = (f"{r['model']}: the papers' count attack does not tell members from non-members (AUC "
            f"{r['count_auc']:.2f}{_interval(r['count_auc_low'], r['count_auc_high'])}{privacy}) — but "
            f"{names.get(key, key)} reaches AUC {auc:.2f}{_interval(lo, hi)} → {r['verdict'].upper()} on membership")
    if r["pp"]:
        text += (": a PP strategy protects identifiers as prediction targets, not membership — the model still "
                 "learns the rest of each training note")
    return text + "."


def learnt_nothing(r: Mapping[str, Any]) -> str | None:
    """The sentence for a DP model whose green verdict comes with no gain: its gain retained undefined or not
    distinguishable from 0 (its interval contains 0, or below :data:`NOTHING_KEPT` without one) — nothing leaked,
    and nothing was learnt that could. None otherwise."""
    if not r["dp"] or r["verdict"] != "green":
        return None
    g, lo, hi = r["gain_retained"], r["gain_retained_low"], r["gain_retained_high"]
    if pd.notna(g) and not ((pd.notna(lo) and lo <= 0 <= hi) or (pd.isna(lo) and abs(g) < NOTHING_KEPT)):
        return None
    u, b = r["heldout_utility"], r["base_heldout_utility"]
    figures = (f" (held-out utility {u:.3f} against the base model's {b:.3f})" if pd.notna(u) and pd.notna(b) else "")
    return (f"{r['model']} is green but kept no measurable gain over the base model{figures}: nothing leaked, and "
            "nothing was learnt that could — not evidence that DP-SGD is cheap at this size.")


def findings(table: pd.DataFrame, names: Mapping[str, str] | None = None,
             rules: Mapping[str, str] | None = None) -> list[str]:
    """Plain-text lines read off :func:`evidence_table`, computed for this run: per model its verdict (colour and
    deciding rule, or the smallest detectable AUC of a green with "weak evidence" at or above
    :data:`WEAK_DETECTABLE_AUC`), the strongest attack with its interval, held-out utility beside the base's and the
    training notes', the gain retained with its interval (or why it is undefined, or that it is indistinguishable
    from 0), then the papers' metrics labelled as theirs and :func:`disagreement` where they contradict the verdict;
    last :func:`heldout_summary`. ``names``: attack key → plain name; ``rules``: rule key → plain words (default:
    the keys)."""
    names, rules = names or {}, rules or {}
    lines = []
    for _, r in table.iterrows():
        parts = [_verdict_text(r, names, rules)]
        best = _text(r["strongest_attack"])
        if best:
            other = _text(r["verdict_attack"]) not in (None, best)
            parts.append(f"strongest attack{' by AUC' if other else ''} {names.get(best, best)} AUC "
                         f"{r['attack_auc']:.2f}{_interval(r['attack_auc_low'], r['attack_auc_high'])} "
                         f"({int(r['n_members'])} members, {int(r['n_nonmembers'])} non-members)")
        if pd.notna(r["heldout_utility"]):
            base = ("" if r["strategy"] == "base" or pd.isna(r["base_heldout_utility"])
                    else f", base {r['base_heldout_utility']:.3f}")
            parts.append(f"held-out utility {r['heldout_utility']:.3f}{base}")
        gain = _gain_text(r)
        if gain:
            parts.append(gain)
        papers = []
        if pd.notna(r["privacy"]):
            papers.append(f"privacy {r['privacy']:.3f}")
        if pd.notna(r["utility"]):
            papers.append(f"utility on the training notes {r['utility']:.3f}")
        if pd.notna(r["count_auc"]):
            papers.append(f"count-attack MIA AUC {r['count_auc']:.2f}{_interval(r['count_auc_low'], r['count_auc_high'])}")
        if papers:
            parts.append("the papers' metrics: " + ", ".join(papers))
        lines.append(f"{r['model']}: " + "; ".join(parts) + ".")
        clash = disagreement(r, names)
        if clash:
            lines.append(clash)
        empty = learnt_nothing(r)
        if empty:
            lines.append(empty)
    summary = heldout_summary(table)
    if summary:
        lines.append(summary)
    return lines


__all__ = ["COLUMNS", "NOTHING_KEPT", "WEAK_DETECTABLE_AUC", "disagreement", "evidence_table", "findings",
           "gain_texts", "gain_with_interval", "heldout_summary", "learnt_nothing", "plain_strategy"]
