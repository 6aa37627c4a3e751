"""Surrogate and category strategies (``*_surrogate``, ``*_category``): direct identifiers out of the input as well as
out of the targets; surrogates consistent per individual, never the original; positions carried over."""

from __future__ import annotations

import os
import random
import re
import stat
from collections import defaultdict
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from toolkit.corpus import Corpus, load_corpus, make_document
from toolkit.errors import ToolkitError
from toolkit.identifiers import analyze
from toolkit.identifiers.words import iter_words, normalize_term
from toolkit.models import train_tokenizer
from toolkit.strategies import STRATEGIES, Strategy, get_strategy, strategy_inputs, training_set
from toolkit.strategies.pseudonymize import plan_replacements, remap_positions, rewrite, rewrite_corpus, word_regions
from toolkit.strategies.surrogates import (MONTHS, SurrogateMaker, parse_date, run_surrogate_key, shift_date,
                                           words_of)

NOTES = Path(__file__).resolve().parents[1] / "data_samples" / "clinical" / "notes.jsonl"
KEY = bytes(range(32))
MONTH_WORDS = {m.lower() for m in MONTHS} | {m[:3].lower() for m in MONTHS}


@lru_cache(maxsize=None)
def clinical():
    """150 training notes of the sample corpus, their identifiers and their surrogate texts under KEY."""
    corpus = Corpus(list(load_corpus(NOTES).filter(split="train"))[:150])
    analysis = analyze(corpus, detector="oracle", progress=False)
    return corpus, analysis


def span_pairs(corpus: Corpus, spans, key: bytes = KEY):
    """``(person, category, original, surrogate)`` of every region, and the rewritten texts."""
    plan = plan_replacements(corpus, "surrogate", spans, surrogate_key=key)
    texts, _ = rewrite_corpus(corpus, "surrogate", spans, surrogate_key=key)
    assert texts == [rewrite(d.text, [(s, e, r) for s, e, _, r in regions])[0] for d, regions in zip(corpus, plan)]
    return [(d.person_id, c, d.text[s:e], r) for d, regions in zip(corpus, plan) for s, e, c, r in regions], texts


# -- surrogates ------------------------------------------------------------------------------------------------------

def test_surrogates_are_consistent_per_individual_and_never_the_original():
    corpus, analysis = clinical()
    pairs, texts = span_pairs(corpus, analysis.span_table())
    assert len(pairs) > 500 and {c for _, c, _, _ in pairs} >= {"NAME", "DATE", "ID", "LOCATION", "ORGANIZATION"}
    seen: dict[tuple[str, str, str], str] = {}
    by_person: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)
    own: dict[str, set[str]] = defaultdict(set)
    for person, _, original, _ in pairs:
        own[person].update(words_of(original))
    for person, category, original, surrogate in pairs:
        assert surrogate.strip(), "a surrogate is never empty"
        assert normalize_term(surrogate) != normalize_term(original)
        assert not set(words_of(surrogate)) & set(words_of(original)), "no word of the original survives"
        if category not in ("DATE", "AGE"):
            assert not {w for w in words_of(surrogate) if len(w) > 1} & own[person]
        key = (person, category, normalize_term(original))
        assert seen.setdefault(key, surrogate).lower() == surrogate.lower(), "same original, same surrogate"
        # two different originals of one individual never share a surrogate
        other = by_person[(person, category)].setdefault(normalize_term(surrogate), normalize_term(original))
        assert other == normalize_term(original)
    # names word by word: "Brenda Daniels" and "Mrs. Daniels" keep one surname
    words: dict[tuple[str, str], set[str]] = defaultdict(set)
    for person, category, original, surrogate in pairs:
        if category == "NAME" and len(words_of(original)) == len(words_of(surrogate)):
            for a, b in zip(words_of(original), words_of(surrogate)):
                words[(person, a)].add(b)
    assert words and all(len(v) == 1 for v in words.values())
    # no distinctive identifier word of the corpus is left anywhere in the texts (nor became another's surrogate)
    left = {normalize_term(t[s:e]) for t in texts for s, e in iter_words(t)}
    assert len(original_words(corpus)) > 100 and not left & original_words(corpus)


def test_surrogate_dates_shift_by_one_offset_per_individual_in_the_original_format():
    corpus, analysis = clinical()
    offsets: dict[str, set[int]] = defaultdict(set)
    n_full = 0
    for person, category, original, surrogate in span_pairs(corpus, analysis.span_table())[0]:
        if category != "DATE":
            continue
        old, new = parse_date(original), parse_date(surrogate)
        assert new is not None and old is not None and new[0] == old[0], "same format"
        shape = re.sub(r"[A-Za-z]+", "A", re.sub(r"\d", "9", original))
        if old[0] in ("ymd", "y"):  # zero-padded numbers keep their width
            assert re.sub(r"[A-Za-z]+", "A", re.sub(r"\d", "9", surrogate)) == shape
        if old[0] not in ("y", "My"):
            offsets[person].add((new[2] - old[2]).days)
            n_full += 1
    assert n_full > 100
    consistent = sum(len(v) == 1 for v in offsets.values())
    assert consistent >= 0.9 * len(offsets), "one shift per individual keeps the intervals of a record"
    assert all(400 <= abs(o) <= 3000 for v in offsets.values() for o in v)


@pytest.mark.parametrize("text, expected_format", [
    ("07/26/2010", "mdy"), ("2/10/11", "mdy"), ("2011-02-08", "ymd"), ("September 20, 1952", "Mdy"),
    ("Aug 2, 2010", "Mdy"), ("3 March 2001", "dMy"), ("June 1999", "My"), ("1992", "y")])
def test_date_formats_round_trip(text, expected_format):
    parsed = parse_date(text)
    assert parsed is not None and parsed[0] == expected_format
    assert shift_date(parsed, 0) == text
    moved = shift_date(parsed, 1000)
    assert parse_date(moved)[0] == expected_format and moved != text


def test_surrogates_follow_the_key():
    corpus, analysis = clinical()
    spans = analysis.span_table()
    a, _ = rewrite_corpus(corpus, "surrogate", spans, surrogate_key=KEY)
    b, _ = rewrite_corpus(corpus, "surrogate", spans, surrogate_key=KEY)
    c, _ = rewrite_corpus(corpus, "surrogate", spans, surrogate_key=bytes(32))
    assert a == b and a != c


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["p1", "p2", "p3"]),
                          st.sampled_from(["NAME", "LOCATION", "ORGANIZATION", "ID", "PHONE", "AGE", "OTHER",
                                           "EMAIL", "DATE"]),
                          st.one_of(st.sampled_from(["Mary Smith", "SMITH, Mary", "john", "Kennedy Memorial Hospital",
                                                     "North Lisa", "12 Oak Street", "28377", "07/26/2010",
                                                     "1992", "57", "(214) 710-3807", "a@b.org"]),
                                    st.text(alphabet="abcXYZ019 ,.-", min_size=1, max_size=12))),
                min_size=1, max_size=12))
def test_surrogate_rules_hold_for_any_identifiers(items):
    items = [(p, c, o) for p, c, o in items if words_of(o)]
    maker = SurrogateMaker(KEY, items)
    own = defaultdict(set)
    for p, _, o in items:
        own[p].update(words_of(o))
    for p, c, o in items:
        s = maker.surrogate(p, c, o)
        assert maker.surrogate(p, c, o) == s
        assert normalize_term(s) != normalize_term(o) and not set(words_of(s)) & set(words_of(o))
        if c not in ("DATE", "AGE"):
            assert not {w for w in words_of(s) if len(w) > 1} & own[p]


def test_run_key_is_private_reused_and_required_on_resume(tmp_path):
    key = run_surrogate_key(tmp_path / "run", resuming=False)
    path = tmp_path / "run" / "surrogate.key"
    assert len(key) == 32 and stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert run_surrogate_key(tmp_path / "run", resuming=True) == key
    path.unlink()
    with pytest.raises(ToolkitError, match="missing"):
        run_surrogate_key(tmp_path / "run", resuming=True)
    path.write_text("zz\n")
    with pytest.raises(ToolkitError, match="unreadable"):
        run_surrogate_key(tmp_path / "run", resuming=True)


# -- rewriting and positions -------------------------------------------------------------------------------------------

def test_regions_are_whole_words_and_positions_move_with_the_text():
    text = "Seen by Dr. Lindqvist,Okafor on 03/04/2019 (rare acromegaly)."
    #       0         1         2         3         4         5
    regions = word_regions(text, [(14, 18), (22, 28), (32, 42), (0, 0), (43, 44)])  # half a word, a full one, date,
    # an empty span and a span of punctuation only
    assert [(s, e) for s, e, _ in regions] == [(12, 21), (22, 28), (32, 42)]
    import pandas as pd

    positions = pd.DataFrame({"start": [12, 22, 32, 35, 38, 49], "end": [21, 28, 34, 37, 42, 59],
                              "direct": [True] * 5 + [False], "indirect": [True, False, False, False, False, True],
                              "category": ["NAME", "NAME", "DATE", "DATE", "DATE", ""]})
    reps = ["Ann Lee", "Bo", "[DATE]"]
    new, _ = rewrite(text, [(s, e, r) for (s, e, _), r in zip(regions, reps)])
    assert new == "Seen by Dr. Ann Lee,Bo on [DATE] (rare acromegaly)."
    moved = remap_positions(positions, [(s, e) for s, e, _ in regions], reps, ["NAME", "NAME", "DATE"])
    got = [(new[s:e], bool(d), bool(i)) for s, e, d, i in moved[["start", "end", "direct", "indirect"]].itertuples(
        index=False)]
    assert got == [("Ann", True, False), ("Lee", True, False), ("Bo", True, False), ("DATE", True, False),
                   ("acromegaly", False, True)]


def test_category_variant_writes_placeholders_and_targets_them():
    corpus, analysis = clinical()
    strat = get_strategy("ppclm_category")
    spans = analysis.span_table()
    plan = plan_replacements(corpus, "category", spans)
    assert all(r == f"[{c}]" for regions in plan for _, _, c, r in regions)
    assert {c for regions in plan for _, _, c, _ in regions} >= {"NAME", "DATE", "ID", "LOCATION", "ORGANIZATION"}
    texts, positions = strategy_inputs(corpus, strat, analysis.positions(), spans)
    left = {normalize_term(t[s:e]) for t in texts for s, e in iter_words(t)}
    assert not left & original_words(corpus)
    assert positions["direct"].sum() > 0 and not (positions["direct"] & positions["indirect"]).any()
    tok = tokenizer("clm")
    data = training_set(corpus, tok, strat, positions=analysis.positions(), spans=spans, max_length=4096,
                        progress=False)
    name_ids = set(tok(" [NAME]", add_special_tokens=False)["input_ids"]) - \
        set(tok(" [", add_special_tokens=False)["input_ids"])
    targets = {i for e in data.examples for i, lab in zip(e["input_ids"], e["labels"]) if lab != -100}
    assert name_ids and name_ids <= targets, "placeholders are ordinary targets"


@pytest.mark.parametrize("name, hidden", [("ppclm_surrogate", True), ("ppclm_surrogate_targets", False)])
def test_surrogate_targets_and_indirect_protection(name, hidden):
    corpus, analysis = clinical()
    strat = get_strategy(name)
    tok = tokenizer("clm")  # the training draws surrogate names as long in tokens as the originals under it
    texts, positions = strategy_inputs(corpus, strat, analysis.positions(), analysis.span_table(), surrogate_key=KEY,
                                       tokenizer=tok)
    data = training_set(corpus, tok, strat, positions=analysis.positions(), spans=analysis.span_table(),
                        max_length=4096, progress=False, surrogate_key=KEY)
    assert len(data.examples) == len(corpus)
    n_direct = n_direct_target = n_indirect = 0
    for d, text, ex in zip(corpus, texts, data.examples):
        assert tok.decode(ex["input_ids"]) == text  # one chunk per note: tokens align with the rewritten text
        offsets = tok(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
        mine = positions[positions["doc_id"] == d.doc_id]
        ps, pe = mine["start"].to_numpy(), mine["end"].to_numpy()
        direct, indirect = mine["direct"].to_numpy(), mine["indirect"].to_numpy()
        for (s, e), lab in zip(offsets, ex["labels"]):
            hit = (ps < e) & (pe > s)
            if indirect[hit].any():
                n_indirect += 1
                assert lab == -100, "indirect identifiers are never targets"
            elif direct[hit].any():
                n_direct += 1
                n_direct_target += lab != -100
    assert n_indirect > 0 and n_direct > 100
    assert (n_direct_target == 0) if hidden else (n_direct_target == n_direct)


@pytest.mark.parametrize("name", ["ppclm_surrogate", "ppmlm_category", "ppmlm_surrogate_targets"])
def test_rewriting_strategies_check_the_identifiers_fingerprints(name):
    corpus, analysis = clinical()
    docs = list(corpus)
    edited = Corpus([make_document(d.doc_id, d.person_id, d.text + " Seen again.", d.spans) if i == 3 else d
                     for i, d in enumerate(docs)])
    tok = tokenizer(get_strategy(name).kind)
    with pytest.raises(ToolkitError, match=r"0 of 150 are not covered by them and 1 were changed"):
        training_set(edited, tok, name, positions=analysis.positions(), spans=analysis.span_table(),
                     max_length=128, progress=False)
    with pytest.raises(ToolkitError, match="spans"):
        training_set(corpus, tok, name, positions=analysis.positions(), spans=None, max_length=128, progress=False)


# -- the registry ----------------------------------------------------------------------------------------------------

def test_registry_has_the_new_strategies_and_validates_them():
    for kind in ("mlm", "clm"):
        assert STRATEGIES[f"pp{kind}_surrogate"].text == STRATEGIES[f"pp{kind}_surrogate_targets"].text == "surrogate"
        assert set(STRATEGIES[f"pp{kind}_surrogate"].protect) == {"direct", "indirect"}  # surrogates never targets
        assert STRATEGIES[f"pp{kind}_surrogate_targets"].protect == ("indirect",)
        assert STRATEGIES[f"pp{kind}_category"].text == "category"
    assert all(s.reads_spans == (s.text != "original") for s in STRATEGIES.values())
    for bad in [dict(kind="gpt"), dict(text="masked"), dict(protect=("names",)), dict(protect="direct"),
                dict(protect=("direct", "direct")), dict(dp="yes")]:
        with pytest.raises(ToolkitError, match="strategy x"):
            Strategy("x", **{"kind": "clm", **bad})
    with pytest.raises(ToolkitError, match="needs a name"):
        Strategy("", "clm")


# -- no original identifier in any batch (collators, masked and causal) -----------------------------------------------

FIRST = ["Mary", "James", "Linda", "Robert", "Patricia", "Michael", "Jennifer", "David"]
LAST = ["Smith", "Johnson", "Williams", "Brown", "Jones", "Garcia", "Miller", "Davis"]
CITIES = ["Lisaside", "Jonesberg", "Kellerstad", "North Catherineborough"]
HOSPITALS = ["Kennedy Memorial Hospital", "Saint Thomas Medical Center", "Pagetown General Hospital"]
TEMPLATES = ["Mrs. {last} ({id}) was seen at {hospital} on {date}.", "{first} {last} lives in {city}.",
             "Plan discussed with {first}, who agrees; follow-up at {hospital}.", "No change since {date}.",
             "Vitals stable, continue current medications.", "Dr. {dfirst} {dlast} reviewed the chart of {last}."]
FILLER = "Patient reports mild fatigue and good appetite; vitals stable on the ward, plan unchanged for now."


@lru_cache(maxsize=None)
def tokenizer(kind: str):
    """Trained on the sample notes and every value the property test may draw (so originals have tokens)."""
    texts = [d.text for d in list(load_corpus(NOTES).filter(split="public"))[:200]]
    texts += [" ".join(FIRST + LAST + CITIES + HOSPITALS)] * 20
    return train_tokenizer(texts, kind, 600)


def build_corpus(rng: random.Random) -> Corpus:
    """2-4 individuals with 1-3 notes each, written from TEMPLATES with gold spans."""
    labels = {"first": "PATIENT", "last": "PATIENT", "dfirst": "DOCTOR", "dlast": "DOCTOR", "city": "LOCATION",
              "hospital": "HOSPITAL", "id": "ID", "date": "DATE"}
    docs = []
    for p in range(rng.randint(2, 4)):
        who = {"first": rng.choice(FIRST), "last": rng.choice(LAST), "dfirst": rng.choice(FIRST),
               "dlast": rng.choice(LAST), "city": rng.choice(CITIES), "hospital": rng.choice(HOSPITALS),
               "id": str(rng.randint(1_000_000, 9_999_999)),
               "date": f"{rng.randint(1, 12):02d}/{rng.randint(1, 28):02d}/{rng.randint(1950, 2020)}"}
        for n in range(rng.randint(1, 3)):
            text, spans = "", []
            for t in rng.choices(TEMPLATES, k=rng.randint(1, 4)):
                for piece in re.split(r"(\{\w+\})", t):
                    if piece.startswith("{"):
                        field = piece[1:-1]
                        spans.append((len(text), len(text) + len(who[field]), labels[field]))
                        text += who[field]
                    else:
                        text += piece
                text += " " + (FILLER if rng.random() < 0.5 else "") + " "
            docs.append(make_document(f"d{p}-{n}", f"p{p}", text, spans))
    return Corpus(docs)


def batches_text(tok, batch) -> list[str]:
    """The text of every row of a collated batch, with masked-LM targets put back (so what the masking hid is
    checked too, and the 10% random replacements, drawn from the whole vocabulary, are not mistaken for data)."""
    ids = batch["input_ids"]
    if "labels" in batch and batch["labels"].shape == ids.shape and tok.mask_token_id is not None:
        ids = torch.where(batch["labels"] != -100, batch["labels"], ids)
    return [tok.decode(row[mask.bool()].tolist(), skip_special_tokens=True)
            for row, mask in zip(ids, batch["attention_mask"])]


def original_words(corpus: Corpus) -> set[str]:
    """Words (>= 3 letters) seen in direct-identifier spans and nowhere else in the corpus (month names aside)."""
    inside, outside = set(), set()
    for d in corpus:
        for s, e in iter_words(d.text):
            w = normalize_term(d.text[s:e])
            (inside if any(sp.start < e and sp.end > s for sp in d.spans) else outside).add(w)
    return {w for w in inside - outside if sum(c.isalpha() for c in w) >= 3} - MONTH_WORDS


def leaked(corpus: Corpus, name: str, seed: int) -> set[str]:
    from toolkit.training import TrainConfig
    from toolkit.training.hf import make_collator

    strat = get_strategy(name)
    tok = tokenizer(strat.kind)
    analysis = analyze(corpus, detector="oracle", progress=False)
    data = training_set(corpus, tok, strat, positions=analysis.positions(), spans=analysis.span_table(),
                        max_length=48, progress=False, surrogate_key=seed.to_bytes(32, "big"))
    collator = make_collator(tok, strat, TrainConfig(mlm_probability=0.5))
    forbidden = original_words(corpus)
    found = set()
    torch.manual_seed(seed)
    order = np.random.default_rng(seed).permutation(len(data.examples))
    for b0 in range(0, len(order), 4):
        batch = collator([dict(data.examples[i]) for i in order[b0:b0 + 4]])
        for text in batches_text(tok, batch):
            found |= {normalize_term(text[s:e]) for s, e in iter_words(text)} & forbidden
    return found


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rnd=st.randoms(use_true_random=False),
       name=st.sampled_from(["ppmlm_surrogate", "ppmlm_surrogate_targets", "ppclm_surrogate", "ppclm_surrogate_targets",
                             "ppmlm_category", "ppclm_category"]),
       seed=st.integers(0, 2**16))
def test_no_original_identifier_word_in_any_batch_of_a_rewriting_strategy(rnd, name, seed):
    corpus = build_corpus(rnd)
    assume(original_words(corpus))  # a drawn corpus whose identifier words all occur elsewhere tests nothing
    assert leaked(corpus, name, seed) == set()


@pytest.mark.parametrize("name", ["ppmlm", "ppclm"])
def test_the_batch_check_finds_identifiers_under_pp_strategies(name):
    """The check above can fail: under PPMLM / PPclm the identifiers are in every batch."""
    corpus = build_corpus(random.Random(0))
    assert len(original_words(corpus)) >= 5
    assert leaked(corpus, name, 0) == original_words(corpus)
