"""Formatting helpers of the audit report: numbers, percentages, tables, figures and identifiers as HTML pieces.

Identifiers are written as :func:`~toolkit.audit.hashing.hash_term` of the normalised word under the run's key (a
keyed hash, HMAC-SHA-256, first 12 hex digits; the key stays in the run directory, so without it the tokens cannot
be matched to names) unless the report is built with ``show_identifiers=True``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from toolkit.audit.hashing import hash_term
from toolkit.identifiers.words import normalize_term


def fmt(v: Any, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, (int, np.integer)):
        return f"{int(v):,}"
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.{digits}f}"
    return str(v)


def fmt_lr(v: Any) -> str:
    """A learning rate as written in the config (0.002, 2e-05), not rounded to a fixed number of decimals."""
    return f"{float(v):g}" if isinstance(v, (int, float, np.integer, np.floating)) else fmt(v)


def as_int(v: Any) -> Any:
    return int(round(float(v))) if isinstance(v, (int, float, np.integer, np.floating)) and not math.isnan(v) else v


def pct(v: float | None, digits: int = 1) -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * float(v):.{digits}f}%"


def table(frame: pd.DataFrame, *, index: bool = True, digits: int = 3) -> str:
    formatters = {c: (lambda x, d=digits: fmt(x, d)) for c in frame.columns}
    return frame.to_html(classes="tbl", border=0, escape=True, index=index, na_rep="n/a", formatters=formatters)


def figure(fig) -> str:
    fig.update_layout(height=fig.layout.height or 430, margin=dict(t=60, l=60, r=20, b=50))
    return fig.to_html(full_html=False, include_plotlyjs=False, config={"displaylogo": False, "responsive": True})


class Identifiers:
    """How identifiers are written: keyed-hashed with ``key`` (default: one run's key,
    :func:`~toolkit.audit.hashing.run_key`) or in clear (``show=True``, ``--show-identifiers``)."""

    def __init__(self, show: bool, key: bytes | None = None):
        if not show and key is None:
            raise ValueError("hashed identifiers need the run's key")
        self.show = show
        self.key = key

    def __call__(self, term: Any) -> str:
        t = str(term)
        return t if self.show else hash_term(normalize_term(t), self.key)

    @property
    def column(self) -> str:
        return "identifier" if self.show else "identifier (keyed hash)"


def block(kind: str, body: Any, caption: str | None = None, *, appendix: bool = False) -> dict[str, Any]:
    """A piece of a report section; ``appendix=True``: technical material (hash tables) moved to the appendix."""
    return {"kind": kind, "body": body, "caption": caption, "appendix": appendix}


__all__ = ["Identifiers", "as_int", "block", "figure", "fmt", "fmt_lr", "pct", "table"]
