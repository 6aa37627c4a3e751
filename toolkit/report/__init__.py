"""The audit report: a self-contained offline HTML file for a privacy office (``python -m toolkit report``).

* :func:`collect_run` reads a finished run directory (``python -m toolkit run`` or a notebook work directory).
* :func:`build_report` writes the HTML for one or several run directories; :func:`render_report` returns it
  (:mod:`toolkit.report.render`; the sections are in :mod:`toolkit.report.sections`).
"""

from toolkit.report.collect import RunData, collect_run, read_review_log
from toolkit.report.render import EDPB, READING, build_report, render_report, run_findings
from toolkit.report.sections import SECTIONS

__all__ = ["EDPB", "READING", "RunData", "SECTIONS", "build_report", "collect_run", "read_review_log",
           "render_report", "run_findings"]
