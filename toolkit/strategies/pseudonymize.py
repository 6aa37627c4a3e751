"""Pseudonymisation for the ``mlm_pseudo`` / ``clm_pseudo`` baselines (SPEC §3, paper 000 "MLMA"): every PII span is
replaced by the single word ``X``; an offset map sends each character of the new text back to the original."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def pseudonymize(text: str, spans: Sequence[tuple[int, int]], replacement: str = "X") -> tuple[str, np.ndarray]:
    """Replace each ``(start, end)`` span (sorted, non-overlapping) by ``replacement``.

    Returns the new text and ``origin``: ``origin[i]`` is the offset in ``text`` of character ``i`` of the new text
    (characters of a replacement point at the start of the span they replace).
    """
    parts, origin, pos = [], [], 0
    for start, end in sorted(spans):
        if start < pos:
            raise ValueError(f"overlapping spans at {start}")
        parts.append(text[pos:start])
        origin.append(np.arange(pos, start))
        parts.append(replacement)
        origin.append(np.full(len(replacement), start))
        pos = end
    parts.append(text[pos:])
    origin.append(np.arange(pos, len(text)))
    return "".join(parts), np.concatenate(origin).astype(np.int64) if origin else np.zeros(0, dtype=np.int64)
