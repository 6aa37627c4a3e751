"""zlib-normalised loss (Carlini et al., "Extracting Training Data from Large Language Models", USENIX Security 2021).

.. math:: s_{\\mathrm{zlib}}(x) = -\\frac{\\frac{1}{T} \\sum_t \\ell_t}{|\\mathrm{zlib}(x)|}

with :math:`|\\mathrm{zlib}(x)|` = ``len(zlib.compress(x.encode("utf-8")))`` of the audited window's text, as
``mimir/attacks/zlib.py`` (iamgroot42/mimir), sign flipped so that higher = more likely a member.
"""

from __future__ import annotations

import zlib as _zlib
from collections.abc import Sequence

import numpy as np

from toolkit.audit.losses import TokenLosses


def zlib_entropy(text: str) -> int:
    """Length in bytes of the zlib-compressed UTF-8 text (default compression level)."""
    return len(_zlib.compress(text.encode("utf-8")))


def zlib_score(losses: TokenLosses, *, texts: Sequence[str] | None = None, **_) -> np.ndarray:
    """zlib score of each document; ``texts`` default to the audited windows ``losses.window_texts``."""
    texts = losses.window_texts if texts is None else texts
    ent = np.array([zlib_entropy(t) for t in texts], dtype=float)
    return -losses.mean_loss() / ent
