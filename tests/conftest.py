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
