"""Synthetic Enron-style e-mail corpus with gold spans and address-extraction prompts.

Design (tests/test_samples.py checks it):

* ~300 addresses (Faker names; ``first.last@``, ``firstlast@``, ``f.last@``, ``first_l@``, ``flast@`` and a few
  plus-addresses) over ~20 domains. Senders and recipients are drawn from a Zipf law (exponent 1.2) over the
  "regular" addresses, so the head address appears well over 1,000 times in the training split; the remaining
  "one-off" addresses appear exactly once in the whole corpus (a Cc or a body mention), which guarantees singletons.
* Every message has header lines (``Date``, ``From``, ``To``, sometimes ``Cc``, ``Subject``), a blank line, a body of
  business sentences, often a signature with the sender's address and phone, and for replies / forwards a quoted
  header block (``-----Original Message-----``), so addresses repeat within a message.
* Gold spans: ``EMAIL`` (every address occurrence), ``NAME`` (display, greeting and signature names), ``PHONE``,
  ``DATE``. ``person_id`` is the sender's (lower-case) address.
* ``prompts.jsonl``: training messages cut right after a header field name (``From: ``, ``To: ``, ``Cc: ``) that is
  followed by a bare address; the address is the target. Mostly frequent targets, some rare ones.

Randomness: one :class:`random.Random` and one Faker instance, both seeded with ``seed``.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from toolkit.samples.clinical import Phi, Slot, TextBuilder, make_record, weighted_choice, write_records

LABELS: tuple[str, ...] = ("EMAIL", "NAME", "PHONE", "DATE")
ZIPF_EXPONENT = 1.2
DEFAULT_SPLITS: tuple[tuple[str, int], ...] = (("train", 2400), ("validation", 300), ("test", 300))

#: (domain, company in signatures, weight). Fictional companies plus common web-mail domains.
DOMAINS: tuple[tuple[str, str, float], ...] = (
    ("enron.com", "Enron North America Corp.", 0.46),
    ("ees.enron.com", "Enron Energy Services", 0.05),
    ("nwpipeline.com", "Northwest Pipeline Co.", 0.03),
    ("gulfcoastgas.com", "Gulf Coast Gas Marketing", 0.03),
    ("redrivertrading.com", "Red River Trading LLC", 0.03),
    ("lonestarutil.com", "Lone Star Utilities", 0.03),
    ("bayouenergy.com", "Bayou Energy Partners", 0.03),
    ("prairiewindpower.com", "Prairie Wind Power", 0.025),
    ("sierrapower.net", "Sierra Power Cooperative", 0.025),
    ("coastalhubgas.com", "Coastal Hub Gas", 0.025),
    ("ridgelinecap.com", "Ridgeline Capital", 0.025),
    ("mesabankcorp.com", "Mesa Bank Corp.", 0.02),
    ("pecanlawgroup.com", "Pecan Law Group LLP", 0.025),
    ("bluebonnetconsult.com", "Bluebonnet Consulting", 0.02),
    ("highplainsmidstream.com", "High Plains Midstream", 0.02),
    ("aol.com", "", 0.04),
    ("hotmail.com", "", 0.04),
    ("yahoo.com", "", 0.035),
    ("msn.com", "", 0.02),
    ("earthlink.net", "", 0.02),
)
#: Address formats and weights.
FORMATS: tuple[tuple[str, float], ...] = (
    ("first.last", 0.50), ("firstlast", 0.10), ("f.last", 0.14), ("first_l", 0.10), ("flast", 0.08),
    ("first.last+tag", 0.03), ("last.first", 0.05),
)
PLUS_TAGS = ("news", "lists", "trading", "work", "energy")
TITLES = ("Analyst", "Associate", "Manager", "Senior Specialist", "Director", "Vice President", "Trader",
          "Scheduler", "Senior Counsel", "Administrative Assistant", "Risk Analyst", "Credit Manager")
_AREA = ("713", "281", "832", "503", "415", "212", "402", "918", "214", "303", "312", "617")

# ---------------------------------------------------------------------------------------------------------------
# Body text
# ---------------------------------------------------------------------------------------------------------------

TOPICS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # topic: (subjects, sentences)
    "gas": (
        ("gas curve update", "bidweek volumes", "storage position", "basis quotes", "deal confirmation",
         "{hub} flows"),
        ("We are long about {volume} at {hub} for next month and need to move it before bidweek.",
         "The {hub} basis traded at {price} this morning, a bit wider than yesterday.",
         "Can you confirm the volumes on deal {deal} before the close?",
         "I spoke with the desk and they are comfortable with the position as it stands.",
         "Please make sure the curve is updated in the system before the {time} meeting.",
         "Storage injections look light relative to last year.",
         "The counterparty wants to extend the term through the end of the year at the same price.",
         "Let's hold off on hedging the rest until we see the weather forecast.",
         "Pipeline maintenance will cut capacity at {hub} starting {date}."),
    ),
    "power": (
        ("real-time schedule", "tagging problem", "load forecast", "outage update", "overnight coverage"),
        ("The schedule for tomorrow has been submitted to the ISO.",
         "We had a tagging problem on the {hub} path and the deal was cut for two hours.",
         "Please update the real-time sheet with the actual flows.",
         "Load came in above forecast again this afternoon.",
         "Can someone on the desk cover the overnight shift on {date}?",
         "The outage at the plant is expected to last through the weekend.",
         "Prices spiked to {price} in the peak hours and we were short.",
         "I will send the revised schedule once the ISO confirms."),
    ),
    "legal": (
        ("master agreement draft", "credit annex", "confidentiality agreement", "contract comments",
         "executed copy"),
        ("Attached is the latest draft of the master agreement with the changes we discussed.",
         "Legal has not yet signed off on the credit annex.",
         "Please send me your comments on section 4 by end of day.",
         "The counterparty is asking for a cap on liability that we cannot accept.",
         "I have forwarded the confidentiality agreement to {name} for signature.",
         "We need an executed copy before we can book the trade.",
         "The guaranty language still needs work before it goes out.",
         "Outside counsel will review the termination provisions by {date}."),
    ),
    "meeting": (
        ("meeting moved", "offsite agenda", "staff meeting", "quarterly review", "conference call"),
        ("The meeting has been moved to {time} in conference room EB{room}.",
         "Please let me know if you can attend the offsite on {date}.",
         "Lunch will be provided.",
         "Dial-in details are below if you cannot attend in person.",
         "We will review the quarterly numbers and the plan for next year.",
         "{name} will present the origination pipeline.",
         "Please bring a copy of the latest position report.",
         "The call will start at {time} sharp."),
    ),
    "admin": (
        ("performance reviews", "expense policy", "timesheets", "new analyst", "parking passes"),
        ("Please complete your performance reviews by {date}.",
         "The new expense policy takes effect next month.",
         "Remember to submit your timesheets before noon.",
         "{name} will be joining the group as an analyst next week.",
         "Parking passes for the new garage are available from the front desk.",
         "Please update your emergency contact information in the HR system.",
         "The holiday schedule has been posted on the intranet."),
    ),
    "it": (
        ("Notes migration", "laptop pickup", "shared drive", "system upgrade", "password reset"),
        ("The Notes migration for our floor is scheduled for this weekend.",
         "Please save your files to the shared drive before the upgrade.",
         "If you have problems logging in, call the help desk.",
         "Your new laptop is ready for pickup on the 32nd floor.",
         "The trading system will be down from {time} for maintenance.",
         "Passwords must be changed every ninety days from now on."),
    ),
    "finance": (
        ("budget", "P&L by desk", "invoice question", "quarter close", "reconciliation"),
        ("The budget for next year is due to corporate by {date}.",
         "We are about {amount} over plan for the quarter, mostly due to travel.",
         "Can you send me the updated P&L by desk?",
         "Accounting needs the invoice number before they can release the payment.",
         "I reconciled the numbers and found a difference of {amount}.",
         "The accrual for the transport charges was booked twice.",
         "Please approve the attached invoice so we can pay it this week."),
    ),
    "regulatory": (
        ("FERC order", "tariff filing", "comments deadline", "commission hearing"),
        ("FERC issued the order on the pipeline tariff late yesterday.",
         "We should file our comments before the deadline on {date}.",
         "The commission hearing has been postponed.",
         "Government affairs is putting together a summary for the management committee.",
         "The proposed rule would change how capacity is released.",
         "{name} is coordinating our response with outside counsel."),
    ),
    "credit": (
        ("credit limit", "VaR report", "exposure report", "position files"),
        ("Credit has approved a limit of {amount} for the new counterparty.",
         "The VaR report shows we are close to the desk limit.",
         "Please run the exposure report again with the new prices.",
         "Risk needs the position files by {time}.",
         "The counterparty posted collateral this morning.",
         "We should ask for a letter of credit before doing more term deals."),
    ),
    "social": (
        ("lunch", "the game", "congratulations", "charity run", "happy hour"),
        ("Thanks for lunch yesterday, it was good to catch up.",
         "Are you going to the game on {date}?",
         "Congratulations on the new role!",
         "We are putting together a team for the charity run.",
         "Hope the move went well.",
         "A few of us are going for drinks after work if you want to join."),
    ),
}
COMMON = (
    "Let me know if you have any questions.",
    "Thanks for your help on this.",
    "I will follow up tomorrow.",
    "Please see below.",
    "See attached.",
    "Call me if you want to discuss.",
    "Call me at {my_phone} if you want to discuss.",
    "I am out of the office the rest of the week.",
    "Please forward to anyone I missed.",
)
MENTION = (
    "Please contact {other_addr} if you have questions.",
    "You can also reach {other_name} at {other_addr}.",
    "I copied {other_addr} on the earlier note.",
    "Please send the file to {other_addr} as well.",
)
HUBS = ("Henry Hub", "Waha", "SoCal Border", "Chicago Citygate", "PG&E Citygate", "Malin", "Katy",
        "Houston Ship Channel", "Transco Z6", "Permian", "Palo Verde", "Mid-C", "COB", "NEPOOL")
VOLUMES = ("10,000 MMBtu/d", "25,000 MMBtu/d", "5,000 MMBtu/d", "50 MW", "100 MW", "2 Bcf")
CLOSINGS = ("Thanks,", "Regards,", "Best,", "Thanks!", "Cheers,", "Thank you,")
_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_WEEKDAYS_LONG = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MON = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")


# ---------------------------------------------------------------------------------------------------------------
# People
# ---------------------------------------------------------------------------------------------------------------


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
        area, exchange = rng.choice(_AREA), str(rng.randint(201, 989))
    return f"({area}) {exchange}-{rng.randint(0, 9999):04d}"


def _make_people(n: int, n_one_off: int, rng: random.Random, fake: Any) -> list[Person]:
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


# ---------------------------------------------------------------------------------------------------------------
# Messages
# ---------------------------------------------------------------------------------------------------------------


def _header_date(t: datetime) -> str:
    offset = "-0700" if 4 <= t.month <= 10 else "-0800"
    return f"{_WEEKDAYS[t.weekday()]}, {t.day} {_MON[t.month - 1]} {t.year} {t:%H:%M:%S} {offset}"


def _sent_date(t: datetime) -> str:
    hour = t.hour % 12 or 12
    return f"{_WEEKDAYS_LONG[t.weekday()]}, {_MONTHS[t.month - 1]} {t.day}, {t.year} {hour}:{t.minute:02d} " \
           f"{'AM' if t.hour < 12 else 'PM'}"


def _forward_date(t: datetime) -> str:
    hour = t.hour % 12 or 12
    return f"{t.month:02d}/{t.day:02d}/{t.year} {hour:02d}:{t.minute:02d} {'AM' if t.hour < 12 else 'PM'}"


def _short_date(t: datetime, rng: random.Random) -> str:
    style = rng.randrange(3)
    if style == 0:
        return f"{_MONTHS[t.month - 1]} {t.day}"
    if style == 1:
        return f"{t.month}/{t.day}"
    return f"{_WEEKDAYS_LONG[t.weekday()]}, {_MONTHS[t.month - 1]} {t.day}"


def _office_time(rng: random.Random, start: datetime, end: datetime) -> datetime:
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

    def __init__(self, gen: "_EmailGenerator", when: datetime, sender: int):
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


class _EmailGenerator:
    """Holds the people, the Zipf weights and the random generator while messages are written."""

    def __init__(self, n_addresses: int, n_one_off: int, seed: int):
        from faker import Faker

        self.rng = random.Random(seed)
        fake = Faker("en_US")
        fake.seed_instance(seed)
        self.people = _make_people(n_addresses, n_one_off, self.rng, fake)
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


# ---------------------------------------------------------------------------------------------------------------
# Prompts
# ---------------------------------------------------------------------------------------------------------------

PROMPT_FIELDS = ("From: ", "To: ", "Cc: ")


def _prompt_candidates(doc: dict[str, Any]) -> list[tuple[int, str]]:
    """(start, address) of every address that directly follows ``From: ``/``To: ``/``Cc: `` at a line start."""
    text = doc["text"]
    out = []
    for sp in doc["spans"]:
        if sp["label"] != "EMAIL":
            continue
        start = sp["start"]
        for name in PROMPT_FIELDS:
            head = start - len(name)
            if head >= 0 and text[head:start] == name and (head == 0 or text[head - 1] == "\n"):
                out.append((start, text[start:sp["end"]]))
    return out


def make_prompts(train_docs: Sequence[dict[str, Any]], rng: random.Random, n_frequent: int = 240,
                 n_rare: int = 60, frequent_min: int = 50, rare_max: int = 5) -> list[dict[str, Any]]:
    """Extraction prompts from training messages: at most one per message, targets frequent or rare in train.

    A target is *frequent* when its address occurs at least ``frequent_min`` times in the training split and
    *rare* when at most ``rare_max`` times; ``n_frequent`` and ``n_rare`` prompts are drawn (fewer if not available).
    """
    counts = address_counts(train_docs)
    frequent, rare = [], []
    for doc in train_docs:
        cands = _prompt_candidates(doc)
        rng.shuffle(cands)
        for start, addr in cands:
            c = counts[addr.lower()]
            if c >= frequent_min:
                frequent.append((doc, start, addr))
                break
            if c <= rare_max:
                rare.append((doc, start, addr))
                break
    chosen = rng.sample(frequent, min(n_frequent, len(frequent))) + rng.sample(rare, min(n_rare, len(rare)))
    chosen.sort(key=lambda x: (x[0]["doc_id"], x[1]))
    return [{"prompt_id": f"q{i + 1:04d}", "doc_id": doc["doc_id"], "prompt": doc["text"][:start], "target": addr}
            for i, (doc, start, addr) in enumerate(chosen)]


def address_counts(docs: Sequence[dict[str, Any]]) -> Counter[str]:
    """Occurrences of each address (lower-cased) over the documents' EMAIL spans."""
    c: Counter[str] = Counter()
    for d in docs:
        t = d["text"]
        for sp in d["spans"]:
            if sp["label"] == "EMAIL":
                c[t[sp["start"]:sp["end"]].lower()] += 1
    return c


# ---------------------------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class EmailSample:
    """Generated messages (native dicts, in doc_id order) and prompts."""

    documents: list[dict[str, Any]]
    prompts: list[dict[str, Any]]
    people: list[Person]

    def split(self, name: str) -> list[dict[str, Any]]:
        return [d for d in self.documents if d.get("split") == name]


def build_email(n_addresses: int = 300, n_one_off: int = 60, seed: int = 0,
                splits: Sequence[tuple[str, int]] = DEFAULT_SPLITS, n_frequent_prompts: int = 240,
                n_rare_prompts: int = 60) -> EmailSample:
    """Generate the e-mail corpus and prompts (see :func:`generate_email`)."""
    if not 0 <= n_one_off < n_addresses:
        raise ValueError("need 0 <= n_one_off < n_addresses")
    gen = _EmailGenerator(n_addresses, n_one_off, seed)
    rng = gen.rng
    n_messages = sum(k for _, k in splits)
    start, end = datetime(1999, 5, 1), datetime(2002, 2, 28)
    times = sorted(_office_time(rng, start, end) for _ in range(n_messages))
    one_offs = [p for p in gen.people if p.one_off]
    host = dict(zip(rng.sample(range(n_messages), min(len(one_offs), n_messages)), one_offs))
    order = rng.sample(range(n_messages), n_messages)
    split_of: dict[int, str] = {}
    pos = 0
    for name, k in splits:
        for i in order[pos:pos + k]:
            split_of[i] = name
        pos += k
    width = max(5, len(str(n_messages)))
    documents = []
    for i, when in enumerate(times):
        text, spans, sender = gen.message(when, host.get(i))
        documents.append(make_record(f"m{i + 1:0{width}d}", sender, text, spans, split_of[i]))
    train = [d for d in documents if d.get("split") == "train"]
    prompts = make_prompts(train, rng, n_frequent_prompts, n_rare_prompts)
    return EmailSample(documents, prompts, gen.people)


def generate_email(n_addresses: int = 300, n_one_off: int = 60, seed: int = 0,
                   splits: Sequence[tuple[str, int]] = DEFAULT_SPLITS) -> list[dict[str, Any]]:
    """Synthetic Enron-style messages as native document dicts (``split`` = train / validation / test).

    Parameters
    ----------
    n_addresses:
        Distinct addresses in all; ``n_one_off`` of them appear exactly once in the whole corpus.
    seed:
        Seeds :class:`random.Random` and Faker.
    splits:
        ``(name, number of messages)``; messages are assigned to splits at random.
    """
    return build_email(n_addresses, n_one_off, seed, splits).documents


def write_email(out_dir: Path, seed: int = 0) -> list[Path]:
    """Write ``email/{train,validation,test}.jsonl`` and ``email/prompts.jsonl`` under ``out_dir``."""
    sample = build_email(seed=seed)
    folder = Path(out_dir) / "email"
    paths = [write_records(sample.split(name), folder / f"{name}.jsonl") for name, _ in DEFAULT_SPLITS]
    paths.append(write_records(sample.prompts, folder / "prompts.jsonl"))
    return paths


__all__ = ["LABELS", "address_counts", "build_email", "generate_email", "make_prompts", "write_email",
           "zipf_weights"]
