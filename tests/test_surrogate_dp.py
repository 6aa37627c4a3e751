"""Surrogates + person-level DP-SGD (``ppclm_surrogate_dp``, ``ppmlm_surrogate_dp``) and surrogate names as long in
tokens as the originals (issue 27)."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from toolkit.corpus import Corpus, load_corpus
from toolkit.identifiers import analyze
from toolkit.identifiers.words import iter_words, normalize_term
from toolkit.models import TinyModelConfig, init_model, train_tokenizer
from toolkit.strategies import STRATEGIES, get_strategy
from toolkit.strategies.pseudonymize import plan_replacements

pytestmark = pytest.mark.usefixtures("one_thread")

NOTES = Path(__file__).resolve().parents[1] / "data_samples" / "clinical" / "notes.jsonl"
KEY = bytes(range(32))


@lru_cache(maxsize=None)
def sample():
    """60 training notes, their oracle identifiers and a 4,000-token BPE tokenizer (the CPU profile's size) trained
    on 400 public notes: the public split's frequent names and hospitals become single tokens, as in a base the
    toolkit builds."""
    corpus = load_corpus(NOTES)
    members = Corpus(list(corpus.filter(split="train"))[:60])
    tok = train_tokenizer([d.text for d in list(corpus.filter(split="public"))[:400]], "clm", 4000)
    return members, analyze(members, detector="oracle", progress=False), tok


@pytest.mark.parametrize("kind", ["clm", "mlm"])
def test_surrogate_dp_rows_combine_the_surrogate_text_with_dp(kind):
    strat = get_strategy(f"pp{kind}_surrogate_dp")
    plain = get_strategy(f"pp{kind}_surrogate")
    assert (strat.kind, strat.text, strat.protect, strat.dp) == (kind, "surrogate", plain.protect, True)
    assert strat.reads_spans and not plain.dp
    assert {n for n, s in STRATEGIES.items() if s.dp and s.text == "surrogate" and not s.lora_rank
            and not s.subspace} == \
        {"ppclm_surrogate_dp", "ppmlm_surrogate_dp"}


def name_token_counts(tokenizer, matched: bool) -> tuple[np.ndarray, np.ndarray]:
    """Tokens per word of every NAME / ORGANIZATION region's original and surrogate (same number of words)."""
    members, analysis, tok = sample()
    plan = plan_replacements(members, "surrogate", analysis.span_table(), surrogate_key=KEY,
                             tokenizer=tok if matched else None)
    orig, surr = [], []
    for d, regions in zip(members, plan):
        for s, e, category, replacement in regions:
            if category != "NAME":
                continue
            a, b = d.text[s:e].split(), replacement.split()
            if len(a) == len(b):
                orig += [len(tok(" " + w, add_special_tokens=False)["input_ids"]) for w in a]
                surr += [len(tok(" " + w, add_special_tokens=False)["input_ids"]) for w in b]
    return np.asarray(orig), np.asarray(surr)


def test_surrogate_names_are_as_long_in_tokens_as_the_originals_with_the_tokenizer():
    _, _, tok = sample()
    orig, free = name_token_counts(tok, matched=False)
    _, matched = name_token_counts(tok, matched=True)
    assert len(orig) > 200
    # unmatched Faker names are cut into more pieces than the corpus' names the tokenizer has merged
    assert free.mean() > orig.mean() + 0.5
    assert abs(matched.mean() - orig.mean()) < 0.25  # measured: 1.82 vs 1.72 (unmatched: 2.94)
    assert (matched == orig).mean() > 0.85 and (free == orig).mean() < 0.4  # measured: 0.93 and 0.15


def test_matched_surrogates_keep_the_rules():
    """With the tokenizer the surrogates are still keyed, consistent and never a word of the original."""
    members, analysis, tok = sample()
    spans = analysis.span_table()
    a = plan_replacements(members, "surrogate", spans, surrogate_key=KEY, tokenizer=tok)
    assert a == plan_replacements(members, "surrogate", spans, surrogate_key=KEY, tokenizer=tok)
    assert a != plan_replacements(members, "surrogate", spans, surrogate_key=bytes(32), tokenizer=tok)
    for d, regions in zip(members, a):
        for s, e, category, replacement in regions:
            if category in ("NAME", "ORGANIZATION"):
                old = {normalize_term(d.text[x:y]) for x, y in iter_words(d.text[s:e])}
                new = {normalize_term(replacement[x:y]) for x, y in iter_words(replacement)}
                assert not old & new


@pytest.mark.slow
def test_ppclm_surrogate_dp_trains_on_surrogates_with_person_level_dp(tmp_path, monkeypatch):
    import toolkit.training.dp as dp_module
    from toolkit.training import TrainConfig, train

    members, analysis, tok = sample()
    base = tmp_path / "base"
    init_model(tok, TinyModelConfig(kind="clm", vocab_size=4000, hidden_size=32, num_layers=1, num_heads=2,
                                    intermediate_size=64, max_length=128), seed=0).save_pretrained(base)
    tok.save_pretrained(base)
    seen = {}
    real = dp_module.train_dp

    def spy(model, tokenizer, examples, strat, cfg, run, **kw):
        seen["texts"] = [tokenizer.decode(e["input_ids"]) for e in examples]
        seen["individuals"] = kw.get("individuals")
        return real(model, tokenizer, examples, strat, cfg, run, **kw)

    monkeypatch.setattr(dp_module, "train_dp", spy)
    cfg = TrainConfig(epochs=[1], batch_size=8, learning_rate=2e-3, max_length=128, seed=0, dp={"epsilon": 4.0})
    ckpts = train(members, base, tmp_path / "run", "ppclm_surrogate_dp", cfg, positions=analysis.positions(),
                  spans=analysis.span_table(), progress=False)
    assert [e for e, _ in ckpts] == [1]
    # the training text holds surrogates: none of the patients' and doctors' name words is left
    names = {normalize_term(w) for d in members for s in d.spans if s.label in ("PATIENT", "DOCTOR")
             for w in d.text[s.start:s.end].split() if len(w) > 2}
    trained = {normalize_term(d[x:y]) for d in seen["texts"] for x, y in iter_words(d)}
    assert len(names) > 20 and not names & trained
    assert (tmp_path / "run" / "surrogate.key").is_file()
    # DP-SGD with the individual as the unit, the accountant's ε recorded
    assert len(set(seen["individuals"])) == len(set(members.person_ids))
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["dp"]["unit"] == "individual" and run["dp"]["n_units"] == len(set(members.person_ids))
    assert run["dp"]["target_epsilon"] == 4.0 and 0 < run["dp"]["spent_epsilon"] <= 4.0 + 1e-6
