"""Interactive notebook views (ipywidgets): the k / n explorer of notebook 01 and the ROC picker of notebook 06.

Each function returns a widget ready to ``display``; the notebooks hold no logic of their own. Headless runs
(papermill) show the widget's initial state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from toolkit.identifiers.graph import TermGraph
    from toolkit.results.collect import RunData


def indirect_share_explorer(graph: TermGraph, *, k: int, n: int, max_k: int, max_n: int):
    """Sliders for ``k`` and ``n`` with a read-out of the share of word occurrences that are indirect identifiers
    and the median number per individual (docs/methods.md §2), recomputed from ``graph`` on every move."""
    import ipywidgets as widgets

    k_slider = widgets.IntSlider(value=k, min=2, max=max_k, description="k")
    n_slider = widgets.IntSlider(value=n, min=1, max=max_n, description="n")
    readout = widgets.HTML()

    def update(_=None) -> None:
        row = graph.indirect_shares([k_slider.value], [n_slider.value]).iloc[0]
        readout.value = (f"<b>k={k_slider.value}, n={n_slider.value}</b>: {row['share']:.1%} of word occurrences "
                         f"are indirect identifiers; median {int(row['median'])} per individual")

    k_slider.observe(update, "value")
    n_slider.observe(update, "value")
    update()
    return widgets.VBox([widgets.HBox([k_slider, n_slider]), readout])


def roc_explorer(runs: list[RunData]):
    """Pickers for a run, its strategies and a checkpoint, redrawing the membership attack's ROC (log-log axes) and
    the TPR at fixed FPR below them. ``runs`` are runs with audits (:class:`~toolkit.results.collect.RunData`)."""
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
    return widgets.interactive(show, run_label=run_w, strategies=strat_w, epoch=epoch_w)


__all__ = ["indirect_share_explorer", "roc_explorer"]
