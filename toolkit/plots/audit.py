"""plotly figures, one function per figure kind (methods.md §9).

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


def indirect_share_grid(shares: pd.DataFrame) -> go.Figure:
    """Heat map of the share of word occurrences that are indirect identifiers for every ``(k, n)``
    (:meth:`toolkit.identifiers.graph.TermGraph.indirect_shares`), the median per individual on hover: notebook 01's
    k/n sliders for a static copy, where widgets do not run (plotly's hover does)."""
    wide = shares.pivot(index="n", columns="k", values="share").sort_index()
    median = shares.pivot(index="n", columns="k", values="median").reindex_like(wide)
    fig = go.Figure(go.Heatmap(
        z=wide.to_numpy(), x=[f"k = {k}" for k in wide.columns], y=[f"n = {n}" for n in wide.index],
        text=[[f"{v:.1%}" for v in row] for row in wide.to_numpy()], texttemplate="%{text}", colorscale="Blues",
        customdata=median.to_numpy(), colorbar_title="share",
        hovertemplate="%{x}, %{y}: %{text} of word occurrences; median %{customdata:.0f} per individual"
                      "<extra></extra>"))
    fig.update_layout(template=TEMPLATE, title="Share of word occurrences that are indirect identifiers, by k and n",
                      height=160 + 60 * len(wide.index))
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
    executed notebook exported to HTML shows its figures offline; torch computes on every core
    (:func:`toolkit.threads.use_cores`)."""
    import plotly.io as pio

    from toolkit.threads import use_cores

    pio.renderers.default = renderer
    use_cores()


# ---------------------------------------------------------------------------------------------------------------------
# audit figures (methods.md §9): privacy–utility trade-off, ROC, regurgitation; inputs come from ``toolkit.metrics``


#: one colour per kind of strategy, the same in every figure: the masked and causal variants of a strategy share it
#: (they never share a run), the base model is grey
STRATEGY_PALETTE = {
    "base": "#555555",
    "mlm": "#1f5fd1", "clm": "#1f5fd1",  # plain fine-tuning
    "mlm_pseudo": "#f08c00", "clm_pseudo": "#f08c00",  # pseudonymised text
    "ppmlm": "#1b9e5a", "ppclm": "#1b9e5a",  # identifiers never prediction targets
    "dppmlm": "#17becf", "dppclm": "#17becf",
    "ippmlm": "#9c4fd6", "ippclm": "#9c4fd6",
    "mlm_dp": "#d62728", "clm_dp": "#d62728",  # DP-SGD
}
#: colours of other names (techniques, audited models of ``toolkit audit``), picked by a stable hash of the name
EXTRA_PALETTE = ("#8c564b", "#e377c2", "#bcbd22", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173",
                 "#E15F99", "#B68100", "#750D86", "#EB663B", "#511CFB", "#00A08B", "#FB00D1", "#B2828D",
                 "#6C7C32", "#778AAE", "#862A16", "#A777F1", "#620042", "#1616A7", "#6C4516", "#0D2A63")


def strategy_of(label: str) -> str:
    """The strategy a figure label names: ``"clm (epoch 8)"`` → ``"clm"``, ``"03 causal LM: ppclm"`` → ``"ppclm"``,
    ``"base (epoch 0)"`` → ``"base"``, ``"bert-ppmlm"`` → ``"ppmlm"`` (the last word of the label that is a
    strategy); any other label is returned unchanged (stripped)."""
    import re

    name = str(label).rsplit(": ", 1)[-1].strip()
    head = name.split(" (", 1)[0].strip()
    if head in STRATEGY_PALETTE:
        return head
    known = [w for w in re.split(r"[^A-Za-z0-9_]+", head) if w in STRATEGY_PALETTE]
    return known[-1] if known else name


def strategy_color(label: str) -> str:
    """The colour of a strategy (or of a label naming one, see :func:`strategy_of`) in every figure; names outside
    :data:`STRATEGY_PALETTE` get a colour from a stable hash of the name (the same in every figure and report)."""
    import zlib

    s = strategy_of(label)
    return STRATEGY_PALETTE.get(s) or EXTRA_PALETTE[zlib.crc32(s.encode("utf-8")) % len(EXTRA_PALETTE)]


def strategy_colors(strategies) -> dict:
    """``{name: colour}`` of :func:`strategy_color`: a strategy has the same colour whatever else is drawn."""
    return {s: strategy_color(s) for s in strategies}


def run_dashes(labels) -> dict:
    """A line dash per run for labels ``"run: strategy"`` (notebook 06 draws several runs in one figure; the colour
    stays the strategy's), solid for labels without a run."""
    dashes = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
    runs = list(dict.fromkeys(str(label).rsplit(": ", 1)[0] for label in labels if ": " in str(label)))
    return {label: dashes[runs.index(str(label).rsplit(": ", 1)[0]) % len(dashes)] if ": " in str(label) else "solid"
            for label in labels}


def axes_toggle(fig: go.Figure, *, log: bool = False, what: str = "rate") -> go.Figure:
    """Linear or log axes for an ROC figure (``log``: the initial state) and two buttons above it that switch every
    axis of the figure between them — in JupyterLab, in an executed notebook's HTML and in the report alike (plotly
    relayout, no kernel needed). Linear by default: with a few dozen non-members every resolvable FPR is ≥ 1/n, so
    on log axes most points crowd the left edge."""
    axes = [k for k in fig.layout.to_plotly_json() if k.startswith(("xaxis", "yaxis"))] or ["xaxis", "yaxis"]
    fig.update_xaxes(type="log" if log else "linear")
    fig.update_yaxes(type="log" if log else "linear")
    buttons = [dict(label=label, method="relayout", args=[{f"{a}.type": kind for a in axes}])
               for label, kind in (("linear axes", "linear"), ("log axes", "log"))]
    fig.update_layout(updatemenus=[dict(type="buttons", direction="left", x=1.0, xanchor="right", y=1.12,
                                        yanchor="bottom", showactive=True, active=int(log), buttons=buttons)])
    return fig


def roc_curves(curves: dict[str, dict], *, title: str | None = None, colors: dict | None = None,
               log: bool = True) -> go.Figure:
    """ROC curves of the membership attack with the chance line (methods.md §5, §9; 000 Fig. 6), log-log axes
    (``log=False``: linear, what the notebooks draw for their few dozen non-members) with buttons to switch
    (:func:`axes_toggle`).

    ``curves`` maps a name (strategy) to the output of ``toolkit.metrics.roc`` or ``mia_report`` (keys ``fpr``,
    ``tpr``, ``auc``, ``n_members``, ``n_nonmembers``); the AUC goes into the legend, e.g. ``"mlm (AUC 0.91)"``.
    ``colors`` maps a name to its colour (default: the strategy's, :func:`strategy_color`).

    A log axis cannot show 0: FPR = 0 is drawn at ``1 / (2 · n_nonmembers)`` and TPR = 0 at
    ``1 / (2 · n_members)``, half the smallest non-zero rate each sample can produce, so the clipped points sit
    visibly left of (below) every resolvable one on log axes (on linear ones they sit that close to 0; the hover
    gives the true rates). The dashed diagonal is the chance line (AUC 0.5), drawn thin and
    light: a curve on it (a model at chance) stays visible by its markers and wider line; curves that coincide stay
    visible too (earlier curves wider, under later ones, each with its own marker shape).
    """
    fig = go.Figure()
    colors = colors or {}
    lo = 1.0
    symbols = ("circle", "square", "diamond", "triangle-up", "cross", "x", "star", "hexagon")
    n_curves = len(curves)
    for i, (name, c) in enumerate(curves.items()):
        # identical curves (two models at chance) must not hide each other: earlier ones are drawn wider, under
        # the later ones, with larger markers of another shape
        width = 2.0 + 3.5 * (n_curves - 1 - i) / max(1, n_curves - 1)
        fpr = np.asarray(c["fpr"], dtype=float)
        tpr = np.asarray(c["tpr"], dtype=float)
        pos_f, pos_t = fpr[fpr > 0], tpr[tpr > 0]
        n_neg = c.get("n_nonmembers") or (1.0 / pos_f.min() if pos_f.size else 1.0)
        n_pos = c.get("n_members") or (1.0 / pos_t.min() if pos_t.size else 1.0)
        fmin, tmin = 1.0 / (2 * n_neg), 1.0 / (2 * n_pos)
        lo = min(lo, fmin, tmin)
        fig.add_trace(go.Scatter(x=np.maximum(fpr, fmin), y=np.maximum(tpr, tmin), mode="lines+markers",
                                 name=f"{name} (AUC {c['auc']:.2f})", legendgroup=str(name),
                                 line=dict(color=colors.get(name) or strategy_color(name), width=width),
                                 marker=dict(size=width + 4, symbol=symbols[i % len(symbols)]),
                                 customdata=np.stack([fpr, tpr], axis=-1),
                                 hovertemplate=f"{name}<br>FPR %{{customdata[0]:.4f}}<br>TPR %{{customdata[1]:.4f}}"
                                               "<extra></extra>"))
    fig.add_trace(go.Scatter(x=[lo, 1.0], y=[lo, 1.0], mode="lines", name="chance (AUC 0.50)",
                             line=dict(dash="dash", color="#b0b0b0", width=1), hoverinfo="skip"))
    fig.update_layout(template=TEMPLATE, title=title or "Membership inference by predicted indirect identifiers (ROC)",
                      xaxis_title="false-positive rate (0 drawn at 1/(2·non-members))",
                      yaxis_title="true-positive rate (0 drawn at 1/(2·members))", legend_title="")
    return axes_toggle(fig, log=log)


def regurgitation_cdf(tables: dict[str, pd.DataFrame], *, count_col: str = "n_predicted",
                      normalize: bool = True) -> go.Figure:
    """Regurgitation of identifiers against their training frequency, one line per strategy (000 Fig. 5).

    ``tables`` maps a strategy to ``toolkit.metrics.regurgitation_table``. For a strategy whose identifiers have
    training frequencies ``f_t`` and prediction counts ``c_t`` (``count_col``: ``n_predicted``, predictions
    anywhere, or ``n_predicted_correct``, at the identifier's own position), the curve is the step function

    .. math:: F(x) = \\sum_{t : f_t \\le x} c_t \\Big/ \\sum_t c_t

    i.e. the cumulative share of the predictions of leaked identifiers (``c_t > 0``) that fall on identifiers
    seen at most ``x`` times in training; x on a log axis. A curve that rises late means the regurgitated
    identifiers are the frequently repeated ones. With ``normalize=False`` the y axis is the cumulative *number* of
    predictions (the denominator is dropped), so curve heights compare the volume of regurgitation between
    strategies (the paper's "area between the curves"). A strategy with no leaked identifier gives an empty trace.
    """
    fig = go.Figure()
    for name, t in tables.items():
        t = t[t[count_col] > 0]
        x, y = ecdf_points(t["train_frequency"], t[count_col])
        total = float(t[count_col].sum())
        count = y * total if x.size else y  # the cumulative number of predictions beside the share
        if not normalize and x.size:
            y = count
        fig.add_trace(go.Scatter(
            x=x, y=y, mode="lines+markers", line_shape="hv", name=f"{name} ({int(total):,} predictions of "
                                                                       f"{len(t):,} leaked types)",
            legendgroup=str(name), line=dict(color=strategy_color(name), width=2.5), marker=dict(size=5),
            customdata=np.stack([count, y if normalize else count / total if total else count], axis=-1)
            if x.size else None,
            hovertemplate=f"{name}<br>≤ %{{x}} training occurrences: %{{customdata[0]:,.0f}} predictions "
                          "(%{customdata[1]:.1%})<extra></extra>"))
    fig.update_xaxes(type="log")
    fig.update_layout(template=TEMPLATE, title="Regurgitated identifiers against their training frequency",
                      xaxis_title="occurrences of the identifier in the training data (log)",
                      yaxis_title=("cumulative share of predictions" if normalize else "cumulative predictions")
                      + " of leaked identifiers", legend_title="strategy")
    return fig


def unresolvable_fprs(reports: dict[str, dict]) -> list[str]:
    """The FPR keys no report can resolve (``None`` in every ``tpr_at_fpr``: below 1/n_nonmembers)."""
    keys = sorted({k for r in reports.values() for k in r["tpr_at_fpr"]}, key=float)
    return [k for k in keys if all(r["tpr_at_fpr"].get(k) is None for r in reports.values())]


def tpr_table_note(reports: dict[str, dict]) -> str:
    """The sentence under a :func:`tpr_table` with ``drop_unresolvable``: which FPR columns it left out and why
    ("" when none)."""
    gone = unresolvable_fprs(reports)
    if not gone:
        return ""
    n = sorted({r.get("n_nonmembers") for r in reports.values() if r.get("n_nonmembers")})
    with_n = f" with {n[0]} non-members" if len(n) == 1 else ""
    fprs = ", ".join(f"{float(k) * 100:g}%" for k in gone)
    return (f"TPR at FPR {fprs} is left out: an FPR below 1/n_nonmembers cannot be measured{with_n} (one wrongly "
            f"accused non-member already is {1 / n[0]:.1%})." if len(n) == 1 else
            f"TPR at FPR {fprs} is left out: an FPR below 1/n_nonmembers cannot be measured.")


def tpr_table(reports: dict[str, dict], *, formatted: bool = True, with_ci: bool = False,
              digits: int = 2, drop_unresolvable: bool = False) -> pd.DataFrame:
    """Strategy × FPR table of TPR at fixed FPRs plus AUC, as 000 Table 2 (methods.md §5).

    ``reports`` maps a strategy to ``toolkit.metrics.mia_report``. Columns are ``"TPR @ FPR 0.1%"``, … (one per
    FPR key present, in increasing order) and ``"AUC"``. With ``formatted`` (default) cells are strings —
    percentages with ``digits`` decimals, ``"n/r"`` where the FPR is not resolvable with the number of
    non-members (the report has None), and the bootstrap interval in brackets when ``with_ci``; otherwise floats
    (TPR as a fraction, NaN for not resolvable). With ``drop_unresolvable`` an FPR column that is n/r for every
    report is left out (:func:`tpr_table_note` says which and why).
    """
    gone = set(unresolvable_fprs(reports)) if drop_unresolvable else set()
    keys = sorted({k for r in reports.values() for k in r["tpr_at_fpr"]} - gone, key=float)
    cols = {k: f"TPR @ FPR {float(k) * 100:g}%" for k in keys}
    rows = {}
    for name, r in reports.items():
        row = {}
        for k in keys:
            v = r["tpr_at_fpr"].get(k)
            if not formatted:
                row[cols[k]] = np.nan if v is None else float(v)
            elif v is None:
                row[cols[k]] = "n/r"
            else:
                s = f"{100 * v:.{digits}f}%"
                ci = (r.get("tpr_at_fpr_ci") or {}).get(k)
                if with_ci and ci is not None:
                    s += f" [{100 * ci[0]:.{digits}f}, {100 * ci[1]:.{digits}f}]"
                row[cols[k]] = s
        auc = r["auc"]
        if not formatted:
            row["AUC"] = float(auc)
        else:
            row["AUC"] = f"{auc:.3f}"
            if with_ci and r.get("auc_ci") is not None:
                row["AUC"] += f" [{r['auc_ci'][0]:.3f}, {r['auc_ci'][1]:.3f}]"
        rows[name] = row
    out = pd.DataFrame.from_dict(rows, orient="index", columns=[*cols.values(), "AUC"])
    out.index.name = "strategy"
    return out
