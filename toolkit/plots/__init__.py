"""Figures (plotly), one module per family; every figure colours a strategy the same way (:func:`strategy_color`)
and an attack the same way (:func:`toolkit.plots.attacks.attack_color`)."""

from __future__ import annotations

from toolkit.plots.attacks import (attack_roc, attack_roc_grid, attacks_table, auc_matrix, canary_table, pii_table,
                                   protection_figure, strongest_auc_figure)
from toolkit.plots.audit import (STRATEGY_PALETTE, TEMPLATE, detector_recall, ecdf_points, highlight_html, identifier_cdfs, indirect_by_parameter, indirect_share_grid, regurgitation_cdf, roc_curves, run_dashes, setup_notebook, strategy_color, strategy_colors, strategy_of, term_sharing_cdf, tpr_table,
                                 tpr_table_note)
from toolkit.plots.tradeoff import privacy_utility, privacy_variants

__all__ = ['STRATEGY_PALETTE', 'TEMPLATE', 'attack_roc', 'attack_roc_grid', 'attacks_table', 'auc_matrix', 'canary_table', 'detector_recall', 'ecdf_points', 'highlight_html', 'identifier_cdfs', 'indirect_by_parameter', 'indirect_share_grid', 'pii_table', 'privacy_utility', 'protection_figure', 'privacy_variants', 'regurgitation_cdf', 'roc_curves', 'run_dashes', 'setup_notebook', 'strategy_color', 'strategy_colors', 'strategy_of', 'strongest_auc_figure', 'term_sharing_cdf', 'tpr_table', 'tpr_table_note']
