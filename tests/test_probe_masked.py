"""Fill-mask probe (methods.md §4): coverage, pass grouping, predictions, multi-token decoding, determinism."""

from __future__ import annotations

import importlib
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from toolkit.audit import assign_passes, n_passes, probe_masked
pm = importlib.import_module("toolkit.audit.probe_masked")
from toolkit.corpus import Corpus, make_document
from toolkit.identifiers import analyze, segment_corpus
from toolkit.models import TinyModelConfig, init_model, train_tokenizer
from toolkit.strategies import encode_corpus

MEMO = [
    "the patient takes aspirin every morning with breakfast",
    "doctor smith prescribed insulin for the diabetic patient",
    "the nurse checked blood pressure twice a day",
]
FILLER = ("patient reports mild pain in the left knee after walking and was advised to rest with ice and "
          "follow up in two weeks if symptoms persist the nurse reviewed medications with the family")


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def _names_doc(i: int) -> tuple[str, list[tuple[int, int, str]]]:
    """A long note in which the patient's name occurs four times (gold PATIENT spans)."""
    name = ["Alvarez", "Brennan", "Castillo"][i]
    spans, text = [], ""
    for j in range(4):
        text += f"Mr {name}"
        spans.append((len(text) - len(name), len(text), "PATIENT"))
        text += f" said {FILLER} {j}. "
    return text, spans


@pytest.fixture(scope="module")
def names_corpus() -> Corpus:
    docs = []
    for i in range(3):
        text, spans = _names_doc(i)
        docs.append(make_document(f"d{i}", f"p{i}", text, spans))
    docs.append(make_document("short", "p0", "Brief note, Alvarez seen."))
    return Corpus(docs)


@pytest.fixture(scope="module")
def tokenizer():
    texts = MEMO + [_names_doc(i)[0] for i in range(3)] + ["Brief note, seen."]
    return train_tokenizer(texts * 3, "mlm", 300)


@pytest.fixture(scope="module")
def random_model(tokenizer):
    return init_model(tokenizer, TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64,
                                                 max_length=128))


def _positions(corpus: Corpus) -> pd.DataFrame:
    return analyze(corpus, detector="oracle", progress=False).positions()


# ---- (a) coverage -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("max_length", [128, 24])
def test_every_word_once(names_corpus, tokenizer, random_model, max_length):
    df = probe_masked(random_model, tokenizer, names_corpus, positions=_positions(names_corpus),
                      max_length=max_length, progress=False, batch_size=7)
    words = segment_corpus([d.text for d in names_corpus], progress=False)
    assert df.attrs["n_words_without_tokens"] == 0
    assert df["word_row"].tolist() == list(range(len(words)))  # every word exactly once, in corpus order
    assert df["start"].tolist() == words.start.tolist() and df["end"].tolist() == words.end.tolist()
    assert df["original"].tolist() == list(words.vocab[words.term])
    assert list(df.columns[:14]) == ["doc_id", "person_id", "word_row", "start", "end", "original", "predicted",
                                     "correct", "protected", "direct", "indirect", "n_tokens", "top_k",
                                     "pass_index"]
    assert (df["person_id"] == df["doc_id"].map({d.doc_id: d.person_id for d in names_corpus})).all()
    if max_length == 24:
        assert df["chunk"].max() > 0  # several chunks per document
    # passes: ~15% of a chunk's words each, balanced
    assert df["pass_index"].between(0, n_passes(0.15) - 1).all()
    sizes = df.groupby(["doc_id", "chunk", "pass_index"]).size()
    per_chunk = sizes.groupby(["doc_id", "chunk"])
    n_chunk = df.groupby(["doc_id", "chunk"]).size()
    big = n_chunk[n_chunk >= 28].index
    assert (per_chunk.size().loc[big] == 7).all()
    spread = (per_chunk.max() - per_chunk.min()).loc[big]
    assert (spread <= 4).all()  # at most the largest group (a name occurring 4 times)


def test_no_positions(names_corpus, tokenizer, random_model):
    df = probe_masked(random_model, tokenizer, names_corpus, positions=None, progress=False)
    assert not df[["protected", "direct", "indirect"]].to_numpy().any()
    assert len(df) == len(segment_corpus([d.text for d in names_corpus], progress=False))


# ---- (b) protected types share a pass -----------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_protected_type_masked_together(names_corpus, tokenizer, random_model, seed):
    pos = _positions(names_corpus)
    df = probe_masked(random_model, tokenizer, names_corpus, positions=pos, seed=seed, progress=False)
    prot = df[df["direct"]]
    assert len(prot) == 12  # 4 gold names in each of 3 notes
    # every occurrence of the protected type in the chunk, protected or not, is masked in one pass
    names = df[df["original"].isin(["alvarez", "brennan", "castillo"])]
    assert (names.groupby(["doc_id", "chunk", "original"])["pass_index"].nunique() == 1).all()
    assert prot["protected"].all()
    # unprotected repeated words are spread over passes ("with" occurs 8 times per note)
    spread = df[df["original"] == "with"].groupby("doc_id")["pass_index"].nunique()
    assert (spread > 1).all()


def test_positions_of_other_documents_are_ignored(names_corpus, tokenizer, random_model):
    pos = _positions(names_corpus)
    sub = Corpus([names_corpus[0]])
    df = probe_masked(random_model, tokenizer, sub, positions=pos, progress=False)
    full = probe_masked(random_model, tokenizer, names_corpus, positions=pos, progress=False)
    # same passes and predictions for the document whether probed alone or with others
    a = df.drop(columns=["word_row"]).reset_index(drop=True)
    b = full[full["doc_id"] == "d0"].drop(columns=["word_row"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)


def test_assign_passes_balanced():
    rng = np.random.default_rng(0)
    sizes = np.array([5, 1, 1, 3] + [1] * 40)
    p = assign_passes(sizes, 7, rng)
    loads = np.bincount(p, weights=sizes, minlength=7)
    assert loads.sum() == sizes.sum() and loads.max() - loads.min() <= 1
    assert assign_passes(np.ones(3, dtype=int), 7, rng).tolist() in ([0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0],
                                                                       [2, 0, 1], [2, 1, 0])
    assert n_passes(0.15) == 7 and n_passes(0.2) == 5 and n_passes(1.0) == 1


# ---- (c) a model that memorised its sentences ---------------------------------------------------------------------


#: the memoriser trains until its loss with each word masked alone (every word of MEMO a target once, a fixed batch
#: evaluated every CHECK_EVERY steps) is below TARGET_LOSS, at most MAX_STEPS steps. Measured on seeds 0-5: 250-375
#: steps, then the probe recovers every word (1.0); a fixed 300 steps had stopped at 0.79-0.83 on some machines
TARGET_LOSS, MAX_STEPS, CHECK_EVERY = 0.05, 1500, 25


def _train_memoriser(tokenizer, texts, seed=0):
    """A tiny BERT trained on ``texts`` (25% of the words masked per step) until the criterion above is met; returns
    ``(model, criterion loss reached)``."""
    torch.manual_seed(seed)
    model = init_model(tokenizer, TinyModelConfig(hidden_size=64, num_layers=2, num_heads=2, intermediate_size=128,
                                                  max_length=64), seed=seed)
    enc = encode_corpus(texts, tokenizer, max_length=64, progress=False)
    L = max(len(x) for x in enc.input_ids)
    ids = torch.full((len(texts), L), tokenizer.pad_token_id)
    att = torch.zeros((len(texts), L), dtype=torch.long)
    rows = torch.full((len(texts), L), -1)
    for i, (x, r) in enumerate(zip(enc.input_ids, enc.word_row)):
        ids[i, :len(x)], att[i, :len(x)], rows[i, :len(x)] = torch.from_numpy(x), 1, torch.from_numpy(r)
    n_words = int(rows.max()) + 1

    def masked(chosen):
        target = (rows >= 0) & chosen[rows.clamp(min=0)]
        return ids.masked_fill(target, tokenizer.mask_token_id), ids.masked_fill(~target, -100)

    one_word = [masked(torch.arange(n_words) == w) for w in range(n_words)]
    eval_x, eval_labels = torch.cat([x for x, _ in one_word]), torch.cat([y for _, y in one_word])
    keep = (eval_labels != -100).any(1)
    eval_x, eval_labels, eval_att = eval_x[keep], eval_labels[keep], att.repeat(n_words, 1)[keep]
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(seed)
    criterion = float("inf")
    for step in range(1, MAX_STEPS + 1):
        model.train()
        x, labels = masked(torch.rand(n_words, generator=gen) < 0.25)
        loss = model(input_ids=x, attention_mask=att, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % CHECK_EVERY == 0:
            model.eval()
            with torch.no_grad():
                criterion = float(model(input_ids=eval_x, attention_mask=eval_att, labels=eval_labels).loss)
            if criterion < TARGET_LOSS:
                break
    return model.eval(), criterion


@pytest.mark.slow  # trains a tiny BERT until it memorised MEMO (250-375 steps)
def test_memorised_sentences_are_recovered(tokenizer):
    model, criterion = _train_memoriser(tokenizer, MEMO)
    assert criterion < TARGET_LOSS, f"not memorised in {MAX_STEPS} steps (loss {criterion:.3f})"
    corpus = Corpus([make_document(f"m{i}", f"p{i}", t) for i, t in enumerate(MEMO)])
    df = probe_masked(model, tokenizer, corpus, positions=None, progress=False)
    # measured 1.0 (24 of 24 words) once the criterion is met; 0.9 allows two misses
    assert df["correct"].mean() >= 0.9, df[["original", "predicted"]]
    single = df[df["n_tokens"] == 1]
    assert (single["top_k"].map(len) == 5).all()
    assert (single["top_k"].str[0] == single["predicted"].fillna("")).all()
    # the same model, untrained, recovers (almost) nothing
    fresh = init_model(tokenizer, TinyModelConfig(hidden_size=64, num_layers=2, num_heads=2, intermediate_size=128,
                                                  max_length=64), seed=1)
    assert probe_masked(fresh, tokenizer, corpus, positions=None, progress=False)["correct"].mean() < 0.3


# ---- (d) multi-token words and the head-only path -----------------------------------------------------------------


class OracleMLM(torch.nn.Module):
    """A fake masked LM whose arg-max at every position is a token chosen by the test (``answers[input_ids]``
    at unmasked positions does not matter); alternatives are ranked by a fixed random score."""

    def __init__(self, vocab_size: int, answer_of_sequence):
        super().__init__()
        self.dummy = torch.nn.Parameter(torch.zeros(1))
        self.vocab_size = vocab_size
        self.answer_of_sequence = answer_of_sequence
        self.base_scores = torch.rand(vocab_size, generator=torch.Generator().manual_seed(0))

    def forward(self, input_ids, attention_mask=None, **_):
        B, L = input_ids.shape
        logits = self.base_scores.expand(B, L, self.vocab_size).clone()
        answers = torch.stack([self.answer_of_sequence(row) for row in input_ids])  # (B, L)
        logits.scatter_(2, answers[..., None], 10.0)
        return SimpleNamespace(logits=logits)


def test_multi_token_words_are_joined(tokenizer):
    text = "Mr Castirez said Brenillo"
    doc = Corpus([make_document("x", "p", text)])
    pieces = tokenizer.tokenize("Castirez")
    other = tokenizer.tokenize("Brenillo")
    assert len(pieces) >= 2 and len(other) >= 2, (pieces, other)  # the tokenizer splits both names
    original = torch.tensor(tokenizer(text)["input_ids"])
    # answer: the original token everywhere, except that Castirez gets "Brenillo" pieces (padded/cut)
    ans = original.clone()
    a0 = 1 + len(tokenizer.tokenize("Mr"))
    other_ids = tokenizer.convert_tokens_to_ids(other)
    repl = (other_ids + other_ids[-1:] * len(pieces))[:len(pieces)]
    ans[a0:a0 + len(pieces)] = torch.tensor(repl)

    def answer(row):
        out = torch.zeros(len(row), dtype=torch.long)
        out[:len(ans)] = ans[:len(row)]
        return out

    model = OracleMLM(len(tokenizer), answer)
    df = probe_masked(model, tokenizer, doc, positions=None, progress=False)
    by = df.set_index("original")
    assert by.loc["castirez", "n_tokens"] == len(pieces)
    expected = tokenizer.decode(repl).strip().lower()
    assert by.loc["castirez", "predicted"] == expected and " " not in expected  # sub-tokens joined, no "##"
    assert by.loc["brenillo", "predicted"] == "brenillo" and by.loc["brenillo", "correct"]
    assert by.loc["mr", "correct"] and by.loc["said", "correct"]
    assert not by.loc["castirez", "correct"]
    assert by.loc["castirez", "top_k"] == [] and by.loc["brenillo", "top_k"] == []
    for w in ("mr", "said"):
        if by.loc[w, "n_tokens"] == 1:
            alts = by.loc[w, "top_k"]
            assert len(alts) == 5 and alts[0] == w
    assert not df.attrs["head_only"]


def test_head_only_matches_full_logits(names_corpus, tokenizer, random_model, monkeypatch):
    pos = _positions(names_corpus)
    fast = probe_masked(random_model, tokenizer, names_corpus, positions=pos, progress=False)
    assert fast.attrs["head_only"]
    monkeypatch.setattr(pm, "split_lm_head", lambda model: None)
    slow = probe_masked(random_model, tokenizer, names_corpus, positions=pos, progress=False)
    assert not slow.attrs["head_only"]
    pd.testing.assert_frame_equal(fast, slow)


def test_roberta_head(tokenizer):
    from transformers import RobertaConfig, RobertaForMaskedLM

    torch.manual_seed(0)
    model = RobertaForMaskedLM(RobertaConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1,
                                             num_attention_heads=2, intermediate_size=64,
                                             max_position_embeddings=40, pad_token_id=tokenizer.pad_token_id))
    corpus = Corpus([make_document("r", "p", _names_doc(0)[0])])
    fast = probe_masked(model, tokenizer, corpus, positions=None, max_length=512, progress=False)
    # RoBERTa numbers positions from padding_idx + 1: the window is capped at 40 - 1 tokens, so the note is chunked
    assert fast.attrs["head_only"] and fast.attrs["n_chunks"] > 1
    assert fast["predicted"].notna().any()


# ---- (e) determinism ------------------------------------------------------------------------------------------------


def test_deterministic(names_corpus, tokenizer, random_model):
    pos = _positions(names_corpus)
    a = probe_masked(random_model, tokenizer, names_corpus, positions=pos, seed=3, progress=False, batch_size=5)
    b = probe_masked(random_model, tokenizer, names_corpus, positions=pos, seed=3, progress=False, batch_size=64)
    pd.testing.assert_frame_equal(a, b, check_exact=False)
    assert a["predicted"].tolist() == b["predicted"].tolist()
    c = probe_masked(random_model, tokenizer, names_corpus, positions=pos, seed=4, progress=False)
    assert (a["pass_index"] != c["pass_index"]).any()


def test_single_word_passes(names_corpus, tokenizer, random_model):
    df = probe_masked(random_model, tokenizer, Corpus([names_corpus[3]]), positions=None, mask_rate=1e-9,
                      progress=False)
    assert sorted(df["pass_index"]) == list(range(len(df)))  # one word per pass
    assert df.attrs["n_sequences"] == len(df)
