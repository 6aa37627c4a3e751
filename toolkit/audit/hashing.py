"""Naming identifiers without writing them: a short, stable digest of a normalised term.

Reports and summaries that must point at a reproduced identifier (regurgitation examples, leaked types, reviewed
tokens) show :func:`hash_term` of it instead of the word itself, so that two reports name the same word alike and
the holder of the training data can tell which word a digest stands for. It is a pseudonym, not encryption: anyone
with a list of candidate words (a name list) can hash them and match the digests; it keeps identifiers out of a
report's text, it does not make a report safe to publish.
"""

from __future__ import annotations

import hashlib


def hash_term(term: str) -> str:
    """First 12 hex digits (48 bits) of the SHA-256 of ``term`` (UTF-8); callers pass the normalised term."""
    return hashlib.sha256(term.encode("utf-8")).hexdigest()[:12]


__all__ = ["hash_term"]
