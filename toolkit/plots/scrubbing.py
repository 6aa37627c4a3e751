"""plotly figures of the vocabulary-scrubbing notebook (methods.md §7, §9); tables in, figures out, no metric
computed."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from toolkit.plots import TEMPLATE


def name_ranks(predictions: dict[str, pd.DataFrame], *, top_k: int = 20) -> go.Figure:
    """Name-like predictions per rank (1 = the model's first choice), one bar group per model (``before`` /
    ``after`` scrubbing), from the anonymity test's prediction tables (methods.md §7.6)."""
    fig = go.Figure()
    for label, p in predictions.items():
        counts = p.loc[p["name_like"], "rank"].value_counts().reindex(range(1, top_k + 1), fill_value=0)
        fig.add_trace(go.Bar(x=counts.index, y=counts.to_numpy(), name=label))
    fig.update_layout(template=TEMPLATE, barmode="group", title="Name-like predictions by rank",
                      xaxis_title="rank of the prediction (1 = most probable)",
                      yaxis_title="name-like predictions", legend_title="model")
    return fig


def candidate_scores(candidates: pd.DataFrame, is_name: pd.Series) -> go.Figure:
    """Name-likeness scores of the review candidates, names and other tokens apart: how much the automatic score
    (methods.md §7.4) separates them before anyone looks."""
    fig = go.Figure()
    for flag, label in ((True, "names"), (False, "other tokens")):
        fig.add_trace(go.Histogram(x=candidates.loc[is_name.to_numpy() == flag, "score"], name=label, opacity=0.7,
                                   xbins={"start": 0, "end": 1.0001, "size": 0.05}))
    fig.update_layout(template=TEMPLATE, barmode="overlay", title="Review candidates by name-likeness score",
                      xaxis_title="name-likeness score", yaxis_title="candidates", legend_title="")
    return fig


__all__ = ["candidate_scores", "name_ranks"]
