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

Modules: this one builds the corpus, cuts the prompts and writes the files; :mod:`~toolkit.samples.email_people`
draws the address owners, :mod:`~toolkit.samples.email_messages` writes the messages from the word lists and
templates in :mod:`~toolkit.samples.email_templates`. :func:`public_email_corpus` is the public corpus the tiny
e-mail base model is pre-trained on.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolkit.errors import ToolkitError
from toolkit.samples.email_messages import EmailGenerator, office_time
from toolkit.samples.email_people import ZIPF_EXPONENT, Person, zipf_weights
from toolkit.samples.text import make_record, write_records

if TYPE_CHECKING:
    from toolkit.corpus import Corpus

LABELS: tuple[str, ...] = ("EMAIL", "NAME", "PHONE", "DATE")
DEFAULT_SPLITS: tuple[tuple[str, int], ...] = (("train", 2400), ("validation", 300), ("test", 300))

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
    gen = EmailGenerator(n_addresses, n_one_off, seed)
    rng = gen.rng
    n_messages = sum(k for _, k in splits)
    start, end = datetime(1999, 5, 1), datetime(2002, 2, 28)
    times = sorted(office_time(rng, start, end) for _ in range(n_messages))
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


def public_email_corpus(n: int, *, seed: int = 1) -> Corpus:
    """``n`` synthetic Enron-style messages among **other** people (generator seed ``seed``, split ``public``) as a
    :class:`~toolkit.corpus.Corpus`: the public corpus the tiny e-mail base model is pre-trained on
    (:func:`toolkit.pipelines.email_extraction.ensure_email_base`), so it learns e-mail language without ever seeing
    a training address (the sample's seed-0 training split shares 1 of its 278 addresses with the seed-1 population,
    measured). Deterministic; generated in about a second."""
    from toolkit.corpus import Corpus, make_document

    if n < 1:
        raise ToolkitError(f"the public corpus needs at least one message, got {n}")
    sample = build_email(seed=seed, splits=(("public", int(n)),), n_frequent_prompts=0, n_rare_prompts=0)
    return Corpus([make_document(d["doc_id"], d["person_id"], d["text"], d["spans"], d["split"])
                   for d in sample.documents], source=f"toolkit.samples.email seed {seed}")


__all__ = ["DEFAULT_SPLITS", "LABELS", "ZIPF_EXPONENT", "EmailSample", "Person", "address_counts", "build_email",
           "generate_email", "make_prompts", "public_email_corpus", "write_email", "zipf_weights"]
