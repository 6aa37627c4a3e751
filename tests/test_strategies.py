"""Strategy data pipeline: pseudonymisation offsets, word-aligned encoding, protected targets (SPEC §3)."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit.corpus import Corpus, make_document
from toolkit.errors import ToolkitError
from toolkit.identifiers import analyze
from toolkit.models import train_tokenizer
from toolkit.strategies import STRATEGIES, get_strategy, pseudonymize, training_examples

TEXTS = ["Mr. Okafor saw Dr. Lindqvist at Saint Mary Hospital on 03/04/2019 for his acromegaly.",
         "Patient Jane Roe, a falconer, takes vemurafenib daily; seen by nurse haugland.",
         "Routine follow-up, no complaints, vitals stable, continue current medications."] * 20


def test_pseudonymize_replaces_spans_and_maps_offsets_back():
    text = "Mr. Okafor saw Dr. Lindqvist today."
    new, origin = pseudonymize(text, [(4, 10), (19, 28)])
    assert new == "Mr. X saw Dr. X today."
    assert len(origin) == len(new)
    # every kept character maps back to the same character of the original
    for i, ch in enumerate(new):
        if ch != "X":
            assert text[origin[i]] == ch
    assert origin[new.index("X")] == 4 and origin[new.rindex("X")] == 19


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet="ab c.", min_size=1, max_size=40), st.data())
def test_pseudonymize_property(text, data):
    cuts = sorted(data.draw(st.sets(st.integers(0, len(text)), max_size=6)))
    spans = [(a, b) for a, b in zip(cuts[::2], cuts[1::2]) if b > a]
    new, origin = pseudonymize(text, spans)
    assert new.count("X") - text.count("X") == len(spans)
    kept = [i for i in range(len(new)) if not any(origin[i] == s for s, _ in spans) or new[i] != "X"]
    assert all(text[origin[i]] == new[i] for i in kept)


def test_overlapping_spans_rejected():
    with pytest.raises(ValueError):
        pseudonymize("abcdef", [(0, 3), (2, 4)])


@pytest.fixture(scope="module")
def setup():
    spans = [[(4, 10, "PATIENT"), (19, 28, "DOCTOR")], [(8, 16, "PATIENT")], []] * 20
    docs = [make_document(f"d{i}", f"p{i % 7}", t, s) for i, (t, s) in enumerate(zip(TEXTS, spans))]
    corpus = Corpus(docs)
    analysis = analyze(corpus, detector="oracle", progress=False)
    return corpus, analysis, train_tokenizer(TEXTS, "mlm", 300), train_tokenizer(TEXTS, "clm", 300)


def test_ppmlm_never_targets_protected_words_but_keeps_them_in_input(setup):
    corpus, analysis, mtok, _ = setup
    pos = analysis.positions()
    ex = training_examples(corpus, mtok, "ppmlm", positions=pos, max_length=64, progress=False)
    text_ids = mtok("Okafor", add_special_tokens=False)["input_ids"]
    flagged = {i for e in ex for i, m in zip(e["input_ids"], e["special_tokens_mask"]) if m}
    unflagged = {i for e in ex for i, m in zip(e["input_ids"], e["special_tokens_mask"]) if not m}
    assert set(text_ids) <= flagged and not set(text_ids) & unflagged  # visible as input, never eligible
    ex_mlm = training_examples(corpus, mtok, "mlm", positions=pos, max_length=64, progress=False)
    eligible_mlm = {i for e in ex_mlm for i, m in zip(e["input_ids"], e["special_tokens_mask"]) if not m}
    assert set(text_ids) <= eligible_mlm


def test_ppclm_labels_protected_tokens_minus_100(setup):
    corpus, analysis, _, ctok = setup
    ex = training_examples(corpus, ctok, "ppclm", positions=analysis.positions(), max_length=64, progress=False)
    e = ex[0]
    toks = ctok.convert_ids_to_tokens(e["input_ids"])
    masked = "".join(t for t, lab in zip(toks, e["labels"]) if lab == -100)
    assert "Okafor" in masked.replace("Ġ", "") and "Lindqvist" in masked.replace("Ġ", "")
    assert len(e["input_ids"]) == len(e["labels"])


def test_pseudo_targets_include_X(setup):
    corpus, analysis, _, ctok = setup
    ex = training_examples(corpus, ctok, "clm_pseudo", positions=None, spans=analysis.span_table(), max_length=64,
                           progress=False)
    x_ids = set(ctok(" X", add_special_tokens=False)["input_ids"]) | set(ctok("X", add_special_tokens=False)["input_ids"])
    assert any(lab in x_ids for e in ex for lab in e["labels"])
    assert all(lab != -100 for e in ex for lab in e["labels"])


def test_strategies_are_data():
    assert set(STRATEGIES) >= {"mlm", "mlm_pseudo", "ppmlm", "dppmlm", "ippmlm", "mlm_dp", "clm", "ppclm"}
    assert get_strategy("dppmlm").protect == ("direct",)
    with pytest.raises(ToolkitError, match="unknown strategy"):
        get_strategy("nope")


def test_protecting_strategy_needs_positions(setup):
    corpus, _, mtok, _ = setup
    with pytest.raises(ToolkitError):
        training_examples(corpus, mtok, "ppmlm", positions=pd.DataFrame(
            {"doc_id": ["zz"], "start": [0], "end": [1], "direct": [True], "indirect": [False]}), max_length=64)
