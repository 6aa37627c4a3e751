"""The masked-LM collator (methods.md §3): protected whole-word masking, 15% of eligible words, 80/10/10 per token."""

from __future__ import annotations

import copy
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolkit.corpus import load_corpus
from toolkit.identifiers import analyze
from toolkit.io import atomic_write_parquet
from toolkit.models import train_tokenizer
from toolkit.strategies import training_examples
from toolkit.strategies.encoding import encode_corpus
from toolkit.strategies.masked import ProtectedWholeWordCollator, masked_lm_collator

NOTES = Path(__file__).resolve().parents[1] / "data_samples" / "clinical" / "notes.jsonl"


@lru_cache(maxsize=None)
def corpus():
    return load_corpus(NOTES)


@lru_cache(maxsize=None)
def tokenizer(padding_side: str = "right"):
    if padding_side != "right":
        tok = copy.deepcopy(tokenizer("right"))
        tok.padding_side = padding_side
        return tok
    return train_tokenizer([d.text for d in corpus().filter(split="public")], "mlm", 1000)


def plain_ids(tok) -> np.ndarray:
    """Ids of the non-special tokens."""
    return np.setdiff1d(np.arange(len(tok)), tok.all_special_ids)


# -- synthetic documents ---------------------------------------------------------------------------------------------

@st.composite
def documents(draw, plain: np.ndarray):
    """One chunk: [CLS] (word | gap)* [SEP]; a word is 1-4 tokens, protected (all tokens flagged), partially
    flagged (some token flagged: not eligible either) or free; gaps are tokens outside words (flagged)."""
    ids, smask, wids = [2], [1], [-1]
    word = 0
    for _ in range(draw(st.integers(0, 25))):
        if draw(st.integers(0, 5)) == 0:  # a token outside words (punctuation)
            ids.append(int(plain[draw(st.integers(0, len(plain) - 1))]))
            smask.append(1)
            wids.append(-1)
            continue
        n = draw(st.integers(1, 4))
        kind = draw(st.sampled_from(["free", "free", "protected", "partial"]))
        flags = [1] * n if kind == "protected" else [0] * n
        if kind == "partial":
            flags[draw(st.integers(0, n - 1))] = 1
        for f in flags:
            ids.append(int(plain[draw(st.integers(0, len(plain) - 1))]))
            smask.append(f)
            wids.append(word)
        word += 1
    ids.append(3)
    smask.append(1)
    wids.append(-1)
    return {"input_ids": ids, "special_tokens_mask": smask, "word_ids": wids}


PLAIN = None


def _plain():
    global PLAIN
    if PLAIN is None:
        PLAIN = plain_ids(tokenizer())
    return PLAIN


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), side=st.sampled_from(["right", "left"]), multiple=st.sampled_from([None, 8]),
       probability=st.sampled_from([0.15, 0.5, 1.0]), seed=st.integers(0, 2**31 - 1),
       global_ids=st.booleans())
def test_never_targets_flagged_tokens_and_masks_whole_words(data, side, multiple, probability, seed, global_ids):
    tok = tokenizer(side)
    docs = data.draw(st.lists(documents(_plain()), min_size=1, max_size=6))
    if global_ids:  # corpus-wide word numbers instead of chunk-local ones are accepted too
        docs = [{**d, "word_ids": [w + 10_000 * (i + 1) if w >= 0 else -1 for w in d["word_ids"]]}
                for i, d in enumerate(docs)]
    coll = masked_lm_collator(tok, seed=seed, mlm_probability=probability, pad_to_multiple_of=multiple)
    batch = coll(copy.deepcopy(docs))
    inputs, labels, attention = batch["input_ids"], batch["labels"], batch["attention_mask"]
    width = inputs.shape[1]
    assert multiple is None or width % multiple == 0
    assert set(batch) == {"input_ids", "attention_mask", "labels"}
    mask_id, specials = tok.mask_token_id, set(tok.all_special_ids)
    for row, d in enumerate(docs):
        n = len(d["input_ids"])
        sl = slice(0, n) if side == "right" else slice(width - n, width)
        pad = torch.ones(width, dtype=torch.bool)
        pad[sl] = False
        assert (labels[row][pad] == -100).all(), "padding is never a target"
        assert (attention[row][pad] == 0).all() and (attention[row][sl] == 1).all()
        lab, inp = labels[row][sl].tolist(), inputs[row][sl].tolist()
        orig, flags, wids = d["input_ids"], d["special_tokens_mask"], d["word_ids"]
        target = [x != -100 for x in lab]
        for i in range(n):
            if target[i]:
                assert flags[i] == 0 and wids[i] >= 0, "a flagged token or a token outside words was chosen"
                assert lab[i] == orig[i]
                assert inp[i] == orig[i] or inp[i] == mask_id or inp[i] not in specials
            else:
                assert inp[i] == orig[i], "only targets are replaced"
        for w in set(wids) - {-1}:
            toks = [i for i in range(n) if wids[i] == w]
            chosen = {target[i] for i in toks}
            assert len(chosen) == 1, "a word is chosen with all its tokens or not at all"
            if any(flags[i] for i in toks):
                assert chosen == {False}
            elif probability == 1.0:
                assert chosen == {True}, "with probability 1 every eligible word is chosen"


# -- rates -----------------------------------------------------------------------------------------------------------

def synthetic_batch(n_examples: int = 80, words_per_example: int = 250, seed: int = 0):
    """Chunks of free words (1-3 tokens) and protected words (every 4th word), with gaps; ~20k eligible words."""
    rng = np.random.default_rng(seed)
    plain = _plain()
    examples, eligible = [], 0
    for _ in range(n_examples):
        ids, smask, wids = [2], [1], [-1]
        for w in range(words_per_example):
            n = int(rng.integers(1, 4))
            prot = w % 4 == 3
            eligible += not prot
            ids += rng.choice(plain, n).tolist()
            smask += [int(prot)] * n
            wids += [w] * n
            if rng.random() < 0.2:
                ids.append(int(rng.choice(plain)))
                smask.append(1)
                wids.append(-1)
        examples.append({"input_ids": ids + [3], "special_tokens_mask": smask + [1], "word_ids": wids + [-1]})
    return examples, eligible


def test_rates_of_word_choice_and_replacement():
    examples, eligible = synthetic_batch()
    assert eligible >= 15_000
    coll = ProtectedWholeWordCollator(tokenizer=tokenizer(), seed=1234)
    batch = coll(copy.deepcopy(examples))
    labels, inputs = batch["labels"], batch["input_ids"]
    chosen_words = 0
    for row, ex in enumerate(examples):
        n = len(ex["input_ids"])
        wids = torch.tensor(ex["word_ids"])
        target = labels[row, :n] != -100
        chosen_words += len(torch.unique(wids[target]))
        assert not (target & (torch.tensor(ex["special_tokens_mask"]) == 1)).any()
    assert abs(chosen_words / eligible - 0.15) <= 0.01
    target = labels != -100
    orig = labels[target]
    new = inputs[target]
    n = int(target.sum())
    masked = (new == tokenizer().mask_token_id).float().mean().item()
    unchanged = (new == orig).float().mean().item()
    random = ((new != orig) & (new != tokenizer().mask_token_id)).float().mean().item()
    assert n > 4000
    assert abs(masked - 0.8) <= 0.02
    assert abs(random - 0.1) <= 0.02
    assert abs(unchanged - 0.1) <= 0.02
    assert not set(new[(new != orig) & (new != tokenizer().mask_token_id)].tolist()) & set(tokenizer().all_special_ids)


def test_replacement_probabilities_are_configurable():
    examples, _ = synthetic_batch(n_examples=10, seed=3)
    batch = masked_lm_collator(tokenizer(), seed=0, mlm_probability=0.5, mask_replace_prob=1.0,
                               random_replace_prob=0.0)(copy.deepcopy(examples))
    target = batch["labels"] != -100
    assert target.any() and (batch["input_ids"][target] == tokenizer().mask_token_id).all()
    batch = masked_lm_collator(tokenizer(), seed=0, mlm_probability=0.0)(copy.deepcopy(examples))
    assert (batch["labels"] == -100).all()


# -- randomness ------------------------------------------------------------------------------------------------------

def test_seeded_draws_are_reproducible_and_fresh_per_call():
    examples, _ = synthetic_batch(n_examples=8, words_per_example=60, seed=5)
    a, b = masked_lm_collator(tokenizer(), seed=7), masked_lm_collator(tokenizer(), seed=7)
    first = [a(copy.deepcopy(examples)) for _ in range(3)]
    second = [b(copy.deepcopy(examples)) for _ in range(3)]
    for x, y in zip(first, second):
        assert torch.equal(x["labels"], y["labels"]) and torch.equal(x["input_ids"], y["input_ids"])
    # every call (every epoch) draws afresh
    assert not torch.equal(first[0]["labels"], first[1]["labels"])
    assert not torch.equal(first[1]["labels"], first[2]["labels"])
    other = masked_lm_collator(tokenizer(), seed=8)(copy.deepcopy(examples))
    assert not torch.equal(other["labels"], first[0]["labels"])
    # without a seed the global torch RNG is used
    torch.manual_seed(0)
    u = masked_lm_collator(tokenizer())(copy.deepcopy(examples))
    torch.manual_seed(0)
    v = masked_lm_collator(tokenizer())(copy.deepcopy(examples))
    assert torch.equal(u["labels"], v["labels"])


def test_dataloader_workers_draw_afresh_every_epoch():
    examples, _ = synthetic_batch(n_examples=16, words_per_example=30, seed=9)

    def epochs(n: int) -> list[torch.Tensor]:
        torch.manual_seed(0)  # the DataLoader draws its worker seeds from the global RNG
        loader = torch.utils.data.DataLoader(examples, batch_size=4, num_workers=2,
                                             collate_fn=masked_lm_collator(tokenizer(), seed=5))
        return [torch.cat([b["labels"].flatten() for b in loader]) for _ in range(n)]

    first, second = epochs(2), epochs(2)
    assert not torch.equal(first[0], first[1]), "a new draw every epoch, also in worker processes"
    assert all(torch.equal(a, b) for a, b in zip(first, second)), "reproducible given the seeds"


def test_invalid_input_and_configuration():
    tok = tokenizer()
    ex = {"input_ids": [2, 10, 3], "special_tokens_mask": [1, 0, 1], "word_ids": [-1, 0, -1]}
    coll = masked_lm_collator(tok, seed=0)
    with pytest.raises(ValueError, match="word_ids"):
        coll([{k: v for k, v in ex.items() if k != "word_ids"}])
    with pytest.raises(ValueError, match="special_tokens_mask"):
        coll([{k: v for k, v in ex.items() if k != "special_tokens_mask"}])
    with pytest.raises(ValueError, match="length"):
        coll([{**ex, "special_tokens_mask": [1, 0]}])
    with pytest.raises(ValueError, match="length"):
        coll([{**ex, "word_ids": [-1, 0]}])
    with pytest.raises(ValueError, match="'pt'"):
        ProtectedWholeWordCollator(tokenizer=tok, return_tensors="np")
    with pytest.raises(ValueError):  # inherited validation
        ProtectedWholeWordCollator(tokenizer=tok, mask_replace_prob=0.9, random_replace_prob=0.2)
    with pytest.raises(ValueError):
        ProtectedWholeWordCollator(tokenizer=tok, mlm_probability=1.5)
    with pytest.raises(TypeError):  # always masked LM, never HF's offset-based whole-word path
        ProtectedWholeWordCollator(tokenizer=tok, whole_word_mask=True)
    no_mask = train_tokenizer(["a b c"], "clm", 300)
    with pytest.raises(ValueError, match="mask token"):
        ProtectedWholeWordCollator(tokenizer=no_mask)


# -- end to end on the clinical sample --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def clinical(tmp_path_factory):
    train = corpus().filter(split="train")
    docs = list(train)[:200]
    from toolkit.corpus import Corpus

    train = Corpus(docs)
    result = analyze(train, detector="oracle", progress=False)
    path = tmp_path_factory.mktemp("identifiers") / "positions.parquet"
    atomic_write_parquet(result.positions(), path)
    positions = pd.read_parquet(path)
    assert len(positions) > 0 and positions["direct"].any() and positions["indirect"].any()
    return train, positions


def targets_at_protected_positions(train, positions, strategy: str, epochs: int = 3) -> tuple[int, int]:
    """(targets at protected words, all target words) over ``epochs`` passes, checking that every target word
    decodes to its text in the document."""
    tok = tokenizer()
    texts = [d.text for d in train]
    examples = training_examples(train, tok, strategy, positions=positions, max_length=128, progress=False)
    enc = encode_corpus(texts, tok, max_length=128, progress=False)
    assert len(enc) == len(examples)
    protected = {(d, s) for d, s in zip(positions["doc_id"], positions["start"])}
    w = enc.words
    coll = masked_lm_collator(tok, seed=11)
    at_protected = total = 0
    for _ in range(epochs):
        for b0 in range(0, len(examples), 16):
            batch = coll(copy.deepcopy(examples[b0:b0 + 16]))
            for j, labels in enumerate(batch["labels"]):
                c = b0 + j
                assert enc.input_ids[c].tolist() == examples[c]["input_ids"]
                n = len(enc.input_ids[c])
                target = (labels[:n] != -100).numpy()
                rows = enc.word_row[c]
                assert (rows[target] >= 0).all()
                doc = train[int(enc.chunk_doc[c])]
                for row in np.unique(rows[target]):
                    toks = rows == row
                    assert target[toks].all(), "all sub-tokens of a chosen word are targets"
                    text = doc.text[w.start[row]:w.end[row]]
                    decoded = tok.decode(labels[:n][torch.from_numpy(toks)].tolist())
                    if tok.unk_token not in decoded:
                        assert decoded == text
                    total += 1
                    at_protected += (doc.doc_id, int(w.start[row])) in protected
    return at_protected, total


def test_ppmlm_never_targets_protected_words_on_clinical_notes(clinical):
    train, positions = clinical
    at_protected, total = targets_at_protected_positions(train, positions, "ppmlm")
    assert total > 1000
    assert at_protected == 0


def test_mlm_does_target_protected_words_on_clinical_notes(clinical):
    train, positions = clinical
    at_protected, total = targets_at_protected_positions(train, positions, "mlm", epochs=1)
    assert total > 1000
    assert at_protected > 50
