"""Members and non-members swapped by mistake (issue 57): every membership attack is inverted, and that significant
evidence decides the verdict — amber or red, "are the groups swapped?" — with what could not be judged (PII inference
on 0 occurrences) said beside it, never instead of it. The rules return typed results (:class:`RuleResult`) that the
verdict composes; the null world keeps its error rates under the new precedence (methods.md §11)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binom

from toolkit.audit.attacks import battery_from_scores
from toolkit.audit.rules import RuleResult
from toolkit.audit.rules.identifiers import pii_tests
from toolkit.audit.rules.membership import AUC_TEST, membership_tests
from toolkit.audit.verdict import VerdictThresholds, verdict
from toolkit.report.verdicts import model_verdict, verdicts_html

ZERO_PII = {"n_occurrences": 0, "overall": None, "by_category": {}}


def world(n_m, n_n, shift, seed, attacks=("loss", "zlib", "min_k")):
    """A battery on simulated scores: members shifted by ``shift`` (negative: the groups swapped)."""
    rng = np.random.default_rng(seed)
    member = np.r_[np.ones(n_m, bool), np.zeros(n_n, bool)]
    cols = {a: np.r_[rng.normal(shift, 1, n_m), rng.normal(0, 1, n_n)] for a in attacks}
    return battery_from_scores(pd.DataFrame(cols), member, n_bootstrap=0)


def swapped(n_m=200, n_n=200, seed=0):
    """A leaking model audited with its members given as non-members and vice versa: the labels flipped."""
    return world(n_m, n_n, -0.6, seed)


def test_swapped_groups_are_amber_with_the_inversion_said_and_what_is_incomplete_beside_it():
    res = swapped()
    assert all(r["auc"] < 0.40 for r in res.to_json()["attacks"].values())
    v = verdict(attacks=res, pii=ZERO_PII)
    assert v.level == "amber" and v.rule == "membership_auc_inverted", v.statement
    assert "inverted: members score lower than non-members — are the groups swapped?" in v.statement
    assert "incomplete beside it: PII inference not judgeable — 0 occurrences scored" in v.statement
    assert v.unjudgeable == ["PII inference not judgeable — 0 occurrences scored"] and v.inverted
    # every inverted AUC is in the family, two-sided, and significant after Holm
    inv = [t for t in v.tests if t["rule"] == "membership_auc_inverted"]
    assert len(inv) == 3 and all(t["significant"] and t["test"] == AUC_TEST and t["effect"] < -0.1 for t in inv)
    # the report shows the evidence, the question and, beside it, what is incomplete
    m = model_verdict("m", {"verdict": v.to_dict(), "attacks": res.to_json()})
    assert m["level"] == "amber" and m["incomplete"] == v.unjudgeable and m["inverted"]
    assert not any("0 occurrences" in r for r in m["others"])

    class Run:
        label = "r"

        def attack_models(self):
            return {"m": {"verdict": v.to_dict(), "attacks": res.to_json()}}

    page = verdicts_html([Run()])
    assert "verdict-amber" in page and "Incomplete beside it: PII inference not judgeable" in page
    assert "are the groups swapped?" in page


def test_swapped_groups_with_fewer_than_100_non_members_can_be_red():
    """FPR 1% is not resolvable with 60 non-members: the inverted AUC's interval beyond 0.75's mirror is red."""
    v = verdict(attacks=world(60, 60, -2.5, 1), pii=ZERO_PII)
    assert v.level == "red" and v.rule == "membership_auc_unresolvable_fpr", v.statement
    assert "are the groups swapped?" in v.statement and "incomplete beside it: PII inference" in v.statement


def test_a_finding_that_decides_elsewhere_still_says_the_inversion():
    """A canary decides (red): the inverted membership evidence is said beside it."""
    can = {"log2_space": 26.58, "by_repeats": {"1": {"n": 4, "max": 26.0}}}
    v = verdict(attacks=swapped(), pii=ZERO_PII, canaries=can)
    assert v.level == "red" and v.rule == "canary_exposure"
    assert "; membership inverted: members score lower than non-members — are the groups swapped?" in v.statement


def test_rules_return_typed_results():
    th = VerdictThresholds()
    out, det, power = membership_tests(swapped().to_json(), th)
    assert all(isinstance(r, RuleResult) for r in out) and det is not None and "200 members" in power
    auc = [r for r in out if r.test == AUC_TEST]
    assert len(auc) == 3 and all(r.status == "tested" and r.direction == "inverted" and r.p < 1e-5 for r in auc)
    none = pii_tests(ZERO_PII, th)
    assert [(r.status, r.rule, r.why_not_judged) for r in none] == [
        ("unjudgeable", "pii_unjudgeable", "PII inference not judgeable — 0 occurrences scored")]
    with pytest.raises(ValueError, match="status"):
        RuleResult("x", status="maybe")


def test_null_worlds_without_pii_are_rarely_amber_and_never_more_than_alpha():
    """Under the null (members and non-members exchangeable) with PII inference missing, the verdict is amber or red
    only when a test of the family is significant: at most α = 5% of worlds (Holm), as before the precedence
    changed (then those worlds were incomplete: non-green either way)."""
    n, levels = 200, []
    for seed in range(n):
        levels.append(verdict(attacks=world(100, 100, 0.0, 1000 + seed), pii=None).level)
    evidence = sum(level in ("amber", "red") for level in levels)
    assert set(levels) <= {"incomplete", "amber", "red"}
    assert evidence <= binom.ppf(0.999, n, 0.05), evidence
    assert sum(level == "red" for level in levels) <= binom.ppf(0.999, n, 0.01)


def test_a_null_world_with_everything_measured_stays_green():
    pii = {"n_occurrences": 200, "overall": {"n": 200, "top1": 0.02, "chance": 0.02}, "by_category": {}}
    greens = sum(verdict(attacks=world(200, 200, 0.0, 5000 + s), pii=pii).level == "green" for s in range(60))
    assert greens >= binom.ppf(0.001, 60, 0.95)
