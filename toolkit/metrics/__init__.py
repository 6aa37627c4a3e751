"""Metrics (scikit-learn style, pure functions): privacy and utility of probe predictions (probing), ROC / TPR at FPR / bootstrap for membership attacks (mia), e-mail extraction (TER, SER, MDP, MaxTER, AURC), vocabulary-scrubbing quality."""

from __future__ import annotations

from toolkit.metrics.probing import (check_columns, heldout_utility, leaked, leaked_by_category, norm_series, norm_set, normalize_word, privacy, privacy_report, regurgitation_table, utility)
from toolkit.metrics.mia import (auxiliary_knowledge_identifiable, hanley_mcneil_ci, mia_report, mia_scores, roc, tpr_at_fpr)

__all__ = ['auxiliary_knowledge_identifiable', 'check_columns', 'hanley_mcneil_ci', 'heldout_utility', 'leaked', 'leaked_by_category', 'mia_report', 'mia_scores', 'norm_series', 'norm_set', 'normalize_word', 'privacy', 'privacy_report', 'regurgitation_table', 'roc', 'tpr_at_fpr', 'utility']
