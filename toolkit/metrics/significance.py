"""Significance tests of the verdict's rules (methods.md §11).

:func:`binomial_p_value`: is a rate measured on ``n`` trials above a given rate? The verdict tests PII inference's
top-1 against chance and against the reference model's top-1, and regurgitation's share against the reference
model's, with it.
"""

from __future__ import annotations

import numpy as np


def binomial_p_value(share: float, n: int, rate: float) -> float:
    """One-sided p-value :math:`P(X \\ge h \\mid n, q)`, :math:`X \\sim \\mathrm{Binomial}(n, q)`, of
    ``h`` = round(``share`` · n) successes or more among ``n`` trials at rate ``q`` = ``rate`` (clipped to [0, 1]);
    1 when ``h`` = 0. ``share``'s tied credits (PII inference counts 1/#tied per tie) are summed and rounded."""
    from scipy.stats import binom

    hits = int(np.floor(share * n + 0.5))
    return float(binom.sf(hits - 1, n, min(max(rate, 0.0), 1.0))) if hits > 0 else 1.0


__all__ = ["binomial_p_value"]
