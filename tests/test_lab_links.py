"""`make lab` serves a root from which the notebooks' output links resolve: notebook 00's report link
(``report_path``, relative to the notebook) is fetched from a Jupyter server started with the Makefile's own ``lab``
options, and answers 200 (issue: the link was dead when Lab served ``notebooks/`` only)."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def _lab_options() -> list[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    line = re.search(r"^lab:.*\n\t(.*)$", text, re.M).group(1)
    return [a.replace("$(CURDIR)", str(ROOT)) for a in line.split()[2:]]


def _parameter(notebook: Path, name: str) -> str:
    return re.search(rf'^{name} = "([^"]+)"', notebook.read_text(encoding="utf-8"), re.M).group(1)


def test_notebook_00_report_link_resolves_under_make_lab(tmp_path):
    nb = ROOT / "notebooks" / "00_quickstart.py"
    report = (nb.parent / _parameter(nb, "report_path")).resolve()
    options = _lab_options()
    root = Path(next(o.split("=", 1)[1] for o in options if o.startswith("--ServerApp.root_dir=")))
    assert report.is_relative_to(root), "the report link points outside what `make lab` serves"
    created = not report.exists()
    if created:
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text("<html>report</html>", encoding="utf-8")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "jupyter", "server", *[o for o in options if "LabApp" not in o],
                             f"--port={port}", "--no-browser", "--IdentityProvider.token=t",
                             "--ServerApp.disable_check_xsrf=True", "--allow-root"],
                            stdout=subprocess.DEVNULL, stderr=open(tmp_path / "server.log", "wb"), cwd=tmp_path)
    try:
        url = f"http://127.0.0.1:{port}/files/{report.relative_to(root).as_posix()}?token=t"
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(url, timeout=5) as r:
                    assert r.status == 200 and r.read()
                break
            except (ConnectionError, urllib.error.URLError):
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.3)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if created:
            report.unlink()
