"""The report's privacy–utility frontier section: a frontier directory (``python -m toolkit frontier``) given to
``python -m toolkit report`` beside (or instead of) run directories.

One figure (held-out utility relative to plain fine-tuning against the strongest membership attack's AUC,
:func:`toolkit.plots.frontier.frontier_figure`), the table of every model with its verdict
(:mod:`toolkit.results.frontier`), and one sentence per corpus size naming the best recipe: the green model with the
highest held-out utility ratio reaching 0.9× plain fine-tuning's, or, where none does, the closest (methods.md §11).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from toolkit.plots.frontier import GREEN_UTILITY, frontier_figure
from toolkit.report.formatting import figure, table
from toolkit.results.frontier import epsilon_text, load_frontier_result

#: the table's columns in the report, with their headings
SHOWN = {"size": "individuals", "strategy": "strategy", "epsilon": "ε (target)", "heldout_utility": "held-out utility",
         "heldout_utility_vs_plain": "× plain", "utility_vs_plain": "training notes × plain",
         "strongest_attack": "strongest attack", "attack_auc": "AUC", "attack_tpr_at_1pct_fpr": "TPR@1% FPR",
         "pii_top1": "PII top-1", "pii_chance": "chance", "canary_max_exposure": "max canary exposure (bits)",
         "empirical_epsilon": "empirical ε (95%)", "accountant_epsilon": "accountant ε", "verdict": "verdict",
         "verdict_rule": "deciding rule"}


def is_frontier_dir(path: str | Path) -> bool:
    return (Path(path) / "frontier.json").is_file()


def best_sentences(best: dict[int, dict[str, Any]], plain: str) -> list[str]:
    """One sentence per corpus size: the best recipe and how far it is from the goal."""
    out = []
    for size, b in sorted(best.items()):
        eps = epsilon_text(b.get("epsilon"))
        eps += " (no DP)" if eps == "∞" else ""
        ratio = b.get("heldout_utility_vs_plain")
        ratio_text = "n/a" if ratio is None else f"{ratio:.2f}×"
        auc = b.get("attack_auc")
        auc_text = "n/a" if auc is None else f"{auc:.3f}"
        if b.get("found"):
            out.append(f"{size} individuals: {b['strategy']} at ε = {eps} is green under every attack with held-out "
                       f"utility {ratio_text} {plain}'s (strongest attack AUC {auc_text}).")
        elif b.get("verdict") == "green":
            out.append(f"{size} individuals: no green model reaches {GREEN_UTILITY:g}× {plain}'s held-out utility; "
                       f"the best green one is {b['strategy']} at ε = {eps} with {ratio_text} (strongest attack AUC "
                       f"{auc_text}).")
        else:
            out.append(f"{size} individuals: no model is green; the one the strongest attack separates least is "
                       f"{b['strategy']} at ε = {eps} (AUC {auc_text}, verdict {b.get('verdict')}, held-out utility "
                       f"{ratio_text} {plain}'s).")
    return out


def shown_table(frontier: pd.DataFrame) -> pd.DataFrame:
    """The frontier table as the report and notebook 07 show it: the :data:`SHOWN` columns under their headings, ε
    as text (∞ for no DP)."""
    shown = frontier[[c for c in SHOWN if c in frontier]].copy()
    shown["epsilon"] = [epsilon_text(e) for e in shown["epsilon"]]
    return shown.rename(columns=SHOWN)


def frontier_context(directory: str | Path) -> dict[str, Any]:
    """What the report's template shows of one frontier directory."""
    res = load_frontier_result(directory)
    seconds = sum(float(v) for v in res.seconds.values())
    return {"path": str(directory), "figure": figure(frontier_figure(res.table)),
            "table": table(shown_table(res.table), index=False), "best": best_sentences(res.best, res.plain),
            "summary": f"{len(res.table)} models in {len(res.seconds)} runs ({seconds / 60:.0f} min of run time); "
                       f"utility relative to {res.plain} of the same size, on the held-out (non-member) notes."}


__all__ = ["SHOWN", "best_sentences", "frontier_context", "is_frontier_dir", "shown_table"]
