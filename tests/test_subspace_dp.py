"""Gradient-subspace DP-SGD from public data (PDP-SGD, GEP; toolkit.training.subspace): a step equals a brute-force
numpy computation from per-example gradients, the subspace never sees a member, the noise lives where the method
says, ε is Opacus' RDP accountant's, and a run through ``train`` writes its checkpoint and ``"dp"`` block."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from toolkit.corpus import load_corpus
from toolkit.errors import ToolkitError
from toolkit.models import TinyModelConfig, init_model, train_tokenizer
from toolkit.strategies import STRATEGIES, Strategy, get_strategy
from toolkit.training import subspace
from toolkit.training.dp import example_mean_loss
from toolkit.training.subspace import (GEP_RESIDUAL_CLIP, anchor_gradients, subspace_optimizer_class,
                                       top_subspace)

from _dp_fixtures import assert_rdp_accounting

pytestmark = pytest.mark.usefixtures("one_thread")

NOTES = Path(__file__).resolve().parents[1] / "data_samples" / "clinical" / "notes.jsonl"


def _tiny():
    """A tiny GPT-2 with dropout (the anchors' gradients must be computed without it)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(vocab_size=40, n_embd=8, n_layer=1, n_head=2, n_inner=16, n_positions=12,
                                      resid_pdrop=0.1, embd_pdrop=0.1, attn_pdrop=0.1, bos_token_id=0,
                                      eos_token_id=0))


def _batch(rows: list[list[int]], n_targets: list[int] | None = None) -> dict:
    ids = torch.tensor(rows)
    labels = ids.clone()
    for i, t in enumerate(n_targets or []):  # examples of different target counts
        labels[i, t:] = -100
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels,
            "position_ids": torch.arange(ids.shape[1]).expand(len(rows), ids.shape[1]).clone()}


PUBLIC = _batch([[1 + (3 * i + 5 * j) % 37 for j in range(8)] for i in range(10)])
MEMBERS = _batch([[2, 11, 12, 13, 14, 15, 16, 3], [2, 21, 22, 23, 24, 25, 26, 3], [2, 31, 5, 33, 7, 35, 9, 3],
                  [4, 8, 12, 16, 20, 24, 28, 32]], n_targets=[3, 8, 6, 8])


def _one_at_a_time(model, batch: dict) -> np.ndarray:
    """Each example's gradient by its own ``backward()`` on the plain model, dropout off: ``[n, P]`` float64."""
    model.eval()
    rows = []
    for i in range(len(batch["input_ids"])):
        model.zero_grad(set_to_none=True)
        example_mean_loss(model, {k: v[i:i + 1] for k, v in batch.items()}, "clm").backward()
        rows.append(torch.cat([p.grad.reshape(-1) for p in model.parameters()]).double().numpy())
    return np.stack(rows)


def _private(model, method: str, noise: float, clip: float, batch_size: int):
    from opacus import GradSampleModule

    gsm = GradSampleModule(model, loss_reduction="mean")
    gsm.train()
    opt = subspace_optimizer_class()(torch.optim.SGD(model.parameters(), lr=0.1), method=method,
                                     noise_multiplier=noise, max_grad_norm=clip, expected_batch_size=batch_size)
    return gsm, opt


def _dropout_off(gsm) -> None:
    gsm.eval()
    for m in gsm.modules():
        if any(True for _ in m.parameters(recurse=False)):
            m.train()


def _loss(m, b):
    return example_mean_loss(m, b, "clm")


@pytest.mark.parametrize("method", ["pdp", "gep"])
def test_a_step_equals_numpy_from_gradients_computed_one_example_at_a_time(method):
    model, k = _tiny(), 4
    alone = copy.deepcopy(model)
    gsm, opt = _private(model, method, noise=0.0, clip=1.0, batch_size=4)
    anchors = anchor_gradients(gsm, [PUBLIC], _loss, opt.params)
    pub = _one_at_a_time(alone, PUBLIC)
    assert np.allclose(anchors.double().numpy(), pub, atol=1e-6, rtol=1e-4)
    assert gsm.training and all(m.training for m in gsm.modules())  # modes restored
    # the basis: the top-k right singular vectors of the public gradients (numpy's SVD), compared as projectors
    opt.basis = top_subspace(anchors, k)
    v = np.linalg.svd(pub, full_matrices=False)[2][:k].T
    basis = opt.basis.double().numpy()
    assert np.allclose(basis.T @ basis, np.eye(k), atol=1e-5)
    assert np.allclose(basis @ basis.T, v @ v.T, atol=1e-4)
    # members: per-example gradients one at a time; the clipping threshold between their norms so that it binds
    g = _one_at_a_time(alone, MEMBERS)
    emb, res = g @ v, g - (g @ v) @ v.T
    if method == "pdp":
        c = float(np.median(np.linalg.norm(g, axis=1)))
        scaled = g * np.minimum(1, c / (np.linalg.norm(g, axis=1) + 1e-6))[:, None]
        want = v @ (v.T @ scaled.sum(0)) / 4
        bound = np.linalg.norm(g, axis=1)
    else:
        c = float(np.median(np.linalg.norm(emb, axis=1)))
        e = emb * np.minimum(1, c / (np.linalg.norm(emb, axis=1) + 1e-6))[:, None]
        c1 = GEP_RESIDUAL_CLIP * c
        r = res * np.minimum(1, c1 / (np.linalg.norm(res, axis=1) + 1e-6))[:, None]
        want = (v @ e.sum(0) + r.sum(0)) / 4
        bound = np.concatenate([np.linalg.norm(emb, axis=1) / c, np.linalg.norm(res, axis=1) / c1])
        assert (bound > 1).any() and (bound < 1).any()
        bound = bound * c
    assert (bound > c).any() and (bound < c).any()  # some examples clipped, some not
    opt.max_grad_norm = c
    opt.zero_grad(set_to_none=True)
    _dropout_off(gsm)  # as the one-at-a-time gradients (anchor_gradients turns it off by itself)
    _loss(gsm, MEMBERS).backward()
    assert opt.pre_step()
    got = torch.cat([p.grad.reshape(-1) for p in opt.params]).double().numpy()
    assert np.linalg.norm(want) > 1e-3
    assert np.allclose(got, want, atol=1e-6, rtol=1e-3), np.abs(got - want).max()


@pytest.mark.parametrize("method", ["pdp", "gep"])
def test_the_noise_lives_in_span_v_for_pdp_and_in_k_plus_p_scaled_coordinates_for_gep(method):
    """Signal zeroed (a step that drew nobody): PDP-SGD's update is V·z, z ~ N(0, σ²C²·I_k); GEP's is V·z₀ + z₁ with
    z₀ ~ N(0, 2σ²C²·I_k) and z₁ ~ N(0, 2σ²C₁²·I_P) (σ_r = √2·σ)."""
    model, k, sigma, c = _tiny(), 4, 1.3, 2.0
    gsm, opt = _private(model, method, noise=sigma, clip=c, batch_size=1)
    opt.basis = top_subspace(anchor_gradients(gsm, [PUBLIC], _loss, opt.params), k)
    basis = opt.basis.double()
    n_params = basis.shape[0]
    inside, outside = [], []
    torch.manual_seed(1)
    for _ in range(300):
        opt.zero_grad(set_to_none=True)
        for p in opt.params:
            p.grad_sample = torch.zeros((0, *p.shape))
        assert opt.pre_step()
        flat = torch.cat([p.grad.reshape(-1) for p in opt.params]).double()
        inside.append(basis.T @ flat)
        outside.append(flat - basis @ (basis.T @ flat))
    inside, outside = torch.stack(inside), torch.stack(outside)
    release = sigma * (math.sqrt(2) if method == "gep" else 1.0)
    assert opt.release_noise_multiplier == pytest.approx(release)
    c1 = GEP_RESIDUAL_CLIP * c
    if method == "pdp":
        assert float(outside.norm(dim=1).max()) < 1e-5 * float(inside.norm(dim=1).min())
        assert float(inside.std()) == pytest.approx(release * c, rel=0.05)  # 1,200 draws: sd of the sd ~2%
    else:
        assert float(inside.std()) == pytest.approx(release * math.sqrt(c ** 2 + c1 ** 2), rel=0.05)
        per_coord = float((outside ** 2).sum(dim=1).mean() / (n_params - k))
        assert per_coord == pytest.approx((release * c1) ** 2, rel=0.02)


def test_basis_checks_and_strategy_settings():
    g = torch.tensor([[1.0, 0, 0], [2.0, 0, 0], [0, 1.0, 0]])
    with pytest.raises(ToolkitError, match="needs at least 4 public anchors"):
        top_subspace(g, 4)
    with pytest.raises(ToolkitError, match="span fewer than 3 directions"):
        top_subspace(g, 3)
    assert torch.allclose(top_subspace(g, 1).abs().squeeze(), torch.tensor([1.0, 0, 0]))
    rows = {n: (s.subspace, s.subspace_rank) for n, s in STRATEGIES.items() if s.subspace}
    assert rows == {"clm_dp_pdp": ("pdp", 64), "clm_dp_gep": ("gep", 64), "ppclm_surrogate_dp_gep": ("gep", 64),
                    "clm_dp_gep_user": ("gep", 64)}
    assert all(s.dp and not s.lora_rank and s.subspace_every == 10 for s in STRATEGIES.values() if s.subspace)
    assert Strategy("x", "clm", dp=True, subspace="pdp", subspace_rank=4).subspace_every == 1  # the papers' default
    plain, gep = get_strategy("ppclm_surrogate_dp"), get_strategy("ppclm_surrogate_dp_gep")
    assert (plain.kind, plain.text, plain.protect) == (gep.kind, gep.text, gep.protect)
    for bad, match in [(dict(subspace="pca", subspace_rank=4), "subspace must be one of pdp, gep"),
                       (dict(subspace="gep"), "go together"), (dict(subspace_rank=4), "go together"),
                       (dict(subspace="gep", subspace_rank=4, lora_rank=8), "needs dp: true and no lora_rank"),
                       (dict(subspace="pdp", subspace_rank=4, subspace_every=0), "subspace_every must be an integer"),
                       (dict(subspace="pdp", subspace_rank=True), "subspace_rank must be an integer")]:
        with pytest.raises(ToolkitError, match=match):
            Strategy("x", "clm", dp=True, **bad)
    with pytest.raises(ToolkitError, match="needs dp: true"):
        Strategy("x", "clm", subspace="pdp", subspace_rank=4)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    corpus = load_corpus(NOTES)
    public = corpus.filter(split="public")[:40]
    tok = train_tokenizer([d.text for d in public], "clm", 600)
    base = tmp_path_factory.mktemp("base")
    init_model(tok, TinyModelConfig(kind="clm", vocab_size=600, hidden_size=16, num_layers=1, num_heads=2,
                                    intermediate_size=32, max_length=64), seed=0).save_pretrained(base)
    tok.save_pretrained(base)
    return corpus, public, base


def _cfg(epochs=(1,)):
    from toolkit.training import TrainConfig

    return TrainConfig(epochs=list(epochs), batch_size=4, learning_rate=1e-2, max_length=64, seed=0,
                       dp={"epsilon": 8.0, "max_grad_norm": 1.0})


def test_the_subspace_never_sees_a_member(setup, tmp_path, monkeypatch):
    """A spy on the anchor-gradient function records every example it gets: all are public-split chunks, none a
    member's; the first basis (at the base's weights) is the same when the members are other people's notes."""
    from toolkit.strategies import training_set
    from toolkit.training import train
    from transformers import AutoTokenizer

    corpus, public, base = setup
    seen, bases = [], []
    real_grads, real_top = subspace.anchor_gradients, subspace.top_subspace

    def spy_grads(module, batches, loss_fn, params):
        for b in batches:
            seen.extend(tuple(int(t) for t, m in zip(ids, mask) if m)
                        for ids, mask in zip(b["input_ids"], b["attention_mask"]))
        return real_grads(module, batches, loss_fn, params)

    def spy_top(grads, rank):
        bases.append(real_top(grads, rank))
        return bases[-1]

    monkeypatch.setattr(subspace, "anchor_gradients", spy_grads)
    monkeypatch.setattr(subspace, "top_subspace", spy_top)
    strat = Strategy("clm_dp_pdp_test", "clm", dp=True, subspace="pdp", subspace_rank=3, subspace_every=2)
    tok = AutoTokenizer.from_pretrained(base)

    def chunks(docs):
        return {tuple(e["input_ids"]) for e in training_set(docs, tok, get_strategy("clm"), positions=None,
                                                               max_length=64, progress=False).examples}

    firsts = []
    for members in (corpus.filter(split="train")[:12], corpus.filter(split="train")[12:24]):
        seen.clear()
        bases.clear()
        train(members, base, tmp_path / f"run{len(firsts)}", strat, _cfg(), public=public, progress=False)
        assert seen and set(seen) <= chunks(public) and not set(seen) & chunks(members)
        assert len(set(seen)) == 6 and len(seen) == 6 * len(bases)  # m = 2k anchors, every basis from the same
        assert len(bases) == math.ceil(math.ceil(len(set(members.person_ids)) / 4) / 2)  # every 2 steps
        firsts.append(bases[0])
    assert torch.equal(firsts[0], firsts[1])
    with pytest.raises(ToolkitError, match=r"needs the public split's documents \(corpus.public_split\)"):
        train(corpus.filter(split="train")[:4], base, tmp_path / "nopublic", strat, _cfg(), progress=False)


@pytest.mark.parametrize("name", ["clm_dp_gep", "clm_dp_pdp"])
def test_end_to_end_checkpoint_dp_block_and_the_accountant(setup, tmp_path, name):
    """The registered row through ``train``: a checkpoint, its ``"dp"`` block (method, rank, noised coordinates) and
    ε = Opacus' RDP accountant on (σ, q, steps), σ calibrated for (ε, q, steps) as for DP-SGD; GEP releases with
    σ_r = √2·σ."""
    from transformers import AutoModelForCausalLM

    from toolkit.training import train

    corpus, _, base = setup
    members = corpus.filter(split="train")[:16]
    public = corpus.filter(split="public")  # >= 128 chunks for k = 64
    ckpts = train(members, base, tmp_path / "run", name, _cfg(epochs=(1, 2)), public=public, progress=False)
    assert [e for e, _ in ckpts] == [1, 2]
    n_params = sum(p.numel() for p in AutoModelForCausalLM.from_pretrained(base).parameters())
    dp = json.loads((ckpts[-1][1] / "training_log.json").read_text())["dp"]
    method = get_strategy(name).subspace
    assert (dp["subspace"], dp["subspace_rank"], dp["subspace_anchors"], dp["subspace_every"]) == (method, 64, 128, 10)
    steps = dp["steps_per_epoch"] * 2
    assert dp["subspace_refreshes"] == math.ceil(steps / 10)
    assert dp["noised_parameters"] == (64 + n_params if method == "gep" else 64)
    assert_rdp_accounting(dp, steps)
    assert dp["release_noise_multiplier"] == pytest.approx(dp["noise_multiplier"] * (math.sqrt(2) if method == "gep"
                                                                                     else 1.0))
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["dp"]["noised_parameters"] == dp["noised_parameters"] and run["public"]["n_documents"] == len(public)
    w0 = AutoModelForCausalLM.from_pretrained(base).state_dict()
    moved = AutoModelForCausalLM.from_pretrained(ckpts[-1][1]).state_dict()
    assert any(not torch.equal(moved[k], w) for k, w in w0.items())


def test_the_train_step_key_holds_the_public_split_for_subspace_strategies_only():
    """The basis is computed from the public split: its fingerprint enters the key of these strategies' train step,
    and only theirs (every other strategy's key unchanged)."""
    from toolkit.pipelines.registry import TrainInputs, key_inputs
    from toolkit.training import TrainConfig

    fp, public = {"sha256": "members"}, {"sha256": "public"}
    for name in ("clm_dp_pdp", "clm_dp_gep", "ppclm_surrogate_dp_gep"):
        inputs = TrainInputs.of(get_strategy(name), TrainConfig(), "base", fp, "ids", public)
        assert key_inputs(inputs)["public"] == public
    for name in ("clm", "clm_dp", "ppclm_surrogate_dp", "clm_dp_lora"):
        with_public = key_inputs(TrainInputs.of(get_strategy(name), TrainConfig(), "base", fp, "ids", public))
        assert "public" not in with_public and with_public == key_inputs(
            TrainInputs.of(get_strategy(name), TrainConfig(), "base", fp, "ids"))
