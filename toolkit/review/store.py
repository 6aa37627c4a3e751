"""Manual name review (SPEC §7.4, paper 003 §4.3): an append-only review file and the review state.

**Review file** (JSON Lines, one decision per line, UTF-8)::

    {"format_version": 1, "token": "okafor", "decision": "name", "reviewer": "alice",
     "timestamp": "2025-01-31T10:02:03.123456+00:00", "context": "seen by nurse <mask>.", "score": 0.41,
     "session": "9f2c0a41d3e7"}

* ``decision``: ``name`` | ``not_name`` | ``unsure`` | ``undo`` (``undo`` withdraws the latest still-standing decision
  on ``token``: the one before it, if any, stands again);
* ``context``: one sentence that produced the candidate, with ``<mask>`` where the token was predicted (the name itself
  is only in ``token``); ``score``: the candidate's name-likeness score when decided; ``session``: a random id per
  review session (a browser tab, a notebook run).

Every decision is written at once — ``write`` + ``flush`` + ``fsync`` of one whole line in append mode
(:meth:`ReviewStore.append`) — so a crash, a killed kernel or a closed tab loses nothing that was acknowledged, and the
next session replays the file and resumes. A crash in the middle of a write can leave a last line without its newline:
it was never acknowledged, so readers skip it with a :class:`ReviewFileWarning` and the next append cuts it off. A
damaged line anywhere else, or a line of a **newer** ``format_version`` than this toolkit writes, is a
:class:`~toolkit.errors.ToolkitError` naming the file and line (never silently skipped).

One file holds one review (one reviewer, possibly over several sessions). Two reviewers write two files;
:func:`compare_reviews` gives their agreement, Cohen's kappa (scikit-learn) and conflicts, :func:`merge_reviews` the
combined decision per token (policy ``any``: a name for one reviewer is a name — the privacy-safe default).

:class:`ReviewSession` is the whole review state (navigation, filters, sorting, progress, decide / undo) as a plain
class; the ipywidgets view (:mod:`toolkit.review.widget`) and the Voilà app only display it.
"""

from __future__ import annotations

import json
import os
import uuid
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from toolkit.errors import ToolkitError
from toolkit.io import make_private_dir

FORMAT_VERSION = 1
DECISIONS = ("name", "not_name", "unsure")
UNDO = "undo"
REQUIRED_FIELDS = ("format_version", "token", "decision", "reviewer", "timestamp")
RECORD_FIELDS = ("format_version", "token", "decision", "reviewer", "timestamp", "context", "score", "session")
SHOW = ("all", "pending", "decided") + DECISIONS
SORT_KEYS = ("score", "n_sentences", "best_rank", "token")


class ReviewFileWarning(UserWarning):
    """A review file was read, but an unfinished last line (a write cut by a crash) was skipped."""


def _fail(path: Path, line: int, msg: str) -> ToolkitError:
    return ToolkitError(f"{path}, line {line}: {msg}")


def _check_record(rec: Any, path: Path, line: int) -> dict:
    if not isinstance(rec, dict):
        raise _fail(path, line, f"expected a JSON object, got {type(rec).__name__}")
    version = rec.get("format_version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise _fail(path, line, f"missing or non-integer 'format_version' ({version!r}); not a review file?")
    if version > FORMAT_VERSION:
        raise _fail(path, line, f"review file format version {version} is newer than this toolkit's "
                                f"({FORMAT_VERSION}); upgrade the toolkit to read it (nothing was changed)")
    if version < 1:
        raise _fail(path, line, f"invalid format_version {version}")
    missing = [f for f in REQUIRED_FIELDS if f not in rec]
    if missing:
        raise _fail(path, line, f"missing field(s) {missing}")
    if not isinstance(rec["token"], str) or not rec["token"]:
        raise _fail(path, line, f"'token' must be a non-empty string, got {rec['token']!r}")
    if rec["decision"] not in DECISIONS + (UNDO,):
        raise _fail(path, line, f"unknown decision {rec['decision']!r}; expected one of {DECISIONS + (UNDO,)}")
    return rec


def read_review(path: str | Path) -> list[dict]:
    """All records of a review file, in order (a missing file is an empty review). See the module docstring."""
    p = Path(path)
    if not p.exists():
        return []
    data = p.read_bytes()
    lines = data.split(b"\n")
    tail = lines.pop()  # b"" when the file ends with a newline
    out = []
    for i, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise _fail(p, i, f"not a JSON record ({exc}); the file is damaged — fix or remove this line") from None
        out.append(_check_record(rec, p, i))
    if tail.strip():
        try:
            rec = json.loads(tail.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            warnings.warn(f"{p}, line {len(lines) + 1}: unfinished last line (a write interrupted by a crash) "
                          f"skipped; it was never acknowledged", ReviewFileWarning, stacklevel=2)
        else:
            out.append(_check_record(rec, p, len(lines) + 1))
    return out


class ReviewStore:
    """Append-only access to one review file (crash-safe, see the module docstring)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._checked = False

    def records(self) -> list[dict]:
        return read_review(self.path)

    def _prepare(self) -> None:
        """Before the first append: create the file (0600) and cut an unfinished last line left by a crash."""
        if self._checked:
            return
        make_private_dir(self.path.parent)
        if not self.path.exists():
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.close(fd)
            dfd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dfd)  # the new directory entry survives a crash too
            finally:
                os.close(dfd)
        else:
            read_review(self.path)  # refuse to append to a damaged file or one of a newer format
            with open(self.path, "rb+") as fh:
                data = fh.read()
                if data and not data.endswith(b"\n"):
                    cut = data.rfind(b"\n") + 1
                    try:
                        json.loads(data[cut:].decode("utf-8"))
                        fh.seek(0, os.SEEK_END)
                        fh.write(b"\n")  # a complete record that only lost its newline: keep it
                    except (UnicodeDecodeError, json.JSONDecodeError):
                        fh.truncate(cut)
                    fh.flush()
                    os.fsync(fh.fileno())
        self._checked = True

    def append(self, record: dict) -> dict:
        """Validate ``record`` and append it as one line, flushed and fsynced before returning."""
        rec = {"format_version": FORMAT_VERSION, **record}
        _check_record(rec, self.path, 0)
        line = (json.dumps(rec, ensure_ascii=False) + "\n").encode("utf-8")
        self._prepare()
        with open(self.path, "ab") as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())
        return rec


def replay(records: Iterable[dict]) -> tuple[dict[str, dict], list[dict]]:
    """Current decision per token and the standing decisions in order, after applying every ``undo``."""
    stacks: dict[str, list[dict]] = {}
    standing: list[dict] = []
    for rec in records:
        tok = rec["token"]
        if rec["decision"] == UNDO:
            stack = stacks.get(tok)
            if stack:
                gone = stack.pop()
                for j in range(len(standing) - 1, -1, -1):
                    if standing[j] is gone:
                        del standing[j]
                        break
        else:
            stacks.setdefault(tok, []).append(rec)
            standing.append(rec)
    return {t: s[-1] for t, s in stacks.items() if s}, standing


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def load_decisions(path: str | Path, *, reviewer: str | None = None) -> pd.DataFrame:
    """Current decisions of a review file (after undos): token, decision, reviewer, timestamp, context, score."""
    recs = read_review(path)
    if reviewer is not None:
        recs = [r for r in recs if r["reviewer"] == reviewer]
    current, _ = replay(recs)
    cols = ["token", "decision", "reviewer", "timestamp", "context", "score"]
    return pd.DataFrame([{c: r.get(c) for c in cols} for r in current.values()], columns=cols)


@dataclass
class ReviewFilter:
    """What the review shows: ``show`` (all, pending, decided, name, not_name, unsure), a minimum score, a substring,
    and the sort order."""

    show: str = "all"
    min_score: float | None = None
    contains: str = ""
    sort_by: str = "score"
    ascending: bool = False

    def __post_init__(self) -> None:
        if self.show not in SHOW:
            raise ToolkitError(f"show must be one of {SHOW}, got {self.show!r}")
        if self.sort_by not in SORT_KEYS:
            raise ToolkitError(f"sort_by must be one of {SORT_KEYS}, got {self.sort_by!r}")


class ReviewSession:
    """The state of one review session over a candidate table, persisted in a review file.

    Parameters
    ----------
    candidates:
        Candidate table (:func:`~toolkit.scrub.candidates.rank_candidates`): ``token`` (unique) and optionally
        ``score``, ``n_sentences``, ``best_rank``, ``examples``.
    path:
        The review file; existing decisions are replayed, so a new session resumes where the last one stopped.
    reviewer:
        Name written with every decision.
    """

    def __init__(self, candidates: pd.DataFrame, path: str | Path, reviewer: str, *, session: str | None = None):
        if "token" not in candidates.columns:
            raise ToolkitError("the candidate table has no 'token' column")
        if candidates["token"].duplicated().any():
            raise ToolkitError("the candidate table lists a token twice")
        if not str(reviewer).strip():
            raise ToolkitError("a reviewer name is required")
        self.candidates = candidates.reset_index(drop=True).copy()
        if "score" not in self.candidates:
            self.candidates["score"] = 0.0
        self._row = {t: i for i, t in enumerate(self.candidates["token"])}
        self.store = ReviewStore(path)
        self.reviewer = str(reviewer).strip()
        self.session = session or uuid.uuid4().hex[:12]
        self._records = self.store.records()
        self._current, self._standing = replay(self._records)
        self.filter = ReviewFilter()
        self._order = self._compute_order()
        self._pos = self._first_pending_index()

    # ---- state -----------------------------------------------------------------------------------------------------
    @property
    def path(self) -> Path:
        return self.store.path

    @property
    def decisions(self) -> dict[str, str]:
        """Current decision per token (tokens outside the candidate table included)."""
        return {t: r["decision"] for t, r in self._current.items()}

    def decision(self, token: str) -> str | None:
        r = self._current.get(token)
        return r["decision"] if r else None

    @property
    def order(self) -> list[str]:
        """Tokens shown under the current filter and sort order."""
        return list(self._order)

    @property
    def current(self) -> str | None:
        """The token under review (``None`` when the filter leaves nothing to show)."""
        return self._order[self._pos] if self._order and 0 <= self._pos < len(self._order) else None

    def current_row(self) -> pd.Series | None:
        tok = self.current
        return None if tok is None else self.candidates.iloc[self._row[tok]]

    @property
    def position(self) -> int:
        return self._pos

    def progress(self) -> dict[str, int]:
        """Candidates in all, decided, pending, and per decision (candidates only)."""
        dec = [self.decision(t) for t in self.candidates["token"]]
        out = {"n_total": len(dec), "n_decided": sum(d is not None for d in dec)}
        out["n_pending"] = out["n_total"] - out["n_decided"]
        for d in DECISIONS:
            out[d] = sum(x == d for x in dec)
        return out

    # ---- filters and order -----------------------------------------------------------------------------------------
    def _compute_order(self) -> list[str]:
        f = self.filter
        c = self.candidates
        keep = pd.Series(True, index=c.index)
        dec = c["token"].map(lambda t: self.decision(t))
        if f.show == "pending":
            keep &= dec.isna()
        elif f.show == "decided":
            keep &= dec.notna()
        elif f.show in DECISIONS:
            keep &= dec == f.show
        if f.min_score is not None:
            keep &= c["score"].astype(float) >= float(f.min_score)
        if f.contains:
            keep &= c["token"].str.contains(f.contains, case=False, regex=False)
        sub = c[keep]
        if f.sort_by in sub.columns:
            sub = sub.sort_values([f.sort_by, "token"] if f.sort_by != "token" else ["token"],
                                  ascending=[f.ascending, True] if f.sort_by != "token" else [f.ascending],
                                  kind="stable")
        return sub["token"].tolist()

    def _first_pending_index(self) -> int:
        for i, t in enumerate(self._order):
            if self.decision(t) is None:
                return i
        return 0

    def set_filter(self, *, show: str | None = None, min_score: float | None | str = "keep",
                   contains: str | None = None, sort_by: str | None = None, ascending: bool | None = None) -> None:
        """Change the filter / sort order; the current token stays current when it is still shown."""
        keep_tok = self.current
        self.filter = ReviewFilter(show=self.filter.show if show is None else show,
                                   min_score=self.filter.min_score if min_score == "keep" else min_score,
                                   contains=self.filter.contains if contains is None else contains,
                                   sort_by=self.filter.sort_by if sort_by is None else sort_by,
                                   ascending=self.filter.ascending if ascending is None else ascending)
        self._order = self._compute_order()
        self._pos = self._order.index(keep_tok) if keep_tok in self._order else self._first_pending_index()

    # ---- navigation ------------------------------------------------------------------------------------------------
    def next(self) -> str | None:
        if self._order:
            self._pos = min(self._pos + 1, len(self._order) - 1)
        return self.current

    def prev(self) -> str | None:
        if self._order:
            self._pos = max(self._pos - 1, 0)
        return self.current

    def goto(self, token: str) -> str:
        if token not in self._row:
            raise ToolkitError("that token is not a candidate of this review")
        if token not in self._order:  # show everything so that the token is visible
            self.filter = ReviewFilter(sort_by=self.filter.sort_by, ascending=self.filter.ascending)
            self._order = self._compute_order()
        self._pos = self._order.index(token)
        return token

    def next_pending(self) -> str | None:
        """Move to the next undecided token after the current one (wrapping around); stay when none is left."""
        n = len(self._order)
        for step in range(1, n + 1):
            j = (self._pos + step) % n
            if self.decision(self._order[j]) is None:
                self._pos = j
                break
        return self.current

    # ---- decisions -------------------------------------------------------------------------------------------------
    def _write(self, token: str, decision: str) -> dict:
        row = self.candidates.iloc[self._row[token]] if token in self._row else None
        context = None
        if row is not None and "examples" in row.index and row["examples"] is not None and len(row["examples"]):
            context = str(row["examples"][0])
        score = float(row["score"]) if row is not None and pd.notna(row["score"]) else None
        rec = self.store.append({"token": token, "decision": decision, "reviewer": self.reviewer,
                                 "timestamp": now_iso(), "context": context, "score": score,
                                 "session": self.session})
        self._records.append(rec)
        self._current, self._standing = replay(self._records)
        return rec

    def _refresh(self, prefer: str | None, advance: bool) -> None:
        old_order, old_pos = self._order, self._pos
        self._order = self._compute_order()
        if not self._order:
            self._pos = 0
            return
        if prefer in self._order:
            self._pos = self._order.index(prefer)
            if advance:
                self.next_pending()
            return
        # the token left the view (e.g. "pending" filter): go to the next shown token after it in the old order
        for t in old_order[old_pos + 1:] + old_order[:old_pos]:
            if t in self._order:
                self._pos = self._order.index(t)
                if advance and self.decision(t) is not None:
                    self.next_pending()
                return
        self._pos = self._first_pending_index()

    def decide(self, decision: str, token: str | None = None, *, advance: bool = True) -> dict:
        """Record ``decision`` (name / not_name / unsure) for ``token`` (default: the current one), saved at once;
        then move to the next pending token when ``advance``."""
        if decision not in DECISIONS:
            raise ToolkitError(f"unknown decision {decision!r}; expected one of {DECISIONS}")
        tok = self.current if token is None else token
        if tok is None:
            raise ToolkitError("no candidate to decide on (the filter shows nothing)")
        if tok not in self._row:
            raise ToolkitError("that token is not a candidate of this review")
        rec = self._write(tok, decision)
        self._refresh(tok, advance)
        return rec

    def undo(self) -> dict | None:
        """Withdraw the latest standing decision (of any session of this file); it becomes the current token.
        Returns the withdrawn record, or ``None`` when there is nothing to undo."""
        if not self._standing:
            return None
        last = self._standing[-1]
        self._write(last["token"], UNDO)
        self._refresh(last["token"], advance=False)
        if last["token"] in self._row and last["token"] not in self._order:
            self.goto(last["token"])
        return last

    def apply_script(self, script: str | Path | pd.DataFrame, *, default: str | None = None) -> int:
        """Decide from a scripted review (a CSV/JSONL file or frame with ``token`` and ``decision`` columns; a review
        file works too): for the headless notebook run. Candidates not in the script get ``default`` (or stay
        pending). Tokens already decided are left alone (resume). Returns the number of decisions written."""
        frame = read_script(script) if not isinstance(script, pd.DataFrame) else script
        wanted = dict(zip(frame["token"].astype(str), frame["decision"].astype(str)))
        bad = sorted(set(wanted.values()) - set(DECISIONS))
        if bad or (default is not None and default not in DECISIONS):
            raise ToolkitError(f"unknown decision(s) {bad or [default]} in the scripted review")
        n = 0
        for tok in self.candidates["token"]:
            d = wanted.get(tok, default)
            if d is not None and self.decision(tok) is None:
                self._write(tok, d)
                n += 1
        self._refresh(self.current, advance=False)
        return n

    def table(self) -> pd.DataFrame:
        """The shown candidates (filter and order applied) with their current decision."""
        rows = self.candidates.set_index("token").loc[self._order].reset_index()
        rows.insert(1, "decision", [self.decision(t) for t in rows["token"]])
        return rows


def read_script(path: str | Path) -> pd.DataFrame:
    """A scripted review: CSV with ``token,decision`` columns, or a review file (its current decisions)."""
    p = Path(path)
    if not p.is_file():
        raise ToolkitError(f"{p}: scripted review not found")
    if p.suffix.lower() == ".jsonl":
        return load_decisions(p)
    try:
        frame = pd.read_csv(p, dtype=str, keep_default_na=False, encoding="utf-8")
    except (UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise ToolkitError(f"{p}: cannot read the scripted review ({exc})") from None
    if not {"token", "decision"} <= set(frame.columns):
        raise ToolkitError(f"{p}: a scripted review needs 'token' and 'decision' columns, got {list(frame.columns)}")
    return frame


def _as_paths(paths: str | Path | Sequence[str | Path]) -> list[Path]:
    return [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]


def compare_reviews(a: str | Path, b: str | Path) -> dict[str, Any]:
    """Agreement between two review files on the tokens both decided: share of equal decisions, Cohen's kappa
    (``sklearn.metrics.cohen_kappa_score``; ``None`` when undefined, e.g. one decision only), the confusion counts
    and the conflicting tokens."""
    from sklearn.metrics import cohen_kappa_score

    da, db = load_decisions(a).set_index("token"), load_decisions(b).set_index("token")
    common = sorted(set(da.index) & set(db.index))
    ya, yb = da.loc[common, "decision"].tolist(), db.loc[common, "decision"].tolist()
    agree = sum(x == y for x, y in zip(ya, yb))
    kappa = None
    if common and len(set(ya) | set(yb)) > 1:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            k = cohen_kappa_score(ya, yb, labels=list(DECISIONS))
        kappa = None if pd.isna(k) else float(k)
    confusion = {x: {y: sum(1 for p, q in zip(ya, yb) if p == x and q == y) for y in DECISIONS} for x in DECISIONS}
    return {"reviewer_a": ", ".join(sorted(set(da["reviewer"]))), "reviewer_b": ", ".join(sorted(set(db["reviewer"]))),
            "n_a": len(da), "n_b": len(db), "n_common": len(common), "n_agree": agree,
            "agreement": agree / len(common) if common else None, "cohen_kappa": kappa, "confusion": confusion,
            "conflicts": [{"token": t, "a": x, "b": y} for t, x, y in zip(common, ya, yb) if x != y]}


def merge_reviews(paths: str | Path | Sequence[str | Path], *, policy: str = "any",
                  unsure_as_name: bool = True) -> pd.DataFrame:
    """Combined decision per token over several review files.

    ``policy``: ``any`` (a name when any reviewer says so), ``majority`` (a name when more reviewers say name than
    not), ``unanimous`` (a name only when every reviewer who decided says so). With ``unsure_as_name`` an ``unsure``
    counts as ``name`` (the privacy-safe reading: scrub what might be a name). Columns: token, decision, n_name,
    n_not_name, n_unsure, n_reviewers, conflict.
    """
    if policy not in ("any", "majority", "unanimous"):
        raise ToolkitError(f"policy must be any, majority or unanimous, got {policy!r}")
    frames = [load_decisions(p) for p in _as_paths(paths)]
    allf = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["token", "decision"])
    rows = []
    for tok, g in allf.groupby("token", sort=True):
        n = {d: int((g["decision"] == d).sum()) for d in DECISIONS}
        yes = n["name"] + (n["unsure"] if unsure_as_name else 0)
        no = n["not_name"] + (0 if unsure_as_name else n["unsure"])
        if policy == "any":
            is_name = yes > 0
        elif policy == "majority":
            is_name = yes > no
        else:
            is_name = yes > 0 and no == 0
        rows.append({"token": tok, "decision": "name" if is_name else "not_name", "n_name": n["name"],
                     "n_not_name": n["not_name"], "n_unsure": n["unsure"], "n_reviewers": len(g),
                     "conflict": len(set(g["decision"])) > 1})
    return pd.DataFrame(rows, columns=["token", "decision", "n_name", "n_not_name", "n_unsure", "n_reviewers",
                                       "conflict"])


def judged_names(paths: str | Path | Sequence[str | Path], *, policy: str = "any",
                 unsure_as_name: bool = True) -> list[str]:
    """Tokens whose combined decision is ``name`` (:func:`merge_reviews`): what the scrub step renames."""
    merged = merge_reviews(paths, policy=policy, unsure_as_name=unsure_as_name)
    return merged.loc[merged["decision"] == "name", "token"].tolist()


__all__ = ["DECISIONS", "FORMAT_VERSION", "RECORD_FIELDS", "ReviewFileWarning", "ReviewFilter", "ReviewSession",
           "ReviewStore", "compare_reviews", "judged_names", "load_decisions", "merge_reviews", "read_review",
           "read_script", "replay"]
