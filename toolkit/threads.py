"""How many CPU threads torch computes with: every core the process may use, in ``toolkit run`` and in every notebook
kernel (``plots.setup_notebook``), unless told otherwise.

torch's own default is the number of *physical* cores (``at::get_num_threads``), which on a laptop or a cloud machine
with two hardware threads per core is half of what the process may use. :func:`use_cores` sets the count, in this
order:

1. ``TOOLKIT_THREADS`` (a positive integer), the toolkit's own knob;
2. ``OMP_NUM_THREADS`` when it is set: torch has already read it, and it is kept (a test or a cluster's job script
   that sets it means it);
3. the CPUs of the process's affinity mask (``len(os.sched_getaffinity(0))``, which a container's or ``taskset``'s
   limit shrinks), or ``os.cpu_count()`` where there is no affinity mask.

The count in effect is what a run's manifest records (``environment.hardware.torch_threads``).

OpenMP threads that wait for work spin by default; on a machine shared with other work, a spinning thread holds a
core another process needs, and two threads were *slower* than one: a training step of the 2×128 GPT-2 (batch 16 ×
256 tokens) took 0.48 s on one thread and 1.15–2.6 s on two (2-core machine at load 4.5, measured 2026-11-25). With
``OMP_WAIT_POLICY=PASSIVE`` both took 0.48–0.50 s, so :func:`use_cores` sets it (unless it is set) — it takes
effect only when torch has not been imported yet, which is the case in ``toolkit run`` and in every notebook's setup.
"""

from __future__ import annotations

import os
import sys

from toolkit.errors import ToolkitError

__all__ = ["ENV_VAR", "PROCESSES_VAR", "WAIT_POLICY", "core_count", "process_count", "thread_count", "use_cores"]

#: the environment variable that overrides the thread count
ENV_VAR = "TOOLKIT_THREADS"
#: OpenMP's wait policy unless the environment sets one (see the module docstring)
WAIT_POLICY = "PASSIVE"
#: the environment variable that sets the number of worker processes (1: none) of a run's side-by-side steps
#: (:mod:`toolkit.pipelines.parallel`) and of the pattern detector (:class:`toolkit.identifiers.PatternDetector`)
PROCESSES_VAR = "TOOLKIT_PROCESSES"


def core_count() -> int:
    """CPUs this process may run on: its affinity mask, else ``os.cpu_count()`` (at least 1)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no affinity masks (macOS, Windows)
        return max(1, os.cpu_count() or 1)


def thread_count(environ=None) -> int | None:
    """The thread count :func:`use_cores` sets (see the module docstring), or None when ``OMP_NUM_THREADS`` is set and
    is kept. A ``TOOLKIT_THREADS`` that is not a positive integer is a :class:`ToolkitError`."""
    env = os.environ if environ is None else environ
    raw = env.get(ENV_VAR, "").strip()
    if raw:
        if not raw.isdigit() or int(raw) < 1:
            raise ToolkitError(f"{ENV_VAR}={raw!r}: expected a positive number of threads")
        return int(raw)
    if env.get("OMP_NUM_THREADS", "").strip():
        return None
    return core_count()


def process_count(environ=None) -> int | None:
    """``TOOLKIT_PROCESSES`` as a positive integer, or None when it is not set; anything else is a
    :class:`ToolkitError`."""
    env = os.environ if environ is None else environ
    raw = env.get(PROCESSES_VAR, "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise ToolkitError(f"{PROCESSES_VAR}={raw!r}: expected a positive number of processes")
    return int(raw)


def use_cores() -> int:
    """Set torch's intra-op thread count as the module docstring says (and OpenMP's passive waiting, when torch is
    not loaded yet); returns the count in effect."""
    if "torch" not in sys.modules:
        os.environ.setdefault("OMP_WAIT_POLICY", WAIT_POLICY)
    import torch

    n = thread_count()
    if n is not None and n != torch.get_num_threads():
        torch.set_num_threads(n)
    return torch.get_num_threads()
