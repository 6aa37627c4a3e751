"""Run the notebooks headless with papermill and write executed copies plus an HTML summary (``make demo``).

Each notebook runs in its own kernel with the ``profile`` parameter (and any extra parameters); one progress line
per notebook is printed with its wall time, and at the end a table of every notebook's time and the total
(:func:`timing_table`); a failing notebook is reported, the others still run. Each executed copy is then checked for
what a reader must not meet — tracebacks, library warnings, frozen progress bars, log lines, over-long outputs, empty
table columns (:mod:`toolkit.pipelines.notebook_checks`) — listed under its line and on the summary page; a
traceback fails ``toolkit demo`` (exit status 1). Each kernel computes on every core
(``plots.setup_notebook`` calls :func:`toolkit.threads.use_cores`; ``TOOLKIT_THREADS`` overrides, and kernels inherit
it).

The executed copies (``.ipynb`` and ``.html``) show whole notes, predictions and tables of the sample corpus: they
contain text of the corpus, including identifiers, and must be treated like the corpus. They are written owner-only
(the run happens under :func:`toolkit.io.private_umask`, which the kernels inherit), and the summary page says so.
"""

from __future__ import annotations

import html
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolkit.io import atomic_write_text, make_private_dir, private_umask

#: What the summary page and every notebook's header cell say about the executed copies.
EXECUTED_COPIES_WARNING = ("Executed copies contain text of the corpus, including identifiers: treat them like the "
                           "corpus (owner-only, never published or attached to a ticket).")


@dataclass
class NotebookRun:
    name: str
    ok: bool
    seconds: float
    error: str = ""
    #: what its executed copy shows that a reader must not meet (:mod:`toolkit.pipelines.notebook_checks`)
    issues: list = field(default_factory=list)

    @property
    def traceback(self) -> bool:
        """True when the executed copy holds a traceback (``make demo`` then fails)."""
        from toolkit.pipelines.notebook_checks import has_traceback

        return has_traceback(self.issues)


#: the longest one cell may run (seconds): notebook 02's one cached run trains and attacks every masked strategy, about
#: 40 min on an idle 2-core machine and well over an hour when the machine is shared (it hit a 1 h limit so)
CELL_TIMEOUT = 4 * 3600


def run_notebook(path: Path, out_dir: Path, parameters: dict[str, Any] | None = None, *,
                 kernel_name: str = "python3", timeout: int | None = CELL_TIMEOUT) -> Path:
    """Execute one notebook with papermill (working directory = the notebook's folder) and export HTML; a cell that
    runs longer than ``timeout`` seconds (None: no limit) fails the notebook."""
    import nbformat
    import papermill as pm
    from nbconvert import HTMLExporter

    make_private_dir(out_dir)
    executed = out_dir / path.name
    from toolkit.plots.widgets import HEADLESS_ENV

    before = os.environ.get(HEADLESS_ENV)
    os.environ[HEADLESS_ENV] = "1"  # the kernel inherits it: its explorers draw their initial view, no live widget
    try:
        pm.execute_notebook(str(path), str(executed), parameters=parameters or {}, kernel_name=kernel_name,
                            cwd=str(path.parent.resolve()), progress_bar=False, execution_timeout=timeout)
    finally:
        if before is None:
            os.environ.pop(HEADLESS_ENV, None)
        else:
            os.environ[HEADLESS_ENV] = before
    body, _ = HTMLExporter().from_notebook_node(nbformat.read(executed, as_version=4))
    atomic_write_text(body, out_dir / f"{path.stem}.html")
    return executed


def read_demo_parameters(path: str | Path) -> dict[str, dict[str, Any]]:
    """A demo's parameters per notebook (``make demo``'s ``notebooks/demo.yaml``): a YAML mapping of notebook names
    (without ``.ipynb``) to mappings of papermill parameters. A :class:`ToolkitError` names the file and the entry
    that is not so."""
    import yaml

    from toolkit.errors import ToolkitError

    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ToolkitError(f"{p}: cannot read the demo's parameters ({type(exc).__name__})") from None
    if not isinstance(data, dict):
        raise ToolkitError(f"{p}: expected a mapping of notebook names to parameters")
    for name, params in data.items():
        if not isinstance(params, dict) or not all(isinstance(k, str) for k in params):
            raise ToolkitError(f"{p}: {name!r}: expected a mapping of parameter names to values")
    return {str(k): dict(v) for k, v in data.items()}


def run_notebooks(notebook_dir: Path, out_dir: Path, *, only: list[str] | None = None, profile: str = "cpu",
                  parameters: dict[str, Any] | None = None,
                  per_notebook: dict[str, dict[str, Any]] | None = None,
                  require_cached: set[str] | frozenset[str] = frozenset()) -> list[NotebookRun]:
    """Run every ``*.ipynb`` in ``notebook_dir`` (sorted; filtered by name prefixes ``only``), owner-only.
    ``parameters`` go to every notebook, ``per_notebook[name]`` to that one (over them); a name of ``per_notebook``
    that is no notebook of the folder is a :class:`ToolkitError` (a typo would silently run the defaults).
    ``require_cached``: notebooks whose kernel runs with
    :data:`~toolkit.pipelines.cache.REQUIRE_CACHED` set (workshop mode: they read shipped results, a step that would
    run fails the notebook)."""
    from toolkit.errors import ToolkitError

    names = {p.stem for p in notebook_dir.glob("*.ipynb")}
    unknown = sorted(set(per_notebook or {}) - names)
    if unknown:
        raise ToolkitError(f"demo parameters for {unknown[0]!r}, which is no notebook of {notebook_dir}")
    with private_umask():  # the executed copies and everything the kernels write hold corpus text
        return _run_notebooks(notebook_dir, out_dir, only=only, profile=profile, parameters=parameters,
                              per_notebook=per_notebook or {}, require_cached=set(require_cached))


def _run_notebooks(notebook_dir: Path, out_dir: Path, *, only: list[str] | None, profile: str,
                   parameters: dict[str, Any] | None, per_notebook: dict[str, dict[str, Any]],
                   require_cached: set[str] = frozenset()) -> list[NotebookRun]:
    import os

    from toolkit.pipelines.cache import REQUIRE_CACHED

    paths = sorted(p for p in notebook_dir.glob("*.ipynb") if not only or any(p.name.startswith(o) for o in only))
    results: list[NotebookRun] = []
    for i, path in enumerate(paths, 1):
        own = per_notebook.get(path.stem, {})
        print(f"[{i}/{len(paths)}] {path.stem} ..." + (f" ({_settings(own)})" if own else ""), flush=True)
        t0 = time.perf_counter()
        before = os.environ.get(REQUIRE_CACHED)
        if path.stem in require_cached:
            os.environ[REQUIRE_CACHED] = "1"  # the kernel inherits it
        try:
            run_notebook(path, out_dir, {"profile": profile, **(parameters or {}), **own})
            results.append(NotebookRun(path.stem, True, time.perf_counter() - t0))
        except Exception as exc:  # noqa: BLE001 — report and go on with the other notebooks
            results.append(NotebookRun(path.stem, False, time.perf_counter() - t0, f"{type(exc).__name__}: {exc}"))
        finally:
            if before is None:
                os.environ.pop(REQUIRE_CACHED, None)
            else:
                os.environ[REQUIRE_CACHED] = before
        r = results[-1]
        r.issues = _output_issues(out_dir / path.name)
        print(f"[{i}/{len(paths)}] {path.stem}: {'done' if r.ok else 'FAILED'} in {r.seconds:.1f} s"
              + (f" — {r.error.splitlines()[0][:200]}" if r.error else ""), flush=True)
        for issue in r.issues:
            print(f"    {issue}", flush=True)
    write_summary(results, out_dir / "index.html", profile=profile, per_notebook=per_notebook)
    total = sum(r.seconds for r in results)
    print(timing_table(results), flush=True)
    print(f"{sum(r.ok for r in results)}/{len(results)} notebooks ran in {total:.1f} s; summary: "
          f"{out_dir / 'index.html'}", flush=True)
    return results


def _output_issues(executed: Path) -> list:
    """The output checks of an executed copy (:func:`~toolkit.pipelines.notebook_checks.check_notebook`); none when
    papermill wrote none (the notebook failed before its first cell)."""
    from toolkit.pipelines.notebook_checks import check_notebook

    return check_notebook(executed) if executed.is_file() else []


def _settings(params: dict[str, Any]) -> str:
    """``n_individuals=12, epochs=[8, 16]``: a notebook's own demo parameters, as one line."""
    return ", ".join(f"{k}={v!r}" for k, v in params.items())


def _clock(seconds: float) -> str:
    m, s = divmod(round(seconds), 60)
    return f"{m // 60}:{m % 60:02d}:{s:02d}" if m >= 60 else f"{m}:{s:02d}"


def _issues_html(issues: list) -> str:
    """The output checks of one notebook as a list for the summary page ("none" when clean)."""
    if not issues:
        return "none"
    return "<ul>" + "".join(f"<li>{html.escape(str(i))}</li>" for i in issues) + "</ul>"


def timing_table(results: list[NotebookRun]) -> str:
    """A plain-text table: one row per notebook (status, seconds, m:ss) and a total row."""
    width = max([len(r.name) for r in results] + [len("notebook"), len("total")])
    rows = [f"{'notebook':<{width}}  status  {'seconds':>9}  {'time':>8}"]
    rows += [f"{r.name:<{width}}  {'ok' if r.ok else 'FAILED':<6}  {r.seconds:>9.1f}  {_clock(r.seconds):>8}"
             for r in results]
    total = sum(r.seconds for r in results)
    ok = f"{sum(r.ok for r in results)}/{len(results)}"
    rows.append(f"{'total':<{width}}  {ok:<6}  {total:>9.1f}  {_clock(total):>8}")
    return "\n".join(rows)


def write_summary(results: list[NotebookRun], path: Path, *, profile: str,
                  per_notebook: dict[str, dict[str, Any]] | None = None) -> None:
    """``index.html``: one row per notebook (status, seconds, the parameters it ran with other than its defaults,
    error, the output checks of its executed copy) under :data:`EXECUTED_COPIES_WARNING`."""
    own = per_notebook or {}
    rows = "".join(
        f"<tr><td><a href='{html.escape(r.name)}.html'>{html.escape(r.name)}</a></td>"
        f"<td>{'ok' if r.ok else 'failed'}</td><td>{r.seconds:.1f}</td>"
        f"<td>{html.escape(_settings(own.get(r.name, {})))}</td><td>{html.escape(r.error[:500])}</td>"
        f"<td>{_issues_html(r.issues)}</td></tr>"
        for r in results)
    atomic_write_text(
        "<!doctype html><meta charset='utf-8'><title>LM anonymity audit — demo run</title>"
        "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto}td,th{padding:.3em .8em;"
        "border-bottom:1px solid #ddd;text-align:left}</style>"
        f"<h1>Demo run (profile: {html.escape(profile)})</h1><p>{time.strftime('%Y-%m-%d %H:%M:%S')}</p>"
        f"<p class='warning' style='background:#fff3cd;border-left:4px solid #c0392b;padding:.6em 1em'>"
        f"<strong>{html.escape(EXECUTED_COPIES_WARNING)}</strong></p>"
        f"<table><tr><th>notebook</th><th>status</th><th>seconds</th><th>parameters (other than the notebook's)</th>"
        f"<th>error</th><th>output checks</th></tr>{rows}</table>"
        "<p>Output checks: tracebacks, library warnings, progress bars left short of their end, log lines, outputs "
        "over the readable length and table columns that are empty in every row, found in each executed copy "
        "(<code>toolkit.pipelines.notebook_checks</code>); a traceback fails <code>make demo</code>.</p>", path)
