"""Independent steps of a run side by side, one process each, on a machine without a GPU.

The CPU profile's models are tiny (a 2×128 BERT or GPT-2, batches of 8–16 × 256 tokens): one training step does not
keep two cores busy with two threads. Measured on the 2-core reference machine (2026-11-28, ``configs/cpu_masked.yaml``,
20 members, 64 epochs; ``benchmarks/parallel_steps.py``, otherwise idle): ``mlm`` and ``mlm_pseudo`` trained one after
the other on two threads took 171.6 s (94.6 + 77.0 s), side by side on one thread each 115.4 s of wall time (1.49×).
Notebooks 02 and 03 train seven strategies each, so the run's training steps — independent of
each other given the base model and the identifiers — with RMIA's reference models, then its §4 audits and its
attack steps (one per audited model; :func:`steps_side_by_side`) go to a pool of worker
processes; notebook 04's three
fine-tunings and their extractions likewise (:func:`map_in_processes`, outside a run's cache):

- how many: :func:`step_processes` — ``TOOLKIT_PROCESSES`` when set (1: one after the other, as before); else one
  per pending step up to one per thread the run may use
  (:func:`toolkit.threads.thread_count`, so ``TOOLKIT_THREADS=1`` keeps today's one-after-the-other order), and more
  (at most :data:`MAX_PROCESSES`) where that finishes long independent steps of about equal length sooner
  (:func:`_fewest_rounds`: three fine-tunings on two cores take three processes, not a third alone on one core while
  the other idles — not for the audits and attack steps, which share work within a worker); one
  (no pool) where CUDA is available (the steps would share one GPU), under
  ``accelerate launch`` (the caller does not ask) or where ``OMP_NUM_THREADS`` was set by the user (kept as it is);
- each worker computes with ``threads // processes`` threads, at least one (``TOOLKIT_THREADS`` and
  ``OMP_NUM_THREADS`` in its environment, set before torch is imported there: processes are *spawned*, never forked
  from a process whose OpenMP runtime has started);
- the cache rule is the same: the main process marks each step running (``step.json``), the worker computes into the
  step's folder, the main process writes ``step.json`` done and records the step in the manifest with the worker's
  own seconds; a step that fails stops the steps not yet started, lets the running ones finish (their work is kept,
  recorded as done) and raises its error in the main process.

Same inputs, same outputs: a step computes exactly what it computes in the main process (same seeds); with the same
thread count per step its outputs are the same bytes (``tests/test_parallel_steps.py``).
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, as_completed, wait
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Callable

from toolkit.pipelines.cache import begin_step
from toolkit.progress import progress_bar
from toolkit.threads import ENV_VAR, PROCESSES_VAR, WAIT_POLICY, process_count, thread_count

#: the most worker processes of one run (beyond it a tiny model's steps contend for memory bandwidth)
MAX_PROCESSES = 4


@dataclass
class Job:
    """One step to compute in a worker (:func:`step_job` makes it for a registered step):
    its ``name`` in the run (``train/clm``), its folder, its key and the inputs ``step.json`` records, and
    ``fn(**kwargs)`` — a module-level function (it is pickled by reference) that writes into ``out_dir``."""

    name: str
    out_dir: Path
    key: str
    inputs: dict[str, Any]
    fn: Callable[..., Any]
    kwargs: dict[str, Any] = field(default_factory=dict)
    resumable: bool = False


def step_processes(n_pending: int, environ=None, *, beyond_threads: bool = True) -> int:
    """How many worker processes :func:`run_in_processes` starts for ``n_pending`` independent steps (module
    docstring); 1 means none (the caller computes them itself). ``beyond_threads=False``: at most one per thread —
    for steps that share work within a worker process (the attack steps: a worker scores the reference model once
    for every step it computes, so a third process on two cores scores it a third time; the quick start's three
    attack steps took 63 s of wall on three processes against about 57 s on two, measured 2026-11-28; also the §4
    audits, short steps whose worker's imports serve several)."""
    env = os.environ if environ is None else environ
    told = process_count(env)
    if told is not None:
        return max(1, min(n_pending, told))
    threads = thread_count(env)
    if n_pending < 2 or threads is None or threads < 2:
        return 1
    try:
        import torch

        if torch.cuda.is_available():
            return 1
    except ImportError:  # pragma: no cover - torch is a dependency
        pass
    return _fewest_rounds(n_pending, threads) if beyond_threads else max(1, min(n_pending, threads, MAX_PROCESSES))


#: how much slower the work of a run's steps is taken to get when there are more worker processes than threads (each
#: one a thread, the cores time-shared by the operating system: caches refilled, memory bandwidth shared). An assumed
#: margin, not a measured figure: it only decides ties such as 9 steps on 2 cores; ``benchmarks/parallel_steps.py
#: --processes 2,3`` measures the real cost on a machine
OVERSUBSCRIPTION_COST = 1.1


def _fewest_rounds(n: int, threads: int) -> int:
    """The process count, at least ``min(n, threads)`` and at most :data:`MAX_PROCESSES`, that finishes ``n`` steps of
    about equal length soonest: ``ceil(n / p)`` rounds, each ``p / threads`` times as long (× the oversubscription
    cost) when ``p`` processes share ``threads`` threads; the fewest processes on a tie. Three steps on two cores: three
    processes (1.65 rounds' time) rather than two (two rounds, the third step alone on one core with the other
    idle)."""
    low, high = min(n, threads, MAX_PROCESSES), min(n, MAX_PROCESSES)

    def cost(p: int) -> float:
        return -(-n // p) * (p / threads * OVERSUBSCRIPTION_COST if p > threads else 1.0)

    return min(range(low, high + 1), key=lambda p: (cost(p), p))


#: how often (seconds) a worker looks whether the process that started it is still alive
PARENT_POLL_SECONDS = 1.0


def _exit_with_parent(parent: int) -> None:
    """End this worker as soon as ``parent`` (the process that started the pool) is gone. Python's pool notices its
    parent's death only between jobs, so a worker of a killed run (``kill``, a notebook's kernel restarted, an
    out-of-memory kill) would train on for the rest of its step — an hour at 1,000 individuals — on cores no one
    uses any more. Its step stays marked running and is computed again on the next run (the cache rule)."""
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_SECONDS)
    os._exit(1)


def _start_worker(threads: int, parent: int | None = None) -> None:
    """A worker's thread count, before anything imports torch there (which reads ``OMP_NUM_THREADS`` once, at its
    import; the passive wait policy as :func:`toolkit.threads.use_cores` sets it), and its watch on ``parent``
    (:func:`_exit_with_parent`, a daemon thread). A job that imports nothing heavy stays light."""
    for var in (ENV_VAR, "OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # torch reads MKL_NUM_THREADS over OMP_NUM_THREADS
        os.environ[var] = str(threads)
    os.environ.setdefault("OMP_WAIT_POLICY", WAIT_POLICY)
    if parent is not None:
        threading.Thread(target=_exit_with_parent, args=(parent,), name="exit-with-parent", daemon=True).start()


def _timed(fn: Callable[..., Any], kwargs: dict[str, Any]) -> float:
    t0 = time.perf_counter()
    fn(**kwargs)
    return time.perf_counter() - t0


def _pool(processes: int) -> tuple[ProcessPoolExecutor, str]:
    """``processes`` spawned workers, each with its share of the run's threads (set before torch loads there), and
    the words that say so (``2 processes × 1 thread``)."""
    threads = max(1, (thread_count() or 1) // processes)  # TOOLKIT_PROCESSES beyond the threads: one each
    return (ProcessPoolExecutor(max_workers=processes, mp_context=get_context("spawn"), initializer=_start_worker,
                                initargs=(threads, os.getpid())),
            f"{processes} processes × {threads} thread{'s' if threads > 1 else ''}")


def map_in_processes(fn: Callable[..., Any], calls: list[dict[str, Any]], *, desc: str = "side by side",
                     unit: str = "job", progress: bool = True, processes: int | None = None) -> list[Any]:
    """``fn(**kwargs)`` for every ``kwargs`` of ``calls``, in order of ``calls``: side by side on
    :func:`step_processes` spawned workers (threads shared out as for a run's steps; ``fn`` a module-level function,
    its arguments and result picklable), or one after the other here where one process is all the machine should
    use. For independent jobs outside a run's cache (the e-mail techniques of notebook 04), which cache their own
    work in their folders: every job runs to its end, then the first error is raised (the others' work is kept).
    A bar counts the finished jobs."""
    n = len(calls)
    processes = step_processes(n) if processes is None else max(1, min(processes, n))
    if processes < 2:
        return [fn(**kwargs) for kwargs in calls]
    pool, how = _pool(processes)
    bar = progress_bar(total=n, desc=f"{desc} ({how})", unit=unit, enabled=progress)
    with pool, bar:
        futures = [pool.submit(fn, **kwargs) for kwargs in calls]
        for _ in as_completed(futures):
            bar.update(1)
    errors = [f.exception() for f in futures if f.exception() is not None]
    if errors:
        raise errors[0]
    return [f.result() for f in futures]


def run_in_processes(cache, jobs: list[Job], processes: int) -> set[str]:
    """Compute ``jobs`` on ``processes`` spawned workers under the cache rule (module docstring) and record each in
    ``cache``'s manifest as ran. Returns the names computed; with fewer than two processes or two jobs, none (the
    caller runs them itself). The first error of a job is raised once the jobs already running have finished."""
    if processes < 2 or len(jobs) < 2:
        return set()
    done: set[str] = set()
    error: BaseException | None = None
    for job in jobs:
        begin_step(job.name, job.out_dir, job.key, job.inputs, resumable=job.resumable)
    pool, how = _pool(processes)
    cache._say(f"[run] {', '.join(j.name for j in jobs)}: running side by side ({how}) ...")
    with pool:
        futures = {pool.submit(_timed, job.fn, job.kwargs): job for job in jobs}
        pending = set(futures)
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for fut in finished:
                job = futures[fut]
                if fut.cancelled():
                    continue
                exc = fut.exception()
                if exc is not None:
                    if error is None:
                        error = exc
                        for other in pending:
                            other.cancel()
                    continue
                cache.record_ran(job.name, job.out_dir, job.key, job.inputs, fut.result(),
                                 where=" (in a worker process)")
                done.add(job.name)
    if error is not None:
        raise error
    return done


def step_job(step, inputs: Any, name: str, out_dir: str | Path, fn: Callable[..., Any], /, **kwargs) -> Job:
    """The :class:`Job` that computes the registered ``step`` (a :class:`~toolkit.pipelines.registry.Step` or its
    kind) run as ``name`` on ``inputs`` in a worker process, ``fn(**kwargs)`` writing into ``out_dir``: its key,
    recorded inputs and ``resumable`` as :func:`~toolkit.pipelines.registry.run_step` derives them."""
    from toolkit.pipelines.registry import STEPS, key, key_inputs

    s = STEPS[step] if isinstance(step, str) else step
    return Job(name, Path(out_dir), key(s, inputs, name), key_inputs(inputs), fn, kwargs, resumable=s.resumable)


def steps_side_by_side(cache, plans: list[tuple[str, str, Path, Any, Callable[..., Any], Callable[[], dict]]], *,
                       enabled: bool = True, beyond_threads: bool = True) -> set[str]:
    """The runs among ``plans`` — ``(registered step, name in the run, out_dir, inputs, fn, arguments)``, with
    ``arguments()`` building ``fn``'s keyword arguments (called only for a run not current yet) — computed side by
    side in worker processes by ``fn(**arguments())`` when ``enabled`` and :func:`step_processes` (with
    ``beyond_threads``: False for steps that share work within a worker) gives more than one process for those
    pending. Returns the names computed there; the caller runs (or loads) the others itself with
    :func:`~toolkit.pipelines.registry.run_step`, as before."""
    if not enabled:
        return set()
    from toolkit.pipelines.registry import current

    pending = [plan for plan in plans if not current(plan[0], plan[2], plan[3], plan[1])]
    processes = step_processes(len(pending), beyond_threads=beyond_threads)
    if processes < 2:
        return set()
    jobs = [step_job(step, inputs, name, d, fn, **arguments()) for step, name, d, inputs, fn, arguments in pending]
    return run_in_processes(cache, jobs, processes)


__all__ = ["Job", "MAX_PROCESSES", "PROCESSES_VAR", "map_in_processes", "run_in_processes", "step_job",
           "step_processes", "steps_side_by_side"]
