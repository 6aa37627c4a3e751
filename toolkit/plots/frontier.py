"""The privacy–utility frontier figure (issue 27, :mod:`toolkit.pipelines.frontier`).

Held-out utility relative to plain fine-tuning (``clm`` / ``mlm`` of the same corpus size, methods.md §4) against the
AUC of the strongest membership attack (methods.md §10): a marker per strategy (its colour, :func:`strategy_color`;
the label says ε), a line per corpus size through its models in order of AUC. The shaded region is the goal: AUC at
most 0.55 (a point estimate above it cannot be green: the verdict turns amber when the AUC's 95% interval lies
above 0.55, methods.md §11) and held-out utility at least 0.9× plain fine-tuning's. Where a model lands in it, only
its verdict (the hover text) says whether every attack found it green.

The untouched base model is a point of its own per corpus size (trace ``base model``): its held-out utility relative
to plain fine-tuning's (``base_heldout_utility``), the level from which fine-tuning starts — at 1,000 individuals
already 0.83×. Between it (0% of the gain) and plain fine-tuning (1.0×, 100%) the hover text gives every model's
gain retained (:func:`toolkit.results.frontier.gain_retained`). Its x is the base's own strongest attack AUC where
the table recorded it (``base_attack_auc``); where not, a dotted line at its utility across the figure, labelled so:
its place on the AUC axis is unknown (a base separates members from non-members when the split is confounded).
"""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go

from toolkit.plots.audit import TEMPLATE, strategy_color
from toolkit.results.frontier import epsilon_text

#: the goal region: strongest attack AUC ≤ GREEN_AUC, held-out utility ≥ GREEN_UTILITY × plain
GREEN_AUC = 0.55
GREEN_UTILITY = 0.9
SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "star", "cross", "triangle-down", "pentagon", "hexagon")
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")


def epsilon_label(eps: float) -> str:
    return f"ε={epsilon_text(eps)}"


def _gain_text(gain) -> str:
    return "gain retained n/a" if gain is None or gain != gain else f"gain retained {gain:.0%}"


def _base_levels(table: pd.DataFrame, y_col: str) -> list[dict]:
    """The base model per corpus size (module docstring): its size, held-out utility, that utility relative to plain
    fine-tuning's and its strongest attack AUC (None where the table did not record it). Empty where the table
    records no base utility or, with ``y_col`` other than the held-out ratio, none is defined."""
    if y_col != "heldout_utility_vs_plain" or "base_heldout_utility" not in table:
        return []
    levels = []
    for size, g in table.groupby("size"):
        known = g.dropna(subset=["heldout_utility", "heldout_utility_vs_plain"])
        known = known[known["heldout_utility_vs_plain"] > 0]
        base = g["base_heldout_utility"].dropna()
        if not len(base) or not len(known):
            continue
        u_plain = float(known["heldout_utility"].iloc[0]) / float(known["heldout_utility_vs_plain"].iloc[0])
        auc = g["base_attack_auc"].dropna() if "base_attack_auc" in g else pd.Series(dtype=float)
        levels.append({"size": size, "utility": float(base.iloc[0]), "ratio": float(base.iloc[0]) / u_plain,
                       "auc": float(auc.iloc[0]) if len(auc) else None})
    return levels


def _add_base(fig: go.Figure, levels: list[dict]) -> None:
    """The base model: a point where its attack AUC was recorded; else a dotted line at its utility across the
    figure (its position on the AUC axis is not known: a base can separate members from non-members when the
    split is confounded, methods.md §11), labelled so."""
    points = [lv for lv in levels if lv["auc"] is not None]
    for lv in levels:
        if lv["auc"] is None:
            fig.add_hline(y=lv["ratio"], line=dict(color="black", dash="dot", width=1),
                          annotation_text=f"base model, {lv['size']} individuals: {lv['ratio']:.2f}× plain "
                                          "(gain retained 0%; its attack AUC not recorded)",
                          annotation_position="bottom right")
    if points:
        fig.add_trace(go.Scatter(
            x=[lv["auc"] for lv in points], y=[lv["ratio"] for lv in points], mode="markers+text", name="base model",
            legendgroup="strategy", legendgrouptitle_text="strategy", text=[f"base ({lv['size']})" for lv in points],
            textposition="bottom center", hoverinfo="text",
            hovertext=[f"base model before fine-tuning, {lv['size']} individuals: held-out utility {lv['utility']:.3f}"
                       f" = {lv['ratio']:.2f}× plain (gain retained 0%); strongest attack AUC {lv['auc']:.3f}"
                       for lv in points],
            marker=dict(size=12, color="black", line=dict(width=2, color="black"))))


def frontier_figure(table: pd.DataFrame, *, x_col: str = "attack_auc",
                    y_col: str = "heldout_utility_vs_plain") -> go.Figure:
    """The frontier of :func:`toolkit.pipelines.frontier.frontier_table`'s table (module docstring). Rows without
    an AUC or a utility ratio are left out. With ``y_col="heldout_gain_retained"`` the y axis is the gain retained
    (0: the base model, 1: plain fine-tuning, dotted lines at both) and no goal region is drawn: the question is then
    how much of the gain a green model keeps, not a fixed ratio."""
    rows = table.dropna(subset=[x_col, y_col])
    fig = go.Figure()
    top = max([1.05, *(rows[y_col].tolist())]) * 1.02
    gain = y_col == "heldout_gain_retained"
    if y_col == "heldout_utility_vs_plain":
        fig.add_shape(type="rect", x0=0.5 - 0.05, x1=GREEN_AUC, y0=GREEN_UTILITY, y1=top, line_width=0,
                      fillcolor="rgba(44, 160, 44, 0.15)", layer="below")
        fig.add_annotation(x=0.5 - 0.045, y=top, xanchor="left", yanchor="top", showarrow=False,
                           text=f"goal: AUC ≤ {GREEN_AUC}, ≥ {GREEN_UTILITY}× plain")
    if gain:
        for y, text in ((0.0, "base model (0%)"), (1.0, "plain fine-tuning (100%)")):
            fig.add_hline(y=y, line=dict(color="black", dash="dot", width=1), annotation_text=text,
                          annotation_position="bottom right")
    base_levels = _base_levels(table, y_col)
    sizes = sorted(rows["size"].unique())
    for j, size in enumerate(sizes):
        g = rows[rows["size"] == size].sort_values(x_col)
        fig.add_trace(go.Scatter(x=g[x_col], y=g[y_col], mode="lines", name=f"{size} individuals",
                                 legendgroup="size", legendgrouptitle_text="corpus size",
                                 line=dict(color="grey", dash=DASHES[j % len(DASHES)], width=1)))
    strategies = list(dict.fromkeys(rows["strategy"]))
    for j, name in enumerate(strategies):
        g = rows[rows["strategy"] == name]
        gains = g["heldout_gain_retained"] if "heldout_gain_retained" in g else [math.nan] * len(g)
        hover = [f"{name}, {s} individuals, {epsilon_label(e)}: verdict {v}; {_gain_text(gain)}" for s, e, v, gain in
                 zip(g["size"], g["epsilon"], g["verdict"].fillna("not judged"), gains)]
        fig.add_trace(go.Scatter(x=g[x_col], y=g[y_col], mode="markers+text", name=name, legendgroup="strategy",
                                 legendgrouptitle_text="strategy", text=[epsilon_label(e) for e in g["epsilon"]],
                                 textposition="top center", hovertext=hover, hoverinfo="text",
                                 marker=dict(symbol=SYMBOLS[j % len(SYMBOLS)], size=11, color=strategy_color(name),
                                             line=dict(width=1, color="black"))))
    _add_base(fig, base_levels)
    fig.update_layout(template=TEMPLATE, title="Privacy–utility frontier: " + (
        "gain retained" if gain else "held-out utility") + " vs strongest membership attack",
        xaxis_title="strongest membership attack AUC (0.5: chance)",
        yaxis_title="gain retained: share of plain's held-out gain over the base" if gain
        else "held-out utility relative to plain fine-tuning")
    fig.update_xaxes(range=[0.45, max([1.0, *(rows[x_col].tolist())]) + 0.02])
    return fig


def frontier_rows_at(table: pd.DataFrame, epsilon: float | str = "all") -> pd.DataFrame:
    """The rows :func:`frontier_explorer` draws for ``epsilon``: every row for ``"all"``, else the private rows at
    that ε beside the rows without DP (ε = ∞: plain fine-tuning and the PP* strategies, the reference)."""
    if epsilon == "all":
        return table
    eps = math.inf if epsilon in ("∞", math.inf) else float(epsilon)
    return table[(table["epsilon"] == eps) | ~table["dp"].astype(bool)]


def frontier_explorer(table: pd.DataFrame):
    """An ε dropdown and a y-axis choice (gain retained / ratio to plain) over :func:`frontier_figure`, drawn from
    the table as it is (a shipped or computed frontier: nothing is retrained)."""
    import ipywidgets as widgets

    from toolkit.plots.widgets import interactive_view

    finite = sorted({float(e) for e in table["epsilon"] if not math.isinf(float(e))})
    options = ["all"] + [epsilon_text(e) for e in finite] + ["∞"]

    def show(epsilon: str, y: str) -> None:
        frontier_figure(frontier_rows_at(table, epsilon), y_col=y).show()

    eps_w = widgets.Dropdown(options=options, value="all", description="ε")
    y_w = widgets.ToggleButtons(options=[("gain retained", "heldout_gain_retained"),
                                         ("× plain", "heldout_utility_vs_plain")], description="y")
    return interactive_view(show, epsilon=eps_w, y=y_w)


__all__ = ["GREEN_AUC", "GREEN_UTILITY", "epsilon_label", "frontier_explorer", "frontier_figure", "frontier_rows_at"]
