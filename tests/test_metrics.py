"""Audit metrics against hand-computed values (methods.md §4, §5) and smoke tests of the audit figures (§9)."""

from __future__ import annotations

import math
import time

import numpy as np
import pandas as pd
import pytest

from toolkit import metrics as M
from toolkit import plots
from toolkit.metrics.probing import predicted_types, prediction_words

# One row per probed position. Hand-computed facts used below:
#   non-protected rows: takes→takes ✓, aspirin→ASPIRIN ✓ (normalised), likes→likes ✓, daily→weekly ✗ ⇒ 3/4
#   L (predicted anywhere) = {bob, takes, aspirin, golf, the, likes, carol, weekly}
ROWS = [
    # doc,  person, original,  predicted, protected
    ("a1", "A", "Alice", "Bob", True),        # a direct identifier of B predicted at the wrong place: still a leak
    ("a1", "A", "takes", "takes", False),
    ("a1", "A", "aspirin", "ASPIRIN", False),
    ("a1", "A", "chess", "golf", True),       # B's indirect identifier predicted in A's document
    ("b1", "B", "Bob", "the", True),
    ("b1", "B", "likes", "likes", False),
    ("b1", "B", "golf", "golf", True),        # at its own position
    ("c1", "C", "Carol", "Carol", True),      # at its own position
    ("c1", "C", "insulin", "aspirin", True),
    ("c1", "C", "daily", "weekly", False),
]
I_DIRECT = {"Alice", "Bob", "Carol"}
I_INDIRECT = {"chess", "golf", "insulin"}


@pytest.fixture()
def preds() -> pd.DataFrame:
    return pd.DataFrame(ROWS, columns=["doc_id", "person_id", "original", "predicted", "protected"])


# ---------------------------------------------------------------------------------------------------------- §4


def test_normalize_word_matches_identifiers():
    from toolkit.identifiers import normalize_term

    for w in ["Alice", "ﬁle", "CAFÉ", "café", "Ⅻ"]:
        assert M.normalize_word(w) == normalize_term(w)
    assert M.normalize_word("ﬁLE") == "file"


def test_utility():
    assert M.utility(["A", "b", "ﬁle"], ["a", "c", "FILE"]) == pytest.approx(2 / 3)
    assert M.utility(["x", None], ["x", "y"]) == 0.5  # a missing prediction is wrong
    assert math.isnan(M.utility([], []))
    with pytest.raises(ValueError):
        M.utility(["a"], ["a", "b"])


def test_heldout_utility_counts_only_the_given_individuals_unprotected_rows(preds):
    # hand-computed from ROWS: B's one non-protected row likes→likes ✓; C's daily→weekly ✗; A's two rows both ✓
    assert M.heldout_utility(preds, {"B"}) == 1.0
    assert M.heldout_utility(preds, ["B", "C"]) == 0.5
    assert M.heldout_utility(preds, {"A", "B", "C"}) == pytest.approx(M.privacy_report(preds, I_DIRECT, I_INDIRECT)[
        "utility"])  # everyone held out: §4's utility over the same rows
    assert math.isnan(M.heldout_utility(preds, {"nobody"}))
    brute = [M.normalize_word(r[3]) == M.normalize_word(r[2]) for r in ROWS if r[1] in "AC" and not r[4]]
    assert M.heldout_utility(preds, {"A", "C"}) == pytest.approx(sum(brute) / len(brute))


def test_privacy_and_leaked():
    assert M.leaked(["Bob", "golf", "the"], I_DIRECT | I_INDIRECT) == {"bob", "golf"}
    assert M.privacy(["Bob", "golf", "the"], I_DIRECT | I_INDIRECT) == pytest.approx(1 - 2 / 6)
    assert M.privacy([], ["x"]) == 1.0  # nothing predicted
    assert M.privacy(["BOB"], ["bob"]) == 0.0
    # empty identifier vocabulary: nothing to leak
    assert M.privacy(["anything"], []) == 1.0
    assert M.privacy([], set()) == 1.0


def test_privacy_report_hand_computed(preds):
    r = M.privacy_report(preds, I_DIRECT, I_INDIRECT)
    assert r["utility"] == pytest.approx(0.75)          # 3 of 4 non-protected rows
    assert r["n_utility_positions"] == 4
    # I = {alice, bob, carol, chess, golf, insulin}; L ∩ I = {bob, carol, golf}
    assert (r["n_identifiers"], r["n_leaked"]) == (6, 3)
    assert r["privacy"] == pytest.approx(0.5)
    assert (r["n_direct"], r["n_direct_leaked"]) == (3, 2)   # bob, carol
    assert r["direct_privacy"] == pytest.approx(1 / 3)
    assert (r["n_indirect"], r["n_indirect_leaked"]) == (3, 1)  # golf
    assert r["indirect_privacy"] == pytest.approx(2 / 3)
    assert "novel_privacy" not in r


def test_novel_privacy(preds):
    # I ∩ novel = {carol, chess} ("zebra" is not an identifier and is ignored); carol leaked ⇒ 1 − 1/2
    r = M.privacy_report(preds, I_DIRECT, I_INDIRECT, novel={"Carol", "chess", "zebra"})
    assert (r["n_novel"], r["n_novel_leaked"]) == (2, 1)
    assert r["novel_privacy"] == pytest.approx(0.5)
    r = M.privacy_report(preds, I_DIRECT, I_INDIRECT, novel=set())
    assert (r["n_novel"], r["n_novel_leaked"], r["novel_privacy"]) == (0, 0, 1.0)


def test_privacy_report_empty_identifiers(preds):
    r = M.privacy_report(preds, set(), set())
    assert r["privacy"] == r["direct_privacy"] == r["indirect_privacy"] == 1.0
    assert r["n_identifiers"] == 0


def test_leaked_by_category(preds):
    cats = {"Alice": "NAME", "Bob": "NAME", "Carol": "NAME", "chess": "HOBBY", "golf": "HOBBY", "insulin": "DRUG"}
    t = M.leaked_by_category(preds, cats)
    assert list(t.columns) == ["category", "n_identifiers", "n_leaked"]
    # DRUG: insulin never predicted; HOBBY: golf; NAME: bob, carol
    assert t.values.tolist() == [["DRUG", 1, 0], ["HOBBY", 2, 1], ["NAME", 3, 2]]


def test_regurgitation_table(preds):
    freq = {"Alice": 2, "Bob": 2, "Carol": 1, "chess": 1, "golf": 1, "insulin": 1}
    t = M.regurgitation_table(preds, freq, I_DIRECT | I_INDIRECT)
    assert list(t.columns) == ["term", "train_frequency", "n_predicted", "n_predicted_correct"]
    # golf: predicted in rows 4 and 7, correct in row 7; bob: row 1 (wrong place); carol: row 8 (right place)
    assert t.values.tolist() == [
        ["golf", 1, 2, 1],
        ["bob", 2, 1, 0],
        ["carol", 1, 1, 1],
        ["alice", 2, 0, 0],
        ["chess", 1, 0, 0],
        ["insulin", 1, 0, 0],
    ]
    t2 = M.regurgitation_table(preds, pd.Series(freq), I_DIRECT | I_INDIRECT)
    pd.testing.assert_frame_equal(t, t2)



# A prediction is the decoded string of a word's arg-max tokens: it need not be one word.
GLUED = [
    # doc, person, original, predicted, protected
    ("d1", "P", "okafor", ": Okafor", True),     # the identifier written after punctuation, at its own position
    ("d1", "P", "said", "al Okafor", False),     # two words: adds "al" and "okafor"
    ("d1", "P", "nurse", "nurse", False),
    ("d2", "Q", "okafor", "okafor", True),
]


def test_predictions_enter_L_as_their_words():
    assert prediction_words([": Okafor", "al Okafor", ".", None, "Café-Ⅻ"]).tolist() == [
        ("okafor",), ("al", "okafor"), (), (), ("café", "xii")]
    assert predicted_types([": Okafor"]) == {"okafor"}
    assert predicted_types(["al Okafor"]) == {"al", "okafor"}
    # ": Okafor" with identifier "okafor" counts as leaked (it was compared as the string ": okafor" before)
    assert M.leaked([": Okafor"], {"okafor"}) == {"okafor"}
    assert M.privacy([": Okafor"], {"okafor", "lindqvist"}) == 0.5
    assert M.leaked(["al Okafor"], {"al", "okafor", "bowers"}) == {"al", "okafor"}


def test_privacy_report_counts_words_of_predictions_utility_stays_whole():
    df = pd.DataFrame(GLUED[:3], columns=["doc_id", "person_id", "original", "predicted", "protected"])
    r = M.privacy_report(df, {"okafor"}, {"al"})
    assert (r["n_leaked"], r["n_direct_leaked"], r["n_indirect_leaked"]) == (2, 1, 1)
    assert r["privacy"] == 0.0
    # utility compares the whole prediction with the word: "al okafor" at "said" is wrong, "nurse" right
    assert r["utility"] == 0.5 and r["n_utility_positions"] == 2
    df1 = df.iloc[:1]                                   # the single ": Okafor" row
    assert M.privacy_report(df1, {"okafor"}, set())["n_leaked"] == 1
    cats = M.leaked_by_category(df, {"okafor": "NAME", "al": "OTHER", "bowers": "NAME"})
    assert cats.values.tolist() == [["NAME", 2, 1], ["OTHER", 1, 1]]


def test_regurgitation_and_mia_count_words_of_predictions():
    df = pd.DataFrame(GLUED, columns=["doc_id", "person_id", "original", "predicted", "protected"])
    t = M.regurgitation_table(df, {"okafor": 3, "al": 1}, {"okafor", "al", "bowers"})
    # okafor: in rows 1, 2 and 4 (rows 1 and 4 at its own position); al: row 2 (not at its own position)
    assert t.values.tolist() == [["okafor", 3, 3, 2], ["al", 1, 1, 0], ["bowers", 0, 0, 0]]
    s = M.mia_scores(df, {"P": {"okafor", "al"}, "Q": {"okafor"}, "R": {"al"}})
    assert s.to_dict() == {"P": 2, "Q": 1, "R": 0}

# ---------------------------------------------------------------------------------------------------------- §5


def test_mia_scores(preds):
    by_person = {"A": {"Chess", "Takes"}, "B": {"golf", "likes"}, "C": {"insulin"}, "D": {"tennis"}}
    s = M.mia_scores(preds, by_person)
    # A: "takes" predicted in A's rows (chess not) → 1; B: golf and likes → 2; C: insulin never → 0;
    # D: no rows → 0.
    # golf is also predicted in A's document, but only B's own documents count for B.
    assert s.to_dict() == {"A": 1, "B": 2, "C": 0, "D": 0}
    assert s.name == "score"
    s = M.mia_scores(preds, by_person, restrict_to={"golf", "chess"})
    assert s.to_dict() == {"A": 0, "B": 1, "C": 0, "D": 0}
    # an individual present in the predictions but without indirect identifiers scores 0
    s = M.mia_scores(preds, {"A": {"takes"}})
    assert s.to_dict() == {"A": 1, "B": 0, "C": 0}


def test_mia_scores_ties_kept():
    p = pd.DataFrame({"person_id": ["m1", "m2", "n1", "n2"], "predicted": ["x", "y", "z", "w"],
                      "original": ["x", "y", "z", "w"], "doc_id": ["1", "2", "3", "4"]})
    s = M.mia_scores(p, {"m1": {"x"}, "m2": {"y"}, "n1": {"z"}, "n2": {"q"}})
    assert s.to_dict() == {"m1": 1, "m2": 1, "n1": 1, "n2": 0}
    r = M.roc(s[["m1", "m2"]], s[["n1", "n2"]])
    # the tied members are never separated from the tied non-member: points (0,0), (1/2, 1), (1, 1)
    assert list(zip(r["fpr"], r["tpr"])) == [(0.0, 0.0), (0.5, 1.0), (1.0, 1.0)]
    assert r["auc"] == pytest.approx(0.75)  # each member: > n2 (1) + tie with n1 (½) → 1.5 / 2


def test_roc_tiny_hand_computed():
    members, nonmembers = [3, 2, 2, 1], [2, 1, 0, 0]
    r = M.roc(members, nonmembers)
    # thresholds inf, 3, 2, 1, 0 → (fpr, tpr) = (0,0), (0,1/4), (1/4,3/4), (1/2,1), (1,1)
    assert r["fpr"].tolist() == [0, 0, 0.25, 0.5, 1]
    assert r["tpr"].tolist() == [0, 0.25, 0.75, 1, 1]
    # AUC: 3 beats 4; each 2 beats 3 and ties 1 (3.5); 1 beats 2 and ties 1 (2.5) → 13.5 / 16
    assert r["auc"] == pytest.approx(13.5 / 16)
    assert (r["n_members"], r["n_nonmembers"]) == (4, 4)
    f, t = r["fpr"], r["tpr"]
    assert M.tpr_at_fpr(f, t, 0.2, 4) is None          # < 1/4: not resolvable, never 0
    assert M.tpr_at_fpr(f, t, 0.25, 4) == 0.75         # boundary: resolvable
    assert M.tpr_at_fpr(f, t, 0.3, 4) == 0.75
    assert M.tpr_at_fpr(f, t, 0.5, 4) == 1.0


def test_ties_in_roc_two_members_one_nonmember():
    # two members and a non-member share score 2
    r = M.roc([2, 2, 5], [2, 0, 0, 0])
    assert list(zip(r["fpr"], r["tpr"])) == [(0, 0), (0, 1 / 3), (0.25, 1), (1, 1)]
    assert M.tpr_at_fpr(r["fpr"], r["tpr"], 0.25, 4) == 1.0
    assert r["auc"] == pytest.approx(11 / 12)  # 5 beats 4; each 2 beats 3 and ties 1 → (4 + 3.5 + 3.5) / 12


def test_tpr_at_fpr_resolution_with_100_nonmembers():
    rng = np.random.default_rng(1)
    members, nonmembers = rng.integers(0, 20, 100), rng.integers(0, 15, 100)
    r = M.roc(members, nonmembers)
    assert M.tpr_at_fpr(r["fpr"], r["tpr"], 0.001, 100) is None
    v = M.tpr_at_fpr(r["fpr"], r["tpr"], 0.01, 100)
    assert v is not None and 0 <= v <= 1
    rep = M.mia_report(members, nonmembers, n_bootstrap=200)
    assert list(rep["tpr_at_fpr"]) == ["0.001", "0.01", "0.1"]
    assert rep["tpr_at_fpr"]["0.001"] is None and rep["tpr_at_fpr_ci"]["0.001"] is None
    assert rep["tpr_at_fpr"]["0.01"] == v and rep["tpr_at_fpr_ci"]["0.01"] is not None
    assert M.tpr_at_fpr([0, 1], [0, 1], 0.5, 0) is None


def brute_auc(m, n) -> float:
    m, n = np.asarray(m)[:, None], np.asarray(n)[None, :]
    return float(np.mean(m > n) + 0.5 * np.mean(m == n))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_auc_against_pairwise_brute_force(seed):
    rng = np.random.default_rng(seed)
    m, n = rng.integers(0, 6, 37), rng.integers(0, 5, 53)
    assert M.roc(m, n)["auc"] == pytest.approx(brute_auc(m, n), abs=1e-12)
    # the vectorised bootstrap statistic agrees with sklearn on the original sample
    _, codes = np.unique(np.r_[m, n], return_inverse=True)
    K = codes.max() + 1
    auc, tprs = M.mia._stats_from_counts(M.mia._counts(codes[None, :37], K), M.mia._counts(codes[None, 37:], K),
                                         [0.02, 0.1, 0.5])
    assert auc[0] == pytest.approx(brute_auc(m, n), abs=1e-12)
    r = M.roc(m, n)
    assert tprs[0].tolist() == pytest.approx([M.tpr_at_fpr(r["fpr"], r["tpr"], f, 53) for f in (0.02, 0.1, 0.5)])


def test_mia_report_bootstrap():
    rng = np.random.default_rng(7)
    members = rng.poisson(4.0, 300)
    nonmembers = rng.poisson(2.5, 300)
    t0 = time.perf_counter()
    rep = M.mia_report(members, nonmembers, n_bootstrap=1000, seed=3)
    assert time.perf_counter() - t0 < 2.0
    lo, hi = rep["auc_ci"]
    assert lo <= rep["auc"] <= hi
    assert rep["auc"] == pytest.approx(brute_auc(members, nonmembers))
    for k in ("0.01", "0.1"):
        lo, hi = rep["tpr_at_fpr_ci"][k]
        assert lo <= rep["tpr_at_fpr"][k] <= hi
    assert rep["tpr_at_fpr"]["0.001"] is None  # 300 non-members: 1/300 > 0.001
    assert (rep["n_members"], rep["n_nonmembers"]) == (300, 300)
    assert rep == M.mia_report(members, nonmembers, n_bootstrap=1000, seed=3)  # deterministic
    assert rep["auc_ci"] != M.mia_report(members, nonmembers, n_bootstrap=1000, seed=4)["auc_ci"]
    import json

    json.dumps(rep)  # plain Python types
    no_boot = M.mia_report(members, nonmembers, n_bootstrap=0)
    assert no_boot["auc_ci_method"] == "hanley-mcneil" and rep["auc_ci_method"] == "bootstrap"
    assert no_boot["auc_ci"] == M.hanley_mcneil_ci(rep["auc"], 300, 300) and no_boot["tpr_at_fpr_ci"]["0.1"] is None


def test_mia_report_needs_both_classes():
    with pytest.raises(ValueError):
        M.mia_report([1, 2], [])


def test_auxiliary_knowledge_identifiable():
    by_person = {"A": {"chess", "Aspirin"}, "B": {"golf"}, "C": {"insulin"}, "D": set()}
    cats = {"chess": "HOBBY", "golf": "HOBBY", "insulin": "DRUG", "aspirin": "DRUG"}
    r = M.auxiliary_knowledge_identifiable(by_person, cats, ["HOBBY"])
    assert r["counts"].to_dict() == {"A": 1, "B": 1, "C": 0, "D": 0}
    assert (r["n_individuals"], r["n_identifiable"], r["share_identifiable"]) == (4, 2, 0.5)
    assert r["restrict_to"] == {"chess", "golf"}
    r = M.auxiliary_knowledge_identifiable(by_person, cats, ["HOBBY", "DRUG"])
    assert r["counts"].to_dict() == {"A": 2, "B": 1, "C": 1, "D": 0}
    assert r["share_identifiable"] == 0.75
    # each category alone: DRUG identifies A (aspirin) and C (insulin), HOBBY identifies A and B
    assert r["by_category"].values.tolist() == [["DRUG", 2, 0.5], ["HOBBY", 2, 0.5]]


# ---------------------------------------------------------------------------------------------------------- §9


@pytest.fixture()
def points() -> pd.DataFrame:
    rows = []
    for s, base in (("mlm", 0.9), ("ppmlm", 0.99)):
        for e in (4, 8, 16):
            rows.append({"strategy": s, "epoch": e, "utility": 0.5 + e / 100, "privacy": base - e / 1000,
                         "direct_privacy": base, "indirect_privacy": base - e / 500})
    return pd.DataFrame(rows)


def test_privacy_plots(points):
    fig = plots.privacy_utility(points)
    assert len(fig.data) == 2
    assert list(fig.data[0].text) == ["4", "8", "16"]
    fig = plots.privacy_variants(points)
    assert len(fig.data) == 6
    assert sum(bool(t.showlegend) for t in fig.data) == 2


def test_roc_plot_and_table():
    rng = np.random.default_rng(0)
    reports = {"mlm": M.mia_report(rng.integers(0, 9, 100), rng.integers(0, 4, 100), n_bootstrap=50),
               "ppmlm": M.mia_report(rng.integers(0, 4, 100), rng.integers(0, 4, 100), n_bootstrap=50)}
    fig = plots.roc_curves(reports)
    assert len(fig.data) == 3  # two curves + chance line
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    assert fig.data[0].name == f"mlm (AUC {reports['mlm']['auc']:.2f})"
    assert min(fig.data[0].x) == pytest.approx(1 / 200)  # FPR 0 clipped to 1/(2·n_nonmembers)
    t = plots.tpr_table(reports)
    assert list(t.columns) == ["TPR @ FPR 0.1%", "TPR @ FPR 1%", "TPR @ FPR 10%", "AUC"]
    assert (t["TPR @ FPR 0.1%"] == "n/r").all()
    assert list(t.index) == ["mlm", "ppmlm"]
    num = plots.tpr_table(reports, formatted=False)
    assert num["TPR @ FPR 0.1%"].isna().all()
    assert num.loc["mlm", "TPR @ FPR 1%"] == reports["mlm"]["tpr_at_fpr"]["0.01"]


def test_regurgitation_cdf(preds):
    freq = {"Alice": 2, "Bob": 2, "Carol": 1, "chess": 1, "golf": 1, "insulin": 1}
    t = M.regurgitation_table(preds, freq, I_DIRECT | I_INDIRECT)
    fig = plots.regurgitation_cdf({"mlm": t, "none": t.assign(n_predicted=0)})
    assert len(fig.data) == 2
    assert fig.layout.xaxis.type == "log"
    # leaked: golf (f=1, 2 predictions), carol (f=1, 1), bob (f=2, 1) → F(1) = 3/4, F(2) = 1
    assert list(fig.data[0].x) == [1, 2] and list(fig.data[0].y) == pytest.approx([0.75, 1.0])
    assert len(fig.data[1].x) == 0
    fig = plots.regurgitation_cdf({"mlm": t}, normalize=False)
    assert list(fig.data[0].y) == pytest.approx([3, 4])


def _held_predictions(correct_by_person: dict[str, list[bool]], protected_every: int = 0) -> pd.DataFrame:
    rows = []
    for pid, oks in correct_by_person.items():
        for j, ok in enumerate(oks):
            rows.append({"person_id": pid, "original": f"w{j}", "predicted": f"w{j}" if ok else "other",
                         "protected": bool(protected_every and j % protected_every == 0)})
    return pd.DataFrame(rows)


def test_heldout_gain_interval_point_by_hand_and_interval_against_scipy():
    """G from the three held-out utilities (heldout_utility), and its interval against scipy's percentile bootstrap
    over the same individuals (an independent resampler): paired, a patient's words kept together."""
    import scipy.stats

    from toolkit.metrics.probing import heldout_gain_interval, heldout_utility

    rng = np.random.default_rng(3)
    people = [f"p{i:02d}" for i in range(40)]
    sizes = {p: int(rng.integers(5, 40)) for p in people}
    skill = {p: rng.uniform(0.2, 0.8) for p in people}  # patients differ: words of one patient are correlated
    draw = {m: {p: list(rng.random(sizes[p]) < min(1.0, skill[p] + lift)) for p in people}
            for m, lift in (("base", 0.0), ("model", 0.03), ("plain", 0.15))}
    tables = {m: _held_predictions(d, protected_every=7) for m, d in draw.items()}
    tables["model"] = pd.concat([tables["model"], _held_predictions({"member": [True] * 50})])  # not held out
    u = {m: heldout_utility(t, people) for m, t in tables.items()}
    g, lo, hi = heldout_gain_interval(tables["model"], tables["base"], tables["plain"], people, n_bootstrap=4000,
                                      seed=1)
    assert g == pytest.approx((u["model"] - u["base"]) / (u["plain"] - u["base"]), abs=1e-12)

    counts = {m: np.array([[sum(ok for j, ok in enumerate(draw[m][p]) if j % 7), sum(1 for j in range(sizes[p])
                                                                                   if j % 7)] for p in people], float)
              for m in draw}

    def stat(idx):
        idx = np.asarray(idx, int)
        um = {m: counts[m][idx, 0].sum() / counts[m][idx, 1].sum() for m in counts}
        return (um["model"] - um["base"]) / (um["plain"] - um["base"])

    ref = scipy.stats.bootstrap((np.arange(len(people)),), stat, vectorized=False, n_resamples=4000,
                                method="percentile", random_state=np.random.default_rng(2))
    width = ref.confidence_interval.high - ref.confidence_interval.low
    assert lo == pytest.approx(ref.confidence_interval.low, abs=0.1 * width)
    assert hi == pytest.approx(ref.confidence_interval.high, abs=0.1 * width)
    assert lo < g < hi
    # undefined where plain gained nothing, or no held-out word
    assert all(np.isnan(heldout_gain_interval(tables["model"], tables["base"], tables["base"], people)))
    assert all(np.isnan(heldout_gain_interval(tables["model"], tables["base"], tables["plain"], ["nobody"])))


@pytest.mark.parametrize("lift", [-0.1, 0.004, 0.08])
def test_heldout_gain_is_undefined_where_plain_gain_is_not_significant(lift):
    """G = (U − U_base) / (U_plain − U_base) has no bounded interval where its denominator may be 0 (Fieller): nan
    exactly where plain's own gain, bootstrapped the same way, is not above 0 at 95% — checked against scipy's
    percentile bootstrap of U_plain − U_base over the same individuals (below the base, a small lift, a clear one)."""
    import scipy.stats

    from toolkit.metrics.probing import heldout_gain_interval

    rng = np.random.default_rng(5)
    people = [f"p{i:02d}" for i in range(60)]
    sizes = {p: int(rng.integers(20, 60)) for p in people}
    skill = {p: rng.uniform(0.3, 0.7) for p in people}
    base, plain, model = ({p: list(rng.random(sizes[p]) < skill[p] + d) for p in people} for d in (0, lift, 0.01))
    tables = {m: _held_predictions(d) for m, d in (("base", base), ("plain", plain), ("model", model))}
    g, lo, hi = heldout_gain_interval(tables["model"], tables["base"], tables["plain"], people, seed=0)

    counts = {m: np.array([[sum(d[p]), len(d[p])] for p in people], float)
              for m, d in (("base", base), ("plain", plain))}

    def plain_gain(idx):
        idx = np.asarray(idx, int)
        return (counts["plain"][idx, 0].sum() / counts["plain"][idx, 1].sum()
                - counts["base"][idx, 0].sum() / counts["base"][idx, 1].sum())

    ref = scipy.stats.bootstrap((np.arange(len(people)),), plain_gain, vectorized=False, n_resamples=4000,
                                method="percentile", random_state=np.random.default_rng(2)).confidence_interval
    if lift == 0.08:
        assert ref.low > 0.02 and np.isfinite([g, lo, hi]).all() and lo < g < hi
    elif lift > 0:  # the small lift is positive in this sample, but its interval holds 0
        assert plain_gain(range(len(people))) > 0 and ref.low < 0 < ref.high and all(np.isnan([g, lo, hi]))
    else:  # plain below the base: no gain to retain (a negative denominator would flip G's sign)
        assert ref.high < 0 and all(np.isnan([g, lo, hi]))
