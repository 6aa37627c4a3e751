"""The committed sample data (data_samples/) is reproducible and has the properties the audits rely on.

Statistics are recomputed here independently of toolkit.samples (words = runs of letters/digits, lower-cased).
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from toolkit.corpus.model import Corpus, make_document
from toolkit.errors import ToolkitError
from toolkit.samples import generate_clinical, write_all
from toolkit.samples.email import public_email_corpus
from toolkit.samples.wordlists import STAFF_SURNAMES

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "data_samples"
FILES = ("clinical/notes.jsonl", "clinical/term_categories.csv", "email/train.jsonl", "email/validation.jsonl",
         "email/test.jsonl", "email/prompts.jsonl")
CLINICAL_LABELS = {"PATIENT", "DOCTOR", "HOSPITAL", "DATE", "ID", "PHONE", "AGE", "LOCATION"}
EMAIL_LABELS = {"EMAIL", "NAME", "PHONE", "DATE"}
SMOKING = {"CURRENT SMOKER", "PAST SMOKER", "NON-SMOKER", "SMOKER", "UNKNOWN"}
WORD = re.compile(r"[^\W_]+")
EMAIL_RE = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")


def _words(text: str) -> list[str]:
    return WORD.findall(text.lower())


def _read(name: str) -> list[dict]:
    with open(SAMPLES / name, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


@pytest.fixture(scope="module")
def notes() -> list[dict]:
    return _read("clinical/notes.jsonl")


@pytest.fixture(scope="module")
def mail() -> dict[str, list[dict]]:
    return {s: _read(f"email/{s}.jsonl") for s in ("train", "validation", "test")}


@pytest.fixture(scope="module")
def terms() -> dict[str, str]:
    with open(SAMPLES / "clinical/term_categories.csv", encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    return {r["term"]: r["category"] for r in rows}


def _inside(spans: list[dict], start: int, end: int, label: str | None = None) -> bool:
    return any(s["start"] <= start and end <= s["end"] and (label is None or s["label"] == label) for s in spans)


# ---------------------------------------------------------------------------------------------------------------
# reproducibility and format
# ---------------------------------------------------------------------------------------------------------------


def test_regeneration_is_byte_identical(tmp_path):
    write_all(tmp_path, seed=0)
    for name in FILES:
        assert (tmp_path / name).read_bytes() == (SAMPLES / name).read_bytes(), f"{name} differs from a regeneration"
    assert (SAMPLES / "README.md").is_file()
    assert sum(p.stat().st_size for p in SAMPLES.rglob("*") if p.is_file()) < 10_000_000


@pytest.mark.parametrize("name", ["clinical/notes.jsonl", "email/train.jsonl", "email/validation.jsonl",
                                  "email/test.jsonl"])
def test_records_are_valid_native_documents(name):
    lines = (SAMPLES / name).read_text(encoding="utf-8").splitlines()
    docs = []
    for i, line in enumerate(lines, 1):
        rec = json.loads(line)
        doc = make_document(rec["doc_id"], rec["person_id"], rec["text"], rec["spans"], rec.get("split"),
                            rec.get("labels"), path=name, line=i)
        # same field order and content as the corpus model's own serialisation (spans sorted, valid, no overlap)
        assert json.dumps(doc.to_dict(), ensure_ascii=False) == line
        docs.append(doc)
    Corpus(docs)  # unique doc_ids


# ---------------------------------------------------------------------------------------------------------------
# clinical notes
# ---------------------------------------------------------------------------------------------------------------


def test_clinical_counts_and_splits(notes):
    people_by_split = defaultdict(set)
    notes_per_person = Counter(d["person_id"] for d in notes)
    for d in notes:
        people_by_split[d["split"]].add(d["person_id"])
        assert re.fullmatch(r"p\d{4}-n[1-4]", d["doc_id"]) and d["doc_id"].startswith(d["person_id"] + "-")
    assert {s: len(p) for s, p in people_by_split.items()} == {"public": 200, "train": 200, "heldout": 200,
                                                                 "test": 200}
    assert len({p for ps in people_by_split.values() for p in ps}) == 800  # each patient in one split
    assert set(notes_per_person.values()) == {1, 2, 3, 4}
    assert 1.9 <= len(notes) / 800 <= 2.2
    lengths = [len(d["text"].split()) for d in notes]
    assert 110 <= sum(lengths) / len(lengths) <= 170


def test_clinical_labels_and_name_coverage(notes):
    labels = Counter(s["label"] for d in notes for s in d["spans"])
    assert set(labels) == CLINICAL_LABELS
    staff = set(STAFF_SURNAMES)
    for d in notes:
        text, spans = d["text"], d["spans"]
        names = {text[s["start"]:s["end"]] for s in spans if s["label"] == "PATIENT"}
        name_words = {w for n in names for w in _words(n)}
        assert name_words, f"{d['doc_id']} never names its patient"
        # every occurrence of the patient's name words (or a staff surname) lies inside a span (a patient's name
        # may also be part of a pooled doctor's name or a Faker city: then it is inside that span)
        for m in WORD.finditer(text):
            w = m.group().lower()
            if w in name_words:
                assert _inside(spans, m.start(), m.end()), (d["doc_id"], w)
            elif w in staff:
                assert _inside(spans, m.start(), m.end(), "DOCTOR"), (d["doc_id"], w)


def test_clinical_pooled_identifiers_repeat_everywhere(notes):
    by_value = defaultdict(Counter)
    for d in notes:
        for s in d["spans"]:
            if s["label"] in ("DOCTOR", "HOSPITAL"):
                by_value[s["label"], d["text"][s["start"]:s["end"]]][d["split"]] += 1
    hospitals = [v for (lab, _), v in by_value.items() if lab == "HOSPITAL"]
    assert len(hospitals) == 5 and all(sum(c.values()) >= 100 and c["public"] > 0 for c in hospitals)
    staff = [by_value["DOCTOR", s] for s in STAFF_SURNAMES]
    assert all(sum(c.values()) >= 100 and c["public"] > 0 and c["train"] > 0 for c in staff)
    staff_lower = {w for w in STAFF_SURNAMES}
    assert all(w == w.lower() for w in staff_lower)


def test_clinical_rare_terms(notes, terms):
    assert len(terms) >= 1500
    assert set(terms.values()) >= {"drug", "condition", "occupation", "hobby"}
    users = defaultdict(set)
    split_of = {}
    for d in notes:
        split_of[d["person_id"]] = d["split"]
        for w in set(_words(d["text"])):
            if w in terms:
                users[w].add(d["person_id"])
    assert set(users) == set(terms), "every listed term occurs in the notes"
    n_users = Counter(len(u) for u in users.values())
    assert max(n_users) <= 3
    slots_unique = n_users[1]
    slots_all = sum(k * v for k, v in n_users.items())
    assert 0.65 <= slots_unique / slots_all <= 0.85  # about 75% of a patient's terms are unique to the patient
    for term, people in users.items():
        sides = {split_of[p] == "public" for p in people}
        assert len(sides) == 1, f"{term!r} is shared between public and non-public patients"
    # terms recur within a patient: most are mentioned at least twice
    counts = Counter()
    for d in notes:
        for w in _words(d["text"]):
            if w in terms:
                counts[d["person_id"], w] += 1
    assert sum(c >= 2 for c in counts.values()) / len(counts) > 0.7


@pytest.mark.slow  # generates the whole sample (10 s)
def test_clinical_splits_draw_rare_terms_alike(notes, terms):
    """Members and non-members must not differ before training: every split has about the same share of rare terms
    that are unique to the patient, recounted from the notes (before the fix, terms were handed out split after
    split and the pools ran out on the last ones: in the sample data the test split's terms were 49% made up, and in a
    4,000-patient corpus no heldout patient had a term of their own). A generated 10,000-patient corpus too (the
    curated pools and the first reserve exhausted at a few thousand; issue 35 asks for members with terms of their
    own at 10,000): in public / train / heldout alike, over 40% of a patient's rare terms are theirs alone (9% before
    the deep reserve) and over 80% of patients hold one (16% before), recounted from the notes (one short note per
    patient: the terms are in every note)."""
    from toolkit.samples.clinical import build_clinical

    def unique_share(docs, term_set, own=False):
        users, split_of, held = defaultdict(set), {}, defaultdict(set)
        for d in docs:
            split_of[d["person_id"]] = d["split"]
            for w in set(_words(d["text"])) & term_set:
                users[w].add(d["person_id"])
                held[d["person_id"]].add(w)
        share = defaultdict(list)
        for person, words in held.items():
            unique = [len(users[w]) == 1 for w in words]
            share[split_of[person]] += [any(unique)] if own else unique
        return {split: sum(v) / len(v) for split, v in share.items()}

    sample = unique_share(notes, set(terms))
    assert max(sample.values()) - min(sample.values()) < 0.08, sample
    big = build_clinical(10_000, seed=27, splits=(("public", 0.5), ("train", 0.25), ("heldout", 0.25)),
                         notes_per_person=(1, 1), words_per_note=30)
    term_set = {t for t, _ in big.term_categories}
    shares, own = unique_share(big.documents, term_set), unique_share(big.documents, term_set, own=True)
    assert len(shares) == 3 and min(shares.values()) > 0.4, shares
    assert max(shares.values()) - min(shares.values()) < 0.05, shares
    assert min(own.values()) > 0.8, own


def test_deep_reserve_is_new_made_up_words():
    """The deep reserve's names are none of the curated terms, the first reserve, the template words or Faker's
    names, and the sample data never reaches it: its 800 patients draw from the curated pools and the reserve
    alone (so the committed samples did not change)."""
    import random

    from toolkit.samples.clinical_people import (TermAllocator, _faker_name_words, common_vocabulary, deep_reserve,
                                                 rare_term_pools)

    pools, reserve = rare_term_pools()
    deep = deep_reserve()
    assert len(deep) > 100_000 and len(set(deep)) == len(deep)
    taken = {t for p in pools.values() for t in p} | set(reserve) | common_vocabulary() | _faker_name_words()
    assert not taken & set(deep)
    assert all(t.isalpha() and t.islower() for t in deep)
    allocator = TermAllocator(random.Random(0), pools, reserve)
    for i in range(800):
        allocator.assign("public" if i % 4 == 0 else "private")
    assert allocator.deep is None


def test_clinical_indirect_identifier_shape(notes):
    users = defaultdict(set)
    occ = Counter()
    for d in notes:
        if d["split"] in ("train", "heldout"):
            for w in _words(d["text"]):
                users[w].add(d["person_id"])
                occ[w] += 1
    single = [w for w, u in users.items() if len(u) == 1]
    share_distinct = len(single) / len(users)
    share_occurrences = sum(occ[w] for w in single) / sum(occ.values())
    assert share_distinct > 0.45, share_distinct
    assert share_occurrences < 0.10, share_occurrences


def test_clinical_smoking_labels_supported_by_text(notes):
    per_patient = defaultdict(set)
    patterns = {
        "CURRENT SMOKER": r"current smoker|smokes|active smoker|tobacco: current|continues to smoke",
        "PAST SMOKER": r"former smoker|quit smoking|ex-smoker|tobacco: former",
        "NON-SMOKER": r"denies tobacco|never smoker|no history of tobacco|nonsmoker|tobacco: never",
        "SMOKER": r"tobacco use: yes|positive history of tobacco|reports tobacco use|smoking history present",
    }
    for d in notes:
        label = d["labels"]["smoking"]
        assert label in SMOKING
        per_patient[d["person_id"]].add(label)
        low = d["text"].lower()
        if label == "UNKNOWN":
            assert "smok" not in low and "tobacco" not in low, d["doc_id"]
        else:
            assert re.search(patterns[label], low), (d["doc_id"], label)
            others = [k for k in patterns if k != label and re.search(patterns[k], low)]
            assert not others, (d["doc_id"], label, others)
    assert all(len(v) == 1 for v in per_patient.values())
    dist = Counter(next(iter(v)) for v in per_patient.values())
    assert set(dist) == SMOKING
    assert [k for k, _ in dist.most_common(2)] == ["UNKNOWN", "NON-SMOKER"]


def test_long_notes_for_benchmarks():
    docs = generate_clinical(n_individuals=40, seed=1, long=True)
    lengths = [len(d["text"].split()) for d in docs]
    assert min(lengths) >= 500 and sum(lengths) / len(lengths) < 600
    assert generate_clinical(n_individuals=40, seed=1, long=True) == docs
    assert {d["split"] for d in docs} == {"public", "train", "heldout", "test"}


# ---------------------------------------------------------------------------------------------------------------
# e-mail
# ---------------------------------------------------------------------------------------------------------------


def test_email_counts_spans_and_senders(mail):
    assert {s: len(d) for s, d in mail.items()} == {"train": 2400, "validation": 300, "test": 300}
    all_docs = [d for docs in mail.values() for d in docs]
    assert [d["doc_id"] for d in sorted(all_docs, key=lambda d: d["doc_id"])] == \
        [f"m{i:05d}" for i in range(1, 3001)]
    labels = Counter(s["label"] for d in all_docs for s in d["spans"])
    assert set(labels) == EMAIL_LABELS
    kinds = Counter()
    for d in all_docs:
        text, spans = d["text"], d["spans"]
        header, _, body = text.partition("\n\n")
        assert re.search(r"^Date: .+\nFrom: .+\nTo: .+", header, re.M) and "Subject: " in header
        first_from = re.search(r"^From: (?:.*<)?([^<>\s]+@[^<>\s]+)>?$", header, re.M).group(1)
        assert d["person_id"] == first_from.lower()
        # every address occurrence has an EMAIL span and every EMAIL span is an address
        found = [(m.start(), m.end()) for m in EMAIL_RE.finditer(text)]
        gold = [(s["start"], s["end"]) for s in spans if s["label"] == "EMAIL"]
        assert found == gold, d["doc_id"]
        kinds["cc"] += "\nCc: " in header
        kinds["quoted"] += "-----Original Message-----" in text or "Forwarded by" in text
        kinds["body_mention"] += bool(EMAIL_RE.search(body.split("\n\n\n")[0]))
    assert kinds["cc"] > 300 and kinds["quoted"] > 800 and kinds["body_mention"] > 50


def test_email_address_frequency_is_heavy_tailed(mail):
    counts = Counter()
    for d in mail["train"]:
        for s in d["spans"]:
            if s["label"] == "EMAIL":
                counts[d["text"][s["start"]:s["end"]].lower()] += 1
    freq = sorted(counts.values(), reverse=True)
    assert freq[0] > 1000
    assert sum(f == 1 for f in freq) >= 30
    assert 200 <= len(counts) <= 300
    # least-squares slope of log frequency on log rank over the top 100 addresses: Zipf exponent about 1.2
    xs = [math.log(r) for r in range(1, 101)]
    ys = [math.log(f) for f in freq[:100]]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    assert 0.9 <= -slope <= 1.6, slope


def test_email_prompts(mail):
    prompts = _read("email/prompts.jsonl")
    train = {d["doc_id"]: d for d in mail["train"]}
    counts = Counter()
    for d in mail["train"]:
        for s in d["spans"]:
            if s["label"] == "EMAIL":
                counts[d["text"][s["start"]:s["end"]].lower()] += 1
    assert len(prompts) == 300
    assert len({p["doc_id"] for p in prompts}) == 300
    assert [p["prompt_id"] for p in prompts] == [f"q{i:04d}" for i in range(1, 301)]
    for p in prompts:
        assert list(p) == ["prompt_id", "doc_id", "prompt", "target"]
        doc = train[p["doc_id"]]
        assert p["prompt"].endswith(("\nFrom: ", "\nTo: ", "\nCc: "))
        assert doc["text"].startswith(p["prompt"] + p["target"])
        assert _inside(doc["spans"], len(p["prompt"]), len(p["prompt"]) + len(p["target"]), "EMAIL")
    frequent = sum(counts[p["target"].lower()] >= 50 for p in prompts)
    rare = sum(counts[p["target"].lower()] <= 5 for p in prompts)
    assert frequent >= 200 and rare >= 30


def test_public_email_corpus_is_among_other_people(mail):
    public = public_email_corpus(1000)
    assert len(public) == 1000 and {d.split for d in public} == {"public"}
    assert [d.to_dict() for d in public_email_corpus(1000)] == [d.to_dict() for d in public]  # deterministic
    addresses = {d.text[s.start:s.end].lower() for d in public for s in d.spans if s.label == "EMAIL"}
    train = {d["text"][s["start"]:s["end"]].lower() for d in mail["train"] for s in d["spans"]
             if s["label"] == "EMAIL"}
    assert len(addresses) > 200 and len(addresses & train) <= 2  # 1 of the 278 training addresses, measured
    with pytest.raises(ToolkitError, match="at least one message"):
        public_email_corpus(0)
