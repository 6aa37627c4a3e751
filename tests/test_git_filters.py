"""Committed notebooks stay unmodified when opened and run in JupyterLab: `make git-filters` (run by `make install`)
sets up the nbstripout clean filter that ``.gitattributes`` names, so what Lab adds (the kernel's language_info,
outputs — which hold corpus text —, execution counts and timings) is neither in ``git diff`` nor ever committed,
while a changed cell is. (``git status`` lists the file until ``git add`` refreshes the index: git compares file
sizes before it runs a filter.)"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def _repo_with_a_notebook(tmp_path: Path) -> tuple[Path, Path]:
    """A new git repository holding the project's ``.gitattributes`` and notebook 00 (not yet committed)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "t@example.org")
    _git(repo, "config", "user.name", "t")
    shutil.copy(ROOT / ".gitattributes", repo / ".gitattributes")
    nb = repo / "00.ipynb"
    shutil.copy(ROOT / "notebooks" / "00_quickstart.ipynb", nb)
    return repo, nb


@pytest.mark.slow  # starts a notebook kernel (32 s of the fast suite's ~350 s; the filters rarely change)
@pytest.mark.skipif(shutil.which("make") is None or shutil.which("git") is None, reason="needs make and git")
def test_notebook_opened_in_lab_is_not_modified(tmp_path):
    repo, nb = _repo_with_a_notebook(tmp_path)
    subprocess.run(["make", "-s", "-f", str(ROOT / "Makefile"), "git-filters", f"PY={sys.executable}"], cwd=repo,
                   check=True, capture_output=True)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "stripped")

    data = json.loads(nb.read_text(encoding="utf-8"))  # what Lab writes after running the notebook
    data["metadata"]["language_info"] = {"name": "python", "version": "3.11.2", "file_extension": ".py",
                                         "mimetype": "text/x-python", "pygments_lexer": "ipython3"}
    for cell in data["cells"]:
        if cell["cell_type"] == "code":
            cell["execution_count"] = 1
            cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["a note\n"]}]
            cell["metadata"]["execution"] = {"iopub.status.busy": "2026-11-23T10:00:00Z"}
    nb.write_text(json.dumps(data, indent=2), encoding="utf-8")
    assert _git(repo, "diff", "--stat") == ""
    _git(repo, "add", "-A")
    assert _git(repo, "status", "--porcelain") == ""  # nothing to commit: no output reaches the repository

    data["cells"][0]["source"] = ["# changed\n"]
    nb.write_text(json.dumps(data, indent=2), encoding="utf-8")
    assert "00.ipynb" in _git(repo, "diff", "--stat") and "# changed" in _git(repo, "diff")


@pytest.mark.skipif(shutil.which("make") is None or shutil.which("git") is None, reason="needs make and git")
def test_git_filters_leave_an_index_that_status_can_trust(tmp_path):
    """In a fresh clone the notebooks are "racily clean" (as new as the index), so every read-only `git status` — a
    run's manifest asks for the commit and the dirty flag — ran the clean filter on each of them again (10 s and more
    per `toolkit run` on a fresh clone). `make git-filters` refreshes the index once: afterwards no status runs it."""
    import os

    repo, nb = _repo_with_a_notebook(tmp_path)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "stripped")
    index = repo / ".git" / "index"
    st = index.stat()
    os.utime(nb, ns=(st.st_atime_ns, st.st_mtime_ns))  # as new as the index: racily clean, as after a clone
    calls = tmp_path / "calls.txt"
    wrapper = tmp_path / "python"  # the filter's interpreter, counting its starts
    wrapper.write_text(f'#!/bin/sh\necho run >> "{calls}"\nexec "{sys.executable}" "$@"\n', encoding="utf-8")
    wrapper.chmod(0o755)
    subprocess.run(["make", "-s", "-f", str(ROOT / "Makefile"), "git-filters", f"PY={wrapper}"], cwd=repo,
                   check=True, capture_output=True)
    calls.unlink(missing_ok=True)
    for _ in range(2):
        assert _git(repo, "--no-optional-locks", "status", "--porcelain") == ""
    assert not calls.exists(), "git status ran the notebook filter: the index was left racy"
