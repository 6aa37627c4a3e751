"""Auditing fine-tuned language models on their own training documents (methods.md §4, §5, §7).

* :func:`probe_masked` — fill-mask probing of a masked LM: every word masked once, ~15% of a chunk's words per pass,
  all occurrences of a protected type masked together; one row per word occurrence (``toolkit.metrics`` input).
* :func:`downstream_f1` — downstream utility (methods.md §8): a classification head on the checkpoint, all layers
  frozen but the last; macro F1 on a held-out split (:func:`majority_baseline_f1` for comparison).
"""

from __future__ import annotations

from toolkit.audit.downstream import downstream_f1, freeze_all_but_last, majority_baseline_f1, transformer_layers
from toolkit.audit.probe_masked import assign_passes, n_passes, probe_masked

__all__ = ["assign_passes", "n_passes", "probe_masked"]
__all__ += ["downstream_f1", "freeze_all_but_last", "majority_baseline_f1", "transformer_layers"]
from toolkit.audit.generation import generate_continuations
from toolkit.audit.probe_causal import probe_causal, regurgitation_rate

__all__ += ["generate_continuations", "probe_causal", "regurgitation_rate"]
