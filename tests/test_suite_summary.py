"""``make test`` ends by naming what it skipped and why (tests/conftest.py), so a newcomer's machine without a test's
needs (the browser tests: Debian's chromium) never passes silently."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.mark.slow  # runs pytest in a subprocess (8 s)
def test_the_last_lines_name_each_skip_reason_and_its_count(tmp_path):
    shutil.copy(HERE / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_some.py").write_text(
        "import pytest\n"
        "needs = pytest.mark.skipif(True, reason='needs a tool: sudo apt-get install tool')\n"
        "@needs\ndef test_a(): pass\n@needs\ndef test_b(): pass\n"
        "def test_c(): pytest.skip('another reason')\n"
        "def test_d(): pass\n", encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120).stdout.splitlines()
    tail = out[-4:]
    assert tail[0].strip("= ") == "3 skipped", out
    assert tail[1] == "2 skipped: needs a tool: sudo apt-get install tool"
    assert tail[2] == "1 skipped: another reason"
    assert "1 passed, 3 skipped" in tail[3]
