"""The privacy–utility frontier figure (issue 27, :mod:`toolkit.pipelines.frontier`).

The **gain retained** (:func:`toolkit.results.frontier.gain_retained`: (U − U_base) / (U_plain − U_base) on held-out
notes, 0 = the untouched base model, 1 = plain fine-tuning ``clm`` / ``mlm`` of the same corpus size, methods.md §4)
against the AUC of the strongest membership attack (methods.md §10): a marker per strategy (its colour,
:func:`strategy_color`; the label says ε), a line per corpus size through its models in order of AUC, the hover text
giving each model's held-out and training-note utility (the latter labelled: it also rewards memorising). The shaded
region is the goal: AUC at most 0.55 (a point estimate above it cannot be green: the verdict turns amber when the
AUC's 95% interval lies above 0.55, methods.md §11) and gain retained at least
:data:`~toolkit.results.frontier.GAIN_GOAL` (50%). Where a model lands in it, only its verdict (the hover text) says
whether every attack found it green. A corpus size whose gain retained is undefined (plain fine-tuning's held-out
utility not above the base's) has no marker on this view, and the figure says so in words.

``y_col="heldout_utility"`` draws held-out utility itself, ``"heldout_utility_vs_plain"`` its ratio to plain (no goal
region on either: the goal is a share of the gain). The untouched base model is a point of its own per corpus size
(trace ``base model``: gain retained 0, or its held-out utility, or its ratio to plain's — at 1,000 individuals
already 0.83×). Its x is the base's own strongest attack AUC where the table recorded it (``base_attack_auc``);
where not, a dotted line at its level across the figure, labelled so: its place on the AUC axis is unknown (a base
separates members from non-members when the split is confounded).
"""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go

from toolkit.plots.audit import TEMPLATE, strategy_color
from toolkit.results.frontier import GAIN_GOAL, epsilon_text

#: the goal region: strongest attack AUC ≤ GREEN_AUC, gain retained ≥ GAIN_GOAL (toolkit.results.frontier)
GREEN_AUC = 0.55
#: the y columns the figure draws, with their axis titles
Y_AXES = {"heldout_gain_retained": "gain retained: share of plain's held-out gain over the base (0: base, 1: plain)",
          "heldout_utility": "held-out utility (notes the model never saw)",
          "heldout_utility_vs_plain": "held-out utility relative to plain fine-tuning"}
SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "star", "cross", "triangle-down", "pentagon", "hexagon")
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")


def epsilon_label(eps: float) -> str:
    return f"ε={epsilon_text(eps)}"


def _fmt(v, spec: str) -> str:
    return "n/a" if v is None or v != v else format(v, spec)


def _base_levels(table: pd.DataFrame, y_col: str) -> list[dict]:
    """The base model per corpus size (module docstring): its size, held-out utility, its level on ``y_col`` (gain
    retained 0; its utility; its utility over plain's) and its strongest attack AUC (None where the table did not
    record it). A size without a recorded base utility, or (gain retained) one where the gain is undefined, has none."""
    if "base_heldout_utility" not in table:
        return []
    levels = []
    for size, g in table.groupby("size"):
        base = g["base_heldout_utility"].dropna()
        if not len(base):
            continue
        u_base = float(base.iloc[0])
        if y_col == "heldout_gain_retained":
            if "heldout_gain_retained" not in g or g["heldout_gain_retained"].isna().all():
                continue
            level = 0.0
        elif y_col == "heldout_utility":
            level = u_base
        else:
            known = g.dropna(subset=["heldout_utility", "heldout_utility_vs_plain"])
            known = known[known["heldout_utility_vs_plain"] > 0]
            if not len(known):
                continue
            level = u_base / (float(known["heldout_utility"].iloc[0]) / float(known["heldout_utility_vs_plain"].iloc[0]))
        auc = g["base_attack_auc"].dropna() if "base_attack_auc" in g else pd.Series(dtype=float)
        levels.append({"size": size, "utility": u_base, "level": level,
                       "auc": float(auc.iloc[0]) if len(auc) else None})
    return levels


def _level_text(lv: dict, y_col: str) -> str:
    if y_col == "heldout_utility_vs_plain":
        return f"held-out utility {lv['utility']:.3f} = {lv['level']:.2f}× plain (gain retained 0%)"
    return f"held-out utility {lv['utility']:.3f} (gain retained 0%)"


def _add_base(fig: go.Figure, levels: list[dict], y_col: str) -> None:
    """The base model: a point where its attack AUC was recorded; else a dotted line at its level across the
    figure (its position on the AUC axis is not known: a base can separate members from non-members when the
    split is confounded, methods.md §11), labelled so."""
    points = [lv for lv in levels if lv["auc"] is not None]
    for lv in levels:
        if lv["auc"] is None:
            fig.add_hline(y=lv["level"], line=dict(color="black", dash="dot", width=1),
                          annotation_text=f"base model, {lv['size']} individuals: {_level_text(lv, y_col)}; "
                                          "its attack AUC not recorded", annotation_position="bottom right")
    if points:
        fig.add_trace(go.Scatter(
            x=[lv["auc"] for lv in points], y=[lv["level"] for lv in points], mode="markers+text", name="base model",
            legendgroup="strategy", legendgrouptitle_text="strategy", text=[f"base ({lv['size']})" for lv in points],
            textposition="bottom center", hoverinfo="text",
            hovertext=[f"base model before fine-tuning, {lv['size']} individuals: {_level_text(lv, y_col)}; "
                       f"strongest attack AUC {lv['auc']:.3f}" for lv in points],
            marker=dict(size=12, color="black", line=dict(width=2, color="black"))))


def _hover(name: str, r) -> str:
    """A model's hover text: verdict, gain retained, held-out and training-note utility (labelled), attack AUC."""
    gain = getattr(r, "heldout_gain_retained", math.nan)
    return (f"{name}, {r.size} individuals, {epsilon_label(r.epsilon)}: verdict "
            f"{r.verdict if isinstance(r.verdict, str) else 'not judged'}; gain retained "
            f"{'undefined' if gain is None or gain != gain else format(gain, '.0%')}; held-out utility "
            f"{_fmt(getattr(r, 'heldout_utility', None), '.3f')} (training notes, the papers' metric: "
            f"{_fmt(getattr(r, 'utility', None), '.3f')}); strongest attack AUC {_fmt(r.attack_auc, '.3f')}")


def frontier_figure(table: pd.DataFrame, *, x_col: str = "attack_auc",
                    y_col: str = "heldout_gain_retained") -> go.Figure:
    """The frontier of :func:`toolkit.pipelines.frontier.frontier_table`'s table (module docstring): by default the
    gain retained (dotted lines at 0, the base, and 1, plain fine-tuning; the goal region shaded); ``y_col`` any of
    :data:`Y_AXES`. Rows without an AUC or a y value are left out; a size left out entirely because its gain
    retained is undefined is named in an annotation."""
    if y_col not in Y_AXES:
        raise ValueError(f"y_col {y_col!r}: one of {', '.join(Y_AXES)}")
    rows = table.dropna(subset=[x_col, y_col])
    fig = go.Figure()
    gain = y_col == "heldout_gain_retained"
    top = max([1.05 if y_col != "heldout_utility" else 0.0, *(rows[y_col].tolist())]) * 1.02
    if gain:
        fig.add_shape(type="rect", x0=0.5 - 0.05, x1=GREEN_AUC, y0=GAIN_GOAL, y1=top, line_width=0,
                      fillcolor="rgba(44, 160, 44, 0.15)", layer="below")
        fig.add_annotation(x=0.5 - 0.045, y=top, xanchor="left", yanchor="top", showarrow=False,
                           text=f"goal: green, AUC ≤ {GREEN_AUC}, gain retained ≥ {GAIN_GOAL:.0%}")
        for y, text in ((0.0, "base model (0%)"), (1.0, "plain fine-tuning (100%)")):
            fig.add_hline(y=y, line=dict(color="black", dash="dot", width=1), annotation_text=text,
                          annotation_position="bottom right")
        undefined = sorted(set(table["size"]) - set(rows["size"])) if y_col in table else []
        if undefined:
            fig.add_annotation(x=1.0, y=-0.12, xref="paper", yref="paper", xanchor="right", showarrow=False,
                               text="not drawn: " + ", ".join(f"{s} individuals" for s in undefined)
                                    + " (gain retained undefined: plain fine-tuning's held-out utility is not "
                                      "(significantly) above the base model's; see the held-out utility view)")
    sizes = sorted(rows["size"].unique())
    for j, size in enumerate(sizes):
        g = rows[rows["size"] == size].sort_values(x_col)
        fig.add_trace(go.Scatter(x=g[x_col], y=g[y_col], mode="lines", name=f"{size} individuals",
                                 legendgroup="size", legendgrouptitle_text="corpus size",
                                 line=dict(color="grey", dash=DASHES[j % len(DASHES)], width=1)))
    strategies = list(dict.fromkeys(rows["strategy"]))
    for j, name in enumerate(strategies):
        g = rows[rows["strategy"] == name]
        fig.add_trace(go.Scatter(x=g[x_col], y=g[y_col], mode="markers+text", name=name, legendgroup="strategy",
                                 legendgrouptitle_text="strategy", text=[epsilon_label(e) for e in g["epsilon"]],
                                 textposition="top center", hoverinfo="text",
                                 hovertext=[_hover(name, r) for r in g.itertuples(index=False)],
                                 marker=dict(symbol=SYMBOLS[j % len(SYMBOLS)], size=11, color=strategy_color(name),
                                             line=dict(width=1, color="black"))))
    _add_base(fig, _base_levels(table, y_col), y_col)
    fig.update_layout(template=TEMPLATE, title="Privacy–utility frontier: " + (
        "gain retained" if gain else "held-out utility") + " vs strongest membership attack",
        xaxis_title="strongest membership attack AUC (0.5: chance)", yaxis_title=Y_AXES[y_col])
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
    """An ε dropdown and a y-axis choice (gain retained / held-out utility / ratio to plain) over
    :func:`frontier_figure`, drawn from
    the table as it is (a shipped or computed frontier: nothing is retrained)."""
    import ipywidgets as widgets

    from toolkit.plots.widgets import interactive_view

    finite = sorted({float(e) for e in table["epsilon"] if not math.isinf(float(e))})
    options = ["all"] + [epsilon_text(e) for e in finite] + ["∞"]

    def show(epsilon: str, y: str) -> None:
        frontier_figure(frontier_rows_at(table, epsilon), y_col=y).show()

    eps_w = widgets.Dropdown(options=options, value="all", description="ε")
    y_w = widgets.ToggleButtons(options=[("gain retained", "heldout_gain_retained"),
                                         ("held-out utility", "heldout_utility"),
                                         ("× plain", "heldout_utility_vs_plain")], description="y")
    return interactive_view(show, epsilon=eps_w, y=y_w)


__all__ = ["GAIN_GOAL", "GREEN_AUC", "Y_AXES", "epsilon_label", "frontier_explorer", "frontier_figure", "frontier_rows_at"]
