"""Explorers in a headless run: the initial view drawn once, no live widget (papermill can wait forever on an
``interactive``'s Output widget); in a live kernel the widget itself. ``run_notebook`` marks its kernel headless and
leaves the caller's environment as it was."""

import os

import ipywidgets

from toolkit.plots import widgets


def test_headless_draws_the_initial_view_once_and_returns_nothing(monkeypatch):
    monkeypatch.setenv(widgets.HEADLESS_ENV, "1")
    calls = []
    out = widgets.interactive_view(lambda tau, y: calls.append((tau, y)),
                                   tau=ipywidgets.FloatSlider(value=3.5, min=0, max=10),
                                   y=ipywidgets.Dropdown(options=["a", "b"], value="b"))
    assert out is None and calls == [(3.5, "b")]


def test_a_live_kernel_gets_the_widget(monkeypatch):
    monkeypatch.delenv(widgets.HEADLESS_ENV, raising=False)
    calls = []
    out = widgets.interactive_view(lambda tau: calls.append(tau), tau=ipywidgets.FloatSlider(value=2.0))
    assert isinstance(out, ipywidgets.interactive)
    out.children[0].value = 4.0
    assert calls[-1] == 4.0


def test_run_notebook_marks_its_kernel_headless_and_restores_the_environment(tmp_path, monkeypatch):
    import nbformat

    from toolkit.pipelines.notebooks import run_notebook

    monkeypatch.delenv(widgets.HEADLESS_ENV, raising=False)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(f"import os; print(os.environ.get({widgets.HEADLESS_ENV!r}))")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp_path / "t.ipynb")
    out = nbformat.read(run_notebook(tmp_path / "t.ipynb", tmp_path / "out", timeout=120), as_version=4)
    assert out.cells[0].outputs[0]["text"].strip() == "1"
    assert widgets.HEADLESS_ENV not in os.environ
