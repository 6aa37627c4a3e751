"""Patients, the shared doctor / hospital pools and the rare-term allocation of the synthetic clinical notes.

Names, streets and cities come from Faker (called once per patient, doctor or hospital, never per word) and avoid
every word of the note templates (:func:`common_vocabulary`); everything else is drawn from the caller's seeded
:class:`random.Random`. Rare terms (indirect identifiers) are the curated word lists minus template words, Faker
names and staff surnames (:func:`rare_term_pools`), handed out by :class:`TermAllocator`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from functools import lru_cache
from typing import Any

from toolkit.samples import wordlists as W
from toolkit.samples.clinical_templates import AREA_CODES, PPD, all_templates
from toolkit.samples.text import parse_template, weighted_choice, words_of

SMOKING_CLASSES: tuple[str, ...] = ("CURRENT SMOKER", "PAST SMOKER", "NON-SMOKER", "SMOKER", "UNKNOWN")
#: Class weights: UNKNOWN and NON-SMOKER most frequent, as in i2b2 2006 (a little less skewed, so a classifier
#: has examples of every class in a 200-patient split).
SMOKING_WEIGHTS: tuple[float, ...] = (0.14, 0.15, 0.25, 0.06, 0.40)
#: Weights of 2, 3, 4 rare terms per patient.
TERM_COUNT_WEIGHTS: tuple[float, ...] = (0.45, 0.40, 0.15)
#: How many terms of one category a patient may hold (two rare drugs or two rare conditions are plausible).
MAX_PER_CATEGORY: dict[str, int] = {"drug": 2, "condition": 2}
#: Share of the made-up drug reserve counted in the drug category's weight (keeps small curated categories from
#: running out at the default size while most drug terms stay real names).
RESERVE_WEIGHT = 0.28
SHARED_TERM_SHARE = 0.25
N_DOCTORS = 12
N_HOSPITALS = 5


# =================================================================================================================
# Vocabulary exclusions: rare terms and names must not collide with the common words the templates use
# =================================================================================================================


@lru_cache(maxsize=None)
def common_vocabulary() -> frozenset[str]:
    """Lower-cased words of all template text and common phrases (slots removed)."""
    literals = " ".join(lit for t in all_templates() for lit, _ in parse_template(t))
    return frozenset(words_of(literals))


@lru_cache(maxsize=None)
def _faker_name_words() -> frozenset[str]:
    """Lower-cased Faker en_US first and last names and street/city affixes (rare terms must avoid them)."""
    from faker.providers.address.en_US import Provider as Address
    from faker.providers.person.en_US import Provider as Person

    names: list[str] = []
    for attr in ("first_names_male", "first_names_female", "first_names_nonbinary", "last_names"):
        names.extend(getattr(Person, attr, ()))
    names.extend(Address.street_suffixes)
    names.extend(Address.city_suffixes)
    names.extend(Address.city_prefixes)
    return frozenset(w for n in names for w in words_of(n))


def _banned_words() -> set[str]:
    """Words no rare term may be: template words, Faker's names and the staff surnames."""
    return set(common_vocabulary()) | set(_faker_name_words()) | set(W.STAFF_SURNAMES)


def rare_term_pools() -> tuple[dict[str, list[str]], list[str]]:
    """Curated rare terms per category and the made-up drug reserve, minus common words, names and staff names.

    Each word keeps the first category (in :data:`wordlists.RARE_TERMS` order) that lists it. Returned lists are in
    the word lists' order (the caller shuffles them with its seeded generator).
    """
    banned = _banned_words()
    seen: set[str] = set()
    pools: dict[str, list[str]] = {}
    for category, terms in W.RARE_TERMS.items():
        keep = []
        for t in terms:
            t = t.lower()
            if t.isalpha() and t not in banned and t not in seen:
                keep.append(t)
                seen.add(t)
        pools[category] = keep
    reserve = [t for t in W.synthetic_drug_names() if t not in banned and t not in seen]
    return pools, reserve


@lru_cache(maxsize=None)
def deep_reserve() -> tuple[str, ...]:
    """The made-up drug names drawn once the curated pools and the reserve are used up
    (:func:`~toolkit.samples.wordlists.synthetic_drug_names_deep` minus common words, names and curated terms)."""
    pools, reserve = rare_term_pools()
    banned = _banned_words() | {t for p in pools.values() for t in p} | set(reserve)
    return tuple(t for t in W.synthetic_drug_names_deep() if t not in banned)


# =================================================================================================================
# People, pools and rare-term allocation
# =================================================================================================================


@dataclass(frozen=True)
class Doctor:
    first: str
    last: str

    @property
    def full(self) -> str:
        return f"{self.first} {self.last}"


@dataclass
class Patient:
    """Everything the notes say about one patient (all values fixed once per patient)."""

    pid: str
    split: str
    sex: str
    first: str
    last: str
    age: int
    dob: date
    mrn: str
    phone: str
    street: str
    city: str
    state: str
    zipcode: str
    spouse: str
    smoking: str
    ppd: str
    pack_years: int
    quit_year: int
    admit: date
    attending: Doctor
    pcp: Doctor
    hospital: str
    diagnosis: str
    complaint: str
    problems: list[str]
    meds: list[str]
    terms: list[tuple[str, str]] = field(default_factory=list)  # (category, term), categories may repeat


class TermAllocator:
    """Hands out rare terms: unique ones from per-category queues, shared ones to 2–3 patients of one group.

    Categories are drawn with weights proportional to their curated pool size (drugs also count part of the made-up
    reserve). A category whose queue is empty is skipped while others still have terms. When
    everything is used up (a few thousand patients) drugs come from :func:`deep_reserve` (~100,000 more made-up
    names, shuffled at first use), so patients keep terms of their own at 10,000 patients and beyond
    (tests/test_samples.py); only a patient who already holds two drugs when nothing else is left gets a term reused
    at random. Nothing draws from the deep reserve before the pools run out: smaller corpora (the sample data) are
    the same as without it.
    """

    def __init__(self, rng: random.Random, pools: dict[str, list[str]], reserve: list[str]):
        self.rng = rng
        self.pools = {c: list(p) for c, p in pools.items()}
        self.queues = {c: rng.sample(p, len(p)) for c, p in pools.items()}
        self.reserve = rng.sample(reserve, len(reserve))
        self.categories = list(pools)
        self.weights = {c: float(len(p)) for c, p in pools.items()}
        self.weights["drug"] += RESERVE_WEIGHT * len(self.reserve)
        self.open_shared: dict[str, list[list[Any]]] = {}
        self.deep: list[str] | None = None  # deep_reserve(), shuffled when the reserve is first used up

    def _has_left(self, category: str) -> bool:
        """Whether ``category`` still has an unused term (drugs: the deep reserve counts, not built until needed)."""
        if self.queues[category]:
            return True
        return category == "drug" and (bool(self.reserve) or self.deep is None or bool(self.deep))

    def _allowed(self, category: str, held: list[tuple[str, str]]) -> bool:
        return sum(c == category for c, _ in held) < MAX_PER_CATEGORY.get(category, 1)

    def _pick_category(self, held: list[tuple[str, str]]) -> str:
        cats = [c for c in self.categories if self._allowed(c, held)]
        fresh = [c for c in cats if self._has_left(c)]
        cats = fresh or cats
        return weighted_choice(self.rng, cats, [self.weights[c] for c in cats])

    def _take(self, category: str, held: list[tuple[str, str]]) -> str:
        queue = self.queues[category]
        if queue:
            return queue.pop()
        if category == "drug" and self.reserve:
            return self.reserve.pop()
        if category == "drug":
            if self.deep is None:
                self.deep = self.rng.sample(deep_reserve(), len(deep_reserve()))
            if self.deep:
                return self.deep.pop()
        taken = {t for _, t in held}
        return self.rng.choice([t for t in self.pools[category] if t not in taken])

    def _shared(self, group: str, held: list[tuple[str, str]]) -> tuple[str, str]:
        """A shared term for a patient of ``group``: join an open one, or open a new one for 2–3 patients."""
        open_list = self.open_shared.setdefault(group, [])
        taken = {t for _, t in held}
        for entry in open_list:
            term, category, left = entry
            if self._allowed(category, held) and term not in taken:
                entry[2] -= 1
                if entry[2] == 0:
                    open_list.remove(entry)
                return category, term
        category = self._pick_category(held)
        term = self._take(category, held)
        open_list.append([term, category, self.rng.choice((1, 2))])
        return category, term

    def assign(self, group: str) -> list[tuple[str, str]]:
        """Rare terms ``(category, term)`` for one patient: 2–4 distinct terms."""
        n = weighted_choice(self.rng, (2, 3, 4), TERM_COUNT_WEIGHTS)
        held: list[tuple[str, str]] = []
        while len(held) < n:
            if self.rng.random() < SHARED_TERM_SHARE:
                category, term = self._shared(group, held)
            else:
                category = self._pick_category(held)
                term = self._take(category, held)
            held.append((category, term))
        return held


def split_sizes(n: int, splits: Sequence[tuple[str, float]]) -> list[tuple[str, int]]:
    """Integer sizes per split (rounded; the last split takes the remainder)."""
    total = sum(f for _, f in splits)
    sizes = []
    left = n
    for i, (name, frac) in enumerate(splits):
        k = left if i == len(splits) - 1 else min(left, round(n * frac / total))
        sizes.append((name, k))
        left -= k
    return sizes


def _clean_name(draw: Callable[[], str], banned: frozenset[str], taken: set[str] | None = None,
                tries: int = 50) -> str:
    """A Faker name whose words are not common template words (and, if ``taken`` is given, not already used)."""
    for _ in range(tries):
        name = draw()
        if not set(words_of(name)) & banned and (taken is None or name not in taken):
            return name
    return name


def make_doctors(fake: Any, banned: frozenset[str]) -> list[Doctor]:
    """The shared doctor pool: distinct surnames."""
    doctors: list[Doctor] = []
    surnames: set[str] = set()
    while len(doctors) < N_DOCTORS:
        last = _clean_name(fake.last_name, banned, surnames)
        first = _clean_name(fake.first_name, banned)
        surnames.add(last)
        doctors.append(Doctor(first, last))
    return doctors


def make_hospitals(fake: Any, banned: frozenset[str]) -> list[str]:
    """The shared hospital pool (five distinct names)."""
    patterns = ("{last} Memorial Hospital", "Saint {first} Medical Center", "{city} General Hospital",
                "{last} Regional Medical Center", "{city} Community Hospital")
    out: list[str] = []
    for pattern in patterns[:N_HOSPITALS]:
        out.append(pattern.format(last=_clean_name(fake.last_name, banned),
                                  first=_clean_name(fake.first_name, banned),
                                  city=_clean_name(fake.city, banned)))
    return out


def _random_date(rng: random.Random, start: date, end: date) -> date:
    return date.fromordinal(rng.randint(start.toordinal(), end.toordinal()))


def _phone(rng: random.Random) -> str:
    area = rng.choice(AREA_CODES)
    exchange = rng.randint(201, 989)
    line = rng.randint(0, 9999)
    fmt = rng.random()
    if fmt < 0.6:
        return f"({area}) {exchange}-{line:04d}"
    if fmt < 0.85:
        return f"{area}-{exchange}-{line:04d}"
    return f"{area}.{exchange}.{line:04d}"


def _problems(rng: random.Random, sex: str) -> list[str]:
    """Two or three chronic problems (prostate problems only for men)."""
    options = [p for p in W.CHRONIC_PROBLEMS if sex == "M" or "prostat" not in p]
    return rng.sample(options, rng.randint(2, 3))


def make_patient(pid: str, split: str, rng: random.Random, fake: Any, banned: frozenset[str],
                 surnames: set[str], mrns: set[str], doctors: list[Doctor], hospitals: list[str]) -> Patient:
    """Draw one patient's fixed attributes (names and address from Faker, everything else from ``rng``)."""
    sex = "F" if rng.random() < 0.5 else "M"
    first = _clean_name(fake.first_name_female if sex == "F" else fake.first_name_male, banned)
    # Surnames mostly distinct: redraw a few times when taken, so common names still repeat now and then.
    last = _clean_name(fake.last_name, banned, surnames, tries=4)
    surnames.add(last)
    age = rng.randint(19, 94)
    admit = _random_date(rng, date(2008, 1, 1), date(2019, 12, 31))
    dob = admit - timedelta(days=age * 365 + rng.randint(1, 360))
    mrn = str(rng.randint(1_000_000, 9_999_999))
    while mrn in mrns:
        mrn = str(rng.randint(1_000_000, 9_999_999))
    mrns.add(mrn)
    street = _clean_name(fake.street_address, banned)
    city = _clean_name(fake.city, banned)
    state = fake.state_abbr(include_territories=False) if rng.random() < 0.7 else fake.state()
    smoking = weighted_choice(rng, SMOKING_CLASSES, SMOKING_WEIGHTS)
    attending, pcp = rng.sample(doctors, 2)
    diagnosis = rng.choice(sorted(W.DIAGNOSES))
    return Patient(
        pid=pid, split=split, sex=sex, first=first, last=last, age=age, dob=dob, mrn=mrn, phone=_phone(rng),
        street=street, city=city, state=state, zipcode=f"{rng.randint(1001, 99950):05d}",
        spouse=rng.choice(("wife", "partner")) if sex == "M" else rng.choice(("husband", "partner")),
        smoking=smoking, ppd=rng.choice(PPD), pack_years=rng.randint(5, 60),
        quit_year=rng.randint(max(1975, admit.year - 40), admit.year - 1), admit=admit, attending=attending,
        pcp=pcp, hospital=rng.choice(hospitals), diagnosis=diagnosis, complaint=rng.choice(W.COMPLAINTS),
        problems=_problems(rng, sex), meds=rng.sample(W.COMMON_MEDS, rng.randint(2, 3)),
    )
