"""The verdict as a family of hypothesis tests (methods.md §11): the nine kinds of input the verdict of d13fd36 got
wrong (each with its own values, none of the issue's), the tests' null distributions checked against independent
computations (simulation, brute-force enumeration), and the family-wise false-alarm rate of whole verdicts whose
inputs are drawn from every statistic's null distribution."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import binom

from toolkit.audit.verdict import verdict
from toolkit.metrics.mia import hanley_mcneil_ci, mia_report
from toolkit.metrics.significance import (auc_p_value, clopper_pearson, exposure_p_value, member_advantage_test,
                                          tpr_p_value)

LOG2 = 8 * math.log2(10)


def attack(auc, lo, hi, tprs=None, n_m=None, n_n=None):
    rep = {"auc": auc, "auc_ci": [lo, hi], "tpr_at_fpr": tprs or {}}
    if n_m is not None:
        rep.update(n_members=n_m, n_nonmembers=n_n)
    return rep


def battery(attacks, n_m=500, n_n=500):
    return {"n_members": n_m, "n_nonmembers": n_n, "attacks": attacks}


CLEAN_PII = {"n_occurrences": 400, "overall": {"n": 400, "top1": 0.025, "chance": 0.025}, "by_category": {}}
QUIET = attack(0.505, 0.47, 0.54, {"0.001": 0.0, "0.01": 0.012, "0.1": 0.1})


def test_clean_inputs_are_green():
    assert verdict(attacks=battery({"loss": QUIET}), pii=CLEAN_PII).level == "green"


# ---- the nine classes ------------------------------------------------------------------------------------------------

def test_class_1_an_interval_far_below_half_is_evidence():
    v = verdict(attacks=battery({"loss": QUIET, "zlib": attack(0.36, 0.33, 0.39)}), pii=CLEAN_PII)
    assert (v.level, v.rule, v.attack) == ("amber", "membership_auc_inverted", "zlib"), v.statement
    assert "inverted" in v.reasons[0]
    # mirrored below 0.25 with too few non-members to resolve FPR 1%: as red as 0.75 above
    small = battery({"loss": attack(0.12, 0.03, 0.21, {"0.1": 0.0})}, n_m=60, n_n=60)
    assert verdict(attacks=small, pii=CLEAN_PII).level == "red"


def test_class_2_a_weaker_but_tighter_attack_is_judged_too():
    wide = attack(0.64, 0.46, 0.82, n_m=12, n_n=12)          # the point-strongest, on few individuals
    tight = attack(0.57, 0.545, 0.595)                       # on 500 + 500: z ≈ 3.8
    v = verdict(attacks={**battery({"min_k": wide, "loss": tight}), "strongest": "min_k"}, pii=CLEAN_PII)
    assert (v.level, v.attack) == ("amber", "loss"), v.statement


def test_class_3_low_fpr_leakage_at_chance_auc():
    """3% of 3,000 members above a threshold that 0.1% of 3,000 non-members pass (k = 3): the exact null
    (beta-binomial) puts P(X ≥ 90) far below 1e-20; the AUC (0.502) says nothing."""
    leaky = attack(0.502, 0.487, 0.517, {"0.001": 0.03, "0.01": 0.035, "0.1": 0.11})
    v = verdict(attacks=battery({"loss": leaky}, n_m=3000, n_n=3000), pii=CLEAN_PII)
    assert (v.level, v.rule) == ("amber", "membership_tpr") and "FPR 0.001" in v.figure, v.statement
    # 12% at 0.1%: beyond the floor (TPR ≥ 10% at FPR ≤ 1%): red
    v = verdict(attacks=battery({"loss": {**leaky, "tpr_at_fpr": {"0.001": 0.12}}}, n_m=3000, n_n=3000),
                pii=CLEAN_PII)
    assert (v.level, v.rule) == ("red", "membership_tpr")


def test_class_4_a_canary_far_above_chance_but_not_extracted():
    """Rank 40 among 10^8 (exposure 21.25 bits) of 25 canaries inserted once: p = 25 · 2^−21.25 ≈ 1e-5."""
    e = LOG2 - math.log2(40)
    v = verdict(attacks=battery({"loss": QUIET}), pii=CLEAN_PII,
                canaries={"log2_space": LOG2, "by_repeats": {"1": {"n": 25, "max": e}}})
    assert (v.level, v.rule) == ("amber", "canary_exposure"), v.statement
    assert exposure_p_value(e, 25) == pytest.approx(25 * 40 / 1e8, rel=1e-9)


def test_class_5_significant_pii_inference_below_twice_chance():
    """1.6 × chance on 6,000 occurrences: binomial p ≈ 6e-10 — evidence, below the former 2× line."""
    p = {"n_occurrences": 6000, "overall": {"n": 6000, "top1": 0.032, "chance": 0.02}, "by_category": {}}
    assert binom.sf(round(0.032 * 6000) - 1, 6000, 0.02) < 1e-9
    v = verdict(attacks=battery({"loss": QUIET}), pii=p)
    assert (v.level, v.rule) == ("amber", "pii_inference"), v.statement


def test_class_6_pii_inference_equal_to_a_contaminated_reference():
    p = {"n_occurrences": 500, "overall": {"n": 500, "top1": 0.62, "chance": 0.025, "reference_top1": 0.62},
         "by_category": {}}
    v = verdict(attacks=battery({"loss": QUIET}), pii=p)
    assert v.level == "amber" and "member advantage not measured" in v.reasons[0]
    adv = {"overall": {"members_rate": 0.62, "nonmembers_rate": 0.03, "p_value": 1e-4, "n_trials_members": 500,
                       "n_trials_nonmembers": 480, "n_members": 150, "n_nonmembers": 150, "chance": 0.025,
                       "reference_top1": 0.62}}
    v = verdict(attacks=battery({"loss": QUIET}), pii={**p, "member_advantage": adv})
    assert (v.level, v.rule) == ("red", "pii_inference"), v.statement


def test_class_7_a_leak_spread_over_small_categories():
    """Three categories of 6 occurrences each, all guessed (chance 1/30: p = 30^−6 each), diluted overall by a large
    category at chance."""
    cats = {c: {"n": 6, "top1": 1.0, "chance": 1 / 30} for c in ("ID", "PHONE", "EMAIL")}
    cats["DATE"] = {"n": 900, "top1": 1 / 30, "chance": 1 / 30}
    p = {"n_occurrences": 918, "overall": {"n": 918, "top1": (18 + 30) / 918, "chance": 1 / 30}, "by_category": cats}
    v = verdict(attacks=battery({"loss": QUIET}), pii=p)
    assert v.level == "amber" and v.rule in ("pii_inference", "pii_inference_category"), v.statement
    assert sum("PII inference ID" in r or "PII inference PHONE" in r or "PII inference EMAIL" in r
               for r in v.reasons) == 3
    assert not any(x.startswith("PII inference ID") for x in v.not_judged)


def test_class_8_population_knowledge_is_not_leakage():
    """Both groups unseen: the model infers clinicians and organisations for anyone (0.31 vs 0.30, far above chance
    0.05) — green, with the population line; the same for one category."""
    row = {"members_rate": 0.31, "nonmembers_rate": 0.30, "p_value": 0.41, "n_trials_members": 120,
           "n_trials_nonmembers": 118, "n_members": 85, "n_nonmembers": 85, "chance": 0.05, "nonmembers_chance": 0.05}
    org = {**row, "members_rate": 0.45, "nonmembers_rate": 0.42, "p_value": 0.33, "n_trials_members": 40,
           "n_trials_nonmembers": 38}
    p = {"n_occurrences": 120, "overall": {"n": 120, "top1": 0.31, "chance": 0.05},
         "by_category": {"ORG": {"n": 40, "top1": 0.45, "chance": 0.05}},
         "member_advantage": {"overall": row, "ORG": org, "shared": row}}
    v = verdict(attacks=battery({"loss": QUIET}, n_m=85, n_n=85), pii=p)
    assert v.level == "green", v.statement
    assert any("ORG" in x for x in v.population) and "never saw" in v.statement


def test_class_9_a_confounded_split_is_said_and_does_not_decide():
    """The reference model (saw neither group) separates the halves (zlib 0.70 on 150 + 150): the base model audited
    as a model is green with the warning, a fine-tuned model at the reference's level too, and a fine-tuned model
    well beyond it still amber; the calibrated attack still decides red."""
    ref_attacks = {"zlib": attack(0.70, 0.64, 0.76), "loss": attack(0.66, 0.60, 0.72)}
    base = {**battery({"zlib": attack(0.70, 0.64, 0.76, {"0.01": 0.06}),
                       "loss": attack(0.66, 0.60, 0.72, {"0.01": 0.05})}, 150, 150),
            "reference_model_attacks": ref_attacks, "reference": "base"}
    v = verdict(attacks=base, pii=CLEAN_PII)
    assert v.level == "green" and v.split and "differ before fine-tuning" in v.statement, v.statement
    assert "zlib AUC 0.700" in v.split
    beyond = {**base, "attacks": {**base["attacks"], "zlib": attack(0.86, 0.82, 0.90, {"0.01": 0.30})}}
    v = verdict(attacks=beyond, pii=CLEAN_PII)
    assert (v.level, v.rule) == ("amber", "membership_auc_beyond_reference") and v.split, v.statement
    calibrated = {**base, "attacks": {**base["attacks"], "reference": attack(0.80, 0.75, 0.85, {"0.01": 0.25})}}
    v = verdict(attacks=calibrated, pii=CLEAN_PII)
    assert (v.level, v.attack) == ("red", "reference") and "differ before fine-tuning" in v.statement
    # an unconfounded split: the reference's own attacks at chance, no warning, the usual rules
    fine = {**base, "reference_model_attacks": {"zlib": attack(0.51, 0.45, 0.57)}}
    v = verdict(attacks=fine, pii=CLEAN_PII)
    assert v.split is None and v.split_checked and v.level == "amber"


def test_class_9_a_confounded_split_does_not_decide_pii_inference_alone():
    """PII inference on a confounded split: the members' notes are easier for any model (the reference infers 0.20 of
    the members' identifiers and 0.05 of the non-members'). A model at the reference's level (0.22 vs 0.06, far apart,
    red on an unconfounded split) is green; one well beyond the reference's difference is amber, never red; a table
    without the reference's figures cannot decide on a confounded split. Tables per occurrence, the advantage
    computed by the toolkit's own function."""
    import pandas as pd

    from toolkit.audit.attacks import pii_member_advantage

    def table(rate, ref_rate, prefix, n_people=60, k=5):
        rng = np.random.default_rng(len(prefix) + int(rate * 100))
        rows = [(f"{prefix}{i}", int(rng.random() < rate), int(rng.random() < ref_rate))
                for i in range(n_people) for _ in range(k)]
        t = pd.DataFrame(rows, columns=["person_id", "top1", "reference_top1"])
        return t.assign(category="NAME", sharing="private", chance=0.02)

    def pii_of(m, n):
        return {"n_occurrences": len(m), "overall": {"n": len(m), "top1": m["top1"].mean(), "chance": 0.02},
                "by_category": {}, "member_advantage": pii_member_advantage(m, n, n_permutations=1999)}

    ref_attacks = {"zlib": attack(0.70, 0.64, 0.76), "loss": attack(0.66, 0.60, 0.72)}
    confounded = {**battery({"loss": QUIET}, 60, 60), "reference_model_attacks": ref_attacks}
    unconfounded = {**confounded, "reference_model_attacks": {"zlib": attack(0.51, 0.45, 0.57)}}
    level = table(0.22, 0.20, "m"), table(0.06, 0.05, "n")
    v = verdict(attacks=unconfounded, pii=pii_of(*level))
    assert v.level == "red" and v.rule.startswith("pii_inference"), v.statement  # without the check: red
    v = verdict(attacks=confounded, pii=pii_of(*level))
    assert v.level == "green" and v.split and "beyond the reference model" in " ".join(
        t["figure"] for t in v.tests), v.statement
    beyond = table(0.70, 0.20, "m"), table(0.06, 0.05, "n")
    v = verdict(attacks=confounded, pii=pii_of(*beyond))
    assert (v.level, v.rule) == ("amber", "pii_inference"), v.statement
    bare = pii_of(beyond[0].drop(columns="reference_top1"), beyond[1].drop(columns="reference_top1"))
    assert verdict(attacks=confounded, pii=bare).level == "green"
    assert verdict(attacks=unconfounded, pii=bare).level == "red"


# ---- the tests' null distributions, against independent computations -------------------------------------------------

def test_tpr_p_value_equals_a_brute_force_null():
    """The beta-binomial null of 'members above the threshold set on the same non-members' against 200,000 simulated
    null worlds scored by the toolkit's own TPR at FPR (n_m = 60, n_n = 250, FPR 1%: k = 2)."""
    rng = np.random.default_rng(7)
    n_m, n_n, fpr, sims = 60, 250, 0.01, 20_000
    hs = np.empty(sims, int)
    for i in range(sims):
        m, n = rng.random(n_m), rng.random(n_n)
        thr = np.sort(n)[::-1][2]  # at most k = 2 non-members strictly above: the 3rd largest
        hs[i] = int((m > thr).sum())
    for h in (1, 3, 5, 8):
        empirical = float(np.mean(hs >= h))
        assert tpr_p_value(h / n_m, fpr, n_m, n_n) == pytest.approx(empirical, abs=0.012), h
    # and through mia_report's TPR: the p-values of null worlds are (super-)uniform
    ps = []
    for _ in range(600):
        r = mia_report(rng.normal(size=n_m), rng.normal(size=n_n), n_bootstrap=0)
        ps.append(tpr_p_value(r["tpr_at_fpr"]["0.01"], fpr, n_m, n_n))
    assert np.mean(np.asarray(ps) <= 0.05) <= 0.05 + 0.03


def test_auc_p_value_against_the_permutation_null():
    """AUCs of 20,000 null worlds (25 + 35 exchangeable scores, AUC from ranks): the two-sided p-value is uniform."""
    rng = np.random.default_rng(11)
    n_m, n_n = 25, 35
    ranks = rng.random((20_000, n_m + n_n)).argsort(axis=1).argsort(axis=1) + 1
    aucs = (ranks[:, :n_m].sum(axis=1) - n_m * (n_m + 1) / 2) / (n_m * n_n)
    ps = np.array([auc_p_value(a, n_m, n_n) for a in aucs])
    assert abs(np.mean(ps <= 0.05) - 0.05) < 0.006 and np.mean(ps <= 0.01) < 0.013
    assert auc_p_value(0.5, 100, 100) == 1.0
    assert auc_p_value(0.3, 100, 100) == pytest.approx(auc_p_value(0.7, 100, 100), rel=1e-9)


def test_member_advantage_test_equals_exact_enumeration():
    """3 members and 4 non-members: every one of the C(7, 3) = 35 relabellings enumerated by hand."""
    hits = np.array([3, 2, 2, 0, 1, 0, 1], float)
    trials = np.array([4, 3, 2, 3, 4, 2, 3], float)
    def stat(idx):
        rest = [i for i in range(7) if i not in idx]
        return hits[list(idx)].sum() / trials[list(idx)].sum() - hits[rest].sum() / trials[rest].sum()
    observed = stat((0, 1, 2))
    exact = np.mean([stat(c) >= observed - 1e-12 for c in itertools.combinations(range(7), 3)])
    r = member_advantage_test(hits[:3], trials[:3], hits[3:], trials[3:], n_permutations=40_000, seed=1)
    assert r["p_value"] == pytest.approx(exact, abs=0.006) and exact == pytest.approx(1 / 35)
    assert r["members_rate"] == pytest.approx(7 / 9) and r["nonmembers_rate"] == pytest.approx(2 / 12)
    none = member_advantage_test([1], [2], [], [])
    assert none["p_value"] is None


def test_clopper_pearson_by_hand():
    """0 of 20: the upper bound solves (1 − p)^20 = 0.025 → 1 − 0.025^(1/20)."""
    lo, hi = clopper_pearson(0, 20)
    assert lo == 0.0 and hi == pytest.approx(1 - 0.025 ** (1 / 20))
    lo, hi = clopper_pearson(20, 20)
    assert hi == 1.0 and lo == pytest.approx(0.025 ** (1 / 20))


# ---- the family-wise false-alarm rate on null inputs -----------------------------------------------------------------

def _null_inputs(rng, n_m, n_n):
    """One verdict's inputs drawn from every statistic's null: ten attacks on exchangeable scores (the battery's own
    ROC summaries), PII inference at chance for members and non-members (per individual), canaries never inserted
    (uniform ranks), regurgitation and novel identifiers written out equally in both groups."""
    attacks = {}
    # the battery of 2026-12-02 (issue 57): EZ-MIA, DC-PDD, ReCaLL and the model-free blind baseline (its check
    # outside the family) beside the six before
    for name in ("loss", "zlib", "min_k", "min_k_plus_plus", "reference", "rmia", "ez", "dc_pdd", "recall", "blind"):
        m, n = rng.random(n_m), rng.random(n_n)
        top = np.sort(n)[::-1]
        auc = float((np.argsort(np.argsort(np.r_[m, n]))[:n_m] + 1).sum() - n_m * (n_m + 1) / 2) / (n_m * n_n)
        # TPR at FPR f: members strictly above the (⌊f·n_n⌋ + 1)-th largest non-member (tpr_at_fpr, continuous scores)
        tprs = {format(f, "g"): float(np.mean(m > top[int(f * n_n + 1e-9)])) if f * n_n >= 1 - 1e-9 else None
                for f in (0.001, 0.01, 0.1)}
        attacks[name] = {"auc": auc, "auc_ci": hanley_mcneil_ci(auc, n_m, n_n), "auc_ci_method": "hanley-mcneil",
                         "tpr_at_fpr": tprs, "n_members": n_m, "n_nonmembers": n_n}
    chance = 1 / 20
    occ_m, occ_n = rng.integers(1, 4, n_m), rng.integers(1, 4, n_n)
    hit_m, hit_n = rng.binomial(occ_m, chance), rng.binomial(occ_n, chance)
    adv = {"overall": {**member_advantage_test(hit_m, occ_m, hit_n, occ_n, n_permutations=999,
                                               seed=int(rng.integers(1 << 30))), "chance": chance,
                       "nonmembers_chance": chance}}
    pii = {"n_occurrences": int(occ_m.sum()),
           "overall": {"n": int(occ_m.sum()), "top1": hit_m.sum() / occ_m.sum(), "chance": chance},
           "by_category": {}, "member_advantage": adv}
    ranks = rng.integers(1, 10 ** 8 + 1, size=12)
    can = {"log2_space": LOG2, "by_repeats": {"1": {"n": 12, "max": float(LOG2 - np.log2(ranks.min()))}}}
    tm, tn = rng.integers(0, 5, n_m), rng.integers(0, 5, n_n)
    rm, rn = rng.binomial(tm, 0.04), rng.binomial(tn, 0.04)
    reg = {"share_reproduced": rm.sum() / max(1, tm.sum()), "n_identifier_occurrences": int(tm.sum()),
           "member_advantage": member_advantage_test(rm, tm, rn, tn, n_permutations=999,
                                                     seed=int(rng.integers(1 << 30)))}
    um, un = rng.integers(0, 6, n_m), rng.integers(0, 6, n_n)  # novel identifiers per individual, 30% written out
    wm, wn = rng.binomial(um, 0.3), rng.binomial(un, 0.3)
    novel = {"novel_privacy": 1 - wm.sum() / max(1, um.sum()),
             "member_advantage": member_advantage_test(wm, um, wn, un, n_permutations=999,
                                                       seed=int(rng.integers(1 << 30)))}
    return {"attacks": {"n_members": n_m, "n_nonmembers": n_n, "attacks": attacks}, "pii": pii, "canaries": can,
            "regurgitation": reg, "novel_privacy": novel}


@pytest.mark.parametrize("n_m, n_n", [(60, 60), pytest.param(150, 250, marks=pytest.mark.slow)])  # the larger: 15 s
def test_family_wise_false_alarm_rate_on_null_inputs(n_m, n_n):
    """300 verdicts on null inputs: non-green at most α = 5% (asserted against the binomial's 99.9% quantile, so the
    test is not flaky; the rate itself is printed by the benchmark), red at most 1%."""
    rng = np.random.default_rng(n_m + n_n)
    levels = [verdict(**_null_inputs(rng, n_m, n_n)).level for _ in range(300)]
    non_green = sum(level != "green" for level in levels)
    red = sum(level == "red" for level in levels)
    assert non_green <= binom.ppf(0.999, 300, 0.05), levels
    assert red <= binom.ppf(0.999, 300, 0.01)
    assert "incomplete" not in levels


def test_the_published_error_rates_are_what_the_report_prints():
    """The report prints the benchmark's published counts (recounted here from the levels) with their exact
    intervals; a missing file prints nothing."""
    import json

    from toolkit.report.verdicts import OPERATING_CHARACTERISTIC, error_rates

    oc = json.loads(OPERATING_CHARACTERISTIC.read_text(encoding="utf-8"))
    lines = error_rates()
    assert len(lines) == len(oc["null_worlds"]) + len(oc["power"]) and oc["commit"] in lines[0]
    for line, (name, x) in zip(lines, oc["null_worlds"].items()):
        n, lv = x["n"], x["levels"]
        assert sum(lv.values()) == n and f"non-green {n - lv['green']} of {n}" in line and name in line
        lo, hi = clopper_pearson(n - lv["green"], n)
        assert f"({lo:.1%}–{hi:.1%})" in line
    assert error_rates("/nonexistent/operating_characteristic.json") == []


# ---- novel identifiers: the members' advantage, recounted by hand ---------------------------------------------------

def test_novel_member_advantage_recounts_each_individuals_novel_identifiers():
    """Per individual: their novel identifier types (not in the base vocabulary) and how many of them the probe
    predicted on their own rows — recounted by hand; the test is the permutation test on those counts. A model that
    writes out a clinician's name for everyone (population knowledge) shows no member advantage."""
    import pandas as pd

    from toolkit.audit.evaluate import novel_member_advantage
    from toolkit.corpus import Corpus, Document

    terms = pd.DataFrame({"term": ["zorn", "ilvy", "mabry", "paris", "qent", "ovar"], "n": 1,
                          "direct": [True, True, True, True, False, True],
                          "indirect": [False, False, False, False, True, False],
                          "category": ["NAME", "NAME", "NAME", "LOC", None, "NAME"], "n_occurrences": 1})
    # m1, m2 members; n1, n2 non-members; mabry (a clinician) in everyone's notes; paris is in the base vocabulary
    where = {"m1": ["zorn", "mabry", "paris"], "m2": ["qent", "mabry"], "n1": ["ilvy", "mabry"],
             "n2": ["ovar", "mabry", "paris"]}
    docs = Corpus([Document(f"d-{p}", p, "text") for p in where])
    positions = pd.DataFrame([(f"d-{p}", t) for p, ts in where.items() for t in ts], columns=["doc_id", "term"])
    said = {"m1": ["Zorn", "mabry", "paris"], "m2": ["qent"], "n1": ["mabry", "x"], "n2": ["mabry"]}
    preds = pd.DataFrame([(p, w) for p, ws in said.items() for w in ws], columns=["person_id", "predicted"])
    out = novel_member_advantage(preds, {"terms": terms, "positions": positions}, docs, {"m1", "m2"}, {"n1", "n2"},
                                 base_vocabulary={"paris"}, n_permutations=999)
    # m1: {zorn, mabry} both said (2/2); m2: {qent, mabry}, qent said (1/2); n1: {ilvy, mabry} 1/2; n2: {ovar,
    # mabry} 1/2
    assert (out["members_rate"], out["nonmembers_rate"]) == (0.75, 0.5)
    assert (out["n_trials_members"], out["n_trials_nonmembers"], out["n_novel_types"]) == (4, 4, 5)
    assert out["p_value"] == member_advantage_test([2, 1], [2, 2], [1, 1], [2, 2], n_permutations=999)["p_value"]
    # only the shared clinician written out, for everyone: rates equal, nothing against the members
    preds = pd.DataFrame([(p, "mabry") for p in where], columns=["person_id", "predicted"])
    out = novel_member_advantage(preds, {"terms": terms, "positions": positions}, docs, {"m1", "m2"}, {"n1", "n2"},
                                 base_vocabulary={"paris"}, n_permutations=999)
    assert out["members_rate"] == out["nonmembers_rate"] == 0.5 and out["p_value"] > 0.5


def test_novel_identifiers_the_model_writes_out_for_anyone_are_not_leakage():
    """Class 8 for novel identifiers: novel privacy 0.55 on the members' notes (red before), the non-members' written
    out as often — green with the figure in the family's tests; the members far above — red; the figure alone,
    compared with nobody — amber at most."""
    adv = member_advantage_test([3] * 40, [7] * 40, [3] * 40, [7] * 40, n_permutations=999)
    v = verdict(attacks=battery({"loss": QUIET}), pii=CLEAN_PII,
                novel_privacy={"novel_privacy": 0.55, "member_advantage": adv})
    assert v.level == "green" and [t["rule"] for t in v.tests].count("novel_identifiers") == 1, v.statement
    adv = member_advantage_test([5] * 40, [7] * 40, [3] * 40, [7] * 40, n_permutations=999)
    v = verdict(attacks=battery({"loss": QUIET}), pii=CLEAN_PII,
                novel_privacy={"novel_privacy": 1 - 5 / 7, "member_advantage": adv})
    assert (v.level, v.rule) == ("red", "novel_identifiers") and "over individuals" in v.figure
    v = verdict(attacks=battery({"loss": QUIET}), pii=CLEAN_PII, novel_privacy=0.55)
    assert (v.level, v.rule) == ("amber", "novel_privacy_unchecked")


# ---- the benchmark's null worlds: the new attacks as the audit runs them ---------------------------------------------

def _benchmark():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "verdict_error_rates.py"
    spec = importlib.util.spec_from_file_location("verdict_error_rates", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_benchmarks_worlds_refit_the_blind_baseline_and_drop_the_reference_attacks_by_their_needs():
    """benchmarks/verdict_error_rates.py's ``world``: the blind baseline is re-fitted on each world's own labels by
    its registry entry (cross-fitted over that world's individuals; the score scored once on another split is not
    reused), averaged per individual as the battery does; without the reference model the attacks that need it
    (``reference``, ``ez``: their registry needs) are out and the reference-free new ones (``recall``, ``dc_pdd``)
    stay; the verdict of d13fd36 is given the six attacks it knew."""
    import pandas as pd

    from toolkit.audit.attacks.battery import person_scores
    from toolkit.audit.attacks.blind import blind_score

    bench = _benchmark()
    rng = np.random.default_rng(0)
    people = [f"p{i:02d}" for i in range(40)]
    words = ["fever", "cough", "rash", "pain", "nausea", "fatigue", "dizzy", "itch"]
    docs = [(f"{p}-{j}", p, " ".join(rng.choice(words, 12)), True) for p in people for j in range(2)]
    cols = ["loss", "zlib", "min_k", "min_k_plus_plus", "reference", "ez", "recall", "dc_pdd", "blind"]
    scores = pd.DataFrame(rng.normal(size=(40, len(cols))), index=pd.Index(people, name="id"), columns=cols)
    scores["blind"] = 99.0  # the scores of another split: must not be read
    pii = pd.DataFrame({"person_id": people, "sharing": "private", "top1": 0.0, "chance": 0.05, "category": "ID",
                        "reference_top1": 0.0})
    s = {"scores": scores, "ref_scores": scores[["loss", "zlib", "min_k", "min_k_plus_plus"]], "pii": pii,
         "regurgitation": None, "novel": None, "docs": docs}
    a, b = people[:20], people[20:]
    with_ref = bench.world(s, a, b, with_reference=True, seed=3)["attacks"]
    without = bench.world(s, a, b, with_reference=False, seed=3)["attacks"]
    assert set(with_ref["attacks"]) == set(cols) and "reference_model_attacks" in with_ref
    assert set(without["attacks"]) == set(cols) - {"reference", "ez"}
    doc = blind_score([d[2] for d in docs], [d[1] in set(a) for d in docs], [d[1] for d in docs], seed=3)
    mean = person_scores(pd.DataFrame({"blind": doc}), [d[1] for d in docs])["blind"].reindex(a + b).to_numpy()
    member = np.r_[np.ones(20, bool), np.zeros(20, bool)]
    expected = mia_report(mean[member], mean[~member], n_bootstrap=0)["auc"]
    assert with_ref["attacks"]["blind"]["auc"] == pytest.approx(expected, abs=1e-12)
    # another world of the same individuals: the baseline re-fitted on its labels, not the first world's
    swapped = bench.world(s, b, a, with_reference=True, seed=3)["attacks"]["attacks"]["blind"]["auc"]
    doc2 = blind_score([d[2] for d in docs], [d[1] in set(b) for d in docs], [d[1] for d in docs], seed=3)
    mean2 = person_scores(pd.DataFrame({"blind": doc2}), [d[1] for d in docs])["blind"].reindex(b + a).to_numpy()
    assert swapped == pytest.approx(mia_report(mean2[member], mean2[~member], n_bootstrap=0)["auc"], abs=1e-12)
    assert set(bench.world(s, a, b, with_reference=True, seed=0, attacks=bench.SIX)["attacks"]["attacks"]) \
        == {"loss", "zlib", "min_k", "min_k_plus_plus", "reference"}
