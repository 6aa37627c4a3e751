"""Synthetic clinical notes with gold PHI spans (i2b2 categories) for the sample data and the benchmarks.

What the generator guarantees (tests/test_samples.py checks it):

* Individuals are patients, split by individual into ``public`` / ``train`` / ``heldout`` / ``test`` (25% each by
  default); each patient has 1–4 notes (35/35/20/10%), discharge summaries and progress notes in several layouts.
* Surrogate PHI comes from Faker (``en_US``) and is written through :class:`~toolkit.samples.text.TextBuilder`,
  which records every span as it writes: labels are exactly ``PATIENT, DOCTOR, HOSPITAL, DATE, ID, PHONE, AGE,
  LOCATION``.
* Direct identifiers that repeat: ~12 doctors and ~5 hospitals shared by every split (public included), and 8 staff
  surnames written in lower case in a sloppy style (``seen by nurse okafor``, ``d/w dr. lindqvist``), labelled DOCTOR.
* Indirect identifiers: each patient has 2–4 rare single-word terms (drug, condition, cancer, occupation, hobby,
  instrument, pet) mentioned in every one of the patient's notes, about 75% unique to the patient and the rest shared
  by 2–3 patients of the same side (public patients never share a term with the other splits).
* A smoking status (the five i2b2 classes) per patient, in ``labels["smoking"]`` and supported by the text.

Randomness: one :class:`random.Random` seeded with ``seed`` and one Faker instance seeded with ``seed``; nothing
depends on the clock or on hash randomisation. Faker is only called per patient/doctor/hospital, never per word.

Modules: this one builds and writes the corpus; :mod:`~toolkit.samples.clinical_people` draws patients, doctors,
hospitals and rare terms; :mod:`~toolkit.samples.clinical_layouts` and :mod:`~toolkit.samples.clinical_note` write
the notes from the templates in :mod:`~toolkit.samples.clinical_templates`.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolkit.samples import wordlists as W
from toolkit.samples.clinical_layouts import write_note
from toolkit.samples.clinical_people import (SMOKING_CLASSES, Patient, TermAllocator, common_vocabulary, make_doctors,
                                             make_hospitals, make_patient, rare_term_pools, split_sizes)
from toolkit.samples.text import make_record, weighted_choice, words_of, write_records

LABELS: tuple[str, ...] = ("PATIENT", "DOCTOR", "HOSPITAL", "DATE", "ID", "PHONE", "AGE", "LOCATION")
DEFAULT_SPLITS: tuple[tuple[str, float], ...] = (("public", 0.25), ("train", 0.25), ("heldout", 0.25), ("test", 0.25))
#: Weights of 1, 2, 3, 4 notes per patient (mean 2.05).
NOTE_COUNT_WEIGHTS: tuple[float, ...] = (0.35, 0.35, 0.20, 0.10)
LONG_WORDS_PER_NOTE = 500

# =================================================================================================================
# Public API
# =================================================================================================================


@dataclass
class ClinicalSample:
    """A generated clinical corpus: documents (native dicts), the rare terms used with their category, patients."""

    documents: list[dict[str, Any]]
    term_categories: list[tuple[str, str]]
    patients: list[Patient]


def split_blind_order(order: Sequence[int], split_of: Sequence[str]) -> list[int]:
    """``order`` interleaved round-robin over the splits: the first patient of each split (in ``order``), then the
    second of each, … — so that any position in the result is as likely to hold one split as another."""
    by_split: dict[str, list[int]] = {}
    for i in order:
        by_split.setdefault(split_of[i], []).append(i)
    queues = list(by_split.values())
    return [q[k] for k in range(max(map(len, queues), default=0)) for q in queues if k < len(q)]


def build_clinical(n_individuals: int = 800, seed: int = 0,
                   splits: Sequence[tuple[str, float]] = DEFAULT_SPLITS,
                   notes_per_person: tuple[int, int] = (1, 4), words_per_note: int | None = None,
                   long: bool = False) -> ClinicalSample:
    """Generate the clinical corpus and keep the rare-term table and patient records (see :func:`generate_clinical`)."""
    from faker import Faker

    if n_individuals < 1:
        raise ValueError("n_individuals must be at least 1")
    lo, hi = notes_per_person
    if not 1 <= lo <= hi:
        raise ValueError(f"notes_per_person must be (lo, hi) with 1 <= lo <= hi, got {notes_per_person!r}")
    if long and words_per_note is None:
        words_per_note = LONG_WORDS_PER_NOTE
    note_counts = list(range(lo, hi + 1))
    note_weights = list(NOTE_COUNT_WEIGHTS) if (lo, hi) == (1, 4) else [1.0] * len(note_counts)

    rng = random.Random(seed)
    fake = Faker("en_US")
    fake.seed_instance(seed)
    banned = common_vocabulary() | frozenset(W.STAFF_SURNAMES)
    pools, reserve = rare_term_pools()
    doctors = make_doctors(fake, banned)
    hospitals = make_hospitals(fake, banned)

    width = max(4, len(str(n_individuals)))
    order = rng.sample(range(n_individuals), n_individuals)
    split_of: dict[int, str] = {}
    pos = 0
    for name, size in split_sizes(n_individuals, splits):
        for i in order[pos:pos + size]:
            split_of[i] = name
        pos += size

    surnames: set[str] = set()
    mrns: set[str] = set()
    patients = [make_patient(f"p{i + 1:0{width}d}", split_of[i], rng, fake, banned, surnames, mrns, doctors,
                             hospitals) for i in range(n_individuals)]
    # Terms are handed out round-robin over the splits (the first patient of each split, then the second, …), not in
    # `order`, which lists the splits one after the other: the pools run out (the sample data's 800 patients already
    # exhaust some), and in split order the last splits got the made-up and reused terms — in the sample data 49% of
    # the test split's terms were made up, 3% of heldout's, 0% of train's; in a 4,000-patient corpus no heldout
    # patient had a term of their own, and a base model told train patients from heldout ones at AUC 0.58 before any
    # training. Round robin, every split draws from the pools alike (tests/test_samples.py).
    allocator = TermAllocator(rng, pools, reserve)
    for i in split_blind_order(order, [patients[j].split for j in range(n_individuals)]):
        p = patients[i]
        p.terms = allocator.assign("public" if p.split == "public" else "private")

    documents: list[dict[str, Any]] = []
    for p in patients:
        n_notes = weighted_choice(rng, note_counts, note_weights)
        for k in range(n_notes):
            text, spans = write_note(p, k, n_notes, rng, doctors, words_per_note)
            documents.append(make_record(f"{p.pid}-n{k + 1}", p.pid, text, spans, p.split,
                                         {"smoking": p.smoking}))

    category_of: dict[str, str] = {}
    for p in patients:
        for category, term in p.terms:
            category_of[term] = category
    term_categories = sorted(category_of.items(), key=lambda tc: (tc[1], tc[0]))
    return ClinicalSample(documents, term_categories, patients)


def generate_clinical(n_individuals: int = 800, seed: int = 0,
                      splits: Sequence[tuple[str, float]] = DEFAULT_SPLITS,
                      notes_per_person: tuple[int, int] = (1, 4), words_per_note: int | None = None,
                      long: bool = False) -> list[dict[str, Any]]:
    """Synthetic clinical notes as native document dicts (``doc_id, person_id, text, spans, split, labels``).

    Parameters
    ----------
    n_individuals:
        Number of patients (the mean is about 2.05 notes per patient, so ~24,400 patients give ~50,000 notes).
    seed:
        Seeds both :class:`random.Random` and Faker; the same arguments always give the same documents.
    splits:
        ``(name, fraction)`` pairs; patients (not notes) are split.
    notes_per_person:
        Range of notes per patient; ``(1, 4)`` uses the 35/35/20/10% weights, other ranges are uniform.
    words_per_note:
        When set, extra paragraphs are appended until each note has at least this many whitespace tokens
        (default notes have ~110–190).
    long:
        Shorthand for ``words_per_note=500`` (the benchmark setting: 50,000 notes ≈ 25M words).
    """
    return build_clinical(n_individuals, seed, splits, notes_per_person, words_per_note, long).documents


def write_term_categories(rows: Iterable[tuple[str, str]], path: Path) -> Path:
    """Write ``term,category`` rows as CSV (``\\n`` line ends; terms are single lower-case words, no quoting)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        fh.write("term,category\n")
        for term, category in rows:
            fh.write(f"{term},{category}\n")
    return path


def write_clinical(out_dir: Path, seed: int = 0, n_individuals: int = 800) -> list[Path]:
    """Write ``clinical/notes.jsonl`` and ``clinical/term_categories.csv`` under ``out_dir``."""
    sample = build_clinical(n_individuals=n_individuals, seed=seed)
    folder = Path(out_dir) / "clinical"
    return [write_records(sample.documents, folder / "notes.jsonl"),
            write_term_categories(sample.term_categories, folder / "term_categories.csv")]


def word_sharing(documents: Iterable[Mapping[str, Any]],
                 splits: Sequence[str] = ("train", "heldout")) -> dict[str, Any]:
    """How words are shared across individuals in the given splits (the "60% of distinct words" statistic).

    Words are runs of letters/digits, lower-cased. Returns the number of individuals, distinct words, the share of
    distinct words used by exactly one individual and the share of word occurrences those words account for.
    """
    users: dict[str, set[str]] = {}
    occurrences: dict[str, int] = {}
    people: set[str] = set()
    for d in documents:
        if d.get("split") not in splits:
            continue
        people.add(d["person_id"])
        for w in words_of(d["text"]):
            users.setdefault(w, set()).add(d["person_id"])
            occurrences[w] = occurrences.get(w, 0) + 1
    single = [w for w, u in users.items() if len(u) == 1]
    total = sum(occurrences.values())
    return {"individuals": len(people), "distinct_words": len(users), "occurrences": total,
            "single_individual_share_distinct": len(single) / max(1, len(users)),
            "single_individual_share_occurrences": sum(occurrences[w] for w in single) / max(1, total)}


__all__ = ["DEFAULT_SPLITS", "LABELS", "SMOKING_CLASSES", "ClinicalSample", "build_clinical", "generate_clinical",
           "word_sharing", "write_clinical", "write_term_categories"]
