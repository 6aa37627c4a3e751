"""Vocabulary scrubbing (paper 003): NER anonymisation of the training text, development sentences, fill-mask name candidates, scrubbing judged names from the tokenizer."""

from __future__ import annotations

from toolkit.scrub.anonymize import (AnonymizeConfig, Anonymized, DEFAULT_TAGS, OFFSET_COLUMNS, anonymize_corpus, load_anonymized, parse_labels, replace_spans)
from toolkit.scrub.sentences import (MASK, SENTENCE_COLUMNS, read_sentences, split_dev_test, split_sentences, tag_sentences, with_model_mask, word_hash, write_sentences)
from toolkit.scrub.candidates import (CANDIDATE_COLUMNS, NameScoreConfig, common_words, fill_mask, load_candidates, ner_shares, rank_candidates, save_candidates, score_tokens, token_kind, token_statistics, vocabulary_surfaces)
from toolkit.scrub.scrub import (MANIFEST, check_tokenizer_files, names_in_vocabulary, scrub_model, tokenizer_vocab)

__all__ = ['AnonymizeConfig', 'Anonymized', 'CANDIDATE_COLUMNS', 'DEFAULT_TAGS', 'MANIFEST', 'MASK', 'NameScoreConfig', 'OFFSET_COLUMNS', 'SENTENCE_COLUMNS', 'anonymize_corpus', 'check_tokenizer_files', 'common_words', 'fill_mask', 'load_anonymized', 'load_candidates', 'names_in_vocabulary', 'ner_shares', 'parse_labels', 'rank_candidates', 'read_sentences', 'replace_spans', 'save_candidates', 'score_tokens', 'scrub_model', 'split_dev_test', 'split_sentences', 'tag_sentences', 'token_kind', 'token_statistics', 'tokenizer_vocab', 'vocabulary_surfaces', 'with_model_mask', 'word_hash', 'write_sentences']
