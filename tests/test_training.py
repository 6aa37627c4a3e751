"""Training strategies end to end on a tiny model: train -> checkpoints -> probe -> MIA; resume; DP; wrong kinds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from transformers import TrainerCallback

from toolkit.corpus import load_corpus
from toolkit.errors import ToolkitError
from toolkit.identifiers import analyze
from toolkit.models import TinyModelConfig, init_model, load_model, train_tokenizer
from toolkit.training import TrainConfig, checkpoint_dirs, train

ROOT = Path(__file__).resolve().parents[1]
TINY = TinyModelConfig(kind="mlm", vocab_size=800, hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64,
                       max_length=128)
CFG = dict(batch_size=8, learning_rate=2e-3, max_length=128, seed=0)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    corpus = load_corpus(ROOT / "data_samples/clinical/notes.jsonl")
    public = corpus.filter(split="public")[:60]
    train_docs = corpus.filter(split="train")[:24]
    members_and_non = corpus.filter(person_ids=set(train_docs.person_ids) |
                                    set(corpus.filter(split="heldout").person_ids[:10]))
    tok = train_tokenizer((d.text for d in public), "mlm", TINY.vocab_size)
    base = tmp_path_factory.mktemp("base")
    init_model(tok, TINY, seed=0).save_pretrained(base)
    tok.save_pretrained(base)
    ids_dir = tmp_path_factory.mktemp("ids")
    analyze(train_docs, detector="oracle", progress=False).save(ids_dir)
    return {"train": train_docs, "all": members_and_non, "base": base, "ids": ids_dir}


def _ids(data):
    from toolkit.identifiers import load_identifiers

    return load_identifiers(data["ids"])


def test_train_probe_mia_end_to_end(data, tmp_path):
    from toolkit.audit import probe_masked
    from toolkit.audit.evaluate import evaluate_predictions, membership_scores

    ids = _ids(data)
    ckpts = train(data["train"], data["base"], tmp_path / "run", "ppmlm", TrainConfig(epochs=[1, 2], **CFG),
                  positions=ids["positions"], spans=ids["spans"], progress=False)
    assert [e for e, _ in ckpts] == [1, 2]
    log = json.loads((ckpts[-1][1] / "training_log.json").read_text())
    assert log["strategy"] == "ppmlm" and log["epoch"] == 2
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["status"] == "done" and run["tokens_per_second"] > 0
    model, tok = load_model(ckpts[-1][1])
    preds = probe_masked(model, tok, data["train"], positions=ids["positions"], max_length=128, progress=False)
    report = evaluate_predictions(preds, ids)
    for key in ("privacy", "direct_privacy", "indirect_privacy", "utility", "n_identifiers", "n_leaked"):
        assert key in report
    assert 0 <= report["privacy"] <= 1 and report["n_identifiers"] > 0
    scores = membership_scores(preds, ids, data["train"])
    assert set(scores.index) == set(data["train"].person_ids)


def test_pseudo_and_wrong_kind(data, tmp_path):
    ids = _ids(data)
    ckpts = train(data["train"], data["base"], tmp_path / "pseudo", "mlm_pseudo", TrainConfig(epochs=[1], **CFG),
                  positions=ids["positions"], spans=ids["spans"], progress=False)
    assert len(ckpts) == 1
    with pytest.raises(ToolkitError, match="is a masked language model.*needs a causal one"):
        train(data["train"], data["base"], tmp_path / "clm", "ppclm", TrainConfig(epochs=[1], **CFG),
              positions=ids["positions"], progress=False)
    with pytest.raises(ToolkitError, match="unknown strategy"):
        train(data["train"], data["base"], tmp_path / "x", "ppmlm2", TrainConfig(epochs=[1], **CFG))
    with pytest.raises(ToolkitError, match="epochs"):
        TrainConfig(epochs=[0])


class Interrupt(TrainerCallback):
    """Simulates a crash right after the epoch-1 checkpoint is written."""

    def on_save(self, args, state, control, **kw):
        if round(state.epoch) == 1:
            raise KeyboardInterrupt


def test_resume_after_interruption_matches_uninterrupted_run(data, tmp_path):
    ids = _ids(data)
    cfg = TrainConfig(epochs=[1, 2], **CFG)
    kw = dict(positions=ids["positions"], spans=ids["spans"], progress=False)
    train(data["train"], data["base"], tmp_path / "straight", "ppmlm", cfg, **kw)
    with pytest.raises(KeyboardInterrupt):
        train(data["train"], data["base"], tmp_path / "crash", "ppmlm", cfg, callbacks=[Interrupt()], **kw)
    assert [e for e, _ in checkpoint_dirs(tmp_path / "crash")] == [1]
    train(data["train"], data["base"], tmp_path / "crash", "ppmlm", cfg, **kw)
    run = json.loads((tmp_path / "crash" / "run.json").read_text())
    assert run["resumed_from"] and "checkpoint-" in run["resumed_from"]
    a, _ = load_model(tmp_path / "straight" / "epoch-2")
    b, _ = load_model(tmp_path / "crash" / "epoch-2")
    for (name, pa), (_, pb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert torch.equal(pa, pb), name


def test_dp_smoke_reports_spent_epsilon(data, tmp_path):
    ckpts = train(data["train"], data["base"], tmp_path / "dp", "mlm_dp", TrainConfig(epochs=[1, 2], **CFG),
                  progress=False)
    log = json.loads((ckpts[-1][1] / "training_log.json").read_text())
    assert 0 < log["dp"]["spent_epsilon"] <= 8.0
    assert log["dp"]["max_grad_norm"] == 10.0
    model, _ = load_model(ckpts[-1][1])  # saved in the standard layout (bias tied back)
    assert model.cls.predictions.decoder.bias is model.cls.predictions.bias


def test_load_model_errors(tmp_path):
    with pytest.raises(ToolkitError, match="no config.json"):
        load_model(tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ToolkitError):
        load_model(tmp_path)


def test_sparse_head_loss_equals_full_model_loss(data):
    """The sparse-head loss is BertForMaskedLM's loss, computed on target positions only."""
    from transformers import TrainingArguments

    from toolkit.strategies import training_examples
    from toolkit.training import SparseHeadTrainer, make_collator

    model, tok = load_model(data["base"])
    ids = _ids(data)
    ex = training_examples(data["train"], tok, "ppmlm", positions=ids["positions"], max_length=128, progress=False)
    torch.manual_seed(0)
    batch = make_collator(tok, __import__("toolkit.strategies", fromlist=["x"]).get_strategy("ppmlm"),
                          TrainConfig(epochs=[1], **CFG))(ex[:8])
    trainer = SparseHeadTrainer(model=model, args=TrainingArguments(output_dir="/tmp/unused", report_to="none",
                                                                    use_cpu=True))
    model.eval()
    with torch.no_grad():
        sparse = trainer.compute_loss(model, dict(batch))
        full = model(**batch).loss
    assert torch.allclose(sparse, full, atol=1e-5)


def test_same_config_tolerates_fields_added_later():
    from dataclasses import asdict

    from toolkit.training import TrainConfig
    from toolkit.training.trainer import _same_config

    cfg = TrainConfig(epochs=[2, 4])
    saved = asdict(cfg)
    saved.pop("checkpoints_per_epoch")  # a run saved before the field existed
    assert _same_config(saved, cfg)
    assert not _same_config(saved, TrainConfig(epochs=[2, 4], checkpoints_per_epoch=10))
    assert not _same_config({**saved, "learning_rate": 1.0}, cfg)
