"""Read a finished run directory into memory for the report and notebook 06 (nothing is recomputed but tables).

A run directory is what ``python -m toolkit run`` writes, or the work directory of notebooks 02/03 (same layout
without ``manifest.json``); e-mail extraction (``extraction.parquet``, ``maxter.parquet``, ``aurc.json``, methods.md §6)
and vocabulary scrubbing outputs (review log ``*review*.jsonl|csv``, ``anonymity.json``, methods.md §7) are picked up
anywhere below it. Every path is the run layout's (:class:`~toolkit.results.layout.RunLayout`); the attack battery
and verdict files (``attacks/``) are read by :mod:`toolkit.results.attack_files`. Every part is optional;
:func:`collect_run` fails only when nothing recognisable is found.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from toolkit.errors import ToolkitError
from toolkit.results.attack_files import collect_attacks, order_models
from toolkit.results.layout import RunLayout, read_json

REVIEW_COLUMNS = {"token", "decision"}
_SKIP_DIRS = {"trainer", ".git", "__pycache__"}


@dataclass
class RunData:
    """One run's outputs. ``audits`` maps ``(strategy, epoch)`` (``("base", 0)`` for the base model, ``(label, None)``
    for an audited model, whose epochs are unknown) to ``{"metrics", "roc", "dir"}``; predictions are read on demand
    with :meth:`predictions`."""

    path: Path
    label: str
    manifest: dict[str, Any] | None = None
    config: dict[str, Any] | None = None
    kind: str | None = None
    ids_summary: dict[str, dict[str, Any]] = field(default_factory=dict)  # "members" / "all"
    individuals: pd.DataFrame | None = None
    terms: pd.DataFrame | None = None
    train_runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    audits: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    regurgitation: dict[str, dict[str, Any]] = field(default_factory=dict)
    extraction: pd.DataFrame | None = None
    maxter: pd.DataFrame | None = None
    aurc: list[dict[str, Any]] = field(default_factory=list)
    reviews: list[dict[str, Any]] = field(default_factory=list)  # {"file", "records", "current"} per review log
    anonymity: list[dict[str, Any]] = field(default_factory=list)
    attacks: dict[str, dict[str, Any]] = field(default_factory=dict)  # model label -> attack files (attack_files)
    missed: dict[str, dict[str, Any]] = field(default_factory=dict)  # model label -> missed.json (missed gold ids)

    @property
    def strategies(self) -> list[str]:
        """Fine-tuned strategies with at least one audit, in config order when known."""
        from toolkit.strategies import STRATEGIES

        found = list(dict.fromkeys(s for s, _ in sorted(self.audits, key=lambda k: (k[0], k[1] or 0)) if s != "base"))
        # the config's order; for a notebook work directory (no config) the toolkit's own (mlm, mlm_pseudo, ppmlm …)
        order = ((self.config or {}).get("training") or {}).get("strategies") or list(STRATEGIES)
        return [s for s in order if s in found] + [s for s in found if s not in order]

    def epochs(self, strategy: str) -> list[int | None]:
        return sorted((e for s, e in self.audits if s == strategy), key=lambda e: -1 if e is None else e)

    def last(self, strategy: str) -> tuple[int, dict[str, Any]] | None:
        eps = self.epochs(strategy)
        return (eps[-1], self.audits[(strategy, eps[-1])]) if eps else None

    def predictions(self, strategy: str, epoch: int) -> pd.DataFrame | None:
        p = self.audits[(strategy, epoch)]["dir"] / "predictions.parquet"
        return pd.read_parquet(p) if p.is_file() else None

    def identifiers(self, part: str = "members") -> dict[str, Any] | None:
        """``load_identifiers`` of ``identifiers_{part}`` (None when absent)."""
        from toolkit.identifiers import load_identifiers

        d = RunLayout(self.path).identifiers(part)
        try:
            return load_identifiers(d) if d.is_dir() else None
        except ToolkitError:
            return None

    @property
    def has_audits(self) -> bool:
        return bool(self.audits)

    def attack_models(self, last_only: bool = True) -> dict[str, dict[str, Any]]:
        """Models with attack results (``attacks/`` of a run, or an audit directory), the base model first, then
        each strategy's last checkpoint (every checkpoint with ``last_only=False``); see
        :mod:`toolkit.results.attack_files` for an entry's keys."""
        return order_models(self.attacks, self.strategies, last_only)

    @property
    def verdicts(self) -> dict[str, dict[str, Any]]:
        """``label → verdict.json`` of :meth:`attack_models` (models without a verdict left out)."""
        return {label: m["verdict"] for label, m in self.attack_models().items() if m.get("verdict")}


def _walk(root: Path):
    """Files below ``root``, skipping training state folders (optimizer states are large and irrelevant)."""
    stack = [root]
    while stack:
        d = stack.pop()
        try:
            entries = sorted(d.iterdir())
        except OSError:
            continue
        for e in entries:
            if e.is_dir():
                if e.name not in _SKIP_DIRS and not e.name.startswith("."):
                    stack.append(e)
            elif e.is_file():
                yield e


def _group_label(path: Path, root: Path) -> str:
    rel = path.parent.relative_to(root)
    return str(rel) if str(rel) != "." else root.name


def read_review_log(path: Path) -> dict[str, Any] | None:
    """A vocabulary review log (methods.md §7 step 4) as ``{"file", "records", "current"}``: every record, and the
    standing decision per token after undos; None when the file is not a review log (no ``token`` / ``decision``).

    JSON Lines logs are read with ``toolkit.review.store`` (append-only format, ``undo`` records, a damaged line
    is a :class:`ToolkitError` naming it); CSV logs are taken as they are (the last decision per token stands).
    """
    if path.suffix == ".jsonl":
        try:
            from toolkit.review.store import read_review, replay
        except ImportError:  # the scrubbing package is optional for the report
            read_review = replay = None
        if read_review is not None:
            first = path.read_text(encoding="utf-8", errors="replace").lstrip().split("\n", 1)[0]
            try:
                head = json.loads(first) if first else {}
            except json.JSONDecodeError:
                head = {}
            if not (isinstance(head, dict) and REVIEW_COLUMNS <= set(head)):
                return None
            records = read_review(path)
            current, _ = replay(records)
            return {"records": pd.DataFrame(records), "current": pd.DataFrame(list(current.values()))}
        rows = []
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ToolkitError(f"{path}, line {i}: invalid JSON ({exc.msg})") from None
        frame = pd.DataFrame(rows)
    else:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    if not REVIEW_COLUMNS <= set(frame.columns):
        return None
    ordered = frame.sort_values("timestamp", kind="stable") if "timestamp" in frame.columns else frame
    current = ordered[ordered["decision"] != "undo"].drop_duplicates("token", keep="last")
    return {"records": frame, "current": current}


def collect_run(path: str | Path, label: str | None = None) -> RunData:
    """Read every known output below ``path`` (see the module docstring)."""
    root = Path(path)
    if not root.is_dir():
        raise ToolkitError(f"{root}: not a directory (expected a run directory of `python -m toolkit run` or a "
                           f"notebook work directory)")
    run = RunData(path=root, label=label or root.name)
    layout = RunLayout(root)
    if layout.manifest.is_file():
        run.manifest = read_json(layout.manifest)
        run.config = run.manifest.get("config")
        run.label = label or run.manifest.get("name") or root.name
    elif layout.config.is_file():
        run.config = yaml.safe_load(layout.config.read_text(encoding="utf-8"))
    if run.config:
        run.kind = (run.config.get("model") or {}).get("kind")
    # with a manifest, only the outputs of the current configuration count (a changed config can leave the
    # outputs of e.g. a dropped checkpoint epoch behind)
    current = None
    if run.manifest and run.manifest.get("steps"):
        current = {s["output"] for s in run.manifest["steps"] if s.get("output")}

    def _current(d: Path) -> bool:
        return current is None or str(d.relative_to(root)) in current

    for part in ("members", "all"):
        s = layout.identifiers(part) / "summary.json"
        if s.is_file():
            run.ids_summary[part] = read_json(s)
    ind = layout.identifiers("members") / "individuals.parquet"
    if ind.is_file():
        run.individuals = pd.read_parquet(ind)
    terms = layout.identifiers("members") / "terms.parquet"
    if terms.is_file():
        run.terms = pd.read_parquet(terms)

    for strategy, rj in layout.train_records():
        if _current(rj.parent):
            run.train_runs[strategy] = read_json(rj)

    for key, d in layout.audit_dirs():
        if _current(d):
            run.audits[key] = {"metrics": read_json(d / "metrics.json"), "roc": read_json(d / "roc.json"), "dir": d}
    run.audits = dict(sorted(run.audits.items(), key=lambda kv: (kv[0][0] != "base", kv[0][0], kv[0][1] or 0)))
    if run.kind is None and run.audits:
        any_metrics = next(iter(run.audits.values()))["metrics"]
        run.kind = "clm" if "token_accuracy" in any_metrics else "mlm"

    run.attacks = collect_attacks(root, current)

    for strategy, f in layout.regurgitation_files():
        if _current(f.parent):
            run.regurgitation[strategy] = read_json(f)
    for strategy, epoch, f in layout.missed_files():  # labelled as the attack folders are
        if _current(f.parent):
            run.missed[strategy if epoch is None else f"{strategy} (epoch {epoch})"] = read_json(f)

    extraction, maxter = [], []
    for f in _walk(root):
        name = f.name
        if name == "extraction.parquet":
            extraction.append(pd.read_parquet(f).assign(source=_group_label(f, root)))
        elif name == "maxter.parquet":
            maxter.append(pd.read_parquet(f).assign(source=_group_label(f, root)))
        elif name == "aurc.json":
            run.aurc.append({"source": _group_label(f, root), "data": read_json(f)})
        elif name == "anonymity.json":
            run.anonymity.append({"source": _group_label(f, root), "data": read_json(f)})
        elif "review" in name.lower() and f.suffix in (".jsonl", ".csv"):
            log = read_review_log(f)
            if log is not None:
                run.reviews.append({"file": str(f.relative_to(root)), **log})
    if extraction:
        run.extraction = pd.concat(extraction, ignore_index=True)
    if maxter:
        run.maxter = pd.concat(maxter, ignore_index=True)

    if not (run.audits or run.ids_summary or run.extraction is not None or run.maxter is not None or run.aurc
            or run.reviews or run.anonymity or run.manifest or run.attacks):
        raise ToolkitError(f"{root}: no run outputs found (no manifest.json, identifiers_*/, audit/, attacks/, "
                           "model folders with attacks.json, extraction.parquet, review log or anonymity.json)")
    return run


__all__ = ["RunData", "collect_run", "read_review_log"]
