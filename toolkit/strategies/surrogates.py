"""Surrogate identifiers for the ``*_surrogate`` strategies, and category placeholders for ``*_category``.

Why: PPclm / PPMLM keep the protected words in the input, so the model still learns how the rest of a patient's
note depends on the patient's name, and a candidate-ranking attacker recovers it (PII inference,
:mod:`toolkit.audit.attacks.pii_inference`). Replacing each direct identifier by a made-up one of the same category
removes it from the input while the text stays natural (names stay names, dates stay dates), which the single ``X``
of ``*_pseudo`` does not (the de-identification practice of "hiding in plain sight", Carrell et al., JAMIA 2013).

Rules (:class:`SurrogateMaker`)
-------------------------------
* **Consistent per individual.** The same original (NFKC, lower-cased) of the same category gets the same surrogate
  in every document of an individual; two different originals of an individual never share one. Names are mapped
  word by word (``Brenda Daniels`` and ``Mrs. Daniels`` keep one surname), in the original's letter case; an initial gets a letter that is none of its name's words.
* **Of the same category.** NAME: first / last names (Faker ``en_US``); LOCATION: a city, a street address, or
  same-shape digits for a ZIP code; ORGANIZATION: a made-up hospital name (``… Medical Center``) or a company; DATE:
  shifted by a number of days drawn once per individual (400 to 3000, either way), written in the original's format
  (``07/26/2010``, ``2010-07-26``, ``July 26, 2010``, ``2/10/11``, ``1992`` …), so intervals within a patient's
  record are kept; AGE: the age moved by 1 to 9 years, once per individual; ID, PHONE and anything else: random
  characters of the same shape (digits for digits, letters for letters, punctuation kept); EMAIL, URL: Faker's.
* **Never the original.** No word of the original survives in its surrogate (case-insensitive); a surrogate never
  contains a word of any identifier of the same individual, nor (dates and ages aside) a *distinctive* identifier
  word of the corpus — a word seen inside direct-identifier spans and never outside them — or an indirect identifier
  (a rare word), so one patient's real name or rare word never becomes another's surrogate. A draw that breaks a
  rule is drawn again; after 40 draws the original is scrambled character by character (same shape) until it
  passes.
* **As long in tokens as the original** (with the training ``tokenizer``). A name word is drawn among the Faker
  names that the tokenizer cuts into as many tokens as the original word (the nearest count when none does; the
  whole list after half the draws), and so is a hospital's name stem. Without this, a tokenizer trained on the
  public split, which has merged the corpus' frequent names and hospitals into single tokens, cuts most surrogates
  into 3-4 pieces (measured on a generated corpus of 40 members: 3.3 tokens per surrogate name word against 1.9 per
  original, 3.4 per hospital word against 1.0), so the text the model trains on is longer and its names unlike the
  ones it will read.
* **Keyed, not guessable.** Every draw is seeded with an HMAC-SHA256 of a secret key and the individual, category
  and original. With a public seed anyone who knows a patient's ``person_id`` could re-derive the mapping (undo the
  date shift, or test candidate names against a surrogate the model emits); the trainer therefore keeps a random
  key in the run directory (:func:`run_surrogate_key`), reused when the run resumes.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import os
import random
import re
import string
from collections.abc import Iterable
from datetime import date, timedelta
from pathlib import Path

from toolkit.errors import ToolkitError
from toolkit.identifiers.words import iter_words, normalize_term

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
_FULL_MONTHS = frozenset(m.lower() for m in MONTHS)
_MONTH_INDEX = {m.lower(): i for i, m in enumerate(MONTHS)} | {m[:3].lower(): i for i, m in enumerate(MONTHS)} | \
    {"sept": 8}
HOSPITAL_WORDS = frozenset({"hospital", "medical", "center", "centre", "clinic", "health", "memorial", "infirmary",
                            "sanatorium", "hospice", "healthcare"})
HOSPITAL_SUFFIXES = ("Hospital", "Medical Center", "General Hospital", "Memorial Hospital", "Community Hospital",
                     "Clinic", "Health Center", "Infirmary", "Regional Medical Center", "Healthcare")
KEY_FILE = "surrogate.key"
MAX_DRAWS = 40


def placeholder(category: str) -> str:
    """The ``*_category`` replacement of a span: its category in brackets (``[NAME]``, ``[DATE]`` …)."""
    return f"[{category}]"


def words_of(text: str) -> list[str]:
    """The normalised words (NFKC, lower case) of ``text``."""
    return [normalize_term(text[s:e]) for s, e in iter_words(text)]


def match_case(template: str, word: str) -> str:
    """``word`` in the letter case of ``template`` (all upper, all lower or capitalised)."""
    if len(template) > 1 and template.isupper():
        return word.upper()
    if template.islower():
        return word.lower()
    return word[:1].upper() + word[1:] if template[:1].isupper() else word


def scramble(text: str, rng: random.Random) -> str:
    """Same shape: every digit a random digit, every ASCII letter a random letter of the same case, the rest kept."""
    out = []
    for ch in text:
        if ch.isdigit():
            out.append(rng.choice(string.digits))
        elif ch.isalpha() and ch.isascii():
            out.append(rng.choice(string.ascii_uppercase if ch.isupper() else string.ascii_lowercase))
        elif ch.isalpha():
            out.append(rng.choice(string.ascii_lowercase))
        else:
            out.append(ch)
    return "".join(out)


class SurrogateMaker:
    """Surrogates of one corpus' direct identifiers under ``key`` (see the module docstring for the rules).

    Parameters
    ----------
    key:
        Secret bytes seeding every draw (same key, same identifiers: same surrogates).
    identifiers:
        ``(person_id, category, original text)`` of every direct-identifier span of the corpus.
    generic:
        Normalised words that occur outside the direct-identifier spans somewhere in the corpus: an identifier word
        among them is not distinctive and may appear in another individual's surrogate (``hospital``).
    avoid:
        Normalised words no surrogate may contain either: the corpus' indirect identifiers (words used by fewer
        than ``k`` individuals), so that a surrogate never plants one individual's rare word in another's record.
    tokenizer:
        The tokenizer of the model that trains on the surrogates (None: token counts are not matched).
    """

    def __init__(self, key: bytes, identifiers: Iterable[tuple[str, str, str]], generic: Iterable[str] = (),
                 avoid: Iterable[str] = (), *, tokenizer=None):
        from faker import Faker
        from faker.providers.person.en_US import Provider as People

        self._key = bytes(key)
        self._faker = Faker("en_US")
        # names drawn straight from Faker's weighted en_US lists (Faker's own draw is ~100x slower per name)
        self._names = {surname: (list(pool), list(itertools.accumulate(pool.values())))
                       for surname, pool in ((False, People.first_names), (True, People.last_names))}
        self._own: dict[str, set[str]] = {}
        self._dates: dict[str, list[str]] = {}
        distinctive: set[str] = set()
        for person, category, text in identifiers:
            words = words_of(text)
            self._own.setdefault(person, set()).update(words)
            if category == "DATE":
                self._dates.setdefault(person, []).append(text)
            else:
                distinctive.update(w for w in words if any(c.isalpha() for c in w))
        self._forbidden = (distinctive - set(generic)) | {w for w in avoid if any(c.isalpha() for c in w)}
        self._memo: dict[tuple[str, str, str], str] = {}
        self._used: dict[tuple[str, str], set[str]] = {}
        self._offsets: dict[str, int] = {}
        self._sequences: dict[str, list[int]] = {}
        self._tokenizer = tokenizer
        self._pools: dict[tuple[bool, str], dict[int, tuple[list[str], list[float]]]] = {}

    # -- seeded draws ------------------------------------------------------------------------------------------------

    def _rng(self, *parts: object) -> random.Random:
        digest = hmac.new(self._key, "\0".join(map(str, parts)).encode("utf-8", "surrogatepass"),
                          hashlib.sha256).digest()
        return random.Random(int.from_bytes(digest[:16], "big"))

    def _fake(self, rng: random.Random):
        self._faker.seed_instance(rng.getrandbits(64))
        return self._faker

    # -- token lengths ---------------------------------------------------------------------------------------------

    def token_count(self, word: str) -> int:
        """Tokens of ``word`` after a space (as inside a sentence) under the tokenizer (0 without one)."""
        if self._tokenizer is None:
            return 0
        return len(self._tokenizer(" " + word, add_special_tokens=False)["input_ids"])

    def _name_pool(self, surname: bool, like: str, attempt: int) -> tuple[list[str], list[float]]:
        """The weighted first or last names to draw a surrogate of the name word ``like`` from: those as many tokens
        long as ``like`` (written in its case; the nearest length present, shorter first), or all of them without a
        tokenizer and from attempt ``MAX_DRAWS // 2`` on."""
        if self._tokenizer is None or attempt >= MAX_DRAWS // 2:
            return self._names[surname]
        form = "upper" if len(like) > 1 and like.isupper() else "lower" if like.islower() else "title"
        pools = self._pools.get((surname, form))
        if pools is None:
            names, cumulative = self._names[surname]
            weights = [b - a for a, b in zip([0.0, *cumulative[:-1]], cumulative)]
            written = [" " + match_case(like, n) for n in names]
            counts = [len(ids) for ids in self._tokenizer(written, add_special_tokens=False)["input_ids"]]
            grouped: dict[int, tuple[list[str], list[float]]] = {}
            for name, weight, n in zip(names, weights, counts):
                grouped.setdefault(n, ([], []))[0].append(name)
                grouped[n][1].append(weight)
            pools = self._pools[(surname, form)] = {n: (g[0], list(itertools.accumulate(g[1])))
                                                    for n, g in grouped.items()}
        target = self.token_count(like)
        return pools[min(pools, key=lambda n: (abs(n - target), n))]

    # -- the rules ---------------------------------------------------------------------------------------------------

    def _acceptable(self, person: str, category: str, original: str, candidate: str) -> bool:
        new = words_of(candidate)
        if not new or normalize_term(candidate.strip()) == normalize_term(original.strip()):
            return False
        if set(new) & set(words_of(original)):
            return False
        if category not in ("DATE", "AGE"):
            own = self._own.get(person, set())
            if any(len(w) > 1 and (w in own or w in self._forbidden) for w in new):
                return False
        return normalize_term(candidate) not in self._used.get((person, category), set())

    def _choose(self, person: str, category: str, original: str, draw) -> str:
        key = (person, category, normalize_term(original))
        found = self._memo.get(key)
        if found is not None:
            return found
        for attempt in range(MAX_DRAWS + 1000):
            rng = self._rng(person, category, key[2], attempt)
            candidate = draw(rng, attempt) if attempt < MAX_DRAWS else scramble(original, rng)
            if candidate is not None and self._acceptable(person, category, original, candidate):
                break
        else:
            raise ToolkitError(f"no surrogate found for a {category} identifier of individual {person!r} "
                               f"after {MAX_DRAWS + 1000} draws")
        self._memo[key] = candidate
        self._used.setdefault((person, category), set()).add(normalize_term(candidate))
        return candidate

    def surrogate(self, person: str, category: str, original: str) -> str:
        """The surrogate of ``original`` (a direct identifier of ``category``) of individual ``person``."""
        if category == "NAME":
            return self._name(person, original)
        if category == "DATE":
            return self._choose(person, category, original, lambda rng, attempt: self._date(person, original, attempt))
        if category == "AGE":
            return self._choose(person, category, original,
                                lambda rng, attempt: self._age(person, original, rng, attempt))
        if category == "ORGANIZATION":
            return self._choose(person, category, original,
                                lambda rng, attempt: self._organization(rng, original, attempt))
        draw = {"LOCATION": self._location, "EMAIL": lambda rng, text: self._fake(rng).email(),
                "URL": lambda rng, text: self._fake(rng).url()}.get(category, lambda rng, text: scramble(text, rng))
        return self._choose(person, category, original, lambda rng, attempt: draw(rng, original))

    # -- categories --------------------------------------------------------------------------------------------------

    def _name(self, person: str, original: str) -> str:
        spans = iter_words(original)
        comma = original.find(",")
        out, pos = [], 0
        for i, (s, e) in enumerate(spans):
            word = original[s:e]
            surname = (s < comma) if comma >= 0 else (i == len(spans) - 1)

            if len(word) == 1:  # an initial: drawn for this original, avoiding every letter it holds
                out += [original[pos:s], self._initial(person, original, i, word)]
                pos = e
                continue

            def draw(rng, attempt, word=word, surname=surname):
                if any(c.isdigit() for c in word):
                    return scramble(word, rng)
                names, cumulative = self._name_pool(surname, word, attempt)
                return rng.choices(names, cum_weights=cumulative)[0]

            out += [original[pos:s], match_case(word, self._choose(person, "NAME", word, draw))]
            pos = e
        out.append(original[pos:])
        return "".join(out)

    def _initial(self, person: str, original: str, index: int, word: str) -> str:
        """A one-letter word of a name (an initial): a letter that is none of the original's words, the same for the
        same original of the individual. (Initials are not mapped word by word: a letter mapped to another would,
        in a name holding both, bring an original word back.)"""
        taken = set(words_of(original))
        pool = [c for c in string.ascii_lowercase if c not in taken] or list(string.ascii_lowercase)
        letter = self._rng(person, "INITIAL", normalize_term(original), index).choice(pool)
        return letter.upper() if word.isupper() else letter

    def _location(self, rng: random.Random, original: str) -> str:
        words = words_of(original)
        if all(w.isdigit() for w in words):
            return scramble(original, rng)
        fake = self._fake(rng)
        return fake.street_address() if any(w.isdigit() for w in words) else fake.city()

    def _organization(self, rng: random.Random, original: str, attempt: int = 0) -> str:
        fake = self._fake(rng)
        if set(words_of(original)) & HOSPITAL_WORDS:
            if self._tokenizer is not None and attempt < MAX_DRAWS // 2:  # a surname as long as the original's stem
                like = original.split()[0] if original.split() else "Name"
                names, cumulative = self._name_pool(True, like, attempt)
                stem = rng.choices(names, cum_weights=cumulative)[0]
            else:
                stem = fake.last_name() if rng.random() < 0.5 else fake.city()
            return f"{stem} {rng.choice(HOSPITAL_SUFFIXES)}"
        return fake.company()

    def _age(self, person: str, original: str, rng: random.Random, attempt: int) -> str:
        """The age moved by the individual's shift (later attempts: a random shift)."""
        text = original.strip()
        if not text.isdigit():
            return scramble(original, rng)
        shifts = [d for d in range(-9, 10) if d]
        delta = (self._rng(person, "AGE-shift") if attempt == 0 else rng).choice(shifts)
        value = int(text) + delta if int(text) + delta >= 0 else int(text) - delta
        return original.replace(text, str(value))

    def _date(self, person: str, original: str, attempt: int) -> str | None:
        """The original shifted by the individual's offset (later attempts: other offsets of the individual)."""
        parsed = parse_date(original)
        if parsed is None:
            return None  # unknown format: scrambled after the draws
        offsets = self._offset_sequence(person)
        offset = self.date_offset(person) if attempt == 0 else offsets[attempt % len(offsets)]
        return shift_date(parsed, offset)

    def _offset_sequence(self, person: str, n: int = 64) -> list[int]:
        """The individual's seeded candidate date shifts (days)."""
        found = self._sequences.get(person)
        if found is None:
            rng = self._rng(person, "DATE-shift")
            found = self._sequences[person] = [rng.choice((-1, 1)) * rng.randint(400, 3000) for _ in range(n)]
        return found

    def date_offset(self, person: str) -> int:
        """The individual's date shift in days: the first of its seeded offsets under which every date of the
        individual passes the rules (else the one under which most do)."""
        if person not in self._offsets:
            dates = [(d, parse_date(d)) for d in self._dates.get(person, [])]
            dates = [(d, p) for d, p in dates if p is not None]
            best, best_ok = 0, -1
            for offset in self._offset_sequence(person):
                ok = 0
                for text, parsed in dates:
                    new = shift_date(parsed, offset)
                    ok += new is not None and not set(words_of(new)) & set(words_of(text))
                if ok > best_ok:
                    best, best_ok = offset, ok
                if ok == len(dates):
                    break
            self._offsets[person] = best
        return self._offsets[person]


# -- dates ---------------------------------------------------------------------------------------------------------

_DATE_FORMATS = (
    ("ymd", re.compile(r"^(?P<y>\d{4})(?P<s1>[-/.])(?P<m>\d{1,2})(?P<s2>[-/.])(?P<d>\d{1,2})$")),
    ("mdy", re.compile(r"^(?P<m>\d{1,2})(?P<s1>[/.-])(?P<d>\d{1,2})(?P<s2>[/.-])(?P<y>\d{2}|\d{4})$")),
    ("Mdy", re.compile(r"^(?P<M>[A-Za-z]+)(?P<s1>\.? )(?P<d>\d{1,2})(?P<th>st|nd|rd|th)?(?P<s2>,? )(?P<y>\d{4})$")),
    ("dMy", re.compile(r"^(?P<d>\d{1,2})(?P<s1> )(?P<M>[A-Za-z]+)(?P<s2>\.?,? )(?P<y>\d{4})$")),
    ("My", re.compile(r"^(?P<M>[A-Za-z]+)(?P<s1>\.?,? )(?P<y>\d{4})$")),
    ("y", re.compile(r"^(?P<y>\d{4})$")),
)


def parse_date(text: str) -> tuple[str, dict[str, str], date] | None:
    """``(format, fields, date)`` of a date in one of the supported formats (None: another format)."""
    stripped = text.strip()
    for name, pattern in _DATE_FORMATS:
        m = pattern.match(stripped)
        if m is None:
            continue
        f = {k: v for k, v in m.groupdict().items() if v is not None}
        year = int(f["y"]) if len(f["y"]) == 4 else (1900 + int(f["y"]) if int(f["y"]) > 30 else 2000 + int(f["y"]))
        month = _MONTH_INDEX.get(f["M"].lower()) if "M" in f else int(f["m"]) - 1 if "m" in f else 0
        if month is None or not 0 <= month < 12:
            return None
        try:
            return name, {**f, "lead": text[:len(text) - len(text.lstrip())],
                          "trail": text[len(text.rstrip()):]}, date(year, month + 1, int(f.get("d", 1)))
        except ValueError:
            return None
    return None


def shift_date(parsed: tuple[str, dict[str, str], date], days: int) -> str | None:
    """The parsed date moved by ``days`` (by whole months for ``Month YYYY``, whole years for ``YYYY``), in its
    format; None when the result leaves the years 1800-2199."""
    name, f, old = parsed
    sign = (days > 0) - (days < 0)  # a non-zero shift moves a year or a month at least one step
    if name == "y":
        new = date(old.year + sign * max(1, round(abs(days) / 365.25)), 1, 1)
    elif name == "My":
        months = old.year * 12 + old.month - 1 + sign * max(1, round(abs(days) / 30.44))
        new = date(months // 12, months % 12 + 1, 1) if 1800 * 12 <= months < 2200 * 12 else date(1, 1, 1)
    else:
        try:
            new = old + timedelta(days=days)
        except OverflowError:
            return None
    if not 1800 <= new.year < 2200:
        return None

    def num(value: int, like: str) -> str:
        return f"{value:0{len(like)}d}" if len(like) > 1 else str(value)

    def month_name(like: str) -> str:
        full = MONTHS[new.month - 1]
        short = like.lower() not in _FULL_MONTHS  # "Jul", "Sept": abbreviated
        return match_case(like, full[:3] if short else full)

    year = f"{new.year % 100:02d}" if len(f["y"]) == 2 else str(new.year)
    body = {"ymd": lambda: f"{year}{f['s1']}{num(new.month, f['m'])}{f['s2']}{num(new.day, f['d'])}",
            "mdy": lambda: f"{num(new.month, f['m'])}{f['s1']}{num(new.day, f['d'])}{f['s2']}{year}",
            "Mdy": lambda: f"{month_name(f['M'])}{f['s1']}{new.day}{_ordinal(new.day) if 'th' in f else ''}"
                           f"{f['s2']}{year}",
            "dMy": lambda: f"{new.day}{f['s1']}{month_name(f['M'])}{f['s2']}{year}",
            "My": lambda: f"{month_name(f['M'])}{f['s1']}{year}",
            "y": lambda: year}[name]()
    return f["lead"] + body + f["trail"]


def _ordinal(day: int) -> str:
    return "th" if 10 <= day % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")


# -- the run's key -------------------------------------------------------------------------------------------------

def run_surrogate_key(run_dir: str | Path, *, resuming: bool) -> bytes:
    """The secret surrogate key of a run directory (``RUN_DIR/surrogate.key``, 32 random bytes, owner-only),
    created on the run's first start and read when it resumes; a resume without it is refused (new surrogates would
    mix two different trainings in one model)."""
    from toolkit.io import atomic_write_text

    path = Path(run_dir) / KEY_FILE
    if path.is_file():
        try:
            key = bytes.fromhex(path.read_text(encoding="ascii").strip())
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            raise ToolkitError(f"{path}: unreadable surrogate key ({type(exc).__name__}); use a new run "
                               f"directory") from exc
        if len(key) != 32:
            raise ToolkitError(f"{path}: not a surrogate key (expected 32 bytes, found {len(key)})")
        return key
    if resuming:
        raise ToolkitError(f"{path}: missing, but {Path(run_dir)} holds training done with the surrogates it keyed; "
                           f"resuming with other surrogates would mix two trainings; use a new run directory")
    key = os.urandom(32)
    atomic_write_text(key.hex() + "\n", path)
    return key


__all__ = ["HOSPITAL_SUFFIXES", "KEY_FILE", "MONTHS", "SurrogateMaker", "match_case", "parse_date", "placeholder",
           "run_surrogate_key", "scramble", "shift_date", "words_of"]
