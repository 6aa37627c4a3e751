"""`make install`'s way against the obvious one, in one run: two fresh virtual environments, empty download caches.

- **pip** (the Makefile before `92265a9`, 2026-11-28): ``pip install -c constraints.txt torch==2.13.0``, then
  ``pip install -c constraints.txt -e ".[dev]"`` — pip resolves and downloads one package after the other and
  byte-compiles every module it installs;
- **make install** (today): torch by pip without byte-compiling (``--no-compile``; Python compiles what it imports,
  once, on first import), then ``uv pip install -c constraints.txt -e ".[dev]"`` (uv resolves and downloads side by
  side).

Both end with the same packages at the same versions (checked: ``pip freeze`` of both environments, the editable
project aside) and torch's CPU build. Prints a Markdown table (docs/performance.md).

    python benchmarks/install.py [--out runs/install]
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
PIP = ["-m", "pip", "install", "-q", "--progress-bar", "off", "-c", str(ROOT / "constraints.txt")]


def _timed(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def _freeze(py: Path) -> set[str]:
    out = subprocess.run([str(py), "-m", "pip", "freeze", "--exclude-editable"], capture_output=True, text=True,
                         check=True).stdout
    return {line.strip().lower().replace("_", "-") for line in out.splitlines()
            if line.strip() and not line.startswith(("uv==", "-e"))}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/install")
    args = ap.parse_args(argv)
    out = Path(args.out).resolve()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    result = {"commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                       cwd=ROOT).stdout.strip(), "seconds": {}}
    for way in ("pip", "make install"):
        venv = out / way.replace(" ", "_")
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        py = venv / "bin" / "python"
        env = {**os.environ, "PIP_CACHE_DIR": str(out / f"{venv.name}-pip-cache"),
               "UV_CACHE_DIR": str(out / f"{venv.name}-uv-cache")}
        if way == "pip":
            t = {"torch": _timed([str(py), *PIP, "torch==2.13.0"], env),
                 "the rest": _timed([str(py), *PIP, "-e", ".[dev]"], env)}
        else:
            t = {"torch": _timed([str(py), *PIP, "--no-compile", "torch==2.13.0", "uv"], env),
                 "the rest": _timed([str(py), "-m", "uv", "pip", "install", "-q", "--python", str(py), "-c",
                                     str(ROOT / "constraints.txt"), "-e", ".[dev]"], env)}
        t["total"] = t["torch"] + t["the rest"]
        result["seconds"][way] = t
        result.setdefault("packages", {})[way] = sorted(_freeze(py))
    a, b = (set(result["packages"][w]) for w in ("pip", "make install"))
    result["same_packages"] = a == b
    result["differences"] = sorted(a ^ b)
    result["load"] = os.getloadavg()[0]
    (out / "result.json").write_text(json.dumps(result, indent=1), encoding="utf-8")
    s = result["seconds"]
    print("| way | torch | the rest (`-e .[dev]`) | total |\n|---|---|---|---|")
    for way, t in s.items():
        print(f"| {way} | {t['torch']:.1f} s | {t['the rest']:.1f} s | {t['total']:.1f} s |")
    print(f"\nspeed-up {s['pip']['total'] / s['make install']['total']:.1f}x; same packages: {result['same_packages']} "
          f"{result['differences'][:10]}; load {result['load']:.2f}")
    return result


if __name__ == "__main__":
    main()
