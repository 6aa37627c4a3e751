"""The verdict's rules (methods.md §11), one module per kind of evidence. Each rule *returns* its outcome — a list of
:class:`RuleResult` — and :func:`toolkit.audit.verdict.verdict` composes them: the tests of the family are corrected
together by Holm's procedure, and a significant finding is never outranked by a measurement that is missing.

* :mod:`.membership` — every membership attack's AUC (two-sided) and TPR at every resolvable FPR; the split check
  (the reference model attacked on the same split, :class:`SplitCheck`) and the confounded-split comparison;
* :mod:`.identifiers` — PII inference (against chance and the non-members), canaries, free-running regurgitation,
  novel identifiers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

#: what a :class:`RuleResult` is: a test of the family; a test of what is *not* leakage (population knowledge,
#: outside the family); a finding with its own bound or no test at all (outside the family: ``level`` says red or
#: amber); an input that makes the verdict incomplete; one that is only listed as not judged or not measured
STATUSES = ("tested", "population", "outside", "unjudgeable", "not_judged", "not_measured")


@dataclass
class RuleResult:
    """One rule's outcome on one input.

    ``status`` one of :data:`STATUSES`. A test of the family (``"tested"``) carries its stated ``test`` (e.g.
    ``"AUC vs 0.5, two-sided (Mann–Whitney)"``), its ``p`` value, its ``effect`` (the figure the floor reads, e.g.
    AUC − 0.5), whether the effect is beyond the red ``floor``, its ``figure`` and ``reason`` (words), and after the
    correction ``significant``; ``direction`` is ``"inverted"`` for a membership test whose members score lower than
    its non-members. An input that could not be judged carries ``why_not_judged``. ``scope`` and ``small``: PII
    inference's scope and why a scope without a finding is "not judged"."""

    rule: str
    attack: str | None = None
    status: str = "tested"
    test: str | None = None
    p: float | None = None
    effect: float | None = None
    floor: bool = False
    figure: str | None = None
    reason: str = ""
    why_not_judged: str | None = None
    level: str | None = None
    direction: str | None = None
    significant: bool = False
    scope: str | None = None
    small: str | None = None

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")

    @classmethod
    def unjudgeable(cls, rule: str, attack: str | None, figure: str | None, why: str) -> "RuleResult":
        """An input whose rule cannot decide (the verdict is incomplete unless a finding decides)."""
        return cls(rule, attack, status="unjudgeable", figure=figure, reason=why, why_not_judged=why)

    @classmethod
    def not_judged(cls, what: str) -> "RuleResult":
        return cls("not_judged", None, status="not_judged", reason=what, why_not_judged=what)

    @classmethod
    def not_measured(cls, what: str) -> "RuleResult":
        return cls("not_measured", None, status="not_measured", reason=what, why_not_judged=f"{what}: not measured")

    @classmethod
    def outside(cls, rule: str, attack: str | None, figure: str, reason: str, level: str = "amber") -> "RuleResult":
        """A finding outside the family (its own bound, or no comparison at all): ``level`` red or amber."""
        return cls(rule, attack, status="outside", figure=figure, reason=reason, level=level)

    def to_dict(self) -> dict:
        """The family's record in ``verdict.json``'s ``tests``."""
        return {"rule": self.rule, "attack": self.attack, "test": self.test, "p_value": self.p,
                "effect": self.effect, "significant": self.significant, "beyond_floor": self.floor,
                "direction": self.direction, "figure": self.figure}


#: the former name of :class:`RuleResult` (a test of the family)
FamilyTest = RuleResult


@dataclass
class SplitCheck:
    """The split check's result (:func:`toolkit.audit.rules.membership.split_check`): was it ``checked`` (a model
    that saw neither group attacked on the same split, ≥ 2 of each group), its ``tests`` (one per attack, Holm within),
    the ``strongest`` significant one (``attack``, ``auc``, ``lo``, ``hi``, ``p``, ``confidence``; None when none is)
    and ``who`` (the model, in words). ``text``: the groups differ before fine-tuning, in words (None when they do
    not or nothing was checked)."""

    checked: bool = False
    tests: list[RuleResult] = field(default_factory=list)
    strongest: dict | None = None
    who: str = "the reference model"
    kind: str = "reference"   # or "blind": the blind baseline's check (the groups differ as texts)

    @property
    def text(self) -> str | None:
        return blind_words(self.strongest) if self.kind == "blind" else split_words(self.strongest, self.who)

    def to_dict(self) -> dict:
        return {"checked": self.checked, "kind": self.kind, "strongest": self.strongest, "who": self.who,
                "text": self.text,
                "tests": [t.to_dict() for t in self.tests]}


def split_words(strongest: dict | None, who: str) -> str | None:
    """The split check's finding in words, from its ``strongest`` test (:class:`SplitCheck`); None without one."""
    if not strongest:
        return None
    s = strongest
    return (f"members and non-members differ before fine-tuning: {who}, which saw neither group, separates them "
            f"({s['attack']} AUC {s['auc']:.3f}, {s['confidence']:.0%} interval [{s['lo']:.3f}, {s['hi']:.3f}], "
            f"{p_text(s['p'])}); membership attacks that this difference could explain do not decide the verdict")


def blind_words(strongest: dict | None) -> str | None:
    """The blind baseline's check in words (:func:`toolkit.audit.rules.membership.blind_check`); None without a
    significant separation."""
    if not strongest:
        return None
    s = strongest
    return (f"members and non-members differ as texts: the blind baseline, a classifier of their text alone (no "
            f"model), separates them (AUC {s['auc']:.3f}, {s['confidence']:.0%} interval [{s['lo']:.3f}, "
            f"{s['hi']:.3f}], {p_text(s['p'])}); membership attacks that this difference could explain do not decide "
            "the verdict")


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


__all__ = ["STATUSES", "FamilyTest", "RuleResult", "SplitCheck", "blind_words", "count", "split_words", "num", "p_text"]
