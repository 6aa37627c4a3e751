"""Independent steps side by side (toolkit.pipelines.parallel): the pool's bookkeeping on toy jobs, and a run's
training, reference-model, audit and attack steps in worker processes giving the same bytes as one after the other
(one test: ``ppclm`` and RMIA's reference model trained side by side, then the audits and the attacks)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from toolkit.errors import ToolkitError
from toolkit.pipelines.cache import StepCache, read_step
from toolkit.pipelines.parallel import MAX_PROCESSES, Job, map_in_processes, run_in_processes, step_processes

from _experiment_fixtures import ROOT, TINY


def write_marker(out: str, text: str) -> None:
    """A toy step: writes ``text`` into its folder (module-level: a worker imports it by reference)."""
    Path(out, "out.txt").write_text(text, encoding="utf-8")


def write_threads(out: str) -> None:
    """A toy step: writes the thread count torch computes with in its worker."""
    import torch

    Path(out, "out.txt").write_text(str(torch.get_num_threads()), encoding="utf-8")


def fail_step(out: str) -> None:
    raise ToolkitError("toy step: refused")


class Recorder:
    """A run's StepCache without its manifest file: the records and the lines it would print."""

    record_ran = StepCache.record_ran
    output_of = StepCache.output_of

    def __init__(self, run_dir: Path):
        self.run_dir = run_dir
        self.records, self.said = [], []
        self.manifest = self

    def record(self, name, status, seconds, **kw):
        self.records.append((name, status, seconds, kw))

    def _say(self, text):
        self.said.append(text)


def jobs_of(tmp_path: Path, fns) -> list[Job]:
    jobs = []
    for i, (fn, kwargs) in enumerate(fns):
        out = tmp_path / f"step{i}"
        jobs.append(Job(f"toy/{i}", out, f"key{i}", {"i": i}, fn, {"out": str(out), **kwargs}))
    return jobs


def test_step_processes_follows_the_threads_and_caps():
    assert step_processes(7, {"TOOLKIT_THREADS": "1"}) == 1      # the test suite's workers: one after the other
    assert step_processes(1, {"TOOLKIT_THREADS": "8"}) == 1      # nothing to put side by side
    assert step_processes(7, {"OMP_NUM_THREADS": "2"}) == 1      # an outside thread setting is kept as it is
    assert step_processes(3, {"TOOLKIT_THREADS": "2"}) == 3      # not the third step alone on one core of two
    assert step_processes(2, {"TOOLKIT_THREADS": "2"}) == 2
    assert step_processes(7, {"TOOLKIT_THREADS": "2"}) == 2      # 4 rounds; 4 processes: 2 rounds of twice the time
    assert step_processes(21, {"TOOLKIT_THREADS": "2"}) == 2     # 11 rounds; 3 processes: 7 x 1.5 x the cost
    assert step_processes(5, {"TOOLKIT_THREADS": "4"}) == 4
    assert step_processes(3, {"TOOLKIT_THREADS": "2"}, beyond_threads=False) == 2  # steps that share a worker's work
    assert step_processes(3, {"TOOLKIT_THREADS": "16"}) == 3
    assert step_processes(9, {"TOOLKIT_THREADS": "16"}) == MAX_PROCESSES
    assert step_processes(9, {"TOOLKIT_THREADS": "16", "TOOLKIT_PROCESSES": "1"}) == 1  # told: one after the other
    assert step_processes(2, {"TOOLKIT_THREADS": "1", "TOOLKIT_PROCESSES": "3"}) == 2
    with pytest.raises(ToolkitError, match="TOOLKIT_PROCESSES='x'"):
        step_processes(2, {"TOOLKIT_PROCESSES": "x"})


def test_jobs_run_in_workers_and_are_recorded_as_steps(tmp_path):
    cache = Recorder(tmp_path)
    jobs = jobs_of(tmp_path, [(write_marker, {"text": "a"}), (write_marker, {"text": "b"})])
    assert run_in_processes(cache, jobs, 2) == {"toy/0", "toy/1"}
    for job, text in zip(jobs, "ab"):
        assert (job.out_dir / "out.txt").read_text(encoding="utf-8") == text
        info = read_step(job.out_dir)
        assert info["status"] == "done" and info["key"] == job.key and info["inputs"] == job.inputs
    assert sorted((n, s, kw["key"], kw["output"]) for n, s, _, kw in cache.records) == [
        ("toy/0", "ran", "key0", "step0"), ("toy/1", "ran", "key1", "step1")]
    assert any("side by side (2 processes" in line for line in cache.said)
    # one process or one job: nothing done here, the caller computes them itself
    assert run_in_processes(cache, jobs[:1], 2) == set() and run_in_processes(cache, jobs, 1) == set()


@pytest.mark.slow  # spawns worker processes (8 s)
def test_workers_share_out_the_run_s_threads(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLKIT_THREADS", "4")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    jobs = jobs_of(tmp_path, [(write_threads, {}), (write_threads, {})])
    run_in_processes(Recorder(tmp_path), jobs, 2)
    assert [(j.out_dir / "out.txt").read_text(encoding="utf-8") for j in jobs] == ["2", "2"]  # 4 threads, 2 each


KILLED_PARENT = """
import sys, time
from toolkit.pipelines.parallel import _pool
pool, _ = _pool(1)
pool.submit(time.sleep, 600)
while not pool._processes:
    time.sleep(0.05)
print(*pool._processes, flush=True)
time.sleep(600)
"""


@pytest.mark.slow  # spawns a run and its worker (a few seconds)
def test_a_worker_ends_when_its_run_is_killed():
    """A run killed mid-step (``kill -9``, a kernel restarted) leaves no worker computing on: each worker watches the
    process that started it and exits when it is gone, instead of finishing its step (an hour at 1,000 individuals)."""
    import signal
    import time

    run = subprocess.Popen([sys.executable, "-c", KILLED_PARENT], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        workers = [int(p) for p in run.stdout.readline().split()]
        assert len(workers) == 1
        os.kill(workers[0], 0)  # alive, sleeping in its job
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait()
    deadline = time.monotonic() + 120  # a liveness bound, far above the watch's 1 s poll
    while time.monotonic() < deadline:
        try:
            os.kill(workers[0], 0)
        except ProcessLookupError:
            break
        try:  # reaped by init; a zombie of the test's own process group still answers kill(pid, 0)
            with open(f"/proc/{workers[0]}/stat") as f:
                if f.read().split(")")[-1].split()[0] == "Z":
                    break
        except FileNotFoundError:
            break
        time.sleep(0.2)
    else:
        os.kill(workers[0], signal.SIGKILL)
        pytest.fail("the worker outlived its killed run by 120 s")


def test_a_failing_job_raises_its_error_and_the_others_are_kept(tmp_path):
    cache = Recorder(tmp_path)
    jobs = jobs_of(tmp_path, [(fail_step, {}), (write_marker, {"text": "kept"})])
    with pytest.raises(ToolkitError, match="toy step: refused"):
        run_in_processes(cache, jobs, 2)
    assert read_step(jobs[0].out_dir)["status"] == "running"  # not done: the next run computes it again
    assert (jobs[1].out_dir / "out.txt").read_text(encoding="utf-8") == "kept"
    assert read_step(jobs[1].out_dir)["status"] == "done"
    assert [(n, s) for n, s, _, _ in cache.records] == [("toy/1", "ran")]


def _run(tmp_path: Path, name: str, threads: str, *, config: dict) -> Path:
    cfg = config
    config = tmp_path / f"{name}.yaml"
    config.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "TOOLKIT_THREADS")}
    env["TOOLKIT_THREADS"] = threads
    out = tmp_path / name
    done = subprocess.run([sys.executable, "-m", "toolkit", "run", str(config), "--out", str(out)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    (out / "stdout.txt").write_text(done.stdout, encoding="utf-8")
    return out


def pid_and_square(x: int, fail: bool = False) -> tuple[int, int]:
    """A toy job of map_in_processes: the worker's process id and x²; refuses when told to."""
    if fail:
        raise ToolkitError(f"toy job {x}: refused")
    return os.getpid(), x * x


@pytest.mark.slow  # spawns worker processes (5 s)
def test_map_in_processes_returns_in_order_from_workers_and_raises_after_all_finish(tmp_path):
    got = map_in_processes(pid_and_square, [{"x": x} for x in range(5)], processes=2, progress=False)
    assert [sq for _, sq in got] == [0, 1, 4, 9, 16]                      # in the order of the calls
    assert os.getpid() not in {pid for pid, _ in got}                    # computed in workers
    assert len({pid for pid, _ in got}) <= 2
    here = map_in_processes(pid_and_square, [{"x": 3}, {"x": 4}], processes=1, progress=False)
    assert here == [(os.getpid(), 9), (os.getpid(), 16)]                 # one process: here, one after the other
    with pytest.raises(ToolkitError, match="toy job 1: refused"):
        map_in_processes(pid_and_square, [{"x": 0}, {"x": 1, "fail": True}, {"x": 2}], processes=2, progress=False)


def test_email_techniques_go_side_by_side_only_when_unfinished(tmp_path, monkeypatch):
    """Notebook 04's techniques: the unfinished ones to the workers, a finished one computed here (cheap: reused)."""
    from toolkit.pipelines import email_extraction as ee

    sent = []

    def fake_map(fn, calls, **kw):
        sent.append([c["technique"] for c in calls])
        assert all(c["progress"] is False for c in calls)                 # no bars from the workers
        return [f"worker:{c['technique']}" for c in calls]

    monkeypatch.setattr("toolkit.pipelines.parallel.map_in_processes", fake_map)
    monkeypatch.setattr(ee, "train_technique", lambda **c: f"here:{c['technique']}")
    done = tmp_path / "runs" / "rmft"
    done.mkdir(parents=True)
    (done / "run.json").write_text(json.dumps({"status": "done"}))
    (done / "technique_summary.json").write_text("{}")
    got = ee.train_techniques([], "base", tmp_path / "runs", ["baseline", "rmft", "dedup"], None)
    assert sent == [["baseline", "dedup"]]
    assert got == {"baseline": "worker:baseline", "rmft": "here:rmft", "dedup": "worker:dedup"}
    sent.clear()
    (tmp_path / "runs" / "dedup").mkdir()
    for name in ("run.json", "technique_summary.json"):
        (tmp_path / "runs" / "dedup" / name).write_text((done / name).read_text())
    assert ee.train_techniques([], "base", tmp_path / "runs", ["baseline", "rmft", "dedup"], None) == {
        "baseline": "here:baseline", "rmft": "here:rmft", "dedup": "here:dedup"}  # one left: no pool
    assert sent == []


def _audit_files(run: Path) -> dict[str, bytes]:
    """Every file of the audit and attack steps (the run's own folder named alike: the files record the models'
    paths)."""
    return {str(p.relative_to(run)): p.read_bytes().replace(str(run).encode(), b"RUN")
            for folder in ("audit", "attacks") for p in sorted((run / folder).rglob("*"))
            if p.is_file() and p.name != "step.json"}


@pytest.mark.slow
def test_audit_and_attack_steps_side_by_side_write_what_one_after_the_other_writes(tmp_path):
    """A finished run computed again in two worker processes (TOOLKIT_THREADS=2) from the same base model, without
    its ``ppclm`` training, RMIA's reference model, the §4 audits and the attack steps: ``ppclm`` and the reference
    model train side by side, then the audits, then the attack steps (base model, clm, ppclm) — every checkpoint and
    every file they write is the same, byte for byte, as in the run that computed them one after the other on one
    thread."""
    cfg = json.loads(json.dumps(TINY))
    cfg["training"] = {**cfg["training"], "epochs": [2]}
    cfg["audit"] = {**cfg["audit"], "n_bootstrap": 0, "checkpoints": "last",
                    "attacks": {**cfg["audit"]["attacks"], "rmia_references": 1}}
    serial = _run(tmp_path, "serial", "1", config=cfg)
    side = tmp_path / "side"
    shutil.copytree(serial, side, ignore=shutil.ignore_patterns("attacks", "audit", "rmia_references", "ppclm",
                                                                 ".lock", "report.html"))
    side = _run(tmp_path, "side", "2", config=cfg)
    said = (side / "stdout.txt").read_text(encoding="utf-8")
    assert "side by side" not in (serial / "stdout.txt").read_text(encoding="utf-8")  # TOOLKIT_THREADS=1: in order
    assert "train/ppclm, rmia_references: running side by side (2 processes" in said
    assert "audit/base, audit/clm/epoch-2, audit/ppclm/epoch-2: running side by side (2 processes" in said
    assert "attacks/base, attacks/clm/epoch-2, attacks/ppclm/epoch-2: running side by side (2 processes" in said
    a, b = _audit_files(serial), _audit_files(side)
    assert {tuple(k.split("/")[:2]) for k in a} == {(f, m) for f in ("audit", "attacks")
                                                     for m in ("base", "clm", "ppclm")}
    assert a.keys() == b.keys() and all(a[k] == b[k] for k in a), [k for k in a if a[k] != b.get(k)]
    weights = {run: {str(p.relative_to(run)): p.read_bytes() for folder in ("runs", "rmia_references")
                     for p in sorted((run / folder).rglob("model.safetensors"))} for run in (serial, side)}
    assert any("rmia_references" in k for k in weights[serial]) and weights[serial] == weights[side]
    ran = {s["name"] for s in json.loads((side / "manifest.json").read_text())["steps"] if s["status"] == "ran"}
    assert {"train/ppclm", "rmia_references", "audit/base", "attacks/clm/epoch-2"} <= ran  # (then loaded: cached)
    assert "train/clm" not in ran and "[run] train/clm: up to date (cached)" in said
