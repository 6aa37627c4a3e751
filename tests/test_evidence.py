"""The evidence table and the closing findings (toolkit.results.evidence), the privacy–utility figures with held-out
utility and the base model's point (toolkit.plots.tradeoff), the ROC axes toggle and the TPR columns no sample can
resolve (toolkit.plots.audit), the notebook explorers (toolkit.plots.widgets) — on small hand-made runs."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from toolkit import plots
from toolkit.metrics.probing import heldout_gain_interval
from toolkit.results import RunData
from toolkit.results.evidence import (WEAK_DETECTABLE_AUC, evidence_table, findings, gain_texts, heldout_summary)

MEMBERS = [f"m{i}" for i in range(10)]
HELD = [f"h{i}" for i in range(10)]
#: per model, the probability that a held-out word is predicted right (base 0.5, plain 0.8, ppclm 0.7, DP ≈ base)
RATES = {"base": 0.5, "clm": 0.8, "ppclm": 0.7, "clm_dp": 0.5}


def _predictions(rate: float, seed: int, words: int = 40) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for p in MEMBERS + HELD:
        ok = rng.random(words) < rate
        rows += [{"person_id": p, "original": "word", "predicted": "word" if o else "other", "protected": False}
                 for o in ok]
    return pd.DataFrame(rows)


def _utility(preds: pd.DataFrame) -> float:
    held = preds[preds["person_id"].isin(HELD)]
    return float((held["predicted"] == held["original"]).mean())


def _battery(best: str, auc: float, lo: float, hi: float) -> dict:
    return {"n_members": 10, "n_nonmembers": 10, "strongest": best,
            "attacks": {best: {"auc": auc, "auc_ci": [lo, hi], "tpr_at_fpr": {"0.1": 0.3}},
                        "identifier_count": {"auc": 0.5, "auc_ci": [0.3, 0.7], "tpr_at_fpr": {"0.1": 0.1}}}}


VERDICTS = {"base": {"level": "green", "rule": "none", "attack": None, "figure": None, "detectable_auc": 0.74},
            "clm": {"level": "red", "rule": "membership_auc_unresolvable_fpr", "attack": "loss",
                    "figure": "AUC 0.99 [0.95, 1.00]", "detectable_auc": 0.74},
            "ppclm": {"level": "red", "rule": "membership_auc_unresolvable_fpr", "attack": "loss",
                      "figure": "AUC 0.97 [0.90, 1.00]", "detectable_auc": 0.74},
            "clm_dp": {"level": "green", "rule": "none", "attack": None, "figure": None, "detectable_auc": 0.74}}
BATTERIES = {"base": ("loss", 0.55, 0.30, 0.80), "clm": ("loss", 0.99, 0.95, 1.0), "ppclm": ("loss", 0.97, 0.90, 1.0),
             "clm_dp": ("zlib", 0.56, 0.31, 0.81)}


def make_run(tmp_path, rates: dict[str, float] = RATES) -> RunData:
    """A run of four audited models with every file the evidence reads: per-word predictions (held-out utility and
    its bootstrap), the papers' metrics, the battery and the verdicts."""
    run = RunData(path=tmp_path, label="hand-made")
    for i, (name, rate) in enumerate(rates.items()):
        epoch = 0 if name == "base" else 2
        d = tmp_path / "audit" / name / f"epoch-{epoch}"
        d.mkdir(parents=True)
        preds = _predictions(rate, seed=i)
        preds.to_parquet(d / "mia_predictions.parquet")
        preds[preds["person_id"].isin(MEMBERS)].to_parquet(d / "predictions.parquet")
        count_ci = [0.30, 0.70] if name != "clm" else [0.60, 0.90]
        run.audits[(name, epoch)] = {
            "dir": d, "roc": {"auc": 0.5 if name != "clm" else 0.75, "auc_ci": count_ci},
            "metrics": {"heldout_utility": _utility(preds), "utility": rate + 0.15,
                        "privacy": 1.0 if name == "ppclm" else 0.9}}
        label = "base (epoch 0)" if name == "base" else f"{name} (epoch {epoch})"
        run.attacks[label] = {"label": label, "strategy": name, "epoch": epoch, "dir": d, "roc": None,
                              "attacks": _battery(*BATTERIES[name]), "verdict": VERDICTS[name]}
    return run


@pytest.fixture()
def run(tmp_path):
    return make_run(tmp_path)


def test_evidence_reads_the_verdict_and_the_battery(run):
    table = evidence_table(run, n_bootstrap=200).set_index("strategy")
    for name, v in VERDICTS.items():
        assert table.loc[name, "verdict"] == v["level"] and table.loc[name, "verdict_rule"] == v["rule"]
        best, auc, lo, hi = BATTERIES[name]
        assert (table.loc[name, "strongest_attack"], table.loc[name, "attack_auc"]) == (best, auc)
        assert (table.loc[name, "attack_auc_low"], table.loc[name, "attack_auc_high"]) == (lo, hi)
        assert table.loc[name, "heldout_utility"] == run.audits[(name, 0 if name == "base" else 2)]["metrics"][
            "heldout_utility"]
    assert table.loc["ppclm", "pp"] and table.loc["clm_dp", "dp"] and not table.loc["clm", "pp"]
    assert table.loc["ppclm", "count_auc"] == 0.5 and table.loc["ppclm", "count_auc_low"] == 0.3


def test_gain_retained_by_hand_and_its_interval(run):
    table = evidence_table(run, n_bootstrap=200).set_index("strategy")
    u = {name: run.audits[(name, 0 if name == "base" else 2)]["metrics"]["heldout_utility"] for name in RATES}
    want = (u["ppclm"] - u["base"]) / (u["clm"] - u["base"])  # (U − U_base) / (U_plain − U_base), by hand
    assert table.loc["ppclm", "gain_retained"] == pytest.approx(want)
    preds = {name: pd.read_parquet(run.audits[(name, 0 if name == "base" else 2)]["dir"] / "mia_predictions.parquet")
             for name in RATES}
    _, lo, hi = heldout_gain_interval(preds["ppclm"], preds["base"], preds["clm"], HELD, n_bootstrap=200, seed=0)
    assert (table.loc["ppclm", "gain_retained_low"], table.loc["ppclm", "gain_retained_high"]) == (lo, hi)
    assert lo < want < hi
    assert table.loc["clm", "gain_retained"] == 1.0 and math.isnan(table.loc["base", "gain_retained"])
    assert table.loc["clm_dp", "gain_retained_low"] <= 0 <= table.loc["clm_dp", "gain_retained_high"]
    assert set(gain_texts(table.reset_index())) == {"ppclm", "clm_dp"}  # plain and base have no gain to show


def test_findings_say_what_the_verdict_says(run):
    table = evidence_table(run, n_bootstrap=200)
    lines = findings(table, names={"loss": "Loss"})
    for label, m in run.attacks.items():
        own = [ln for ln in lines if ln.startswith(f"{label}: verdict ")]
        assert len(own) == 1 and own[0].startswith(f"{label}: verdict {m['verdict']['level'].upper()}")
        assert "the papers' metrics: " in own[0]
    # the papers' metrics say safe for ppclm (privacy 1, count attack at chance) while the verdict is red
    clash = [ln for ln in lines if ln.startswith("ppclm (epoch 2): the papers' count attack does not tell members")]
    assert len(clash) == 1 and "Loss reaches AUC 0.97 [0.90, 1.00]" in clash[0] and "→ RED on membership" in clash[0]
    assert "protects identifiers as prediction targets, not membership" in clash[0]
    assert "(AUC 0.50 [0.30, 0.70]; identifiers' privacy 1.00)" in clash[0]
    assert not any(ln.startswith("clm (epoch 2): the papers' count attack") for ln in lines)  # count AUC > 0.5
    # a green DP model that kept nothing: weak evidence, and said
    dp = next(ln for ln in lines if ln.startswith("clm_dp (epoch 2): verdict GREEN"))
    assert 0.74 >= WEAK_DETECTABLE_AUC and "weak evidence" in dp and "not distinguishable from learning nothing" in dp
    assert any(ln.startswith("clm_dp (epoch 2) is green but kept no measurable gain") for ln in lines)
    assert not any(ln.startswith("ppclm (epoch 2) is green") for ln in lines)


def test_heldout_below_the_base_is_said(tmp_path):
    below = make_run(tmp_path / "below", {"base": 0.8, "clm": 0.6, "ppclm": 0.55, "clm_dp": 0.7})
    table = evidence_table(below, n_bootstrap=100)
    text = heldout_summary(table)
    tuned = table[table["strategy"] != "base"]["heldout_utility"]
    assert text.startswith("Every fine-tuned model's held-out utility is below the base model's")
    assert f"fine-tuned {tuned.min():.3f}–{tuned.max():.3f}" in text
    # plain fine-tuning below the base: no gain to retain, and the notes say why
    row = table.set_index("strategy").loc["clm_dp"]
    u = table.set_index("strategy")["heldout_utility"]
    assert math.isnan(row["gain_retained"]) and row["gain_note"] == (
        f"undefined: plain fine-tuning (clm) is not above the base model on held-out notes ({u['clm']:.3f} against "
        f"{u['base']:.3f}), so there is no gain to retain")
    assert "what clm, ppclm, clm_dp gained on the training notes" not in text  # their training utility is below the base's
    assert "gain retained undefined" in gain_texts(table)["clm_dp"]
    table = evidence_table(make_run(tmp_path / "above"), n_bootstrap=100)
    u = table.set_index("strategy")["heldout_utility"]
    n_above = int((u.drop("base") > u["base"]).sum())  # recounted here
    assert n_above >= 2 and heldout_summary(table).startswith(
        f"{n_above} of 3 fine-tuned models have a held-out utility above the base model's {u['base']:.3f}")


def test_evidence_without_a_battery(run):
    run.attacks.clear()
    table = evidence_table(run, n_bootstrap=50)
    assert list(table["strategy"]) == ["base", "clm", "ppclm", "clm_dp"] and table["verdict"].isna().all()
    assert all("no verdict" in ln for ln in findings(table)[:4])
    assert evidence_table(RunData(path=run.path, label="empty")).empty


def test_privacy_utility_draws_heldout_and_the_base(run):
    from toolkit.results import results_table

    results = pd.DataFrame([{"strategy": s, "epoch": e, "utility": 0.6 + e / 10, "heldout_utility": 0.5 - e / 100,
                             "privacy": 0.9, "direct_privacy": 0.95, "indirect_privacy": 0.85}
                            for s, e in (("base", 0), ("clm", 1), ("clm", 2), ("ppclm", 1), ("ppclm", 2))])
    fig = plots.privacy_utility(results, gains={"ppclm": "gain retained 3% [−9%, 14%]"})
    assert "held-out utility" in fig.layout.xaxis.title.text and "papers' metric" in fig.layout.xaxis2.title.text
    base = [t for t in fig.data if t.name == "base model (before fine-tuning)"]
    assert len(base) == 2 and list(base[0].x) == [0.5] and list(base[1].x) == [0.6]
    assert "ppclm (gain retained 3% [−9%, 14%])" in {t.name for t in fig.data}
    clm = next(t for t in fig.data if t.name == "clm" and t.xaxis == "x")
    assert list(clm.x) == [0.49, 0.48]  # held-out utility on the left panel
    variants = plots.privacy_variants(results)
    assert variants.layout.xaxis.title.text == "held-out utility"
    assert sum(t.name == "base model (before fine-tuning)" for t in variants.data) == 3
    old = plots.privacy_utility(results.drop(columns="heldout_utility"))  # runs audited before held-out utility
    assert "not measured" in old.layout.title.text and any(t.name.startswith("base") for t in old.data)
    assert len(results_table({})) == 0


def test_roc_axes_toggle_and_unresolvable_columns():
    rocs = {"clm": {"fpr": [0, 0.5, 1], "tpr": [0, 0.9, 1], "auc": 0.8, "n_members": 24, "n_nonmembers": 24,
                    "tpr_at_fpr": {"0.001": None, "0.01": None, "0.1": 0.5}},
            "ppclm": {"fpr": [0, 1], "tpr": [0, 1], "auc": 0.5, "n_members": 24, "n_nonmembers": 24,
                      "tpr_at_fpr": {"0.001": None, "0.01": None, "0.1": 0.1}}}
    fig = plots.roc_curves(rocs, log=False)
    assert fig.layout.xaxis.type == "linear" and fig.layout.yaxis.type == "linear"
    buttons = fig.layout.updatemenus[0].buttons
    assert [b.label for b in buttons] == ["linear axes", "log axes"] and buttons[1].args[0]["xaxis.type"] == "log"
    assert plots.roc_curves(rocs).layout.xaxis.type == "log"
    table = plots.tpr_table(rocs, drop_unresolvable=True)
    assert list(table.columns) == ["TPR @ FPR 10%", "AUC"]
    note = plots.tpr_table_note(rocs)
    assert "0.1%, 1%" in note and "24 non-members" in note and "4.2%" in note  # 1/24
    assert list(plots.tpr_table(rocs).columns) == ["TPR @ FPR 0.1%", "TPR @ FPR 1%", "TPR @ FPR 10%", "AUC"]
    rocs["clm"]["tpr_at_fpr"]["0.01"] = 0.2  # one model resolves 1%: the column stays
    assert "TPR @ FPR 1%" in plots.tpr_table(rocs, drop_unresolvable=True).columns


def test_privacy_utility_explorer_menu_and_slider():
    from toolkit.plots.widgets import privacy_utility_explorer

    results = pd.DataFrame([{"strategy": s, "epoch": e, "utility": 0.6 + e / 10, "heldout_utility": 0.5 - e / 100,
                             "privacy": 0.9 - e / 100, "mia_auc": 0.5}
                            for s, e in (("base", 0), ("clm", 1), ("clm", 2), ("ppclm", 1), ("ppclm", 2))])
    fig = privacy_utility_explorer(results, gains={"ppclm": "gain retained 50%"})
    menu = fig.layout.updatemenus[0].buttons
    assert [b.label for b in menu] == ["every strategy", "clm", "ppclm"]
    only = dict(zip([t.name for t in fig.data], menu[2].args[0]["visible"]))
    assert only["ppclm (gain retained 50%)"] and only["base model (before fine-tuning)"] and not only["clm"]
    steps = fig.layout.sliders[0].steps
    assert [s.label for s in steps] == ["1", "2"] and fig.layout.sliders[0].active == 1
    (restyle, indices) = steps[0].args
    clm_left = indices.index(next(i for i, t in enumerate(fig.data) if t.name == "clm" and t.xaxis == "x"))
    assert restyle["x"][clm_left] == [0.49] and restyle["y"][clm_left] == [0.89]  # held-out utility at epoch 1
    assert all(fig.data[i].legendgroup != "base" for i in indices)  # the base point stays


def test_disagreement_on_another_rule_names_it(run):
    from toolkit.results.evidence import disagreement

    row = evidence_table(run, n_bootstrap=50).set_index("strategy").loc["ppclm"].copy()
    row["model"], row["verdict_rule"] = "ppclm (epoch 2)", "regurgitation"
    text = disagreement(row, {"loss": "Loss"})
    assert text == ("ppclm (epoch 2): the papers' count attack does not tell members from non-members (AUC 0.50 "
                    "[0.30, 0.70]), but the verdict is RED by another rule (regurgitation) and Loss reaches AUC 0.97 "
                    "[0.90, 1.00].")
    row["verdict"] = "green"
    assert disagreement(row, {}) is None
