"""plotly figures, one function per figure kind (SPEC.md §9).

Every function takes the toolkit's tables (pandas DataFrames) and returns a ``plotly.graph_objects.Figure``; nothing
here computes a metric. Distribution plots use the exact empirical CDF evaluated at the distinct values (a step
function), so a million-row term table is drawn with a few hundred points.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

TEMPLATE = "plotly_white"


def ecdf_points(values, weights=None) -> tuple[np.ndarray, np.ndarray]:
    """Distinct sorted values ``x`` and ``F(x) = P(X ≤ x)`` (weighted by ``weights`` when given)."""
    v = np.asarray(values, dtype=float)
    w = np.ones_like(v) if weights is None else np.asarray(weights, dtype=float)
    if v.size == 0:
        return np.array([]), np.array([])
    s = pd.Series(w).groupby(v).sum().sort_index()
    return s.index.to_numpy(), (s.cumsum() / s.sum()).to_numpy()


def _ecdf_trace(values, name: str, weights=None, **kw) -> go.Scatter:
    x, y = ecdf_points(values, weights)
    return go.Scatter(x=x, y=y, mode="lines", line_shape="hv", name=name, **kw)


def identifier_cdfs(individuals: pd.DataFrame, *, log_x: bool = True) -> go.Figure:
    """Per-individual CDFs of words, distinct direct- and indirect-identifier types (000 Fig. 2, 001 Fig. 5)."""
    fig = go.Figure()
    for col, name in (("n_words", "words"), ("n_direct", "direct identifiers"),
                      ("n_indirect", "indirect identifiers")):
        # +1 so that individuals with 0 stay visible on a log axis
        fig.add_trace(_ecdf_trace(individuals[col] + (1 if log_x else 0), name))
    fig.update_layout(template=TEMPLATE, title="Per individual: words and identifiers",
                      xaxis_title="count per individual" + (" + 1 (log)" if log_x else ""),
                      yaxis_title="share of individuals (CDF)", legend_title="")
    if log_x:
        fig.update_xaxes(type="log")
    return fig


def term_sharing_cdf(terms: pd.DataFrame, *, n: int = 1, k: int | None = None) -> go.Figure:
    """CDF of the number of individuals sharing each term, over distinct terms and over occurrences (000 Fig. 3)."""
    t = terms[terms["n"] == n]
    fig = go.Figure([
        _ecdf_trace(t["n_individuals"], "distinct terms"),
        _ecdf_trace(t["n_individuals"], "term occurrences", weights=t["n_occurrences"]),
    ])
    if k is not None:
        fig.add_vline(x=k - 0.5, line_dash="dot", annotation_text=f"k = {k}", annotation_position="top")
    fig.update_xaxes(type="log")
    fig.update_layout(template=TEMPLATE, title="How many individuals share a term",
                      xaxis_title="number of individuals using the term (log)", yaxis_title="CDF", legend_title="")
    return fig


def indirect_by_parameter(counts: pd.DataFrame, parameter: str) -> go.Figure:
    """Per-individual CDF of indirect-identifier counts, one line per value of ``k`` or ``n`` (000 Fig. 8, 10)."""
    if parameter not in ("k", "n"):
        raise ValueError("parameter must be 'k' or 'n'")
    fixed = "n" if parameter == "k" else "k"
    fig = go.Figure()
    for value, g in counts.groupby(parameter):
        fig.add_trace(_ecdf_trace(g["n_indirect"] + 1, f"{parameter} = {value}"))
    fixed_vals = sorted(counts[fixed].unique())
    fig.update_xaxes(type="log")
    fig.update_layout(template=TEMPLATE,
                      title=f"Indirect identifiers per individual as {parameter} varies ({fixed} = "
                            f"{', '.join(map(str, fixed_vals))})",
                      xaxis_title="indirect identifiers per individual + 1 (log)", yaxis_title="CDF",
                      legend_title="")
    return fig


def detector_recall(scores: dict[str, pd.DataFrame]) -> go.Figure:
    """Grouped bars: recall per gold PII category for each detector (``scores``: name → detector_scores frame)."""
    fig = go.Figure()
    for name, s in scores.items():
        fig.add_trace(go.Bar(x=s["category"], y=s["recall"], name=name,
                             customdata=np.stack([s["support"]], axis=-1),
                             hovertemplate="%{x}: recall %{y:.2f} (%{customdata[0]} gold words)"))
    fig.update_layout(template=TEMPLATE, barmode="group", title="Detector recall against gold spans (word level)",
                      yaxis_title="recall", yaxis_range=[0, 1.05], legend_title="detector")
    return fig


def highlight_html(text: str, spans: Sequence[tuple[int, int, str]], *,
                   colors: dict[str, str] | None = None) -> str:
    """HTML of ``text`` with ``(start, end, kind)`` spans highlighted (kind → colour), for notebooks."""
    import html

    colors = colors or {"direct": "#f4a6a6", "indirect": "#a6c8f4", "both": "#c9a6f4"}
    out, pos = [], 0
    for start, end, kind in sorted(spans):
        if start < pos:
            continue
        out.append(html.escape(text[pos:start]))
        out.append(f'<mark style="background:{colors.get(kind, "#ddd")}" title="{html.escape(kind)}">'
                   f"{html.escape(text[start:end])}</mark>")
        pos = end
    out.append(html.escape(text[pos:]))
    legend = " ".join(f'<mark style="background:{c}">{k}</mark>' for k, c in colors.items())
    return f'<div style="white-space:pre-wrap;font-family:monospace;font-size:90%">{"".join(out)}</div>' \
           f'<div style="font-size:80%">{legend}</div>'


def setup_notebook(renderer: str = "plotly_mimetype+notebook") -> None:
    """Render figures both for JupyterLab (mimetype) and as self-contained HTML (plotly.js embedded once), so an
    executed notebook exported to HTML shows its figures offline."""
    import plotly.io as pio

    pio.renderers.default = renderer
