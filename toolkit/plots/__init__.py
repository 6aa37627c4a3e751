"""Figures (plotly), one module per family; every figure colours a strategy the same way."""

from __future__ import annotations

from toolkit.plots.audit import (TEMPLATE, detector_recall, ecdf_points, highlight_html, identifier_cdfs, indirect_by_parameter, privacy_utility, privacy_variants, regurgitation_cdf, roc_curves, setup_notebook, strategy_colors, term_sharing_cdf, tpr_table)

__all__ = ['TEMPLATE', 'detector_recall', 'ecdf_points', 'highlight_html', 'identifier_cdfs', 'indirect_by_parameter', 'privacy_utility', 'privacy_variants', 'regurgitation_cdf', 'roc_curves', 'setup_notebook', 'strategy_colors', 'term_sharing_cdf', 'tpr_table']
