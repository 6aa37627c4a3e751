"""The workshop's first command, as a participant types it: ``python -m toolkit run configs/quickstart.yaml --quiet``
in a fresh process prints a few lines — nothing from Hugging Face, no progress bar, no log dictionary — ending with
the results table (one row per audited model with its verdict). The pre-built base (``prebuilt/``) is copied, not
pre-trained; a shorter schedule, 10 + 10 patients and smaller attacks keep the test short (the config's other
settings are the workshop's)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_quickstart_golden import CLI_SETTINGS, check_golden

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_quickstart_quiet_prints_only_the_results_table(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "toolkit", "run", "configs/quickstart.yaml", "--out", str(out),
                           "--quiet", *CLI_SETTINGS],
                          cwd=ROOT, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2")})
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    assert len(lines) <= 15, lines
    head = next(i for i, line in enumerate(lines) if line.startswith("model "))
    rows = lines[head + 1:]
    assert [r.split()[0] for r in rows] == ["base", "clm", "ppclm"]
    assert all(any(level in r for level in ("green", "amber", "red", "incomplete")) for r in rows)
    steps = {s["name"]: s["status"] for s in json.loads((out / "manifest.json").read_text())["steps"]}
    assert steps["base"] == "prebuilt"
    check_golden(out, "cli_files")  # the values of its result files: tests/data/quickstart_golden.json
