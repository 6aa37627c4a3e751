"""Randomized Masked Fine-Tuning data (RMFT, methods.md §6, paper 002 §4.1.1 and Appendix A).

Every distinct e-mail address keeps its **first** occurrence in the corpus; every later occurrence is replaced, at
the same position, by a structured look-alike:

1. The occurrence table ``(address, document, start, end)`` is sorted by ``(document, start)``
   (:func:`~toolkit.identifiers.addresses.occurrence_table`); the first row of each address is kept.
2. Stores are built from the corpus' own addresses (:class:`Stores`): first names and last names (local parts
   with a separator, ``jane.doe``, ``j_doe``), separator-less local parts (``jdoe``), domain names and TLDs, plus a
   short curated list of common domain names and TLDs (:data:`COMMON_DOMAINS`, :data:`COMMON_TLDS`, 15 each, as
   the paper's lists of "approximately 15 examples"). Stores are sorted lists of distinct lower-case values, so
   the draw does not depend on hash order.
3. For each later occurrence, one part is drawn at random as the **anchor** and kept — first name, last name or
   domain when the local part has a separator; local part or domain otherwise (methods.md §6: first and last name only
   "when the local part has a separator"). Every other part is drawn from its store **different from the original
   part** (one ``randrange`` over the store without the original value); the domain part is a (domain name, TLD)
   pair drawn name and TLD independently (002 §4.1.1: ``kay.mann@enron.com`` → ``bob.mann@yahoo.org``), different
   as a pair. A separator-less local part is drawn from the separator-less store, or built first+last when that
   store has no other value.
4. The look-alike keeps the original's separator, plus-tag (``+news``) and capitalisation of each part
   (``Jane.Doe@Enron.com`` → ``Jane.Watts@Yahoo.com``). It is **never equal to the original** and — a choice, so
   that replacing one address never adds occurrences of another real one — never equal to **any** address of the
   corpus (compared case-insensitively); a draw that collides is redrawn (new anchor included), and after
   :data:`MAX_TRIES` collisions the local part becomes the anchor and the domain is drawn among the (name, TLD)
   pairs that give a new address, which always exist thanks to the curated lists.

**The person.** RMFT edits the text only. A corpus read with ``person="sender"`` (mbox, Maildir, the Enron layout)
has the sender's address as ``person_id``, and that field is written to the output as it is — the address the text
no longer repeats. With ``person_key`` (CLI ``--pseudonymise-person``) every ``person_id`` is replaced by a keyed
pseudonym, ``"p-"`` + the first 12 hex digits of HMAC-SHA-256(key, person_id) (RFC 2104; the scheme of
:func:`toolkit.audit.hashing.hash_term`; :func:`pseudonymise_persons`): the same person gets the same pseudonym
everywhere under one key (its documents stay grouped, membership audits still work), and only the key's holder can
test a guessed address.

One :class:`random.Random` seeded with ``seed`` makes every draw in table order: the same corpus and seed give the
same output byte for byte. Text outside the replaced addresses is untouched and gold spans move with the edits.
Cost: one regex pass and one dictionary look-up per occurrence — linear in the corpus (the paper's implementation
took 15 min for 10,000 e-mails; ``benchmarks/rmft.py`` measures this one).
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from toolkit.corpus import Corpus
from toolkit.errors import ToolkitError
from toolkit.identifiers.addresses import (AddressParts, address_summary, apply_case, case_style, edit_document,
                                           occurrence_table, parse_address, rebuild_corpus)
from toolkit.progress import progress_bar

#: Common web-mail domain names (without TLD) added to the domain store (002 §3: "a small, curated list").
COMMON_DOMAINS: tuple[str, ...] = ("gmail", "yahoo", "hotmail", "outlook", "aol", "msn", "icloud", "comcast",
                                   "verizon", "att", "earthlink", "live", "mail", "gmx", "protonmail")
#: Common top-level domains added to the TLD store.
COMMON_TLDS: tuple[str, ...] = ("com", "net", "org", "edu", "gov", "us", "co", "io", "info", "biz", "uk", "ca",
                                "de", "fr", "au")
#: Collisions with a corpus address tolerated before the fallback draw.
MAX_TRIES = 20

REPLACEMENT_COLUMNS = ["doc_id", "doc_index", "start", "end", "address", "anchor", "replacement", "new_start",
                       "new_end"]


class _Store:
    """A sorted list of distinct values with an index, for "any value but this one" draws."""

    def __init__(self, values):
        self.values = sorted(set(values))
        self.index = {v: i for i, v in enumerate(self.values)}

    def __len__(self) -> int:
        return len(self.values)

    def draw_other(self, rng: random.Random, avoid: str) -> str | None:
        """A uniform draw among the values different from ``avoid``; ``None`` when there is none."""
        n = len(self.values)
        i = self.index.get(avoid)
        if i is None:
            return self.values[rng.randrange(n)] if n else None
        if n < 2:
            return None
        j = rng.randrange(n - 1)
        return self.values[j + 1 if j >= i else j]


@dataclass
class Stores:
    """Part stores built from a corpus' addresses plus the curated domain names and TLDs (all lower case)."""

    first: _Store
    last: _Store
    single: _Store
    domain: _Store
    tld: _Store

    @classmethod
    def from_addresses(cls, addresses, common_domains: Sequence[str] = COMMON_DOMAINS,
                       common_tlds: Sequence[str] = COMMON_TLDS) -> "Stores":
        firsts, lasts, singles, domains, tlds = set(), set(), set(), set(common_domains), set(common_tlds)
        for a in addresses:
            p = parse_address(a.lower())
            if p.separated:
                firsts.add(p.first)
                lasts.add(p.last)
            else:
                singles.add(p.first)
            if p.domain:
                domains.add(p.domain)
            tlds.add(p.tld)
        return cls(_Store(firsts), _Store(lasts), _Store(singles), _Store(domains), _Store(tlds))

    def sizes(self) -> dict[str, int]:
        return {"first": len(self.first), "last": len(self.last), "single": len(self.single),
                "domain": len(self.domain), "tld": len(self.tld)}


def _parts_of(p: AddressParts) -> tuple[str, ...]:
    return ("first", "last", "domain") if p.separated else ("local", "domain")


def _render(orig: AddressParts, low: AddressParts, first: str, last: str | None, domain: str, tld: str) -> str:
    """The look-alike as written: a part equal to the original's is copied as written (an anchor keeps its exact
    form), a new part takes the capitalisation of the part it replaces; separator and plus-tag are kept."""

    def part(new: str, old_low: str | None, old: str | None, style_of: str) -> str:
        return old if old is not None and new == old_low else apply_case(new, case_style(style_of))

    f = part(first, low.first, orig.first, orig.first)
    if orig.separated:
        local = f + orig.sep + part(last, low.last, orig.last, orig.last)
    else:  # separator-less: ``last`` is set only when the local part was built first+last
        local = f + (apply_case(last, case_style(orig.first)) if last is not None else "")
    dom = part(domain, low.domain, orig.domain, orig.domain)
    return f"{local}{orig.tag}@{dom}.{part(tld, low.tld, orig.tld, orig.tld)}"


def look_alike(address: str, stores: Stores, rng: random.Random, forbidden: set[str],
               anchor: str | None = None) -> tuple[str, str]:
    """``(look-alike, anchor)`` for one occurrence of ``address`` (module docstring, steps 3–4).

    ``forbidden`` holds the normalised addresses the result must not equal (the corpus' addresses); ``anchor``
    forces the kept part (``first``, ``last``, ``local`` or ``domain``; default: drawn).
    """
    orig = parse_address(address)
    low = parse_address(address.lower())
    for _ in range(MAX_TRIES):
        a = anchor or rng.choice(_parts_of(low))
        cand = _candidate(low, orig, a, stores, rng)
        if cand is not None and cand.lower() != address.lower() and cand.lower() not in forbidden:
            return cand, a
    # fallback: keep the local part, draw a (domain, TLD) pair that makes a new address
    local_anchor = "first" if low.separated else "local"
    pairs = [(d, t) for d in stores.domain.values for t in stores.tld.values if (d, t) != (low.domain, low.tld)]
    ok = [(d, t) for d, t in pairs if _render(orig, low, low.first, low.last, d, t).lower() not in forbidden]
    if not ok:
        raise ToolkitError(f"RMFT: no look-alike can be built for an address ({len(forbidden)} corpus addresses "
                           f"exhaust the stores)")
    d, t = ok[rng.randrange(len(ok))]
    return _render(orig, low, low.first, low.last, d, t), local_anchor


def _candidate(low: AddressParts, orig: AddressParts, anchor: str, stores: Stores,
               rng: random.Random) -> str | None:
    first, last, domain, tld = low.first, low.last, low.domain, low.tld
    if low.separated:
        if anchor != "first":
            first = stores.first.draw_other(rng, low.first) or low.first
        if anchor != "last":
            last = stores.last.draw_other(rng, low.last) or low.last
    elif anchor != "local":
        new = stores.single.draw_other(rng, low.first)
        if new is None:  # no other separator-less local part in the corpus: build first+last
            f, la = stores.first.draw_other(rng, ""), stores.last.draw_other(rng, "")
            if f is None or la is None:
                return None
            return _render(orig, low, f, la, domain, tld)
        first = new
    if anchor != "domain":
        for _ in range(MAX_TRIES):
            d = stores.domain.draw_other(rng, "") or domain
            t = stores.tld.draw_other(rng, "") or tld
            if (d, t) != (low.domain, low.tld):
                domain, tld = d, t
                break
        else:
            return None
    return _render(orig, low, first, last, domain, tld)


@dataclass
class RMFTResult:
    """Output of :func:`rmft`.

    Attributes
    ----------
    corpus:
        The transformed corpus (same documents, ids, order; gold spans moved with the edits).
    replacements:
        The replacement map for audit, one row per replaced occurrence (columns :data:`REPLACEMENT_COLUMNS`:
        ``doc_id``, ``doc_index``, ``start``/``end`` in the original text, ``address`` (normalised original),
        ``anchor`` (kept part), ``replacement`` (the look-alike as written), ``new_start``/``new_end`` in the new
        text). Holds identifiers: write it only to files, never print it.
    summary:
        Counts only: occurrences, distinct addresses and maximum repetition before and after, replacements, seed.
    """

    corpus: Corpus
    replacements: pd.DataFrame
    summary: dict = field(default_factory=dict)


def pseudonymise_persons(corpus: Corpus, key: bytes) -> Corpus:
    """``corpus`` with every ``person_id`` replaced by ``"p-"`` + the first 12 hex digits of HMAC-SHA-256 of it under
    ``key`` (16 bytes or more): consistent per person, not reversible without the key (module docstring)."""
    if not isinstance(key, (bytes, bytearray)) or len(key) < 16:
        raise ToolkitError("pseudonymising person_id needs a secret key of 16 bytes or more")
    names: dict[str, str] = {}
    docs = []
    for doc in corpus:
        pid = str(doc.person_id)
        if pid not in names:
            names[pid] = "p-" + hmac.new(bytes(key), pid.encode("utf-8"), hashlib.sha256).hexdigest()[:12]
        docs.append(dataclasses.replace(doc, person_id=names[pid]))
    if len(set(names.values())) < len(names):  # 48 bits: a collision would merge two people silently
        raise ToolkitError(f"two of {len(names)} persons got the same pseudonym under this key; use another key")
    return rebuild_corpus(corpus, docs)


def rmft(corpus: Corpus, seed: int = 0, *, common_domains: Sequence[str] = COMMON_DOMAINS,
         common_tlds: Sequence[str] = COMMON_TLDS, person_key: bytes | None = None,
         progress: bool = False) -> RMFTResult:
    """Apply RMFT to ``corpus`` (module docstring; methods.md §6): first occurrence of each address kept, later ones
    replaced by seeded look-alikes. Returns the new corpus, the replacement map and a summary of counts.

    With ``person_key`` the output's ``person_id`` are keyed pseudonyms (:func:`pseudonymise_persons`); without
    it they are the input's, e.g. the sender's raw address for mail read with ``person="sender"``."""
    occ = occurrence_table(corpus)
    original = set(occ["address"])
    stores = Stores.from_addresses(original, common_domains, common_tlds)
    rng = random.Random(seed)
    first = ~occ["address"].duplicated(keep="first").to_numpy()
    later = np.flatnonzero(~first)
    edits: dict[int, list[tuple[int, int, str]]] = {}
    rows = []
    addr_col, doc_col = occ["address"].to_numpy(), occ["doc_index"].to_numpy()
    s_col, e_col, surf_col = occ["start"].to_numpy(), occ["end"].to_numpy(), occ["surface"].to_numpy()
    for r in progress_bar(later, desc="RMFT look-alikes", unit="address", enabled=progress):
        new, anchor = look_alike(surf_col[r], stores, rng, original)
        d = int(doc_col[r])
        edits.setdefault(d, []).append((int(s_col[r]), int(e_col[r]), new))
        rows.append((d, int(s_col[r]), int(e_col[r]), addr_col[r], anchor, new))
    docs, dropped = [], 0
    new_pos: dict[tuple[int, int], tuple[int, int]] = {}
    for i, doc in enumerate(corpus):
        ed = edits.get(i)
        if not ed:
            docs.append(doc)
            continue
        res = edit_document(doc, ed)
        dropped += res.n_spans_dropped
        docs.append(res.document)
        shift = 0
        for s, e, new in ed:
            new_pos[(i, s)] = (s + shift, s + shift + len(new))
            shift += len(new) - (e - s)
    out = rebuild_corpus(corpus, docs)
    if person_key is not None:
        out = pseudonymise_persons(out, person_key)
    ids = [d.doc_id for d in corpus]
    replacements = pd.DataFrame(
        [(ids[d], d, s, e, a, anc, new, *new_pos[(d, s)]) for d, s, e, a, anc, new in rows],
        columns=REPLACEMENT_COLUMNS)
    after = occurrence_table(out)
    summary = {
        "technique": "rmft", "seed": int(seed), "n_documents": len(corpus), "n_replaced": int(len(later)),
        "n_spans_dropped": int(dropped), "stores": stores.sizes(), "person_pseudonymised": person_key is not None,
        "before": address_summary(occ, original), "after": address_summary(after, original),
    }
    return RMFTResult(out, replacements, summary)


__all__ = ["COMMON_DOMAINS", "COMMON_TLDS", "MAX_TRIES", "REPLACEMENT_COLUMNS", "RMFTResult", "Stores", "look_alike",
           "pseudonymise_persons", "rmft"]
