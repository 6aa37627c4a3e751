"""What a reader of an executed notebook must not meet, found in its saved outputs (``toolkit demo``'s summary page).

:func:`check_notebook` reads one executed ``.ipynb`` (what papermill wrote) and returns one :class:`OutputIssue` per
problem, with the cell it is in:

* ``traceback``: an error output, or a traceback printed to a stream (``make demo`` fails on one: the exit status is
  non-zero even where the notebook caught the exception and went on);
* ``warning``: a library warning printed to stderr (``UserWarning: …``, ``WARNING …``);
* ``progress``: a progress bar frozen short of its end — a saved tqdm text below 100%, a progress widget whose saved
  value is below its maximum and still shown, an HTML ``<progress>`` below its maximum;
* ``log``: a log line in the outputs (the pipelines' ``[run] step: …`` lines, ``logging``'s ``INFO:name:…`` or
  time-stamped lines);
* ``long output``: a table or text output longer than :data:`MAX_OUTPUT_CHARS` visible characters (markup not
  counted; figures and images are not text outputs);
* ``empty column``: a column of an HTML table (a displayed data frame) whose every cell is NaN / None / empty, or
  always ``n/r`` (a figure that could never be measured at this size).

Nothing of a cell's text is copied into a finding beyond a warning's or log line's first
:data:`QUOTE_CHARS` characters (library messages, not the corpus; an exception's message is left out: it may quote
data) — the summary page sits beside executed copies that do hold corpus text, but it is the page one shares.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

#: longest text output (visible characters: HTML tags removed, white space collapsed) a notebook may show in one cell
MAX_OUTPUT_CHARS = 6000
#: how much of a warning or log line a finding quotes
QUOTE_CHARS = 120
#: the issue kinds, in the order the summary page lists them
KINDS = ("traceback", "warning", "progress", "log", "long output", "empty column")

_WARNING = re.compile(r"(?:^|\s)([A-Z]\w*Warning):|^WARNING\b|^\[\w+\] WARNING\b", re.M)
_TRACEBACK = re.compile(r"^Traceback \(most recent call last\):", re.M)
_LOG = re.compile(r"^(?:\[run\] |(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):[\w.]+:|"
                  r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?\s+(?:-\s+)?(?:\S+\s+-\s+)?"
                  r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\b)", re.M)
_TQDM = re.compile(r"(\d{1,3})%\|")
_HTML_PROGRESS = re.compile(r"<progress\s[^>]*?value=['\"]?([\d.]+)['\"]?[^>]*?max=['\"]?([\d.]+)", re.I)
_EMPTY = {"", "nan", "none", "<na>", "nat", "null"}
_FIGURE_TYPES = ("application/vnd.plotly.v1+json", "image/png", "image/jpeg", "image/svg+xml",
                 "application/vnd.jupyter.widget-view+json")


@dataclass(frozen=True)
class OutputIssue:
    """One problem of an executed notebook's outputs: its ``kind`` (:data:`KINDS`), the code cell (counted from 1
    among the notebook's code cells) and what it is, in a line."""

    kind: str
    cell: int
    detail: str

    def __str__(self) -> str:
        return f"cell {self.cell}: {self.kind}: {self.detail}"


def check_notebook(path: str | Path) -> list[OutputIssue]:
    """Every :class:`OutputIssue` of the executed notebook ``path``, in cell order."""
    import nbformat

    nb = nbformat.read(str(path), as_version=4)
    return check_node(nb)


def check_node(nb) -> list[OutputIssue]:
    """:func:`check_notebook` of a notebook already read (an ``nbformat`` node)."""
    shown = _shown_progress_widgets(nb)
    issues: list[OutputIssue] = []
    code = [c for c in nb.cells if c.cell_type == "code"]
    for n, cell in enumerate(code, 1):
        for out in cell.get("outputs", []):
            issues += [OutputIssue(kind, n, detail) for kind, detail in _output_issues(out, shown)]
    return issues


def has_traceback(issues: list[OutputIssue]) -> bool:
    """True when one of ``issues`` is a traceback (``make demo`` then exits non-zero)."""
    return any(i.kind == "traceback" for i in issues)


def _quote(line: str) -> str:
    line = " ".join(line.split())
    return line if len(line) <= QUOTE_CHARS else line[:QUOTE_CHARS - 1] + "…"


def _output_issues(out, shown: dict[str, bool]):
    kind = out.get("output_type")
    if kind == "error":
        yield "traceback", f"{out.get('ename', 'error')} raised"
        return
    if kind == "stream":
        text = out.get("text", "")
        text = "".join(text) if isinstance(text, list) else text
        if _TRACEBACK.search(text):
            yield "traceback", f"a traceback printed to {out.get('name', 'a stream')}"
        lines = text.splitlines()
        logs = [ln for ln in lines if _LOG.match(ln)]
        if logs:
            yield "log", f"{len(logs)} log line{'s' * (len(logs) > 1)}, first: {_quote(logs[0])}"
        if out.get("name") == "stderr":
            for ln in lines:
                if _WARNING.search(ln) and not _LOG.match(ln):
                    yield "warning", _quote(ln)
        for m in _TQDM.finditer(text.replace("\r", "\n").splitlines()[-1] if text.strip() else ""):
            if int(m.group(1)) < 100:
                yield "progress", f"a text progress bar left at {m.group(1)}%"
        return
    if kind not in ("display_data", "execute_result"):
        return
    data = out.get("data", {})
    widget = data.get("application/vnd.jupyter.widget-view+json")
    if widget is not None:
        frozen = shown.get(widget.get("model_id", ""))
        plain = str(data.get("text/plain", ""))
        m = _TQDM.search(plain)
        if frozen or (frozen is None and m and int(m.group(1)) < 100):
            yield "progress", f"a progress bar left at {m.group(1) + '%' if m else 'less than its total'}"
        return
    html_text = str(data.get("text/html", ""))
    for m in _HTML_PROGRESS.finditer(html_text):
        if float(m.group(1)) < float(m.group(2)):
            yield "progress", f"an HTML progress bar left at {m.group(1)} of {m.group(2)}"
    plain = str(data.get("text/plain", ""))
    m = _TQDM.search(plain)
    if not html_text and m and int(m.group(1)) < 100:
        yield "progress", f"a progress bar left at {m.group(1)}%"
    if any(t in data for t in _FIGURE_TYPES) or "<script" in html_text:
        return
    text = data.get("text/markdown") or html_text or plain
    visible = _visible(text) if (html_text and text == html_text) else " ".join(str(text).split())
    if len(visible) > MAX_OUTPUT_CHARS:
        what = "table" if "<table" in html_text else "output"
        yield "long output", f"a {what} of {len(visible):,} characters (over {MAX_OUTPUT_CHARS:,})"
    if "<table" in html_text:
        for name, what in _empty_columns(html_text):
            yield "empty column", f"column {name!r} is {what} in every row"


def _shown_progress_widgets(nb) -> dict[str, bool]:
    """``model_id → frozen`` for each output box of a progress widget in the saved widget state: frozen when the
    progress model's value is below its maximum and the box is not hidden (its layout ``display: none`` or
    ``visibility: hidden``)."""
    state = ((nb.metadata.get("widgets") or {}).get("application/vnd.jupyter.widget-state+json") or {}).get("state")
    if not state:
        return {}

    def ref(v):
        return v[len("IPY_MODEL_"):] if isinstance(v, str) and v.startswith("IPY_MODEL_") else None

    def hidden(model):
        layout = state.get(ref(model.get("state", {}).get("layout")) or "", {}).get("state", {})
        return layout.get("display") == "none" or layout.get("visibility") == "hidden"

    out = {}
    for model_id, model in state.items():
        children = [state.get(ref(c) or "", {}) for c in model.get("state", {}).get("children", []) or []]
        bars = [c for c in children if c.get("model_name") in ("FloatProgressModel", "IntProgressModel")]
        if not bars:
            continue
        s = bars[0].get("state", {})
        value, top = s.get("value"), s.get("max")
        short = value is not None and top is not None and float(value) < float(top)
        out[model_id] = short and not hidden(model)
    return out


def _visible(html_text: str) -> str:
    return " ".join(re.sub(r"<style.*?</style>|<[^>]+>", " ", html_text, flags=re.S).split())


class _Tables(HTMLParser):
    """The header row and body rows of every ``<table>`` of an HTML fragment: ``[(header cells, [row cells])]``,
    a body row's cells being its ``<td>`` only (a data frame's index cells are ``<th>``)."""

    def __init__(self):
        super().__init__()
        self.tables: list[tuple[list[str], list[list[str]]]] = []
        self._cell: list[str] | None = None
        self._row: list[tuple[str, str]] | None = None
        self._in_head = False

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append(([], []))
        elif tag == "thead":
            self._in_head = True
        elif tag == "tr" and self.tables:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = [tag]

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append((self._cell[0], " ".join("".join(self._cell[1:]).split())))
            self._cell = None
        elif tag == "tr" and self._row is not None and self.tables:
            header, rows = self.tables[-1]
            tds = [text for kind, text in self._row if kind == "td"]
            if self._in_head or not tds:  # a header row: the one naming most columns (a data frame's second
                named = [text for _, text in self._row]  # header row names only its index)
                if sum(map(bool, named)) >= sum(map(bool, header)):
                    header[:] = named
            else:
                rows.append(tds)
            self._row = None
        elif tag == "thead":
            self._in_head = False

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def _empty_columns(html_text: str):
    parser = _Tables()
    parser.feed(html_text)
    for header, rows in parser.tables:
        width = max((len(r) for r in rows), default=0)
        if not rows or any(len(r) != width for r in rows):
            continue
        names = header[-width:] if len(header) >= width else [f"#{i + 1}" for i in range(width)]
        for i in range(width):
            cells = [r[i].strip().lower() for r in rows]
            if all(c in _EMPTY for c in cells):
                yield names[i] or f"#{i + 1}", "empty (NaN)"
            elif all(c == "n/r" for c in cells):
                yield names[i] or f"#{i + 1}", "n/r"


__all__ = ["KINDS", "MAX_OUTPUT_CHARS", "OutputIssue", "QUOTE_CHARS", "check_node", "check_notebook",
           "has_traceback"]
