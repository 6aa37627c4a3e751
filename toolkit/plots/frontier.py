"""The privacy–utility frontier figure (issue 27, :mod:`toolkit.pipelines.frontier`).

Held-out utility relative to plain fine-tuning (``clm`` / ``mlm`` of the same corpus size, methods.md §4) against the
AUC of the strongest membership attack (methods.md §10): a marker per strategy (its colour, :func:`strategy_color`;
the label says ε), a line per corpus size through its models in order of AUC. The shaded region is the goal: AUC at
most 0.55 (a point estimate above it cannot be green: the verdict turns amber when the AUC's 95% interval lies
above 0.55, methods.md §11) and held-out utility at least 0.9× plain fine-tuning's. Where a model lands in it, only
its verdict (the hover text) says whether every attack found it green.
"""

from __future__ import annotations


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


def frontier_figure(table: pd.DataFrame, *, x_col: str = "attack_auc",
                    y_col: str = "heldout_utility_vs_plain") -> go.Figure:
    """The frontier of :func:`toolkit.pipelines.frontier.frontier_table`'s table (module docstring). Rows without
    an AUC or a utility ratio are left out."""
    rows = table.dropna(subset=[x_col, y_col])
    fig = go.Figure()
    top = max([1.05, *(rows[y_col].tolist())]) * 1.02
    fig.add_shape(type="rect", x0=0.5 - 0.05, x1=GREEN_AUC, y0=GREEN_UTILITY, y1=top, line_width=0,
                  fillcolor="rgba(44, 160, 44, 0.15)", layer="below")
    fig.add_annotation(x=0.5 - 0.045, y=top, xanchor="left", yanchor="top", showarrow=False,
                       text=f"goal: AUC ≤ {GREEN_AUC}, ≥ {GREEN_UTILITY}× plain")
    sizes = sorted(rows["size"].unique())
    for j, size in enumerate(sizes):
        g = rows[rows["size"] == size].sort_values(x_col)
        fig.add_trace(go.Scatter(x=g[x_col], y=g[y_col], mode="lines", name=f"{size} individuals",
                                 legendgroup="size", legendgrouptitle_text="corpus size",
                                 line=dict(color="grey", dash=DASHES[j % len(DASHES)], width=1)))
    strategies = list(dict.fromkeys(rows["strategy"]))
    for j, name in enumerate(strategies):
        g = rows[rows["strategy"] == name]
        hover = [f"{name}, {s} individuals, {epsilon_label(e)}: verdict {v}" for s, e, v in
                 zip(g["size"], g["epsilon"], g["verdict"].fillna("not judged"))]
        fig.add_trace(go.Scatter(x=g[x_col], y=g[y_col], mode="markers+text", name=name, legendgroup="strategy",
                                 legendgrouptitle_text="strategy", text=[epsilon_label(e) for e in g["epsilon"]],
                                 textposition="top center", hovertext=hover, hoverinfo="text",
                                 marker=dict(symbol=SYMBOLS[j % len(SYMBOLS)], size=11, color=strategy_color(name),
                                             line=dict(width=1, color="black"))))
    fig.update_layout(template=TEMPLATE, title="Privacy–utility frontier: held-out utility vs strongest membership "
                                                "attack", xaxis_title="strongest membership attack AUC (0.5: chance)",
                      yaxis_title="held-out utility relative to plain fine-tuning")
    fig.update_xaxes(range=[0.45, max([1.0, *(rows[x_col].tolist())]) + 0.02])
    return fig


__all__ = ["GREEN_AUC", "GREEN_UTILITY", "epsilon_label", "frontier_figure"]
