"""Manual name review: the append-only review file (:mod:`~toolkit.review.store`), the review state
(:mod:`~toolkit.review.session`), reviewer comparison and merging (:mod:`~toolkit.review.compare`); the ipywidgets view
is imported from :mod:`toolkit.review.widget`."""

from __future__ import annotations

from toolkit.review.compare import compare_reviews, judged_names, merge_reviews
from toolkit.review.session import ReviewFilter, ReviewSession
from toolkit.review.store import (DECISIONS, FORMAT_VERSION, RECORD_FIELDS, ReviewFileWarning, ReviewStore,
                                  ReviewWriteError, load_decisions, read_review, read_script, replay)

__all__ = ['DECISIONS', 'FORMAT_VERSION', 'RECORD_FIELDS', 'ReviewFileWarning', 'ReviewFilter', 'ReviewSession',
           'ReviewStore', 'ReviewWriteError', 'compare_reviews', 'judged_names', 'load_decisions', 'merge_reviews',
           'read_review', 'read_script', 'replay']
