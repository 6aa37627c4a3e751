"""Fixtures shared by the test modules (pytest loads this file itself)."""

from __future__ import annotations

import os

import pytest

if os.environ.get("PYTEST_XDIST_WORKER"):
    # `make test` runs the suite on every core with pytest-xdist, one worker per core: each worker (and every
    # subprocess or notebook kernel it starts, through the environment) computes on its share of the cores, so that
    # workers do not fight over them (toolkit/threads.py reads TOOLKIT_THREADS; torch reads OMP_NUM_THREADS when it
    # loads, after this file)
    from toolkit.threads import core_count

    _share = str(max(1, core_count() // max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))))
    os.environ.setdefault("TOOLKIT_THREADS", _share)
    os.environ.setdefault("OMP_NUM_THREADS", _share)


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


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The last lines of ``make test`` (after pytest's own summary, before the counts): how many tests were skipped
    and why, each reason once, so that a machine without what a test needs (the browser tests: Debian's chromium)
    never passes silently."""
    result = yield
    skipped = terminalreporter.stats.get("skipped", [])
    if not skipped:
        return result
    reasons: dict[str, int] = {}
    for rep in skipped:
        longrepr = rep.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
        reason = reason.removeprefix("Skipped: ")
        reasons[reason] = reasons.get(reason, 0) + 1
    terminalreporter.write_sep("=", f"{len(skipped)} skipped", yellow=True)
    for reason, n in sorted(reasons.items(), key=lambda x: -x[1]):
        terminalreporter.write_line(f"{n} skipped: {reason}")
    return result


#: the test files that take longest (docs/performance.md, "the slowest tests"), started first under pytest-xdist so that
#: no worker is left with a long one at the end; the others keep pytest's order
LONGEST_FIRST = ("test_notebooks.py", "test_experiment.py", "test_privacy.py", "test_notebooks_report.py",
                 "test_quickstart_cli.py")


def pytest_collection_modifyitems(config, items):
    """Under ``make test`` (pytest-xdist, ``--dist loadfile``: a file's tests on one worker, its module fixtures made
    once) the longest files first: the workers send the controller the collection in this order."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
        items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: pytest's order otherwise
