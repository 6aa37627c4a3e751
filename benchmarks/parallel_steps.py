"""A run's training steps side by side (toolkit.pipelines.parallel) against one after the other, in one run.

Notebook 02's configuration (``configs/cpu_masked.yaml``, 20 members, the CPU profile's 64 epochs) with two
strategies and no audit: first one after the other on every core (``TOOLKIT_PROCESSES=1``, today's order before the
change), then — from a copy of that run's base model and identifiers, so only training differs — side by side (one
process per strategy, the cores shared out). Prints both wall times of the training steps and the ratio.

    python benchmarks/parallel_steps.py --out /tmp/parallel_steps [--strategies mlm,mlm_pseudo]
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
    a = ap.parse_args()
    if a.out.exists():
        shutil.rmtree(a.out)
    a.out.mkdir(parents=True)
    serial, side = a.out / "one_after_the_other", a.out / "side_by_side"
    wall_serial = run(serial, a.strategies, "1")
    shutil.copytree(serial, side, ignore=shutil.ignore_patterns("runs", "audit", ".lock"))
    wall_side = run(side, a.strategies, None)
    s, p = training_seconds(serial), training_seconds(side)
    print(f"one after the other: training steps {sum(s.values()):.1f} s ({', '.join(f'{k} {v:.1f} s' for k, v in s.items())}); "
          f"whole run {wall_serial:.1f} s")
    print(f"side by side: training steps {max(p.values()):.1f} s of wall time ({', '.join(f'{k} {v:.1f} s' for k, v in p.items())}); "
          f"whole run {wall_side:.1f} s (base model and identifiers cached)")
    print(f"ratio (training): {sum(s.values()) / max(p.values()):.2f}x; cores: {os.cpu_count()}")
    (a.out / "result.json").write_text(json.dumps({"one_after_the_other": s, "side_by_side": p,
                                                    "wall": {"one_after_the_other": wall_serial,
                                                             "side_by_side": wall_side}}, indent=1))


if __name__ == "__main__":
    main()
