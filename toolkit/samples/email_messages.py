"""Writing the synthetic e-mails: :class:`EmailGenerator` holds the people, the Zipf weights and the seeded random
generator, and writes one message at a time (header lines, greeting, body, closing, signature, and for replies /
forwards a quoted header block) through a :class:`~toolkit.samples.text.TextBuilder`, so every address, name, phone
number and date gets its gold span."""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from toolkit.samples.email_people import Person, make_people, zipf_weights
from toolkit.samples.email_templates import (CLOSINGS, COMMON, HUBS, MENTION, MONTHS, MONTHS_SHORT, TOPICS, VOLUMES,
                                             WEEKDAYS, WEEKDAYS_LONG)
from toolkit.samples.text import Phi, Slot, TextBuilder, weighted_choice


def _header_date(t: datetime) -> str:
    offset = "-0700" if 4 <= t.month <= 10 else "-0800"
    return f"{WEEKDAYS[t.weekday()]}, {t.day} {MONTHS_SHORT[t.month - 1]} {t.year} {t:%H:%M:%S} {offset}"


def _sent_date(t: datetime) -> str:
    hour = t.hour % 12 or 12
    return f"{WEEKDAYS_LONG[t.weekday()]}, {MONTHS[t.month - 1]} {t.day}, {t.year} {hour}:{t.minute:02d} " \
           f"{'AM' if t.hour < 12 else 'PM'}"


def _forward_date(t: datetime) -> str:
    hour = t.hour % 12 or 12
    return f"{t.month:02d}/{t.day:02d}/{t.year} {hour:02d}:{t.minute:02d} {'AM' if t.hour < 12 else 'PM'}"


def _short_date(t: datetime, rng: random.Random) -> str:
    style = rng.randrange(3)
    if style == 0:
        return f"{MONTHS[t.month - 1]} {t.day}"
    if style == 1:
        return f"{t.month}/{t.day}"
    return f"{WEEKDAYS_LONG[t.weekday()]}, {MONTHS[t.month - 1]} {t.day}"


def office_time(rng: random.Random, start: datetime, end: datetime) -> datetime:
    """A random time between ``start`` and ``end``, mostly on weekdays during office hours."""
    days = (end - start).days
    while True:
        day = start + timedelta(days=rng.randrange(days))
        if day.weekday() < 5 or rng.random() < 0.15:
            break
    hour = rng.randint(7, 18) if rng.random() < 0.85 else rng.randrange(24)
    return day.replace(hour=hour, minute=rng.randrange(60), second=rng.randrange(60))


class _Message:
    """One message being written."""

    def __init__(self, gen: "EmailGenerator", when: datetime, sender: int):
        self.g = gen
        self.rng = gen.rng
        self.b = TextBuilder()
        self.when = when
        self.sender = gen.people[sender]

    # -- pieces -----------------------------------------------------------------------------------------------------
    def email(self, person: Person, capitalised: bool = False) -> None:
        addr = person.address
        if capitalised:
            local, domain = addr.split("@", 1)
            addr = ".".join(p[:1].upper() + p[1:] for p in local.split(".")) + "@" + domain.capitalize()
        self.b.phi(addr, "EMAIL")

    def display(self, person: Person) -> None:
        """``Jane Doe <addr>``, ``"Doe, Jane" <addr>`` or ``JANE DOE <addr>``."""
        style = self.rng.random()
        if style < 0.6:
            self.b.phi(person.full, "NAME")
        elif style < 0.85:
            self.b.add('"')
            self.b.phi(f"{person.last}, {person.first}", "NAME")
            self.b.add('"')
        else:
            self.b.phi(person.full.upper(), "NAME")
        self.b.add(" <")
        self.email(person)
        self.b.add(">")

    def address_field(self, name: str, people: Sequence[Person], bare_share: float) -> None:
        """A header line ``Name: a, b`` (bare addresses or display forms)."""
        self.b.add(f"{name}: ")
        for i, person in enumerate(people):
            if i:
                self.b.add(", ")
            if self.rng.random() < bare_share:
                self.email(person)
            else:
                self.display(person)
        self.b.add("\n")

    def slots(self, other: Person) -> dict[str, Slot]:
        rng = self.rng
        return {
            "hub": lambda: rng.choice(HUBS), "volume": lambda: rng.choice(VOLUMES),
            "price": lambda: f"${rng.uniform(0.02, 9.5):.2f}", "deal": lambda: str(rng.randint(100000, 999999)),
            "time": lambda: f"{rng.randint(8, 16) % 12 or 12}:{rng.choice(('00', '15', '30', '45'))} "
                            f"{'AM' if rng.random() < 0.4 else 'PM'}",
            "room": lambda: str(rng.randint(2, 50)) + f"{rng.randint(1, 99):02d}",
            "amount": lambda: f"${rng.randint(5, 900) * 1000:,}",
            "date": lambda: Phi(_short_date(self.when + timedelta(days=rng.randint(1, 21)), rng), "DATE"),
            "name": lambda: Phi(self.g.random_person().full, "NAME"),
            "my_phone": Phi(self.sender.phone, "PHONE"),
            "other_addr": Phi(other.address, "EMAIL"), "other_name": Phi(other.full, "NAME"),
        }

    def body(self, topic: str, n_sentences: int, mention: Person | None = None) -> None:
        """Sentences of one topic plus a common sentence; ``mention`` adds a sentence naming an address."""
        sentences = list(self.rng.sample(TOPICS[topic][1], min(n_sentences, len(TOPICS[topic][1]))))
        if self.rng.random() < 0.6:
            sentences.append(self.rng.choice(COMMON))
        other = mention or self.g.random_person()
        if mention is not None:
            sentences.insert(self.rng.randint(0, len(sentences)), self.rng.choice(MENTION))
        slots = self.slots(other)
        for i, s in enumerate(sentences):
            if i:
                self.b.add(" " if self.rng.random() < 0.7 else "\n\n")
            self.b.fill(s, slots)
        self.b.add("\n")

    def greeting(self, to: Sequence[Person]) -> None:
        if self.rng.random() < 0.3:
            return
        if len(to) > 2 and self.rng.random() < 0.6:
            self.b.add(self.rng.choice(("All,", "Team,", "Everyone -")) + "\n\n")
            return
        pattern = self.rng.choice(("{},", "Hi {},", "{} -", "Dear {},", "Hello {},"))
        before, after = pattern.split("{}")
        self.b.add(before)
        self.b.phi(to[0].first, "NAME")
        self.b.add(after + "\n\n")

    def closing(self) -> None:
        s = self.sender
        self.b.add("\n" + self.rng.choice(CLOSINGS) + "\n")
        if self.rng.random() < 0.6:
            self.b.phi(s.first, "NAME")
        else:
            self.b.phi(s.full, "NAME")
        self.b.add("\n")
        if self.rng.random() < 0.5:  # signature block
            self.b.add("\n")
            self.b.phi(s.full, "NAME")
            self.b.add(f"\n{s.title}\n{s.company}\n")
            self.email(s, capitalised=self.rng.random() < 0.15)
            self.b.add("\n")
            self.b.phi(s.phone, "PHONE")
            self.b.add("\n")

    def quoted(self, author: Person, to: Sequence[Person], subject: str, topic: str, forwarded: bool) -> None:
        """A quoted earlier message (reply) or a forwarded one, with its own header block."""
        earlier = self.when - timedelta(minutes=self.rng.randint(20, 4000))
        self.b.add("\n")
        if forwarded:
            self.b.add("---------------------- Forwarded by ")
            self.b.phi(self.sender.full, "NAME")
            self.b.add("/HOU/ECT on ")
            self.b.phi(_forward_date(self.when - timedelta(minutes=self.rng.randint(1, 30))), "DATE")
            self.b.add(" ---------------------------\n\n")
        else:
            self.b.add("-----Original Message-----\n")
        self.address_field("From", [author], bare_share=0.5)
        self.b.add("Sent: ")
        self.b.phi(_sent_date(earlier), "DATE")
        self.b.add("\n")
        self.address_field("To", to, bare_share=0.6)
        self.b.add(f"Subject: {subject}\n\n")
        self.body(topic, self.rng.randint(1, 3))


class EmailGenerator:
    """Holds the people, the Zipf weights and the random generator while messages are written."""

    def __init__(self, n_addresses: int, n_one_off: int, seed: int):
        from faker import Faker

        self.rng = random.Random(seed)
        fake = Faker("en_US")
        fake.seed_instance(seed)
        self.people = make_people(n_addresses, n_one_off, self.rng, fake)
        self.regular = [i for i, p in enumerate(self.people) if not p.one_off]
        self.weights = zipf_weights(len(self.regular))
        for i in self.regular:
            self.people[i].contacts = self.draw(6, exclude={i})

    def draw(self, k: int, exclude: Iterable[int] = ()) -> list[int]:
        """``k`` distinct regular people drawn by Zipf weight, none in ``exclude``."""
        exclude = set(exclude)
        out: list[int] = []
        while len(out) < k:
            i = weighted_choice(self.rng, self.regular, self.weights)
            if i not in exclude and i not in out:
                out.append(i)
        return out

    def random_person(self) -> Person:
        return self.people[weighted_choice(self.rng, self.regular, self.weights)]

    def recipients(self, sender: int, k: int) -> list[int]:
        """Recipients: mostly the sender's usual contacts, otherwise anyone (Zipf)."""
        out: list[int] = []
        contacts = self.people[sender].contacts
        while len(out) < k:
            i = self.rng.choice(contacts) if self.rng.random() < 0.65 else self.draw(1, {sender})[0]
            if i != sender and i not in out:
                out.append(i)
        return out

    def message(self, when: datetime, one_off: Person | None) -> tuple[str, list[tuple[int, int, str]], str]:
        """Text, spans and sender address of one message (``one_off`` must appear once, as Cc or in the body)."""
        rng = self.rng
        sender = weighted_choice(rng, self.regular, self.weights)
        m = _Message(self, when, sender)
        to = [self.people[i] for i in self.recipients(sender, weighted_choice(rng, (1, 2, 3, 4, 5),
                                                                             (0.6, 0.22, 0.1, 0.05, 0.03)))]
        cc = [self.people[i] for i in self.draw(rng.randint(1, 2), {sender} | {self.people.index(p) for p in to})] \
            if rng.random() < 0.25 else []
        one_off_in_cc = one_off is not None and rng.random() < 0.5
        if one_off_in_cc:
            cc.append(one_off)
        topic = rng.choice(sorted(TOPICS))
        subject = rng.choice(TOPICS[topic][0]).replace("{hub}", rng.choice(HUBS))
        kind = weighted_choice(rng, ("new", "reply", "forward"), (0.55, 0.30, 0.15))
        prefix = {"new": "", "reply": "Re: ", "forward": "FW: "}[kind]

        b = m.b
        b.add("Date: ")
        b.phi(_header_date(when), "DATE")
        b.add("\n")
        m.address_field("From", [m.sender], bare_share=0.6)
        m.address_field("To", to, bare_share=0.8)
        if cc:
            m.address_field("Cc", cc, bare_share=0.8)
        b.add(f"Subject: {prefix}{subject}\n\n")
        m.greeting(to)
        m.body(topic, rng.randint(2, 5), mention=None if one_off is None or one_off_in_cc else one_off)
        m.closing()
        if kind == "reply":
            m.quoted(to[0], [m.sender], subject, topic, forwarded=False)
        elif kind == "forward":
            author = self.random_person()
            m.quoted(author, [self.random_person()], subject, topic, forwarded=True)
        return b.text(), b.spans, m.sender.address
