"""The appendix of the report: technical material a privacy officer does not need in a first reading (the run's
manifest: versions, seeds, data fingerprints, steps); the tables of hashed identifiers join it from their sections
(blocks marked ``appendix=True``)."""

from __future__ import annotations

import json

import pandas as pd

from toolkit.results.collect import RunData
from toolkit.report.formatting import block, fmt, table


def manifest_section(run: RunData) -> list[dict]:
    """The manifest of a run (``python -m toolkit run``): facts, package versions, data fingerprints, steps."""
    m = run.manifest
    if not m:
        return [block("absent", "No manifest.json in this directory (a notebook work directory): the package "
                                "versions and parameters are in the executed notebook.")]
    env = m.get("environment") or {}
    git = env.get("git") or {}
    hw = env.get("hardware") or {}
    facts = {"experiment": m.get("name"), "status": m.get("status"), "started": m.get("started"),
             "finished": m.get("finished"), "total seconds (this invocation)": m.get("total_seconds"),
             "config file": m.get("config_file"), "config SHA-256": (m.get("config_sha256") or "")[:16],
             "git commit": (git.get("commit") or "n/a")[:12] + (" (uncommitted changes)" if git.get("dirty") else ""),
             "python": env.get("python"), "hardware": f"{hw.get('cpu_count')} CPUs, "
             + (", ".join(hw.get("gpus") or []) or "no GPU") + f", {hw.get('world_size', 1)} process(es)",
             "seeds": ", ".join(f"{k} {v}" for k, v in (m.get("seeds") or {}).items() if v is not None)}
    blocks = [block("table", table(pd.Series({k: fmt(v) for k, v in facts.items()}, name="").to_frame()))]
    pk = {k: v for k, v in (env.get("packages") or {}).items() if v}
    if pk:
        blocks.append(block("table", table(pd.Series(pk, name="version").rename_axis("package").to_frame()),
                            "Package versions."))
    ds = m.get("datasets") or {}
    rows = {}
    for role, f in ds.items():
        if role == "corpus_files":
            for i, cf in enumerate(f):
                rows[f"corpus file {i + 1}"] = {"documents": "—", "individuals": "—", "bytes": fmt(cf.get("bytes")),
                                                "SHA-256 (16 hex)": cf.get("sha256", "")[:16]}
        elif isinstance(f, dict):
            rows[role] = {"documents": fmt(f.get("n_documents")), "individuals": fmt(f.get("n_individuals")), "bytes": "—",
                          "SHA-256 (16 hex)": f.get("sha256", "")[:16]}
    if rows:
        blocks.append(block("table", table(pd.DataFrame(rows).T.rename_axis("data")),
                            "Dataset fingerprints: SHA-256 over document ids and texts (never the text itself)."))
    steps = pd.DataFrame(m.get("steps") or [])
    if len(steps):
        cols = [c for c in ("name", "status", "seconds", "original_seconds") if c in steps.columns]
        blocks.append(block("table", table(steps[cols], index=False),
                            "Steps of this invocation: ran, cached (up to date: output kept; original_seconds is "
                            "what it took when it ran) or external (a pre-trained base)."))
    blocks.append(block("pre", json.dumps(m, indent=2, ensure_ascii=False), "Full manifest.json"))
    return blocks


__all__ = ["manifest_section"]
