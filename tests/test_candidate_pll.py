"""Candidate-token pseudo-log-likelihood (``pii_pll_copies: candidate``, toolkit.audit.pll, methods.md §10): a masked
model's PII inference and canaries scored over the candidate's own tokens, each masked alone — against a by-hand
computation on a tiny BERT, equal to exact PLL when the window is the candidate alone, the candidate's characters
found where :func:`substitute_spans` put them, the setting checked in configs, profiles and on the command line."""

from __future__ import annotations

import importlib

import numpy as np
import pandas as pd
import pytest
import torch

from toolkit.audit.losses import candidate_log_likelihoods, sequence_log_likelihoods
from toolkit.audit.pll import CANDIDATE, candidate_positions, check_pii_estimator, estimator
from toolkit.corpus import Corpus, make_document
from toolkit.errors import ToolkitError
from toolkit.models import TinyModelConfig, init_model, train_tokenizer

pii = importlib.import_module("toolkit.audit.attacks.pii_inference")  # the package exports the function
WORDS = "patient doctor nurse took aspirin insulin morning evening pain knee walked rested at home".split()
NAMES = ["Ana Lopez", "Bo Chen", "Cy Dorn", "Di Evans", "Ed Fox", "Flo Grant"]
TINY = dict(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, max_length=64)
pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def _texts() -> list[str]:
    rng = np.random.default_rng(1)
    return [f"Note {i}: {NAMES[i % 6]} " + " ".join(rng.choice(WORDS, 12)) + "." for i in range(8)]


@pytest.fixture(scope="module")
def tok():
    return train_tokenizer(_texts() * 3 + NAMES * 3 + ["The record number of Kamitel Vanzu is 0123456789."], "mlm",
                           200)


@pytest.fixture(scope="module")
def bert(tok):
    return init_model(tok, TinyModelConfig(kind="mlm", **TINY), seed=0).eval()


def _by_hand(model, tok, text: str, spans) -> float:
    """Σ over the non-special tokens overlapping ``spans`` of log p(token | the text with that token alone masked)."""
    enc = tok(text, return_special_tokens_mask=True, return_offsets_mapping=True)
    x = torch.tensor(enc["input_ids"])[None]
    total = 0.0
    for t, ((a, b), special) in enumerate(zip(enc["offset_mapping"], enc["special_tokens_mask"])):
        if special or not any(a < e and b > s for s, e in spans):
            continue
        y = x.clone()
        y[0, t] = tok.mask_token_id
        with torch.no_grad():
            lp = torch.log_softmax(model(input_ids=y).logits[0, t].double(), -1)
        total += float(lp[x[0, t]])
    return total


def test_candidate_pll_against_a_by_hand_computation(tok, bert):
    texts = _texts()[:4]
    spans = [[(t.index(n), t.index(n) + len(n))] for t, n in zip(texts, NAMES)]
    spans[1] = spans[1] + [(0, 4)]                                  # two spans: the name and "Note"
    got = candidate_log_likelihoods(bert, tok, texts, spans, progress=False)
    want = [_by_hand(bert, tok, t, sp) for t, sp in zip(texts, spans)]
    np.testing.assert_allclose(got, want, atol=1e-6)
    exact = sequence_log_likelihoods(bert, tok, texts, progress=False)
    assert (got > exact).all()                                       # fewer terms, each a log-probability < 0
    assert np.isnan(candidate_log_likelihoods(bert, tok, texts[:1], [[(len(texts[0]), len(texts[0]))]],
                                              progress=False)[0])    # no token in the span


def test_a_window_that_is_the_candidate_alone_is_exact_pll(tok, bert):
    got = candidate_log_likelihoods(bert, tok, NAMES, [[(0, len(n))] for n in NAMES], progress=False)
    np.testing.assert_allclose(got, sequence_log_likelihoods(bert, tok, NAMES, progress=False), atol=1e-9)


def test_a_causal_model_scores_the_whole_window(tok):
    gpt = init_model(tok, TinyModelConfig(kind="clm", **TINY), seed=0).eval()
    texts = _texts()[:3]
    got = candidate_log_likelihoods(gpt, tok, texts, [[(0, 4)]] * 3, progress=False)
    np.testing.assert_allclose(got, sequence_log_likelihoods(gpt, tok, texts, progress=False), atol=1e-9)


def test_substitute_spans_says_where_the_candidate_stands():
    text = "Mr. Smith saw John Smith; SMITH's knee hurt. John Smith, 42."
    s = text.index("John Smith")
    new, spans = pii.substitute_spans(text, s, s + 10, "Ada Okafor")
    assert new == pii.substitute(text, s, s + 10, "Ada Okafor")
    assert [new[a:b] for a, b in spans] == ["Okafor", "Ada Okafor", "OKAFOR", "Ada Okafor"]
    same, spans = pii.substitute_spans(text, s, s + 10, "John Smith")
    assert same == text and [same[a:b] for a, b in spans] == ["Smith", "John Smith", "SMITH", "John Smith"]
    offs = np.array([[0, 2], [3, 9], [10, 14], [15, 20]])
    assert candidate_positions(np.array([1, 0, 0, 0], bool), offs, [(0, 5), (12, 13)]).tolist() == [1, 2]


def test_pii_inference_on_candidate_tokens(tok, bert, monkeypatch):
    """``pll_copies="candidate"``: each candidate window scored over the candidate's characters (the spans
    :func:`substitute_spans` returns), by hand here; the estimator recorded; the reference scored alike."""
    docs = [make_document(f"d{i}", f"p{i}", f"Note {i}: {n} took aspirin in the morning; {n.split()[1]} rested.",
                          [(len(f"Note {i}: "), len(f"Note {i}: ") + len(n), "NAME")]) for i, n in enumerate(NAMES)]
    pos = pd.DataFrame([{"doc_id": d.doc_id, "start": s.start, "end": s.end, "category": "NAME",
                         "term": d.text[s.start:s.end]} for d in docs for s in d.spans])
    made = []
    real = pii.substitute_spans
    monkeypatch.setattr(pii, "substitute_spans", lambda *a, **k: made.append(real(*a, **k)) or made[-1])
    kw = dict(window=40, n_candidates=4, seed=1, progress=False, return_table=True)
    got, table = pii.pii_inference(bert, tok, Corpus(docs), pos, pll_copies=CANDIDATE, reference=(bert, tok), **kw)
    assert got["pll"] == {"estimator": "candidate-token", "positions": "candidate"}
    assert len(made) == table["n_candidates"].sum() and all(len(sp) == 2 for _, sp in made)   # name + surname
    hand = np.array([_by_hand(bert, tok, t, sp) for t, sp in made])
    bounds = np.r_[0, np.cumsum(table["n_candidates"])]
    want = [pii._top1(hand[bounds[i]:bounds[i + 1]]) for i in range(len(table))]
    np.testing.assert_allclose(table["top1"], want)
    np.testing.assert_allclose(table["reference_top1"], want)        # the same model as its own reference
    exact, _ = pii.pii_inference(bert, tok, Corpus(docs), pos, **kw)
    assert exact["pll"]["estimator"] == "exact" and got["n_occurrences"] == exact["n_occurrences"]


def test_canaries_on_the_secret_s_tokens(tok, bert):
    from toolkit.audit.attacks import exposure, make_canaries

    can = make_canaries(2, seed=4)
    ex = exposure(bert, tok, can, n_reference=12, pll_copies=CANDIDATE, progress=False)
    seen = []

    def hand(texts):
        seen.extend(texts)
        p = len(can["prefix"].iloc[len(seen) // 13 - 1])
        return np.array([_by_hand(bert, tok, t, [(p, p + 8)]) for t in texts])

    want = exposure(bert, tok, can, n_reference=12, scorer=hand, progress=False)
    np.testing.assert_allclose(ex["log_likelihood"], want["log_likelihood"], atol=1e-6)
    np.testing.assert_allclose(ex["exposure"], want["exposure"], atol=1e-3)  # a skew-normal fit of the 12


def test_the_setting_is_checked_where_it_is_given(tmp_path):
    from toolkit.cli.audit import pii_estimator
    from toolkit.config import load_profile
    from toolkit.config.experiment import load_experiment
    from toolkit.pipelines.audit_outputs import check_options

    assert check_pii_estimator("candidate") == CANDIDATE and check_pii_estimator("all") is None
    assert check_pii_estimator(24) == 24 and estimator(None, 0, CANDIDATE)["estimator"] == "candidate-token"
    for bad in ("candidates", 0, True):
        with pytest.raises(ToolkitError, match="'all', 'candidate' or an integer"):
            check_pii_estimator(bad, "pii_pll_copies")
    cfg = lambda over: load_experiment("configs/cpu_masked.yaml", over).audit.attacks  # noqa: E731
    assert cfg({"audit.attacks.pii_pll_copies": "candidate"}).pii_pll_copies == "candidate"
    with pytest.raises(ToolkitError, match="pll_copies"):
        cfg({"audit.attacks.pll_copies": "candidate"})              # membership has no candidate
    profile = tmp_path / "p.yaml"
    profile.write_text("name: p\npii_pll_copies: candidate\n", encoding="utf-8")
    assert load_profile(profile).pii_pll_copies == "candidate"
    assert pii_estimator("candidate") == "candidate" and pii_estimator("16") == 16
    check_options(window=256, n_bootstrap=0, seed=0, pii_pll_copies="candidate", flags=True)
    with pytest.raises(ToolkitError, match="--pii-pll-copies"):
        check_options(window=256, n_bootstrap=0, seed=0, pii_pll_copies="token", flags=True)
