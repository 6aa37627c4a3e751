"""plotly figures of the e-mail extraction experiment (methods.md §9; paper 002 Fig. 1–4).

Inputs are the tables of :mod:`toolkit.extraction` (``address_counts``, ``extraction.parquet``,
:func:`~toolkit.metrics.extraction.compare_to_baseline`, :func:`~toolkit.metrics.extraction.maxter_table`);
nothing here computes a metric. Figures never show an address: ranks and counts only.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from toolkit.plots import TEMPLATE, strategy_colors


def rank_frequency(counts: Mapping[str, pd.Series]) -> go.Figure:
    """Address frequency against rank on log-log axes, one line per corpus / split (002 Fig. 1).

    ``counts`` maps a name (``train``, ``test``, ``train after RMFT`` …) to occurrences per address
    (:func:`~toolkit.identifiers.addresses.address_counts`); ranks start at 1 for the most frequent address.
    """
    fig = go.Figure()
    for name, c in counts.items():
        f = np.sort(np.asarray(c, dtype=float))[::-1]
        f = f[f > 0]
        fig.add_trace(go.Scatter(x=np.arange(1, len(f) + 1), y=f, mode="lines+markers", marker_size=4,
                                 name=f"{name} (top {int(f[0]) if len(f) else 0}, {len(f)} addresses)",
                                 hovertemplate="rank %{x}<br>%{y} occurrences<extra></extra>"))
    fig.update_xaxes(type="log")
    fig.update_yaxes(type="log")
    fig.update_layout(template=TEMPLATE, title="E-mail address frequency by rank (log-log)",
                      xaxis_title="rank of the address (log)", yaxis_title="occurrences (log)", legend_title="")
    return fig


def extraction_rates(tables: Mapping[str, pd.DataFrame]) -> go.Figure:
    """TER and SER per checkpoint, side by side, one line per technique (002 Fig. 2 / methods.md §9).

    ``tables`` maps a technique to its ``extraction.parquet`` table (``epoch``, ``ter``, ``ser``); x = training
    progress in epochs (checkpoint 0, the base model, at 0).
    """
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2, subplot_titles=["Total Extraction Rate (TER)", "Seen Extraction Rate (SER)"],
                        horizontal_spacing=0.08)
    colors = strategy_colors(list(tables))
    for j, col in enumerate(("ter", "ser"), start=1):
        for name, t in tables.items():
            t = t.sort_values("epoch")
            fig.add_trace(go.Scatter(x=t["epoch"], y=t[col], mode="lines+markers", name=name, legendgroup=name,
                                     showlegend=j == 1, line_color=colors[name],
                                     hovertemplate=f"{name}<br>epoch %{{x:.2f}}<br>{col.upper()} %{{y:.2f}}%"
                                                   "<extra></extra>"), row=1, col=j)
        fig.update_xaxes(title_text="training progress (epochs)", row=1, col=j)
        fig.update_yaxes(title_text=f"{col.upper()} (%)", rangemode="tozero", row=1, col=j)
    fig.update_layout(template=TEMPLATE, title="Extraction rates per checkpoint (lower is better)",
                      legend_title="technique")
    return fig


def perplexity_per_checkpoint(tables: Mapping[str, pd.DataFrame], comparison: pd.DataFrame | None = None
                              ) -> go.Figure:
    """Held-out perplexity per checkpoint (002 Fig. 3b) and, with a
    :func:`~toolkit.metrics.extraction.compare_to_baseline` table, MDP% per checkpoint (Fig. 3a) beside it."""
    from plotly.subplots import make_subplots

    two = comparison is not None and len(comparison)
    fig = make_subplots(rows=1, cols=2 if two else 1, horizontal_spacing=0.08,
                        subplot_titles=["Held-out perplexity"] + (["MDP% against the baseline"] if two else []))
    colors = strategy_colors(list(tables))
    for name, t in tables.items():
        t = t.sort_values("epoch")
        fig.add_trace(go.Scatter(x=t["epoch"], y=t["perplexity"], mode="lines+markers", name=name,
                                 legendgroup=name, line_color=colors[name],
                                 hovertemplate=f"{name}<br>epoch %{{x:.2f}}<br>PPL %{{y:.3f}}<extra></extra>"),
                      row=1, col=1)
    if two:
        for name, g in comparison.groupby("technique", sort=False):
            g = g.sort_values("epoch")
            fig.add_trace(go.Scatter(x=g["epoch"], y=g["mdp_percent"], mode="lines+markers", name=name,
                                     legendgroup=name, showlegend=name not in tables,
                                     line_color=colors.get(name, "gray"),
                                     customdata=g[["mean_delta_perplexity"]].to_numpy(),
                                     hovertemplate=f"{name}<br>epoch %{{x:.2f}}<br>MDP %{{y:.2f}}%<br>mean ΔPP "
                                                   "%{customdata[0]:.3f}<extra></extra>"), row=1, col=2)
        fig.add_hline(y=0, line_dash="dot", line_color="gray", row=1, col=2)
        fig.update_yaxes(title_text="MDP (%)", row=1, col=2)
        fig.update_xaxes(title_text="training progress (epochs)", row=1, col=2)
    fig.update_xaxes(title_text="training progress (epochs)", row=1, col=1)
    fig.update_yaxes(title_text="perplexity", row=1, col=1)
    fig.update_layout(template=TEMPLATE, title="Utility: held-out perplexity per checkpoint (lower is better)",
                      legend_title="technique")
    return fig


def maxter_curves(curves: pd.DataFrame, report: dict) -> go.Figure:
    """MaxTER curves with AURC in the legend and each technique's infeasible region shaded (002 Fig. 4).

    ``curves``: :func:`~toolkit.metrics.extraction.maxter_table`; ``report``:
    :func:`~toolkit.metrics.extraction.aurc_report` (``aurc``, ``infeasible_below``, ``tau_max``). The shaded band
    ``[0, τ₀)`` of a technique is where no checkpoint keeps MDP% ≤ τ (MaxTER undefined); a technique that is never
    feasible is shaded over the whole axis.
    """
    fig = go.Figure()
    techniques = list(pd.unique(curves["technique"]))
    colors = strategy_colors(techniques)
    tau_max = float(report["tau_max"])
    for name in techniques:
        g = curves[curves["technique"] == name].sort_values("tau")
        a = report["aurc"].get(name, float("nan"))
        fig.add_trace(go.Scatter(x=g["tau"], y=g["maxter"], mode="lines", name=f"{name} (AURC {a:,.1f} %²)",
                                 line_color=colors[name], connectgaps=False,
                                 hovertemplate=f"{name}<br>τ %{{x:.2f}}%<br>MaxTER %{{y:.1f}}%<extra></extra>"))
        t0 = report["infeasible_below"].get(name)
        right = tau_max if t0 is None else min(float(t0), tau_max)
        if right > 0:
            fig.add_vrect(x0=0, x1=right, fillcolor=colors[name], opacity=0.12, line_width=0,
                          annotation_text=f"{name} infeasible", annotation_position="top left")
    fig.add_hline(y=0, line_dash="dot", line_color="gray")
    fig.update_xaxes(range=[0, tau_max])
    fig.update_layout(template=TEMPLATE, title="MaxTER: best TER drop with perplexity increase ≤ τ",
                      xaxis_title="τ: allowed increase of held-out perplexity, MDP (%)",
                      yaxis_title="MaxTER: TER drop against the baseline (%)", legend_title="technique")
    return fig


def maxter_explorer(comparison: pd.DataFrame, report: dict, *, tau: float = 10.0):
    """A τ slider over the MaxTER figure: it redraws :func:`maxter_curves` with a line at τ and the checkpoint each
    technique would pick there (:func:`~toolkit.metrics.extraction.optimal_checkpoints`, with why a technique has
    none). ``comparison``: :func:`~toolkit.metrics.extraction.compare_to_baseline`; ``report``:
    :func:`~toolkit.metrics.extraction.aurc_report`. Nothing is retrained: the curves are the computed ones."""
    import ipywidgets as widgets
    from IPython.display import display

    from toolkit.metrics.extraction import maxter_table, optimal_checkpoints
    from toolkit.plots.widgets import interactive_view

    tau_max = float(report["tau_max"])
    curves = maxter_table(comparison, tau_max)

    def show(tau: float) -> None:
        fig = maxter_curves(curves, report)
        fig.add_vline(x=tau, line_dash="dash", line_color="black", annotation_text=f"τ = {tau:g}%")
        fig.show()
        display(optimal_checkpoints(comparison, tau))

    slider = widgets.FloatSlider(value=min(float(tau), tau_max), min=0.0, max=tau_max, step=max(tau_max / 200, 0.01),
                                 description="τ (MDP %)", continuous_update=False, readout_format=".1f")
    return interactive_view(show, tau=slider)


__all__ = ["extraction_rates", "maxter_curves", "maxter_explorer", "perplexity_per_checkpoint", "rank_frequency"]
