"""Interactive notebook views: the k / n explorer of notebook 01 and the ROC picker of notebook 06 (ipywidgets), the
privacy–utility explorer of notebooks 00, 02 and 03 (a plotly figure with a menu and a slider, no kernel needed).

Each function returns a widget ready to ``display``, drawn from results already computed (nothing retrains); the
notebooks hold no logic of their own. Headless runs (papermill) show the widget's initial state, and a saved copy
shows no widget at all: a notebook draws the same figure statically before it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from toolkit.identifiers.graph import TermGraph
    from toolkit.results.collect import RunData


#: set to "1" in the environment of a kernel that :func:`toolkit.pipelines.notebooks.run_notebook` starts (``make
#: demo``, ``make workshop``, the notebook tests): nobody can move a control there
HEADLESS_ENV = "TOOLKIT_HEADLESS"


def headless() -> bool:
    """True in a kernel started by a headless run (:data:`HEADLESS_ENV`)."""
    return os.environ.get(HEADLESS_ENV) == "1"


def interactive_view(show, **controls):
    """``ipywidgets.interactive(show, **controls)`` in a live kernel; in a headless run, ``show`` called once with the
    controls' initial values and nothing returned. ``interactive`` draws into an Output widget with
    ``clear_output(wait=True)``, on which papermill's client can wait forever (papermill#723, nbclient#312; seen here
    after in-kernel training): the saved notebook shows the same initial view either way."""
    if headless():
        show(**{name: control.value for name, control in controls.items()})
        return None
    import ipywidgets as widgets

    return widgets.interactive(show, **controls)


def indirect_count_figure(graph: TermGraph, k: int, n: int):
    """The distribution (ECDF) of the number of distinct indirect identifiers per individual at ``k`` and ``n``
    (docs/methods.md §2), from ``graph`` (:meth:`~toolkit.identifiers.graph.TermGraph.indirect_per_individual`)."""
    import plotly.graph_objects as go

    from toolkit.plots.audit import TEMPLATE, ecdf_points

    x, y = ecdf_points(graph.indirect_per_individual(int(k), int(n)))
    fig = go.Figure(go.Scatter(x=x, y=y, mode="lines+markers", line_shape="hv", name=f"k={k}, n={n}",
                               hovertemplate="≤ %{x} indirect identifiers: %{y:.0%} of individuals<extra></extra>"))
    fig.update_layout(template=TEMPLATE, height=320, title=f"Indirect identifiers per individual at k={k}, n={n}",
                      xaxis_title="distinct indirect identifiers of an individual",
                      yaxis_title="share of individuals (cumulative)", yaxis_range=[0, 1.02])
    return fig


def indirect_share_explorer(graph: TermGraph, *, k: int, n: int, max_k: int, max_n: int):
    """Sliders for ``k`` and ``n`` with a read-out of the share of word occurrences that are indirect identifiers
    and the median number per individual (docs/methods.md §2), and the distribution per individual below it
    (:func:`indirect_count_figure`), both recomputed from ``graph`` on every move (the figure from the first move
    on: a headless run never draws into an Output widget — nbclient can hang on it — and the notebook draws the
    same read-out statically above)."""
    import ipywidgets as widgets
    from IPython.display import display

    k_slider = widgets.IntSlider(value=k, min=2, max=max_k, description="k")
    n_slider = widgets.IntSlider(value=n, min=1, max=max_n, description="n")
    readout = widgets.HTML()
    figure = widgets.Output()

    def update(_=None, draw: bool = True) -> None:
        row = graph.indirect_shares([k_slider.value], [n_slider.value]).iloc[0]
        readout.value = (f"<b>k={k_slider.value}, n={n_slider.value}</b>: {row['share']:.1%} of word occurrences "
                         f"are indirect identifiers; median {int(row['median'])} per individual")
        if draw:
            figure.clear_output(wait=True)
            with figure:
                display(indirect_count_figure(graph, k_slider.value, n_slider.value))

    k_slider.observe(update, "value")
    n_slider.observe(update, "value")
    update(draw=False)  # the figure is drawn on the first move: never while a headless run executes the cell
    return widgets.VBox([widgets.HBox([k_slider, n_slider]), readout, figure])


def privacy_utility_explorer(results, *, gains: dict[str, str] | None = None):
    """:func:`toolkit.plots.tradeoff.privacy_utility` with a strategy menu and a checkpoint slider drawn into the
    figure itself (plotly buttons and slider: they work in JupyterLab, in a saved notebook's HTML and headless, with
    no kernel and no ipywidgets comm — a headless run never waits on a widget). The menu shows every strategy or one
    (the base model's point always); the slider shows each strategy's checkpoints up to the chosen epoch.
    ``results``: :func:`toolkit.results.results_table` with its ``base`` row; ``gains``: strategy → gain retained
    text (legend)."""
    import pandas as pd

    from toolkit.plots.tradeoff import privacy_utility, split_base

    fig = privacy_utility(results, gains=gains)
    tuned, _ = split_base(results)
    two_panels = tuned["heldout_utility"].notna().any() if "heldout_utility" in tuned else False
    strategies = list(dict.fromkeys(tuned["strategy"]))
    epochs = sorted({int(e) for e in tuned["epoch"].dropna()})

    def column(trace) -> str:
        return "heldout_utility" if two_panels and trace.xaxis in (None, "x") else "utility"

    def points(trace, upto: int):
        g = tuned[(tuned["strategy"] == trace.legendgroup) & (tuned["epoch"] <= upto)].sort_values("epoch")
        return (list(g[column(trace)]), list(g["privacy"]),
                [("unknown" if pd.isna(e) else str(int(e))) for e in g["epoch"]])

    lines = [i for i, t in enumerate(fig.data) if t.legendgroup in strategies]
    steps = []
    for e in epochs:
        xs, ys, texts = zip(*(points(fig.data[i], e) for i in lines)) if lines else ((), (), ())
        steps.append(dict(label=str(e), method="restyle",
                          args=[{"x": list(xs), "y": list(ys), "text": list(texts)}, lines]))
    menu = [dict(label="every strategy", method="restyle", args=[{"visible": [True] * len(fig.data)}])]
    menu += [dict(label=s, method="restyle",
                  args=[{"visible": [t.legendgroup in (s, "base") for t in fig.data]}]) for s in strategies]
    fig.update_layout(updatemenus=[dict(buttons=menu, direction="down", x=0.0, xanchor="left", y=1.18,
                                        yanchor="bottom", showactive=True)],
                      sliders=[dict(steps=steps, active=len(steps) - 1, currentvalue=dict(prefix="up to epoch "),
                                    pad=dict(t=60))] if steps else [],
                      margin=dict(t=120), title="Explore: one strategy, checkpoint by checkpoint (menu, slider)")
    return fig


def roc_explorer(runs: list[RunData]):
    """Pickers for a run, its strategies and a checkpoint, redrawing the membership attack's ROC (log-log axes, a
    button switches to linear) and the TPR at fixed FPR below them. ``runs`` are runs with audits (:class:`~toolkit.results.collect.RunData`)."""
    import ipywidgets as widgets
    from IPython.display import display

    from toolkit.plots.audit import roc_curves, tpr_table
    from toolkit.plots.runs import roc_reports

    def show(run_label, strategies, epoch) -> None:
        run = next(r for r in runs if r.label == run_label)
        reports = roc_reports(run, list(strategies) or None, epoch)
        if not reports:
            print("no audit at this checkpoint for the chosen strategies")
            return
        roc_curves(reports).show()
        display(tpr_table(reports, with_ci=True))

    def epochs_of(run) -> list:
        return ["last"] + sorted({e for s in run.strategies for e in run.epochs(s)})

    first = runs[0]
    run_w = widgets.Dropdown(options=[r.label for r in runs], description="run")
    strat_w = widgets.SelectMultiple(options=first.strategies, value=tuple(first.strategies),
                                     description="strategies")
    epoch_w = widgets.Dropdown(options=epochs_of(first), description="checkpoint")

    def update_options(change) -> None:
        run = next(r for r in runs if r.label == change["new"])
        strat_w.options = run.strategies
        strat_w.value = tuple(run.strategies)
        epoch_w.options = epochs_of(run)
        epoch_w.value = "last"

    run_w.observe(update_options, names="value")
    return interactive_view(show, run_label=run_w, strategies=strat_w, epoch=epoch_w)


__all__ = ["HEADLESS_ENV", "headless", "indirect_count_figure", "interactive_view", "indirect_share_explorer", "privacy_utility_explorer", "roc_explorer"]
