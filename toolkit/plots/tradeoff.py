"""The privacy–utility figures of a run (methods.md §4, §9; 000 Fig. 4 and 7, 001 Fig. 12–13): privacy against
held-out utility, with the papers' training-note utility beside it, and the base model's point drawn.

Why held-out utility first: utility on the training notes (the papers' metric) also rewards memorising them, so a
model that learnt its notes by heart looks best on it; held-out utility is the same accuracy on notes of people who
were not in training, what fine-tuning taught about notes in general. The base model's point shows where fine-tuning
started: a checkpoint left of it on the held-out panel is worse on unseen notes than no fine-tuning at all.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd
import plotly.graph_objects as go

from toolkit.plots.audit import TEMPLATE, run_dashes, strategy_color, strategy_colors

#: the axis titles of the two utilities
HELDOUT_TITLE = "held-out utility (accuracy on non-protected words of unseen people's notes)"
TRAINING_TITLE = "utility on the training notes (the papers' metric; rewards memorisation)"


def _checkpoint_traces(points: pd.DataFrame, x_col: str, y_col: str, colors: dict, *,
                       showlegend: bool = True, names: Mapping[str, str] | None = None) -> list[go.Scatter]:
    """One line per ``strategy``, a point per checkpoint labelled with its ``epoch`` (sorted by epoch); ``names``:
    the legend text of a strategy (default: its name)."""
    traces = []
    dashes = run_dashes(pd.unique(points["strategy"]))
    names = names or {}
    for strategy, g in points.groupby("strategy", sort=False):
        g = g.sort_values("epoch") if "epoch" in g else g
        labels = g["epoch"].map(lambda e: "unknown" if pd.isna(e) else str(int(e))) if "epoch" in g else None
        traces.append(go.Scatter(
            x=g[x_col], y=g[y_col], mode="lines+markers" + ("+text" if labels is not None else ""),
            text=labels, textposition="top center", name=names.get(strategy, str(strategy)),
            legendgroup=str(strategy), showlegend=showlegend,
            line=dict(color=colors.get(strategy) or strategy_color(strategy), dash=dashes[strategy]),
            hovertemplate=f"{strategy}<br>epoch %{{text}}<br>{x_col} %{{x:.4f}}<br>{y_col} %{{y:.4f}}<extra></extra>"))
    return traces


def _has(points: pd.DataFrame, col: str) -> bool:
    return col in points and points[col].notna().any()


def _base_trace(base: pd.Series, x_col: str, y_col: str, *, showlegend: bool) -> go.Scatter:
    return go.Scatter(x=[base[x_col]], y=[base[y_col]], mode="markers+text", text=["base"],
                      textposition="bottom center", name="base model (before fine-tuning)", legendgroup="base",
                      showlegend=showlegend, marker=dict(symbol="star", size=15, color=strategy_color("base")),
                      hovertemplate=f"base model<br>{x_col} %{{x:.4f}}<br>{y_col} %{{y:.4f}}<extra></extra>")


def split_base(points: pd.DataFrame) -> tuple[pd.DataFrame, pd.Series | None]:
    """``(checkpoints, base row)``: the rows of the fine-tuned strategies and the base model's row (None without)."""
    is_base = points["strategy"] == "base"
    return points[~is_base], (points[is_base].iloc[0] if is_base.any() else None)


def privacy_utility(points: pd.DataFrame, *, privacy_col: str = "privacy", utility_col: str = "utility",
                    gains: Mapping[str, str] | None = None) -> go.Figure:
    """Privacy–utility trade-off: a line per strategy, a point per checkpoint labelled by epoch (methods.md §9; 000
    Fig. 4), the base model a star.

    ``points``: rows of :func:`toolkit.results.results_table` (``strategy``, ``epoch``, ``privacy``, ``utility``,
    ``heldout_utility``); a row of strategy ``base`` is drawn as the base model's point, not as a line. With held-out
    utility two panels share the privacy axis: x = held-out utility (left) and x = ``utility_col``, the training-note
    utility of the papers (right); without it (runs audited before held-out utility existed) one panel, x =
    ``utility_col``. ``gains``: strategy → the text added to its legend entry (e.g. ``"gain retained 3% [−9%, 14%]"``,
    :func:`toolkit.results.evidence.evidence_table`).
    """
    from plotly.subplots import make_subplots

    tuned, base = split_base(points)
    colors = strategy_colors(pd.unique(tuned["strategy"]))
    names = {s: f"{s} ({g})" for s, g in (gains or {}).items() if g}
    y_title = f"{privacy_col} (1 − share of identifiers predicted)"
    if not _has(tuned, "heldout_utility"):
        fig = go.Figure(_checkpoint_traces(tuned, utility_col, privacy_col, colors, names=names))
        if base is not None:
            fig.add_trace(_base_trace(base, utility_col, privacy_col, showlegend=True))
        fig.update_layout(template=TEMPLATE, title="Privacy–utility trade-off (labels: epochs; held-out utility not "
                                                   "measured in this run)",
                          xaxis_title=f"{utility_col} (accuracy on non-protected words)", yaxis_title=y_title,
                          legend_title="strategy")
        return fig
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.06,
                        subplot_titles=["privacy against held-out utility",
                                        "privacy against training-note utility (the papers' metric)"])
    for j, x_col in enumerate(("heldout_utility", utility_col), start=1):
        for tr in _checkpoint_traces(tuned, x_col, privacy_col, colors, showlegend=j == 1, names=names):
            fig.add_trace(tr, row=1, col=j)
        if base is not None and pd.notna(base.get(x_col)):
            fig.add_trace(_base_trace(base, x_col, privacy_col, showlegend=j == 1), row=1, col=j)
            fig.add_vline(x=float(base[x_col]), line=dict(color="#999999", dash="dot", width=1), row=1, col=j)
    fig.update_xaxes(title_text=HELDOUT_TITLE, row=1, col=1)
    fig.update_xaxes(title_text=TRAINING_TITLE, row=1, col=2)
    fig.update_yaxes(title_text=y_title, row=1, col=1)
    fig.update_layout(template=TEMPLATE, legend_title="strategy",
                      title="Privacy–utility trade-off (labels: epochs; dotted: the base model's utility)")
    return fig


def privacy_variants(points: pd.DataFrame) -> go.Figure:
    """Privacy, direct privacy and indirect privacy against utility, side by side (000 Fig. 7, 001 Fig. 12–13).

    Same input as :func:`privacy_utility` (columns ``privacy``, ``direct_privacy``, ``indirect_privacy``,
    ``utility``, ``heldout_utility``): x is held-out utility where the run measured it (the training-note utility of
    the papers in the hover), else training-note utility; a ``base`` row is drawn as a star in each panel. One trace
    per strategy in each of the three subplots (legend shared: click toggles all three).
    """
    from plotly.subplots import make_subplots

    tuned, base = split_base(points)
    x_col = "heldout_utility" if _has(tuned, "heldout_utility") else "utility"
    cols = (("privacy", "privacy (all identifiers)"), ("direct_privacy", "direct privacy"),
            ("indirect_privacy", "indirect privacy"))
    fig = make_subplots(rows=1, cols=3, subplot_titles=[t for _, t in cols], horizontal_spacing=0.05,
                        shared_yaxes=True)
    colors = strategy_colors(pd.unique(tuned["strategy"]))
    for j, (col, _) in enumerate(cols, start=1):
        for tr in _checkpoint_traces(tuned, x_col, col, colors, showlegend=j == 1):
            if x_col == "heldout_utility" and "utility" in tuned:
                g = tuned[tuned["strategy"] == tr.legendgroup].sort_values("epoch")
                tr.update(customdata=g["utility"].to_numpy(),
                          hovertemplate=f"{tr.legendgroup}<br>epoch %{{text}}<br>held-out utility %{{x:.4f}}<br>"
                                        f"training-note utility %{{customdata:.4f}}<br>{col} %{{y:.4f}}<extra></extra>")
            fig.add_trace(tr, row=1, col=j)
        if base is not None and pd.notna(base.get(x_col)) and pd.notna(base.get(col)):
            fig.add_trace(_base_trace(base, x_col, col, showlegend=j == 1), row=1, col=j)
        fig.update_xaxes(title_text="held-out utility" if x_col == "heldout_utility" else "utility", row=1, col=j)
    values = pd.concat([points[c] for c, _ in cols if c in points]).astype(float).dropna()
    if len(values):  # one y range for the three panels: the variants compare at a glance
        pad = max(0.005, 0.05 * float(values.max() - values.min()))
        fig.update_yaxes(range=[float(values.min()) - pad, float(values.max()) + pad])
    fig.update_yaxes(title_text="privacy", row=1, col=1)
    fig.update_layout(template=TEMPLATE, legend_title="strategy",
                      title="Privacy variants against " + ("held-out utility" if x_col == "heldout_utility"
                                                           else "utility") + " (labels: epochs)")
    return fig


__all__ = ["HELDOUT_TITLE", "TRAINING_TITLE", "privacy_utility", "privacy_variants", "split_base"]
