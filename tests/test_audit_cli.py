"""`python -m toolkit audit` and :func:`toolkit.pipelines.audit_only.audit_models`: checkpoints made by `python -m
toolkit train` (causal and masked), the reference found in the run's `run.json`, the on-disk contract the report
reads, a model trained hard on its members never judged green, and tiny random Llama / RoBERTa / GPT-2 / BERT
models saved with their tokenizers."""

from __future__ import annotations

import functools
import html
import json
from pathlib import Path

import pandas as pd
import pytest
import torch

from toolkit.cli import main
from toolkit.audit.verdict import LEVELS
from toolkit.config.sections import AttacksSection
from toolkit.corpus import Corpus, load_corpus, write_jsonl
from toolkit.models import TinyModelConfig, init_model, train_tokenizer
from toolkit.pipelines import audit_only
from toolkit.pipelines.audit_only import audit_models, default_reference, model_label

ROOT = Path(__file__).resolve().parents[1]
FILES = ("attacks.json", "roc.json", "scores.parquet", "identifiers.json", "verdict.json")
#: small attack samples: these tests check the plumbing, benchmarks/attacks.py and the quick start the figures
SMALL = dict(pii_candidates=5, pii_occurrences=12, pii_window=32, memorisation_occurrences=40, canary_references=50)


@pytest.fixture(autouse=True)
def _small_attacks(monkeypatch):
    monkeypatch.setattr(audit_only, "AttacksSection", functools.partial(AttacksSection, **SMALL))
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Tiny random masked and causal bases, fine-tuned by `python -m toolkit train` for 24 epochs on the notes of 6
    training patients (members; memorised), with 6 held-out patients as non-members."""
    root = tmp_path_factory.mktemp("audit_cli")
    notes = load_corpus(ROOT / "data_samples/clinical/notes.jsonl")
    train, held = notes.filter(split="train"), notes.filter(split="heldout")
    docs = Corpus(list(train.filter(person_ids=train.person_ids[:6]))
                  + list(held.filter(person_ids=held.person_ids[:6])))
    corpus = write_jsonl(docs, root / "notes.jsonl")
    out = {"corpus": corpus, "docs": docs}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for kind, strategy in (("clm", "clm"), ("mlm", "mlm")):
            tok = train_tokenizer((d.text for d in notes.filter(split="public")[:40]), kind, 400)
            base = root / f"base_{kind}"
            init_model(tok, TinyModelConfig(kind=kind, vocab_size=400, hidden_size=32, num_layers=1, num_heads=2,
                                            intermediate_size=64, max_length=64), seed=0).save_pretrained(base)
            tok.save_pretrained(base)
            run = root / f"run_{kind}"
            assert main(["train", "--strategy", strategy, "--corpus", str(corpus), "--split", "train", "--base",
                         str(base), "--out", str(run), "--epochs", "24", "--quiet"]) == 0
            out[kind] = {"base": base, "checkpoint": run / "epoch-24"}
    finally:
        torch.set_num_threads(threads)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["clm", "mlm"])
def test_audit_cli_on_trained_checkpoints(trained, kind, tmp_path, capsys):
    ckpt, base = trained[kind]["checkpoint"], trained[kind]["base"]
    assert default_reference(ckpt) == str(base.resolve())          # named by the run's run.json
    out = tmp_path / "audit"
    code = main(["audit", str(ckpt), "--corpus", str(trained["corpus"]), "--members", "train", "--nonmembers",
                 "heldout", "--detector", "oracle", "--window", "64", "--bootstrap", "50", "--out", str(out),
                 "--quiet"])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    label = model_label(ckpt)
    assert label == f"run_{kind}-epoch-24"
    for name in FILES:
        assert (out / "attacks" / label / name).is_file(), name
    for name in ("attacks.json", "identifiers.json", "verdicts.json", "report.html"):
        assert (out / name).is_file(), name
    attacks = json.loads((out / "attacks.json").read_text())
    assert attacks == json.loads((out / "attacks" / label / "attacks.json").read_text())       # one model: its own copy
    assert attacks["reference"] == str(base.resolve()) and (attacks["n_members"], attacks["n_nonmembers"]) == (6, 6)
    # the battery of 2026-12-02: EZ-MIA with the base as reference (masked: over the PLL's error positions) and the
    # blind baseline; no public split here, so no DC-PDD and no ReCaLL
    expected = {"loss", "zlib", "min_k", "reference", "identifier_count", "ez", "blind"} | (
        {"min_k_plus_plus"} if kind == "clm" else set())
    assert expected <= set(attacks["attacks"]) <= expected | {"min_k_plus_plus"}
    ids = json.loads((out / "identifiers.json").read_text())
    assert set(ids) == {"pii_inference", "memorisation"}
    assert ids["pii_inference"]["reference"] == str(base.resolve()) and ids["pii_inference"]["n_occurrences"] > 0
    assert ids["memorisation"]["overall"]["n_types"] > 0
    verdict = json.loads((out / "attacks" / label / "verdict.json").read_text())
    assert json.loads((out / "verdicts.json").read_text()) == {label: verdict}
    # trained 24 epochs on 6 patients: the members are separable, the verdict is never green
    assert verdict["level"] != "green", verdict
    assert attacks["attacks"][attacks["strongest"]]["auc"] > 0.9
    report = (out / "report.html").read_text(encoding="utf-8")
    assert label in report and html.escape(verdict["figure"]) in report      # the deciding figure of the verdict
    assert 'id="run1-mia"' in report and "count-based" in report  # the papers' probe and count attack, too
    last = next(x for x in printed.out.strip().splitlines() if x.startswith(f"{ckpt.resolve()}: "))
    assert last.startswith(f"{ckpt.resolve()}: {verdict['level']} — {verdict['rule']}")
    # the files hold figures, never identifiers: no direct identifier of the members appears in them
    spans = {d.text[s.start:s.end] for d in trained["docs"] for s in d.spans if s.end - s.start >= 5}
    text = " ".join((out / n).read_text() for n in ("attacks.json", "identifiers.json", "verdicts.json"))
    assert spans and not [t for t in spans if t in text]
    scores = pd.read_parquet(out / "attacks" / label / "scores.parquet")
    assert len(scores) == 12 and scores["member"].sum() == 6  # one row per individual
    # a second run finds every step cached: the steps' records are untouched
    before = {p: p.read_text() for p in out.rglob("step.json")}
    assert main(["audit", str(ckpt), "--corpus", str(trained["corpus"]), "--members", "train", "--nonmembers",
                 "heldout", "--detector", "oracle", "--window", "64", "--bootstrap", "50", "--out", str(out),
                 "--quiet"]) == 0
    assert len(before) == 4 and {p: p.read_text() for p in out.rglob("step.json")} == before
    assert last in capsys.readouterr().out.strip().splitlines()


@pytest.mark.slow
def test_audit_on_people_the_model_never_saw_is_not_leakage(trained, tmp_path, capsys):
    """The causal checkpoint (24 epochs on 6 training patients) audited with 'members' and 'non-members' both drawn
    from patients it never saw (20 held-out vs 20 test patients, the public split beside them for novel
    identifiers): whatever it knows of the population (clinicians, hospitals shared by many notes), the verdict is
    green or incomplete, never amber or red (methods.md §11)."""
    notes = load_corpus(ROOT / "data_samples/clinical/notes.jsonl")
    held, test = notes.filter(split="heldout"), notes.filter(split="test")
    public = notes.filter(split="public")  # the base's data: defines the novel identifiers (methods.md §4)
    docs = Corpus(list(held.filter(person_ids=held.person_ids[6:26])) + list(test.filter(person_ids=test.person_ids[:20]))
                  + list(public.filter(person_ids=public.person_ids[:20])))
    corpus = write_jsonl(docs, tmp_path / "unseen.jsonl")
    out = tmp_path / "audit"
    code = main(["audit", str(trained["clm"]["checkpoint"]), "--corpus", str(corpus), "--members", "heldout",
                 "--public", "public", "--nonmembers", "test", "--detector", "oracle", "--window", "64", "--bootstrap",
                 "50", "--out", str(out), "--quiet"])
    assert code == 0
    verdict = next(iter(json.loads((out / "verdicts.json").read_text()).values()))
    assert verdict["level"] in ("green", "incomplete"), verdict["statement"]
    assert not any(t["significant"] for t in verdict["tests"]), verdict["tests"]
    assert "novel_identifiers" in {t["rule"] for t in verdict["tests"]}  # judged against the non-members' notes
    ids = json.loads((out / "identifiers.json").read_text())["pii_inference"]
    assert ids["member_advantage"]["overall"]["n_nonmembers"] > 0 and ids["nonmembers"]["n_occurrences"] > 0
    attacks = json.loads((out / "attacks.json").read_text())
    assert {"loss", "zlib", "min_k"} <= set(attacks["reference_model_attacks"])


def test_audit_cli_errors(tmp_path, capsys):
    notes = load_corpus(ROOT / "data_samples/clinical/notes.jsonl")
    corpus = write_jsonl(Corpus(list(notes.filter(split="train")[:3]) + list(notes.filter(split="heldout")[:3])),
                         tmp_path / "notes.jsonl")
    common = ["gpt2", "--corpus", str(corpus), "--members", "train", "--out", str(tmp_path / "o"), "--quiet"]
    assert main(["audit", *common, "--nonmembers", "heldout"]) == 2
    assert "--identifiers DIR" in capsys.readouterr().err
    assert main(["audit", *common, "--nonmembers", "heldout", "--detector", "oracle", "--identifiers", "x"]) == 2
    assert "not both" in capsys.readouterr().err
    assert main(["audit", *common, "--nonmembers", "validation", "--detector", "oracle"]) == 2
    assert "no document of split(s) ['validation']" in capsys.readouterr().err
    assert main(["audit", *common, "--nonmembers", "train", "--detector", "oracle"]) == 2
    assert "both members and non-members" in capsys.readouterr().err
    assert main(["audit", *common, "--nonmembers", "heldout", "--public", "heldout", "--detector", "oracle"]) == 2
    assert "3 individuals are both public and audited" in capsys.readouterr().err
    assert main(["audit", *common, "--nonmembers", "heldout", "--public", "public", "--detector", "oracle"]) == 2
    assert "public: no document of split(s) ['public']" in capsys.readouterr().err


def _tokenizer(arch: str, texts: list[str]):
    """A fast tokenizer for a tiny random model: BERT WordPiece, GPT-2 byte-level BPE, or a BPE with RoBERTa's
    <s> … </s> template (RoBERTa) or a BOS prefix (Llama)."""
    if arch in ("bert", "gpt2"):
        return train_tokenizer(texts, "mlm" if arch == "bert" else "clm", 400)
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    t = Tokenizer(models.BPE())
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    t.decoder = decoders.ByteLevel()
    t.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=400, special_tokens=["<s>", "<pad>", "</s>", "<unk>",
                                                                                     "<mask>"],
                                                     initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    bos, eos = ("<s>", t.token_to_id("<s>")), ("</s>", t.token_to_id("</s>"))
    t.post_processor = (processors.RobertaProcessing(eos, bos, trim_offsets=False) if arch == "roberta"
                        else processors.TemplateProcessing(single="<s> $A", special_tokens=[bos]))
    return PreTrainedTokenizerFast(tokenizer_object=t, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                   pad_token="<pad>", cls_token="<s>", sep_token="</s>",
                                   mask_token=AddedToken("<mask>", lstrip=True, special=True))


def _tiny_random(arch: str, tok):
    from transformers import (BertConfig, BertForMaskedLM, GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM,
                              RobertaConfig, RobertaForMaskedLM)

    torch.manual_seed(0)
    small = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                 pad_token_id=tok.pad_token_id)
    if arch == "bert":
        return BertForMaskedLM(BertConfig(vocab_size=len(tok), max_position_embeddings=64, **small))
    if arch == "roberta":
        return RobertaForMaskedLM(RobertaConfig(vocab_size=len(tok), max_position_embeddings=66, **small))
    if arch == "llama":
        return LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), max_position_embeddings=64, num_key_value_heads=2,
                                            bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, **small))
    return GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=1, n_head=2, n_inner=64, n_positions=64,
                                      pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
                                      eos_token_id=tok.eos_token_id))


@pytest.mark.parametrize("arch", ["gpt2", "llama", "bert", "roberta"])
def test_audit_models_on_tiny_random_architectures(arch, tmp_path):
    notes = load_corpus(ROOT / "data_samples/clinical/notes.jsonl")
    docs = Corpus(list(notes.filter(split="train")[:4]) + list(notes.filter(split="heldout")[:4]))
    tok = _tokenizer(arch, [d.text for d in notes.filter(split="public")[:30]])
    model_dir, ref_dir = tmp_path / f"tiny-{arch}", tmp_path / f"tiny-{arch}-ref"
    for d, seed in ((model_dir, 0), (ref_dir, 1)):
        torch.manual_seed(seed)
        m = _tiny_random(arch, tok)
        m.save_pretrained(d)
        tok.save_pretrained(d)
    kw = {"dtype": "bf16", "device_map": "auto"} if arch == "gpt2" else {}   # large-model options pass through
    res = audit_models([model_dir], docs, members="train", nonmembers="heldout", reference=ref_dir,
                       detector="oracle", out_dir=tmp_path / "out", window=64, n_bootstrap=20, progress=False,
                       report=False, **kw)
    label = model_label(model_dir)
    assert list(res.verdicts) == [label] and res.verdicts[label]["level"] in LEVELS
    for name in FILES:
        assert (tmp_path / "out" / "attacks" / label / name).is_file(), name
    att = res.attacks[label]["attacks"]
    assert att["reference"] == str(ref_dir) and "reference" in att["attacks"] and "identifier_count" in att["attacks"]
    assert arch not in ("gpt2", "llama") or "min_k_plus_plus" in att["attacks"]  # masked: with the PLL's moments
    probe = res.audits[label]["metrics"]
    assert 0.0 <= probe["privacy"] <= 1.0 and ("token_accuracy" in probe) == (arch in ("gpt2", "llama"))
    assert res.attacks[label]["identifiers"]["pii_inference"]["overall"]["n"] > 0
