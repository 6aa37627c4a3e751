"""The names of the files in one model's attack folder, named once: :class:`toolkit.audit.model_audit.ModelAudit`
writes them (its :meth:`~toolkit.audit.model_audit.ModelAudit.to_files` is their only writer), the pipelines plan and
cache steps by them and :mod:`toolkit.results` reads them. Besides the names only :func:`write_attack_files`, the
one writer of the folder; this module imports nothing of ``audit``, so every room above it may read it.

=================== ==================================================================================================
``attacks.json``    the membership battery: per attack its AUC, interval and TPR at FPR; the audit's settings
``roc.json``        ROC points per attack
``scores.parquet``  per-unit scores of every attack (members and non-members)
``identifiers.json`` PII inference, memorisation, canaries (aggregates only, never an identifier)
``verdict.json``    the verdict (methods.md §11)
``one_run.parquet`` the one-run audit's canaries: id, host individual, inclusion, insertions, score (made-up records)
=================== ==================================================================================================
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

ATTACKS = "attacks.json"
ROC = "roc.json"
SCORES = "scores.parquet"
IDENTIFIERS = "identifiers.json"
VERDICT = "verdict.json"
ONE_RUN = "one_run.parquet"

#: every file of an attack folder by the key :meth:`~toolkit.audit.model_audit.ModelAudit.to_dict` gives it
ATTACK_FOLDER = {"attacks": ATTACKS, "roc": ROC, "scores": SCORES, "identifiers": IDENTIFIERS, "verdict": VERDICT,
                 "one_run": ONE_RUN}
#: the JSON files a reader of results opens (a folder counts as audited when it has attacks.json or verdict.json)
ATTACK_JSON = {key: name for key, name in ATTACK_FOLDER.items() if name.endswith(".json")}
#: the file whose presence says the attack step finished (the step registry's check file)
DONE = VERDICT


def write_attack_files(out_dir: str | Path, parts: Mapping[str, Any]) -> dict[str, Path]:
    """Write ``parts`` (keys of :data:`ATTACK_FOLDER`: JSON documents, or data frames for the Parquet files) into
    the attack folder ``out_dir`` (created owner-only), each file atomically, ``verdict.json`` last. The one writer
    of an attack folder: :meth:`~toolkit.audit.model_audit.ModelAudit.to_files` writes a whole audit through it,
    ``toolkit audit`` the settings of a cached audit asked again (``attacks`` alone), ``BatteryResult.save`` a
    battery alone."""
    from toolkit.io import atomic_write_json, atomic_write_parquet, make_private_dir

    unknown = set(parts) - set(ATTACK_FOLDER)
    if unknown:
        raise ValueError(f"not files of an attack folder: {sorted(unknown)}")
    out = make_private_dir(out_dir)
    written = {}
    for key in sorted(parts, key=lambda k: ATTACK_FOLDER[k] == DONE):  # the check file last
        name, value = ATTACK_FOLDER[key], parts[key]
        written[key] = atomic_write_parquet(value, out / name) if name.endswith(".parquet") else \
            atomic_write_json(value, out / name)
    return written


__all__ = ["ATTACKS", "ATTACK_FOLDER", "ATTACK_JSON", "DONE", "IDENTIFIERS", "ONE_RUN", "ROC", "SCORES", "VERDICT",
           "write_attack_files"]
