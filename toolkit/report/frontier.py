"""The report's privacy–utility frontier section: a frontier directory (``python -m toolkit frontier``) given to
``python -m toolkit report`` beside (or instead of) run directories.

One figure (the **gain retained** — :func:`toolkit.results.frontier.gain_retained`, the share of plain fine-tuning's
held-out gain over the untouched base model a model kept — against the strongest membership attack's AUC, the base
model a point of its own, :func:`toolkit.plots.frontier.frontier_figure`), the table of every model with its verdict
(:mod:`toolkit.results.frontier`), one sentence per corpus size naming the best recipe
(:func:`toolkit.results.frontier.best_recipes`: the green model that keeps the most of the gain, and whether it
reaches the goal :data:`~toolkit.results.frontier.GAIN_GOAL`), and one sentence per model saying what decided its
colour and under which rules it was judged (:func:`verdict_sentences`).

The table shows the gain retained with its 95% interval (:func:`toolkit.metrics.probing.heldout_gain_interval`) in
the same cell, held-out utility and its ratio to plain (``× plain``) beside it. To stay as
wide as before, PII inference's top-1 and its chance level share one column; the base model's held-out utility per
size is in the summary line above it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from toolkit.plots.frontier import frontier_figure
from toolkit.report.formatting import figure, fmt, pct, table
from toolkit.results.frontier import GAIN_GOAL, GAIN_UNDEFINED, best_recipes, epsilon_text, load_frontier_result

#: the table's columns in the report, with their headings
SHOWN = {"size": "individuals", "strategy": "strategy", "epsilon": "ε (target)", "heldout_gain_retained": "gain retained",
         "heldout_utility": "held-out utility", "heldout_utility_vs_plain": "× plain",
         "utility_vs_plain": "training notes × plain",
         "strongest_attack": "strongest attack", "attack_auc": "AUC", "attack_tpr_at_1pct_fpr": "TPR@1% FPR",
         "pii_top1": "PII top-1 (chance)", "canary_max_exposure": "max canary exposure (bits)",
         "empirical_epsilon": "empirical ε (95%)", "accountant_epsilon": "accountant ε", "verdict": "verdict",
         "verdict_rule": "deciding rule"}


def is_frontier_dir(path: str | Path) -> bool:
    return (Path(path) / "frontier.json").is_file()


def _gain_cell(b: dict[str, Any]) -> str:
    """A gain retained with its 95% interval where at hand: ``18.3% [17.6, 19.0]``."""
    gain, lo, hi = (_float(b.get(k)) for k in ("heldout_gain_retained", "heldout_gain_retained_low",
                                               "heldout_gain_retained_high"))
    return pct(gain, 1) + (f" [{100 * lo:.1f}, {100 * hi:.1f}]" if lo is not None and hi is not None else "")


def best_sentences(best: dict[int, dict[str, Any]], plain: str) -> list[str]:
    """One sentence per corpus size (:func:`~toolkit.results.frontier.best_recipes`): the green model that keeps the
    most of ``plain``'s held-out gain over the base, and whether it reaches the goal (:data:`GAIN_GOAL`); the gain
    retained undefined at that size said in words; without a green model, the one the strongest attack separates
    least."""
    out = []
    goal = f"the goal of {GAIN_GOAL:.0%}"
    for size, b in sorted(best.items()):
        eps = epsilon_text(b.get("epsilon"))
        eps += " (no DP)" if eps == "∞" else ""
        auc = b.get("attack_auc")
        auc_text = "n/a" if auc is None else f"{auc:.3f}"
        gain = _float(b.get("heldout_gain_retained"))
        u = _float(b.get("heldout_utility"))
        u_text = "n/a" if u is None else f"{u:.3f}"
        kept = (f"gain retained {GAIN_UNDEFINED}; held-out utility {u_text}" if not b.get("gain_defined", True)
                else f"gain retained not recorded; held-out utility {u_text}" if gain is None
                else f"{_gain_cell(b)} of {plain}'s held-out gain (held-out utility {u_text})")
        if b.get("found"):
            out.append(f"{size} individuals: {b['strategy']} at ε = {eps} is green under every attack and keeps "
                       f"{kept}, reaching {goal} (strongest attack AUC {auc_text}).")
        elif b.get("verdict") == "green":
            reach = ("" if gain is None else f", short of {goal} by {100 * (GAIN_GOAL - gain):.1f} points")
            out.append(f"{size} individuals: no green model reaches {goal}; the green one that keeps the most is "
                       f"{b['strategy']} at ε = {eps}: {kept}{reach} (strongest attack AUC {auc_text}).")
        else:
            out.append(f"{size} individuals: no model is green; the one the strongest attack separates least is "
                       f"{b['strategy']} at ε = {eps} (AUC {auc_text}, verdict {b.get('verdict')}): {kept}.")
    return out


def shown_table(frontier: pd.DataFrame) -> pd.DataFrame:
    """The frontier table as the report and notebook 07 show it: the :data:`SHOWN` columns under their headings, ε
    as text (∞ for no DP), the gain retained as a percentage with its 95% interval in brackets where the table has
    one (n/a where undefined: :func:`base_sentence` says why) and PII top-1 with its chance level in brackets."""
    shown = frontier[[c for c in SHOWN if c in frontier]].copy()
    shown["epsilon"] = [epsilon_text(e) for e in shown["epsilon"]]
    if "heldout_gain_retained" in shown:
        low, high = (frontier[c] if c in frontier else [None] * len(shown)
                     for c in ("heldout_gain_retained_low", "heldout_gain_retained_high"))
        shown["heldout_gain_retained"] = [
            pct(_float(g), 0) + ("" if _float(lo) is None or _float(hi) is None or _float(g) is None
                                 else f" [{100 * _float(lo):.0f}, {100 * _float(hi):.0f}]")
            for g, lo, hi in zip(shown["heldout_gain_retained"], low, high)]
    if "pii_top1" in shown:
        chance = frontier["pii_chance"] if "pii_chance" in frontier else [None] * len(shown)
        shown["pii_top1"] = [fmt(_float(t), 2) + ("" if _float(c) is None else f" ({fmt(_float(c), 3)})")
                             for t, c in zip(shown["pii_top1"], chance)]
    return shown.rename(columns=SHOWN)


def _float(v) -> float | None:
    return None if v is None or pd.isna(v) else float(v)


def base_sentence(frontier: pd.DataFrame, plain: str) -> str:
    """The base model's held-out utility per corpus size (what the gain retained starts from), and why the gain is
    undefined at a size where plain fine-tuning's is not (significantly) above it or where the base's is not
    recorded."""
    parts = []
    for size, g in frontier.groupby("size"):
        base = g["base_heldout_utility"].dropna() if "base_heldout_utility" in g else []
        plain_rows = g[g["strategy"] == plain]
        plain_u = plain_rows["heldout_utility"].dropna()
        undefined = len(plain_u) and "heldout_gain_retained" in g and plain_rows["heldout_gain_retained"].isna().all()
        if not len(base):
            parts.append(f"{size} individuals: not recorded (no gain retained)")
        elif undefined:
            parts.append(f"{size} individuals: {float(base.iloc[0]):.3f} (gain retained {GAIN_UNDEFINED})")
        elif len(plain_u) and plain_u.iloc[0]:
            b = float(base.iloc[0])
            parts.append(f"{size} individuals: {b:.3f} = {b / float(plain_u.iloc[0]):.2f}× {plain}'s")
        else:
            parts.append(f"{size} individuals: {float(base.iloc[0]):.3f}")
    return ("Gain retained: (U − U_base) / (U_plain − U_base), the share of " + plain + "'s held-out gain over the "
            "untouched base model that a model kept, with its 95% interval in brackets where the runs' predictions "
            "were at hand (a bootstrap over the held-out individuals, the three models paired). The base model's "
            "held-out utility — " + "; ".join(parts) + ".")


#: deciding-rule keys that older verdict files carry and the current rules (toolkit/audit/rules/, audit/verdict.py)
#: never emit: regurgitation and PII inference against the base model's level, novel-identifier privacy without the
#: non-members' side — replaced on 2026-11-28 (6888e34, dbe4501) by tests of the members against the non-members
RETIRED_RULES = frozenset({"novel_privacy", "regurgitation_base_level", "pii_reference_level"})


def verdicts_judged(result) -> list[str]:
    """Per row of a :class:`~toolkit.results.frontier.FrontierResult`, under which rules its verdict was judged:
    ``"current rules"`` where the row records the current :data:`~toolkit.audit.verdict.RULES_VERSION`
    (``verdict_rules``) and its deciding rule is a current one; else ``"older rules: …"`` — the rules the row records,
    or the table's ``verdicts_judged`` stamp (with when and why it was not re-judged), or, with neither, "not
    recorded" — never the current rules by default. A deciding rule the current rules no longer have
    (:data:`RETIRED_RULES`) marks its row too."""
    from toolkit.audit.verdict import RULES_VERSION

    stamp = result.verdicts_judged or {}
    rules = result.table["verdict_rules"] if "verdict_rules" in result.table else [None] * len(result.table)
    out = []
    for version, rule in zip(rules, result.table["verdict_rule"]):
        version = None if version is None or pd.isna(version) else str(version)
        if rule in RETIRED_RULES and version in (None, RULES_VERSION):
            out.append(f"older rules: {stamp['rules']}" if stamp.get("rules")
                       else f"older rules: its deciding rule `{rule}` is no longer a rule")
        elif version == RULES_VERSION:
            out.append("current rules")
        elif version is not None:
            out.append(f"older rules: the verdict of {version}")
        elif stamp.get("rules"):
            out.append(f"older rules: {stamp['rules']}")
        else:
            out.append("older rules: not recorded (a verdict written before verdicts recorded their rules)")
    return out


def verdict_sentences(result) -> list[str]:
    """One sentence per row of a :class:`~toolkit.results.frontier.FrontierResult`: its colour and what decided it —
    the deciding rule in plain words (:data:`toolkit.report.verdicts.RULES`; a rule whose meaning changed since, in
    the words of the rules that judged it: the stamp's ``rule_words``) — and under which rules it was judged
    (:func:`verdicts_judged`), with why an older verdict was not re-judged (the stamp's ``missing``)."""
    from toolkit.audit.verdict import GREEN_STATEMENT
    from toolkit.report.verdicts import RULES

    stamp = result.verdicts_judged or {}
    then = stamp.get("rule_words") or {}
    out = []
    for r, judged in zip(result.table.itertuples(index=False), verdicts_judged(result)):
        eps = epsilon_text(r.epsilon)
        head = f"{r.size} individuals, {r.strategy} at ε = {eps}{' (no DP)' if eps == '∞' else ''}: "
        level, rule = (r.verdict if isinstance(r.verdict, str) else None), r.verdict_rule
        if level is None:
            out.append(head + "no verdict recorded.")
            continue
        if level == "green":
            why = GREEN_STATEMENT
        else:
            words = then.get(rule) if judged != "current rules" and rule in then else RULES.get(rule, str(rule))
            why = f"{words} (`{rule}`)"
        if judged == "current rules":
            tail = "judged under the current rules"
        elif stamp.get("rules_version") and judged == f"older rules: {stamp.get('rules')}":
            tail = (f"judged under the verdict of {stamp['rules_version']}"
                    + (f" ({stamp['rules_commit']})" if stamp.get("rules_commit") else "")
                    + ("; not re-judged" if stamp.get("recomputable") is False else ""))
        else:
            tail = f"judged under {judged.removeprefix('older rules: ')}"
        out.append(f"{head}{level} — {why}; {tail}.")
    return out


def rules_sentence(result) -> str:
    """Once per table: how many rows the current rules judged (:data:`~toolkit.audit.verdict.RULES_VERSION`), and
    for the others the rules that did, what re-judging them would need and when that was last checked (the table's
    ``verdicts_judged`` stamp)."""
    from toolkit.audit.verdict import RULES_VERSION

    marks = verdicts_judged(result)
    current = sum(m == "current rules" for m in marks)
    text = f"{current} of {len(marks)} verdicts were judged under the current rules (those of {RULES_VERSION})."
    stamp = result.verdicts_judged or {}
    if current < len(marks) and stamp.get("rules"):
        text += f" The others: {stamp['rules']}."
        if stamp.get("recomputable") is False:
            text += f" They cannot be re-judged here: {stamp.get('missing') or 'what re-judging needs is not at hand'}."
        checked = stamp.get("checked") or {}
        if checked.get("commit"):
            text += (f" Checked against the rules of {checked.get('rules_version')} at commit {checked['commit']} "
                     f"({checked.get('date')}): {checked.get('rows_recomputed', 0)} of {len(marks)} rows re-judged.")
    return text


def gain_sentences(frontier: pd.DataFrame, plain: str) -> list[str]:
    """The frontier's question per corpus size: of the private (DP) models the verdict finds green, which keeps
    the largest share of ``plain``'s held-out gain over the base (gain retained, with its 95% interval where the
    table has one), and how far is that from plain fine-tuning's 100%? Where no DP model is green, the one whose
    strongest attack separates least, with its verdict; where the gain retained is undefined, the best held-out
    utility."""
    out = []
    for size, g in frontier.groupby("size"):
        private = g[g["dp"].astype(bool)]
        green = private[private["verdict"] == "green"]
        if not len(private):
            out.append(f"{size} individuals: no private (DP) model in the table.")
            continue
        pool = green if len(green) else private
        ranked = pool.assign(_g=pool["heldout_gain_retained"].astype(float).fillna(-float("inf")),
                             _u=pool["heldout_utility"].astype(float).fillna(-float("inf")))
        b = ranked.sort_values(["_g", "_u"], ascending=False, kind="stable").iloc[0]
        gain, lo = _float(b["heldout_gain_retained"]), _float(b.get("heldout_gain_retained_low"))
        hi = _float(b.get("heldout_gain_retained_high"))
        kept = (f"{GAIN_UNDEFINED}; held-out utility {_float(b['heldout_utility']):.3f}" if gain is None else
                pct(gain, 1) + (f" [{100 * lo:.1f}, {100 * hi:.1f}]" if lo is not None and hi is not None else "")
                + f" of {plain}'s gain")
        eps = epsilon_text(b["epsilon"])
        if len(green):
            out.append(f"{size} individuals: {len(green)} of {len(private)} private models are green; the one that "
                       f"keeps the most is {b['strategy']} at ε = {eps}: {kept} (strongest attack AUC "
                       f"{fmt(_float(b['attack_auc']), 3)}).")
        else:
            out.append(f"{size} individuals: none of the {len(private)} private models is green; the one keeping the "
                       f"most is {b['strategy']} at ε = {eps}, verdict {b['verdict']}: {kept}.")
    return out


def frontier_context(directory: str | Path) -> dict[str, Any]:
    """What the report's template shows of one frontier directory."""
    res = load_frontier_result(directory)
    seconds = sum(float(v) for v in res.seconds.values())
    return {"path": str(directory), "figure": figure(frontier_figure(res.table)), "verdicts": verdict_sentences(res),
            "rules": rules_sentence(res),
            "table": table(shown_table(res.table), index=False),
            "best": best_sentences(best_recipes(res.table) if len(res.table) else {}, res.plain),
            "base": base_sentence(res.table, res.plain),
            "summary": f"{len(res.table)} models in {len(res.seconds)} runs ({seconds / 60:.0f} min of run time); "
                       f"utility relative to {res.plain} of the same size, on the held-out (non-member) notes."}


__all__ = ["RETIRED_RULES", "SHOWN", "base_sentence", "best_sentences", "frontier_context", "gain_sentences",
           "is_frontier_dir", "rules_sentence", "shown_table", "verdict_sentences", "verdicts_judged"]
