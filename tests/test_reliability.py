"""Reliability: clear errors for broken checkpoints, crash-safe training and writing (real SIGKILLs in subprocesses),
and bit-for-bit reproducibility of a small pipeline on the CPU."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch

from toolkit.corpus import Corpus, load_corpus, write_jsonl
from toolkit.errors import ToolkitError
from toolkit.identifiers import analyze, load_identifiers
from toolkit.models import TinyModelConfig, init_model, load_model, train_tokenizer
from toolkit.training import TrainConfig, checkpoint_dirs, train

ROOT = Path(__file__).resolve().parents[1]
CHILD = Path(__file__).with_name("reliability_child.py")
TINY = TinyModelConfig(kind="mlm", vocab_size=400, hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64,
                       max_length=64)
TINY_CLM = TinyModelConfig(kind="clm", vocab_size=400, hidden_size=32, num_layers=1, num_heads=2,
                           intermediate_size=64, max_length=64)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """A tiny masked and causal base (tokenizers trained once: tokenizer training is not bit-reproducible, upstream
    huggingface/tokenizers#1794), 12 training notes and their oracle identifiers."""
    root = tmp_path_factory.mktemp("reliability")
    corpus = load_corpus(ROOT / "data_samples/clinical/notes.jsonl")
    public = corpus.filter(split="public")[:40]
    train_docs = corpus.filter(split="train")[:12]
    bases = {}
    for tiny in (TINY, TINY_CLM):
        tok = train_tokenizer((d.text for d in public), tiny.kind, tiny.vocab_size)
        bases[tiny.kind] = root / f"base_{tiny.kind}"
        init_model(tok, tiny, seed=0).save_pretrained(bases[tiny.kind])
        tok.save_pretrained(bases[tiny.kind])
    corpus_path = write_jsonl(train_docs, root / "train.jsonl")
    analyze(train_docs, detector="oracle", k=2, n=1, progress=False).save(root / "ids")
    small = train_docs[:6]  # the crash test's corpus: 4 optimizer steps per epoch
    analyze(small, detector="oracle", k=2, n=1, progress=False).save(root / "ids_small")
    return {"root": root, "mlm": bases["mlm"], "clm": bases["clm"], "corpus": train_docs,
            "corpus_path": corpus_path, "ids": root / "ids", "small": small,
            "small_path": write_jsonl(small, root / "small.jsonl"), "ids_small": root / "ids_small"}


# ------------------------------------------------------------------------------------------------------------------
# corrupt, partial or mismatched checkpoints: clear errors
# ------------------------------------------------------------------------------------------------------------------


def _broken_copy(src: Path, dst: Path, edit) -> Path:
    shutil.copytree(src, dst)
    edit(dst)
    return dst


def _truncate(name: str, keep: float):
    def edit(d: Path) -> None:
        data = (d / name).read_bytes()
        (d / name).write_bytes(data[:int(len(data) * keep)])
    return edit


@pytest.mark.parametrize("case, edit, message", [
    ("weights cut in half", _truncate("model.safetensors", 0.5), "checkpoint is incomplete or corrupt"),
    ("weights emptied", _truncate("model.safetensors", 0.0), "checkpoint is incomplete or corrupt"),
    ("weights overwritten", lambda d: (d / "model.safetensors").write_bytes(os.urandom(4096)),
     "checkpoint is incomplete or corrupt"),
    ("weights missing", lambda d: (d / "model.safetensors").unlink(), "checkpoint is incomplete or corrupt"),
    ("config missing", lambda d: (d / "config.json").unlink(), "no config.json"),
    ("config truncated", _truncate("config.json", 0.5), "cannot load the model config"),
    ("config without model type", lambda d: (d / "config.json").write_text("{}"), "cannot load the model config"),
    ("tokenizer file missing", lambda d: (d / "tokenizer.json").unlink(), "no tokenizer files"),
    ("tokenizer truncated", _truncate("tokenizer.json", 0.3), "cannot load the tokenizer"),
    ("weights of another size", lambda d: (d / "config.json").write_text(json.dumps(
        {**json.loads((d / "config.json").read_text()), "hidden_size": 64, "num_attention_heads": 2})),
     "checkpoint is incomplete or corrupt"),
    ("vocabulary size edited", lambda d: (d / "config.json").write_text(json.dumps(
        {**json.loads((d / "config.json").read_text()), "vocab_size": 50})), "checkpoint is incomplete or corrupt"),
])
def test_broken_checkpoint_is_a_clear_error(setup, tmp_path, case, edit, message):
    broken = _broken_copy(setup["mlm"], tmp_path / "broken", edit)
    with pytest.raises(ToolkitError, match=message) as info:
        load_model(broken)
    assert str(broken) in str(info.value)


@pytest.mark.parametrize("name", ["terms.parquet", "positions.parquet", "summary.json"])
def test_damaged_identifier_outputs_are_a_clear_error(setup, tmp_path, name):
    ids = tmp_path / "ids"
    shutil.copytree(setup["ids"], ids)
    data = (ids / name).read_bytes()
    (ids / name).write_bytes(data[:len(data) // 2])
    with pytest.raises(ToolkitError, match=rf"{name}: unreadable or corrupt"):
        load_identifiers(ids)
    (ids / name).unlink()
    with pytest.raises(ToolkitError, match=rf"{name}: missing"):
        load_identifiers(ids)


def test_damaged_run_json_is_a_clear_error(setup, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text('{"strategy": "ppm')
    with pytest.raises(ToolkitError, match="run.json: unreadable"):
        train(setup["corpus"], setup["mlm"], run, "mlm", TrainConfig(epochs=[1]), progress=False)


def test_tokenizer_of_another_model_is_a_clear_error(setup, tmp_path):
    """Weights and config agree, but the tokenizer beside them has more tokens than the embedding has rows: every
    id past the end would fail deep inside torch (index out of range) at the first batch."""
    from transformers import BertConfig, BertForMaskedLM

    other = tmp_path / "other"
    BertForMaskedLM(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                               intermediate_size=32, max_position_embeddings=64)).save_pretrained(other)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(setup["mlm"] / f, other / f)
    with pytest.raises(ToolkitError, match=r"the tokenizer has \d+ tokens but the model's embedding only 50 rows"):
        load_model(other)


def test_missing_model_directory(tmp_path):
    with pytest.raises(ToolkitError, match="no such model directory"):
        load_model(tmp_path / "nowhere")


def test_wrong_model_kind_for_the_strategy(setup, tmp_path):
    """A causal model given to ppmlm (and a masked one to ppclm) stops before any training, naming both kinds."""
    ids = load_identifiers(setup["ids"])
    with pytest.raises(ToolkitError, match=r"is a causal language model \(GPT2LMHeadModel\); this step needs a masked"):
        train(setup["corpus"], setup["clm"], tmp_path / "run", "ppmlm", TrainConfig(epochs=[1]),
              positions=ids["positions"], progress=False)
    with pytest.raises(ToolkitError, match="is a masked language model.*needs a causal one"):
        train(setup["corpus"], setup["mlm"], tmp_path / "run2", "ppclm", TrainConfig(epochs=[1]),
              positions=ids["positions"], progress=False)
    assert not checkpoint_dirs(tmp_path / "run")


def test_wrong_model_kind_through_the_cli(setup, tmp_path, capsys):
    from toolkit.cli import main

    code = main(["train", "--strategy", "ppmlm", "--corpus", str(setup["corpus_path"]), "--split", "",
                 "--identifiers", str(setup["ids"]), "--base", str(setup["clm"]), "--out", str(tmp_path / "run"),
                 "--epochs", "1", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and "causal language model" in err and "Traceback" not in err


# ------------------------------------------------------------------------------------------------------------------
# training killed with SIGKILL mid-epoch resumes to the same result
# ------------------------------------------------------------------------------------------------------------------


def _train_child(setup, run: Path, epochs: str, *, slow: bool = False) -> subprocess.Popen:
    cmd = [sys.executable, str(CHILD), "train", str(setup["mlm"]), str(setup["small_path"]), str(setup["ids_small"]),
           str(run), epochs] + (["--slow"] if slow else [])
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _weights(path: Path) -> dict[str, torch.Tensor]:
    model, _ = load_model(path)
    return model.state_dict()


def _losses(path: Path) -> list[tuple]:
    log = json.loads((path / "training_log.json").read_text())["log_history"]
    return sorted((h["epoch"], h["loss"], h.get("grad_norm")) for h in log if "loss" in h)


@pytest.mark.slow
def test_sigkill_mid_epoch_then_resume_equals_an_uninterrupted_run(setup, tmp_path):
    """3 epochs of 4 optimizer steps; the run is SIGKILLed during epoch 2 (after the epoch-1 checkpoint is on disk), then run
    again: it resumes from the epoch-1 state and ends with the weights, losses and probe metrics of a run that was
    never interrupted. The crashed run also lost its ``epoch-1`` export and gained a half-written newer trainer
    checkpoint, as a kill between the two saves or during a save would leave them: both are handled."""
    from toolkit.audit import probe_masked
    from toolkit.audit.evaluate import evaluate_predictions

    straight = _train_child(setup, tmp_path / "straight" / "run", "1,2,3")
    crash_run = tmp_path / "crash" / "run"
    crash = _train_child(setup, crash_run, "1,2,3", slow=True)
    progress = crash_run.parent / "progress"
    deadline = time.monotonic() + 240
    while not ((crash_run / "epoch-1" / "config.json").is_file() and progress.is_file()):
        assert crash.poll() is None, crash.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "the first checkpoint never appeared"
        time.sleep(0.05)
    os.kill(crash.pid, signal.SIGKILL)
    crash.wait()
    assert crash.returncode == -signal.SIGKILL
    assert straight.wait(timeout=300) == 0, straight.communicate()[1][-3000:]
    ref_run = tmp_path / "straight" / "run"
    steps_per_epoch = json.loads((ref_run / "epoch-1" / "training_log.json").read_text())["global_step"]
    killed_at = int(progress.read_text())
    assert steps_per_epoch < killed_at < 2 * steps_per_epoch, "killed in the middle of epoch 2"
    assert [e for e, _ in checkpoint_dirs(crash_run)] == [1]

    # what a kill at a less lucky moment leaves behind: epoch-1 export missing (killed between the trainer's save
    # and the export), and a newer trainer checkpoint whose trainer_state.json was cut off while being written
    shutil.rmtree(crash_run / "epoch-1")
    partial = crash_run / "trainer" / "checkpoint-999"
    partial.mkdir()
    (partial / "trainer_state.json").write_text('{"epoch": 2.0, "global_st')

    resumed = _train_child(setup, crash_run, "1,2,3")
    assert resumed.wait(timeout=300) == 0, resumed.communicate()[1][-3000:]
    meta = json.loads((crash_run / "run.json").read_text())
    assert meta["status"] == "done" and meta["resumed_from"].endswith(f"checkpoint-{steps_per_epoch}")

    ids = load_identifiers(setup["ids_small"])
    for epoch in (1, 2, 3):
        a, b = _weights(ref_run / f"epoch-{epoch}"), _weights(crash_run / f"epoch-{epoch}")
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), f"epoch {epoch} weights differ"
    assert _losses(ref_run / "epoch-3") == _losses(crash_run / "epoch-3")
    metrics = []
    for run in (ref_run, crash_run):
        model, tok = load_model(run / "epoch-3")
        preds = probe_masked(model, tok, setup["small"], positions=ids["positions"], max_length=128, progress=False)
        metrics.append(evaluate_predictions(preds, ids))
    assert metrics[0] == metrics[1]


# ------------------------------------------------------------------------------------------------------------------
# a writer killed in the middle never leaves a partial file
# ------------------------------------------------------------------------------------------------------------------

KILLS = 8


@pytest.mark.slow
def test_sigkilled_writer_leaves_old_or_new_content(tmp_path):
    """8 writer processes (4 at a time) rewrite a ~2 MB JSON file and a 300,000-row Parquet table in a loop through
    ``toolkit.io`` and are SIGKILLed at random moments: each target is always one complete version, never a mix or a
    truncation. Most kills land inside a write (a ``.tmp`` file is left beside the target, owner-only)."""
    import random

    rng = random.Random(0)
    expected_json = [{"version": v, "rows": [{"i": i, "text": f"v{v} row {i} " + "x" * 40} for i in range(40_000)]}
                     for v in (0, 1)]
    mid_write = 0
    for round_ in range(KILLS // 4):
        procs = []
        for j in range(4):
            d = tmp_path / f"w{round_}-{j}"
            d.mkdir()
            procs.append((d, subprocess.Popen([sys.executable, str(CHILD), "write", str(d)], stdout=subprocess.PIPE,
                                              stderr=subprocess.PIPE, text=True)))
        for d, p in procs:
            assert p.stdout.readline().strip() == "ready", p.communicate()[1][-2000:]
        for d, p in procs:
            time.sleep(rng.uniform(0.05, 0.6))
            os.kill(p.pid, signal.SIGKILL)
            p.wait()
        for d, p in procs:
            doc = json.loads((d / "doc.json").read_text(encoding="utf-8"))
            assert doc == expected_json[doc["version"]]
            table = pd.read_parquet(d / "table.parquet")
            v = int(table["v"].iloc[0])
            assert len(table) == 300_000 and (table["v"] == v).all() and table["i"].tolist() == list(range(300_000))
            leftovers = [f for f in d.iterdir() if f.name.endswith(".tmp")]
            assert all(f.stat().st_mode & 0o077 == 0 for f in leftovers)
            mid_write += bool(leftovers)
    assert mid_write >= 1, "no kill landed inside a write: the test did not test interruption"


def test_failed_write_keeps_the_old_file_and_leaves_nothing(tmp_path):
    from toolkit.io import atomic_write_json, atomic_write_parquet

    target = atomic_write_json({"a": 1}, tmp_path / "m.json")
    with pytest.raises(TypeError):
        atomic_write_json({"a": object()}, target)
    assert json.loads(target.read_text()) == {"a": 1}
    with pytest.raises(Exception):
        atomic_write_parquet(pd.DataFrame({"x": [object()]}), tmp_path / "t.parquet")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json"]


# ------------------------------------------------------------------------------------------------------------------
# reproducibility: same config and seed, same tables, masks and metrics to the last digit
# ------------------------------------------------------------------------------------------------------------------


def _pipeline(setup, work: Path) -> dict:
    """Identifier analysis -> masks from the seeded collator -> tiny training from a seeded init -> probe metrics.

    The tokenizer is the module fixture's, trained once: ``tokenizers`` BPE/WordPiece training breaks count ties in
    hash order and is not bit-reproducible (upstream huggingface/tokenizers#1794)."""
    from toolkit.audit import probe_masked
    from toolkit.audit.evaluate import evaluate_predictions, membership_scores
    from toolkit.strategies import training_examples
    from toolkit.strategies.masked import masked_lm_collator

    corpus = setup["small"]
    result = analyze(corpus, detector="oracle+patterns", k=2, n=2, progress=False)
    result.save(work / "ids")
    ids = load_identifiers(work / "ids")
    _, tok = load_model(setup["mlm"])
    base = work / "base"
    init_model(tok, TINY, seed=7).save_pretrained(base)
    tok.save_pretrained(base)
    cfg = TrainConfig(epochs=[1, 2], batch_size=8, learning_rate=2e-3, max_length=128, seed=3)
    examples = training_examples(corpus, tok, "ppmlm", positions=ids["positions"], max_length=128, progress=False)
    collator = masked_lm_collator(tok, seed=11)  # the protected whole-word collator with its own seeded generator
    batches = [collator([dict(e) for e in examples[i:i + 8]]) for i in range(0, len(examples), 8)]
    train(corpus, base, work / "run", "ppmlm", cfg, positions=ids["positions"], spans=ids["spans"], progress=False)
    model, tok = load_model(work / "run" / "epoch-2")
    preds = probe_masked(model, tok, corpus, positions=ids["positions"], max_length=128, seed=5, progress=False)
    return {"terms": result.terms, "individuals": result.individuals, "positions": result.positions(),
            "summary": {k: v for k, v in result.summary.items() if k != "timings_s"},
            "masks": batches, "weights": model.state_dict(), "predictions": preds,
            "metrics": evaluate_predictions(preds, ids),
            "mia": membership_scores(preds, ids, Corpus(list(corpus))).to_dict()}


@pytest.mark.slow
def test_same_seed_same_results_to_the_last_digit(setup, tmp_path):
    a, b = _pipeline(setup, tmp_path / "a"), _pipeline(setup, tmp_path / "b")
    for key in ("terms", "individuals", "positions"):
        pd.testing.assert_frame_equal(a[key], b[key], check_exact=True)
    assert a["summary"] == b["summary"]
    assert len(a["masks"]) == len(b["masks"]) > 0
    for x, y in zip(a["masks"], b["masks"]):
        assert x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x)
    assert all(torch.equal(a["weights"][k], b["weights"][k]) for k in a["weights"])
    pd.testing.assert_frame_equal(a["predictions"], b["predictions"], check_exact=True)
    assert a["metrics"] == b["metrics"] and a["mia"] == b["mia"]  # floats compared with ==, not approximately
