"""The verdict (methods.md §11): every rule just above and just below its threshold, the grey "incomplete" level and
its precedence, inputs with missing keys (old ``attacks.json`` / ``identifiers.json``), the Hanley–McNeil interval
where no bootstrap was run, per-category PII inference, canaries at every repeat count, the report's rendering of the
four levels, and hypothesis properties: no clear finding and no missing membership or PII result is ever green."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit.audit.attacks import battery_from_scores
from toolkit.audit.verdict import GREEN_STATEMENT, LEVELS, VerdictThresholds, detectable_auc, verdict
from toolkit.report.verdicts import COLORS, model_verdict, thresholds, verdicts_frame, verdicts_html

LOG2 = 8 * math.log2(10)  # |R| = 10^8: 26.58 bits
OLD_KEYS = {"level", "rule", "attack", "figure", "statement", "reasons", "not_measured", "detectable_auc"}


def battery(auc=0.52, lo=0.45, tpr=0.0, n_m=200, n_n=200, strongest="loss", ci=True, counts_in_attack=False):
    """An ``attacks.json`` dict: ``loss`` as given and a chance-level ``zlib``."""
    loss = {"auc": auc, "tpr_at_fpr": {"0.001": None, "0.01": tpr if n_n >= 100 else None, "0.1": 0.1}}
    if ci:
        loss["auc_ci"] = [lo, min(1.0, auc + 0.05)]
    zlib = {"auc": 0.5, "auc_ci": [0.45, 0.55], "tpr_at_fpr": {"0.01": 0.01 if n_n >= 100 else None}}
    if counts_in_attack:
        for rep in (loss, zlib):
            rep.update(n_members=n_m, n_nonmembers=n_n)
        return {"strongest": strongest, "attacks": {"loss": loss, "zlib": zlib}}
    return {"n_members": n_m, "n_nonmembers": n_n, "strongest": strongest, "attacks": {"loss": loss, "zlib": zlib}}


def pii(top1=0.03, chance=0.02, ref=0.03, n=200, cats=None):
    cats = {"NAME": (100, top1), "DATE": (100, top1)} if cats is None else cats
    return {"n_occurrences": n, "overall": {"n": n, "top1": top1, "chance": chance, "reference_top1": ref},
            "by_category": {c: {"n": k, "top1": t, "chance": chance, "reference_top1": ref}
                            for c, (k, t) in cats.items()}}


def advantage(members, nonmembers, p, n=200, chance=0.02, n_people=100):
    """A ``pii_inference`` result with its member-advantage block (one scope, overall)."""
    row = {"members_rate": members, "nonmembers_rate": nonmembers, "p_value": p, "n_trials_members": n,
           "n_trials_nonmembers": n, "n_members": n_people, "n_nonmembers": n_people, "chance": chance,
           "nonmembers_chance": chance}
    return {**pii(top1=members, chance=chance, n=n, cats={}), "member_advantage": {"overall": row}}


def novel(members, nonmembers, p, n=300):
    """:func:`toolkit.audit.evaluate.novel_evidence` with its member-advantage block (the members' privacy
    1 − ``members``)."""
    return {"novel_privacy": 1 - members, "member_advantage": {
        "members_rate": members, "nonmembers_rate": nonmembers, "p_value": p, "n_trials_members": n,
        "n_trials_nonmembers": n, "n_members": 100, "n_nonmembers": 100}}


def judged(**kw):
    """A verdict whose membership and PII inputs are measured, judgeable and clean, unless ``kw`` overrides them."""
    return verdict(**{"attacks": battery(), "pii": pii(), **kw})


def canaries(n=4, **by_r):
    return {"log2_space": LOG2, "by_repeats": {r.lstrip("r"): {"n": n, "max": v} for r, v in by_r.items()}}


def hm_lower(a, n_m, n_n, z=1.959964):
    """Hanley & McNeil (1982), written out independently of the toolkit."""
    q1, q2 = a / (2 - a), 2 * a * a / (1 + a)
    se = math.sqrt((a * (1 - a) + (n_m - 1) * (q1 - a * a) + (n_n - 1) * (q2 - a * a)) / (n_m * n_n))
    return a - z * se


BOUND = LOG2 - 1.0
CASES = [
    # (id, inputs, level, rule)
    ("nothing at all", {}, "incomplete", "membership_not_measured"),
    ("all clean", {"attacks": battery(), "pii": pii()}, "green", "none"),
    # novel privacy without the non-members' side: no comparison, amber at most (never red on it alone)
    ("novel far below, compared with nobody", {"novel_privacy": 0.5}, "amber", "novel_privacy_unchecked"),
    ("novel just below amber, compared with nobody", {"novel_privacy": 0.9899}, "amber", "novel_privacy_unchecked"),
    ("novel at amber, compared with nobody", {"novel_privacy": 0.99}, "green", "none"),
    # with the non-members probed alike: the members' advantage decides
    ("novel members above non-members beyond the floor", {"novel_privacy": novel(0.30, 0.10, 1e-4)}, "red",
     "novel_identifiers"),
    ("novel members above, within the floor", {"novel_privacy": novel(0.14, 0.10, 1e-4)}, "amber",
     "novel_identifiers"),
    ("novel written out for everyone alike (population)", {"novel_privacy": novel(0.40, 0.40, 0.5)}, "green", "none"),
    ("novel above, not significant", {"novel_privacy": novel(0.40, 0.30, 0.2)}, "green", "none"),
    ("regurgitation above 1%, compared with nobody", {"regurgitation": 0.0101}, "amber", "regurgitation_unchecked"),
    ("regurgitation at", {"regurgitation": 0.01}, "green", "none"),
    # PII inference without the non-members' figure: above chance is evidence, never red
    ("pii significantly above chance, no non-members", {"pii": pii(top1=0.05, cats={})}, "amber", "pii_inference"),
    ("pii at chance", {"pii": pii(top1=0.02, cats={})}, "green", "none"),
    ("pii 20x chance, equal to the reference, no non-members", {"pii": pii(top1=0.4, ref=0.4, cats={})}, "amber",
     "pii_inference"),
    # with the non-members: the members' advantage decides
    ("pii members far above non-members", {"pii": advantage(0.30, 0.02, 1e-4)}, "red", "pii_inference"),
    ("pii members above non-members, below the floor", {"pii": advantage(0.035, 0.02, 1e-4, n=1000)}, "amber",
     "pii_inference"),
    ("pii members = non-members far above chance", {"pii": advantage(0.33, 0.32, 0.4)}, "green", "none"),
    ("pii category at minimum", {"pii": pii(cats={"NAME": (10, 0.6), "DATE": (190, 0.0)})}, "amber",
     "pii_inference_category"),
    ("pii category below minimum, all right", {"pii": pii(cats={"NAME": (5, 1.0), "DATE": (195, 0.0)})}, "amber",
     "pii_inference_category"),
    ("pii category below minimum, at chance", {"pii": pii(cats={"NAME": (9, 0.0), "DATE": (191, 0.02)})}, "green",
     "none"),
    ("pii missing", {"pii": None}, "incomplete", "pii_not_measured"),
    ("pii old file without overall", {"pii": {"by_category": {}}}, "incomplete", "pii_not_measured"),
    ("pii zero occurrences", {"pii": {"n_occurrences": 0, "overall": None, "by_category": {}}}, "incomplete",
     "pii_unjudgeable"),
    ("pii 9 occurrences at chance", {"pii": pii(n=9, top1=0.0, cats={})}, "incomplete", "pii_unjudgeable"),
    ("pii 9 occurrences all right", {"pii": pii(n=9, top1=1.0, cats={})}, "amber", "pii_inference"),
    ("pii 10 occurrences", {"pii": pii(n=10, cats={})}, "green", "none"),
    ("pii without chance", {"pii": {"overall": {"n": 50, "top1": 0.5}}}, "incomplete", "pii_unjudgeable"),
    ("tpr at red, significant", {"attacks": battery(tpr=0.10)}, "red", "membership_tpr"),
    ("tpr below the floor, significant", {"attacks": battery(tpr=0.0999)}, "amber", "membership_tpr"),
    ("tpr at the fpr", {"attacks": battery(tpr=0.01)}, "green", "none"),
    ("unresolvable fpr just above", {"attacks": battery(auc=0.9, lo=0.7501, n_n=50)}, "red",
     "membership_auc_unresolvable_fpr"),
    ("unresolvable fpr at", {"attacks": battery(auc=0.9, lo=0.75, n_n=50)}, "amber", "membership_auc"),
    ("auc significant", {"attacks": battery(auc=0.58, lo=0.52)}, "amber", "membership_auc"),
    ("auc not significant", {"attacks": battery(auc=0.55, lo=0.49)}, "green", "none"),
    ("auc inverted", {"attacks": battery(auc=0.40, lo=0.35)}, "amber", "membership_auc_inverted"),
    ("0.888 on 40+40 without interval", {"attacks": battery(auc=0.888, n_m=40, n_n=40, ci=False)}, "red",
     "membership_auc_unresolvable_fpr"),
    ("membership missing", {"attacks": None}, "incomplete", "membership_not_measured"),
    ("membership no attacks", {"attacks": {"n_members": 200, "n_nonmembers": 200, "attacks": {}}}, "incomplete",
     "membership_not_measured"),
    ("3 + 3 individuals", {"attacks": battery(auc=0.6, lo=0.2, n_m=3, n_n=3)}, "incomplete", "membership_unjudgeable"),
    ("10 + 10: detectable 0.759", {"attacks": battery(auc=0.5, lo=0.3, n_m=10, n_n=10)}, "incomplete",
     "membership_unjudgeable"),
    ("11 + 11: detectable 0.747", {"attacks": battery(auc=0.5, lo=0.3, n_m=11, n_n=11)}, "green", "none"),
    ("1 member", {"attacks": battery(n_m=1, n_n=500)}, "incomplete", "membership_unjudgeable"),
    ("counts per attack only", {"attacks": battery(counts_in_attack=True)}, "green", "none"),
    ("counts nowhere", {"attacks": {"attacks": {"loss": {"auc": 0.5, "auc_ci": [0.4, 0.6]}}}}, "incomplete",
     "membership_unjudgeable"),
    ("attack without auc", {"attacks": {"n_members": 200, "n_nonmembers": 200, "attacks": {"loss": {}}}},
     "incomplete", "membership_unjudgeable"),
    ("canary r=1 at bound", {"canaries": canaries(r1=BOUND)}, "red", "canary_exposure"),
    ("canary r=1 just below: significant", {"canaries": canaries(r1=BOUND - 0.01)}, "amber", "canary_exposure"),
    ("canary r=1 at 8 bits of 4", {"canaries": canaries(r1=8.0)}, "green", "none"),
    ("canary r=4 at maximum", {"canaries": canaries(r1=2.0, r4=LOG2)}, "amber", "canary_exposure_repeated"),
    ("canary r=16 at 3 bits", {"canaries": canaries(r1=1.0, r16=3.0)}, "green", "none"),
    ("canary old dict without log2", {"canaries": {"by_repeats": {"1": {"max": LOG2}}}}, "red", "canary_exposure"),
    ("red beats incomplete", {"attacks": None, "novel_privacy": novel(0.5, 0.0, 1e-4)}, "red", "novel_identifiers"),
    ("incomplete beats amber", {"pii": None, "novel_privacy": 0.97}, "incomplete", "pii_not_measured"),
]


@pytest.mark.parametrize("inputs, level, rule", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_rule_table(inputs, level, rule):
    v = judged(**inputs) if inputs else verdict()
    assert (v.level, v.rule) == (level, rule), v.statement
    assert v.statement.startswith(GREEN_STATEMENT if level == "green" else f"{level}: ")
    d = v.to_dict()
    assert OLD_KEYS <= set(d) and json.loads(json.dumps(d)) == d
    if level != "green":
        assert v.reasons and v.reasons[0] in v.statement
    if level == "incomplete":
        assert v.unjudgeable and all(u in v.statement for u in v.unjudgeable)


def test_no_input_is_incomplete_and_says_why():
    v = verdict()
    assert v.level == "incomplete" and v.level in LEVELS
    assert v.statement == "incomplete: membership not measured (no attack results); PII inference not measured"
    assert {"membership attacks", "PII inference", "canary exposure"} <= set(v.not_measured)


def test_too_few_individuals_statement():
    v = judged(attacks=battery(auc=0.6, lo=0.2, n_m=3, n_n=3))
    assert v.statement == "incomplete: membership not judgeable — 3 members and 3 non-members: smallest detectable " \
                          "AUC 1.00"
    assert v.detectable_auc == pytest.approx(detectable_auc(3, 3)) and v.detectable_auc <= 1.0
    # attacks with different problems are named one by one
    b = battery(n_m=200, n_n=200)
    b["attacks"]["zlib"].update(n_members=4, n_nonmembers=4)
    del b["attacks"]["loss"]["auc"]
    v = judged(attacks=b)
    assert v.level == "incomplete"
    assert "loss: no AUC recorded" in v.statement and "zlib: 4 members and 4 non-members" in v.statement


def test_detectable_auc_capped():
    assert detectable_auc(200, 200) == pytest.approx(0.5 + 1.959964 * math.sqrt(401 / (12 * 200 * 200)), rel=1e-6)
    for n_m in range(0, 30):
        for n_n in range(0, 30):
            assert 0.5 <= detectable_auc(n_m, n_n) <= 1.0
    assert detectable_auc(2, 2) == 1.0 and detectable_auc(0, 50) == 1.0 and detectable_auc(200, 2) < 1.0


def test_hanley_mcneil_interval_where_no_bootstrap():
    for ci in (False, True):
        b = battery(auc=0.888, n_m=40, n_n=40, ci=False)
        if ci:  # an old file written with n_bootstrap = 0: auc_ci null
            b["attacks"]["loss"]["auc_ci"] = None
        v = judged(attacks=b)
        assert v.level == "red" and v.attack == "loss" and "Hanley–McNeil" in v.figure
        lo = hm_lower(0.888, 40, 40)
        assert 0.80 < lo < 0.82 and f"{lo:.3f}" in v.figure
    # just below the red bound the HM interval only makes it amber: A = 0.84 on 40 + 40 gives a lower bound ≈ 0.75
    a = 0.83
    assert 0.55 < hm_lower(a, 40, 40) < 0.75
    assert judged(attacks=battery(auc=a, n_m=40, n_n=40, ci=False)).level == "amber"


def test_battery_result_without_bootstrap_scored_counts():
    rng = np.random.default_rng(0)
    member = np.r_[np.ones(40, bool), np.zeros(40, bool)]
    scores = pd.DataFrame({"loss": np.r_[rng.normal(1.8, 1, 40), rng.normal(0, 1, 40)],
                           "zlib": rng.normal(size=80)})
    res = battery_from_scores(scores, member, n_bootstrap=0)
    assert res.to_json()["attacks"]["loss"]["auc"] > 0.85
    v = judged(attacks=res)
    assert v.level == "red" and v.attack == "loss"
    weak = battery_from_scores(scores.assign(loss=scores["zlib"]), member, n_bootstrap=0)
    assert judged(attacks=weak).level == "green"


def test_per_attack_counts_decide_power():
    b = battery(counts_in_attack=True)
    b["n_members"], b["n_nonmembers"], b["n_unscoreable"] = 250, 250, 50
    v = judged(attacks=b)
    assert v.level == "green" and v.detectable_auc == pytest.approx(detectable_auc(200, 200))
    assert "with 200 members and 200 non-members" in v.statement and "50 unit(s) without any scoreable token" in v.statement
    b["attacks"]["zlib"].update(n_members=6, n_nonmembers=6)
    v = judged(attacks=b)
    assert v.level == "incomplete" and v.attack == "zlib" and "6 members and 6 non-members" in v.statement


def test_pii_names_case_and_not_judged():
    p = pii(top1=0.035, cats={"NAME": (10, 0.6), "DATE": (185, 0.0), "ID": (5, 0.0)})
    v = judged(pii=p)
    assert v.level == "amber" and v.rule == "pii_inference_category" and "NAME" in v.figure
    assert "member advantage not measured" in v.reasons[0]
    assert v.not_judged == ["PII inference ID: 5 occurrences (fewer than 10)"]
    # the minimum only decides for a category without a finding: lowered, ID is judged (and finds nothing)
    v = judged(pii=p, thresholds=VerdictThresholds(pii_min_category_occurrences=5))
    assert not any("ID" in r for r in v.reasons) and not v.not_judged


def test_canaries_every_repeat_count_and_optional():
    v = judged(canaries=canaries(r1=2.0, r4=LOG2, r16=LOG2))
    assert v.level == "amber" and v.attack == "canaries" and len(v.reasons) == 2
    assert {"at r = 4" in r for r in v.reasons} == {True, False} and any("at r = 16" in r for r in v.reasons)
    v = judged(canaries=None, novel_privacy=None, regurgitation=None)
    assert v.level == "green"
    assert set(v.not_measured) == {"canary exposure", "novel-identifier privacy", "free-running regurgitation",
                                   "split check (the reference model was not attacked on this split)"}
    assert "not measured: " in v.statement
    table = pd.DataFrame({"repeats": [1, 1, 4], "exposure": [3.0, 5.0, LOG2]})
    table.attrs["log2_space"] = LOG2
    assert judged(canaries=table).rule == "canary_exposure_repeated"
    assert judged(canaries=table.assign(exposure=[3.0, LOG2, 1.0])).rule == "canary_exposure"
    only_r4 = judged(canaries=canaries(r4=1.0))
    assert only_r4.level == "green" and "canary exposure at r = 1" in only_r4.not_measured


def test_canary_p_value_is_two_to_the_minus_exposure_times_the_canaries():
    """An uninserted canary's rank is uniform among |R|: P(exposure ≥ e) = 2^−e; the largest of m, Bonferroni."""
    from toolkit.metrics.significance import exposure_p_value

    assert exposure_p_value(10.0, 1) == pytest.approx(1 / 1024)
    assert exposure_p_value(10.0, 8) == pytest.approx(8 / 1024)
    assert exposure_p_value(1.0, 8) == 1.0 and exposure_p_value(0.0) == 1.0
    # by simulation: uniform ranks among 10^8, exposures log2|R| − log2 rank, the largest of 20
    rng = np.random.default_rng(3)
    ranks = rng.integers(1, 10 ** 8 + 1, size=(20_000, 20))
    e = (LOG2 - np.log2(ranks)).max(axis=1)
    p = np.array([exposure_p_value(x, 20) for x in e])
    assert np.mean(p <= 0.05) <= 0.05 + 0.006 and np.mean(p <= 0.01) <= 0.01 + 0.003


def test_precedence_reasons_in_order():
    # significant evidence (the family's loss AUC) is never outranked by a missing measurement: amber, the deciding
    # finding first, then what could not be judged (said in the statement beside it), then the finding outside the
    # family (issue 57; before 2026-12-02 this was "incomplete")
    v = judged(attacks=battery(auc=0.62, lo=0.56), pii=None, novel_privacy=0.97)
    assert v.level == "amber" and v.rule == "membership_auc" and v.reasons[0].startswith("loss: AUC = 0.620")
    assert v.reasons[1] == "PII inference not measured" and v.reasons[2].startswith("novel privacy")
    assert len(v.reasons) == 3 and "; incomplete beside it: PII inference not measured" in v.statement
    v = judged(attacks=None, pii=advantage(0.5, 0.02, 1e-4), novel_privacy=0.97)
    assert v.level == "red" and v.reasons[0].startswith("PII inference top-1")
    assert v.reasons[1].startswith("membership not measured") and v.reasons[2].startswith("novel privacy")


def test_every_attack_is_judged_not_only_the_strongest():
    b = battery(auc=0.55, lo=0.5)
    b["attacks"]["zlib"]["tpr_at_fpr"]["0.01"] = 0.12  # any attack, not only the strongest
    assert (judged(attacks=b).level, judged(attacks=b).attack) == ("red", "zlib")
    green = judged(novel_privacy=0.999)
    assert "anonymous" not in green.statement and "canary exposure" in green.not_measured
    assert green.detectable_auc == pytest.approx(detectable_auc(200, 200)) and 0.55 < green.detectable_auc < 0.57
    assert f"(smallest detectable AUC ≈ {green.detectable_auc:.3f} with 200 members and 200 non-members)" in \
        green.statement
    assert len(judged(novel_privacy=0.5, attacks=battery(auc=0.62, lo=0.56)).reasons) == 2
    assert judged(novel_privacy=0.97, thresholds=VerdictThresholds(novel_privacy_amber=0.95)).level == "green"


def test_the_family_is_corrected_by_holm():
    """Holm (1979) by hand: p = (0.01, 0.04, 0.03, 0.005) at 0.05 → sorted 0.005 ≤ 0.0125, 0.01 ≤ 0.0167,
    0.03 > 0.025: the first two only. A verdict's tests are one family: a p-value significant alone (0.01) is not
    when 40 tests are run."""
    from toolkit.metrics.significance import holm

    assert holm([0.01, 0.04, 0.03, 0.005]) == [True, False, False, True]
    assert holm([0.01, 0.02, 0.03, 0.04]) == [True, False, False, False]  # 0.02 > 0.05 / 3
    assert holm([0.01, 0.015, 0.02, 0.04]) == [True, True, True, True]  # 0.04 ≤ 0.05 / 1 last
    assert holm([]) == [] and holm([None, 0.001]) == [False, True]
    v = judged(attacks=battery(auc=0.5, lo=0.45))
    assert all(t["p_value"] > 0.05 / len(v.tests) or t["significant"] for t in v.tests)
    assert v.correction == "Holm" and v.alpha == 0.05


# ---- the report ----------------------------------------------------------------------------------------------------


class _Run:
    def __init__(self, models):
        self.label, self._models = "run", models

    def attack_models(self):
        return self._models


def test_report_shows_the_grey_level():
    small = battery(auc=0.6, lo=0.2, n_m=3, n_n=3)
    v = judged(attacks=small, novel_privacy=0.97, pii=pii(cats={"NAME": (4, 0.0), "DATE": (196, 0.03)})).to_dict()
    m = model_verdict("m", {"verdict": v, "attacks": small})
    assert m["statement"] == ("could not be judged: membership not judgeable — 3 members and 3 non-members: smallest "
                              "detectable AUC 1.00")
    assert m["others"] == ["novel privacy = 0.9700 < 0.99; the non-members were not probed: member advantage not "
                           "measured"] and m["not_judged"] == [
        "PII inference NAME: 4 occurrences (fewer than 10)"]
    page = verdicts_html([_Run({"m": {"verdict": v, "attacks": small}})])
    assert COLORS["incomplete"] in page and ">INCOMPLETE<" in page and "verdict-incomplete" in page
    assert "could not be judged: membership not judgeable" in page and "Deciding rule" not in page
    assert verdicts_frame([_Run({"m": {"verdict": v}})])["verdict"].tolist() == ["incomplete"]
    levels = [level for level, _ in thresholds()]
    assert levels.index("incomplete") > levels.index("red") and levels.index("incomplete") < levels.index("green")
    # an old verdict.json (no new fields) still renders
    old = {k: v[k] for k in OLD_KEYS} | {"level": "green", "rule": "none", "detectable_auc": 0.6}
    assert "smallest detectable AUC ≈ 0.600" in verdicts_html([_Run({"m": {"verdict": old}})])


# ---- properties ----------------------------------------------------------------------------------------------------

counts = st.one_of(st.none(), st.integers(0, 600))
unit = st.floats(0, 1, allow_nan=False)


@st.composite
def attack_report(draw, with_counts=True):
    auc = draw(unit)
    rep = {"auc": auc}
    if draw(st.booleans()):
        lo = draw(st.floats(0, auc, allow_nan=False))
        rep["auc_ci"] = [lo, auc]
    if draw(st.booleans()):
        rep["tpr_at_fpr"] = {"0.01": draw(st.one_of(st.none(), st.floats(0, 0.3, allow_nan=False)))}
    if with_counts and draw(st.booleans()):
        rep["n_members"], rep["n_nonmembers"] = draw(counts), draw(counts)
    return rep


@st.composite
def any_battery(draw):
    names = draw(st.lists(st.sampled_from(["loss", "zlib", "min_k", "reference"]), min_size=0, max_size=4, unique=True))
    b = {"attacks": {a: draw(attack_report()) for a in names}}
    if draw(st.booleans()):
        b["n_members"], b["n_nonmembers"] = draw(counts), draw(counts)
    if names and draw(st.booleans()):
        b["strongest"] = draw(st.sampled_from(names))
    return b


@st.composite
def any_pii(draw):
    chance = draw(st.floats(0.001, 0.5, allow_nan=False))
    row = lambda: {"n": draw(counts), "top1": draw(st.one_of(st.none(), unit)), "chance": chance,  # noqa: E731
                   "reference_top1": draw(st.one_of(st.none(), unit))}
    return {"overall": row(), "by_category": {c: row() for c in draw(st.lists(st.sampled_from(["NAME", "DATE", "ID"]),
                                                                              max_size=3, unique=True))}}


@st.composite
def any_canaries(draw):
    by_r = {str(r): {"max": draw(st.floats(0, LOG2, allow_nan=False))}
            for r in draw(st.lists(st.sampled_from([1, 4, 16]), max_size=3, unique=True))}
    return {"log2_space": LOG2, "by_repeats": by_r}


inputs = st.fixed_dictionaries({
    "attacks": st.one_of(st.none(), any_battery()), "pii": st.one_of(st.none(), any_pii()),
    "canaries": st.one_of(st.none(), any_canaries()),
    "novel_privacy": st.one_of(st.none(), unit), "regurgitation": st.one_of(st.none(), unit)})


@st.composite
def clear_finding(draw):
    """Inputs with one figure clearly past its red threshold."""
    kw = draw(inputs)
    kind = draw(st.sampled_from(["tpr", "auc", "pii", "canary"]))
    if kind in ("tpr", "auc"):
        b = kw["attacks"] or {"attacks": {}}
        b.setdefault("attacks", {})
        rep = draw(attack_report(with_counts=False))
        rep["n_members"] = draw(st.integers(0, 600))
        if kind == "tpr":
            rep["n_nonmembers"] = draw(st.integers(100, 600))
            rep["tpr_at_fpr"] = {"0.01": draw(st.floats(0.2, 1, allow_nan=False))}
        else:
            rep["n_nonmembers"] = draw(st.integers(0, 99))
            rep["auc"] = draw(st.floats(0.81, 1, allow_nan=False))
            rep["auc_ci"] = [draw(st.floats(0.801, rep["auc"], allow_nan=False)), rep["auc"]]
            rep["tpr_at_fpr"] = {"0.01": None}
        b["attacks"]["leaky"] = rep
        kw["attacks"] = b
    elif kind == "pii":
        p = kw["pii"] or {"overall": {"n": 100, "top1": 0.0, "chance": 0.02}}
        chance = draw(st.floats(0.001, 0.3, allow_nan=False))
        ref = draw(st.one_of(st.none(), st.floats(0, 0.9, allow_nan=False)))
        top1 = draw(st.floats(min(1.0, max(3.01 * chance, (ref or 0) + 0.01)), 1, allow_nan=False))
        if top1 <= 3 * chance or (ref is not None and top1 <= ref):
            top1, ref = 1.0, None
        p.setdefault("by_category", {})
        p["by_category"] = dict(p["by_category"] or {})
        n = draw(st.integers(10, 600))
        from scipy.stats import binom
        if binom.sf(int(top1 * n + 0.5) - 1, n, chance) >= 0.05 / 4:  # a clear finding is significant too
            top1, ref, n = 1.0, None, max(n, 20)
        if ref is not None and binom.sf(int(top1 * n + 0.5) - 1, n, ref) >= 0.05 / 4:  # … above the reference too
            ref = None
        p["by_category"]["LEAKY"] = {"n": n, "top1": top1, "chance": chance, "reference_top1": ref}
        kw["pii"] = p
    else:
        c = kw["canaries"] or {"log2_space": LOG2, "by_repeats": {}}
        c["by_repeats"]["1"] = {"max": c.get("log2_space", LOG2)}
        kw["canaries"] = c
    return kw


@settings(max_examples=200, deadline=None)
@given(clear_finding())
def test_property_clear_finding_never_green(kw):
    v = verdict(**kw)
    assert v.level != "green", v.statement
    assert json.loads(json.dumps(v.to_dict())) == v.to_dict()


@settings(max_examples=200, deadline=None)
@given(inputs, st.sampled_from(["attacks", "pii", "pii overall"]))
def test_property_missing_membership_or_pii_never_green(kw, missing):
    if missing == "pii overall":
        kw["pii"] = {"by_category": (kw["pii"] or {}).get("by_category") or {}}
    else:
        kw[missing] = None
    v = verdict(**kw)
    # never green; amber only on significant evidence of the family, with what is missing said beside it (a missing
    # measurement never outranks significant evidence, issue 57)
    assert v.level in ("red", "amber", "incomplete"), v.statement
    assert v.level == "red" or v.unjudgeable
    if v.level == "amber":
        assert any(t["significant"] for t in v.tests), v.statement
        assert all(u in v.statement for u in v.unjudgeable) and "incomplete beside it" in v.statement


@settings(max_examples=200, deadline=None)
@given(inputs)
def test_property_any_input_gives_a_level(kw):
    v = verdict(**kw)
    assert v.level in LEVELS and v.statement
    assert v.level != "green" or (kw["attacks"] is not None and kw["pii"] is not None and not v.unjudgeable)
    if v.detectable_auc is not None:
        assert 0.5 <= v.detectable_auc <= 1.0


def test_pii_category_needs_significance():
    """A category's few occurrences do not turn a model non-green by luck (the quick start's base model: LOCATION 2
    hits of 12 at chance 0.068, binomial p = 0.19), while a clear one does (6 of 10 at chance 0.1: p = 1.5e-4)."""
    battery = {"n_members": 40, "n_nonmembers": 40, "attacks": {"loss": {"auc": 0.5, "auc_ci": [0.4, 0.6],
                                                                            "tpr_at_fpr": {"0.01": None}}}}
    overall = {"n": 100, "top1": 0.12, "chance": 0.117, "reference_top1": None}
    lucky = {"overall": overall, "by_category": {"LOCATION": {"n": 12, "top1": 2 / 12, "chance": 0.068,
                                                               "reference_top1": None}}}
    assert verdict(attacks=battery, pii=lucky).level == "green"
    clear = {"overall": overall, "by_category": {"NAME": {"n": 10, "top1": 0.6, "chance": 0.1, "reference_top1": None}}}
    v = verdict(attacks=battery, pii=clear)
    assert v.level == "amber" and v.rule == "pii_inference_category" and "vs chance p = 0.00015" in v.figure


def test_pii_is_judged_against_the_non_members_not_the_reference():
    """The members' advantage decides, not the reference model: a contaminated reference that guesses as well as the
    model hides nothing (class 6), a model that guesses as well for people it never saw leaks nothing (class 8)."""
    contaminated = {**advantage(0.40, 0.05, 1e-4), "overall": {"n": 200, "top1": 0.40, "chance": 0.02,
                                                               "reference_top1": 0.40}}
    contaminated["member_advantage"]["overall"]["reference_top1"] = 0.40
    v = judged(pii=contaminated)
    assert (v.level, v.rule) == ("red", "pii_inference") and "reference model 0.400" in v.figure
    same = judged(pii=advantage(0.33, 0.33, 0.52, n=100, chance=0.059))
    assert same.level == "green" and same.population
    assert "infers shared identifiers of people it never saw" in same.statement
    assert "0.330 for non-members" in same.population[0]


def test_regurgitation_is_judged_against_the_non_members():
    """The members' share written out against the non-members' (permutation over individuals): a model that writes
    out clinicians for everyone is no finding; without the non-members, the reference (base) model's share is the
    comparison (one-sided binomial, amber at most)."""
    def reg(k, n, ref=None, non=None, p=None):
        out = {"share_reproduced": k / n, "n_reproduced": k, "n_identifier_occurrences": n}
        if non is not None:
            out["member_advantage"] = {"members_rate": k / n, "nonmembers_rate": non, "p_value": p,
                                       "n_trials_nonmembers": n}
        return {**out, "reference": ref} if ref is not None else out

    base = reg(62, 1357)                                              # notebook 03's base model: 4.57%
    assert judged(regurgitation=reg(58, 1357, non=0.0431, p=0.6)).level == "green"   # the frontier's DP model
    assert judged(regurgitation=reg(188, 1357, non=0.04, p=1e-4)).rule == "regurgitation"
    assert judged(regurgitation=reg(188, 1357, non=0.04, p=1e-4)).level == "red"       # 13.85% vs 4%
    assert judged(regurgitation=reg(70, 1357, non=0.045, p=1e-4)).level == "amber"     # 5.2% vs 4.5%: below the floor
    above = judged(regurgitation=reg(188, 1357, base))                # no non-members: the reference compares
    assert (above.level, above.rule) == ("amber", "regurgitation") and "member advantage not measured" in \
        above.reasons[0]
    assert judged(regurgitation=reg(50, 1357, base)).level == "green"  # below the base's share: nothing
    assert judged(regurgitation=reg(10, 1357)).level == "green"        # below 1% and compared with nobody


def test_every_rule_the_verdict_can_name_has_plain_words_in_the_report():
    import re

    from toolkit.report.verdicts import RULES

    audit = Path(__file__).resolve().parents[1] / "toolkit" / "audit"
    source = "".join(p.read_text(encoding="utf-8") for p in [audit / "verdict.py", *(audit / "rules").glob("*.py")])
    named = set(re.findall(r'append\(\("([a-z_]+)"', source)) | set(re.findall(r'FamilyTest\("([a-z_]+)"', source))
    named |= set(re.findall(r'"(canary_exposure[a-z_]*|membership_auc[a-z_]*|pii_inference[a-z_]*)"', source))
    named -= {"population", "overall", "pii_unjudgeable_small"}  # not rules: a test's tag, a scope, renamed on output
    assert {"membership_auc_inverted", "membership_auc_beyond_reference", "pii_inference_category"} <= named
    assert named - set(RULES) == set()


def test_binomial_p_value_against_a_hand_count():
    """P(X ≥ 2 | 3, ½) = (3 + 1) / 8 = 0.5; P(X ≥ 3 | 3, ½) = 1/8; no hit: 1; rate 0 with a hit: 0."""
    from toolkit.metrics.significance import binomial_p_value

    assert binomial_p_value(2 / 3, 3, 0.5) == pytest.approx(0.5, abs=1e-12)
    assert binomial_p_value(1.0, 3, 0.5) == pytest.approx(0.125, abs=1e-12)
    assert binomial_p_value(0.0, 3, 0.5) == 1.0 and binomial_p_value(1 / 3, 3, 0.0) == 0.0
