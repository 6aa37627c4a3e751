"""The address owners of the synthetic e-mail corpus: Faker names, an address format and a domain each, and the
Zipf weights that make a few addresses very frequent."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from toolkit.samples.email_templates import AREA_CODES, DOMAINS, FORMATS, PLUS_TAGS, TITLES
from toolkit.samples.text import weighted_choice

ZIPF_EXPONENT = 1.2


@dataclass
class Person:
    """One address owner."""

    first: str
    last: str
    address: str  # canonical, lower case
    phone: str
    title: str
    company: str
    one_off: bool = False
    contacts: list[int] = field(default_factory=list)

    @property
    def full(self) -> str:
        return f"{self.first} {self.last}"


def _alpha(s: str) -> str:
    return "".join(ch for ch in s.lower() if ch.isalpha())


def _local_part(first: str, last: str, fmt: str, rng: random.Random) -> str:
    f, l = _alpha(first), _alpha(last)
    return {
        "first.last": f"{f}.{l}", "firstlast": f"{f}{l}", "f.last": f"{f[0]}.{l}", "first_l": f"{f}_{l[0]}",
        "flast": f"{f[0]}{l}", "last.first": f"{l}.{f}", "first.last+tag": f"{f}.{l}+{rng.choice(PLUS_TAGS)}",
    }[fmt]


def _phone(rng: random.Random, domain: str) -> str:
    if domain.endswith("enron.com"):
        area, exchange = "713", rng.choice(("853", "345", "646"))
    else:
        area, exchange = rng.choice(AREA_CODES), str(rng.randint(201, 989))
    return f"({area}) {exchange}-{rng.randint(0, 9999):04d}"


def make_people(n: int, n_one_off: int, rng: random.Random, fake: Any) -> list[Person]:
    """``n`` people with distinct addresses; the last ``n_one_off`` are one-off contacts."""
    people: list[Person] = []
    taken: set[str] = set()
    domains = [d for d, _, _ in DOMAINS]
    companies = {d: c for d, c, _ in DOMAINS}
    weights = [w for _, _, w in DOMAINS]
    fmts, fmt_weights = zip(*FORMATS)
    while len(people) < n:
        first, last = fake.first_name(), fake.last_name()
        if len(_alpha(first)) < 2 or len(_alpha(last)) < 2:
            continue
        domain = weighted_choice(rng, domains, weights)
        local = _local_part(first, last, weighted_choice(rng, fmts, fmt_weights), rng)
        address = f"{local}@{domain}"
        k = 2
        while address in taken:
            address = f"{local}{k}@{domain}"
            k += 1
        taken.add(address)
        company = companies[domain] or "Independent consultant"
        people.append(Person(first, last, address, _phone(rng, domain), rng.choice(TITLES), company,
                             one_off=len(people) >= n - n_one_off))
    return people


def zipf_weights(n: int, exponent: float = ZIPF_EXPONENT) -> list[float]:
    """Weights proportional to ``rank ** -exponent`` for ranks 1..n."""
    return [r ** -exponent for r in range(1, n + 1)]
