"""Manual name review: the append-only review store, reviewer comparison, the ipywidgets view (imported from toolkit.review.widget)."""

from __future__ import annotations

from toolkit.review.store import (DECISIONS, FORMAT_VERSION, RECORD_FIELDS, ReviewFileWarning, ReviewFilter, ReviewSession, ReviewStore, compare_reviews, judged_names, load_decisions, merge_reviews, read_review, read_script, replay)

__all__ = ['DECISIONS', 'FORMAT_VERSION', 'RECORD_FIELDS', 'ReviewFileWarning', 'ReviewFilter', 'ReviewSession', 'ReviewStore', 'compare_reviews', 'judged_names', 'load_decisions', 'merge_reviews', 'read_review', 'read_script', 'replay']
