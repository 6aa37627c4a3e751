"""Two runs on one directory: the second stops with a clear error; a dead holder's lock is taken over."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from toolkit.errors import ToolkitError
from toolkit.pipelines.lock import LOCK_NAME, lock_holder, run_lock


def test_a_live_holder_stops_the_second_run(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        (tmp_path / LOCK_NAME).write_text(json.dumps({"pid": child.pid, "host": socket.gethostname()}))
        with pytest.raises(ToolkitError, match=f"another run is using this directory \\(pid {child.pid}"):
            with run_lock(tmp_path):
                pass
        assert lock_holder(tmp_path)["pid"] == child.pid  # the holder's lock is left alone
    finally:
        child.kill()
        child.wait()


def test_lock_is_released_and_a_dead_holders_lock_taken_over(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (tmp_path / LOCK_NAME).write_text(json.dumps({"pid": int(dead.stdout), "host": socket.gethostname()}))
    with run_lock(tmp_path):
        assert lock_holder(tmp_path)["pid"] == os.getpid()
        with pytest.raises(ToolkitError):  # the same process cannot take it twice either
            with run_lock(tmp_path):
                pass
    assert not (tmp_path / LOCK_NAME).exists()
    with pytest.raises(RuntimeError):
        with run_lock(tmp_path):
            raise RuntimeError("a failed run")
    assert not (tmp_path / LOCK_NAME).exists()



def test_run_experiment_refuses_a_directory_another_run_holds(tmp_path):
    """`toolkit run` takes the lock before any step: with a live holder it stops and writes nothing."""
    from _experiment_fixtures import write_config

    from toolkit.config.experiment import load_experiment
    from toolkit.pipelines.lm_experiment import run_experiment

    out = tmp_path / "run"
    out.mkdir()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        (out / LOCK_NAME).write_text(json.dumps({"pid": child.pid, "host": socket.gethostname()}))
        with pytest.raises(ToolkitError, match="another run is using this directory"):
            run_experiment(load_experiment(write_config(tmp_path / "c.yaml")), out, progress=False, echo=False)
        assert not (out / "manifest.json").exists() and not (out / "config.yaml").exists()  # no step ran
    finally:
        child.kill()
        child.wait()
