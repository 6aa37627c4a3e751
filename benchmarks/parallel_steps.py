"""A run's training steps side by side (toolkit.pipelines.parallel) against one after the other, in one run.

Notebook 02's configuration (``configs/cpu_masked.yaml``, 20 members, the CPU profile's 64 epochs) with two
strategies and no audit: first one after the other on every core (``TOOLKIT_PROCESSES=1``, today's order before the
change), then — from a copy of that run's base model and identifiers, so only training differs — side by side (one
process per strategy, the cores shared out). Prints both wall times of the training steps and the ratio.

    python benchmarks/parallel_steps.py --out /tmp/parallel_steps [--strategies mlm,mlm_pseudo] [--processes 2,3]

``--processes 2,3`` with three strategies measures what a third worker process costs on two cores (the toolkit's
rule, :func:`toolkit.pipelines.parallel.step_processes`, takes three processes for three steps on two cores).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "cpu_masked.yaml"
NO_AUDIT = ["--set", "audit.attacks.enabled=false", "--set", "audit.base_model=false",
            "--set", "audit.checkpoints=last"]


def run(out: Path, strategies: str, processes: str | None) -> float:
    env = dict(os.environ)
    env.pop("TOOLKIT_PROCESSES", None)
    if processes is not None:
        env["TOOLKIT_PROCESSES"] = processes
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "toolkit", "run", str(CONFIG), "--out", str(out), "--quiet",
                    "--set", f"training.strategies=[{strategies}]", *NO_AUDIT], cwd=ROOT, env=env, check=True)
    return time.perf_counter() - t0


def training_seconds(out: Path) -> dict[str, float]:
    steps = json.loads((out / "manifest.json").read_text(encoding="utf-8"))["steps"]
    return {s["name"]: s["seconds"] for s in steps if s["name"].startswith("train/")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--strategies", default="mlm,mlm_pseudo")
    ap.add_argument("--processes", default="auto",
                    help="side-by-side process counts to compare, e.g. 2,3 (auto: the toolkit's own choice)")
    a = ap.parse_args()
    if a.out.exists():
        shutil.rmtree(a.out)
    a.out.mkdir(parents=True)
    serial = a.out / "one_after_the_other"
    wall_serial = run(serial, a.strategies, "1")
    s = training_seconds(serial)
    steps = ", ".join(f"{k} {v:.1f} s" for k, v in s.items())
    print(f"one after the other: training steps {sum(s.values()):.1f} s ({steps}); whole run {wall_serial:.1f} s",
          flush=True)
    result = {"one_after_the_other": s, "wall": {"one_after_the_other": wall_serial}, "side_by_side": {}}
    for n in a.processes.split(","):
        side = a.out / f"side_by_side_{n}"
        shutil.copytree(serial, side, ignore=shutil.ignore_patterns("runs", "audit", ".lock"))
        wall_side = run(side, a.strategies, None if n == "auto" else n)
        p = training_seconds(side)
        # the run's wall time, its base model and identifiers cached: the training steps' wall time and a few seconds
        print(f"side by side ({n} processes): whole run {wall_side:.1f} s, each step "
              f"({', '.join(f'{k} {v:.1f} s' for k, v in p.items())}); one after the other's training steps / this "
              f"whole run: {sum(s.values()) / wall_side:.2f}x; cores: {os.cpu_count()}", flush=True)
        result["side_by_side"][n] = p
        result["wall"][f"side_by_side_{n}"] = wall_side
    (a.out / "result.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
