"""DP-LoRA (``*_dp_lora*``, Yu et al. 2022; toolkit.training.lora): per-example gradients of the adapters, adapters
the only trained and noised parameters, the accountant unchanged, merged checkpoints that are ordinary models."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from toolkit.corpus import load_corpus
from toolkit.errors import ToolkitError
from toolkit.models import TinyModelConfig, init_model, train_tokenizer
from toolkit.strategies import STRATEGIES, Strategy, get_strategy
from toolkit.training.dp import example_mean_loss
from toolkit.training.lora import LORA_ALPHA, adapter_parameters, add_adapters, lora_config, merged_model

from _dp_fixtures import assert_rdp_accounting, tiny_clm_base, tiny_model as _tiny

pytestmark = pytest.mark.usefixtures("one_thread")

NOTES = Path(__file__).resolve().parents[1] / "data_samples" / "clinical" / "notes.jsonl"


def _adapted_shapes(model) -> dict[str, tuple[int, int]]:
    """``(d_in, d_out)`` of every matrix DP-LoRA adapts, read off the model itself (not through peft)."""
    from transformers.pytorch_utils import Conv1D

    out = {}
    for name, m in model.named_modules():
        if isinstance(m, Conv1D) and name.rsplit(".", 1)[-1] in ("c_attn", "c_proj", "c_fc"):
            out[name] = tuple(m.weight.shape)  # Conv1D: (in, out)
        elif isinstance(m, torch.nn.Linear) and ".encoder.layer." in f".{name}" \
                and name.rsplit(".", 1)[-1] in ("query", "key", "value", "dense"):
            out[name] = (m.in_features, m.out_features)
    return out


def _randomise_b(adapted) -> None:
    """``B = 0`` at initialisation makes every gradient of ``A`` zero: give ``B`` values so that both are tested."""
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in adapter_parameters(adapted).items():
            if ".lora_B." in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.1)


def _batch(kind: str) -> dict:
    ids = torch.tensor([[2, 11, 12, 13, 14, 15, 16, 3], [2, 21, 22, 23, 24, 25, 26, 3], [2, 31, 5, 33, 7, 35, 9, 3]])
    labels = ids.clone()
    labels[0, [0, 2, 4, 5, 6, 7]] = -100  # 2 targets, 7 and 8 for the others
    labels[1, 7] = -100
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels,
             "position_ids": torch.arange(8).expand(3, 8).clone()}
    if kind == "mlm":
        batch["token_type_ids"] = torch.zeros_like(ids)
    return batch


@pytest.mark.parametrize("kind", ["clm", "mlm"])
def test_lora_per_example_gradients_equal_a_per_example_backward(kind):
    """Opacus' per-sample gradients of the adapters (one batch, ``loss_reduction="mean"``) are each example's own
    gradient, computed by one ``backward()`` per example on a copy; the frozen base gets none."""
    from opacus import GradSampleModule

    model = _tiny(kind)
    shapes = _adapted_shapes(model)
    adapted = add_adapters(model, rank=4)
    _randomise_b(adapted)
    alone = copy.deepcopy(adapted)
    gsm = GradSampleModule(adapted, loss_reduction="mean")
    gsm.train()
    batch = _batch(kind)
    example_mean_loss(gsm, batch, kind).backward()
    names = list(adapter_parameters(adapted))
    assert len(names) == 2 * len(shapes) == (8 if kind == "clm" else 12)
    samples = {n: p.grad_sample for n, p in adapted.named_parameters() if n in names}
    assert all(s.shape[0] == 3 for s in samples.values())
    assert all(getattr(p, "grad_sample", None) is None and p.grad is None
               for n, p in adapted.named_parameters() if n not in names)
    alone.train()
    params = dict(alone.named_parameters())
    for i in range(3):
        alone.zero_grad(set_to_none=True)
        example_mean_loss(alone, {k: v[i:i + 1] for k, v in batch.items()}, kind).backward()
        for n in names:
            assert torch.allclose(samples[n][i], params[n].grad, atol=1e-6, rtol=1e-5), (i, n)
    # not a vacuous equality: A's gradients are non-zero and the examples' gradients differ
    a = next(n for n in names if ".lora_A." in n)
    assert samples[a].abs().max() > 1e-4 and not torch.allclose(samples[a][0], samples[a][1])


def test_only_adapters_are_trainable_and_merging_is_w0_plus_scaled_ba():
    base = _tiny("clm")
    shapes = _adapted_shapes(base)
    assert len(shapes) == 4  # c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj
    frozen = copy.deepcopy(base)
    adapted = add_adapters(base, rank=4)
    trainable = adapter_parameters(adapted)
    # the noise dimension: r·(d_in + d_out) per adapted matrix, nothing else
    assert sum(p.numel() for p in trainable.values()) == sum(4 * (i + o) for i, o in shapes.values())
    assert sum(p.numel() for p in trainable.values()) < sum(p.numel() for p in frozen.parameters())
    reference = frozen.state_dict()
    # B = 0 at the start: the merged model is the base, exactly
    start = merged_model(frozen, adapted).state_dict()
    assert start.keys() == reference.keys() and all(torch.equal(start[k], reference[k]) for k in reference)
    # with adapters: W = W0 + (α/r)·B·A on the adapted matrices (Conv1D stores Wᵀ), every other weight the base's
    _randomise_b(adapted)
    merged = merged_model(frozen, adapted)
    assert type(merged).__name__ == "GPT2LMHeadModel" and not any("lora" in k for k in merged.state_dict())
    state, ad = merged.state_dict(), dict(adapted.named_parameters())
    for k, w0 in reference.items():
        module = k.rsplit(".", 1)[0]
        if module in shapes and k.endswith(".weight"):
            a = ad[f"base_model.model.{module}.lora_A.default.weight"].detach()
            b = ad[f"base_model.model.{module}.lora_B.default.weight"].detach()
            assert torch.allclose(state[k] - w0, (LORA_ALPHA / 4) * (b @ a).T, atol=1e-6), k
            assert not torch.equal(state[k], w0)
        else:
            assert torch.equal(state[k], w0), k
    assert all(torch.equal(v, reference[k]) for k, v in frozen.state_dict().items())  # the base copy untouched


def test_lora_strategies_and_settings_are_checked():
    assert {n: s.lora_rank for n, s in STRATEGIES.items() if s.lora_rank} == {
        "mlm_dp_lora": 8, "clm_dp_lora4": 4, "clm_dp_lora": 8, "clm_dp_lora16": 16, "ppclm_surrogate_dp_lora": 8}
    assert all(s.dp for s in STRATEGIES.values() if s.lora_rank)
    plain, lora = get_strategy("ppclm_surrogate_dp"), get_strategy("ppclm_surrogate_dp_lora")
    assert (plain.kind, plain.text, plain.protect) == (lora.kind, lora.text, lora.protect)
    with pytest.raises(ToolkitError, match="needs dp: true"):
        Strategy("x", "clm", lora_rank=8)
    with pytest.raises(ToolkitError, match="lora_rank must be an integer"):
        Strategy("x", "clm", dp=True, lora_rank=True)
    with pytest.raises(ToolkitError, match="LoRA rank must be a positive integer"):
        lora_config(_tiny("clm"), 0)
    other = SimpleNamespace(config=SimpleNamespace(model_type="opt"))
    with pytest.raises(ToolkitError, match="DP-LoRA knows the projections of gpt2, bert, roberta models, not 'opt'"):
        lora_config(other, 4)


@pytest.fixture(scope="module")
def clm_setup(tmp_path_factory):
    return tiny_clm_base(tmp_path_factory.mktemp("clm_base"))


@pytest.mark.slow
def test_clm_dp_lora_end_to_end_merged_checkpoint_low_rank_and_the_accountant_unchanged(clm_setup, tmp_path):
    from transformers import AutoModelForCausalLM

    from toolkit.training import TrainConfig, train

    members, base = clm_setup
    cfg = TrainConfig(epochs=[1, 3], batch_size=4, learning_rate=1e-2, max_length=128, seed=0,
                      dp={"epsilon": 8.0, "max_grad_norm": 1.0})
    ckpts = train(members, base, tmp_path / "run", "clm_dp_lora", cfg, progress=False)
    assert [e for e, _ in ckpts] == [1, 3]
    w0 = AutoModelForCausalLM.from_pretrained(base).state_dict()
    shapes = _adapted_shapes(AutoModelForCausalLM.from_pretrained(base))
    dp = json.loads((ckpts[-1][1] / "training_log.json").read_text())["dp"]
    # the noise lives in the adapters' coordinates only: Σ r·(d_in + d_out) over the adapted matrices
    assert dp["lora_rank"] == 8 and dp["lora_alpha"] == LORA_ALPHA
    assert dp["noised_parameters"] == sum(8 * (i + o) for i, o in shapes.values()) < sum(v.numel() for v in w0.values())
    # accounting as any DP-SGD run: σ calibrated for (q, steps, ε) alone; ε = Opacus' RDP accountant on them
    steps = dp["steps_per_epoch"] * 3
    assert dp["unit"] == "individual" and dp["n_units"] == len(set(members.person_ids)) < dp["n_examples"]
    assert_rdp_accounting(dp, steps)
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["dp"]["spent_epsilon"] == dp["spent_epsilon"] and run["dp"]["noised_parameters"] == dp["noised_parameters"]
    # an ordinary causal LM directory, no adapter left; every non-adapted weight exactly the base's (no noise there),
    # every adapted matrix moved by a product of rank <= r
    for _, path in ckpts:
        assert not (path / "adapter_config.json").exists()
        model = AutoModelForCausalLM.from_pretrained(path)
        assert type(model).__name__ == "GPT2LMHeadModel"
        state = model.state_dict()
        assert state.keys() == w0.keys()
        moved = 0
        for k, w in w0.items():
            module = k.rsplit(".", 1)[0]
            if module in shapes and k.endswith(".weight"):
                rank = int(torch.linalg.matrix_rank((state[k] - w).double(), rtol=1e-4))
                assert rank <= 8 < min(w.shape), (k, rank)
                moved += rank > 0
            else:
                assert torch.equal(state[k], w), k
        assert moved == len(shapes)


@pytest.mark.slow
def test_mlm_dp_lora_checkpoint_is_a_tied_bert_with_the_head_untouched(tmp_path):
    from transformers import AutoModelForMaskedLM

    from toolkit.training import TrainConfig, train

    corpus = load_corpus(NOTES)
    members = corpus.filter(split="train")[:16]
    tok = train_tokenizer([d.text for d in corpus.filter(split="public")[:60]], "mlm", 800)
    base = tmp_path / "base"
    init_model(tok, TinyModelConfig(kind="mlm", vocab_size=800, hidden_size=32, num_layers=1, num_heads=2,
                                    intermediate_size=64, max_length=128), seed=0).save_pretrained(base)
    tok.save_pretrained(base)
    cfg = TrainConfig(epochs=[2], batch_size=4, learning_rate=1e-2, max_length=128, seed=0, dp={"max_grad_norm": 1.0})
    (_, path), = train(members, base, tmp_path / "run", "mlm_dp_lora", cfg, progress=False)
    model = AutoModelForMaskedLM.from_pretrained(path)
    assert model.cls.predictions.decoder.bias is model.cls.predictions.bias
    w0, state = AutoModelForMaskedLM.from_pretrained(base).state_dict(), model.state_dict()
    shapes = _adapted_shapes(model)
    assert len(shapes) == 6 and not any(k.startswith("cls.") for k in shapes)  # the MLM head is not adapted
    for k, w in w0.items():
        if k.rsplit(".", 1)[0] in shapes and k.endswith(".weight"):
            assert 0 < int(torch.linalg.matrix_rank((state[k] - w).double(), rtol=1e-4)) <= 8, k
        else:
            assert torch.equal(state[k], w), k


def test_cpu_profile_noise_dimension_as_methods_md_states():
    """docs/methods.md §3: on the CPU profile's tiny GPT-2 (4,000 tokens) rank 8 noises D = 32,768 coordinates
    instead of P = 941,568, a noise norm σ·C·√D about 5.4× smaller."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from toolkit.config.profiles import load_profile

    tiny = load_profile("cpu").base["clm"]
    model = GPT2LMHeadModel(GPT2Config(vocab_size=tiny.vocab_size, n_embd=tiny.hidden_size, n_layer=tiny.num_layers,
                                       n_head=tiny.num_heads, n_inner=tiny.intermediate_size,
                                       n_positions=tiny.max_length))
    total = sum(p.numel() for p in model.parameters())
    noised = sum(p.numel() for p in adapter_parameters(add_adapters(model, get_strategy("clm_dp_lora").lora_rank))
                 .values())
    assert (noised, total) == (32_768, 941_568)
    assert round((total / noised) ** 0.5, 1) == 5.4
