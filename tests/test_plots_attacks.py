"""Figures and tables of the attack battery, and the colour rules shared by every figure."""

from __future__ import annotations

import pandas as pd
import pytest
from _attack_fixtures import battery, identifiers

from toolkit import plots
from toolkit.plots.attacks import ATTACK_COLORS, ATTACK_NAMES, attack_roc, attack_roc_grid, attacks_table, auc_matrix


@pytest.fixture(scope="module")
def causal():
    return battery(1.0, n=30, seed=1)


@pytest.fixture(scope="module")
def masked():
    return battery(0.0, n=30, attacks=("loss", "zlib", "min_k", "identifier_count"), seed=2)


def test_attack_roc_one_curve_per_attack(causal, masked):
    styles = {}
    for res in (causal, masked):
        fig = attack_roc(res.roc_curves, "model", attacks=res.to_json())
        curves = [t for t in fig.data if not t.name.startswith("chance")]
        assert [t.name.split(" (AUC")[0] for t in curves] == [ATTACK_NAMES[a] for a in res.reports]
        assert [t.line.color for t in curves] == [ATTACK_COLORS[a] for a in res.reports]
        assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
        assert fig.layout.title.text == "model"
        assert min(curves[0].x) == pytest.approx(1 / 60)  # FPR 0 drawn at 1/(2·30 non-members)
        for t in curves:  # an attack looks the same in every figure, whatever else is drawn
            style = (t.line.color, t.line.width, t.marker.symbol)
            assert styles.setdefault(t.name.split(" (AUC")[0], style) == style
    # curves that coincide stay visible: each drawn narrower than the one before, with another marker
    widths = [t.line.width for t in fig.data[:-1]]
    assert widths == sorted(widths, reverse=True) and len(set(widths)) == len(widths)
    assert len({t.marker.symbol for t in fig.data[:-1]}) == len(widths)


def test_attacks_table_n_r_and_strongest(causal, masked):
    t = attacks_table(causal.to_json())
    assert list(t.columns) == ["strongest", "AUC [95% CI]", "TPR @ FPR 0.1%", "TPR @ FPR 1%", "TPR @ FPR 10%"]
    assert list(t.index) == [ATTACK_NAMES[a] for a in causal.reports]
    assert (t["TPR @ FPR 0.1%"] == "n/r").all()  # 30 non-members cannot resolve 0.1%
    assert not (t["TPR @ FPR 10%"] == "n/r").any()
    assert t.loc[ATTACK_NAMES[causal.strongest], "strongest"] == "◀ strongest"
    assert (t["strongest"] != "").sum() == 1
    lo, hi = causal.reports["loss"]["auc_ci"]
    assert t.loc["Loss", "AUC [95% CI]"] == f"{causal.reports['loss']['auc']:.3f} [{lo:.3f}, {hi:.3f}]"
    assert "Min-K%++" not in attacks_table(masked.to_json()).index
    m = auc_matrix({"causal": {"attacks": causal.to_json()}, "masked": {"attacks": masked.to_json()}})
    assert m.loc["masked", "Min-K%++"] == "—" and m.loc["masked", "Reference model"] == "—"
    assert m.loc["causal", "strongest"] == ATTACK_NAMES[causal.strongest]


def test_attack_roc_grid_one_legend_entry_per_attack(causal, masked):
    models = {"clm (epoch 8)": {"roc": causal.roc_curves, "attacks": causal.to_json()},
              "ppmlm (epoch 2)": {"roc": masked.roc_curves, "attacks": masked.to_json()}}
    fig = attack_roc_grid(models)
    shown = [t.name for t in fig.data if t.showlegend]
    assert len(shown) == len(set(shown)) == len(causal.reports) + 1  # every attack once, and chance
    assert {t.line.color for t in fig.data if t.name == "Loss"} == {ATTACK_COLORS["loss"]}
    assert [a.text for a in fig.layout.annotations] == list(models)
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis2.type == "log"
    bars = plots.strongest_auc_figure(models, detectable={"clm (epoch 8)": 0.65})
    assert [t.marker.color for t in bars.data if t.type == "bar"] == [plots.strategy_color("clm"),
                                                                      plots.strategy_color("ppmlm")]


def test_identifier_tables():
    ids = identifiers(0.3, canary_max=20.0)
    pii = plots.pii_table(ids["pii_inference"])
    assert list(pii.index) == ["DATE", "NAME", "all categories"] and pii.loc["NAME", "top-1"] == 0.3
    assert pii.loc["all categories", "top-1 ÷ chance"] == pytest.approx(6.0)
    no_ref = plots.pii_table(identifiers(0.3, reference_top1=None)["pii_inference"])
    assert (no_ref["reference model top-1"] == "not measured").all()
    can = plots.canary_table(ids["canaries"])
    assert list(can.index) == [1, 4, 16] and can.loc[16, "max exposure"] == pytest.approx(20.0)
    assert plots.pii_table({}) is None and plots.canary_table({}) is None


def test_strategy_colours_do_not_depend_on_what_else_is_drawn():
    one = plots.strategy_colors(["ppclm"])
    many = plots.strategy_colors(["base", "clm", "clm_pseudo", "ppclm", "clm_dp"])
    assert one["ppclm"] == many["ppclm"] == plots.strategy_color("ppclm (epoch 8)")
    assert plots.strategy_color("03 causal LM: ppclm") == many["ppclm"]
    assert len(set(many.values())) == len(many)
    assert plots.strategy_color("rmft") == plots.strategy_color("rmft")  # others: a stable colour by name
    points = pd.DataFrame([{"strategy": s, "epoch": e, "utility": 0.5 + e / 10, "privacy": p - e / 100,
                            "direct_privacy": p, "indirect_privacy": p - e / 50}
                           for s, p in (("clm", 0.9), ("ppclm", 0.99)) for e in (1, 2)])
    only = plots.privacy_utility(points[points["strategy"] == "ppclm"])
    both = plots.privacy_utility(points)
    assert only.data[0].line.color == both.data[1].line.color == many["ppclm"]


def test_privacy_variant_panels_share_the_y_axis():
    points = pd.DataFrame([{"strategy": "mlm", "epoch": e, "utility": 0.5, "privacy": 0.9, "direct_privacy": 0.99,
                            "indirect_privacy": 0.7 + e / 100} for e in (1, 2)])
    fig = plots.privacy_variants(points)
    assert fig.layout.yaxis2.matches == "y" and fig.layout.yaxis3.matches == "y"
    lo, hi = fig.layout.yaxis.range
    assert lo < 0.71 and hi > 0.99


def test_regurgitation_legend_counts():
    t = pd.DataFrame({"term": ["a", "b", "c"], "train_frequency": [1, 2, 5], "n_predicted": [3, 1, 0],
                      "n_predicted_correct": [1, 1, 0]})
    fig = plots.regurgitation_cdf({"clm (epoch 8)": t})
    assert fig.data[0].name == "clm (epoch 8) (4 predictions of 2 leaked types)"
    assert list(fig.data[0].y) == pytest.approx([0.75, 1.0])
    assert [row[0] for row in fig.data[0].customdata] == pytest.approx([3, 4])  # the counts beside the shares
    assert fig.data[0].line.color == plots.strategy_color("clm")


def _protection_rows():
    cols = ["strategy", "privacy", "novel privacy", "utility", "held-out utility", "membership AUC",
            "PII inference top-1", "PII chance", "PII reference top-1"]
    rows = {"base": ["base", 0.97, 1.0, 0.30, 0.31, 0.60, 0.19, 0.1, None],
            "ppclm (epoch 12)": ["ppclm", 0.99, 1.0, 0.80, 0.50, 1.0, 0.25, 0.1, 0.19],
            "ppclm_surrogate (epoch 12)": ["ppclm_surrogate", 0.98, 1.0, 0.60, 0.45, 0.97, 0.20, 0.1, 0.19]}
    return pd.DataFrame.from_dict(rows, orient="index", columns=cols)


def test_protection_findings_are_computed_from_the_table():
    from toolkit.results.tables import protection_findings

    lines = protection_findings(_protection_rows())
    assert "ppclm (epoch 12): PII inference top-1 0.250 = 2.5× chance (0.100), above twice chance" in lines
    assert ("ppclm_surrogate (epoch 12): PII inference top-1 0.200 = 2.0× chance (0.100), within twice chance"
            in lines)  # 2× is within
    assert ("ppclm_surrogate (epoch 12) against ppclm (epoch 12): utility 0.600 vs 0.800 on training notes "
            "(0.75×); 0.450 vs 0.500 on held-out notes (0.90×)") in lines
    assert not any(ln.startswith("ppclm (epoch 12) against") for ln in lines)  # PP is the reference, not compared
    assert not any("against" in ln for ln in protection_findings(_protection_rows().drop(index="ppclm (epoch 12)")))
    assert protection_findings(pd.DataFrame()) == []


def test_protection_figure_shows_both_utilities():
    fig = plots.protection_figure(_protection_rows())
    panels = [a.text for a in fig.layout.annotations]
    assert len(panels) == 4 and panels[3].startswith("utility")
    held = [t for t in fig.data if t.hovertemplate.startswith("held-out")]
    assert [(t.x[0], t.y[0]) for t in held] == [("base", 0.31), ("ppclm (epoch 12)", 0.50),
                                                ("ppclm_surrogate (epoch 12)", 0.45)]
    bars = [t for t in fig.data if t.type == "bar" and t.xaxis == "x4"]
    assert [t.y[0] for t in bars] == [0.30, 0.80, 0.60]
