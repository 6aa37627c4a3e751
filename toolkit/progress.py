"""Progress bars of every heavy step: labelled, with an ETA, and quiet in log files.

One function, :func:`progress_bar`, wraps tqdm the way every step needs it:

* in a terminal, an updating bar (``tqdm``) with the label, count, rate and ETA;
* in a notebook kernel, tqdm's widget bar (``tqdm.notebook``) that, when closed, shows its final count and is then
  hidden (:class:`_NotebookBar`): nbclient (papermill, ``make demo``) saves the last state of every widget in the
  executed copy, and tqdm's own close left the text of its last refresh there (``99%``, ``0%`` when the loop ran
  within one refresh interval) beside a full bar;
* anywhere else (a log file, CI, a pipe), one plain line every ``interval`` seconds (default 30) and one at the end,
  each ending with a newline — never a stream of carriage-return updates (an exact masked audit once wrote ~850 bar
  states, ~100 KB, as one line of its log).

The label says *what* is being computed ("membership PLL · mlm epoch 64"), not only which model: the same model is
scored for membership, PII inference, memorisation and canaries, and the bars must be told apart.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable

__all__ = ["LOG_INTERVAL", "progress_bar", "stream_kind"]

#: seconds between two lines of a bar written to a log file (not a terminal, not a notebook)
LOG_INTERVAL = 30.0


def stream_kind(file=None) -> str:
    """``"notebook"`` inside an IPython kernel, ``"terminal"`` when ``file`` (default stderr) is a TTY, else
    ``"log"``. ``TOOLKIT_PROGRESS=log|terminal|notebook`` overrides the detection (tests, CI)."""
    forced = os.environ.get("TOOLKIT_PROGRESS")
    if forced in ("log", "terminal", "notebook"):
        return forced
    if "ipykernel" in sys.modules:
        try:
            from IPython import get_ipython

            shell = get_ipython()
            if shell is not None and shell.__class__.__name__ == "ZMQInteractiveShell":
                return "notebook"
        except ImportError:  # pragma: no cover - ipykernel without IPython cannot happen
            pass
    f = file if file is not None else sys.stderr
    try:
        return "terminal" if f.isatty() else "log"
    except (AttributeError, ValueError):
        return "log"


class _LineWriter:
    """File-like object for tqdm in a log: each refresh becomes one line (the carriage return dropped)."""

    def __init__(self, file):
        self._file = file

    def write(self, s: str) -> int:
        s = s.replace("\r", "").replace("\x1b[A", "").strip()
        if s:
            self._file.write(s + "\n")
        return len(s)

    def flush(self) -> None:
        try:
            self._file.flush()
        except (AttributeError, ValueError):
            pass


_NOTEBOOK_BAR = None


def _notebook_bar():
    """The class :class:`_NotebookBar` (built on first use: ``tqdm.notebook`` imports ipywidgets)."""
    global _NOTEBOOK_BAR
    if _NOTEBOOK_BAR is None:
        from tqdm.notebook import tqdm as tqdm_notebook

        class _NotebookBar(tqdm_notebook):
            """tqdm's widget bar, displayed under a display id, whose ``close`` renders the final count (``100%``
            after a finished loop) and replaces the cell's output by it — or, unless ``leave``, by nothing. tqdm's own
            close (leave=False) sets the bar's value but not its text, and the output's plain-text copy (what a
            viewer without the widget's JavaScript shows, and the HTML export offline) stays that of the first
            display: an executed copy kept ``spaCy NER: 99%`` (notebook 01) and ``0%`` (05) forever."""

            def __init__(self, *args, **kwargs):
                self._handle = None
                delayed = kwargs.get("delay", 0) > 0
                super().__init__(*args, **{**kwargs, "display": False})
                if not self.disable and not delayed:
                    from IPython.display import display

                    self._handle = display(self.container, display_id=True)
                    self.displayed = True

            def close(self):
                if self.disable or getattr(self, "_toolkit_closed", False):
                    return super().close()
                self._toolkit_closed = True
                try:
                    super().close()
                    self.disp(check_delay=False)  # the text of the final count, not of the last refresh
                finally:
                    if self._handle is not None:
                        try:
                            if self.leave or (self.total and self.n < self.total):  # kept: finished, or stopped early
                                self._handle.update(self.container)
                            else:
                                self._handle.update({"text/plain": ""}, raw=True)
                        except Exception:  # noqa: BLE001 — a bar must never fail the computation it reports
                            pass

        _NOTEBOOK_BAR = _NotebookBar
    return _NOTEBOOK_BAR


def progress_bar(iterable: Iterable | None = None, *, total: int | None = None, desc: str, unit: str = "it",
                 enabled: bool = True, interval: float = LOG_INTERVAL, file=None, leave: bool = False, **kwargs):
    """A tqdm bar labelled ``desc`` (see the module docstring); ``enabled=False`` returns a disabled bar (the same
    object API: ``update``, ``close``, ``set_postfix``, iteration, context manager)."""
    kind = stream_kind(file)
    if kind == "notebook":
        return _notebook_bar()(iterable, total=total, desc=desc, unit=unit, disable=not enabled, leave=leave,
                               **kwargs)
    from tqdm import tqdm

    if kind == "terminal":
        return tqdm(iterable, total=total, desc=desc, unit=unit, disable=not enabled, leave=leave, file=file,
                    dynamic_ncols=True, **kwargs)
    out = _LineWriter(file if file is not None else sys.stderr)
    # one line at most every `interval` seconds (miniters=1 lets the time decide), and the final state on close
    return tqdm(iterable, total=total, desc=desc, unit=unit, disable=not enabled, leave=True, file=out,
                mininterval=interval, maxinterval=interval, miniters=1, ascii=True, ncols=100, **kwargs)
