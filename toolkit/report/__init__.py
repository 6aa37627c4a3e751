"""The audit report: a self-contained offline HTML file for a privacy office (``python -m toolkit report``).

* :func:`collect_run` reads a finished run directory (``python -m toolkit run`` or a notebook work directory) or a
  ``python -m toolkit audit`` directory, with the attack battery and verdict files where present.
* :func:`build_report` writes the HTML for one or several run directories; :func:`render_report` returns it
  (:mod:`toolkit.report.render`; the sections are in :mod:`toolkit.report.sections`, the verdicts at the top in
  :mod:`toolkit.report.verdicts`).
* :func:`verdicts_html` / :func:`verdicts_frame` show the verdicts in a notebook.
"""

from toolkit.results.collect import RunData, collect_run, read_review_log
from toolkit.report.render import EDPB, READING, build_report, render_report, run_findings
from toolkit.report.sections import APPENDIX, SECTIONS
from toolkit.report.verdicts import thresholds_html, verdicts_frame, verdicts_html

__all__ = ["APPENDIX", "EDPB", "READING", "RunData", "SECTIONS", "build_report", "collect_run", "read_review_log",
           "render_report", "run_findings", "thresholds_html", "verdicts_frame", "verdicts_html"]
