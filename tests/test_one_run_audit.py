"""The one-run privacy audit (Steinke, Nasr & Jagielski 2023; methods.md §10–11): the ε lower bound against
the theorem's binomial tail computed independently, its monotonicity, the canaries' ½-inclusion and their removal from
the battery's notes, the verdict's rules, and two tiny trainings — DP-SGD (the bound stays ≤ the accountant's ε) and
plain fine-tuning on repeated canaries (the bound exceeds the ε the test names: the audit can fail)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import brentq
from scipy.stats import binom

from toolkit.audit.attacks.one_run import make_one_run_canaries, one_run_canaries_into_corpus, without_canaries
from toolkit.audit.verdict import verdict
from toolkit.corpus import Corpus
from toolkit.metrics.one_run import (default_guesses, one_run_epsilon_lower_bound, one_run_epsilon_score,
                                     one_run_guesses, one_run_p_value)

from _attack_fixtures import notes

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def _p_value_by_hand(m, r, v, eps, delta):
    """Theorem 3 written out term by term: P[W' >= v] + 2 m δ max_i P[v > W' >= v - i] / i, W' ~ Bin(r, q)."""
    q = math.exp(eps) / (1 + math.exp(eps))
    tail = sum(binom.pmf(w, r, q) for w in range(v, r + 1))
    alpha, run = 0.0, 0.0
    for i in range(1, v + 1):
        run += binom.pmf(v - i, r, q)
        alpha = max(alpha, run / i)
    return min(1.0, tail + 2 * m * delta * alpha)


@pytest.mark.parametrize("r, v, delta", [(200, 150, 0.0), (200, 150, 1e-5), (500, 330, 1e-5), (60, 60, 0.0)])
def test_lower_bound_solves_the_theorem_tail(r, v, delta):
    m = 1000
    for eps in (0.0, 0.4, 1.3):
        assert one_run_p_value(r, v, eps, m=m, delta=delta) == pytest.approx(_p_value_by_hand(m, r, v, eps, delta),
                                                                             rel=1e-9, abs=1e-15)
    # the bound is the ε at which the p-value reaches 0.05, found here by an independent root search
    hand = brentq(lambda e: _p_value_by_hand(m, r, v, e, delta) - 0.05, 1e-9, 30, xtol=1e-12)
    got = one_run_epsilon_lower_bound(r, v, m, delta, 0.95)
    assert got == pytest.approx(hand, abs=1e-6)
    assert _p_value_by_hand(m, r, v, got, delta) < 0.05 < _p_value_by_hand(m, r, v, got + 1e-4, delta)


def test_every_guess_right_has_a_closed_form():
    # v = r: P[W' >= r] = q^r = 0.05  ⇒  q = 0.05^(1/r), ε = log(q / (1 - q)); r = 100: 3.4930
    q = 0.05 ** (1 / 100)
    assert one_run_epsilon_lower_bound(100, 100, 1000) == pytest.approx(math.log(q / (1 - q)), abs=1e-6)
    assert math.log(q / (1 - q)) == pytest.approx(3.4930, abs=1e-4)
    # the δ term only makes rejecting harder: a smaller bound for a larger δ
    assert one_run_epsilon_lower_bound(100, 100, 1000, 1e-3) < one_run_epsilon_lower_bound(100, 100, 1000, 1e-5)


def test_more_correct_guesses_give_a_larger_bound_and_chance_gives_none():
    bounds = [one_run_epsilon_lower_bound(200, v, 1000, 1e-5) for v in range(100, 201, 10)]
    assert all(b2 >= b1 for b1, b2 in zip(bounds, bounds[1:]))
    assert bounds[0] == 0.0 and bounds[1] == 0.0           # 100 and 110 of 200: within chance (P ≥ 0.05 at ε = 0)
    assert bounds[-1] > bounds[-2] > bounds[5] > 0.5       # 200, 190, 150 right
    assert one_run_epsilon_lower_bound(0, 0, 10) == 0.0
    # scores that carry no information: no bound, whatever the seeded inclusion
    rng = np.random.default_rng(3)
    zero = [one_run_epsilon_score(rng.normal(size=400), rng.random(400) < 0.5).epsilon_lower_bound for _ in range(10)]
    assert sum(b > 0 for b in zero) <= 2 and max(zero) < 0.3


def test_guesses_and_the_bonferroni_corrected_search():
    scores = [5.0, 4.0, 3.0, 2.0, 1.0, 0.0, np.nan]
    included = [True, True, False, True, False, False, True]
    assert one_run_guesses(scores, included, 2, 0) == (2, 2)
    assert one_run_guesses(scores, included, 3, 2) == (5, 4)   # top 3: 2 right; bottom 2 (1.0, 0.0): both right
    with pytest.raises(ValueError):
        one_run_guesses(scores, included, 4, 3)               # only 6 scored canaries
    assert default_guesses(100) == [(5, 0), (5, 5), (10, 0), (10, 10), (25, 0), (25, 25), (50, 0), (50, 50)]
    # perfect separation of 100 canaries (50 included): all 100 guesses right, each pair at 1 - 0.05 / 8
    inc = np.r_[np.ones(50, bool), np.zeros(50, bool)]
    res = one_run_epsilon_score(np.r_[np.arange(50) + 100.0, np.arange(50)], inc, delta=0.0)
    q = (0.05 / 8) ** (1 / 100)
    assert (res.n_guesses, res.n_correct, res.n_hypotheses) == (100, 100, 8)
    assert res.epsilon_lower_bound == pytest.approx(math.log(q / (1 - q)), abs=1e-6)
    assert res.hypothesis_confidence == pytest.approx(1 - 0.05 / 8)


def test_canaries_are_included_with_probability_half_and_cut_out_again():
    table = make_one_run_canaries(2000, seed=1)
    assert abs(table["included"].mean() - 0.5) < 0.04 and table["canary_id"].is_unique
    assert (make_one_run_canaries(50, seed=1)["included"] == table["included"][:50]).all()  # seeded, by canary
    docs = Corpus(notes(16, 12))
    corpus, tab = one_run_canaries_into_corpus(docs, 30, repeats=2, seed=4)
    host = {d.doc_id: d.person_id for d in docs}
    for r in tab.itertuples():
        found = sum(d.text.count(r.text) for d in corpus)
        assert found == (2 if r.included else 0) and r.repeats == found
        assert all(host[i] == r.person_id for i in r.doc_ids)   # one individual's notes only: one DP unit
    originals = {d.doc_id: d for d in docs}
    for d in corpus:                                            # gold spans moved with the text
        o = originals[d.doc_id]
        assert [d.text[s.start:s.end] for s in d.spans] == [o.text[s.start:s.end] for s in o.spans]
    ids = {"spans": pd.DataFrame([(d.doc_id, s.start, s.end) for d in corpus for s in d.spans],
                                 columns=["doc_id", "start", "end"])}
    back, moved = without_canaries(corpus, tab, ids)
    assert [d.text for d in back] == [d.text for d in docs] and [d.spans for d in back] == [d.spans for d in docs]
    orig = {(d.doc_id, s.start, s.end) for d in docs for s in d.spans}
    assert set(map(tuple, moved["spans"][["doc_id", "start", "end"]].itertuples(index=False))) == orig


def test_verdict_red_for_a_dp_model_whose_lower_bound_exceeds_its_accountant():
    def one(lb, acc, unit="individual"):
        return {"epsilon_lower_bound": lb, "confidence": 0.95, "delta": 1e-5, "n_guesses": 40, "n_correct": 40,
                "m": 80, "accountant_epsilon": acc, "accountant_unit": unit}

    broken = verdict(one_run=one(2.5, 1.0))
    assert broken.level == "red" and broken.rule == "one_run_dp_broken" and "broken DP" in broken.reasons[0]
    # a canary changes its host's notes: ε = 1 per individual allows 2 per canary (group privacy), no red below it
    within = verdict(one_run=one(1.9, 1.0))
    assert within.rule != "one_run_dp_broken" and not any("broken DP" in r for r in within.reasons)
    assert verdict(one_run={**one(1.9, 1.0), "claimed_epsilon": 1.5}).rule == "one_run_dp_broken"
    ok = verdict(one_run=one(0.0, 1.0))
    assert ok.level != "red" and "accountant ε = 1.00" in ok.empirical_epsilon
    assert not any("one-run" in r for r in ok.reasons)
    no_dp = verdict(one_run=one(2.0, None))
    assert any("without a DP claim" in r for r in no_dp.reasons) and no_dp.level == "incomplete"
    small = verdict(one_run=one(0.8, None))
    assert not any("one-run" in r for r in small.reasons) and "no DP claim" in small.empirical_epsilon
    chunk = verdict(one_run=one(2.0, 1.0, unit="chunk"))      # per-chunk ε: a canary may span chunks, not compared
    assert chunk.level != "red" and "not compared" in chunk.empirical_epsilon
    assert verdict().empirical_epsilon is None and "one-run audit" not in verdict().not_measured


def test_cpu_profile_default_is_two_canaries_per_member(tmp_path):
    from _experiment_fixtures import TINY, write_config

    from toolkit.config.experiment import load_experiment
    from toolkit.pipelines.attack_steps import one_run_canary_count

    members = Corpus(notes(16, 12))                              # 8 individuals
    cfg = load_experiment(write_config(tmp_path / "c.yaml"))
    assert cfg.audit.attacks.one_run_canaries is None and one_run_canary_count(cfg, members) == 16
    data = {**TINY, "audit": {**TINY["audit"], "attacks": {"one_run_canaries": 0}}}
    assert one_run_canary_count(load_experiment(write_config(tmp_path / "d.yaml", data)), members) == 0


def _train_and_audit(tmp_path, strategy: str):
    """80 audit canaries (each included with probability ½, 3 times into its host's notes) in 32 short notes of
    16 individuals; a 2×64 GPT-2 trained 30 epochs at lr 5e-3 (DP-SGD at ε = 1 for ``clm_dp``); the one-run
    audit with the untrained base as reference."""
    from toolkit.audit.attacks.one_run import accountant_privacy, one_run_audit
    from toolkit.audit.losses import load_audit_model
    from toolkit.models import TinyModelConfig, init_model, train_tokenizer
    from toolkit.training import TrainConfig, train

    docs = Corpus(notes(32, 20))
    members, table = one_run_canaries_into_corpus(docs, 80, repeats=3, seed=0)
    tok = train_tokenizer([d.text for d in docs] * 3 + list(make_one_run_canaries(80)["text"]), "clm", 400)
    base = tmp_path / "base"
    init_model(tok, TinyModelConfig(kind="clm", hidden_size=64, num_layers=2, num_heads=2, intermediate_size=128,
                                    max_length=128), seed=0).save_pretrained(base)
    tok.save_pretrained(base)
    cfg = TrainConfig(epochs=[30], batch_size=8, learning_rate=5e-3, lr_schedule="constant", max_length=128, seed=0,
                      dp={"epsilon": 1.0})
    ckpt = train(members, base, tmp_path / strategy, strategy, cfg, progress=False)[-1][1]
    f, ftok = load_audit_model(ckpt)
    audit = one_run_audit(f, ftok, table, reference=load_audit_model(base), accountant=accountant_privacy(ckpt),
                          progress=False)
    return audit.to_json()


@pytest.mark.slow
def test_dp_training_stays_below_its_accountant(tmp_path):
    res = _train_and_audit(tmp_path, "clm_dp")
    assert res["accountant_unit"] == "individual" and res["delta_source"] == "accountant"
    assert 0.5 < res["accountant_epsilon"] <= 1.0
    # per canary (a change of the host's notes): (2ε, (1 + e^ε)δ) by group privacy
    assert res["claimed_epsilon"] == pytest.approx(2 * res["accountant_epsilon"])
    assert res["delta"] == pytest.approx((1 + math.exp(res["accountant_epsilon"])) * 1e-5)
    assert res["epsilon_lower_bound"] <= res["accountant_epsilon"]
    assert verdict(one_run=res).rule != "one_run_dp_broken"


@pytest.mark.slow
def test_memorised_canaries_exceed_the_named_epsilon(tmp_path):
    named = 0.5  # a DP claim of ε = 0.5 per individual allows 1.0 per canary; the DP run above stays below it
    res = _train_and_audit(tmp_path, "clm")
    assert res["accountant_epsilon"] is None and res["attack"] == "reference"
    assert res["epsilon_lower_bound"] > 2 * named + 0.5         # measured 1.99: 40 of 40 guesses right
    claimed = verdict(one_run={**res, "accountant_epsilon": named, "accountant_unit": "individual"})
    assert claimed.level == "red" and claimed.rule == "one_run_dp_broken"
