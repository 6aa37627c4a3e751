"""Strategy data pipeline: pseudonymisation offsets, word-aligned encoding, protected targets (methods.md §3)."""

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
    assert set(STRATEGIES) >= {"mlm", "mlm_pseudo", "ppmlm", "dppmlm", "ippmlm", "mlm_dp", "clm", "ppclm",
                               "ppmlm_surrogate", "ppclm_surrogate", "ppmlm_category", "ppclm_category"}
    assert get_strategy("dppmlm").protect == ("direct",)
    with pytest.raises(ToolkitError, match="unknown strategy"):
        get_strategy("nope")


def test_protecting_strategy_needs_positions(setup):
    corpus, _, mtok, _ = setup
    with pytest.raises(ToolkitError):
        training_examples(corpus, mtok, "ppmlm", positions=pd.DataFrame(
            {"doc_id": ["zz"], "start": [0], "end": [1], "direct": [True], "indirect": [False]}), max_length=64)


# ---- tokens that span two words (SentencePiece / Unigram without whitespace pre-splitting) ---------------------------

SURNAMES = ["Okafor", "Lindgren", "Haugland", "Marchetti", "Nakamura", "Oyelaran", "Brennan", "Castellanos"]
RARE = ["acromegaly", "vemurafenib", "falconry", "sarcoidosis", "porphyria", "amyloidosis", "beekeeping",
        "glassblowing"]
TEMPLATES = ["Mr. {s} saw the nurse about his {c} today.", "Patient {s} reports that {c} is worse; seen by the team.",
             "Follow-up for {s} in two weeks, {c} stable.", "{s} called the clinic about {c} and the new dose."]
SPECIALS = ["<unk>", "[PAD]", "[CLS]", "[SEP]", "[MASK]"]


def _span_corpus() -> Corpus:
    """48 notes of 8 patients: the surname is a gold PII span (direct), the rare word is used by one patient only
    (indirect at k = 2)."""
    import random

    rng, docs = random.Random(0), []
    for i in range(48):
        p = i % 8
        text = " ".join(rng.choice(TEMPLATES).format(s=SURNAMES[p], c=RARE[p]) for _ in range(3))
        spans, at = [], text.find(SURNAMES[p])
        while at >= 0:
            spans.append((at, at + len(SURNAMES[p]), "PATIENT"))
            at = text.find(SURNAMES[p], at + 1)
        docs.append(make_document(f"d{i}", f"p{p}", text, spans))
    return Corpus(docs)


def _sentencepiece_tokenizer(model: str, texts: list[str], vocab_size: int, *, mlm: bool):
    """A SentencePiece-style tokenizer trained offline: Metaspace with ``split=False`` (no pre-splitting on
    whitespace, so pieces such as ``"r▁saw"`` cross word boundaries) and a Unigram or BPE model."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    if model == "unigram":
        tok = Tokenizer(models.Unigram())
        trainer = trainers.UnigramTrainer(vocab_size=vocab_size, special_tokens=SPECIALS, unk_token="<unk>",
                                          max_piece_length=12)
    else:
        tok = Tokenizer(models.BPE(unk_token="<unk>"))
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS)
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=False)
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always", split=False)
    tok.train_from_iterator(texts, trainer)
    if mlm:
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", special_tokens=[("[CLS]", tok.token_to_id("[CLS]")),
                                                     ("[SEP]", tok.token_to_id("[SEP]"))])
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]")


@pytest.fixture(scope="module")
def spanning():
    corpus = _span_corpus()
    analysis = analyze(corpus, detector="oracle", k=2, progress=False)
    texts = [d.text for d in corpus]
    return corpus, analysis, {model: {kind: _sentencepiece_tokenizer(model, texts, size, mlm=kind == "mlm")
                                      for kind in ("mlm", "clm")}
                              for model, size in (("unigram", 100), ("bpe", 300))}


def _overlaps(span: tuple[int, int], words: list[tuple[int, int]]) -> bool:
    s, e = span
    return e > s and any(a < e and b > s for a, b in words)


@pytest.mark.parametrize("model", ["unigram", "bpe"])
def test_spanning_tokens_exist_and_end_outside_protected_words(spanning, model):
    """Precondition of the test below (so that it can fail): the tokenizers make tokens that overlap a protected
    word but end outside it (the rule 'a token belongs to the word of its last character' let them through)."""
    corpus, analysis, toks = spanning
    escaping = 0
    for i, d in enumerate(corpus):
        prot = analysis.protected_spans(i, "all")
        for s, e in toks[model]["clm"](d.text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]:
            if _overlaps((s, e), prot) and not any(a <= e - 1 < b for a, b in prot):
                escaping += 1
    assert escaping > 0


@pytest.mark.parametrize("model", ["unigram", "bpe"])
@pytest.mark.parametrize("name", ["ppmlm", "dppmlm", "ippmlm", "ppclm", "dppclm", "ippclm"])
def test_no_token_overlapping_a_protected_word_is_ever_a_target(spanning, model, name):
    from toolkit.strategies.masked import ProtectedWholeWordCollator

    corpus, analysis, toks = spanning
    strat = get_strategy(name)
    tok = toks[model][strat.kind]
    kind = "all" if len(strat.protect) == 2 else strat.protect[0]
    examples = training_examples(corpus, tok, strat, positions=analysis.positions(), max_length=512, progress=False)
    assert len(examples) == len(corpus)  # one chunk per note: tokens align with the note's offsets
    collator = ProtectedWholeWordCollator(tokenizer=tok, mlm_probability=1.0)  # every eligible word is a target
    n_targets = n_protected_tokens = 0
    for i, (d, ex) in enumerate(zip(corpus, examples)):
        prot = analysis.protected_spans(i, kind)
        offsets = tok(d.text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
        lead = 1 if strat.kind == "mlm" else 0  # [CLS]
        if strat.kind == "mlm":
            labels = collator([dict(ex)])["labels"][0].tolist()
        else:
            labels = ex["labels"]
        assert len(labels) == len(offsets) + (2 if strat.kind == "mlm" else 0)
        for j, span in enumerate(offsets):
            target = labels[lead + j] != -100
            n_targets += target
            if _overlaps(span, prot):
                n_protected_tokens += 1
                assert not target, f"{name}/{model}: note {d.doc_id} token {span} overlaps a protected word"
    assert n_targets > 0 and n_protected_tokens > 0


# ---- identifiers must cover the training documents, made from exactly their text -------------------------------------

@pytest.mark.parametrize("name", ["ppmlm", "mlm_pseudo", "ppmlm_surrogate", "ppmlm_category"])
def test_identifiers_missing_documents_are_refused_with_a_count(setup, name):
    corpus, _, mtok, _ = setup
    partial = analyze(Corpus(list(corpus)[:50]), detector="oracle", progress=False)  # 10 notes not analysed
    with pytest.raises(ToolkitError, match=r"10 of 60 are not covered by them and 0 were changed") as info:
        training_examples(corpus, mtok, name, positions=partial.positions(), spans=partial.span_table(),
                          max_length=64, progress=False)
    assert "Okafor" not in str(info.value) and "d5" not in str(info.value)


def test_identifiers_of_an_older_text_are_refused_with_a_count(setup, tmp_path):
    from toolkit.identifiers import load_identifiers

    corpus, analysis, mtok, _ = setup
    analysis.save(tmp_path / "ids")
    ids = load_identifiers(tmp_path / "ids")
    docs = list(corpus)
    # three notes edited after the identifiers were made (same ids, same offsets for the earlier words)
    edited = Corpus([make_document(d.doc_id, d.person_id, d.text + " Seen again by Dr. Quarshie.", d.spans)
                     if i in (3, 17, 42) else d for i, d in enumerate(docs)])
    for name in ("ppmlm", "dppmlm", "mlm_pseudo", "ppclm", "ppmlm_surrogate", "ppclm_category"):
        with pytest.raises(ToolkitError, match=r"0 of 60 are not covered by them and 3 were changed"):
            training_examples(edited, mtok, name, positions=ids["positions"], spans=ids["spans"], max_length=64,
                              progress=False)
    for name in ("ppmlm", "ppmlm_surrogate", "ppclm_category"):
        assert len(training_examples(corpus, mtok, name, positions=ids["positions"], spans=ids["spans"],
                                     max_length=64, progress=False)) > 0
    # a strategy that reads no identifiers does not need them
    assert len(training_examples(edited, mtok, "mlm", positions=None, max_length=64, progress=False)) > 0
