"""Delete what a run directory holds about people, keep its numbers (``python -m toolkit purge RUN_DIR``).

A run directory holds raw identifiers in many places (``PRIVACY.md`` lists them): the identifier tables, the
probes' predictions, the trained models and tokenizers (which memorise training text), corpora written by RMFT or
dedup and their replacement maps, extraction tables with leaked addresses, review files, candidate tables, skipped
records, executed notebooks. :func:`purge_run` therefore works from an **allow-list**: it keeps only the files
known to hold counts, settings, fingerprints or keyed hashes (:data:`KEEP`), and removes everything else, including
files it does not know, the run's hash key (``.hash_key``: without it the tokens of a kept report can no longer be
matched to names, by anyone) and every model or tokenizer folder with whatever is inside it. With
``keep_report=True`` it also keeps the HTML reports built in keyed-hash mode (``<meta name="identifiers"
content="keyed-hash">``); a report built with ``--show-identifiers``, or by a version that hashed without a key, is
removed. Folders left empty are removed. Symbolic links are removed as links; what they point to is not touched.

Files are unlinked, not overwritten: copies in backups, snapshots or elsewhere on disk are not reached.

:func:`purge_ner_cache` (``python -m toolkit purge --ner-cache``) removes the NER cache shared by all runs (outside
any run directory: spans keyed by SHA-256 of text pieces, :mod:`toolkit.identifiers.ner_cache`).
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from toolkit.errors import ToolkitError
from toolkit.io import atomic_write_json, private_umask

#: File names that hold only counts, settings, fingerprints, timings or keyed hashes (checked by
#: ``tests/test_privacy.py`` against a real run): what a purged run keeps.
KEEP = frozenset({
    "manifest.json",           # run manifest (versions, config, dataset SHA-256, step timings); identifier tables' file hashes
    "config.yaml",             # the experiment config
    "step.json",               # cache record of a step: its config section and input fingerprints
    "run.json",                # training run: settings, corpus fingerprint, timings
    "metrics.json",            # probe metrics: privacy, utility, counts per category
    "roc.json",                # membership-inference ROC points and AUC
    "attacks.json",            # attack battery: AUC and TPR per attack
    "summary.json",            # identifier-analysis and extraction summaries: counts
    "technique_summary.json",  # RMFT / dedup transformation counts
    "aurc.json",               # MaxTER / AURC report
    "maxter.parquet",          # MaxTER curves (numbers per technique and tau)
    "checkpoints.parquet",     # extraction comparison per checkpoint (counts, rates, perplexity)
    "anonymity.json",          # anonymity test counts
    "regurgitation.json",      # regurgitation counts and keyed-hash examples (kept only when keyed)
    "purge.json",              # what an earlier purge removed (counts)
    "verdict.json",            # one model's verdict: level, rule, figures (no identifier)
    "verdicts.json",           # every audited model's verdict
    "identifiers.json",        # identifier attacks: PII-inference / memorisation / canary figures (no identifier)
})
#: Files whose presence marks a folder as a model or tokenizer: the whole folder goes (weights memorise text).
MODEL_MARKERS = ("config.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json",
                 "model.safetensors", "pytorch_model.bin", "optimizer.pt", "trainer_state.json")
RUN_MARKERS = ("manifest.json", "step.json", ".hash_key")
_KEYED_REPORT = re.compile(rb'<meta name="identifiers" content="keyed-hash">')


@dataclass
class PurgeResult:
    """What :func:`purge_run` removed (or, with ``dry_run``, would remove) and kept; paths relative to ``run_dir``."""

    run_dir: Path
    removed: list[Path] = field(default_factory=list)
    kept: list[Path] = field(default_factory=list)
    bytes_removed: int = 0
    dry_run: bool = False

    def summary(self) -> dict:
        """Counts only (no path): what ``purge.json`` records."""
        return {"purged": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "n_removed": len(self.removed),
                "bytes_removed": self.bytes_removed, "n_kept": len(self.kept)}


def _is_model_dir(d: Path, names: list[str]) -> bool:
    return any(m in names for m in MODEL_MARKERS) or d.name.startswith(("checkpoint-", ".tokenizer"))


def _keep(path: Path, keep_report: bool) -> bool:
    """Whether ``path`` (a regular file outside model folders) holds only numbers, settings or keyed hashes."""
    name = path.name
    if name.endswith(".summary.json"):
        return True
    if name == "regurgitation.json":
        try:
            return "run's key" in str(json.loads(path.read_text(encoding="utf-8")).get("examples_hash") or "")
        except (OSError, ValueError, AttributeError):
            return False
    if name.endswith(".html"):
        if not keep_report:
            return False
        with open(path, "rb") as fh:
            return bool(_KEYED_REPORT.search(fh.read(4096)))
    return name in KEEP


def _looks_like_run(root: Path) -> bool:
    if any((root / m).exists() for m in RUN_MARKERS):
        return True
    for depth in ("*/step.json", "*/*/step.json", "*/*/*/step.json"):
        if next(root.glob(depth), None) is not None:
            return True
    return False


def purge_run(run_dir: str | Path, *, keep_report: bool = False, dry_run: bool = False) -> PurgeResult:
    """Remove every file of ``run_dir`` that is not on the allow-list (module docstring); returns what was removed.

    ``run_dir`` must be a toolkit run or notebook work directory (it holds ``manifest.json``, ``.hash_key`` or a
    step's ``step.json``): purging any other folder is refused, nothing is removed. ``dry_run`` removes nothing and
    returns what would go. A purge writes ``purge.json`` (counts only) into ``run_dir``.
    """
    root = Path(run_dir)
    if root.is_symlink() or not root.is_dir():
        raise ToolkitError(f"{root}: not a directory")
    if not _looks_like_run(root):
        raise ToolkitError(f"{root}: does not look like a run directory (no manifest.json, .hash_key or step.json "
                           "inside): nothing removed")
    result = PurgeResult(root, dry_run=dry_run)
    doomed: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        d = Path(dirpath)
        if d != root and _is_model_dir(d, filenames):
            dirnames[:] = []
            doomed += [p for p in sorted(d.rglob("*")) if p.is_symlink() or not p.is_dir()]
            continue
        for name in list(dirnames):
            if (d / name).is_symlink():  # a link to a folder: remove the link, never walk into its target
                dirnames.remove(name)
                doomed.append(d / name)
        for name in sorted(filenames):
            p = d / name
            if p.is_symlink() or not p.is_file() or not _keep(p, keep_report):
                doomed.append(p)
            else:
                result.kept.append(p.relative_to(root))
    for p in doomed:
        result.removed.append(p.relative_to(root))
        if p.is_file() and not p.is_symlink():
            result.bytes_removed += p.stat().st_size
    if dry_run:
        return result
    with private_umask():
        for p in doomed:
            p.unlink(missing_ok=True)
        for dirpath, _, _ in sorted(os.walk(root, followlinks=False), key=lambda t: -len(Path(t[0]).parts)):
            d = Path(dirpath)
            if d != root and not d.is_symlink() and not any(d.iterdir()):
                d.rmdir()
        atomic_write_json(result.summary(), root / "purge.json")
    return result


@dataclass
class NerCachePurge:
    """What :func:`purge_ner_cache` removed (or, with ``dry_run``, would remove): counts only."""

    cache_dir: Path
    n_files: int = 0
    bytes_removed: int = 0
    n_models: int = 0
    dry_run: bool = False


_NAMESPACE = re.compile(r"^[0-9a-f]{32}$")
_CACHE_FILE = re.compile(r"^(?:part-[0-9a-f]{32}\.parquet|\.part-[0-9a-f]{32}\.parquet\.tmp|namespace\.json|"
                         r"\.namespace\.json\..*\.tmp)$")


def purge_ner_cache(cache_dir: str | Path | None = None, *, dry_run: bool = False) -> NerCachePurge:
    """Remove the NER cache shared by all runs (:mod:`toolkit.identifiers.ner_cache`: spans keyed by SHA-256 of
    text pieces; ``cache_dir`` None: the default folder). Only the cache's own files go (part files, namespace
    records, the ``CACHEDIR.TAG``, then the folders left empty); a folder without the toolkit's ``CACHEDIR.TAG`` is
    refused, nothing removed. A missing folder is an empty cache. Another run writing meanwhile may add a file
    after the purge."""
    from toolkit.identifiers.ner_cache import TAG, resolve_cache_dir

    root = resolve_cache_dir(cache_dir)
    result = NerCachePurge(root, dry_run=dry_run)
    if not root.exists() and not root.is_symlink():
        return result
    tag = root / TAG
    if root.is_symlink() or not root.is_dir() or not tag.is_file() or b"lm-anonymity-toolkit" not in tag.read_bytes():
        raise ToolkitError(f"{root}: not an NER cache of this toolkit (no CACHEDIR.TAG of lm-anonymity-toolkit "
                           "inside): nothing removed")
    doomed: list[Path] = []
    spaces = [d for d in sorted(root.iterdir()) if _NAMESPACE.match(d.name) and d.is_dir() and not d.is_symlink()]
    for d in spaces:
        doomed += [p for p in sorted(d.iterdir()) if _CACHE_FILE.match(p.name) and p.is_file()
                   and not p.is_symlink()]
    doomed.append(tag)
    result.n_models = len(spaces)
    result.n_files = len(doomed)
    result.bytes_removed = sum(p.stat().st_size for p in doomed)
    if dry_run:
        return result
    for p in doomed:
        p.unlink(missing_ok=True)
    for d in spaces + [root]:
        if not any(d.iterdir()):
            d.rmdir()
    return result


__all__ = ["KEEP", "NerCachePurge", "PurgeResult", "purge_ner_cache", "purge_run"]
