"""Fixtures shared by the test modules (pytest loads this file itself)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def one_thread():
    """Run a module's tests with torch on one thread, restoring the setting afterwards: tiny models gain nothing from
    intra-op threads, and on a busy machine OpenMP's spin-waiting threads make a training loop many times slower.
    A module opts in with ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(autouse=True, scope="session")
def private_ner_cache(tmp_path_factory):
    """Every test's NER cache (``$XDG_CACHE_HOME/lm-anonymity-toolkit/ner``) goes to a temporary folder, never the
    user's ``~/.cache``: subprocesses inherit the variable."""
    import os

    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg_cache"))
    yield
    if old is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = old
