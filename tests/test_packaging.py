"""Repository set-up: environment.yml mirrors pyproject.toml; notebooks are stripped and paired; CLI help works."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]


def _norm(req: str) -> tuple[str, str]:
    r = Requirement(req)
    return r.name.lower().replace("_", "-"), str(r.specifier)


def test_environment_yml_matches_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = {_norm(r) for r in project["dependencies"] + project["optional-dependencies"]["dev"]}
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    listed = {_norm(r) for r in pip_section if not r.startswith("-e")}
    assert listed == wanted, f"only in environment.yml: {listed - wanted}; only in pyproject: {wanted - listed}"
    assert "python=3.11" in env["dependencies"]


def test_constraints_pin_torch_cpu_wheel():
    lines = (ROOT / "constraints.txt").read_text().splitlines()
    assert "torch==2.13.0" in lines


def test_notebooks_are_stripped_and_paired():
    import jupytext

    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    assert notebooks, "no notebooks found"
    for nb_path in notebooks:
        nb = json.loads(nb_path.read_text())
        with_outputs = [i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code"
                        and (c.get("outputs") or c.get("execution_count") is not None)]
        assert not with_outputs, f"{nb_path.name}: cells {with_outputs} carry outputs (strip them)"
        script = nb_path.with_suffix(".py")
        assert script.is_file(), f"{nb_path.name} has no paired jupytext script {script.name}"
        paired = jupytext.read(script)
        src = [c["source"] if isinstance(c["source"], str) else "".join(c["source"]) for c in nb["cells"]]
        assert [c.source for c in paired.cells] == src, f"{nb_path.name} and {script.name} differ: run jupytext --sync"


def test_cli_help():
    out = subprocess.run([sys.executable, "-m", "toolkit", "--help"], capture_output=True, text=True, check=True)
    assert "identifiers" in out.stdout
