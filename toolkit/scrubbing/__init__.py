"""Vocabulary scrubbing with manual name review — the two-step method of MedRoBERTa.nl (SPEC §7, paper 003).

1. :mod:`~toolkit.scrubbing.anonymize` — NER replaces names by tags (``PERSON``, ``GPE``) in the training text,
   with an offset map back to the original.
2. A tokenizer and a masked LM are trained on the anonymised text (``toolkit.training.build_base``): names that NER
   missed can end up in the vocabulary.
3. :mod:`~toolkit.scrubbing.sentences` + :mod:`~toolkit.scrubbing.candidates` — fill-masked-name probing on
   development sentences, candidates ranked by name-likeness; :mod:`~toolkit.scrubbing.review` (state, append-only
   review file, reviewer comparison) and :mod:`~toolkit.scrubbing.widget` (ipywidgets view, Voilà app).
4. :mod:`~toolkit.scrubbing.scrub` — judged names renamed to ``unk`` + 13 digits in the tokenizer, ids kept;
   :mod:`~toolkit.scrubbing.anonymity` — the anonymity test (SPEC §7.6).

The widget module (ipywidgets, anywidget) is not imported here; ``from toolkit.scrubbing.widget import ReviewWidget``.
"""

from __future__ import annotations

from .anonymity import ANONYMITY_KEYS, anonymity_summary, anonymity_test, prediction_count_table, write_anonymity
from .anonymize import AnonymizeConfig, Anonymized, anonymize_corpus, load_anonymized, parse_labels, replace_spans
from .candidates import (NameScoreConfig, common_words, fill_mask, load_candidates, rank_candidates,
                         save_candidates, score_tokens, token_kind, vocabulary_surfaces)
from .review import (DECISIONS, FORMAT_VERSION, ReviewFileWarning, ReviewSession, ReviewStore, compare_reviews,
                     judged_names, load_decisions, merge_reviews, read_review)
from .scrub import check_tokenizer_files, names_in_vocabulary, scrub_model
from .sentences import MASK, read_sentences, split_dev_test, tag_sentences, with_model_mask, word_hash, write_sentences

__all__ = [
    "ANONYMITY_KEYS", "DECISIONS", "FORMAT_VERSION", "MASK", "AnonymizeConfig", "Anonymized", "NameScoreConfig",
    "ReviewFileWarning", "ReviewSession", "ReviewStore", "anonymity_summary", "anonymity_test", "anonymize_corpus",
    "check_tokenizer_files", "common_words", "compare_reviews", "fill_mask", "judged_names", "load_anonymized",
    "load_candidates", "load_decisions", "merge_reviews", "names_in_vocabulary", "parse_labels",
    "prediction_count_table", "rank_candidates", "read_review", "read_sentences", "replace_spans", "save_candidates",
    "score_tokens", "scrub_model", "split_dev_test", "tag_sentences", "token_kind", "vocabulary_surfaces",
    "with_model_mask", "word_hash", "write_anonymity", "write_sentences",
]
