"""Next-word probe of a causal LM (methods.md §4): fixed-logit predictions, multi-token words, token accuracy, first
occurrences of protected types, memorisation, greedy generation (batched = one by one), regurgitation, determinism."""

from __future__ import annotations

import importlib
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from toolkit import metrics
from toolkit.audit import generate_continuations, probe_causal, regurgitation_rate
from toolkit.audit.hashing import hash_term
from toolkit.corpus import Corpus, make_document
from toolkit.identifiers import segment_corpus
from toolkit.models import TinyModelConfig, init_model, train_tokenizer
from toolkit.strategies import encode_corpus, training_examples

pc = importlib.import_module("toolkit.audit.probe_causal")

MEMO = [
    "the patient takes aspirin every morning with breakfast",
    "doctor smith prescribed insulin for the diabetic patient",
    "the nurse checked blood pressure twice a day",
]
FILLER = "said the patient reports mild pain in the left knee after walking and was advised to rest"


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def _names_text(name: str) -> str:
    return " ".join(f"Mr {name} {FILLER} {j}." for j in range(4))


@pytest.fixture(scope="module")
def tokenizer():
    # names outside the tokenizer's training text are split into several pieces
    return train_tokenizer((MEMO + [_names_text(n) for n in ("Alvarez", "Brennan")]) * 3, "clm", 380)


def _tiny(tokenizer, seed=0, hidden=32, layers=1):
    return init_model(tokenizer, TinyModelConfig(kind="clm", hidden_size=hidden, num_layers=layers, num_heads=2,
                                                 intermediate_size=2 * hidden, max_length=128), seed=seed).eval()


@pytest.fixture(scope="module")
def random_model(tokenizer):
    return _tiny(tokenizer)


# ---- (a) fixed logits -------------------------------------------------------------------------------------------


class FixedCLM(torch.nn.Module):
    """A fake causal LM: for an (unpadded) input sequence in ``table``, the arg-max at position i is ``table[seq][i]``;
    other tokens are ranked by a fixed random score."""

    def __init__(self, vocab_size: int, table: dict[tuple[int, ...], list[int]]):
        super().__init__()
        self.dummy = torch.nn.Parameter(torch.zeros(1))
        self.vocab_size = vocab_size
        self.table = table
        self.base_scores = torch.rand(vocab_size, generator=torch.Generator().manual_seed(0))

    def forward(self, input_ids, attention_mask=None, **_):
        B, L = input_ids.shape
        logits = self.base_scores.expand(B, L, self.vocab_size).clone()
        for j in range(B):
            n = int(attention_mask[j].sum())
            ans = torch.tensor(self.table[tuple(input_ids[j, :n].tolist())])
            logits[j, torch.arange(n), ans] = 10.0
        return SimpleNamespace(logits=logits)


def _word_tokens(tokenizer, text: str) -> tuple[list[int], dict[str, list[int]]]:
    """Token ids of ``text`` and, per word, the positions of its tokens (a token belongs to the word holding its last
    character: byte-level BPE may emit the space as a token of its own)."""
    enc = tokenizer(text, return_offsets_mapping=True)
    out: dict[str, list[int]] = {}
    for s0, e0 in [(m.start(), m.end()) for m in __import__("re").finditer(r"\w+", text)]:
        out[text[s0:e0]] = [i for i, (a, b) in enumerate(enc["offset_mapping"]) if b > a and s0 <= b - 1 < e0]
    return enc["input_ids"], out


def _fixed_setup(tokenizer):
    text = "Mr Castirez said Brenillo"
    ids, pos = _word_tokens(tokenizer, text)
    n_c, n_b = len(pos["Castirez"]), len(pos["Brenillo"])
    assert n_c >= 2 and n_b >= 2, pos  # both names are split
    assert pos["Mr"] == [0]
    # wanted prediction for every token: the original, except Castirez -> Brenillo's pieces, said -> "the"
    want = list(ids)
    bren = [ids[i] for i in pos["Brenillo"]]
    for i, t in zip(pos["Castirez"], (bren + bren[-1:] * n_c)[:n_c]):
        want[i] = t
    assert len(pos["said"]) == 1
    want[pos["said"][0]] = tokenizer.convert_tokens_to_ids("Ġthe")
    eos = tokenizer.eos_token_id
    table = {tuple(ids): want[1:] + [0],  # position i predicts token i + 1
             tuple([eos] + ids): want + [0]}  # with BOS: position i predicts content token i
    model = FixedCLM(len(tokenizer), table)
    doc = Corpus([make_document("x", "p", text)])
    expected_castirez = tokenizer.decode([want[i] for i in pos["Castirez"]]).strip().lower()
    return model, doc, n_c, n_b, expected_castirez


@pytest.mark.parametrize("add_bos", [False, True])
def test_fixed_logits(tokenizer, add_bos):
    model, doc, n_c, n_b, expected = _fixed_setup(tokenizer)
    df = probe_causal(model, tokenizer, doc, positions=None, progress=False, add_bos=add_bos)
    by = df.set_index("original")
    # the first word has no preceding token unless a BOS token is put first
    assert ("mr" in by.index) == add_bos
    assert df.attrs["n_words_unpredicted"] == (0 if add_bos else 1)
    assert df.attrs["context"] == ("bos" if add_bos else "none")
    if add_bos:
        assert by.loc["mr", "correct"] and by.loc["mr", "predicted"] == "mr"
    assert by.loc["castirez", "n_tokens"] == n_c and by.loc["brenillo", "n_tokens"] == n_b
    assert by.loc["castirez", "predicted"] == expected and " " not in expected and expected.startswith("bren")
    assert not by.loc["castirez", "correct"] and by.loc["castirez", "n_tokens_correct"] == 0
    assert by.loc["said", "predicted"] == "the" and not by.loc["said", "correct"]
    assert by.loc["brenillo", "predicted"] == "brenillo" and by.loc["brenillo", "correct"]
    assert by.loc["brenillo", "n_tokens_correct"] == n_b
    assert by.loc["said", "top_k"][0] == "the" and len(by.loc["said", "top_k"]) == 5
    assert by.loc["castirez", "top_k"] == []
    # token accuracy over tokens of non-protected words: only Brenillo's tokens (and Mr's, with BOS) are right
    n_mr = 1 if add_bos else 0
    assert df.attrs["n_tokens_scored"] == n_mr + n_c + 1 + n_b
    assert df.attrs["token_accuracy"] == pytest.approx((n_mr + n_b) / (n_mr + n_c + 1 + n_b))
    assert (df["pass_index"] == 0).all() and (df["chunk"] == 0).all() and df["counted"].all()
    assert list(df.columns) == pc.COLUMNS and not df.attrs["head_only"]
    # the frame feeds toolkit.metrics unchanged
    rep = metrics.privacy_report(df, {"brenillo"}, set())
    assert rep["utility"] == pytest.approx(df["correct"].mean())
    assert rep["direct_privacy"] == 0.0


@pytest.mark.parametrize("max_length", [128, 9])
def test_every_word_once(tokenizer, random_model, max_length):
    corpus = Corpus([make_document(f"d{i}", f"p{i}", t) for i, t in enumerate(MEMO + [_names_text("Alvarez")])])
    words = segment_corpus([d.text for d in corpus], progress=False)
    for add_bos in (False, True):
        df = probe_causal(random_model, tokenizer, corpus, positions=None, max_length=max_length, add_bos=add_bos,
                          progress=False, batch_size=3)
        n_un = df.attrs["n_words_unpredicted"]
        assert df.attrs["n_words_without_tokens"] == 0 and df.attrs["n_uncounted"] == 0
        assert len(df) + n_un == len(words) and df["word_row"].is_monotonic_increasing
        assert df["original"].tolist() == list(words.vocab[words.term[df["word_row"].to_numpy()]])
        if add_bos:
            assert n_un == 0  # BOS before each document, the previous chunk's last token before each later chunk
        else:
            # the first word of every chunk is not predicted (chunks as the toolkit's training builds them)
            enc = encode_corpus([d.text for d in corpus], tokenizer, max_length=max_length, progress=False)
            assert n_un == sum(int(r[0] >= 0) for r in enc.word_row) and df.attrs["n_chunks"] == len(enc)
        if max_length == 9:
            assert df["chunk"].max() > 3


def test_head_only_matches_full_logits(tokenizer, random_model, monkeypatch):
    corpus = Corpus([make_document(f"d{i}", f"p{i}", t) for i, t in enumerate(MEMO + [_names_text("Brennan")])])
    fast = probe_causal(random_model, tokenizer, corpus, positions=None, progress=False, max_length=20)
    assert fast.attrs["head_only"]
    monkeypatch.setattr(pc, "split_lm_head", lambda model: None)
    slow = probe_causal(random_model, tokenizer, corpus, positions=None, progress=False, max_length=20)
    assert not slow.attrs["head_only"]
    pd.testing.assert_frame_equal(fast, slow)
    assert fast.attrs["token_accuracy"] == slow.attrs["token_accuracy"]


# ---- (b) protected types: first occurrence per document -----------------------------------------------------------


def _name_positions(corpus: Corpus, name: str, doc_id: str, which: list[int]) -> pd.DataFrame:
    text = next(d.text for d in corpus if d.doc_id == doc_id)
    starts, i = [], text.find(name)
    while i >= 0:
        starts.append(i)
        i = text.find(name, i + 1)
    return pd.DataFrame({"doc_id": doc_id, "start": [starts[k] for k in which],
                         "end": [starts[k] + len(name) for k in which], "direct": True, "indirect": False})


def test_first_occurrence_of_protected_types(tokenizer, random_model):
    corpus = Corpus([make_document("d0", "p0", _names_text("Alvarez")),
                     make_document("d1", "p1", _names_text("Brennan")),
                     make_document("d2", "p0", "Brief note: Alvarez seen, Alvarez fine.")])
    # d0: the 2nd and 4th Alvarez are protected (not the 1st); d1: all four Brennan; d2: nothing
    pos = pd.concat([_name_positions(corpus, "Alvarez", "d0", [1, 3]),
                     _name_positions(corpus, "Brennan", "d1", [0, 1, 2, 3])], ignore_index=True)
    full = probe_causal(random_model, tokenizer, corpus, positions=pos, progress=False, include_uncounted=True)
    df = probe_causal(random_model, tokenizer, corpus, positions=pos, progress=False)
    names = full[full["original"].isin(["alvarez", "brennan"])]
    counted = names.groupby("doc_id")["counted"].agg(list).to_dict()
    assert counted == {"d0": [True, False, False, False], "d1": [True, False, False, False], "d2": [True, True]}
    # the first Alvarez of d0 counts although it is not itself protected; unprotected types are all counted
    first = names[names["doc_id"] == "d0"].iloc[0]
    assert first["counted"] and not first["protected"]
    assert full.loc[~full["original"].isin(["alvarez", "brennan"]), "counted"].all()
    assert full["protected"].sum() == 6 and full.loc[full["protected"], "direct"].all()
    # default: later occurrences dropped, their number in attrs, the rest identical
    assert df.attrs["n_uncounted"] == full.attrs["n_uncounted"] == 6 and len(df) == len(full) - 6
    pd.testing.assert_frame_equal(df, full[full["counted"]].reset_index(drop=True))
    assert df.attrs["token_accuracy"] == full.attrs["token_accuracy"]
    # "mr" is never protected: all its occurrences count, but the first word of a document has no prediction
    assert (df["original"] == "mr").sum() == 8 - 2 and df.attrs["n_words_unpredicted"] == 3


# ---- (c) a model that memorised its sentences -----------------------------------------------------------------------


def _train_memoriser(tokenizer, corpus, steps=200, seed=0):
    """Plain CLM training on the toolkit's own examples (no BOS token: documents start at position 0)."""
    torch.manual_seed(seed)
    model = _tiny(tokenizer, seed=seed, hidden=64, layers=2)
    ex = training_examples(corpus, tokenizer, "clm", positions=None, max_length=64, progress=False)
    L = max(len(e["input_ids"]) for e in ex)
    ids = torch.full((len(ex), L), tokenizer.pad_token_id)
    labels = torch.full((len(ex), L), -100)
    att = torch.zeros((len(ex), L), dtype=torch.long)
    for i, e in enumerate(ex):
        n = len(e["input_ids"])
        ids[i, :n], labels[i, :n], att[i, :n] = torch.tensor(e["input_ids"]), torch.tensor(e["labels"]), 1
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(steps):
        loss = model(input_ids=ids, attention_mask=att, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()


@pytest.fixture(scope="module")
def memo_corpus():
    return Corpus([make_document(f"m{i}", f"p{i}", t) for i, t in enumerate(MEMO)])


@pytest.fixture(scope="module")
def memoriser(tokenizer, memo_corpus):
    return _train_memoriser(tokenizer, memo_corpus)


@pytest.mark.slow
def test_memorised_sentences_are_recovered(tokenizer, memo_corpus, memoriser, random_model):
    df = probe_causal(memoriser, tokenizer, memo_corpus, positions=None, progress=False)
    assert df["correct"].mean() >= 0.8, df[["original", "predicted"]]
    assert df.attrs["token_accuracy"] >= 0.8
    fresh = probe_causal(random_model, tokenizer, memo_corpus, positions=None, progress=False)
    assert fresh["correct"].mean() < 0.3 and fresh.attrs["token_accuracy"] < 0.3


@pytest.mark.slow
def test_generation_regurgitates(tokenizer, memoriser):
    out = generate_continuations(memoriser, tokenizer, ["the patient takes", "doctor smith", "the nurse checked"],
                                 max_new_tokens=24, progress=False)
    assert out[0].startswith(" aspirin every morning"), out
    assert out[1].startswith(" prescribed insulin for the diabetic"), out
    assert out[2].startswith(" blood pressure twice"), out


@pytest.mark.parametrize("which", [pytest.param("memoriser", marks=pytest.mark.slow), "random"])
def test_batched_generation_equals_one_by_one(tokenizer, random_model, which, request):
    model = request.getfixturevalue("memoriser") if which == "memoriser" else random_model  # trained: slow
    prompts = ["the patient takes", "doctor", "the nurse checked blood pressure", "Mr Alvarez said the patient",
               "smith prescribed", "a"]
    batched = generate_continuations(model, tokenizer, prompts, max_new_tokens=20, batch_size=4, progress=False)
    single = [generate_continuations(model, tokenizer, [p], max_new_tokens=20, batch_size=1, progress=False)[0]
              for p in prompts]
    assert batched == single
    assert tokenizer.padding_side == "right"  # the tokenizer is left as it was
    assert generate_continuations(model, tokenizer, [], progress=False) == []


@pytest.mark.slow
def test_regurgitation_rate(tokenizer, memo_corpus, memoriser, random_model):
    ids = {"Insulin", "aspirin", "pressure", "patient", "nowhere"}
    rep = regurgitation_rate(memoriser, tokenizer, memo_corpus, ids, prefix_tokens=4, max_new_tokens=24,
                             progress=False, hash_key=b"k" * 32)
    # 4-token prompts cut back to whole words: "the patient takes", "doctor", "the nurse"; targets after them:
    # aspirin (m0: "patient" is only in the prompt), insulin + patient (m1), pressure (m2)
    assert rep["n_documents"] == 3 and rep["n_prompted"] == 3 and rep["n_excluded_in_prompt"] == 0
    assert rep["n_identifier_occurrences"] == 4 and rep["n_reproduced"] == 4 and rep["share_reproduced"] == 1.0
    assert len(rep["examples_hashed"]) == 4 and all(len(h) == 12 for h in rep["examples_hashed"])
    assert hash_term("insulin", b"k" * 32) in rep["examples_hashed"] and "insulin" not in str(rep)
    rnd = regurgitation_rate(random_model, tokenizer, memo_corpus, ids, prefix_tokens=4, max_new_tokens=24,
                             progress=False)
    assert rnd["n_identifier_occurrences"] == 4 and rnd["share_reproduced"] < 0.5
    none = regurgitation_rate(memoriser, tokenizer, memo_corpus, {"nowhere"}, progress=False)
    assert none["n_prompted"] == 0 and none["share_reproduced"] is None and none["n_identifier_occurrences"] == 0
    # a type already in the prompt is no target (it could be copied)
    rep = regurgitation_rate(random_model, tokenizer, Corpus([make_document("a", "p", "Alvarez said, Alvarez agreed")]),
                             {"alvarez"}, prefix_tokens=1, progress=False)
    assert rep["n_excluded_in_prompt"] == 1 and rep["n_prompted"] == 0


# ---- (d) determinism ------------------------------------------------------------------------------------------------


def test_deterministic(tokenizer, random_model):
    corpus = Corpus([make_document(f"d{i}", f"p{i}", t) for i, t in enumerate(MEMO + [_names_text("Alvarez")])])
    pos = _name_positions(corpus, "Alvarez", "d3", [0, 1, 2, 3])
    a = probe_causal(random_model, tokenizer, corpus, positions=pos, progress=False, batch_size=1, max_length=24)
    b = probe_causal(random_model, tokenizer, corpus, positions=pos, progress=False, batch_size=64, max_length=24)
    c = probe_causal(random_model, tokenizer, corpus, positions=pos, progress=False, batch_size=64, max_length=24)
    pd.testing.assert_frame_equal(a, b)
    pd.testing.assert_frame_equal(b, c)
    assert a.attrs == b.attrs
    # a document's predictions do not depend on the documents probed with it
    alone = probe_causal(random_model, tokenizer, Corpus([corpus[3]]), positions=pos, progress=False, max_length=24)
    assert alone["predicted"].tolist() == b.loc[b["doc_id"] == "d3", "predicted"].tolist()
