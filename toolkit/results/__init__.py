"""What a run directory holds, read back: the one layout of its paths, the reader behind the report and notebook 06,
and the results tables (below ``plots/`` and ``report/``, above the rooms that compute; nothing here trains, probes
or renders).

* :mod:`toolkit.results.collect` — :func:`collect_run` reads a run directory (``toolkit run``, a notebook work
  directory, a ``toolkit audit`` folder) into a :class:`RunData`;
* :mod:`toolkit.results.attack_files` — the attack battery's and the verdicts' files of each model;
* :mod:`toolkit.results.tables` — :func:`results_table`, :func:`protection_table`, :func:`protection_findings`,
  :func:`runs_table`;
* :mod:`toolkit.results.evidence` — :func:`evidence_table` (each model's verdict, strongest attack, held-out utility,
  gain retained and the papers' metrics) and :func:`findings`, the closing sentences read off it.
"""

from toolkit.results.collect import RunData, collect_run, read_review_log
from toolkit.results.evidence import evidence_table, findings
from toolkit.results.tables import protection_findings, protection_table, results_table, runs_table

__all__ = ["RunData", "collect_run", "evidence_table", "findings", "protection_findings", "protection_table", "read_review_log",
           "results_table", "runs_table"]
