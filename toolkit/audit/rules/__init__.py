"""The verdict's rules (methods.md §11), one module per kind of evidence: each adds its tests — one p-value, whether
the effect is beyond the rule's floor, and its words — to the one family that :func:`toolkit.audit.verdict.verdict`
corrects by Holm's procedure.

* :mod:`.membership` — every membership attack's AUC (two-sided) and TPR at every resolvable FPR; the split check
  (the reference model attacked on the same split) and the confounded-split comparison;
* :mod:`.identifiers` — PII inference (against chance and the non-members), canaries, free-running regurgitation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class FamilyTest:
    """One member of the family: a p-value, whether its effect is beyond the red floor, and its words."""

    rule: str
    attack: str | None
    p: float
    floor: bool
    figure: str
    reason: str
    significant: bool = False
    scope: str | None = None   # PII inference: the scope (overall, a category, private, shared)
    small: str | None = None   # PII inference: why a scope without a finding is "not judged"


def num(x) -> float | None:
    """``x`` as a finite float, else None (missing keys, None, NaN, text)."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def count(x) -> int | None:
    v = num(x)
    return None if v is None else int(v)


def p_text(p: float) -> str:
    return f"p = {p:.2g}"


__all__ = ["FamilyTest", "count", "num", "p_text"]
