"""Shared checks of the DP strategies' tests (DP-LoRA, gradient subspace, user-level sampling)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

NOTES = Path(__file__).resolve().parents[1] / "data_samples" / "clinical" / "notes.jsonl"


def tiny_model(kind: str):
    """A tiny GPT-2 or BERT without dropout (per-example gradients compared exactly)."""
    from transformers import BertConfig, BertForMaskedLM, GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    if kind == "clm":
        return GPT2LMHeadModel(GPT2Config(vocab_size=50, n_embd=16, n_layer=1, n_head=2, n_inner=32, n_positions=16,
                                          resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0,
                                          eos_token_id=0))
    return BertForMaskedLM(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                      intermediate_size=32, max_position_embeddings=16, hidden_dropout_prob=0.0,
                                      attention_probs_dropout_prob=0.0))


def tiny_clm_base(directory: Path, max_length: int = 128):
    """``(members, base)``: the first 40 members of the sample notes and a tiny causal LM (and its tokenizer, trained
    on 60 public notes) saved in ``directory``, the base of the DP strategies' end-to-end runs."""
    from toolkit.corpus import load_corpus
    from toolkit.models import TinyModelConfig, init_model, train_tokenizer

    corpus = load_corpus(NOTES)
    tok = train_tokenizer([d.text for d in corpus.filter(split="public")[:60]], "clm", 800)
    init_model(tok, TinyModelConfig(kind="clm", vocab_size=800, hidden_size=32, num_layers=1, num_heads=2,
                                    intermediate_size=64, max_length=max_length), seed=0).save_pretrained(directory)
    tok.save_pretrained(directory)
    return corpus.filter(split="train")[:40], directory


def assert_rdp_accounting(dp: dict, steps: int, target_epsilon: float = 8.0) -> None:
    """A run's ``"dp"`` block accounts as any DP-SGD run: σ is the one calibrated for (ε, δ, q, steps) alone, whatever
    the model or the method, and the spent ε is Opacus' RDP accountant called directly on (σ, q, steps)."""
    from opacus.accountants import RDPAccountant
    from opacus.accountants.utils import get_noise_multiplier

    assert dp["noise_multiplier"] == pytest.approx(
        get_noise_multiplier(target_epsilon=target_epsilon, target_delta=dp["delta"], sample_rate=dp["sample_rate"],
                             steps=steps, accountant="rdp"), rel=1e-9)
    acc = RDPAccountant()
    acc.history = [(dp["noise_multiplier"], dp["sample_rate"], steps)]
    assert dp["spent_epsilon"] == pytest.approx(acc.get_epsilon(dp["delta"]), rel=1e-9)
    assert dp["spent_epsilon"] <= target_epsilon
