"""The state of one manual name review (methods.md §7.4, paper 003 §4.3): navigation, filters, sorting, progress, decide
/ undo, persisted decision by decision in a review file (:mod:`toolkit.review.store`).

:class:`ReviewSession` is the whole review state as a plain class; the ipywidgets view (:mod:`toolkit.review.widget`)
and the Voilà app only display it. A decision is part of the state only once the review file acknowledged it
(:meth:`~toolkit.review.store.ReviewStore.append` returned): a failed write leaves the session as it was.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from toolkit.errors import ToolkitError
from toolkit.review.store import DECISIONS, UNDO, ReviewStore, now_iso, read_script, replay

SHOW = ("all", "pending", "decided") + DECISIONS
SORT_KEYS = ("score", "n_sentences", "best_rank", "token")


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
            raise ToolkitError(f"unknown decision ({len(str(decision))} characters); expected one of {DECISIONS}")
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


__all__ = ["SHOW", "SORT_KEYS", "ReviewFilter", "ReviewSession"]
