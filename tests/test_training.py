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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_dp_smoke_reports_spent_epsilon(data, tmp_path):
    ckpts = train(data["train"], data["base"], tmp_path / "dp", "mlm_dp", TrainConfig(epochs=[1, 2], **CFG),
                  progress=False)
    log = json.loads((ckpts[-1][1] / "training_log.json").read_text())
    assert 0 < log["dp"]["spent_epsilon"] <= 8.0
    assert log["dp"]["max_grad_norm"] == 10.0
    # the privacy unit is the individual (the default): one record per patient for the accountant
    n_people = len(data["train"].person_ids)
    assert log["dp"]["unit"] == "individual" and log["dp"]["n_units"] == n_people < log["dp"]["n_examples"]
    assert log["dp"]["sample_rate"] == 1 / log["dp"]["steps_per_epoch"] == 1 / -(-n_people // CFG["batch_size"])
    run = json.loads((tmp_path / "dp" / "run.json").read_text())
    assert run["dp"]["unit"] == "individual" and run["dp"]["spent_epsilon"] == log["dp"]["spent_epsilon"]
    assert run["dp"]["delta"] == 1e-5
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


# ---- DP-SGD: per-example losses, per-individual sampling -------------------------------------------------------------

def _tiny_bert():
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(0)
    return BertForMaskedLM(BertConfig(vocab_size=60, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                      intermediate_size=32, max_position_embeddings=32, hidden_dropout_prob=0.0,
                                      attention_probs_dropout_prob=0.0))


def _first_example_grad_samples(gsm, batch, loss_fn) -> list[torch.Tensor]:
    for p in gsm.parameters():
        p.grad, p.grad_sample = None, None
    loss_fn(gsm, batch).backward()
    return [p.grad_sample[0].clone() for p in gsm.parameters() if p.requires_grad]


def test_dp_per_sample_gradient_does_not_depend_on_the_other_examples():
    """Opacus' per-sample gradient of example A must not change when example B of the same batch changes (here:
    its number of targets); with Hugging Face's batch-mean loss it does, which voids the DP-SGD bound."""
    from opacus import GradSampleModule

    from toolkit.training.dp import example_mean_loss, untie_mlm_bias

    model = _tiny_bert()
    untie_mlm_bias(model)
    gsm = GradSampleModule(model, loss_reduction="mean")
    gsm.train()
    ids = torch.tensor([[2, 11, 12, 13, 14, 15, 16, 3], [2, 21, 22, 23, 24, 25, 26, 3]])
    labels_a = [-100, 11, -100, 13, -100, -100, -100, -100]

    def batch(targets_b: list[int]) -> dict:
        labels_b = [t if i in targets_b else -100 for i, t in enumerate(ids[1].tolist())]
        return {"input_ids": ids.clone(), "attention_mask": torch.ones_like(ids), "labels": torch.tensor([labels_a,
                labels_b]), "position_ids": torch.arange(8).expand(2, 8).clone(),
                "token_type_ids": torch.zeros_like(ids)}

    ours = lambda m, b: example_mean_loss(m, b, "mlm")  # noqa: E731
    hf = lambda m, b: m(**b).loss  # noqa: E731
    one, many = batch([2]), batch([1, 2, 3, 4, 5, 6])
    a1, a2 = _first_example_grad_samples(gsm, one, ours), _first_example_grad_samples(gsm, many, ours)
    assert all(torch.allclose(x, y, atol=1e-6) for x, y in zip(a1, a2))
    # ... and it is example A's own gradient: the gradient of A's mean loss over its own targets, computed alone
    alone = {k: v[:1] for k, v in one.items()}
    model.zero_grad()
    for p in gsm.parameters():
        p.grad_sample = None
    hf(gsm, alone).backward()
    own = [p.grad for p in gsm.parameters() if p.requires_grad]
    assert all(torch.allclose(x, y, atol=1e-5) for x, y in zip(a1, own))
    # the control: Hugging Face's batch-mean loss makes A's per-sample gradient depend on B
    h1, h2 = _first_example_grad_samples(gsm, one, hf), _first_example_grad_samples(gsm, many, hf)
    assert not all(torch.allclose(x, y, atol=1e-6) for x, y in zip(h1, h2))


def test_dp_clm_loss_is_the_mean_of_each_examples_own_mean():
    from transformers import GPT2Config, GPT2LMHeadModel

    from toolkit.training.dp import example_mean_loss

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=50, n_embd=16, n_layer=1, n_head=2, n_positions=16)).eval()
    ids = torch.randint(0, 50, (2, 6))
    labels = ids.clone()
    labels[1, :4] = -100  # example 2: one target (position 5, predicted from position 4)
    with torch.no_grad():
        both = example_mean_loss(model, {"input_ids": ids, "labels": labels}, "clm")
        each = [model(input_ids=ids[i:i + 1], labels=labels[i:i + 1]).loss for i in range(2)]
    assert torch.allclose(both, (each[0] + each[1]) / 2, atol=1e-6)


def test_dp_sampler_draws_individuals_and_one_chunk_each():
    from toolkit.training.dp import UnitSampler, privacy_units

    people = ["a"] * 10 + ["b"] * 3 + ["c"] + ["d"] * 6
    units = privacy_units(people, "individual")
    assert sorted(map(len, units)) == [1, 3, 6, 10] and privacy_units(people, "chunk") == [[i] for i in range(20)]
    sampler = UnitSampler(units, 0.5, 4000, torch.Generator().manual_seed(0))
    drawn = {p: 0 for p in "abcd"}
    chunk_counts = torch.zeros(20)
    for batch in sampler:
        who = [people[i] for i in batch]
        assert len(who) == len(set(who))  # never two chunks of one individual in a step
        for p in who:
            drawn[p] += 1
        chunk_counts[batch] += 1
    assert len(sampler) == 4000
    assert all(abs(n / 4000 - 0.5) < 0.03 for n in drawn.values())  # each individual with probability q
    a = chunk_counts[:10] / chunk_counts[:10].sum()
    assert torch.all((a - 0.1).abs() < 0.03)  # the individual's chunks uniformly


# ---- identifiers and base of a run ---------------------------------------------------------------------------------

def test_training_refuses_documents_the_identifiers_do_not_cover(data, tmp_path):
    partial = analyze(data["train"][:20], detector="oracle", progress=False)
    for name in ("ppmlm", "mlm_pseudo"):
        with pytest.raises(ToolkitError, match="4 of 24 are not covered by them and 0 were changed"):
            train(data["train"], data["base"], tmp_path / name, name, TrainConfig(epochs=[1], **CFG),
                  positions=partial.positions(), spans=partial.span_table(), progress=False)
        assert not (tmp_path / name).exists()  # refused before anything was written


@pytest.mark.slow
def test_resume_with_other_identifiers_or_another_base_is_refused(data, tmp_path):
    import shutil

    ids = _ids(data)
    run = tmp_path / "run"
    train(data["train"], data["base"], run, "ppmlm", TrainConfig(epochs=[1], **CFG), positions=ids["positions"],
          progress=False)
    meta = json.loads((run / "run.json").read_text())
    assert meta["base_fingerprint"].startswith("files:") and len(meta["identifiers_fingerprint"]) == 64
    more = TrainConfig(epochs=[1, 2], **CFG)
    other = analyze(data["train"], detector="oracle", k=3, progress=False)  # same notes, other identifiers
    with pytest.raises(ToolkitError, match="trained with other identifiers"):
        train(data["train"], data["base"], run, "ppmlm", more, positions=other.positions(), progress=False)
    base2 = tmp_path / "base2"
    shutil.copytree(data["base"], base2)
    model, tok = load_model(base2)
    init_model(tok, TINY, seed=1).save_pretrained(base2)  # same architecture and tokenizer, other weights
    with pytest.raises(ToolkitError, match="trained from another base model"):
        train(data["train"], base2, run, "ppmlm", more, positions=ids["positions"], progress=False)
    assert [e for e, _ in checkpoint_dirs(run)] == [1]
    # the same identifiers computed afresh (not read from disk) have the same fingerprint: the run resumes
    same = analyze(data["train"], detector="oracle", progress=False)
    assert [e for e, _ in train(data["train"], data["base"], run, "ppmlm", more, positions=same.positions(),
                                progress=False)] == [1, 2]


@pytest.mark.slow
def test_dp_empty_draws_are_noise_steps_the_accountant_counts(data, tmp_path):
    """With 2 individuals and q = 1/2 a quarter of the steps draw nobody: each is still a (noise-only) step of the
    mechanism, so the spent ε is the accountant's for every step of the run."""
    from opacus.accountants import RDPAccountant

    two = data["train"].filter(person_ids=set(data["train"].person_ids[:2]))
    cfg = TrainConfig(epochs=[6], **{**CFG, "batch_size": 1})
    ckpts = train(two, data["base"], tmp_path / "dp", "mlm_dp", cfg, progress=False)
    dp = json.loads((ckpts[-1][1] / "training_log.json").read_text())["dp"]
    assert dp["n_units"] == 2 and dp["sample_rate"] == 0.5 and dp["steps_per_epoch"] == 2
    assert dp["noise_only_steps"] > 0
    acc = RDPAccountant()
    acc.history = [(dp["noise_multiplier"], 0.5, 12)]
    assert dp["spent_epsilon"] == pytest.approx(acc.get_epsilon(dp["delta"]), rel=1e-9)
    # unit "chunk": every chunk is a record of its own
    chunks = TrainConfig(epochs=[1], dp={"unit": "chunk"}, **CFG)
    ckpts = train(two, data["base"], tmp_path / "dp_chunk", "mlm_dp", chunks, progress=False)
    dp = json.loads((ckpts[-1][1] / "training_log.json").read_text())["dp"]
    assert dp["unit"] == "chunk" and dp["n_units"] == dp["n_examples"] > 2
    with pytest.raises(ToolkitError, match="dp.unit"):
        TrainConfig(dp={"unit": "note"})


@pytest.mark.slow
def test_build_base_resumes_with_the_tokenizer_of_its_interrupted_run(tmp_path):
    """A build killed after its tokenizer was saved resumes with that tokenizer (retraining one gives another
    vocabulary: the weights trained so far would be read with other token ids)."""
    from toolkit.training import build_base

    public = load_corpus(ROOT / "data_samples/clinical/notes.jsonl").filter(split="public")[:30]
    tiny = TinyModelConfig(kind="mlm", vocab_size=300, hidden_size=16, num_layers=1, num_heads=2,
                           intermediate_size=32, max_length=64)
    first = train_tokenizer((d.text[::-1] for d in public), "mlm", tiny.vocab_size)  # surely another vocabulary
    first.save_pretrained(tmp_path / ".base.pretrain" / "tokenizer")
    out = build_base(public, tmp_path / "base", "mlm", tiny=tiny, progress=False,
                     config=TrainConfig(epochs=[1], batch_size=8, learning_rate=2e-3, max_length=64))
    _, tok = load_model(out)
    assert tok.get_vocab() == first.get_vocab()
    assert not (tmp_path / ".base.pretrain").exists()
