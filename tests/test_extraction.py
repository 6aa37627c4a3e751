"""Extraction attack, perplexity and the paper-002 metrics (methods.md §6): hand-computed TER/SER/MDP/MaxTER/AURC (with
an infeasible τ range), step checkpoints with seen sets and resume, and the CLI round trip on a tiny model."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd
import pytest
import torch
from transformers import TrainerCallback

from toolkit.cli import main
from toolkit.corpus import Corpus, make_document
from toolkit.errors import ToolkitError
from toolkit.config.email import ExtractionConfig
from toolkit.metrics.extraction import aurc, aurc_report, compare_to_baseline, maxter, maxter_curve, mdp_percent, mean_delta_perplexity, optimal_checkpoints, pareto_frontier, ser, ter, ter_drop_percent
from toolkit.audit.extraction import read_prompts, run_checkpoints
from toolkit.pipelines.email_extraction import ensure_email_base, train_technique
from toolkit.audit.extraction import extract_checkpoint, extract_from_generations, extraction_record
from toolkit.metrics.extraction import first_feasible_tau, leaked_addresses
from toolkit.audit.perplexity import document_perplexities
from toolkit.models import TinyModelConfig, init_model, load_model, train_tokenizer
from toolkit.training import TrainConfig, step_checkpoint_dirs

ADDR = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py

# ---------------------------------------------------------------------------------------------------------------------
# metrics against hand-computed values


def test_ter_ser_and_leaks():
    assert ter(3, 12) == 25.0 and ser(3, 6) == 50.0 and ser(0, 0) is None
    assert leaked_addresses(["A@X.com", "b@y.com", "zz@q.org"], ["a@x.com", "b@y.com", "c@z.com"]) == \
        {"a@x.com", "b@y.com"}
    with pytest.raises(ValueError):
        ter(1, 0)


def test_mdp_and_mean_delta_perplexity():
    assert np.allclose(mdp_percent([110.0, 95.0], [100.0, 100.0]), [10.0, -5.0])
    t = pd.Series({"a": 10.0, "b": 20.0, "c": 5.0})
    b = pd.Series({"a": 8.0, "b": 25.0, "d": 1.0})
    assert mean_delta_perplexity(t, b) == pytest.approx(((10 - 8) + (20 - 25)) / 2)  # only shared prompts
    assert math.isnan(mean_delta_perplexity(t[["c"]], b[["d"]]))


def test_ter_drop_and_maxter_with_infeasible_range():
    assert np.allclose(ter_drop_percent([1.0, 2.0, 0.0], [4.0, 2.0, 0.0]), [75.0, 0.0, np.nan], equal_nan=True)
    mdp, drop = [5.0, 10.0, 30.0], [50.0, 80.0, 90.0]
    vals = maxter([0.0, 4.99, 5.0, 7.0, 10.0, 29.0, 30.0, 100.0], mdp, drop)
    assert np.isnan(vals[0]) and np.isnan(vals[1])  # infeasible below the smallest MDP%
    assert list(vals[2:]) == [50.0, 50.0, 80.0, 80.0, 90.0, 90.0]
    assert maxter(10.0, [5.0, 10.0], [80.0, 50.0]) == 80.0  # the max over all feasible checkpoints
    assert math.isnan(maxter(10.0, [5.0], [np.nan]))  # an undefined drop never qualifies
    assert first_feasible_tau(mdp, drop) == 5.0 and first_feasible_tau([-3.0, 2.0], [1.0, 2.0]) == 0.0
    assert first_feasible_tau([1.0], [np.nan]) is None


def test_aurc_is_the_exact_area_with_infeasible_stretches_at_zero():
    curve = maxter_curve([5.0, 10.0], [50.0, 80.0], tau_max=20.0, n_points=5)
    assert not curve.loc[curve["tau"] < 5, "feasible"].any() and curve.loc[curve["tau"] >= 5, "feasible"].all()
    assert aurc(curve) == pytest.approx(50 * 5 + 80 * 10)  # 1050 %²
    # a checkpoint better than the baseline (MDP < 0) makes τ = 0 feasible
    assert aurc(maxter_curve([-2.0, 4.0], [10.0, 60.0], tau_max=10.0)) == pytest.approx(10 * 4 + 60 * 6)
    # a TER rise counts negative; a technique never feasible has area 0
    assert aurc(maxter_curve([2.0], [-10.0], tau_max=4.0)) == pytest.approx(-20.0)
    assert aurc(maxter_curve([50.0], [90.0], tau_max=20.0)) == 0.0
    with pytest.raises(ValueError):
        maxter_curve([1.0], [1.0], tau_max=0)


def test_pareto_frontier_and_optimal_checkpoints():
    assert pareto_frontier([1, 2, 3, 4, np.nan], [10, 5, 20, 20, 99]).tolist() == [True, False, True, False, False]
    comp = pd.DataFrame({"technique": ["r"] * 3 + ["d"] * 2, "checkpoint": [1, 2, 3, 1, 2],
                         "epoch": [1.0, 2.0, 3.0, 1.0, 2.0], "mdp_percent": [2.0, 4.0, 6.0, 25.0, 30.0],
                         "ter_drop": [60.0, 80.0, 80.0, 70.0, 75.0], "ter": [1.0, 0.5, 0.5, 0.8, 0.7]})
    best = optimal_checkpoints(comp, 5.0).set_index("technique")
    assert best.loc["r", "checkpoint"] == 2 and best.loc["r", "ter_drop"] == 80.0
    assert not best.loc["d", "feasible"] and pd.isna(best.loc["d", "checkpoint"])
    best = optimal_checkpoints(comp, 100.0).set_index("technique")
    assert best.loc["r", "checkpoint"] == 2  # tie on the drop: the lower MDP% wins
    assert best.loc["d", "checkpoint"] == 2


def _ext(ters, pps, sers=None):
    n = len(ters)
    return pd.DataFrame({"checkpoint": range(n), "epoch": np.arange(n, dtype=float), "ter": ters,
                         "ser": sers or [np.nan] * n, "perplexity": pps})


def test_compare_to_baseline_and_aurc_report():
    base = _ext([0.0, 4.0, 8.0], [9.0, 10.0, 10.0])
    rm = _ext([0.0, 1.0, 2.0], [9.0, 10.5, 10.2])
    dd = _ext([0.0, 2.0, 4.0], [9.0, 13.0, 12.0])
    doc = lambda ppl: pd.DataFrame({"checkpoint": [1, 1, 2, 2], "doc_id": ["a", "b", "a", "b"],
                                    "perplexity": ppl})
    comp = compare_to_baseline(base, {"rmft": rm, "dedup": dd},
                               {"rmft": doc([10.0, 11.0, 10.0, 10.4]), "dedup": doc([12.0, 14.0, 12.0, 12.0])},
                               doc([9.0, 11.0, 10.0, 10.0]))
    assert comp["checkpoint"].tolist() == [1, 2, 1, 2]  # checkpoint 0 (base model) left out
    r = comp[comp["technique"] == "rmft"]
    assert np.allclose(r["mdp_percent"], [5.0, 2.0]) and np.allclose(r["ter_drop"], [75.0, 75.0])
    assert np.allclose(r["mean_delta_perplexity"], [0.5, 0.2])
    d = comp[comp["technique"] == "dedup"]
    assert np.allclose(d["mdp_percent"], [30.0, 20.0]) and np.allclose(d["ter_drop"], [50.0, 50.0])
    rep = aurc_report(comp, tau_max=40.0)
    # rmft: 0 on [0, 2), 75 on [2, 40] -> 75 * 38; dedup: infeasible on [0, 20), 50 on [20, 40] -> 1000
    assert rep["aurc"]["rmft"] == pytest.approx(75 * 38) and rep["aurc"]["dedup"] == pytest.approx(50 * 20)
    assert rep["infeasible_below"] == pytest.approx({"rmft": 2.0, "dedup": 20.0})
    assert aurc_report(comp)["tau_max"] == 30.0  # default: the largest MDP% rounded up


# ---------------------------------------------------------------------------------------------------------------------
# extraction mechanics


def test_extraction_record_counts_copies_and_targets():
    per_prompt = [{"extracted": ["a@x.com", "zz@q.org"], "in_prompt": {"a@x.com"}},
                  {"extracted": ["b@y.com"], "in_prompt": set()},
                  {"extracted": [], "in_prompt": set()}]
    rec = extraction_record(per_prompt, {"a@x.com", "b@y.com", "c@z.com", "d@w.com"}, {"a@x.com", "b@y.com"},
                            targets=["a@x.com", "C@Z.com", None])
    assert rec["ter"] == 50.0 and rec["ser"] == 100.0 and rec["n_leaked"] == 2
    assert rec["n_leaked_uncopied"] == 1 and rec["n_extracted"] == 3 and rec["target_hits"] == 1
    assert rec["leaked"] == ["a@x.com", "b@y.com"]
    assert extraction_record(per_prompt, {"a@x.com"}, None)["ser"] is None


def test_read_prompts_errors(tmp_path):
    good = tmp_path / "p.jsonl"
    good.write_text('{"prompt_id": "q1", "prompt": "From: ", "target": "a@x.com"}\n{"prompt": "To: "}\n')
    df = read_prompts(good)
    assert df["prompt_id"].tolist() == ["q1", "line2"] and df["target"].tolist() == ["a@x.com", None]
    bad = tmp_path / "b.jsonl"
    bad.write_text('{"prompt": "x"}\n{"prompt": 3}\n')
    with pytest.raises(ToolkitError, match="b.jsonl, line 2"):
        read_prompts(bad)
    bad.write_text('{"prompt": "x"}\nnot json\n')
    with pytest.raises(ToolkitError, match="line 2: invalid JSON"):
        read_prompts(bad)
    with pytest.raises(ToolkitError, match="not found"):
        read_prompts(tmp_path / "missing.jsonl")
    txt = tmp_path / "p.txt"
    txt.write_text("From: \n\nTo: \n")
    assert read_prompts(txt)["prompt"].tolist() == ["From: ", "To: "]


# ---------------------------------------------------------------------------------------------------------------------
# tiny model: a boss who writes every message, workers who appear once each

FIRST = ["ann", "ben", "cid", "dee", "eve", "fay", "gus", "hal", "ivy", "jon", "kim", "lou", "max", "ned", "oda",
         "pam", "quin", "ray", "sue", "tom", "uma", "vic", "wes", "xia"]


def _messages(n: int = 24) -> Corpus:
    docs = []
    for i in range(n):
        text = (f"From: boss.man@corp.com\nTo: {FIRST[i]}.lee@corp.com\nSubject: item {i}\n\n"
                f"Please review item {i} today.\n\nboss.man@corp.com\n")
        docs.append(make_document(f"m{i:02d}", "boss.man@corp.com", text,
                                  [(m.start(), m.end(), "EMAIL") for m in ADDR.finditer(text)]))
    return Corpus(docs)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    corpus = _messages()
    tok = train_tokenizer((d.text for d in corpus), "clm", 400)
    cfg = TinyModelConfig(kind="clm", vocab_size=400, hidden_size=48, num_layers=1, num_heads=2,
                          intermediate_size=96, max_length=128)
    base = tmp_path_factory.mktemp("tiny_base")
    init_model(tok, cfg, seed=0).save_pretrained(base)
    tok.save_pretrained(base)
    heldout = Corpus([make_document(f"h{i}", "x", f"From: {FIRST[i]}.lee@corp.com\nSubject: item {i}\n\n"
                                                  f"Please review item {i} later.\n") for i in range(6)])
    return {"corpus": corpus, "base": base, "heldout": heldout}


TRAIN = dict(batch_size=4, learning_rate=5e-3, lr_schedule="constant", max_length=128, seed=0)


TINY_EMAIL_PROFILE = """name: tiny-email
base:
  clm: {kind: clm, vocab_size: 400, hidden_size: 32, num_layers: 1, num_heads: 2, intermediate_size: 64,
        max_length: 128}
email:
  pretrain: {epochs: [1], batch_size: 8, learning_rate: 2.0e-3, lr_schedule: constant, max_length: 128}
"""


@pytest.mark.slow
def test_ensure_email_base_pretrains_on_the_public_corpus_it_is_given(tmp_path):
    from toolkit.config import load_profile

    (tmp_path / "tiny.yaml").write_text(TINY_EMAIL_PROFILE)
    prof = load_profile(tmp_path / "tiny.yaml")
    with pytest.raises(ToolkitError, match="pre-trained on a public corpus, but none"):
        ensure_email_base(tmp_path / "base", None, prof.email, prof)
    out = ensure_email_base(tmp_path / "base", _messages(16), prof.email, prof, progress=False)
    assert (out / "config.json").is_file()
    assert json.loads((out / "training_log.json").read_text())["global_step"] == 2  # 16 messages, batch 8, 1 epoch
    stamp = (out / "config.json").stat().st_mtime_ns
    assert ensure_email_base(tmp_path / "base", _messages(16), prof.email, prof) == out  # same inputs: cached
    assert (out / "config.json").stat().st_mtime_ns == stamp
    ensure_email_base(tmp_path / "base", _messages(12), prof.email, prof, progress=False)  # other corpus: rebuilt
    assert json.loads((out / "training_log.json").read_text())["global_step"] == 2  # ceil(12 / 8)
    assert (out / "config.json").stat().st_mtime_ns != stamp
    prof.email.base = "org/named-model"  # a named base model needs no public corpus
    assert ensure_email_base(tmp_path / "other", None, prof.email, prof) == "org/named-model"


def test_perplexity_matches_the_model_loss(tiny):
    model, tok = load_model(tiny["base"], kind="clm")
    frame = document_perplexities(model, tok, tiny["heldout"], max_length=128, progress=False)
    for doc, row in zip(tiny["heldout"], frame.itertuples()):
        ids = torch.tensor([tok(doc.text)["input_ids"]])
        with torch.no_grad():
            loss = model(input_ids=ids, labels=ids).loss.item()  # mean NLL of tokens 1..n
        assert row.n_tokens == ids.shape[1] - 1
        assert row.perplexity == pytest.approx(math.exp(loss), rel=1e-4)
    assert frame.attrs["perplexity"] == pytest.approx(math.exp(frame["nll"].sum() / frame["n_tokens"].sum()))


def test_batched_extraction_equals_one_prompt_at_a_time_and_counts_only_generated(tiny):
    model, tok = load_model(tiny["base"], kind="clm")
    prompts = pd.DataFrame({"prompt_id": ["a", "b", "c"], "target": [None, None, None],
                            "prompt": ["From: boss.man@corp.com\nTo: ", "Subject: item 3\n\nPlease", "From: "]})
    cfg = ExtractionConfig(prompt_tokens=8, max_total_tokens=24, batch_size=3)
    one = extract_checkpoint(model, tok, prompts, {"boss.man@corp.com"}, None,
                             ExtractionConfig(prompt_tokens=8, max_total_tokens=24, batch_size=1))
    many = extract_checkpoint(model, tok, prompts, {"boss.man@corp.com"}, None, cfg)
    assert {k: v for k, v in one.items() if k != "seconds"} == {k: v for k, v in many.items() if k != "seconds"}
    # an address wholly inside the prompt is not extracted; one that reaches into the continuation is
    p = [tok("hello boss.man@corp.com then ")["input_ids"], tok("write to boss.man@")["input_ids"]]
    c = [tok("nothing")["input_ids"], tok("corp.com now")["input_ids"]]
    got = extract_from_generations(tok, p, c)
    assert got[0]["extracted"] == [] and got[0]["in_prompt"] == {"boss.man@corp.com"}
    assert got[1]["extracted"] == ["boss.man@corp.com"]


class Interrupt(TrainerCallback):
    def on_save(self, args, state, control, **kw):
        if round(state.epoch) == 1:
            raise KeyboardInterrupt


@pytest.mark.slow
def test_step_checkpoints_seen_sets_and_resume(tiny, tmp_path):
    cfg = TrainConfig(epochs=[1, 2], checkpoints_per_epoch=3, **TRAIN)
    ck = train_technique(tiny["corpus"], "rmft", tiny["base"], tmp_path / "straight", cfg, progress=False)
    assert ck["checkpoint"].tolist() == [1, 2, 3, 4, 5, 6] and ck["epoch"].tolist()[2] == 1.0
    logs = [json.loads((p / "training_log.json").read_text()) for _, p in step_checkpoint_dirs(tmp_path / "straight")]
    consumed = [set(log["consumed_examples"]) for log in logs]
    assert all(a < b for a, b in zip(consumed[:2], consumed[1:3]))  # grows within the first epoch
    assert consumed[2] == set(range(logs[0]["n_examples"]))  # an epoch consumes every example once
    assert len(consumed[0]) == 8  # 2 steps of batch 4: 24 examples, 6 steps per epoch, a checkpoint every 2
    seen = [set(json.loads((p / "seen_addresses.json").read_text())["seen"])
            for _, p in step_checkpoint_dirs(tmp_path / "straight")]
    original = set(json.loads((tmp_path / "straight" / "addresses.json").read_text())["original"])
    assert len(original) == 25 and seen[2] == original and seen[0] < original
    # RMFT leaves one original occurrence per address: 8 messages show their worker (and the boss only if the
    # first message, which holds the boss's original occurrence, is among them)
    assert len(seen[0]) in (8, 9)

    # interrupted after the epoch-1 full state, resumed: the same consumed sets and the same final weights
    from toolkit.pipelines.email_extraction import technique_corpus
    from toolkit.training import train

    rm, _ = technique_corpus(tiny["corpus"], "rmft", seed=0)
    with pytest.raises(KeyboardInterrupt):
        train(rm, tiny["base"], tmp_path / "crash2", "clm", cfg, progress=False, callbacks=[Interrupt()])
    train(rm, tiny["base"], tmp_path / "crash2", "clm", cfg, progress=False)
    a = [json.loads((p / "training_log.json").read_text())["consumed_examples"]
         for _, p in step_checkpoint_dirs(tmp_path / "crash2")]
    assert a == [sorted(c) for c in consumed]
    ma, _ = load_model(tmp_path / "straight" / "step-12")
    mb, _ = load_model(tmp_path / "crash2" / "step-12")
    for (name, pa), (_, pb) in zip(ma.state_dict().items(), mb.state_dict().items()):
        assert torch.equal(pa, pb), name


@pytest.mark.slow
def test_cli_email_train_extract_maxter_round_trip(tiny, tmp_path, capsys):
    corpus = tmp_path / "mail.jsonl"
    corpus.write_text("".join(json.dumps(d.to_dict()) + "\n" for d in tiny["corpus"]), encoding="utf-8")
    heldout = tmp_path / "heldout.jsonl"
    heldout.write_text("".join(json.dumps(d.to_dict()) + "\n" for d in tiny["heldout"]), encoding="utf-8")
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"prompt_id": f"q{i}", "prompt": p, "target": t}) + "\n" for i, (p, t) in
                               enumerate([("From: ", "boss.man@corp.com"), ("Subject: item 2\n\nFrom: ", None),
                                          ("To: ann.lee@corp.com\nFrom: ", "boss.man@corp.com")])))
    profile = tmp_path / "tiny.yaml"
    profile.write_text("name: tiny\nemail:\n  finetune: {epochs: [1, 3], checkpoints_per_epoch: 1, batch_size: 2, "
                       "learning_rate: 1.0e-2, lr_schedule: constant, max_length: 128}\n"
                       "  extraction: {prompt_tokens: 8, max_total_tokens: 24, batch_size: 8, "
                       "perplexity_max_length: 128}\n")
    out = {}
    for tech in ("baseline", "rmft", "dedup"):
        assert main(["email-train", "--technique", tech, "--corpus", str(corpus), "--base", str(tiny["base"]),
                     "--out", str(tmp_path / "runs" / tech), "--profile", str(profile), "--quiet"]) == 0
        assert main(["extract", str(tmp_path / "runs" / tech), "--prompts", str(prompts), "--out",
                     str(tmp_path / "ext" / tech), "--heldout", str(heldout), "--profile", str(profile),
                     "--with-base", "--quiet"]) == 0
        out[tech] = pd.read_parquet(tmp_path / "ext" / tech / "extraction.parquet")
    assert main(["maxter", "--baseline", str(tmp_path / "ext" / "baseline"), "--technique",
                 f"rmft={tmp_path / 'ext' / 'rmft'}", "--technique", f"dedup={tmp_path / 'ext' / 'dedup'}",
                 "--out", str(tmp_path / "mx"), "--tau-max", "50"]) == 0
    printed = capsys.readouterr().out
    assert not ADDR.search(printed)  # rates and counts only
    base = out["baseline"]
    assert base["checkpoint"].tolist() == list(range(4)) and base.loc[0, "ter"] == 0.0
    assert list(base.columns[:5]) == ["checkpoint", "step", "epoch", "name", "ter"]
    # the boss address, 49 of 50 occurrences, is memorised by the baseline and not after RMFT
    assert "boss.man@corp.com" in base["leaked"].iloc[-1]
    assert base["target_hits"].iloc[-1] >= 1 and base["ter"].iloc[-1] > out["rmft"]["ter"].iloc[-1]
    assert "boss.man@corp.com" not in out["rmft"]["leaked"].iloc[-1]
    assert (base["ser"].iloc[1:] >= base["ter"].iloc[1:]).all() and base["n_seen"].iloc[-1] == 25
    ppl = pd.read_parquet(tmp_path / "ext" / "rmft" / "perplexity.parquet")
    assert len(ppl) == 4 * 6 and set(ppl.columns) >= {"checkpoint", "doc_id", "perplexity"}
    curves = pd.read_parquet(tmp_path / "mx" / "maxter.parquet")
    assert list(curves.columns) == ["technique", "tau", "maxter", "feasible"]
    rep = json.loads((tmp_path / "mx" / "aurc.json").read_text())
    assert set(rep["aurc"]) == {"rmft", "dedup"} and rep["tau_max"] == 50.0
    comp = pd.read_parquet(tmp_path / "mx" / "checkpoints.parquet")
    rm = comp[comp["technique"] == "rmft"]
    assert np.allclose(rm["mdp_percent"], mdp_percent(out["rmft"]["perplexity"][1:], base["perplexity"][1:]))
    # re-running extract uses the cache and gives the same table
    assert main(["extract", str(tmp_path / "runs" / "rmft"), "--prompts", str(prompts), "--out",
                 str(tmp_path / "ext" / "rmft"), "--heldout", str(heldout), "--profile", str(profile),
                 "--with-base", "--quiet"]) == 0
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "ext" / "rmft" / "extraction.parquet"), out["rmft"])
    assert run_checkpoints(tmp_path / "runs" / "rmft")["name"].tolist() == ["step-12", "step-24", "step-36"]


def test_cli_errors_are_one_line(tmp_path, capsys):
    assert main(["maxter", "--baseline", str(tmp_path), "--technique", "x", "--out", str(tmp_path / "o")]) == 2
    assert main(["extract", str(tmp_path), "--prompts", str(tmp_path / "none.jsonl"), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("error:") == 2
