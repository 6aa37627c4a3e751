"""Notebook 04 (RMFT, dedup, extraction, MaxTER) runs headless with reduced parameters and a tiny profile."""

from __future__ import annotations

import pandas as pd
import pytest
from test_notebooks import execute

TINY_PROFILE = """name: tiny-email
base:
  clm: {kind: clm, vocab_size: 400, hidden_size: 32, num_layers: 1, num_heads: 2, intermediate_size: 64, max_length: 128}
email:
  pretrain: {epochs: [1], batch_size: 8, learning_rate: 2.0e-3, lr_schedule: constant, max_length: 128}
  public_documents: 24
  finetune: {epochs: [1, 2], checkpoints_per_epoch: 1, batch_size: 8, learning_rate: 5.0e-3, lr_schedule: constant, max_length: 128}
  train_documents: 24
  heldout_documents: 4
  corpus_prompts: 8
  extraction: {prompt_tokens: 20, max_total_tokens: 32, batch_size: 16, perplexity_max_length: 128}
"""


@pytest.mark.slow
def test_notebook_04_rmft_and_extraction(tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the kernel inherits it: tiny models run fastest on one thread
    profile = tmp_path / "tiny_email.yaml"
    profile.write_text(TINY_PROFILE)
    work = tmp_path / "work"
    text = execute(tmp_path, "04_rmft_and_extraction.ipynb",
                   {"profile": str(profile), "file_prompts": 8, "tau": 50.0, "work_dir": str(work)})
    assert "AURC" in text and "TER" in text and "look-alike" in text
    # every reduction is judged by its exact interval, and an infeasible technique's row says why (issue 55, 5)
    assert "exact interval" in text and ("no conclusion at this size" in text or "reduces" in text
                                         or "increases" in text)
    assert "Smallest MDP% over the checkpoints" in text and "%²" in text
    assert "+86% reduction" not in text and "% reduction) at a mean MDP" not in text
    for tech in ("baseline", "rmft", "dedup"):
        assert (work / "extraction" / tech / "extraction.parquet").is_file()
        assert len(list((work / "runs" / tech).glob("step-*"))) == 2
    assert (tmp_path / "04_rmft_and_extraction.html").stat().st_size > 10_000


# ---------------------------------------------------------------------------------------------------------------------
# the reductions' exact intervals (issue 55, problem 5), against an independent computation


def _binom_tail(k: int, m: int, p: float, upper: bool) -> float:
    """P(X >= k) (upper) or P(X <= k) of Binomial(m, p), summed term by term with exact integers."""
    from math import comb

    ks = range(k, m + 1) if upper else range(0, k + 1)
    return sum(comb(m, j) * p ** j * (1 - p) ** (m - j) for j in ks)


def _clopper_pearson_by_bisection(k: int, m: int, confidence: float) -> tuple[float, float]:
    """The Clopper–Pearson bounds by their definition (P(X >= k | p_lo) = α/2, P(X <= k | p_hi) = α/2), found by
    bisection: no beta quantile, no scipy."""
    a = (1 - confidence) / 2

    def solve(f, target) -> float:  # f increasing in p
        lo, hi = 0.0, 1.0
        for _ in range(200):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if f(mid) < target else (lo, mid)
        return (lo + hi) / 2

    p_lo = 0.0 if k == 0 else solve(lambda p: _binom_tail(k, m, p, True), a)
    p_hi = 1.0 if k == m else solve(lambda p: -_binom_tail(k, m, p, False), -a)
    return p_lo, p_hi


@pytest.mark.parametrize("k_t,n_t,k_b,n_b,conf", [(1, 170, 7, 170, 0.95), (3, 170, 12, 170, 0.9875),
                                                   (0, 200, 9, 150, 0.95), (5, 90, 5, 140, 0.99)])
def test_rate_ratio_interval_is_the_conditional_clopper_pearson_interval(k_t, n_t, k_b, n_b, conf):
    from toolkit.metrics.extraction import rate_ratio_ci

    got = rate_ratio_ci(k_t, n_t, k_b, n_b, confidence=conf)
    p_lo, p_hi = _clopper_pearson_by_bisection(k_t, k_t + k_b, conf)
    to_ratio = lambda p: p * n_b / ((1 - p) * n_t)  # noqa: E731
    assert got["ratio_low"] == pytest.approx(to_ratio(p_lo), rel=1e-6, abs=1e-12)
    assert got["ratio_high"] == pytest.approx(to_ratio(p_hi), rel=1e-6)
    assert got["separates"] == (got["ratio_high"] < 1 or got["ratio_low"] > 1)


def test_seven_against_one_leak_of_170_is_no_conclusion_and_a_large_gap_is_one():
    """The issue's case: "+86% reduction" from 1 against 7 leaked addresses of 170 — the interval holds no change."""
    from toolkit.metrics.extraction import extraction_reductions, rate_ratio_ci

    ci = rate_ratio_ci(1, 170, 7, 170)
    assert ci["ratio"] == pytest.approx(1 / 7) and ci["ratio_low"] < 1 < ci["ratio_high"] and not ci["separates"]
    assert rate_ratio_ci(0, 170, 20, 170)["separates"] and rate_ratio_ci(0, 170, 0, 170)["ratio_high"] == float("inf")

    def tab(leaked, seen):
        return pd.DataFrame({"checkpoint": [0, 1], "n_leaked": [0, leaked], "n_original": [170, 170],
                             "n_seen": [0, seen]})

    red = extraction_reductions({"baseline": tab(7, 170), "rmft": tab(1, 170), "dedup": tab(0, 120)})
    assert list(red["rate"]) == ["TER", "SER"] * 2
    assert red["confidence"].tolist() == pytest.approx([1 - 0.05 / 4] * 4)  # Bonferroni over 2 techniques x 2 rates
    rmft = red[(red["technique"] == "rmft") & (red["rate"] == "TER")].iloc[0]
    assert rmft["reduction"] == pytest.approx(100 * (1 - 1 / 7)) and rmft["conclusion"] == "no conclusion at this size"
    assert rmft["reduction_low"] < 0 < rmft["reduction_high"]


def test_an_infeasible_checkpoint_row_says_why():
    from toolkit.metrics.extraction import optimal_checkpoints

    comp = pd.DataFrame({"technique": ["dedup", "dedup", "rmft"], "checkpoint": [1, 2, 1], "epoch": [1.0, 2.0, 1.0],
                         "mdp_percent": [49.3, 60.0, 2.0], "ter_drop": [80.0, 90.0, 50.0], "ter": [1.0, 0.5, 2.0]})
    best = optimal_checkpoints(comp, 10.0).set_index("technique")
    assert not best.loc["dedup", "feasible"] and "smallest MDP% 49.3%" in best.loc["dedup", "why"]
    assert best.loc["rmft", "feasible"] and best.loc["rmft", "why"] == ""
