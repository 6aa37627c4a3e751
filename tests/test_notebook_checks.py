"""``toolkit demo`` checks every executed notebook for what a reader must not meet (issue 55, "clean outputs"):
tracebacks, library warnings, frozen progress bars, log lines, over-long outputs, empty table columns — each found in
a small synthetic executed notebook built with nbformat, and a clean one finds none; the summary page lists them;
``toolkit demo`` exits non-zero on a traceback. The progress bar of a notebook kernel closes at its final count (or
vanishes) in the saved outputs; Opacus' secure-RNG warning is silenced where the engine is made, no other."""

from __future__ import annotations

import warnings

import pytest

from toolkit.pipelines import notebooks
from toolkit.pipelines.notebook_checks import MAX_OUTPUT_CHARS, check_node, check_notebook, has_traceback


def _nb(*outputs_per_cell, widgets=None):
    import nbformat

    cells = [nbformat.v4.new_markdown_cell("# title")]
    for outs in outputs_per_cell:
        c = nbformat.v4.new_code_cell("x = 1")
        c.outputs = [nbformat.from_dict(o) for o in outs]
        cells.append(c)
    nb = nbformat.v4.new_notebook(cells=cells)
    if widgets is not None:
        nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": widgets,
                                                                                  "version_major": 2,
                                                                                  "version_minor": 0}}
    return nb


def _stream(text, name="stderr"):
    return {"output_type": "stream", "name": name, "text": text}


def _html(text):
    return {"output_type": "execute_result", "execution_count": 1, "metadata": {},
            "data": {"text/html": text, "text/plain": "table"}}


def _frame_html(df):
    return _html(df.to_html())


def _kinds(nb):
    return [(i.kind, i.cell) for i in check_node(nb)]


def test_a_clean_notebook_has_no_issue():
    import pandas as pd

    df = pd.DataFrame({"strategy": ["clm", "ppclm"], "AUC": [0.98, 0.51], "note": [None, "PP*"]})
    nb = _nb([_stream("12 training notes about 24 patients\n", "stdout")], [_frame_html(df)],
             [{"output_type": "display_data", "metadata": {}, "data": {"text/plain": ""}}],  # a closed bar
             [{"output_type": "display_data", "metadata": {},
               "data": {"text/plain": "kept: 100%|##########| 50/50 [00:00<00:00]"}}])
    assert check_node(nb) == []


def test_each_kind_is_found_in_its_cell():
    import pandas as pd

    nan = pd.DataFrame({"strategy": ["clm", "ppclm"], "TPR@1%": ["n/r", "n/r"], "tau=10": [float("nan")] * 2,
                        "AUC": [0.9, 0.5]})
    long_table = pd.DataFrame({"text": ["word " * 200] * 10})
    nb = _nb([{"output_type": "error", "ename": "ValueError", "evalue": "Jane Doe's record", "traceback": []}],
             [_stream("/x/opacus/privacy_engine.py:96: UserWarning: Secure RNG turned off.\n  warnings.warn(\n")],
             [_stream("[run] base: up to date (cached)\n[run] train/clm: running ...\n", "stdout")],
             [{"output_type": "display_data", "metadata": {},
               "data": {"text/plain": "spaCy NER:  99%|#########9| 990/1000"}}],
             [_frame_html(nan)], [_frame_html(long_table)],
             [_stream("caught:\nTraceback (most recent call last):\n  File ...\n")],
             [_stream("INFO:toolkit.pipelines:step done\n2026-12-02 02:41:56,123 - transformers - WARNING - x\n")])
    found = _kinds(nb)
    assert ("traceback", 1) in found and ("warning", 2) in found and ("log", 3) in found
    assert ("progress", 4) in found and ("long output", 6) in found and ("traceback", 7) in found
    assert ("log", 8) in found and ("warning", 8) not in found  # a logging line is a log line, counted once
    empty = {i.detail for i in check_node(nb) if i.kind == "empty column"}
    assert empty == {"column 'TPR@1%' is n/r in every row", "column 'tau=10' is empty (NaN) in every row"}
    log = next(i for i in check_node(nb) if i.kind == "log" and i.cell == 3)
    assert log.detail.startswith("2 log lines, first: [run] base")
    assert all("Jane" not in str(i) for i in check_node(nb))  # an exception's message is never quoted
    assert has_traceback(check_node(nb)) and not has_traceback([i for i in check_node(nb) if i.cell != 1
                                                                and i.cell != 7])


def test_the_readable_length_counts_visible_characters_not_markup():
    short = "<table>" + "<tr><td style='padding:1em;border:1px'>1</td></tr>" * 400 + "</table>"
    assert len(short) > MAX_OUTPUT_CHARS and _kinds(_nb([_html(short)])) == []
    prose = {"output_type": "display_data", "metadata": {}, "data": {"text/markdown": "- verdict " * 2000,
                                                                      "text/plain": "<Markdown>"}}
    assert _kinds(_nb([prose])) == [("long output", 1)]
    figure = {"output_type": "display_data", "metadata": {},
              "data": {"application/vnd.plotly.v1+json": {}, "text/html": "<div>" + "x" * 50000 + "</div>"}}
    assert _kinds(_nb([figure])) == []


def _bar_state(value, top, *, hidden):
    layout = {"model_name": "LayoutModel", "state": {"display": "none"} if hidden else {}}
    return {"box": {"model_name": "HBoxModel", "state": {"children": ["IPY_MODEL_bar"], "layout": "IPY_MODEL_lay"}},
            "bar": {"model_name": "FloatProgressModel", "state": {"value": value, "max": top}},
            "lay": layout}


@pytest.mark.parametrize("value, hidden, frozen", [(99.0, False, True), (99.0, True, False), (100.0, False, False)])
def test_a_progress_widget_is_frozen_when_shown_below_its_maximum(value, hidden, frozen):
    out = {"output_type": "display_data", "metadata": {},
           "data": {"text/plain": "x:   0%|          | 0/100",
                    "application/vnd.jupyter.widget-view+json": {"model_id": "box", "version_major": 2,
                                                                 "version_minor": 0}}}
    nb = _nb([out], widgets=_bar_state(value, 100.0, hidden=hidden))
    assert (_kinds(nb) == [("progress", 1)]) is frozen
    html = _html("<progress value='3' max='10'></progress> 3/10 epochs")
    assert _kinds(_nb([html])) == [("progress", 1)]


def test_the_summary_page_lists_each_notebook_s_issues_and_demo_fails_on_a_traceback(tmp_path, monkeypatch,
                                                                                     capsys):
    import argparse

    import nbformat

    from toolkit.cli.run import cmd_demo

    nb_dir = tmp_path / "nb"
    nb_dir.mkdir()
    for name in ("01_a.ipynb", "02_b.ipynb"):
        (nb_dir / name).write_text("{}", encoding="utf-8")
    executed = {"01_a": _nb([_stream("[run] base: up to date (cached)\n", "stdout")]),
                "02_b": _nb([{"output_type": "error", "ename": "KeyError", "evalue": "'x'", "traceback": []}])}
    plan = {"02_b": True}

    def fake_run(path, out_dir, parameters=None, **kw):
        out_dir.mkdir(parents=True, exist_ok=True)
        if plan.get(path.stem):
            nbformat.write(executed[path.stem], str(out_dir / path.name))
        elif path.stem == "01_a":
            nbformat.write(executed["01_a"], str(out_dir / path.name))
        return out_dir / path.name

    monkeypatch.setattr(notebooks, "run_notebook", fake_run)
    args = argparse.Namespace(notebooks=str(nb_dir), out=str(tmp_path / "out"), only=None, profile="cpu",
                              parameters=None, workshop=False, force=False)
    assert cmd_demo(args) == 1  # every notebook "ran", but 02_b's executed copy holds a traceback
    page = (tmp_path / "out" / "index.html").read_text(encoding="utf-8")
    assert "cell 1: log: 1 log line, first: [run] base" in page and "cell 1: traceback: KeyError raised" in page
    assert "    cell 1: traceback: KeyError raised" in capsys.readouterr().out
    plan["02_b"] = False  # no executed copy of 02_b: nothing to check; the log line alone does not fail the demo
    (tmp_path / "out" / "02_b.ipynb").unlink()
    assert cmd_demo(args) == 0
    assert check_notebook(tmp_path / "out" / "01_a.ipynb")[0].kind == "log"


def test_secure_rng_warning_is_silenced_where_the_engine_is_made_and_no_other(monkeypatch):
    import opacus

    from toolkit.training import dp

    def noisy_init(self, *a, **k):
        warnings.warn("Secure RNG turned off. This is perfectly fine for experimentation ...")
        warnings.warn("another library warning")

    monkeypatch.setattr(opacus.PrivacyEngine, "__init__", noisy_init)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        dp.privacy_engine()
        warnings.warn("Secure RNG turned off, said elsewhere")  # outside the engine's making: kept
    assert [str(w.message) for w in seen] == ["another library warning", "Secure RNG turned off, said elsewhere"]


def test_the_real_engine_says_nothing():
    from toolkit.training import dp

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        engine = dp.privacy_engine()
    assert not [w for w in seen if dp.SECURE_RNG_WARNING in str(w.message)] and engine.accountant.mechanism() == "rdp"


def test_a_notebook_bar_closes_at_its_final_count_or_vanishes():
    """A real kernel (nbclient, as papermill): the saved outputs of a bar closed after a loop that outran its refresh
    interval hold no text below 100%; a kept bar (leave=True) shows 100%, a bar stopped early keeps its count."""
    import nbformat
    from nbclient import NotebookClient

    cells = ["import time\nfrom toolkit.progress import progress_bar, stream_kind\nprint(stream_kind())\n"
             "with progress_bar(total=1000, desc='spaCy NER') as b:\n    for i in range(100):\n"
             "        time.sleep(0.002)\n        b.update(10)",
             "for i in progress_bar(range(50), desc='kept', leave=True):\n    time.sleep(0.002)",
             "b = progress_bar(total=10, desc='early')\nb.update(3)\nb.close()"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    NotebookClient(nb, kernel_name="python3", timeout=120).execute()
    first, kept, early = (c.outputs for c in nb.cells)
    assert first[0]["text"] == "notebook\n"
    assert [o.get("data", {}).get("text/plain") for o in first[1:]] == [""]  # the bar's output emptied
    assert "kept: 100%" in kept[0]["data"]["text/plain"]
    assert "early:  30%" in early[0]["data"]["text/plain"]
    found = check_node(nb)
    assert [(i.kind, i.cell) for i in found] == [("progress", 3)]  # only the bar that did stop short


def test_workshop_notebooks_run_with_every_step_required_cached_and_the_others_not(tmp_path, monkeypatch):
    import os

    from toolkit.pipelines.cache import REQUIRE_CACHED

    nb_dir = tmp_path / "nb"
    nb_dir.mkdir()
    for name in ("00_a.ipynb", "01_b.ipynb"):
        (nb_dir / name).write_text("{}", encoding="utf-8")
    seen = {}

    def fake_run(path, out_dir, parameters=None, **kw):
        seen[path.stem] = os.environ.get(REQUIRE_CACHED)
        return out_dir / path.name

    monkeypatch.setattr(notebooks, "run_notebook", fake_run)
    monkeypatch.delenv(REQUIRE_CACHED, raising=False)
    notebooks.run_notebooks(nb_dir, tmp_path / "out", require_cached={"00_a"})
    assert seen == {"00_a": "1", "01_b": None} and REQUIRE_CACHED not in os.environ
