"""The public reserve (``corpus.public_reserve``; docs/methods.md §3): public individuals after the base's first
``n_public``, never in the base's pre-training data, are the only documents a gradient-subspace strategy's anchors and
the DP hyper-parameter search read — never the base's public patients, never a member."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolkit.errors import ToolkitError

pytestmark = pytest.mark.usefixtures("one_thread")

ROOT = Path(__file__).resolve().parents[1]
NOTES = ROOT / "data_samples" / "clinical" / "notes.jsonl"
TINY = {"vocab_size": 600, "hidden_size": 32, "num_layers": 1, "num_heads": 2, "intermediate_size": 64}
KEEP = {"public": 12, "train": 6, "heldout": 6}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """12 public, 6 member and 6 non-member patients of the sample notes, in the file's order."""
    rows, seen = [], {}
    for line in NOTES.read_text(encoding="utf-8").splitlines():
        d = json.loads(line)
        people = seen.setdefault(d["split"], [])
        if d["person_id"] not in people:
            if len(people) >= KEEP.get(d["split"], 0):
                continue
            people.append(d["person_id"])
        rows.append(d)
    path = tmp_path_factory.mktemp("reserve") / "notes.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def experiment(corpus: Path, reserve: int | None = 4, strategies=("clm_dp",), **corpus_keys):
    from toolkit.config.experiment import experiment_from_dict

    return experiment_from_dict({
        "profile": "cpu", "seed": 0, "name": "reserve",
        "corpus": {"path": str(corpus), "public_split": "public", "member_split": "train",
                   "nonmember_split": "heldout", "n_public": 8, "n_individuals": 6,
                   **({"public_reserve": reserve} if reserve is not None else {}), **corpus_keys},
        "identifiers": {"detector": "oracle", "k": 2, "n": 1},
        "model": {"kind": "clm", "architecture": {**TINY, "max_length": 64}, "pretrain": {"epochs": [1]}},
        "training": {"strategies": list(strategies), "epochs": [1], "max_length": 64},
        "audit": {"max_length": 64, "batch_size": 8, "base_model": False, "attacks": {"enabled": False}}})


def public_order(corpus: Path) -> list[str]:
    """The public split's individuals in the file's order, recounted from the file."""
    order: list[str] = []
    for line in corpus.read_text(encoding="utf-8").splitlines():
        d = json.loads(line)
        if d["split"] == "public" and d["person_id"] not in order:
            order.append(d["person_id"])
    return order


def test_the_reserve_is_the_public_individuals_after_the_bases(corpus):
    from toolkit.pipelines.data import load_data

    order = public_order(corpus)
    data = load_data(experiment(corpus))
    assert list(data.public.person_ids) == order[:8] and list(data.reserve.person_ids) == order[8:12]
    assert data.tuning_public is data.reserve
    assert not set(data.reserve.person_ids) & (set(data.public.person_ids) | set(data.members.person_ids)
                                                | set(data.nonmembers.person_ids))
    assert {d.doc_id for d in data.reserve} == {json.loads(x)["doc_id"] for x in corpus.read_text().splitlines()
                                                if json.loads(x)["person_id"] in order[8:12]}  # every note of theirs
    plain = load_data(experiment(corpus, reserve=None))
    assert plain.reserve is None and plain.tuning_public is plain.public
    assert list(plain.public.person_ids) == order[:8]  # the base's public patients are the same with or without


def test_reserve_errors_name_the_key_and_counts_never_a_text(corpus):
    from toolkit.pipelines.data import load_data

    with pytest.raises(ToolkitError, match=r"corpus.public_reserve: split 'public' has 4 individuals after its "
                                           r"first 8 \(corpus.n_public\), 5 asked"):
        load_data(experiment(corpus, reserve=5))
    with pytest.raises(ToolkitError, match=r"corpus.public_reserve.*needs corpus.public_split and corpus.n_public"):
        experiment(corpus, n_public=None)
    with pytest.raises(ToolkitError, match=r"corpus.public_reserve"):
        experiment(corpus, reserve=0)


def test_the_reserve_can_start_after_a_larger_base_so_every_base_shares_it(corpus):
    """``corpus.public_reserve_start``: the reserve is the public individuals from that index on, whatever the base's
    size — the same four patients behind a base of 6 and a base of 8 — and never inside the base's (refused below
    n_public, and without a reserve to place)."""
    from toolkit.pipelines.data import load_data

    order = public_order(corpus)
    for n_public in (6, 8):
        data = load_data(experiment(corpus, n_public=n_public, public_reserve_start=8))
        assert list(data.public.person_ids) == order[:n_public] and list(data.reserve.person_ids) == order[8:12]
    data = load_data(experiment(corpus, n_public=6))  # without it: right after the base's, as before
    assert list(data.reserve.person_ids) == order[6:10]
    cfg = experiment(corpus, n_public=6, public_reserve_start=8)
    assert "individuals 9–12 of the split" in cfg.summary()["base model"]
    with pytest.raises(ToolkitError, match=r"corpus.public_reserve_start.*7 is below corpus.n_public \(8\)"):
        experiment(corpus, public_reserve_start=7)
    with pytest.raises(ToolkitError, match=r"corpus.public_reserve_start.*needs corpus.public_reserve"):
        experiment(corpus, reserve=None, public_reserve_start=8)
    with pytest.raises(ToolkitError, match=r"split 'public' has 2 individuals after its first 10 "
                                           r"\(corpus.public_reserve_start\), 4 asked"):
        load_data(experiment(corpus, public_reserve_start=10))


def test_the_run_pretrains_the_base_on_its_public_split_and_anchors_on_the_reserve(corpus, tmp_path, monkeypatch):
    """Spies on the base step and on training: the base is pre-trained on the first 8 public patients only, the
    subspace strategy's anchors are the reserve's documents, and the train step's key holds the reserve's
    fingerprint (so a different reserve trains again)."""
    import toolkit.pipelines.steps as steps
    import toolkit.training as training
    from toolkit.pipelines.lm_experiment import run_experiment
    from toolkit.training import corpus_fingerprint

    order = public_order(corpus)
    seen = {}

    class Stop(Exception):
        pass

    real_base = steps.base_model

    def spy_base(public, *a, **kw):
        seen["base"] = list(public.person_ids)
        return real_base(public, *a, **kw)

    def spy_train(corpus, *a, public=None, **kw):
        seen["members"], seen["anchors"] = set(corpus.person_ids), list(public.person_ids)
        raise Stop

    monkeypatch.setattr(steps, "base_model", spy_base)
    monkeypatch.setattr(training, "train", spy_train)
    cfg = experiment(corpus, strategies=("clm_dp_pdp",))
    with pytest.raises(Stop):
        run_experiment(cfg, tmp_path / "run", progress=False, echo=False)
    assert seen["base"] == order[:8] and seen["anchors"] == order[8:12]
    assert not set(seen["anchors"]) & seen["members"]
    datasets = json.loads((tmp_path / "run" / "manifest.json").read_text())["datasets"]
    from toolkit.pipelines.data import load_data

    assert datasets["public_reserve"] == json.loads(json.dumps(corpus_fingerprint(load_data(cfg).reserve)))


@pytest.mark.parametrize("anchor_share", [0.0, 0.25])
def test_the_search_trains_and_validates_on_the_reserve_only(corpus, tmp_path, monkeypatch, anchor_share):
    """Every document the search reads (training, identifiers, scoring) is a reserve patient's: not one of the base's
    public patients, not a member or non-member; a subspace strategy's anchors are never the validation individuals:
    the pseudo-members (anchor_share 0), or reserve patients neither trained on nor scored (the three-way split)."""
    import toolkit.pipelines.hp_search as hp
    import toolkit.training as training
    from _search_spies import spy_identifiers_and_scoring
    from toolkit.models import TinyModelConfig
    from toolkit.pipelines.data import load_data
    from toolkit.training import TrainConfig, build_base

    data = load_data(experiment(corpus))
    base = build_base(data.public, tmp_path / "base", "clm", tiny=TinyModelConfig(kind="clm", max_length=64, **TINY),
                      config=TrainConfig(epochs=[1], batch_size=8, learning_rate=1e-2, max_length=64), progress=False)
    seen: list[tuple[str, set]] = []

    def spy_train(corpus, *a, public=None, run_dir=None, **kw):
        seen.append(("train", set(corpus.person_ids)))
        if public is not None:
            seen.append(("anchors", set(public.person_ids)))
        Path(run_dir, "epoch-1").mkdir(parents=True)  # a stand-in checkpoint: the base's weights
        for f in Path(base).iterdir():
            Path(run_dir, "epoch-1", f.name).write_bytes(f.read_bytes())
        return [(1, Path(run_dir, "epoch-1"))]

    monkeypatch.setattr(training, "train", spy_train)
    spy_identifiers_and_scoring(monkeypatch, seen)
    search = hp.HpSearchConfig(grid=(("learning_rate", (1e-3,)),), validation_share=0.25, epsilon=8.0,
                               anchor_share=anchor_share)
    hp.experiment_search(experiment(corpus, strategies=("clm_dp_pdp",)), search, ["clm_dp_pdp"], base, "tiny",
                         tmp_path / "search")
    reserve = set(data.reserve.person_ids)
    assert {what for what, _ in seen} == {"train", "anchors", "identifiers", "score"}
    assert all(people and people <= reserve for _, people in seen), seen
    (trained,), (anchors,) = ({frozenset(p) for w, p in seen if w == kind} for kind in ("train", "anchors"))
    scored = set().union(*(p for w, p in seen if w == "score" and p != reserve))
    if not anchor_share:  # the anchors are the pseudo-members it trains on, never the validation individuals
        assert anchors == trained and not anchors & scored and anchors | scored == reserve
    else:  # three disjoint sets covering the reserve; the validation set the same as without anchors
        assert not anchors & trained and not anchors & scored and not trained & scored
        assert anchors | trained | scored == reserve
        assert len(anchors) == round(0.25 * len(reserve)) and scored == set(hp.split_public(
            data.reserve, 0.25, seed=0)[1].person_ids)


def test_the_frontier_command_generates_the_bases_patients_and_the_reserve(tmp_path, monkeypatch):
    """``toolkit frontier`` on configs/frontier_reserve.yaml generates n_public + public_reserve public patients
    (200), beside the largest size's members and non-members."""
    import toolkit.cli.frontier as cli

    asked = []
    monkeypatch.setattr(cli, "generated_corpus", lambda out, n_members, n_public, seed: asked.append(
        (n_members, n_public, seed)) or tmp_path / "notes.jsonl")
    monkeypatch.setattr(cli, "_one_frontier", lambda *a, **kw: None)
    from toolkit.cli import main

    assert main(["frontier", str(ROOT / "configs" / "frontier_reserve.yaml"), "--out", str(tmp_path)]) == 0
    assert asked == [(1000, 100 + 100, 27)]


def test_the_reserve_config_is_the_levers_frontier_with_a_reserve():
    """configs/frontier_reserve.yaml: frontier_levers.yaml's experiment, corpus seed and sizes with
    corpus.public_reserve = 100 added, four of its DP strategies, ε ∈ {1, 4, 8, 16, ∞} and its search grid with one
    rate below it (1.5e-5) and one above (5e-3) — nothing else, so that its rows differ from the levers frontier's by
    the reserve (and the corpus it needs) only."""
    import copy
    import dataclasses
    import math

    from toolkit.pipelines.frontier import load_frontier

    levers = load_frontier(ROOT / "configs" / "frontier_levers.yaml")
    cfg = load_frontier(ROOT / "configs" / "frontier_reserve.yaml")
    assert tuple(cfg.strategies) == ("clm", "clm_dp", "clm_dp_pdp", "clm_dp_gep", "clm_dp_lora")
    assert set(cfg.strategies) < set(levers.strategies) and sorted(cfg.epsilons) == [1.0, 4.0, 8.0, 16.0, math.inf]
    (key, rates), = cfg.hp_search.grid
    (_, theirs), = levers.hp_search.grid
    assert key == "learning_rate" and rates == (1.5e-5, *theirs, 5e-3)
    assert dataclasses.replace(cfg.hp_search, grid=levers.hp_search.grid) == levers.hp_search
    assert (cfg.sizes, cfg.generate_seed, cfg.bases) == (levers.sizes, levers.generate_seed, levers.bases)
    mine = copy.deepcopy(cfg.experiment)
    assert mine["corpus"].pop("public_reserve") == 100 and mine == levers.experiment


def test_the_steps_config_is_the_reserve_frontier_with_epochs_searched():
    """configs/frontier_reserve_steps.yaml (results.md, "learning-rate search"): frontier_reserve.yaml's corpus, sizes
    and experiment, clm and clm_dp_pdp at ε = 8 and ∞, and a search of PDP-SGD over the epochs (8, 32) and the two
    rates around its choice there — nothing else, so its run shares frontier_reserve's corpus, base and members."""
    import math

    from toolkit.pipelines.frontier import load_frontier

    full = load_frontier(ROOT / "configs" / "frontier_reserve.yaml")
    cfg = load_frontier(ROOT / "configs" / "frontier_reserve_steps.yaml")
    assert (tuple(cfg.strategies), sorted(cfg.epsilons)) == (("clm", "clm_dp_pdp"), [8.0, math.inf])
    assert (cfg.sizes, cfg.generate_seed, cfg.experiment) == (full.sizes, full.generate_seed, full.experiment)
    assert dict(cfg.hp_search.grid) == {"learning_rate": (5e-5, 1.5e-4), "epochs": (8, 32)}
    assert (cfg.hp_search.epsilon, cfg.hp_search.validation_share) == (full.hp_search.epsilon,
                                                                       full.hp_search.validation_share)
    assert set(dict(cfg.hp_search.grid)["learning_rate"]) < set(dict(full.hp_search.grid)["learning_rate"])


def test_the_anchors_config_is_the_steps_config_with_a_three_way_split():
    """configs/frontier_reserve_anchors.yaml (results.md, "learning-rate search"): the steps frontier with the search's
    subspace anchors apart from its pseudo-members (anchor_share 0.3) — nothing else, so the two searches differ by
    where the anchors come from (and the pseudo-members they leave), and score on the same validation patients."""
    import dataclasses

    from toolkit.pipelines.frontier import load_frontier

    steps = load_frontier(ROOT / "configs" / "frontier_reserve_steps.yaml")
    cfg = load_frontier(ROOT / "configs" / "frontier_reserve_anchors.yaml")
    assert (steps.hp_search.anchor_share, cfg.hp_search.anchor_share) == (0.0, 0.3)
    assert dataclasses.replace(cfg.hp_search, anchor_share=0.0) == steps.hp_search
    assert dataclasses.replace(cfg, name=steps.name, description=steps.description, source=steps.source,
                               hp_search=steps.hp_search) == steps


def test_the_pdp_rates_config_is_the_reserve_frontier_for_pdp_with_a_three_way_split():
    """configs/frontier_reserve_pdp_rates.yaml (results.md, "learning-rate search"): frontier_reserve.yaml's corpus,
    sizes, experiment and rate grid, for PDP-SGD alone at ε = 8 with anchor_share 0.3 — nothing else, so its search
    differs from the reserve frontier's PDP-SGD search by where the anchors come from (and the pseudo-members left)."""
    import dataclasses
    import math

    from toolkit.pipelines.frontier import load_frontier

    full = load_frontier(ROOT / "configs" / "frontier_reserve.yaml")
    cfg = load_frontier(ROOT / "configs" / "frontier_reserve_pdp_rates.yaml")
    assert (tuple(cfg.strategies), sorted(cfg.epsilons)) == (("clm", "clm_dp_pdp"), [8.0, math.inf])
    assert (cfg.sizes, cfg.generate_seed, cfg.experiment) == (full.sizes, full.generate_seed, full.experiment)
    assert (full.hp_search.anchor_share, cfg.hp_search.anchor_share) == (0.0, 0.3)
    assert dataclasses.replace(cfg.hp_search, anchor_share=0.0) == full.hp_search


def test_the_bases_reserve_config_is_the_pdp_rates_frontier_with_two_bases_and_one_reserve(corpus, tmp_path,
                                                                                         monkeypatch):
    """configs/frontier_bases_reserve.yaml (results.md, "base strength at 100"): frontier_reserve_pdp_rates.yaml's
    experiment, seed and three-way search at 100 individuals, with DP-SGD beside PDP-SGD, five of its rates, bases
    of 100, 300 and 1,000 public patients (so no n_public of its own) and the reserve placed after the largest base;
    the command generates 1,100 public patients, and every base reads the same reserve (patients 1,001-1,100)."""
    import copy
    import dataclasses
    import math

    import toolkit.cli.frontier as cli
    from toolkit.pipelines.frontier import experiment_for, load_frontier, with_base

    rates = load_frontier(ROOT / "configs" / "frontier_reserve_pdp_rates.yaml")
    cfg = load_frontier(ROOT / "configs" / "frontier_bases_reserve.yaml")
    assert (cfg.sizes, cfg.bases, sorted(cfg.epsilons)) == ((100,), (100, 300, 1000), [8.0, math.inf])
    assert tuple(cfg.strategies) == ("clm", "clm_dp", "clm_dp_pdp") and cfg.generate_seed == rates.generate_seed
    (_, mine), = cfg.hp_search.grid
    (_, theirs), = rates.hp_search.grid
    assert set(mine) < set(theirs) and dataclasses.replace(cfg.hp_search, grid=rates.hp_search.grid) == rates.hp_search
    template = copy.deepcopy(cfg.experiment)
    assert template["corpus"].pop("public_reserve_start") == 1000
    theirs = copy.deepcopy(rates.experiment)
    assert theirs["corpus"].pop("n_public") == 100 and template == theirs
    for n_public in cfg.bases:
        exp = experiment_for(with_base(cfg, n_public), 100, 8.0, ["clm_dp_pdp"], corpus)  # any file: not read
        c = exp.corpus
        assert (c.n_public, c.public_reserve_start, c.public_reserve) == (n_public, 1000, 100)
    asked = []

    class Stop(Exception):
        pass

    monkeypatch.setattr(cli, "generated_corpus", lambda out, n_members, n_public, seed: asked.append(
        (n_members, n_public, seed)) or tmp_path / "notes.jsonl")
    monkeypatch.setattr(cli, "_one_frontier", lambda *a, **kw: (_ for _ in ()).throw(Stop()))
    from toolkit.cli import main

    with pytest.raises(Stop):
        main(["frontier", str(ROOT / "configs" / "frontier_bases_reserve.yaml"), "--out", str(tmp_path)])
    assert asked == [(100, 1000 + 100, 27)]


def test_the_shipped_1000_config_is_the_reserve_frontier_with_its_stated_changes():
    """docs/data/frontier_reserve/frontier_reserve1000.yaml (results.md, "reserve frontier at 1,000"):
    frontier_reserve.yaml at size 1000 without DP-SGD, ε ∈ {1, 8, 16, ∞}, no search, and each DP strategy's rate the
    one the reserve search chose for it at size 100 — nothing else."""
    import copy
    import math

    from toolkit.pipelines.frontier import load_frontier

    data = ROOT / "docs" / "data" / "frontier_reserve"
    full = load_frontier(ROOT / "configs" / "frontier_reserve.yaml")
    cfg = load_frontier(data / "frontier_reserve1000.yaml")
    assert (tuple(cfg.sizes), cfg.hp_search) == ((1000,), None)
    assert tuple(cfg.strategies) == ("clm", "clm_dp_pdp", "clm_dp_gep", "clm_dp_lora")
    assert sorted(cfg.epsilons) == [1.0, 4.0, 8.0, 16.0, math.inf] and cfg.generate_seed == full.generate_seed
    mine, theirs = copy.deepcopy(cfg.experiment), copy.deepcopy(full.experiment)
    rates = {"clm_dp_pdp": mine["training"]["dp_schedule"].pop("learning_rate")}
    rates.update({name: s.pop("learning_rate") for name, s in mine["training"]["strategy_schedules"].items()})
    assert not any(mine["training"].pop("strategy_schedules").values())  # the rates only
    theirs["training"]["dp_schedule"].pop("learning_rate")
    assert mine == theirs
    chosen = json.loads((data / "hp_search.json").read_text())["sizes"]["100"]
    assert rates == {name: chosen[name]["chosen"]["learning_rate"] for name in cfg.strategies[1:]}
    assert rates["clm_dp_pdp"] == 5e-5


def test_the_1000_rates_config_is_the_1000_config_with_dp_sgd_and_pdp_at_the_three_way_rate():
    """docs/data/frontier_reserve/frontier_reserve1000_rates.yaml (results.md, "reserve frontier at 1,000"):
    frontier_reserve1000.yaml with DP-SGD at the reserve search's rate, PDP-SGD at the three-way search's rate, ε = 1,
    4, 8, 16 and ∞ — nothing else (so its ε = ∞ run and base are frontier_reserve1000's steps)."""
    import copy
    import math

    from toolkit.pipelines.frontier import load_frontier

    data = ROOT / "docs" / "data" / "frontier_reserve"
    first = load_frontier(data / "frontier_reserve1000.yaml")
    cfg = load_frontier(data / "frontier_reserve1000_rates.yaml")
    assert (cfg.name, tuple(cfg.sizes), cfg.hp_search, cfg.generate_seed) == (first.name, (1000,), None,
                                                                             first.generate_seed)
    assert tuple(cfg.strategies) == ("clm", "clm_dp", "clm_dp_pdp") and sorted(cfg.epsilons) == [1.0, 4.0, 8.0,
                                                                                                 16.0, math.inf]
    mine, theirs = copy.deepcopy(cfg.experiment), copy.deepcopy(first.experiment)
    rates = {"clm_dp_pdp": mine["training"]["dp_schedule"].pop("learning_rate"),
             "clm_dp": mine["training"].pop("strategy_schedules").pop("clm_dp")["learning_rate"]}
    theirs["training"]["dp_schedule"].pop("learning_rate")
    theirs["training"].pop("strategy_schedules")
    assert mine == theirs
    two_way = json.loads((data / "hp_search.json").read_text())["sizes"]["100"]
    three_way = json.loads((data / "pdp_rates" / "hp_search.json").read_text())["sizes"]["100"]
    assert rates == {"clm_dp": two_way["clm_dp"]["chosen"]["learning_rate"],
                     "clm_dp_pdp": three_way["clm_dp_pdp"]["chosen"]["learning_rate"]} == {"clm_dp": 5e-4,
                                                                                             "clm_dp_pdp": 1.5e-4}


EPSILONS_1000 = (1.0, 4.0, 8.0, 16.0)  # every finite ε of frontier_reserve1000.yaml, measured for each DP strategy

#: the coordinates each DP strategy's noise is drawn in on the CPU profile's tiny GPT-2 (training_log.json's
#: ``noised_parameters``): every weight (DP-SGD), the k = 64 subspace (PDP-SGD), LoRA's rank-8 adapters on attention
#: and MLP (DP-LoRA)
NOISED = {"clm_dp": 941_568, "clm_dp_pdp": 64, "clm_dp_lora": 32_768}


def sigma_from_rho(name: str, rho: float, expected_batch: float) -> float:
    """σ from the table's ρ (:func:`toolkit.results.frontier.noise_to_signal`, inverted by hand): σ·√D / E[B], and
    for GEP √2·σ·√(k·C² + P·C₁²) / (E[B]·√(C² + C₁²)) with k = 64, P = 941,568 residual coordinates, C = 1, C₁ = 0.4."""
    import math

    if name == "clm_dp_gep":
        return rho * expected_batch * math.sqrt(1.16) / (math.sqrt(2) * math.sqrt(64 + 0.16 * NOISED["clm_dp"]))
    return rho * expected_batch / math.sqrt(NOISED[name])


def rdp_epsilon(sigma: float, sample_rate: float, steps: int) -> float:
    """ε at δ = 1e-5 of ``steps`` Poisson-sampled Gaussian steps, by Opacus' RDP accountant (independent of the
    toolkit's calibration: only σ, recovered from the table, goes in)."""
    from opacus.accountants import RDPAccountant

    accountant = RDPAccountant()
    accountant.history = [(sigma, sample_rate, steps)]
    return accountant.get_epsilon(delta=1e-5)


def check_dp_rows(table, size: int, steps_per_epoch: int, epochs: int = 8) -> None:
    """Every DP row of a shipped reserve table: gain retained recomputed from the table's own utilities and inside
    its interval; green; the σ its ρ implies spends, by Opacus' accountant, the ε the table says and no more than its
    target (``epochs`` epochs of ``steps_per_epoch`` steps, sampling rate 1/steps_per_epoch). Plain's utility is the
    one the row was computed against (its held-out utility over its ratio to plain): the table's plain row, or, for
    rows added from a rebuilt ε = ∞ run (docs/data/frontier_reserve/README.md), that run's plain, which may differ
    from the table's by float rounding only (< 10⁻⁴)."""
    table_plain = table[table["strategy"] == "clm"]["heldout_utility"].item()
    for _, row in table[table["dp"].astype(bool)].iterrows():
        where = f"{row['strategy']} at ε = {row['epsilon']}"
        plain = row["heldout_utility"] / row["heldout_utility_vs_plain"]
        assert plain == pytest.approx(table_plain, abs=1e-4), where
        gain = (row["heldout_utility"] - row["base_heldout_utility"]) / (plain - row["base_heldout_utility"])
        assert row["heldout_gain_retained"] == pytest.approx(gain), where
        low, high = row["heldout_gain_retained_low"], row["heldout_gain_retained_high"]
        assert low < row["heldout_gain_retained"] < high, where
        check_green_at_its_epsilon(row, size, steps_per_epoch, epochs)


def check_green_at_its_epsilon(row, size: int, steps_per_epoch: int, epochs: int = 8) -> None:
    """A shipped DP row is green, and the σ its ρ implies spends, by Opacus' accountant, the ε the row says and no more
    than its target (``epochs`` epochs of ``steps_per_epoch`` steps, sampling rate 1/steps_per_epoch)."""
    where = f"{row['strategy']} at ε = {row['epsilon']}"
    assert row["verdict"] == "green", where
    sigma = sigma_from_rho(row["strategy"], row["noise_to_signal"], size / steps_per_epoch)
    eps = rdp_epsilon(sigma, 1 / steps_per_epoch, epochs * steps_per_epoch)
    assert eps == pytest.approx(row["accountant_epsilon"], rel=1e-3), where
    assert row["accountant_epsilon"] <= row["epsilon"], where


def test_the_shipped_reserve_frontier_reads_back():
    """docs/data/frontier_reserve (results.md, "reserve frontier at 100"): DP-SGD, PDP-SGD, GEP and DP-LoRA
    at every ε of the config, each row checked by :func:`check_dp_rows` (E[B] = 100/7, 56 steps); the rates are the
    reserve search's argmax, which read the reserve only."""
    from toolkit.pipelines.frontier import load_frontier
    from toolkit.results.frontier import load_frontier_result

    data = ROOT / "docs" / "data" / "frontier_reserve"
    cfg = load_frontier(ROOT / "configs" / "frontier_reserve.yaml")
    t = load_frontier_result(data).table
    dp = {(r.strategy, float(r.epsilon)) for r in t.itertuples() if r.dp}
    assert dp == {(s, e) for s in cfg.strategies[1:] for e in cfg.epsilons if e != float("inf")}
    check_dp_rows(t, 100, 7)
    search = json.loads((data / "hp_search.json").read_text())
    assert search["search"]["data"].startswith("the public reserve only")
    assert set(search["sizes"]["100"]) == set(cfg.strategies[1:])
    for name, found in search["sizes"]["100"].items():
        assert [s["learning_rate"] for s in found["scores"]] == list(cfg.hp_search.grid[0][1])
        best = max(found["scores"], key=lambda s: s["validation_utility"])
        assert found["chosen"]["learning_rate"] == best["learning_rate"]


def test_the_shipped_1000_table_recomputes():
    """docs/data/frontier_reserve/reserve1000 (results.md, "reserve frontier at 1,000"): PDP-SGD, GEP and
    DP-LoRA with the reserve at 1,000 individuals at ε = 1, 4, 8 and 16, each row checked by :func:`check_dp_rows`
    (E[B] = 1000/63, 504 steps)."""
    from toolkit.results.frontier import load_frontier_result

    t = load_frontier_result(ROOT / "docs" / "data" / "frontier_reserve" / "reserve1000").table
    assert sorted((r.strategy, float(r.epsilon)) for r in t.itertuples()) == sorted(
        [("clm", float("inf"))] + [(s, e) for s in ("clm_dp_gep", "clm_dp_lora", "clm_dp_pdp") for e in EPSILONS_1000])
    check_dp_rows(t, 1000, 63)


def test_the_shipped_1000_rates_table_recomputes():
    """docs/data/frontier_reserve/rates1000 (results.md, "reserve frontier at 1,000"): DP-SGD at ε = 1, 4, 8 and 16
    and PDP-SGD at ε = 8, at the rates of frontier_reserve1000_rates.yaml, beside plain fine-tuning, each DP row checked
    by :func:`check_dp_rows`; its plain and base are the reserve1000 table's (the same steps: float rounding apart)."""
    from toolkit.results.frontier import load_frontier_result

    data = ROOT / "docs" / "data" / "frontier_reserve"
    t = load_frontier_result(data / "rates1000").table
    assert sorted((r.strategy, float(r.epsilon)) for r in t.itertuples()) == [
        ("clm", float("inf"))] + [("clm_dp", e) for e in EPSILONS_1000] + [("clm_dp_pdp", 8.0)]
    check_dp_rows(t, 1000, 63)
    first = load_frontier_result(data / "reserve1000").table
    for col in ("heldout_utility", "base_heldout_utility"):
        assert t[t["strategy"] == "clm"][col].item() == pytest.approx(first[first["strategy"] == "clm"][col].item(),
                                                                      abs=1e-4)


def test_the_shipped_steps_table_recomputes():
    """docs/data/frontier_reserve/steps (results.md, "learning-rate search"): the search over PDP-SGD's rate and
    epochs scored every grid point on the reserve and chose its argmax (both keys at the grid's top, named as such);
    the run trained that choice — 32 epochs, whose σ the accountant (Opacus', from the table's ρ) says spends ε = 8
    over 224 steps — and its row is checked by :func:`check_dp_rows`."""
    from toolkit.results.frontier import load_frontier_result

    data = ROOT / "docs" / "data" / "frontier_reserve" / "steps"
    t = load_frontier_result(data).table
    assert sorted((r.strategy, float(r.epsilon)) for r in t.itertuples()) == [("clm", float("inf")),
                                                                                ("clm_dp_pdp", 8.0)]
    check_dp_rows(t, 100, 7, epochs=32)
    found = json.loads((data / "hp_search.json").read_text())["sizes"]["100"]["clm_dp_pdp"]
    grid = [(s["learning_rate"], s["epochs"]) for s in found["scores"]]
    assert grid == [(5e-5, 8), (5e-5, 32), (1.5e-4, 8), (1.5e-4, 32)]
    best = max(found["scores"], key=lambda s: s["validation_utility"])
    assert found["chosen"] == {"learning_rate": best["learning_rate"], "epochs": best["epochs"]}
    assert found["at_edge"] == {k: "highest" for k in found["chosen"]} == {"learning_rate": "highest",
                                                                            "epochs": "highest"}
    assert json.loads((data / "frontier.json").read_text())["hp_search"]["chosen"]["100"]["clm_dp_pdp"] == \
        found["chosen"]


def test_the_shipped_anchors_search_and_table_recompute():
    """docs/data/frontier_reserve/anchors (results.md, "learning-rate search"): the steps search again with the
    anchors apart (anchor_share 0.3): it scored the same 30 validation patients (the base's score is the steps
    search's to the last digit), trained 40 pseudo-members (100 − 30 − 30) at the rate matched to the target's 7 steps
    per epoch, chose its argmax over all four grid points, and the run trained that choice, whose row
    :func:`check_dp_rows` checks (32 epochs, 224 steps)."""
    from toolkit.results.frontier import load_frontier_result

    data = ROOT / "docs" / "data" / "frontier_reserve"
    mine = json.loads((data / "anchors" / "hp_search.json").read_text())
    steps = json.loads((data / "steps" / "hp_search.json").read_text())
    assert mine["search"]["anchor_share"] == 0.3 and "anchors apart" in mine["search"]["data"]
    assert {k: v for k, v in mine["search"].items() if k not in ("anchor_share", "data")} == {
        k: v for k, v in steps["search"].items() if k != "data"}
    found, before = mine["sizes"]["100"]["clm_dp_pdp"], steps["sizes"]["100"]["clm_dp_pdp"]
    assert found["base_validation_utility"] == before["base_validation_utility"]
    assert (found["search"]["n_units"], found["search"]["steps_per_epoch"]) == (40, 7)
    assert (before["search"]["n_units"], before["search"]["steps_per_epoch"]) == (70, 7)
    grid = [(s["learning_rate"], s["epochs"]) for s in found["scores"]]
    assert sorted(grid) == sorted((lr, e) for lr in (5e-5, 1.5e-4) for e in (8, 32))
    best = max(found["scores"], key=lambda s: s["validation_utility"])
    assert found["chosen"] == {"learning_rate": best["learning_rate"], "epochs": best["epochs"]}
    assert found["chosen"] == {"learning_rate": 5e-5, "epochs": 32}
    t = load_frontier_result(data / "anchors").table
    assert sorted((r.strategy, float(r.epsilon), int(r.epoch)) for r in t.itertuples()) == [
        ("clm", float("inf"), 8), ("clm_dp_pdp", 8.0, 32)]
    check_dp_rows(t, 100, 7, epochs=32)


def test_the_shipped_pdp_rates_search_and_table_recompute():
    """docs/data/frontier_reserve/pdp_rates (results.md, "learning-rate search"): PDP-SGD's rate searched on the
    reserve split three ways: the reserve frontier's six rates, the same 30 validation patients as its two-way search
    (the base's score to the last digit), 40 pseudo-members; the choice is the argmax (1.5e-4, where the two-way
    search chose 5e-5), and the run of it is checked by :func:`check_dp_rows`."""
    from toolkit.results.frontier import load_frontier_result

    data = ROOT / "docs" / "data" / "frontier_reserve"
    mine = json.loads((data / "pdp_rates" / "hp_search.json").read_text())
    two_way = json.loads((data / "hp_search.json").read_text())
    found, before = mine["sizes"]["100"]["clm_dp_pdp"], two_way["sizes"]["100"]["clm_dp_pdp"]
    assert mine["search"]["anchor_share"] == 0.3 and mine["search"]["grid"] == two_way["search"]["grid"]
    assert found["base_validation_utility"] == before["base_validation_utility"]
    assert (found["search"]["n_units"], before["search"]["n_units"]) == (40, 70)
    rates = [s["learning_rate"] for s in found["scores"]]
    assert rates == [s["learning_rate"] for s in before["scores"]]
    best = max(found["scores"], key=lambda s: s["validation_utility"])
    assert found["chosen"] == {"learning_rate": best["learning_rate"]} == {"learning_rate": 1.5e-4}
    assert before["chosen"] == {"learning_rate": 5e-5} and found["at_edge"] == {}
    t = load_frontier_result(data / "pdp_rates").table
    assert sorted((r.strategy, float(r.epsilon)) for r in t.itertuples()) == [("clm", float("inf")),
                                                                                ("clm_dp_pdp", 8.0)]
    check_dp_rows(t, 100, 7)


def check_bases_csv(data: Path, tables: dict) -> list[str]:
    """``data/bases.csv`` is :func:`toolkit.results.frontier.bases_table` of ``tables`` (base size → frontier table);
    returns its best private recipe per row."""
    import pandas as pd

    from toolkit.results.frontier import bases_table

    shipped, again = pd.read_csv(data / "bases.csv"), bases_table(tables)
    assert list(shipped["best_private"]) == list(again["best_private"])
    pd.testing.assert_frame_equal(shipped.drop(columns=["best_private", "best_verdict"]),
                                  again.drop(columns=["best_private", "best_verdict"]).astype(float),
                                  check_dtype=False)
    return list(shipped["best_private"])


def test_the_shipped_bases_tables_recompute():
    """docs/data/frontier_bases_reserve (results.md, "base strength at 100"): per base, DP-SGD and PDP-SGD at ε = 8 at
    the rate its own search chose on the shared reserve (the argmax of every candidate the grid holds). Base 100: each
    row checked by :func:`check_dp_rows`. Bases 300 and 1,000: plain fine-tuning's held-out utility is below the
    base's, so no row has a gain retained or an interval (undefined, not a ratio over a negative denominator); each DP
    row green, at the ε the accountant gives its σ. bases.csv is bases_table of the three tables."""
    import math

    from toolkit.pipelines.frontier import load_frontier
    from toolkit.results.frontier import load_frontier_result

    data = ROOT / "docs" / "data" / "frontier_bases_reserve"
    cfg = load_frontier(ROOT / "configs" / "frontier_bases_reserve.yaml")
    tables = {}
    for n in cfg.bases:
        t = tables[n] = load_frontier_result(data / f"base-{n}").table
        assert {(r.strategy, float(r.epsilon)) for r in t.itertuples()} == {("clm", math.inf), ("clm_dp", 8.0),
                                                                            ("clm_dp_pdp", 8.0)}
        plain = t[t["strategy"] == "clm"]["heldout_utility"].item()
        if n == 100:
            check_dp_rows(t, 100, 7)
        else:
            assert plain < t["base_heldout_utility"].iloc[0]
            gains = t[["heldout_gain_retained", "heldout_gain_retained_low", "heldout_gain_retained_high"]]
            assert gains.isna().all().all(), n
            for _, row in t[t["dp"].astype(bool)].iterrows():
                check_green_at_its_epsilon(row, 100, 7)
        search = json.loads((data / f"base-{n}" / "hp_search.json").read_text())
        named = json.loads((data / f"base-{n}" / "frontier.json").read_text())["hp_search"]["chosen"]["100"]
        assert set(search["sizes"]["100"]) == set(named) == {"clm_dp", "clm_dp_pdp"}
        for name, found in search["sizes"]["100"].items():
            assert [s["learning_rate"] for s in found["scores"]] == list(cfg.hp_search.grid[0][1])
            best = max(found["scores"], key=lambda s: s["validation_utility"])
            assert found["chosen"]["learning_rate"] == best["learning_rate"] == named[name]["learning_rate"]
    check_bases_csv(data, tables)


def test_the_bases_1000_config_uses_the_searches_choice_and_the_bases_attacks():
    """docs/data/frontier_bases_reserve/bases1000.yaml (results.md, "base strength at 1,000"): bases
    of 100 and 300 at 1,000 individuals, the reserve after the larger base, the audit (attacks included) of
    configs/frontier_bases_reserve.yaml, and PDP-SGD's rate the one every base's search of frontier_bases_reserve
    chose (read from the shipped searches, which read public patients only)."""
    import math

    from toolkit.pipelines.frontier import load_frontier

    data = ROOT / "docs" / "data" / "frontier_bases_reserve"
    cfg = load_frontier(data / "bases1000.yaml")
    assert (cfg.sizes, cfg.bases, sorted(cfg.epsilons), tuple(cfg.strategies)) == \
        ((1000,), (100, 300), [8.0, math.inf], ("clm", "clm_dp_pdp"))
    at_100 = load_frontier(ROOT / "configs" / "frontier_bases_reserve.yaml")
    assert cfg.hp_search is None and cfg.experiment["audit"] == at_100.experiment["audit"]
    corpus = cfg.experiment["corpus"]
    assert (corpus["public_reserve"], corpus["public_reserve_start"]) == (100, max(cfg.bases))
    chosen = {json.loads((data / f"base-{n}" / "hp_search.json").read_text())["sizes"]["100"]["clm_dp_pdp"]["chosen"]
              ["learning_rate"] for n in (100, 300, 1000)}
    assert chosen == {cfg.experiment["training"]["dp_schedule"]["learning_rate"]}


def test_the_shipped_bases_1000_tables_recompute():
    """docs/data/frontier_bases_reserve/bases1000 (results.md, "base strength at 1,000"): from either base plain
    fine-tuning gains significantly at 1,000 individuals, so every PDP-SGD row has a gain retained, checked by
    :func:`check_dp_rows` (E[B] = 1000/63, 504 steps); bases.csv is bases_table of the two."""
    from toolkit.results.frontier import load_frontier_result

    data = ROOT / "docs" / "data" / "frontier_bases_reserve" / "bases1000"
    tables = {n: load_frontier_result(data / f"base-{n}").table for n in (100, 300)}
    for n, t in tables.items():
        assert {(r.strategy, float(r.epsilon)) for r in t.itertuples()} == {("clm", float("inf")),
                                                                            ("clm_dp_pdp", 8.0)}, n
        check_dp_rows(t, 1000, 63)
    assert check_bases_csv(data, tables) == ["clm_dp_pdp", "clm_dp_pdp"]
