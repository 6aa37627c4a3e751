"""E-mail memorisation: RMFT, PII-aware deduplication, the extraction attack, perplexity, MaxTER and AURC
(paper 002; SPEC.md §6, §9).

* :func:`rmft` — first occurrence of each address kept, later ones replaced by seeded look-alikes
  (:mod:`~toolkit.extraction.rmft`); :func:`dedup` — header lines repeating an address removed
  (:mod:`~toolkit.extraction.dedup`). Both return the new corpus, an audit table and a summary of counts.
* :func:`train_technique` — baseline / RMFT / dedup fine-tuning with step checkpoints and the addresses seen up to
  each (:mod:`~toolkit.extraction.pipeline`).
* :func:`extract_run` — prompts → greedy continuations → regex → leaks; TER, SER and held-out perplexity per
  checkpoint (:mod:`~toolkit.extraction.attack`, :mod:`~toolkit.extraction.perplexity`).
* :mod:`~toolkit.extraction.metrics` — TER, SER, MDP%, Mean Delta Perplexity, MaxTER, AURC, Pareto frontier (pure
  functions); :mod:`~toolkit.extraction.plots` — the figures.

Importing this package is light: torch and transformers load only when a model is trained or run.
"""

from __future__ import annotations

from .addresses import EMAIL_RE, address_counts, normalize_address, occurrence_table, parse_address
from .attack import extract_run, load_extraction, read_prompts, run_checkpoints
from .config import EmailProfile, ExtractionConfig
from .dedup import dedup
from .metrics import (aurc, aurc_report, compare_to_baseline, maxter, maxter_curve, maxter_table, mdp_percent,
                      mean_delta_perplexity, optimal_checkpoints, pareto_frontier, ser, ter, ter_drop_percent)
from .pipeline import TECHNIQUES, technique_corpus, train_technique
from .rmft import rmft

__all__ = ["EMAIL_RE", "TECHNIQUES", "EmailProfile", "ExtractionConfig", "address_counts", "aurc", "aurc_report",
           "compare_to_baseline", "dedup", "extract_run", "load_extraction", "maxter", "maxter_curve",
           "maxter_table", "mdp_percent", "mean_delta_perplexity", "normalize_address", "occurrence_table",
           "optimal_checkpoints", "pareto_frontier", "parse_address", "read_prompts", "rmft", "run_checkpoints",
           "ser", "technique_corpus", "ter", "ter_drop_percent", "train_technique"]
