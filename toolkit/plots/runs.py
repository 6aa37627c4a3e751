"""Figures and tables that compare finished runs (the report and notebook 06); inputs are :class:`RunData`.

Metric figures of one run come from ``toolkit.plots``; these add the e-mail extraction curves (methods.md §6, §9:
TER/SER per checkpoint, MaxTER with infeasible stretches left as gaps and the AURC in the legend) and cross-run tables.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from toolkit.plots.audit import TEMPLATE, strategy_color
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from toolkit.results.collect import RunData

GROUP_COLUMNS = ("technique", "strategy", "method")


def group_column(frame: pd.DataFrame) -> str:
    """The column naming the technique of an extraction / MaxTER table, else ``source`` (the folder)."""
    return next((c for c in GROUP_COLUMNS if c in frame.columns), "source")


def extraction_figure(extraction: pd.DataFrame) -> go.Figure:
    """TER (solid) and SER (dotted) per checkpoint, one colour per technique (its colour in every figure,
    :func:`toolkit.plots.audit.strategy_color`; methods.md §6, 002 Fig. 2)."""
    g = group_column(extraction)
    xcol = next((c for c in ("epoch", "checkpoint", "step") if c in extraction.columns), None)
    fig = go.Figure()
    for name, part in extraction.groupby(g, sort=False):
        for metric, dash in (("ter", "solid"), ("ser", "dot")):
            if metric in part.columns and part[metric].notna().any():
                fig.add_trace(go.Scatter(x=part[xcol] if xcol else np.arange(len(part)), y=part[metric],
                                         mode="lines+markers", line=dict(dash=dash, color=strategy_color(str(name))),
                                         name=f"{name} {metric.upper()}", legendgroup=str(name)))
    fig.update_layout(template=TEMPLATE, title="Training-data extraction rate per checkpoint",
                      xaxis_title={"epoch": "epochs of training"}.get(xcol, xcol or "checkpoint"),
                      yaxis_title="% of training addresses (TER) / seen (SER)", legend_title="")
    return fig


def aurc_by_group(aurc_items: list[dict]) -> dict[str, float]:
    """Technique → AURC from ``aurc.json`` contents (``{"aurc": {"rmft": …}}``, ``{"rmft": …}`` or
    ``{"rmft": {"aurc": …}}``)."""
    out: dict[str, float] = {}
    for item in aurc_items:
        data = item["data"] if "data" in item else item
        if isinstance(data.get("aurc"), dict):
            out.update({str(k): float(v) for k, v in data["aurc"].items() if isinstance(v, (int, float))})
            continue
        for k, v in data.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool) and k not in ("tau_max",):
                out[str(k)] = float(v)
            elif isinstance(v, dict) and isinstance(v.get("aurc"), (int, float)):
                out[str(k)] = float(v["aurc"])
    return out


def maxter_figure(maxter: pd.DataFrame, aurc: dict[str, float] | None = None) -> go.Figure | None:
    """MaxTER_t(τ) per technique (methods.md §6, §9): infeasible τ (NaN) are gaps over a shaded band, the AURC is in the
    legend. None when the table has no recognisable τ / MaxTER columns."""
    xcol = next((c for c in ("tau", "threshold", "tau_percent") if c in maxter.columns), None)
    ycol = next((c for c in ("maxter", "max_ter", "maxter_percent") if c in maxter.columns), None)
    if xcol is None or ycol is None:
        return None
    g = group_column(maxter)
    aurc = aurc or {}
    fig = go.Figure()
    for name, part in maxter.groupby(g, sort=False):
        part = part.sort_values(xcol)
        label = str(name) + (f" (AURC {aurc[str(name)]:.1f} %²)" if str(name) in aurc else "")
        fig.add_trace(go.Scatter(x=part[xcol], y=part[ycol], mode="lines", line_shape="hv", name=label,
                                 line_color=strategy_color(str(name)), connectgaps=False))
        bad = part.loc[part[ycol].isna(), xcol]
        if len(bad):
            fig.add_vrect(x0=float(bad.min()), x1=float(bad.max()), fillcolor="lightgray", opacity=0.3,
                          line_width=0, layer="below")
    fig.update_layout(template=TEMPLATE, title="MaxTER: the best TER drop within a perplexity budget τ "
                                               "(grey: infeasible for some technique)",
                      xaxis_title="τ: allowed rise of held-out perplexity (MDP %)", yaxis_title="MaxTER (% TER drop)",
                      legend_title="")
    return fig


def roc_reports(run: RunData, strategies: list[str] | None = None, epoch: int | str = "last", *,
                include_base: bool = True, prefix: str = "") -> dict[str, dict]:
    """``name → roc.json`` of the chosen checkpoints (``"last"``, or an epoch: strategies without it are skipped),
    ready for ``toolkit.plots.roc_curves`` / ``tpr_table``."""
    from toolkit.results.layout import epoch_text

    out = {}
    if include_base and ("base", 0) in run.audits:
        out[f"{prefix}base (epoch 0)"] = run.audits[("base", 0)]["roc"]
    for s in strategies if strategies is not None else run.strategies:
        if epoch == "last":
            last = run.last(s)
            if last is None:
                continue
            e, a = last
        elif (s, int(epoch)) in run.audits:
            e, a = int(epoch), run.audits[(s, int(epoch))]
        else:
            continue
        out[f"{prefix}{s} ({epoch_text(e)})"] = a["roc"]
    return out


def results_frame(runs: list[RunData]) -> pd.DataFrame:
    """Every audited checkpoint of every run: ``run`` column plus ``toolkit.results.tables.results_table``'s."""
    from toolkit.results.tables import results_table

    frames = [results_table(r.audits).assign(run=r.label) for r in runs if r.audits]
    if not frames:
        return pd.DataFrame(columns=["run", "strategy", "epoch"])
    res = pd.concat(frames, ignore_index=True)
    return res[["run", *[c for c in res.columns if c != "run"]]]


def last_checkpoints(runs: list[RunData]) -> pd.DataFrame:
    """One row per run and strategy (and base model) at its last audited checkpoint."""
    res = results_frame(runs)
    if res.empty:
        return res
    last = res.groupby(["run", "strategy"], sort=False)["epoch"].transform("max")
    # runs in the given order, strategies in audit order; an audited model (epochs unknown) is its own last
    return res[(res["epoch"] == last) | last.isna()].reset_index(drop=True)


__all__ = ["aurc_by_group", "extraction_figure", "group_column", "last_checkpoints", "maxter_figure",
           "results_frame", "roc_reports"]
