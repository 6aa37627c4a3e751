"""The review widget (methods.md §7.4): an ipywidgets view of a :class:`~toolkit.review.store.ReviewSession`.

One candidate at a time (token, name-likeness score and its parts, the sentences that produced it with the token in
place of the mask) or a sortable, filterable table; buttons and keyboard shortcuts

    n  name        x  not a name        u  unsure        z  undo        j / →  next        k / ←  previous

progress, and filters (pending / decided / per decision, minimum score, text). Every click goes straight to the
session, which appends the decision to the review file before the view changes; the view holds no state of its own.
The same widget is the Voilà app (``apps/review.ipynb``, ``make review``).

The reviewer's identity is fixed when the panel is built (the *Reviewer* box is read-only): every decision of a
session is recorded under that one name, in that reviewer's own file (:func:`review_file_for`: one file per exact
name, so ``r smith``, ``r/smith`` and ``r_smith`` never share one).

Keyboard shortcuts come from a small anywidget (:class:`KeyboardShortcuts`) that listens to key presses inside the
review panel (and, in Voilà, anywhere on the page); the panel is marked ``data-lm-suppress-shortcuts`` so that in
JupyterLab ``x`` or ``z`` never reach the notebook's own shortcuts (cut cell, undo cell operation). Key presses in text
boxes are ignored.
"""

from __future__ import annotations

import html
from pathlib import Path

import anywidget
import ipywidgets as W
import pandas as pd
import traitlets

from toolkit.review.session import SORT_KEYS, ReviewSession
from toolkit.review.store import DECISIONS
from toolkit.scrub.sentences import MASK

KEYS = {"n": "name", "x": "not_name", "u": "unsure", "z": "undo", "j": "next", "ArrowRight": "next", "k": "prev",
        "ArrowLeft": "prev"}
COLUMN_NAMES = {"token": "token", "decision": "decision", "score": "score", "n_sentences": "sentences",
                "best_rank": "best rank", "ner_share": "share tagged by NER", "capitalised": "capitalised",
                "common_word": "common word"}
LABELS = {"name": "name", "not_name": "not a name", "unsure": "unsure", None: "pending"}
COLORS = {"name": "#c0392b", "not_name": "#27ae60", "unsure": "#e67e22", None: "#7f8c8d"}


class KeyboardShortcuts(anywidget.AnyWidget):
    """Sends ``{"key": ...}`` to Python for the keys in ``shortcut_keys`` pressed inside the element with class
    ``scope`` (the review panel) inside JupyterLab, or anywhere on the page in Voilà (no Lab shell: the page is the
    app, so a shortcut works before anything was clicked); and ``{"sort": column}`` for a click on a table header
    with a ``data-sort`` attribute."""

    _esm = """
    function render({ model, el }) {
      el.style.display = "none";
      let root = null, target = null;
      const handler = (e) => {
        const t = e.target;
        if (e.ctrlKey || e.metaKey || e.altKey) return;
        if (t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT" || t.isContentEditable))
          return;
        if (!model.get("shortcut_keys").includes(e.key)) return;
        e.preventDefault();
        e.stopPropagation();
        model.send({ key: e.key });
      };
      const attach = () => {
        if (!el.isConnected) { setTimeout(attach, 50); return; }
        root = el.closest("." + model.get("scope"));
        if (root) {
          root.setAttribute("data-lm-suppress-shortcuts", "true");
          if (!root.hasAttribute("tabindex")) root.tabIndex = -1;
        }
        // Voila gives <body> the class jp-Notebook and a Lab-like shell, so neither tells it from JupyterLab; its
        // templates mark <body> with data-base-url ".../voila/" (in Voila the whole page is the app: listen on the
        // document, so a shortcut works before anything was clicked)
        const body = document.body;
        const inVoila = body.hasAttribute("data-voila") || (body.getAttribute("data-base-url") || "").endsWith("voila/");
        const inLab = !inVoila && !!document.querySelector(".jp-LabShell, .jp-NotebookShell, .jp-Notebook");
        target = (inLab && root) ? root : document;
        target.addEventListener("keydown", handler);
        (root || document).addEventListener("click", onHeader);
        document.body.setAttribute("data-review-shortcuts", inLab ? "panel" : "page");  // for tests and styling
        model.set("ready", true);
        model.save_changes();
      };
      const onHeader = (e) => {  // a click on a sortable column header of the table sorts by it
        const th = e.target && e.target.closest && e.target.closest("th[data-sort]");
        if (th) model.send({ sort: th.getAttribute("data-sort") });
      };
      attach();
      return () => {
        if (target) target.removeEventListener("keydown", handler);
        (root || document).removeEventListener("click", onHeader);
      };
    }
    export default { render };
    """
    shortcut_keys = traitlets.List(traitlets.Unicode(), default_value=list(KEYS)).tag(sync=True)
    scope = traitlets.Unicode("toolkit-review").tag(sync=True)
    ready = traitlets.Bool(False).tag(sync=True)


def highlight(sentence: str, token: str) -> str:
    """HTML of a masked sentence with the token in place of the mask, highlighted (everything else escaped)."""
    a, _, b = sentence.partition(MASK)
    return f"{html.escape(a)}<mark><b>{html.escape(token)}</b></mark>{html.escape(b)}"


class ReviewWidget:
    """The review panel. ``ReviewWidget(session).widget`` is the ipywidgets container to display.

    Parameters
    ----------
    session:
        The review state (:class:`ReviewSession`); all logic lives there.
    n_table_rows:
        Rows shown in the table view (the rest are reachable through filters).
    show_title:
        Whether the panel shows its own heading (the Voilà app's page has one already).
    """

    def __init__(self, session: ReviewSession, *, n_table_rows: int = 200, show_title: bool = True):
        self.session = session
        self.show_title = show_title
        self.n_table_rows = n_table_rows
        lay = W.Layout
        self.title = W.HTML()
        self.reviewer = W.Text(value=session.reviewer, description="Reviewer", disabled=True,  # fixed per session
                               layout=lay(width="260px"))
        self.progress_bar = W.IntProgress(min=0, max=max(1, len(session.candidates)), layout=lay(width="240px"))
        self.progress_label = W.HTML()
        self.progress_label.add_class("review-progress")
        self.show = W.Dropdown(options=[("all", "all"), ("pending", "pending"), ("decided", "decided")] +
                               [(LABELS[d], d) for d in DECISIONS], value=session.filter.show, description="Show",
                               layout=lay(width="200px"))
        self.min_score = W.FloatText(value=0.0, description="Min score", step=0.05, layout=lay(width="170px"))
        self.contains = W.Text(value="", description="Contains", layout=lay(width="220px"))
        self.sort_by = W.Dropdown(options=[(COLUMN_NAMES[k], k) for k in SORT_KEYS], value=session.filter.sort_by,
                                  description="Sort by",
                                  layout=lay(width="200px"))
        self.descending = W.Checkbox(value=not session.filter.ascending, description="descending", indent=False,
                                     layout=lay(width="110px"))
        self.token = W.HTML()
        self.token.add_class("review-token")
        self.details = W.HTML()
        self.details.add_class("review-decision")
        self.examples = W.HTML()
        self.buttons = {}
        for key, (desc, style, cls) in {
            "name": ("Name [n]", "danger", "review-name"), "not_name": ("Not a name [x]", "success", "review-not-name"),
            "unsure": ("Unsure [u]", "warning", "review-unsure"), "undo": ("Undo [z]", "", "review-undo"),
            "prev": ("◀ Previous [k]", "", "review-prev"), "next": ("Next [j] ▶", "", "review-next"),
        }.items():
            b = W.Button(description=desc, button_style=style, layout=lay(width="auto"))
            b.add_class(cls)
            b.on_click(lambda _b, k=key: self.act(k))
            self.buttons[key] = b
        self.status = W.HTML()
        self.status.add_class("review-status")
        self.jump = W.Select(options=[], rows=12, layout=lay(width="100%"))
        self.table = W.HTML()
        self.table.add_class("review-table")
        self.keyboard = KeyboardShortcuts()
        self.keyboard.on_msg(self._on_key)
        hint = W.HTML("<small>Keys: <b>n</b> name · <b>x</b> not a name · <b>u</b> unsure · <b>z</b> undo · "
                      "<b>j</b>/<b>→</b> next · <b>k</b>/<b>←</b> previous (click the panel first in JupyterLab). "
                      "Every decision is saved to the review file at once.</small>")
        card = W.VBox([self.token, self.details, self.examples,
                       W.HBox([self.buttons[k] for k in ("name", "not_name", "unsure", "undo")]),
                       W.HBox([self.buttons["prev"], self.buttons["next"]]), hint])
        listing = W.VBox([W.HTML("<small>Click a row to review that token.</small>"), self.jump, self.table])
        self.tabs = W.Tab(children=[card, listing])
        self.tabs.set_title(0, "One at a time")
        self.tabs.set_title(1, "Table")
        self.widget = W.VBox([
            self.title, W.HBox([self.reviewer, self.progress_bar, self.progress_label]),
            W.HBox([self.show, self.min_score, self.contains]), W.HBox([self.sort_by, self.descending]),
            self.tabs, self.status, self.keyboard])
        self.widget.add_class("toolkit-review")
        self._updating = False
        for w in (self.show, self.min_score, self.contains, self.sort_by, self.descending):
            w.observe(self._on_filter, names="value")
        self.jump.observe(self._on_jump, names="value")
        self.refresh()

    # ---- events ----------------------------------------------------------------------------------------------------
    def act(self, action: str) -> None:
        """Apply a button / key action: a decision, ``undo``, ``next`` or ``prev``."""
        s = self.session
        try:
            if action in DECISIONS:
                tok = s.current
                if tok is None:
                    self.status.value = "Nothing to decide under this filter."
                    return
                s.decide(action)
                self.status.value = (f"Saved: <b>{html.escape(tok)}</b> → {LABELS[action]} "
                                     f"({html.escape(s.path.name)})")
            elif action == "undo":
                rec = s.undo()
                self.status.value = ("Nothing to undo." if rec is None else
                                     f"Undone: {html.escape(rec['token'])} ({LABELS[rec['decision']]})")
            elif action == "next":
                s.next()
            elif action == "prev":
                s.prev()
        except Exception as exc:  # noqa: BLE001 - show the problem in the panel instead of a traceback
            self.status.value = f"<span style='color:#c0392b'>{html.escape(str(exc))}</span>"
        self.refresh()

    def _on_key(self, _widget, content, _buffers) -> None:
        if not isinstance(content, dict):
            return
        if content.get("sort") in SORT_KEYS:
            self.sort_table(content["sort"])
            return
        action = KEYS.get(content.get("key"))
        if action:
            self.act(action)

    def sort_table(self, column: str) -> None:
        """A click on a column header: sort by it (descending for numbers, A→Z for tokens); a second click on the
        same column reverses the order."""
        if column == self.sort_by.value:
            self.descending.value = not self.descending.value  # one refresh through _on_filter
            return
        self._updating = True
        try:
            self.sort_by.value = column
            self.descending.value = column != "token"
        finally:
            self._updating = False
        self._on_filter(None)

    def _on_filter(self, _change) -> None:
        if self._updating:
            return
        self.session.set_filter(show=self.show.value, min_score=float(self.min_score.value or 0.0),
                                contains=self.contains.value.strip(), sort_by=self.sort_by.value,
                                ascending=not self.descending.value)
        self.refresh()

    def _on_jump(self, change) -> None:
        if self._updating or not change["new"]:
            return
        self.session.goto(change["new"])
        self.tabs.selected_index = 0
        self.refresh()

    # ---- view ------------------------------------------------------------------------------------------------------
    def refresh(self) -> None:
        """Redraw everything from the session."""
        s = self.session
        self._updating = True
        try:
            p = s.progress()
            heading = "<h3 style='margin:4px 0'>Vocabulary review — is this token a name?</h3>" if self.show_title else ""
            self.title.value = heading + f"<small>review file: {html.escape(str(s.path))}</small>"
            self.progress_bar.max = max(1, p["n_total"])
            self.progress_bar.value = p["n_decided"]
            self.progress_label.value = (f"<span class='review-count'>{p['n_decided']} / {p['n_total']} decided"
                                         f"</span> (name {p['name']}, not a name {p['not_name']}, unsure "
                                         f"{p['unsure']})")
            row = s.current_row()
            if row is None:
                self.token.value = "<p>No candidate under this filter.</p>"
                self.details.value = ""
                self.examples.value = ""
            else:
                tok = str(row["token"])
                dec = s.decision(tok)
                self.token.value = (f"<div style='font-size:2em;font-family:monospace;margin:6px 0'>"
                                    f"{html.escape(tok)}</div>")
                parts = [f"position {s.position + 1} of {len(s.order)}", f"score {float(row['score']):.2f}"]
                for col, name in (("ner_share", "NER says PERSON"), ("capitalised", "capitalised"),
                                  ("common_word", "common word"), ("n_sentences", "sentences"),
                                  ("best_rank", "best rank")):
                    if col in row.index and pd.notna(row[col]):
                        v = row[col]
                        parts.append(f"{name}: {v:.2f}" if isinstance(v, float) else f"{name}: {v}")
                self.details.value = (f"<div>decision: <b class='review-current-decision' style='color:"
                                      f"{COLORS[dec]}'>{LABELS[dec]}</b> · {' · '.join(parts)}</div>")
                exs = list(row["examples"]) if "examples" in row.index and row["examples"] is not None else []
                self.examples.value = ("<ol style='margin:4px 0'>" +
                                       "".join(f"<li>{highlight(str(e), tok)}</li>" for e in exs) + "</ol>"
                                       if exs else "")
            order = s.order
            self.jump.options = [(f"{t}  ·  {LABELS[s.decision(t)]}", t) for t in order]
            self.jump.value = s.current if s.current in order else None
            self.table.value = self._table_html()
        finally:
            self._updating = False

    def _table_html(self) -> str:
        t = self.session.table().head(self.n_table_rows)
        cols = [c for c in ("token", "decision", "score", "n_sentences", "best_rank", "ner_share", "capitalised",
                            "common_word") if c in t.columns]
        f = self.session.filter
        head = ""
        for c in cols:
            arrow = (" ▲" if f.ascending else " ▼") if c == f.sort_by else ""
            sort = (f" data-sort='{c}' title='sort by {COLUMN_NAMES[c]}' style='cursor:pointer;text-decoration:underline "
                    f"dotted'") if c in SORT_KEYS else ""
            head += f"<th{sort}>{html.escape(COLUMN_NAMES[c])}{arrow}</th>"
        body = []
        for _, r in t.iterrows():
            cells = []
            for c in cols:
                v = r[c]
                if c == "decision":
                    d = v if isinstance(v, str) else None
                    v = f"<span class='review-row-decision' style='color:{COLORS[d]}'>{LABELS[d]}</span>"
                elif isinstance(v, float):
                    v = f"{v:.2f}"
                else:
                    v = html.escape(str(v))
                cells.append(f"<td>{v}</td>")
            body.append(f"<tr data-token='{html.escape(str(r['token']), quote=True)}'>{''.join(cells)}</tr>")
        return ("<table style='border-collapse:collapse;font-size:0.9em'><thead><tr>" + head + "</tr></thead><tbody>"
                + "".join(body) + "</tbody></table>")


def review_widget(candidates: pd.DataFrame | str | Path, review_file: str | Path, reviewer: str,
                  **kw) -> ReviewWidget:
    """Build a :class:`ReviewWidget` from a candidate table (frame or Parquet path) and a review file (``kw``: the
    widget's options)."""
    from toolkit.scrub.candidates import load_candidates

    cand = load_candidates(candidates) if isinstance(candidates, (str, Path)) else candidates
    return ReviewWidget(ReviewSession(cand, review_file, reviewer), **kw)


def review_file_for(candidates: str | Path, reviewer: str) -> Path:
    """The review file of ``reviewer`` beside ``candidates``: ``review-<readable>-<digest>.jsonl``.

    ``<readable>`` is the name with every run of characters other than ASCII letters, digits, ``.`` and ``-`` made
    ``_`` (at most 40 characters, for people listing the folder); ``<digest>`` is the first 12 hex digits of the
    SHA-256 of the exact (stripped) name, so distinct names never share a file even when they read alike.
    """
    import hashlib
    import re

    name = str(reviewer).strip()
    readable = re.sub(r"[^A-Za-z0-9.-]+", "_", name)[:40].strip("._") or "reviewer"
    return Path(candidates).with_name(f"review-{readable}-{hashlib.sha256(name.encode('utf-8')).hexdigest()[:12]}.jsonl")


def _app_reviewer(env) -> str:
    """The session's reviewer: ``REVIEWER`` when the app was started for one (the page address may not change it),
    else ``?reviewer=`` of the page address (default ``reviewer``)."""
    from urllib.parse import parse_qs

    from toolkit.errors import ToolkitError

    fixed = (env.get("REVIEWER") or "").strip()
    asked = (parse_qs(env.get("QUERY_STRING", "")).get("reviewer") or [""])[0].strip()
    if fixed and asked and asked != fixed:
        raise ToolkitError("this review app was started for one reviewer; the page address names another: start "
                           "your own app (python -m toolkit review CANDIDATES --reviewer NAME)")
    return fixed or asked or "reviewer"


def review_app(environ=None):
    """The Voilà app's content (``apps/review.ipynb``, ``python -m toolkit review``), configured by environment
    variables:

    * ``REVIEW_CANDIDATES`` — the candidate table (default: notebook 05's
      ``outputs/work/05_vocabulary_scrubbing/candidates.parquet``);
    * ``REVIEWER`` — the reviewer the app was started for (then fixed), else the name from the page address
      (``…?reviewer=alice``, Voilà passes it as ``QUERY_STRING``), default ``reviewer``;
    * ``REVIEW_FILE`` — the review file; default :func:`review_file_for` the reviewer, beside the candidates. A file
      that already holds another reviewer's decisions is refused.

    Returns the widget to display, or an HTML message when the candidate table is missing or unreadable.
    """
    import os

    from toolkit.errors import ToolkitError
    from toolkit.review.store import read_review

    env = os.environ if environ is None else environ
    default = Path(__file__).resolve().parents[2] / "outputs" / "work" / "05_vocabulary_scrubbing" / "candidates.parquet"
    cand_path = Path(env.get("REVIEW_CANDIDATES") or default)
    try:
        reviewer = _app_reviewer(env)
        review_file = Path(env.get("REVIEW_FILE") or review_file_for(cand_path, reviewer))
        others = {r["reviewer"] for r in read_review(review_file)} - {reviewer} if review_file.is_file() else set()
        if others:
            raise ToolkitError(f"{review_file}: holds the decisions of {len(others)} other reviewer(s); one file "
                               "holds one reviewer's decisions (unset REVIEW_FILE to get your own)")
        return review_widget(cand_path, review_file, reviewer, show_title=False).widget  # the page has the title
    except ToolkitError as exc:
        hint = ("" if cand_path.is_file() else
                "<p>Create the candidates with notebook <code>05_vocabulary_scrubbing</code> (or "
                "<code>python -m toolkit candidates</code>), then stop this app and start it again with the "
                "table: <code>python -m toolkit review CANDIDATES --reviewer NAME</code> (the table is chosen when "
                "the app starts; reloading this page does not change it).</p>")
        return W.HTML(f"<p style='color:#c0392b'>{html.escape(str(exc))}</p>{hint}")


__all__ = ["KEYS", "KeyboardShortcuts", "ReviewWidget", "highlight", "review_app", "review_file_for",
           "review_widget"]
