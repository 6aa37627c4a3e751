"""The frontier (issue 27): its config, the table built from run results, the figure, and one tiny run end to end."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pandas as pd
import pytest
import yaml

from toolkit.errors import ToolkitError
from toolkit.pipelines.frontier import (FrontierPoint, FrontierResult, best_recipes, experiment_for, frontier_table,
                                        load_frontier, share_steps)
from toolkit.plots.frontier import GREEN_AUC, frontier_figure
from toolkit.results.frontier import GAIN_GOAL

ROOT = Path(__file__).resolve().parents[1]
NOTES = ROOT / "data_samples" / "clinical" / "notes.jsonl"


def point(size, eps, strategy, heldout, *, utility=0.5, aucs=(0.9, 0.7), tprs=(0.4, 0.2), verdict="red",
          pii=(0.2, 0.05), exposures=(3.0, 21.5), one_run=None, spent=None) -> FrontierPoint:
    """A model as a run would have written it: two attacks, PII inference, canaries, one-run audit, DP block."""
    battery = {"strongest": "loss" if aucs[0] >= aucs[1] else "zlib",
               "attacks": {"loss": {"auc": aucs[0], "tpr_at_fpr": {"0.01": tprs[0], "0.1": 0.9}},
                           "zlib": {"auc": aucs[1], "tpr_at_fpr": {"0.01": tprs[1], "0.1": 0.9}}}}
    if one_run is not None:
        battery["one_run"] = {"epsilon_lower_bound": one_run, "confidence": 0.95}
    identifiers = {"pii_inference": {"overall": {"top1": pii[0], "chance": pii[1]}},
                   "canaries": {"by_repeats": {str(r): {"max": e} for r, e in zip((1, 16), exposures)}}}
    dp = None if spent is None else {"unit": "individual", "spent_epsilon": spent, "target_epsilon": eps}
    return FrontierPoint(size=size, epsilon=eps, strategy=strategy, epoch=8, utility=utility,
                         heldout_utility=heldout, battery=battery, identifiers=identifiers,
                         verdict={"level": verdict, "rule": "none" if verdict == "green" else "membership_tpr"},
                         dp=dp, run_dir=f"size-{size}")


def fake_points() -> list[FrontierPoint]:
    inf = math.inf
    return [point(100, inf, "clm", 0.25, utility=0.6), point(100, inf, "ppclm_surrogate", 0.18, utility=0.4),
            point(100, 8.0, "ppclm_surrogate_dp", 0.10, aucs=(0.52, 0.50), tprs=(0.0, 0.01), verdict="green",
                  pii=(0.05, 0.05), exposures=(2.0, 4.0), one_run=0.3, spent=7.9),
            point(1000, inf, "clm", 0.40), point(1000, 16.0, "ppclm_surrogate_dp", 0.38, aucs=(0.51, 0.53),
                                                  verdict="green", spent=15.8),
            point(1000, 4.0, "ppclm_surrogate_dp", 0.30, aucs=(float("nan"),) * 2, verdict="incomplete",
                  spent=3.9)]


def test_table_reads_every_figure_and_divides_by_plain_at_the_same_size():
    t = frontier_table(fake_points())
    assert list(t[["size", "strategy", "epsilon"]].itertuples(index=False, name=None))[:3] == \
        [(100, "clm", math.inf), (100, "ppclm_surrogate", math.inf), (100, "ppclm_surrogate_dp", 8.0)]
    row = t[(t["size"] == 100) & (t["strategy"] == "ppclm_surrogate")].iloc[0]
    assert row["heldout_utility_vs_plain"] == pytest.approx(0.18 / 0.25)
    assert row["utility_vs_plain"] == pytest.approx(0.4 / 0.6)
    assert row["strongest_attack"] == "loss" and row["attack_auc"] == 0.9
    assert row["attack_tpr_at_1pct_fpr"] == 0.4  # the largest over the battery's attacks
    assert (row["pii_top1"], row["pii_chance"], row["canary_max_exposure"]) == (0.2, 0.05, 21.5)
    assert pd.isna(row["empirical_epsilon"]) and pd.isna(row["accountant_epsilon"]) and not row["dp"]
    dp = t[(t["size"] == 100) & (t["strategy"] == "ppclm_surrogate_dp")].iloc[0]
    assert dp["dp"] and dp["accountant_epsilon"] == 7.9 and dp["empirical_epsilon"] == 0.3
    assert dp["heldout_utility_vs_plain"] == pytest.approx(0.4) and dp["attack_tpr_at_1pct_fpr"] == 0.01
    big = t[t["size"] == 1000].set_index("epsilon")
    assert big.loc[16.0, "heldout_utility_vs_plain"] == pytest.approx(0.95)  # 1000's clm, not 100's
    assert big.loc[4.0, "strongest_attack"] == "zlib" and pd.isna(big.loc[4.0, "attack_auc"])  # as recorded
    assert t["size"].is_monotonic_increasing and len(t) == 6


def test_best_recipe_per_size_is_the_green_model_keeping_the_most_gain_and_the_saved_files(tmp_path):
    """best_recipes ranks the green models by gain retained against GAIN_GOAL (50%), never by the ratio to plain."""
    t = frontier_table(with_base(fake_points(), {100: 0.05, 1000: 0.30}))
    best = best_recipes(t)
    # 1,000: (0.38 − 0.30) / (0.40 − 0.30) = 80% ≥ 50%: found
    assert best[1000]["found"] is True and best[1000]["strategy"] == "ppclm_surrogate_dp"
    assert best[1000]["epsilon"] == 16.0 and best[1000]["heldout_gain_retained"] == pytest.approx(0.8)
    assert best[1000]["verdict"] == "green" and best[1000]["attack_auc"] == 0.53 and best[1000]["gain_defined"]
    # 100: the only green model keeps (0.10 − 0.05) / (0.25 − 0.05) = 25%: named, short of the goal
    assert best[100]["found"] is False and best[100]["strategy"] == "ppclm_surrogate_dp"
    assert best[100]["heldout_gain_retained"] == pytest.approx(0.25)
    # a green model at 0.95× plain that keeps 40% of the gain is short of the goal; at 55% it reaches it
    t2 = t.copy()
    t2.loc[(t2["size"] == 1000) & (t2["epsilon"] == 16.0), "heldout_gain_retained"] = GAIN_GOAL - 0.1
    assert best_recipes(t2)[1000]["found"] is False
    assert best_recipes(t2, min_gain=0.3)[1000]["found"] is True
    # without a base (gain undefined) nothing is found, whatever the ratio to plain (0.95×)
    bare = best_recipes(frontier_table(fake_points()))
    assert bare[1000]["found"] is False and bare[1000]["gain_defined"] is False
    assert bare[1000]["heldout_utility_vs_plain"] == pytest.approx(0.95)
    FrontierResult(t, [], {"size-100/eps-inf": 1.5}).save(tmp_path)
    saved = json.loads((tmp_path / "frontier.json").read_text())
    assert [r["epsilon"] for r in saved["rows"] if r["strategy"] == "clm"] == [None, None]  # ∞ written as null
    assert saved["best"]["1000"]["found"] is True and saved["seconds"] == {"size-100/eps-inf": 1.5}
    assert len(pd.read_csv(tmp_path / "frontier.csv")) == 6


def test_figure_marker_per_strategy_line_per_size_green_region():
    t = frontier_table(with_base(fake_points(), {100: 0.05, 1000: 0.30}))
    fig = frontier_figure(t)
    assert "gain retained" in fig.layout.yaxis.title.text
    lines = [tr for tr in fig.data if tr.mode == "lines"]
    markers = {tr.name: tr for tr in fig.data if "markers" in tr.mode}
    assert [tr.name for tr in lines] == ["100 individuals", "1000 individuals"]
    assert set(markers) == {"clm", "ppclm_surrogate", "ppclm_surrogate_dp"}
    assert len({tr.marker.symbol for tr in markers.values()}) == 3
    assert len(markers["ppclm_surrogate_dp"].x) == 2  # the row without an AUC is left out
    assert "ε=∞" in markers["clm"].text and "ε=16" in markers["ppclm_surrogate_dp"].text
    (rect,) = [sh for sh in fig.layout.shapes if sh.type == "rect"]
    assert rect.x1 == GREEN_AUC and rect.y0 == GAIN_GOAL and rect.x0 < 0.5  # the goal: gain retained ≥ 50%
    assert any(f"gain retained ≥ {GAIN_GOAL:.0%}" in a.text for a in fig.layout.annotations)
    hover = markers["ppclm_surrogate_dp"].hovertext
    assert any("gain retained 25%" in h and "held-out utility 0.100" in h and "training notes" in h for h in hover)
    # a size whose gain is undefined is not drawn on the gain view, and the figure says so in words
    undefined = frontier_figure(frontier_table(with_base(fake_points(), {100: 0.05})))
    assert any("1000 individuals" in a.text and "undefined" in a.text for a in undefined.layout.annotations)
    # the held-out utility view: no goal region, the utility itself on y
    u = frontier_figure(t, y_col="heldout_utility")
    assert not [sh for sh in u.layout.shapes if sh.type == "rect"] and "held-out utility" in u.layout.yaxis.title.text
    with pytest.raises(ValueError):
        frontier_figure(t, y_col="utility")


def write(tmp_path, **changes) -> Path:
    raw = yaml.safe_load((ROOT / "configs" / "frontier.yaml").read_text())
    raw.update(changes)
    p = tmp_path / "f.yaml"
    p.write_text(yaml.safe_dump(raw))
    return p


def test_config_plans_plain_strategies_once_and_dp_ones_per_epsilon(tmp_path):
    cfg = load_frontier(ROOT / "configs" / "frontier.yaml")
    runs = cfg.runs()
    assert [(s, e) for s, e, _ in runs][:5] == [(100, math.inf), (100, 1.0), (100, 4.0), (100, 8.0), (100, 16.0)]
    private = ["clm_dp", "ppclm_surrogate_dp", "clm_dp_lora4", "clm_dp_lora", "clm_dp_lora16", "ppclm_surrogate_dp_lora",
               "clm_dp_pdp", "clm_dp_gep", "ppclm_surrogate_dp_gep", "clm_dp_user", "clm_dp_gep_user"]
    assert runs[0][2] == ["clm", "ppclm", "ppclm_surrogate"] and runs[1][2] == private
    exp = experiment_for(cfg, 100, 4.0, runs[1][2], NOTES, prebuilt=tmp_path / "bases")
    assert exp.corpus.n_individuals == 100 and exp.training.schedule["dp"]["epsilon"] == 4.0
    assert exp.training.strategies == private and exp.model.prebuilt
    assert "dp" not in experiment_for(cfg, 100, math.inf, runs[0][2], NOTES).training.schedule
    for changes, message in (({"strategies": ["ppclm", "clm_dp"]}, "needs clm"),
                             ({"epsilons": [1, 8]}, "needs clm"), ({"strategies": ["clm", "nope"]}, "unknown"),
                             ({"strategies": ["clm", "mlm"]}, "trains a mlm model"),
                             ({"sizes": [1]}, "sizes"), ({"epsilons": [0, ".inf"]}, "epsilons"),
                             ({"colour": 1}, "unknown key")):
        with pytest.raises(ToolkitError, match=message):
            load_frontier(write(tmp_path, **changes))


def test_a_template_schedule_reaches_only_the_runs_that_train_its_strategy(tmp_path):
    """A frontier may name a DP strategy's own values in its template (a search's result of another size): the
    ε = ∞ run, which trains no DP strategy, must load (it raised "unknown key(s)" before), each DP run gets the
    values of the strategies it trains, and the search's choice overrides a template value key by key."""
    raw = yaml.safe_load((ROOT / "configs" / "frontier.yaml").read_text())
    raw["experiment"]["training"]["strategy_schedules"] = {"clm_dp_gep": {"learning_rate": 5.0e-4, "batch_size": 4},
                                                           "clm_dp": {"learning_rate": 1.5e-3}}
    path = tmp_path / "f.yaml"
    path.write_text(yaml.safe_dump(raw))
    cfg = load_frontier(path)
    assert experiment_for(cfg, 100, math.inf, ["clm", "ppclm"], NOTES).training.strategy_schedules == {}
    exp = experiment_for(cfg, 100, 8.0, ["clm_dp", "clm_dp_gep", "clm_dp_pdp"], NOTES,
                         schedules={"clm_dp_gep": {"learning_rate": 1.5e-4}, "clm_dp_pdp": {"learning_rate": 5.0e-5}})
    assert exp.training.strategy_schedules == {"clm_dp": {"learning_rate": 1.5e-3},
                                               "clm_dp_gep": {"learning_rate": 1.5e-4, "batch_size": 4},
                                               "clm_dp_pdp": {"learning_rate": 5.0e-5}}
    assert experiment_for(cfg, 100, 8.0, ["clm_dp_pdp"], NOTES).training.strategy_schedules == {}
    for given, message in (({"clm_dp_gepp": {"learning_rate": 1.0e-4}}, "'clm_dp_gepp' is not among"),
                           ({"clm_dp": 1.0e-4}, r"strategy_schedules\.clm_dp: must be a mapping"),
                           ([1], "must be a mapping")):
        raw["experiment"]["training"]["strategy_schedules"] = given
        path.write_text(yaml.safe_dump(raw))
        with pytest.raises(ToolkitError, match=message):
            experiment_for(load_frontier(path), 100, math.inf, ["clm"], NOTES)


def test_finished_steps_no_strategy_owns_are_shared_between_the_runs_of_a_size(tmp_path):
    src, dst = tmp_path / "eps-inf", tmp_path / "eps-8"

    def step(rel, status="done", extra="x"):
        d = src / rel
        d.mkdir(parents=True)
        (d / "step.json").write_text(json.dumps({"status": status, "key": rel}))
        (d / "out.txt").write_text(extra)

    for rel in ("identifiers_members", "canaries", "rmia_references", "attacks/base", "regurgitation/base",
                "runs/clm", "attacks/clm", "regurgitation/ppclm", "audit/ppclm_surrogate_dp"):
        step(rel)
    step("identifiers_all", status="running")
    (src / "rmia_references" / "ref-0").mkdir()
    (src / "rmia_references" / "ref-0" / "step.json").write_text(json.dumps({"status": "done", "key": "inner"}))
    (dst / "canaries").mkdir(parents=True)  # already there: left as it is
    copied = share_steps(src, dst, ["clm", "ppclm", "ppclm_surrogate_dp"])
    assert sorted(copied) == ["attacks/base", "identifiers_members", "regurgitation/base", "rmia_references"]
    assert (dst / "rmia_references" / "ref-0" / "step.json").is_file() and not (dst / "canaries" / "out.txt").exists()
    assert not (dst / "runs").exists() and not (dst / "attacks" / "clm").exists()
    assert not (dst / "identifiers_all").exists() and not (dst / "audit").exists()


def test_sizes_option_keeps_the_config_and_refuses_a_size_it_lacks():
    from toolkit.cli.frontier import with_sizes

    cfg = load_frontier(ROOT / "configs" / "frontier.yaml")
    one = with_sizes(cfg, "100")
    assert one.sizes == (100,) and one.epsilons == cfg.epsilons and one.experiment == cfg.experiment
    with pytest.raises(ToolkitError, match="--sizes '7'"):
        with_sizes(cfg, "7")
    with pytest.raises(ToolkitError, match="--sizes"):
        with_sizes(cfg, "a,b")
    from toolkit.cli.frontier import with_epsilons

    sliced = with_epsilons(one, "8,inf")
    assert [(s, e) for s, e, _ in sliced.runs()] == [(100, math.inf), (100, 8.0)]
    for bad in ("8", "3,inf", "x"):
        with pytest.raises(ToolkitError, match="--epsilons"):
            with_epsilons(cfg, bad)


@pytest.mark.slow
def test_tiny_frontier_end_to_end(tmp_path):
    from toolkit.cli import main

    experiment = {"profile": "cpu", "seed": 0,
                  "corpus": {"public_split": "public", "member_split": "train", "nonmember_split": "heldout",
                             "n_public": 8},
                  "identifiers": {"detector": "oracle", "k": 2, "n": 1},
                  "model": {"kind": "clm", "architecture": {"vocab_size": 600, "hidden_size": 32, "num_layers": 1,
                                                            "intermediate_size": 64},
                            "pretrain": {"epochs": [1]}},
                  "training": {"epochs": [1], "max_length": 128},
                  "audit": {"checkpoints": "last", "base_model": False, "n_bootstrap": 0, "max_length": 128,
                            "attacks": {"pii_candidates": 4, "pii_occurrences": 10, "pii_window": 32, "window": 128,
                                        "memorisation_occurrences": 10, "rmia_references": 0,
                                        "one_run_canaries": 0}}}
    cfg = {"name": "tiny", "sizes": [6], "epsilons": [8, ".inf"], "strategies": ["clm", "ppclm_surrogate_dp"],
           "corpus": {"path": str(NOTES)}, "experiment": experiment}
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(cfg).replace("'.inf'", ".inf"))
    assert main(["frontier", str(path), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    t = pd.read_csv(tmp_path / "out" / "frontier.csv")
    assert list(zip(t["strategy"], t["epsilon"])) == [("clm", math.inf), ("ppclm_surrogate_dp", 8.0)]
    dp = t.set_index("strategy").loc["ppclm_surrogate_dp"]
    assert 0 < dp["accountant_epsilon"] <= 8.0 + 1e-6 and 0 <= dp["attack_auc"] <= 1
    (run_json,) = (tmp_path / "out").glob("size-6/eps-8/**/ppclm_surrogate_dp/run.json")
    block = json.loads(run_json.read_text())["dp"]  # the training's own record, read independently
    assert dp["noise_to_signal"] == pytest.approx(block["noise_multiplier"] * math.sqrt(block["noised_parameters"])
                                                  / block["expected_batch_size"])
    plain = t.set_index("strategy").loc["clm"]
    assert math.isnan(plain["noise_to_signal"])
    assert plain["heldout_utility_vs_plain"] == pytest.approx(1.0) if plain["heldout_utility"] > 0 else \
        math.isnan(dp["heldout_utility_vs_plain"])  # a tiny 1-epoch model may guess no held-out word at all
    if plain["heldout_utility"] > 0:
        assert dp["heldout_utility_vs_plain"] == pytest.approx(dp["heldout_utility"] / plain["heldout_utility"])
    assert 0 <= dp["heldout_utility"] <= 1 and (tmp_path / "out" / "frontier.html").is_file()
    # the DP run fine-tuned the base the first run built, and reused its identifier tables: copied in
    # (share_steps), found current by their keys, not computed again
    manifest = json.loads((tmp_path / "out" / "size-6" / "eps-8" / "manifest.json").read_text())
    statuses = {s["name"]: s["status"] for s in manifest["steps"]}
    assert statuses["base"] == "cached" and statuses["identifiers_members"] == "cached", statuses


def test_report_shows_a_frontier_directory(tmp_path):
    """`toolkit report FRONTIER_DIR`: the frontier section with its figure, one row per model read back from
    frontier.json (ε = ∞ survives the round trip), and the best recipe per size in words: the green model keeping
    the most of plain's held-out gain, against the goal of 50% (never 0.9× plain, the retired goal)."""
    from toolkit.report.render import build_report
    from toolkit.results.frontier import load_frontier_result

    table = frontier_table(with_base(fake_points(), {100: 0.05, 1000: 0.30}))
    FrontierResult(table, [], {"size-100/eps-inf": 60.0, "size-100/eps-8": 60.0}).save(tmp_path / "f")
    back = load_frontier_result(tmp_path / "f")
    assert back.table["epsilon"].tolist() == table["epsilon"].tolist() and len(back.table) == len(table)
    assert back.best[100]["strategy"] == "ppclm_surrogate_dp" and back.best[100]["found"] is False
    html = build_report([tmp_path / "f"], tmp_path / "r.html").read_text(encoding="utf-8")
    assert "Privacy–utility frontier" in html and "6 models in 2 runs (2 min of run time)" in html
    assert "100 individuals: no green model reaches the goal of 50%; the green one that keeps the most is " \
           "ppclm_surrogate_dp at ε = 8: 25.0% of clm&#39;s held-out gain (held-out utility 0.100), short of the " \
           "goal of 50% by 25.0 points" in html
    assert "1000 individuals: ppclm_surrogate_dp at ε = 16 is green under every attack and keeps 80.0% of " \
           "clm&#39;s held-out gain (held-out utility 0.380), reaching the goal of 50%" in html
    assert "0.9×" not in html and "does one keep at least 50%?" in " ".join(html.split())
    assert html.count("<tr") == len(table) + 1 and "plotly" in html
    with pytest.raises(ToolkitError, match="frontier.json"):
        load_frontier_result(tmp_path)


@pytest.mark.slow
def test_table_only_reads_the_finished_runs_back(tmp_path):
    """`--table-only` after a frontier: the same table from the run directories alone (RunLayout), nothing trained;
    and with one run's verdict removed (unfinished), that model is left out."""
    from toolkit.cli import main

    test_tiny_frontier_end_to_end(tmp_path)
    out = tmp_path / "out"
    full = pd.read_csv(out / "frontier.csv")
    (out / "frontier.csv").unlink()
    path = tmp_path / "tiny.yaml"
    assert main(["frontier", str(path), "--out", str(out), "--quiet", "--table-only"]) == 0
    again = pd.read_csv(out / "frontier.csv")
    pd.testing.assert_frame_equal(full, again)
    for v in (out / "size-6" / "eps-8" / "attacks").glob("*/epoch-*/verdict.json"):
        v.unlink()
    assert main(["frontier", str(path), "--out", str(out), "--quiet", "--table-only"]) == 0
    assert pd.read_csv(out / "frontier.csv")["strategy"].tolist() == ["clm"]


@pytest.mark.slow
def test_notebook_07_reads_a_frontier_and_writes_its_report(tmp_path):
    from test_notebooks import execute

    FrontierResult(frontier_table(fake_points()), [], {"size-100/eps-inf": 60.0}).save(tmp_path / "f")
    report = tmp_path / "frontier.html"
    text = execute(tmp_path, "07_privacy_utility_frontier.ipynb",
                   {"frontier_dir": str(tmp_path / "f"), "report_path": str(report)})
    assert "6 models, corpus sizes [100, 1000]" in text and "Report written" in text
    assert "wrongly accusing few" in text  # the rule in plain words
    # the current question (gain retained), not the retired 0.9x one; the rows' rules stated (issue 55, problem 8)
    assert "no green model reaches 0.9" not in text and "private models are green; the one that keeps the most" in text
    assert "**0 of 6** rows were judged under older rules" in text
    assert "Every verdict is the current rules' answer" in text
    assert "Exercise 1." in text or "gain retained grows with ε" in text
    assert "Privacy–utility frontier" in report.read_text(encoding="utf-8")


def test_shipped_frontier_reads_back():
    """Notebook 07's default: the frontier measured and shipped in docs/data/frontier (docs/results.md says when)."""
    from toolkit.results.frontier import load_frontier_result

    res = load_frontier_result(ROOT / "docs" / "data" / "frontier")
    assert len(res.table) and set(res.table["strategy"]) >= {"clm", "clm_dp"} and res.best


def test_table_only_times_a_sliced_frontier_as_one_run():
    """--table-only's seconds: a step found cached counts the time it took when it ran, a step shared between runs
    (the same key: a finite ε's copy of the ε = ∞ run's base, identifiers …) once, a keyless step its own time."""
    from toolkit.pipelines.frontier import _compute_seconds

    counted = set()
    inf = [{"name": "base", "key": "b", "status": "cached", "seconds": 0.0, "original_seconds": 100.0},
           {"name": "data", "key": None, "status": "ran", "seconds": 0.5},
           {"name": "train/clm", "key": "c", "status": "ran", "seconds": 60.0}]
    eps8 = [{"name": "base", "key": "b", "status": "cached", "seconds": 0.0, "original_seconds": 100.0},
            {"name": "data", "key": None, "status": "ran", "seconds": 0.5},
            {"name": "train/clm_dp", "key": "d", "status": "cached", "seconds": 0.0, "original_seconds": 30.0}]
    assert _compute_seconds(inf, counted) == 160.5 and _compute_seconds(eps8, counted) == 30.5


# --- gain retained: (U − U_base) / (U_plain − U_base) beside the ratio to plain

def with_base(points, base):
    """``points`` as runs that also audited the base model: its held-out utility per size (``base``)."""
    for p in points:
        p.base_heldout_utility = base.get(p.size)
    return points


def test_gain_retained_by_hand_and_undefined_without_a_gain():
    from toolkit.results.frontier import GAIN_UNDEFINED, gain_retained

    # docs/results.md, 1,000 individuals: base 0.651, plain 0.789, best DP 0.665 → 0.014 / 0.138
    assert gain_retained(0.665, 0.651, 0.789) == pytest.approx(0.10144927536, rel=1e-9)
    assert gain_retained(0.789, 0.651, 0.789) == pytest.approx(1.0)
    assert gain_retained(0.651, 0.651, 0.789) == 0.0
    assert gain_retained(0.640, 0.651, 0.789) < 0  # below the base: negative, not clipped
    assert 0.665 / 0.789 == pytest.approx(0.843, abs=1e-3)  # what the ratio to plain says of the same model
    # plain fine-tuning gained nothing over the base: undefined, never a division error
    assert math.isnan(gain_retained(0.70, 0.65, 0.65))
    assert "no gain to retain" in GAIN_UNDEFINED
    for missing in ((None, 0.65, 0.7), (0.7, None, 0.7), (0.7, 0.65, None), (0.7, float("nan"), 0.8)):
        assert math.isnan(gain_retained(*missing))


def test_table_carries_the_gain_retained_of_each_size_base():
    t = frontier_table(with_base(fake_points(), {100: 0.05, 1000: 0.40}))
    row = t[(t["size"] == 100) & (t["strategy"] == "ppclm_surrogate_dp")].iloc[0]
    assert row["heldout_gain_retained"] == pytest.approx((0.10 - 0.05) / (0.25 - 0.05))  # 0.25
    assert row["heldout_utility_vs_plain"] == pytest.approx(0.4) and row["base_heldout_utility"] == 0.05
    assert t[(t["size"] == 100) & (t["strategy"] == "clm")]["heldout_gain_retained"].iloc[0] == pytest.approx(1.0)
    # at 1000 plain fine-tuning's held-out utility equals the base's: undefined at every row of that size
    assert t[t["size"] == 1000]["heldout_gain_retained"].isna().all()
    # without the base's utility the column is there, empty (never a number made up)
    bare = frontier_table(fake_points())
    assert "heldout_gain_retained" in bare and bare["heldout_gain_retained"].isna().all()


def test_points_from_dir_read_the_base_models_utility_and_auc(tmp_path):
    from toolkit.results.frontier import points_from_dir

    def put(rel, doc):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(json.dumps(doc))

    put("audit/base/metrics.json", {"utility": 0.5, "heldout_utility": 0.651})
    put("attacks/base/attacks.json", {"strongest": "rmia", "attacks": {"rmia": {"auc": 0.52}, "loss": {"auc": 0.5}}})
    put("audit/clm/epoch-8/metrics.json", {"utility": 0.9, "heldout_utility": 0.789})
    for name in ("attacks", "identifiers", "verdict"):
        put(f"attacks/clm/epoch-8/{name}.json", {"level": "red", "rule": "x"} if name == "verdict" else {})
    (p,) = points_from_dir(1000, math.inf, tmp_path)
    assert (p.strategy, p.base_heldout_utility, p.base_attack_auc) == ("clm", 0.651, 0.52)
    row = frontier_table([p]).iloc[0]
    assert row["base_heldout_utility"] == 0.651 and row["heldout_gain_retained"] == pytest.approx(1.0)


def test_report_table_shows_gain_retained_no_wider_than_before(tmp_path):
    from toolkit.report.frontier import SHOWN, shown_table
    from toolkit.report.render import build_report

    table = frontier_table(with_base(fake_points(), {100: 0.05}))
    shown = shown_table(table)
    assert "gain retained" in shown.columns and "× plain" in shown.columns
    assert len(shown.columns) <= 16  # the table's width before the column was added
    by = shown.set_index(["individuals", "strategy"])
    assert by.loc[(100, "ppclm_surrogate_dp"), "gain retained"] == "25%"
    assert by.loc[(1000, "clm"), "gain retained"] == "n/a"  # no base recorded at 1000
    assert by.loc[(100, "clm"), "PII top-1 (chance)"] == "0.20 (0.050)"  # merged: one column for two
    assert set(SHOWN.values()) == set(shown.columns)
    FrontierResult(frontier_table(fake_points()), [], {"size-100/eps-inf": 60.0}).save(tmp_path / "f")
    html = build_report([tmp_path / "f"], tmp_path / "r.html").read_text(encoding="utf-8")
    assert "gain retained undefined" in html  # no base recorded: said in words, never a ratio to plain
    FrontierResult(table, [], {"size-100/eps-inf": 60.0}).save(tmp_path / "f")
    html = build_report([tmp_path / "f"], tmp_path / "r.html").read_text(encoding="utf-8")
    assert "<th>gain retained</th>" in html and "<td>25%</td>" in html
    assert "100 individuals: 0.050 = 0.20× clm" in html and "1000 individuals: not recorded" in html


def test_figure_has_the_base_model_as_a_point_of_its_own():
    """The base model on every y view: gain retained 0%, its held-out utility, its ratio to plain's."""
    table = frontier_table(with_base(fake_points(), {100: 0.05, 1000: 0.30}))
    table.loc[table["size"] == 1000, "base_attack_auc"] = 0.51
    for y_col, level_100, level_1000 in (("heldout_gain_retained", 0.0, 0.0), ("heldout_utility", 0.05, 0.30),
                                         ("heldout_utility_vs_plain", 0.05 / 0.25, 0.30 / 0.40)):
        fig = frontier_figure(table, y_col=y_col)
        (base,) = [tr for tr in fig.data if tr.name == "base model"]
        assert list(base.x) == [0.51] and list(base.y) == pytest.approx([level_1000])  # a point where its AUC is known
        assert "AUC 0.510" in base.hovertext[0] and "held-out utility 0.300" in base.hovertext[0]
        # where it is not, a line at its level, never a point at a made-up AUC
        lines = [sh for sh in fig.layout.shapes if sh.type == "line" and sh.y0 == sh.y1 == pytest.approx(level_100)]
        assert lines, y_col
        assert any("100 individuals: held-out utility 0.050" in a.text and "not recorded" in a.text
                   for a in fig.layout.annotations), y_col
    (dp,) = [tr for tr in fig.data if tr.name == "ppclm_surrogate_dp"]
    assert any("gain retained 25%" in h for h in dp.hovertext)
    bare = frontier_figure(frontier_table(fake_points()), y_col="heldout_utility")
    assert not [tr for tr in bare.data if tr.name == "base model"]
    assert not [sh for sh in bare.layout.shapes if sh.type == "line"]


def test_shipped_frontier_gain_retained_from_the_recorded_base():
    """docs/data/frontier: the base's held-out utility docs/results.md recorded (0.656 at 100, 0.651 at 1,000)."""
    from toolkit.results.frontier import gain_retained, load_frontier_result

    t = load_frontier_result(ROOT / "docs" / "data" / "frontier").table
    assert dict(zip(t["size"], t["base_heldout_utility"])) == {100: 0.656, 1000: 0.651}
    row = t[(t["size"] == 1000) & (t["strategy"] == "ppclm_surrogate_dp") & (t["epsilon"] == 8.0)].iloc[0]
    plain = t[(t["size"] == 1000) & (t["strategy"] == "clm")]["heldout_utility"].iloc[0]
    assert row["heldout_gain_retained"] == pytest.approx(gain_retained(row["heldout_utility"], 0.651, plain))
    assert row["heldout_gain_retained"] == pytest.approx(0.098, abs=0.001)  # against 0.84× plain


def test_bases_config_runs_one_whole_frontier_per_base(tmp_path):
    """configs/frontier_bases.yaml (issue 35 item 4): one frontier per public-split size of the base, each the
    template with corpus.n_public set; a config with bases is never run as one frontier; --bases restricts."""
    from toolkit.cli.frontier import with_bases
    from toolkit.pipelines.frontier import base_dir_name, collect_frontier, run_frontier, with_base

    cfg = load_frontier(ROOT / "configs" / "frontier_bases.yaml")
    assert cfg.bases == (100, 1000, 5000) and cfg.sizes == (1000,)
    one = with_base(cfg, 1000)
    assert one.bases == () and one.experiment["corpus"]["n_public"] == 1000 and "n_public" not in cfg.experiment[
        "corpus"]  # the config itself untouched
    exp = experiment_for(one, 1000, 8.0, ["clm_dp"], NOTES)
    assert exp.corpus.n_public == 1000 and exp.corpus.n_individuals == 1000
    assert base_dir_name(5000) == "base-5000"
    for call in (lambda: run_frontier(cfg, tmp_path, corpus_path=NOTES), lambda: collect_frontier(cfg, tmp_path)):
        with pytest.raises(ToolkitError, match="one base at a time"):
            call()
    assert with_bases(cfg, "1000,100").bases == (100, 1000)
    with pytest.raises(ToolkitError, match="--bases '7'"):
        with_bases(cfg, "7")
    with pytest.raises(ToolkitError, match="has no bases"):
        with_bases(load_frontier(ROOT / "configs" / "frontier.yaml"), "100")
    raw = yaml.safe_load((ROOT / "configs" / "frontier_bases.yaml").read_text())
    raw["experiment"]["corpus"]["n_public"] = 100
    (tmp_path / "both.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(ToolkitError, match="bases and experiment.corpus.n_public"):
        load_frontier(tmp_path / "both.yaml")


def test_bases_table_sets_the_best_private_recipe_of_each_base_side_by_side():
    """bases_table by hand: per (base, size) the base's and plain's held-out utility, plain's gain, and the green DP
    row that kept the most of it; without a green DP row the DP row that kept the most, flagged."""
    from toolkit.results.frontier import BASES_COLUMNS, bases_table

    inf = math.inf
    weak = with_base([point(1000, inf, "clm", 0.80), point(1000, 8.0, "clm_dp", 0.67, verdict="green", spent=7.9),
                      point(1000, 8.0, "ppclm_surrogate_dp", 0.70, verdict="green", spent=7.9),
                      point(1000, 8.0, "clm_dp_pdp", 0.75, verdict="red", spent=7.9)], {1000: 0.65})
    strong = with_base([point(1000, inf, "clm", 0.82), point(1000, 8.0, "clm_dp", 0.78, verdict="amber", spent=7.9),
                        point(1000, 8.0, "clm_dp_pdp", 0.74, verdict="red", spent=7.9)], {1000: 0.72})
    t = bases_table({5000: frontier_table(strong), 100: frontier_table(weak)})
    assert list(t.columns) == list(BASES_COLUMNS) and list(t["n_public"]) == [100, 5000]
    a, b = t.iloc[0], t.iloc[1]
    # base 100: the red pdp row kept more (0.10/0.15) but is not green; the best green is ppclm_surrogate_dp
    assert a["best_private"] == "ppclm_surrogate_dp" and bool(a["best_green"])
    assert a["best_gain_retained"] == pytest.approx((0.70 - 0.65) / (0.80 - 0.65))
    assert a["plain_gain"] == pytest.approx(0.15) and a["base_heldout_utility"] == 0.65
    assert a["best_vs_plain"] == pytest.approx(0.70 / 0.80)
    # base 5000: no green DP row: the one that kept the most, flagged
    assert b["best_private"] == "clm_dp" and not bool(b["best_green"]) and b["best_verdict"] == "amber"
    assert b["best_gain_retained"] == pytest.approx((0.78 - 0.72) / (0.82 - 0.72))
    assert b["plain_heldout_utility"] == 0.82 and b["best_epsilon"] == 8.0


def test_frontier_command_runs_each_base_into_its_folder_from_one_corpus(tmp_path, monkeypatch):
    """`toolkit frontier configs/frontier_bases.yaml --bases 100,1000`: the corpus generated once with the largest
    base's public patients (5,000: the same members for every base), each base's frontier into OUT/base-N with its
    n_public, bases.csv written (the runs themselves faked: each returns the table its base would)."""
    import toolkit.cli.frontier as cli
    import toolkit.pipelines.frontier as pf
    from toolkit.cli import main

    made, ran = [], []
    monkeypatch.setattr(cli, "generated_corpus",
                        lambda out, n_members, n_public, seed: made.append((n_members, n_public, seed)) or NOTES)

    def fake_run(cfg, out, *, corpus_path=None, progress=True, echo=True):
        n_public = cfg.experiment["corpus"]["n_public"]
        ran.append((n_public, Path(out).name, corpus_path))
        pts = with_base([point(1000, math.inf, "clm", 0.80),
                         point(1000, 8.0, "clm_dp", 0.66 + n_public / 1e5, verdict="green", spent=7.9)],
                        {1000: 0.65})
        Path(out).mkdir(parents=True, exist_ok=True)
        return FrontierResult(frontier_table(pts), [], {}, "clm")

    monkeypatch.setattr(pf, "run_frontier", fake_run)
    assert main(["frontier", str(ROOT / "configs" / "frontier_bases.yaml"), "--out", str(tmp_path), "--bases",
                 "100,1000", "--quiet"]) == 0
    assert made == [(1000, 5000, 27)]
    assert ran == [(100, "base-100", NOTES), (1000, "base-1000", NOTES)]
    t = pd.read_csv(tmp_path / "bases.csv")
    assert list(t["n_public"]) == [100, 1000]
    assert t["best_gain_retained"].tolist() == pytest.approx([(0.661 - 0.65) / 0.15, (0.67 - 0.65) / 0.15])
    assert (tmp_path / "base-100" / "frontier.html").is_file()


def test_noise_to_signal_by_hand_and_by_sampling_the_noise():
    import numpy as np

    from toolkit.results.frontier import noise_to_signal
    # DP-SGD at 1,000 individuals, ε = 8 (docs/results.md, 2026-11-27): 0.644 · √941,568 / 15.9 = 0.644 · 970.34 / 15.9
    dpsgd = {"noise_multiplier": 0.644, "max_grad_norm": 1.0, "expected_batch_size": 15.9, "noised_parameters": 941_568}
    assert noise_to_signal(dpsgd) == pytest.approx(0.644 * 970.3443 / 15.9, rel=1e-6)
    assert noise_to_signal({**dpsgd, "max_grad_norm": 10.0}) == pytest.approx(noise_to_signal(dpsgd))  # C cancels
    # PDP-SGD, k = 64: 1.0 · 8 / 1.6 = 5
    pdp = {"noise_multiplier": 1.0, "release_noise_multiplier": 1.0, "max_grad_norm": 1.0, "expected_batch_size": 1.6,
           "noised_parameters": 64, "subspace": "pdp", "subspace_rank": 64}
    assert noise_to_signal(pdp) == pytest.approx(5.0)
    # GEP, k = 64, P = 1,000, C0 = 1, C1 = 0.4, σ_r = √2: √2 · √(64 + 160) / (2 · √1.16)
    gep = {"noise_multiplier": 1.0, "release_noise_multiplier": math.sqrt(2), "max_grad_norm": 1.0,
           "expected_batch_size": 2.0, "noised_parameters": 1064, "subspace": "gep", "subspace_rank": 64,
           "residual_clip": 0.4}
    assert noise_to_signal(gep) == pytest.approx(math.sqrt(2) * math.sqrt(224) / (2 * math.sqrt(1.16)))
    # the same ratio measured: the norm of GEP's released noise, drawn, over E[B] times the signal's largest norm
    rng = np.random.default_rng(0)
    noise = np.concatenate([rng.normal(0, math.sqrt(2) * 1.0, (400, 64)),
                            rng.normal(0, math.sqrt(2) * 0.4, (400, 1000))], axis=1)
    measured = np.linalg.norm(noise, axis=1).mean() / (2.0 * math.sqrt(1.0 + 0.4 ** 2))
    assert noise_to_signal(gep) == pytest.approx(measured, rel=0.01)
    assert math.isnan(noise_to_signal(None)) and math.isnan(noise_to_signal({"spent_epsilon": 8.0}))
    assert math.isnan(noise_to_signal({**dpsgd, "expected_batch_size": 0}))


def test_levers_config_is_the_full_frontier_with_fewer_strategies():
    """configs/frontier_levers.yaml (issue 35): the same sizes, ε's, corpus, search and experiment as frontier.yaml,
    one strategy per lever — so each of its runs is the full frontier's run of those strategies (same step inputs)."""
    full = load_frontier(ROOT / "configs" / "frontier.yaml")
    levers = load_frontier(ROOT / "configs" / "frontier_levers.yaml")
    assert list(levers.strategies) == ["clm", "clm_dp", "ppclm_surrogate_dp", "clm_dp_lora", "clm_dp_pdp",
                                       "clm_dp_gep", "clm_dp_user", "clm_dp_gep_user"]
    assert set(levers.strategies) < set(full.strategies)
    same = ("sizes", "epsilons", "corpus_path", "generate_seed", "hp_search", "bases", "experiment")
    assert [getattr(levers, k) for k in same] == [getattr(full, k) for k in same]
    for (size, eps, names), (_, _, all_names) in zip(levers.runs(), full.runs()):
        mine, theirs = (experiment_for(c, size, eps, names, NOTES).to_dict() for c in (levers, full))
        mine.pop("name"), theirs.pop("name")
        assert mine == theirs and set(names) <= set(all_names)


MEMBERS, HELD = [f"m{i}" for i in range(10)], [f"h{i}" for i in range(30)]


def word_predictions(rng, rate: float) -> pd.DataFrame:
    """A probe's prediction table: 20 words for each of MEMBERS and HELD, each right with probability ``rate``."""
    people = [p for p in MEMBERS + HELD for _ in range(20)]
    ok = rng.random(len(people)) < rate
    return pd.DataFrame({"person_id": people, "original": "w", "predicted": ["w" if o else "x" for o in ok],
                         "protected": False})


def test_table_gives_the_gain_retained_its_interval_from_the_runs_predictions(tmp_path):
    """Where the runs' per-word predictions are at hand, the table's interval is heldout_gain_interval's on the
    model's, its run's base model's and plain's (at the same size) held-out words; the report shows it in the cell."""
    from toolkit.metrics.probing import heldout_gain_interval
    from toolkit.report.frontier import shown_table
    from toolkit.results.layout import BASE, RunLayout

    rng = __import__("numpy").random.default_rng(0)
    files = {}
    for run, name, epoch, rate in (("eps-inf", "clm", 8, 0.8), ("eps-inf", BASE, None, 0.6),
                                   ("eps-8", "clm_dp", 8, 0.62), ("eps-8", BASE, None, 0.6)):
        d = RunLayout(tmp_path / run).audit(name, epoch)
        d.mkdir(parents=True)
        files[(run, name)] = t = word_predictions(rng, rate)
        t.to_parquet(d / "mia_predictions.parquet")
        t[t["person_id"].isin(MEMBERS)].to_parquet(d / "predictions.parquet")
    pts = [point(100, math.inf, "clm", 0.8), point(100, 8.0, "ppclm_surrogate_dp", 0.62, spent=7.9)]
    pts[1].strategy = "clm_dp"
    for p, run in zip(pts, ("eps-inf", "eps-8")):
        p.run_dir, p.base_heldout_utility = str(tmp_path / run), 0.6
    t = frontier_table(pts).set_index("strategy")
    _, lo, hi = heldout_gain_interval(files[("eps-8", "clm_dp")], files[("eps-8", BASE)],
                                      files[("eps-inf", "clm")], HELD, n_bootstrap=2000, seed=0)
    assert (t.loc["clm_dp", "heldout_gain_retained_low"], t.loc["clm_dp", "heldout_gain_retained_high"]) == (lo, hi)
    assert lo < hi
    cell = shown_table(t.reset_index()).set_index("strategy").loc["clm_dp", "gain retained"]
    assert cell.endswith(f"[{100 * lo:.0f}, {100 * hi:.0f}]")
    # without the files (fake points): no interval, and the cell shows the point alone
    bare = frontier_table(fake_points())
    assert bare["heldout_gain_retained_low"].isna().all() and bare["heldout_gain_retained_high"].isna().all()


def test_gain_retained_is_undefined_where_plain_fine_tuning_did_not_significantly_beat_the_base(tmp_path):
    """Plain's held-out words drawn at the base's rate (its gain ≈ 0, not significant at 95%): every row of the size
    has no gain retained and no interval — not a ratio over noise — the report says why, and bases_table then names
    the DP row with the highest held-out utility. Another size, where plain clearly gains, keeps its figures."""
    from toolkit.report.frontier import base_sentence
    from toolkit.results.frontier import GAIN_UNDEFINED, bases_table, gain_retained
    from toolkit.results.layout import BASE, RunLayout

    assert math.isnan(gain_retained(0.7746, 0.7729, 0.7716))  # plain below the base (docs/results.md, base 300)
    rng = __import__("numpy").random.default_rng(1)
    pts = []
    for size, plain_rate in ((100, 0.6), (200, 0.8)):
        for run, name, rate, eps in ((f"s{size}-inf", "clm", plain_rate, math.inf),
                                     (f"s{size}-8", "clm_dp", 0.62, 8.0), (f"s{size}-8", "clm_dp_pdp", 0.64, 8.0)):
            for model, r in ((name, rate), (BASE, 0.6)):
                d = RunLayout(tmp_path / run).audit(model, None if model == BASE else 8)
                if not d.is_dir():
                    d.mkdir(parents=True)
                    t = word_predictions(rng, r)
                    t.to_parquet(d / "mia_predictions.parquet")
                    t[t["person_id"].isin(MEMBERS)].to_parquet(d / "predictions.parquet")
            held_u = float((pd.read_parquet(RunLayout(tmp_path / run).audit(name, 8) / "mia_predictions.parquet")
                            .query("person_id in @HELD")["predicted"] == "w").mean())
            p = point(size, eps, name, held_u, verdict="green" if eps < math.inf else "red",
                      spent=None if eps == math.inf else 7.9)
            p.run_dir, p.base_heldout_utility = str(tmp_path / run), 0.6
            pts.append(p)
    t = frontier_table(pts)
    small, large = t[t["size"] == 100], t[t["size"] == 200]
    gains = ["heldout_gain_retained", "heldout_gain_retained_low", "heldout_gain_retained_high"]
    assert small[gains].isna().all().all()
    assert large["heldout_gain_retained"].notna().all() and large.query("dp")["heldout_gain_retained_low"].notna().all()
    assert f"(gain retained {GAIN_UNDEFINED})" in base_sentence(small, "clm")
    assert "undefined" not in base_sentence(large, "clm")
    row = bases_table({300: small}).iloc[0]
    assert row["best_gain_retained"] is None and row["best_green"]
    assert row["best_private"] == small.query("dp").set_index("strategy")["heldout_utility"].idxmax()


def _expected_rho(name: str, sigma: float, expected_batch: float) -> float:
    """A DP row's ρ by hand: σ·√D / E[B] with D its noised coordinates (DP-LoRA r = 8: 32,768; PDP-SGD k = 64; the
    others every weight, 941,568), GEP's with its residual at C₁ = 0.4·C and σ_r = √2·σ. The mean over an
    individual's chunks (``*_user``) changes the signal, not the noise."""
    if name.startswith("clm_dp_gep"):
        return sigma * math.sqrt(2) * math.sqrt(64 + 0.16 * 941_568) / (expected_batch * math.sqrt(1.16))
    return sigma * math.sqrt({"clm_dp_lora": 32_768, "clm_dp_pdp": 64}.get(name, 941_568)) / expected_batch


def _assert_gains_recompute(t, names) -> None:
    """Each row's gain retained is (U − U_base) / (U_plain − U_base) of the table's own utilities, inside its
    interval."""
    for name in names:
        row = t.loc[name]
        assert row["heldout_gain_retained"] == pytest.approx(
            (row["heldout_utility"] - row["base_heldout_utility"])
            / (t.loc["clm", "heldout_utility"] - row["base_heldout_utility"]))
        assert row["heldout_gain_retained_low"] < row["heldout_gain_retained"] < row["heldout_gain_retained_high"]


def _levers_slice_rate(path: Path, strategies: tuple[str, ...]) -> float:
    """A shipped 1,000-individual slice config is frontier_levers.yaml at size 1000 with ``strategies`` only, no
    search, and one DP learning rate — nothing else; returns that rate."""
    levers = load_frontier(ROOT / "configs" / "frontier_levers.yaml")
    cfg = load_frontier(path)
    assert (tuple(cfg.sizes), tuple(cfg.strategies), cfg.hp_search) == ((1000,), strategies, None)
    assert sorted(cfg.epsilons) == [8.0, math.inf] and cfg.generate_seed == levers.generate_seed
    mine, theirs = copy.deepcopy(cfg.experiment), copy.deepcopy(levers.experiment)
    rate = mine["training"]["dp_schedule"].pop("learning_rate")
    theirs["training"]["dp_schedule"].pop("learning_rate")
    assert mine == theirs
    return rate


def test_shipped_levers_frontier_reads_back_with_its_intervals():
    """docs/data/frontier_levers (results.md, "levers"): every DP row's gain retained
    recomputes from the table's own utilities, lies inside its interval, and its ρ from σ = 1.0419, E[B] = 100/7 and
    its noised coordinates."""
    from toolkit.results.frontier import load_frontier_result

    res = load_frontier_result(ROOT / "docs" / "data" / "frontier_levers")
    t = res.table.set_index("strategy")
    assert set(t.index) == {"clm", "clm_dp", "ppclm_surrogate_dp", "clm_dp_lora", "clm_dp_pdp", "clm_dp_gep",
                            "clm_dp_user", "clm_dp_gep_user"}
    _assert_gains_recompute(t, t.index.drop("clm"))
    for name in t.index.drop("clm"):
        assert t.loc[name, "noise_to_signal"] == pytest.approx(_expected_rho(name, 1.0419, 100 / 7), rel=1e-3)


def test_shipped_pdp1000_config_is_the_levers_frontier_with_its_stated_changes():
    """docs/data/frontier_levers/frontier_pdp1000.yaml (results.md, "levers"): frontier_levers.yaml at size
    1000 with clm and clm_dp_pdp only, no search, and the DP rate the search chose at size 100 — nothing else."""
    data = ROOT / "docs" / "data" / "frontier_levers"
    rate = _levers_slice_rate(data / "frontier_pdp1000.yaml", ("clm", "clm_dp_pdp"))
    chosen = json.loads((data / "hp_search.json").read_text())
    assert rate == chosen["sizes"]["100"]["clm_dp_pdp"]["chosen"]["learning_rate"] == 5e-5
    from toolkit.results.frontier import load_frontier_result

    t = load_frontier_result(data / "pdp1000").table.set_index("strategy")
    row = t.loc["clm_dp_pdp"]  # below its base, the whole interval (docs/results.md)
    assert row["heldout_gain_retained_low"] < row["heldout_gain_retained"] < row["heldout_gain_retained_high"] < 0
    assert row["noise_to_signal"] == pytest.approx(0.644 * 8 / (1000 / 63), rel=1e-3)


def test_shipped_levers1000_config_and_table():
    """docs/data/frontier_levers/frontier_levers1000.yaml (results.md, "levers"): frontier_levers.yaml at
    size 1000 with clm, clm_dp_lora and clm_dp_gep only, no search, and the DP rate the search chose for both at size
    100 — nothing else; its table (levers1000/) recomputes its gains and ρ from σ = 0.644 and E[B] = 1000/63."""
    from toolkit.results.frontier import load_frontier_result

    data = ROOT / "docs" / "data" / "frontier_levers"
    rate = _levers_slice_rate(data / "frontier_levers1000.yaml", ("clm", "clm_dp_lora", "clm_dp_gep"))
    chosen = json.loads((data / "hp_search.json").read_text())["sizes"]["100"]
    assert rate == chosen["clm_dp_lora"]["chosen"]["learning_rate"] == chosen["clm_dp_gep"]["chosen"]["learning_rate"]
    t = load_frontier_result(data / "levers1000").table.set_index("strategy")
    assert set(t.index) == {"clm", "clm_dp_lora", "clm_dp_gep"}
    _assert_gains_recompute(t, ["clm_dp_lora", "clm_dp_gep"])
    for name in ("clm_dp_lora", "clm_dp_gep"):
        assert t.loc[name, "noise_to_signal"] == pytest.approx(_expected_rho(name, 0.644, 1000 / 63), rel=1e-3)


def test_a_frontier_without_attacks_says_why_its_table_is_empty(tmp_path, capsys):
    """With experiment.audit.attacks.enabled false no model gets a verdict, so the table has no row: the command says
    so instead of printing an empty table (a utility-only diagnostic, CHANGELOG.md, 2026-11-29)."""
    import yaml

    from toolkit.cli import main

    raw = yaml.safe_load((ROOT / "configs" / "frontier_reserve.yaml").read_text())
    raw["experiment"]["audit"]["attacks"] = {"enabled": False}
    cfg = tmp_path / "utility_only.yaml"
    cfg.write_text(yaml.safe_dump(raw))
    assert main(["frontier", str(cfg), "--out", str(tmp_path / "out"), "--table-only"]) == 0
    assert "no model in the table: its rows are models with a verdict" in capsys.readouterr().out
    raw["experiment"]["audit"]["attacks"] = {"enabled": True}
    cfg.write_text(yaml.safe_dump(raw))
    assert main(["frontier", str(cfg), "--out", str(tmp_path / "out2"), "--table-only"]) == 0
    assert "no model in the table" not in capsys.readouterr().out


def test_every_shipped_row_is_judged_by_the_current_rules_or_says_which_rules_and_why_not():
    """Every shipped frontier row: its verdict is the current rules' answer — the row records the current
    RULES_VERSION — or the row is shown as judged under older rules, with their date and commit, what re-judging needs
    and when that was checked; a row is never "current" by default. No shipped frontier holds attack results, so no
    row can be re-judged (checked: none is in docs/data); a change of the rules (RULES_VERSION) turns every row
    recorded as current into an older one (issue 55, problem 8: red, amber, red, red at 1,000 without a word)."""
    from toolkit.audit.verdict import RULES_VERSION
    from toolkit.report.frontier import RETIRED_RULES, rules_sentence, verdict_sentences, verdicts_judged
    from toolkit.results.frontier import load_frontier_result

    shipped = sorted((ROOT / "docs" / "data").rglob("frontier.json"))
    assert len(shipped) >= 15
    for path in shipped:
        res = load_frontier_result(path.parent)
        marks = verdicts_judged(res)
        assert len(marks) == len(res.table) == len(verdict_sentences(res))
        current = [m == "current rules" for m in marks]
        stamp = res.verdicts_judged or {}
        recorded = [v == RULES_VERSION for v in res.table["verdict_rules"]]
        assert current == recorded, path  # current only where the row says so
        if not all(current):
            assert stamp.get("rules_version") and stamp["rules_version"] < RULES_VERSION, path
            assert stamp.get("rules_commit") and stamp.get("rules") and stamp.get("missing"), path
            assert (stamp.get("checked") or {}).get("rules_version") == RULES_VERSION, path  # checked against these
        # what re-judging needs is not shipped (the stamp says so, and it is true): a table that ships its attack
        # results must have its rows re-judged by the current rules and recorded so (verdict_rules), not stamped
        assert not list(path.parent.rglob("attacks.json")) and not list(path.parent.rglob("scores.parquet")), path
        assert all(current) or stamp.get("recomputable") is False, path
        retired = set(res.table["verdict_rule"].dropna()) & RETIRED_RULES
        assert not retired or not any(current), (path, retired)
        assert "of %d verdicts were judged under the current rules" % len(marks) in rules_sentence(res)
    default = load_frontier_result(ROOT / "docs" / "data" / "frontier")
    stamp = default.verdicts_judged
    assert "6888e34" in stamp["rules"] and stamp["rules_commit"] == "88c4820" and stamp["recomputable"] is False
    at_1000 = default.table[(default.table["size"] == 1000) & (default.table["strategy"] == "clm_dp")]
    assert list(at_1000.sort_values("epsilon")["verdict"]) == ["red", "amber", "red", "red"]  # the ones the issue saw
    sentences = [s for s in verdict_sentences(default) if s.startswith("1000 individuals, clm_dp at ε = 1:")]
    assert sentences == [
        "1000 individuals, clm_dp at ε = 1: red — " + stamp["rule_words"]["regurgitation"]
        + " (`regurgitation`); judged under the verdict of 2026-11-27 (88c4820); not re-judged."]
    source = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "toolkit" / "audit").rglob("*.py"))
    for rule in RETIRED_RULES:
        assert f'FamilyTest("{rule}"' not in source and f'(("{rule}"' not in source and f'"{rule}" if' not in source


def test_a_saved_frontier_keeps_its_rules_per_row_and_its_stamp(tmp_path):
    from toolkit.audit.verdict import RULES_VERSION, verdict
    from toolkit.report.frontier import verdict_sentences, verdicts_judged
    from toolkit.results.frontier import load_frontier_result

    assert verdict().to_dict()["rules_version"] == RULES_VERSION  # every verdict records its rules
    points = fake_points()
    res = FrontierResult(frontier_table(points), [], {})
    res.save(tmp_path / "none")  # verdicts without a rules record: never read as current
    marks = set(verdicts_judged(load_frontier_result(tmp_path / "none")))
    assert marks == {"older rules: not recorded (a verdict written before verdicts recorded their rules)"}
    for p in points:
        p.verdict["rules_version"] = RULES_VERSION
    points[0].verdict["rules_version"] = "2026-11-28"
    res = FrontierResult(frontier_table(points), [], {})
    res.save(tmp_path / "now")
    back = load_frontier_result(tmp_path / "now")
    marks = verdicts_judged(back)
    assert marks.count("current rules") == 5 and "older rules: the verdict of 2026-11-28" in marks
    assert any("judged under the current rules." in s for s in verdict_sentences(back))
    res.verdicts_judged = {"rules": "the verdict of 2026-11-27", "recomputable": False}
    res.save(tmp_path / "old")
    assert load_frontier_result(tmp_path / "old").verdicts_judged == res.verdicts_judged


def test_gain_sentences_ask_how_much_a_green_private_model_keeps():
    from toolkit.report.frontier import gain_sentences

    t = pd.DataFrame({"size": [100] * 4, "strategy": ["clm", "a_dp", "b_dp", "c_dp"], "epsilon": [math.inf, 8, 8, 1],
                      "dp": [False, True, True, True], "heldout_utility": [0.8, 0.7, 0.75, 0.72],
                      "heldout_gain_retained": [1.0, 0.10, 0.30, 0.2],
                      "heldout_gain_retained_low": [None, 0.05, 0.2, 0.1],
                      "heldout_gain_retained_high": [None, 0.15, 0.4, 0.3], "attack_auc": [0.9, 0.51, 0.6, 0.52],
                      "verdict": ["red", "green", "amber", "green"]})
    (s,) = gain_sentences(t, "clm")
    assert "2 of 3 private models are green" in s and "c_dp at ε = 1: 20.0% [10.0, 30.0] of clm's gain" in s
    (s,) = gain_sentences(t.assign(verdict="amber"), "clm")
    assert "none of the 3 private models is green" in s and "b_dp at ε = 8, verdict amber: 30.0%" in s


def test_frontier_rows_at_an_epsilon_keep_the_rows_without_dp():
    from toolkit.plots.frontier import frontier_figure, frontier_rows_at

    table = frontier_table(fake_points())
    at8 = frontier_rows_at(table, "8")
    assert set(at8["epsilon"]) == {8.0, math.inf} and len(frontier_rows_at(table, "all")) == len(table)
    assert set(frontier_rows_at(table, "∞")["epsilon"]) == {math.inf}
    fig = frontier_figure(table.assign(heldout_gain_retained=0.5), y_col="heldout_gain_retained")
    (rect,) = [sh for sh in fig.layout.shapes if sh.type == "rect"]  # the goal lives on the gain view only
    assert rect.y0 == GAIN_GOAL and "gain retained" in fig.layout.yaxis.title.text
    ratio = frontier_figure(table, y_col="heldout_utility_vs_plain")
    assert not any(sh.type == "rect" for sh in ratio.layout.shapes)  # no 0.9x goal on the ratio view
