"""The masked-LM tokenizer: the vocabulary of ``tokenizers``' WordPiece trainer, the same in every process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

from toolkit.models import train_tokenizer

ROOT = Path(__file__).resolve().parents[1]
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

# Prints the vocabulary (piece -> id) a fresh process learns from the first 80 public notes of the sample.
CHILD = """
import json, sys
from toolkit.corpus import load_corpus
from toolkit.models import train_tokenizer
notes = load_corpus(sys.argv[1]).filter(split="public")[:80]
print(json.dumps(train_tokenizer((d.text for d in notes), sys.argv[2], 600).get_vocab(), sort_keys=True))
"""


def _library_vocab(texts, vocab_size):
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=False, strip_accents=False, clean_text=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(texts, trainer=trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=SPECIALS))
    return tok


@pytest.mark.slow  # spawns processes (6 s)
def test_masked_tokenizer_is_the_same_in_every_process():
    """WordPieceTrainer itself gives another vocabulary in each process (huggingface/tokenizers #1794): with it, the
    three processes below disagree (checked when this test was written); with ours they agree, ids included."""
    notes = str(ROOT / "data_samples/clinical/notes.jsonl")
    vocabs = [subprocess.run([sys.executable, "-c", CHILD, notes, "mlm"], capture_output=True, text=True, check=True,
                             cwd=ROOT).stdout for _ in range(3)]
    assert len(json.loads(vocabs[0])) == 600
    assert vocabs[1] == vocabs[0] and vocabs[2] == vocabs[0]


def test_masked_tokenizer_learns_what_wordpiece_trainer_learns_when_no_merge_ties():
    """Words of at most four letters, no letter in two places, counts 1, 3, 9, 27, 81: the only equal counts are a
    word's own pairs, and the library breaks those by the first symbol (word-initial, then ``##``, then merged)
    whatever its hash order, so its trainer has one answer here: the same pieces, and the same split of every word.
    (Longer words tie two ``##`` symbols, whose order is the hash order the library gets wrong.)"""
    words = ["abcd", "efgh", "ijkl", "mnop", "qrst"]
    texts = [" ".join([w] * 3 ** i) for i, w in enumerate(words)]
    for size in (48, 60):
        ours, lib = train_tokenizer(texts, "mlm", size), _library_vocab(texts, size)
        assert set(ours.get_vocab()) == set(lib.get_vocab())
        for text in (*words, "abcdefgh qrs tsrq", "mnopq x"):
            assert ours.tokenize(text) == lib.encode(text, add_special_tokens=False).tokens
        assert [ours.convert_ids_to_tokens(i) for i in range(5)] == SPECIALS


def test_masked_tokenizer_round_trips_and_marks_continuations():
    texts = ["Dr. Ødegård saw Mrs Nakamura-Ortiz on 12/03/2021 at St Mary's.", "Ødegård and Nakamura again"] * 5
    tok = train_tokenizer(texts, "mlm", 120)
    vocab = tok.get_vocab()
    assert "Ø" in vocab and "##å" in vocab and "[UNK]" not in tok.tokenize(texts[0])
    decoded = tok.decode(tok(texts[0])["input_ids"], skip_special_tokens=True)
    assert decoded.replace(" ", "") == texts[0].replace(" ", "")
    assert all(not any(0xF0000 <= ord(c) for c in piece) for piece in vocab)  # no private-use spelling leaks out
