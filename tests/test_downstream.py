"""Downstream utility (methods.md §8): frozen layers, result dict, label errors, GPT-2, and that the path learns."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from toolkit.audit import downstream_f1, freeze_all_but_last, majority_baseline_f1, transformer_layers
from toolkit.corpus import Corpus, ToolkitError, make_document, read_jsonl
from toolkit.models import TinyModelConfig, init_model, train_tokenizer

SAMPLE = Path(__file__).resolve().parents[1] / "data_samples" / "clinical" / "notes.jsonl"
TINY = dict(vocab_size=800, hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, max_length=128)
RESULT_KEYS = {"macro_f1", "accuracy", "n_train", "n_eval", "labels", "per_class_f1", "epochs", "learning_rate",
               "trainable_parameters", "total_parameters"}


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def notes() -> Corpus:
    return read_jsonl(SAMPLE)


@pytest.fixture(scope="module")
def splits(notes) -> tuple[Corpus, Corpus]:
    """~40 training notes and ~40 test notes whose labels all occur in the training notes."""
    train = notes.filter(split="train")[:40]
    seen = {d.labels["smoking"] for d in train}
    test = Corpus([d for d in notes.filter(split="test") if d.labels["smoking"] in seen][:40])
    return train, test


def _save_tiny(notes: Corpus, kind: str, out: Path) -> Path:
    texts = [d.text for d in notes.filter(split="public")[:60]]
    tok = train_tokenizer(texts, kind, 800)
    model = init_model(tok, TinyModelConfig(kind=kind, **TINY))
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def bert_dir(notes, tmp_path_factory) -> Path:
    return _save_tiny(notes, "mlm", tmp_path_factory.mktemp("bert"))


@pytest.fixture(scope="module")
def gpt2_dir(notes, tmp_path_factory) -> Path:
    return _save_tiny(notes, "clm", tmp_path_factory.mktemp("gpt2"))


def test_only_last_layer_and_head_trainable(bert_dir):
    from transformers import AutoModelForSequenceClassification

    model, info = AutoModelForSequenceClassification.from_pretrained(bert_dir, num_labels=3,
                                                                     output_loading_info=True)
    names = freeze_all_but_last(model, 1, new_parameters=info["missing_keys"])
    assert len(transformer_layers(model)) == 2
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable == set(names)
    assert any(n.startswith("bert.encoder.layer.1.") for n in trainable)
    assert {"classifier.weight", "classifier.bias"} <= trainable
    # the pooler is absent from a masked-LM checkpoint: newly initialised, so it trains with the head
    assert {"bert.pooler.dense.weight", "bert.pooler.dense.bias"} <= trainable
    assert all(n.startswith(("bert.encoder.layer.1.", "bert.pooler.", "classifier.")) for n in trainable)
    frozen = {n for n, p in model.named_parameters() if not p.requires_grad}
    assert any(n.startswith("bert.embeddings.") for n in frozen)
    assert any(n.startswith("bert.encoder.layer.0.") for n in frozen)
    expected = (sum(p.numel() for p in model.bert.encoder.layer[1].parameters())
                + sum(p.numel() for p in model.bert.pooler.parameters())
                + sum(p.numel() for p in model.classifier.parameters()))
    assert sum(p.numel() for p in model.parameters() if p.requires_grad) == expected
    # two layers: everything in the encoder trains, embeddings stay frozen
    freeze_all_but_last(model, 2)
    assert all(p.requires_grad for p in model.bert.encoder.parameters())
    assert not any(p.requires_grad for p in model.bert.embeddings.parameters())
    with pytest.raises(ToolkitError, match="only 2 layers"):
        freeze_all_but_last(model, 3)


def test_unknown_architecture_is_a_clear_error():
    class Odd(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = torch.nn.ModuleList([torch.nn.Linear(2, 2)])

    with pytest.raises(ToolkitError, match="cannot find the transformer layers of Odd"):
        freeze_all_but_last(Odd())


@pytest.mark.slow
def test_result_dict_bert(bert_dir, splits):
    train, test = splits
    r = downstream_f1(bert_dir, train, test, epochs=1, progress=False)
    assert RESULT_KEYS <= set(r)
    assert 0.0 <= r["macro_f1"] <= 1.0 and 0.0 <= r["accuracy"] <= 1.0
    assert r["n_train"] == len(train) and r["n_eval"] == len(test)
    assert r["labels"] == sorted({d.labels["smoking"] for d in train})
    assert set(r["per_class_f1"]) <= set(r["labels"])
    assert r["epochs"] == 1 and r["learning_rate"] == 2e-5
    assert 0 < r["trainable_parameters"] < r["total_parameters"]
    assert r["steps"] == 3 and r["warmup_steps"] == 1  # ceil(40 / 16) steps, 10% warm-up rounded up
    # seeded: the same call gives the same numbers
    again = downstream_f1(bert_dir, train, test, epochs=1, progress=False)
    assert again["macro_f1"] == r["macro_f1"] and again["per_class_f1"] == r["per_class_f1"]


@pytest.mark.slow
def test_gpt2_checkpoint(gpt2_dir, splits):
    train, test = splits
    r = downstream_f1(gpt2_dir, train, test, epochs=1, progress=False)
    assert 0.0 <= r["macro_f1"] <= 1.0
    names = r["trainable_parameter_names"]
    assert "score.weight" in names and any(n.startswith("transformer.h.1.") for n in names)
    assert not any(n.startswith(("transformer.h.0.", "transformer.wte", "transformer.wpe")) for n in names)


def test_missing_label_names_the_document(bert_dir, splits):
    train, test = splits
    bad = Corpus([*train][:5] + [make_document("no-label-doc", "px", "a note without a label")])
    with pytest.raises(ToolkitError, match="no-label-doc"):
        downstream_f1(bert_dir, bad, test, progress=False)
    with pytest.raises(ToolkitError, match="no-label-doc"):
        majority_baseline_f1(train, bad)


def test_unseen_eval_label_is_an_error(bert_dir, splits):
    train, test = splits
    odd = Corpus([make_document("odd", "py", "some text", labels={"smoking": "NEVER SEEN"})])
    with pytest.raises(ToolkitError, match="NEVER SEEN"):
        downstream_f1(bert_dir, train, odd, progress=False)
    single = Corpus([d for d in train if d.labels["smoking"] == train[0].labels["smoking"]])
    with pytest.raises(ToolkitError, match="single"):
        downstream_f1(bert_dir, single, test, progress=False)


def test_majority_baseline():
    def corpus(labels):
        return Corpus([make_document(f"d{i}", f"p{i}", "text", labels={"y": y}) for i, y in enumerate(labels)])

    r = majority_baseline_f1(corpus(["a", "a", "b"]), corpus(["a", "b", "b", "a"]), "y")
    assert r["majority"] == "a" and r["accuracy"] == 0.5
    # F1(a) = 2 * 0.5 * 1 / 1.5 = 2/3, F1(b) = 0
    assert r["macro_f1"] == pytest.approx(1 / 3)


@pytest.mark.slow
def test_learns_a_separable_task(tmp_path):
    """Two labels with disjoint vocabularies: a large learning rate and a few epochs must reach a high F1."""
    import random

    rng = random.Random(0)
    vocab = {"cat": "apple banana cherry grape lemon mango melon peach pear plum".split(),
             "dog": "anvil bolt chisel drill hammer nail pliers saw screw wrench".split()}

    def corpus(n, prefix):
        docs = []
        for i in range(n):
            y = "cat" if i % 2 else "dog"
            docs.append(make_document(f"{prefix}{i}", f"{prefix}{i}", " ".join(rng.choices(vocab[y], k=12)),
                                      labels={"kind": y}))
        return Corpus(docs)

    train, test = corpus(64, "tr"), corpus(32, "te")
    tok = train_tokenizer([d.text for d in train], "mlm", 100)
    model = init_model(tok, TinyModelConfig(kind="mlm", **{**TINY, "vocab_size": 100}))
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    r = downstream_f1(tmp_path, train, test, label="kind", epochs=8, learning_rate=5e-3, batch_size=16,
                      progress=False)
    assert r["macro_f1"] >= 0.9, r
    assert majority_baseline_f1(train, test, "kind")["macro_f1"] < 0.5
