"""User-level sampling (``*_user``, DP-SGD-ULS of Charles et al. 2024; toolkit.training.dp): several chunks of a drawn
individual, their mean gradient clipped as one; the sampler, the pooled gradients against a backward per individual,
the clipped and summed update against a hand-written clip, and the accountant unchanged."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import torch

from toolkit.errors import ToolkitError
from toolkit.strategies import STRATEGIES, Strategy
from toolkit.training.dp import UnitSampler, example_mean_loss, pool_unit_gradients

from _dp_fixtures import assert_rdp_accounting, tiny_clm_base, tiny_model

pytestmark = pytest.mark.usefixtures("one_thread")


def _batch() -> dict:
    ids = torch.tensor([[2, 11, 12, 13, 14, 15, 16, 3], [2, 21, 22, 23, 24, 25, 26, 3],
                        [2, 31, 5, 33, 7, 35, 9, 3], [2, 41, 42, 6, 44, 45, 8, 3]])
    labels = ids.clone()
    labels[0, [0, 2, 4, 5, 6, 7]] = -100  # rows with different numbers of targets
    labels[1, 7] = -100
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels,
            "position_ids": torch.arange(8).expand(4, 8).clone()}


# rows 0 and 2 are one individual's chunks, row 1 another's, row 3 a third's; units in order of first appearance
UNITS = torch.tensor([7, 3, 7, 11])
GROUPS = [[0, 2], [1], [3]]


def _per_unit_backward(model, batch) -> list[dict[str, torch.Tensor]]:
    """Each individual's gradient by one plain ``backward()`` of the mean of its chunks' losses, on its own."""
    out = []
    for rows in GROUPS:
        model.zero_grad(set_to_none=True)
        loss = sum(example_mean_loss(model, {k: v[i:i + 1] for k, v in batch.items()}, "clm") for i in rows)
        (loss / len(rows)).backward()
        out.append({n: p.grad.detach().clone() for n, p in model.named_parameters()})
    return out


def test_pooled_gradients_are_each_individuals_mean_gradient_by_a_backward_of_its_own():
    """After Opacus' per-row gradients (one batch, ``loss_reduction="mean"``), :func:`pool_unit_gradients` leaves one
    row per individual: the gradient of the mean of its chunks' losses, computed by a separate backward per
    individual on a copy of the model (not through Opacus)."""
    from opacus import GradSampleModule

    model = tiny_model("clm")
    alone = copy.deepcopy(model)
    gsm = GradSampleModule(model, loss_reduction="mean")
    gsm.train()
    batch = _batch()
    example_mean_loss(gsm, batch, "clm").backward()
    params = [p for p in model.parameters() if p.requires_grad]
    assert all(p.grad_sample.shape[0] == 4 for p in params)
    pool_unit_gradients(params, UNITS)
    expected = _per_unit_backward(alone.train(), batch)
    for name, p in model.named_parameters():
        assert p.grad_sample.shape == (3, *p.shape), name
        for u in range(3):
            assert torch.allclose(p.grad_sample[u], expected[u][name], atol=1e-6, rtol=1e-5), (name, u)
    # not vacuous: the two chunks of the first individual differ, so their mean is neither of them
    wte = dict(model.named_parameters())["transformer.wte.weight"].grad_sample
    assert wte[0].abs().max() > 1e-4 and not torch.allclose(wte[0], expected[1]["transformer.wte.weight"])


def test_the_update_clips_each_individuals_mean_gradient_once():
    """The whole step without noise (σ = 0): Opacus' DPOptimizer on the pooled rows gives
    ``Σ_u clip_C(g_u) / E[B]`` with ``g_u`` each individual's mean gradient and the clip written by hand, so an
    individual with two chunks moves the model by at most ``C / E[B]``, as one with one chunk."""
    from opacus import GradSampleModule
    from opacus.optimizers import DPOptimizer

    model = tiny_model("clm")
    alone = copy.deepcopy(model)
    gsm = GradSampleModule(model, loss_reduction="mean")
    gsm.train()
    params = [p for p in model.parameters() if p.requires_grad]
    C, expected_batch = 0.05, 2.5
    opt = DPOptimizer(torch.optim.SGD(params, lr=1.0), noise_multiplier=0.0, max_grad_norm=C,
                      expected_batch_size=expected_batch)
    batch = _batch()
    example_mean_loss(gsm, batch, "clm").backward()
    pool_unit_gradients(params, UNITS)
    opt.pre_step()  # clip, accumulate, add (zero) noise, scale
    per_unit = _per_unit_backward(alone.train(), batch)
    names = [n for n, _ in model.named_parameters()]
    norms = [torch.sqrt(sum((g[n].double() ** 2).sum() for n in names)) for g in per_unit]
    assert all(float(n) > C for n in norms)  # every individual is clipped: the bound is what is tested
    for name, p in model.named_parameters():
        want = sum(g[name].double() * min(1.0, C / float(norm)) for g, norm in zip(per_unit, norms)) / expected_batch
        assert torch.allclose(p.grad.double(), want, atol=1e-7, rtol=1e-5), name


def _old_sampler(units, rate, steps, seed):
    """The one-chunk sampler as written before ``per_unit`` (commit ad74eb1), for the bit-for-bit check."""
    gen = torch.Generator().manual_seed(seed)
    size = torch.tensor([len(u) for u in units])
    flat = torch.tensor([i for u in units for i in u])
    offset = torch.tensor(np.concatenate([[0], np.cumsum(size.numpy())[:-1]]))
    for _ in range(steps):
        drawn = (torch.rand(len(units), generator=gen) < rate).nonzero().squeeze(1)
        pick = torch.minimum((torch.rand(len(drawn), generator=gen) * size[drawn]).long(), size[drawn] - 1)
        yield flat[offset[drawn] + pick].tolist()


def test_sampler_takes_up_to_m_distinct_chunks_of_each_drawn_unit_and_one_chunk_is_unchanged():
    units = [[0, 1, 2], [3], [4, 5, 6, 7, 8, 9, 10, 11, 12, 13], [14, 15]]
    unit_of = {i: u for u, ex in enumerate(units) for i in ex}
    assert list(UnitSampler(units, 0.5, 40, torch.Generator().manual_seed(3))) == \
        list(_old_sampler(units, 0.5, 40, 3))
    for m in (0, 2, 8):
        draws = np.zeros(len(units))
        steps = 2000
        for batch in UnitSampler(units, 0.3, steps, torch.Generator().manual_seed(5), per_unit=m):
            seen = [unit_of[i] for i in batch]
            order = list(dict.fromkeys(seen))
            assert seen == sorted(seen, key=order.index)  # a unit's rows are next to each other
            assert len(set(batch)) == len(batch)  # without replacement
            for u in order:
                assert seen.count(u) == (len(units[u]) if m == 0 else min(m, len(units[u])))
                draws[u] += 1
        # every unit drawn with probability q = 0.3, whatever its size (Poisson sampling of units): 5 sd margin
        assert np.all(np.abs(draws / steps - 0.3) < 5 * np.sqrt(0.3 * 0.7 / steps))
    # the chunks of a unit with more than m are drawn uniformly: each of unit 2's ten chunks in ~m/10 of its draws
    hits = np.zeros(10)
    for batch in UnitSampler([units[2]], 1.0, 3000, torch.Generator().manual_seed(9), per_unit=2):
        hits[np.asarray(batch) - 4] += 1
    assert np.all(np.abs(hits / 3000 - 0.2) < 5 * np.sqrt(0.2 * 0.8 / 3000))


def test_unit_examples_is_checked_and_the_user_strategies_are_dp():
    with pytest.raises(ToolkitError, match="unit_examples .* needs dp: true"):
        Strategy("x", "clm", unit_examples=4)
    with pytest.raises(ToolkitError, match="unit_examples must be an integer >= 0"):
        Strategy("x", "clm", dp=True, unit_examples=-1)
    with pytest.raises(ToolkitError, match="unit_examples must be an integer >= 0"):
        Strategy("x", "clm", dp=True, unit_examples=True)
    assert STRATEGIES["clm_dp_user"].unit_examples == 8 and STRATEGIES["clm_dp_user"].dp
    gep = STRATEGIES["clm_dp_gep_user"]
    assert (gep.subspace, gep.subspace_rank, gep.subspace_every, gep.unit_examples) == ("gep", 64, 10, 8)
    assert all(s.unit_examples == 1 for n, s in STRATEGIES.items() if not n.endswith("_user"))


@pytest.mark.slow
def test_clm_dp_user_end_to_end_the_accountant_and_sigma_are_dp_sgds(tmp_path):
    """A real run: the same σ as ``clm_dp`` for the same (q, steps, ε), the spent ε Opacus' RDP accountant's, and
    ``unit_examples`` recorded."""
    from toolkit.training import TrainConfig, train

    members, base = tiny_clm_base(tmp_path / "base", max_length=64)
    cfg = TrainConfig(epochs=[2], batch_size=4, learning_rate=1e-2, max_length=64, seed=0,
                      dp={"epsilon": 8.0, "max_grad_norm": 1.0})
    logs = {}
    for name in ("clm_dp", "clm_dp_user"):
        train(members, base, tmp_path / name, name, cfg, progress=False)
        logs[name] = json.loads((tmp_path / name / "run.json").read_text())
    dp, one = logs["clm_dp_user"]["dp"], logs["clm_dp"]["dp"]
    assert dp["unit_examples"] == 8 and one["unit_examples"] == 1
    assert dp["n_units"] < dp["n_examples"]  # some individual has several chunks: pooling is exercised
    for key in ("noise_multiplier", "sample_rate", "spent_epsilon", "steps_per_epoch", "noised_parameters"):
        assert dp[key] == one[key], key
    assert_rdp_accounting(dp, dp["steps_per_epoch"] * 2)
    assert logs["clm_dp_user"]["tokens_per_second"] > 0
