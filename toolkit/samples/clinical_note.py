"""One clinical note being written: :class:`Note` holds the builder, the patient, the random generator and the
slot table, and writes the sections the layouts (:mod:`toolkit.samples.clinical_layouts`) are made of."""

from __future__ import annotations

import random
from collections import ChainMap
from collections.abc import Sequence
from datetime import date, timedelta

from toolkit.samples import wordlists as W
from toolkit.samples.clinical_people import Doctor, Patient
from toolkit.samples.clinical_templates import (ALCOHOL, EXAM, HISTORY_CATEGORIES, HOUSEHOLD, MONTHS, SERVICES, SMOKING,
                                                SOCIAL_CATEGORIES, STAFF, TERM_FIRST, TERM_SECOND)
from toolkit.samples.text import Phi, Slot, TextBuilder, article


def _fmt_date(d: date, style: int) -> str:
    if style == 0:
        return f"{d.month:02d}/{d.day:02d}/{d.year}"
    if style == 1:
        return d.isoformat()
    if style == 2:
        return f"{MONTHS[d.month - 1]} {d.day}, {d.year}"
    return f"{d.month}/{d.day}/{d.year % 100:02d}"


class Note:
    """One note being written: the builder, the patient, the random generator and the slot table."""

    def __init__(self, patient: Patient, note_date: date, rng: random.Random, doctors: list[Doctor],
                 n_notes: int = 2):
        self.p = patient
        # A patient with a single note still gets each rare term at least twice most of the time.
        self.p_second = 0.9 if n_notes == 1 else 0.4
        self.rng = rng
        self.b = TextBuilder()
        self.date = note_date
        self.style = rng.randrange(4)
        self.doctors = doctors
        self.slots = self._slots()

    # -- slots ----------------------------------------------------------------------------------------------------
    def _slots(self) -> dict[str, Slot]:
        p, rng = self.p, self.rng
        he = p.sex == "M"
        d = lambda x: Phi(_fmt_date(x, self.style), "DATE")  # noqa: E731
        slots: dict[str, Slot] = {
            "title": "Mr." if he else rng.choice(("Ms.", "Mrs.")),
            "first": Phi(p.first, "PATIENT"), "last": Phi(p.last, "PATIENT"),
            "full": Phi(f"{p.first} {p.last}", "PATIENT"), "caps": Phi(f"{p.last.upper()}, {p.first}", "PATIENT"),
            "age": Phi(str(p.age), "AGE"), "a_age": self._a_age,
            "sex_word": "man" if he else "woman", "sexc": "M" if he else "F",
            "pron": "he" if he else "she", "Pron": "He" if he else "She", "poss": "his" if he else "her",
            "Poss": "His" if he else "Her", "spouse": p.spouse,
            "mrn": Phi(p.mrn, "ID"), "phone": Phi(p.phone, "PHONE"), "city": Phi(p.city, "LOCATION"),
            "state": Phi(p.state, "LOCATION"), "street": Phi(p.street, "LOCATION"), "zip": Phi(p.zipcode, "LOCATION"),
            "att": Phi(p.attending.full, "DOCTOR"), "att_last": Phi(p.attending.last, "DOCTOR"),
            "pcp": Phi(p.pcp.full, "DOCTOR"), "pcp_last": Phi(p.pcp.last, "DOCTOR"),
            "consult": lambda: Phi(rng.choice(self.doctors).last, "DOCTOR"),
            "staff": lambda: Phi(rng.choice(W.STAFF_SURNAMES), "DOCTOR"),
            "hosp": Phi(p.hospital, "HOSPITAL"), "service": lambda: rng.choice(SERVICES),
            "adm": d(p.admit), "dis": d(p.admit + timedelta(days=rng.randint(2, 9))), "date": d(self.date),
            "dob": d(p.dob), "fu_date": d(self.date + timedelta(days=rng.randint(7, 30))),
            "img_date": d(self.date - timedelta(days=rng.randint(0, 3))),
            "quit_year": Phi(str(p.quit_year), "DATE"), "ppd": p.ppd, "pack_years": str(p.pack_years),
            "rel_age": Phi(str(rng.randint(55, 92)), "AGE"),
            "ndays": lambda: str(rng.randint(2, 10)), "dx": p.diagnosis, "complaint": p.complaint,
            "temp": lambda: f"{rng.uniform(97.0, 101.2):.1f}", "hr": lambda: str(rng.randint(58, 118)),
            "bp": lambda: f"{rng.randint(98, 168)}/{rng.randint(56, 96)}", "rr": lambda: str(rng.randint(12, 24)),
            "spo2": lambda: str(rng.randint(89, 100)), "na": lambda: str(rng.randint(128, 145)),
            "k": lambda: f"{rng.uniform(3.2, 5.4):.1f}", "cr": lambda: f"{rng.uniform(0.6, 2.4):.1f}",
            "wbc": lambda: f"{rng.uniform(3.8, 16.5):.1f}", "hgb": lambda: f"{rng.uniform(7.8, 15.2):.1f}",
            "plt": lambda: str(rng.randint(110, 420)),
        }
        return slots

    def _a_age(self) -> str:
        """Write ``a 67`` / ``an 85`` (the age is a PII value, the article is not)."""
        self.b.add("an " if self.p.age in (11, 18) or str(self.p.age).startswith("8") else "a ")
        self.b.phi(str(self.p.age), "AGE")
        return ""

    # -- writing helpers --------------------------------------------------------------------------------------------
    def add(self, s: str) -> None:
        self.b.add(s)

    def say(self, template: str, end: str = " ") -> None:
        self.b.fill(template, self.slots)
        self.b.add(end)

    def one(self, options: Sequence[str], end: str = " ") -> None:
        self.say(self.rng.choice(options), end)

    def some(self, options: Sequence[str], lo: int, hi: int, end: str = " ") -> None:
        for t in self.rng.sample(list(options), self.rng.randint(lo, min(hi, len(options)))):
            self.say(t, end)

    def say_term(self, options: Sequence[str], category: str, term: str) -> None:
        """One sentence about a rare term: the template's ``{category}``/``{a_category}`` slot holds the term."""
        self.b.fill(self.rng.choice(options),
                    ChainMap({category: term, "a_" + category: f"{article(term)} {term}"}, self.slots))
        self.b.add(" ")

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    # -- sections ---------------------------------------------------------------------------------------------------
    def first_mentions(self, categories: Sequence[str]) -> None:
        """First mention of each of the patient's terms in these categories (every note mentions every term)."""
        for category, term in self.p.terms:
            if category in categories:
                self.say_term(TERM_FIRST[category], category, term)

    def second_mentions(self) -> None:
        """A second mention of each term (plan, course, education), with the note's probability."""
        for category, term in self.p.terms:
            if self.chance(self.p_second):
                self.say_term(TERM_SECOND[category], category, term)

    def smoking(self) -> None:
        if SMOKING[self.p.smoking]:
            self.one(SMOKING[self.p.smoking])

    def staff(self, p: float = 0.75) -> None:
        if self.chance(p):
            self.one(STAFF, end="\n")
            if self.chance(0.3):
                self.one(STAFF, end="\n")

    def pmh_list(self) -> None:
        self.add(", ".join(self.p.problems) + ". ")
        self.first_mentions(HISTORY_CATEGORIES)

    def med_list(self) -> None:
        self.add("; ".join(self.rng.sample(self.p.meds, len(self.p.meds))) + ". ")
        self.first_mentions(("drug",))

    def vitals(self) -> None:
        o2 = "room air" if self.chance(0.7) else f"{self.rng.randint(1, 4)} L nasal cannula"
        self.say("T {temp} HR {hr} BP {bp} RR {rr} SpO2 {spo2}% on " + o2 + ".")

    def exam(self, k: int) -> None:
        for group in self.rng.sample(EXAM, k):
            self.one(group)

    def course(self) -> None:
        for sentence in W.DIAGNOSES[self.p.diagnosis]:
            self.say(sentence)

    def social(self) -> None:
        self.first_mentions(SOCIAL_CATEGORIES)
        self.smoking()
        if self.chance(0.6):
            self.one(ALCOHOL)
        self.one(HOUSEHOLD)
