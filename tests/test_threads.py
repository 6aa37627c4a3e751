"""torch's thread count in ``toolkit run`` and the notebook kernels (toolkit.threads): every usable core unless
TOOLKIT_THREADS or OMP_NUM_THREADS says otherwise; the manifest records the count in effect."""

from __future__ import annotations

import os

import pytest
import torch

from toolkit.errors import ToolkitError
from toolkit.pipelines.manifest import hardware_info
from toolkit.threads import core_count, thread_count, use_cores


def test_the_count_is_the_usable_cores_unless_an_environment_variable_says_otherwise():
    cores = core_count()
    assert 1 <= cores <= (os.cpu_count() or cores)
    assert thread_count({}) == cores
    assert thread_count({"TOOLKIT_THREADS": "3"}) == 3
    assert thread_count({"TOOLKIT_THREADS": "3", "OMP_NUM_THREADS": "1"}) == 3  # the toolkit's own knob first
    assert thread_count({"OMP_NUM_THREADS": "1"}) is None  # torch read it at start: kept
    for bad in ("0", "-2", "two", "1.5"):
        with pytest.raises(ToolkitError, match="TOOLKIT_THREADS"):
            thread_count({"TOOLKIT_THREADS": bad})


def test_use_cores_sets_torch_and_the_manifest_records_it(monkeypatch):
    before = torch.get_num_threads()
    try:
        monkeypatch.setenv("TOOLKIT_THREADS", "1")
        assert use_cores() == 1 == torch.get_num_threads()
        info = hardware_info()
        assert info["torch_threads"] == 1 and info["threads_env"]["TOOLKIT_THREADS"] == "1"
        monkeypatch.delenv("TOOLKIT_THREADS")
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
        assert use_cores() == core_count() == hardware_info()["torch_threads"]
    finally:
        torch.set_num_threads(before)


@pytest.mark.slow  # starts a Python with torch (6 s)
def test_openmp_waits_passively_unless_told_otherwise_when_set_before_torch_loads():
    import subprocess
    import sys

    code = ("import os, sys; from toolkit.threads import use_cores; use_cores(); "
            "print(os.environ.get('OMP_WAIT_POLICY'), 'torch' in sys.modules)")
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "TOOLKIT_THREADS")}
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert run.stdout.split() == ["PASSIVE", "True"]
    run = subprocess.run([sys.executable, "-c", code], env={**env, "OMP_WAIT_POLICY": "ACTIVE"}, capture_output=True,
                         text=True, check=True)
    assert run.stdout.split() == ["ACTIVE", "True"]


@pytest.mark.slow  # starts a notebook kernel
def test_a_notebook_kernel_computes_on_the_count_use_cores_sets(tmp_path, monkeypatch):
    import nbformat

    from toolkit.pipelines.notebooks import run_notebook

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell("from toolkit import plots\nimport torch\nplots.setup_notebook()\n"
                                          "print('threads', torch.get_num_threads())")]
    nbformat.write(nb, tmp_path / "t.ipynb")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    for env, expected in (("1", 1), (None, core_count())):
        if env is None:
            monkeypatch.delenv("TOOLKIT_THREADS", raising=False)
        else:
            monkeypatch.setenv("TOOLKIT_THREADS", env)  # the kernel inherits the environment
        out = nbformat.read(run_notebook(tmp_path / "t.ipynb", tmp_path / "out", timeout=120), as_version=4)
        assert out.cells[0].outputs[0]["text"].strip() == f"threads {expected}"
