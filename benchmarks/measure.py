"""What a newcomer waits for, measured as a newcomer gets it: a fresh clone of the current commit, empty caches,
``make install``, ``make test``, ``make test-fast``, ``make workshop``, ``make demo`` and the quick start, one after the
other on this machine; the figures and the commit go to docs/measurements.json (newest last), the rows of
docs/performance.md and the lines of README.md that state them (tests/test_docs.py checks that they agree), and each
notebook's time in workshop mode to docs/workshop.md's table (its section "Measured times").

    python benchmarks/measure.py                  # or: make measure (about an hour on the 2-core machine)
    python benchmarks/measure.py --only test      # a subset (install is always run: a fresh clone has no .venv)
    python benchmarks/measure.py --only workshop  # each notebook in workshop mode (make workshop), from a fresh clone

"Empty caches": every cache the tools write (pip's wheels, Hugging Face, matplotlib's fonts, the toolkit's NER cache)
goes under ``XDG_CACHE_HOME`` = a new empty folder; the pip configuration (indexes) is the machine's. The clone is
of the committed tree (``git clone`` of this repository at ``HEAD``): uncommitted changes are not measured, so a dirty
tree is refused unless ``--allow-dirty``. The machine's load before each step is recorded: a figure measured beside
other work is marked so (docs/performance.md says which).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORDS = ROOT / "docs" / "measurements.json"
#: workshop before demo: it copies the shipped results into the notebooks' work folders, which a demo's live run fills
STEPS = ("install", "quickstart", "test", "test-fast", "workshop", "demo")
#: Python settings of the measuring session that a newcomer's shell would not have
_SESSION_PYTHON_VARS = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONEXECUTABLE", "PYTHONUSERBASE")

COMMANDS = {"install": ["make", "install"],
            "quickstart": [".venv/bin/python", "-m", "toolkit", "run", "configs/quickstart.yaml", "--out",
                           "runs/quickstart", "--quiet"],
            "test": ["make", "test", "PYTEST_ARGS=--durations=40"],
            "test-fast": ["make", "test-fast"],
            "workshop": ["make", "workshop"],
            "demo": ["make", "demo"]}


# ---- parsing what the commands print -------------------------------------------------------------------------------

PYTEST_COUNTS = re.compile(r"(\d+) (passed|failed|skipped|errors?|deselected|xfailed|xpassed)")
PYTEST_LAST = re.compile(r"^=+ (.*\b(?:passed|failed|error|errors)\b.*) in ([\d.]+)s\b.*=+$", re.M)


def parse_pytest(text: str) -> dict:
    """pytest's last line (``=== 894 passed, 3 skipped in 2308.12s (0:38:28) ===``) as counts and its seconds."""
    found = PYTEST_LAST.findall(text)
    if not found:
        raise ValueError("no pytest summary line in the output")
    counts, seconds = found[-1]
    out = {"passed": 0, "failed": 0, "skipped": 0, "errors": 0, "deselected": 0, "pytest_seconds": float(seconds)}
    for n, what in PYTEST_COUNTS.findall(counts):
        key = "errors" if what.startswith("error") else what
        if key in out:
            out[key] = int(n)
    out["skip_reasons"] = re.findall(r"^(\d+ skipped: .*)$", text, re.M)
    out["durations"] = [{"seconds": float(s), "phase": phase, "test": test}
                        for s, phase, test in DURATION_ROW.findall(text)]
    return out


DURATION_ROW = re.compile(r"^([\d.]+)s (call|setup|teardown)\s+(\S+)\s*$", re.M)


DEMO_ROW = re.compile(r"^(\S+)\s+(ok|FAILED)\s+([\d.]+)\s+[\d:]+\s*$", re.M)
DEMO_START = re.compile(r"^\[\d+/\d+\] (\S+) \.\.\. \((.+)\)\s*$", re.M)
DEMO_TOTAL = re.compile(r"^total\s+(\d+)/(\d+)\s+([\d.]+)\s+[\d:]+\s*$", re.M)


def parse_demo(text: str) -> dict:
    """``make demo``'s closing table (:func:`toolkit.pipelines.notebooks.timing_table`): seconds per notebook."""
    total = DEMO_TOTAL.search(text)
    if not total:
        raise ValueError("no timing table in the demo's output")
    rows = {name: {"ok": status == "ok", "seconds": float(s)} for name, status, s in DEMO_ROW.findall(text)}
    for name, params in DEMO_START.findall(text):  # a notebook run with its own demo parameters (notebooks/demo.yaml)
        if name in rows:
            rows[name]["parameters"] = params
    return {"notebooks": rows, "notebook_seconds": float(total.group(3)),
            "ok": int(total.group(1)), "of": int(total.group(2))}


def duration(seconds: float) -> str:
    """``"12 min 5 s"`` / ``"1 h 2 min 3 s"`` (the form tests/test_docs.py reads)."""
    s = int(round(seconds))
    h, m, s = s // 3600, s % 3600 // 60, s % 60
    return f"{h} h {m} min {s} s" if h else f"{m} min {s} s"


# ---- what the documents say ----------------------------------------------------------------------------------------

def _where(r: dict) -> str:
    return f"commit `{r['commit'][:7]}`, {r['date']}"


def _machine(r: dict) -> str:
    load = max((s.get("load_before", 0.0) for s in r["steps"].values()), default=0.0)
    state = "idle" if load < 1.0 else f"load up to {load:.1f} before a step"
    return f"{r['machine']['cores']}-core / {r['machine']['memory_gib']} GiB, {state}, fresh clone, empty caches"


def _tests_in(t: dict) -> str:
    """``"926 tests in 15 min 55 s"`` of a pytest step (tests/test_docs.py reads the count and the duration)."""
    return f"{t['passed'] + t['failed'] + t['errors']} tests in {duration(t['seconds'])}"


def _outcome(t: dict) -> str:
    return f"{t['passed']} passed, {t['skipped']} skipped, {t['failed'] + t['errors']} failed"


def readme_lines(r: dict) -> dict[str, str]:
    """README.md's lines stating the measured times, keyed by the command they start with."""
    s = r["steps"]
    out = {}
    if "test" in s:
        t = s["test"]
        out["make test"] = (f"`make test` — {_tests_in(t)} ({_outcome(t)}), plus "
                            f"{duration(s['install']['seconds'])} of "
                            f"`make install`: {_machine(r)}; {_where(r)} (`make measure`).")
    if "test-fast" in s:
        t = s["test-fast"]
        out["make test-fast"] = f"`make test-fast` — {_tests_in(t)} (no training, no notebook); {_where(r)}."
    if "quickstart" in s:
        out["quick start"] = (f"This took {duration(s['quickstart']['seconds'])} on a fresh clone right after `make "
                              f"install` ({_machine(r)}; {_where(r)}, `make measure`; "
                              f"[docs/performance.md](docs/performance.md)).")
    if "demo" in s:
        d = s["demo"]
        per = ", ".join(f"{name[:2]} {v['seconds']:.1f}" for name, v in sorted(d["notebooks"].items()))
        sizes = (" at the demo's sizes of notebooks/demo.yaml"
                 if any(v.get("parameters") for v in d["notebooks"].values()) else "")
        out["make demo"] = (f"`make demo` — {duration(d['seconds'])}{sizes} ({d['ok']}/{d['of']} notebooks ok; "
                            f"seconds per notebook: {per}); {_where(r)}.")
    return out


def performance_rows(r: dict) -> dict[str, str]:
    """docs/performance.md's table rows (``| `command` | measured | commit, date | machine |``)."""
    s, rows = r["steps"], {}
    where, machine = f"`{r['commit'][:7]}`, {r['date']}", _machine(r)
    if "test" in s:
        t = s["test"]
        rows["make test"] = (f"| `make test` | {_tests_in(t)} ({_outcome(t)}; pytest's own "
                             f"{t['pytest_seconds']:.0f} s), after "
                             f"{duration(s['install']['seconds'])} of `make install` | {where} | {machine} |")
    if "test-fast" in s:
        t = s["test-fast"]
        rows["make test-fast"] = (f"| `make test-fast` (not `slow`: no training, no notebook) | "
                                  f"{_tests_in(t)} ({t['passed']} passed) | {where} | {machine} |")
    if "demo" in s:
        d = s["demo"]
        rows["make demo"] = (f"| `make demo` | {duration(d['seconds'])} wall, {d['ok']}/{d['of']} notebooks ok "
                             f"({d['notebook_seconds']:.1f} s of notebooks) | {where} | {machine} |")
    if "quickstart" in s:
        rows["quick start"] = (f"| quick start: `python -m toolkit run configs/quickstart.yaml --quiet`, fresh run "
                               f"directory | {duration(s['quickstart']['seconds'])} wall, right after "
                               f"`make install` | {where} | {machine} |")
    return rows


DURATIONS_HEADING = "## `make test`: the slowest tests"


def durations_section(r: dict) -> str:
    """docs/performance.md's section of the slowest tests of the measured ``make test`` (``--durations=40``)."""
    t = r["steps"]["test"]
    rows = "\n".join(f"| {d['seconds']:.1f} | {d['phase']} | `{d['test']}` |" for d in t["durations"])
    return (f"{DURATIONS_HEADING}\n\n`make measure` at commit `{r['commit'][:7]}` ({r['date']}; {_machine(r)}): the "
            f"40 longest phases of `make test` (`--durations=40`; each worker's own time, two workers side by "
            f"side), of {duration(t['seconds'])} in all.\n\n| seconds | phase | test |\n|---|---|---|\n{rows}\n")


def _with_section(text: str, heading: str, section: str) -> str:
    """``text`` with the section starting at ``heading`` (up to the next ``## ``) replaced, or appended."""
    start = text.find(heading + "\n")
    if start < 0:
        return text.rstrip("\n") + "\n\n" + section
    end = text.find("\n## ", start + len(heading))
    return text[:start] + section + (text[end + 1:] if end >= 0 else "")


def _replace_line(text: str, start: str, new: str) -> str | None:
    lines = text.splitlines(keepends=True)
    hits = [i for i, line in enumerate(lines) if line.startswith(start)]
    if len(hits) > 1:
        raise ValueError(f"more than one line starts with {start!r}")
    if hits:
        lines[hits[0]] = new + "\n"
        return "".join(lines)
    return None


def _insert_after(text: str, start: str, new: str) -> str | None:
    lines = text.splitlines(keepends=True)
    hits = [i for i, line in enumerate(lines) if line.startswith(start)]
    if len(hits) != 1:
        return None
    lines.insert(hits[0] + 1, new + "\n")
    return "".join(lines)


def write_docs(r: dict, root: Path = ROOT) -> None:
    """Append the record to docs/measurements.json; rewrite README.md's and docs/performance.md's lines for it."""
    records_path = root / "docs" / "measurements.json"
    records = json.loads(records_path.read_text(encoding="utf-8")) if records_path.exists() else []
    records.append(r)
    records_path.write_text(json.dumps(records, indent=1) + "\n", encoding="utf-8")
    readme = root / "README.md"
    text = readme.read_text(encoding="utf-8")
    for command, line in readme_lines(r).items():
        got = _replace_line(text, "This took " if command == "quick start" else f"`{command}` —", line)
        if got is None and command == "make test-fast":  # a line of its own, after make test's
            got = _insert_after(text, "`make test` —", "\n" + line)
        if got is None:
            raise ValueError(f"README.md has no line starting with `{command}` —")
        text = got
    readme.write_text(text, encoding="utf-8")
    perf = root / "docs" / "performance.md"
    text = perf.read_text(encoding="utf-8")
    for command, row in performance_rows(r).items():
        start = f"| `{command}` |" if command != "quick start" else "| quick start:"
        if command == "make test-fast":
            start = "| `make test-fast`"
        got = _replace_line(text, start, row)
        if got is None:
            raise ValueError(f"docs/performance.md has no row starting with {start!r}")
        text = got
    if r["steps"].get("test", {}).get("durations"):
        text = _with_section(text, DURATIONS_HEADING, durations_section(r))
    perf.write_text(text, encoding="utf-8")
    if "workshop" in r["steps"]:
        plan = root / "docs" / "workshop.md"
        plan.write_text(_with_section(plan.read_text(encoding="utf-8"), WORKSHOP_HEADING, workshop_section(r)),
                        encoding="utf-8")


WORKSHOP_HEADING = "## Measured times"


def workshop_section(r: dict) -> str:
    """docs/workshop.md's table of each notebook's seconds in workshop mode (``make workshop``, fresh clone)."""
    w = r["steps"]["workshop"]
    rows = "\n".join(f"| {name} | {'ok' if v['ok'] else 'FAILED'} | {v['seconds']:.1f} |"
                      for name, v in sorted(w["notebooks"].items()))
    return (f"{WORKSHOP_HEADING}\n\n`make workshop` from a fresh clone (`python benchmarks/measure.py --only workshop`): "
            f"{duration(w['seconds'])} wall, {w['ok']}/{w['of']} notebooks ok; {_where(r)}; {_machine(r)}.\n\n"
            f"| notebook | status | seconds in workshop mode |\n|---|---|---|\n{rows}\n")


# ---- running ---------------------------------------------------------------------------------------------------------

def _load() -> float:
    return os.getloadavg()[0]


def run_step(name: str, cwd: Path, env: dict, log_dir: Path) -> dict:
    log = log_dir / f"{name}.log"
    load = _load()
    print(f"[measure] {name}: {' '.join(COMMANDS[name])} (load {load:.2f}; log {log})", flush=True)
    t0 = time.perf_counter()
    with open(log, "w", encoding="utf-8") as f:
        rc = subprocess.run(COMMANDS[name], cwd=cwd, env=env, stdout=f, stderr=subprocess.STDOUT).returncode
    seconds = time.perf_counter() - t0
    text = log.read_text(encoding="utf-8", errors="replace")
    out = {"seconds": round(seconds, 1), "exit_status": rc, "load_before": round(load, 2)}
    if name in ("test", "test-fast"):
        out.update(parse_pytest(text))
    elif name in ("demo", "workshop"):
        out.update(parse_demo(text))
    print(f"[measure] {name}: {duration(seconds)}, exit status {rc}", flush=True)
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=",".join(STEPS), help=f"steps, of {','.join(STEPS)} (install always runs)")
    ap.add_argument("--work", help="folder of the clone (default: a new temporary folder, removed afterwards)")
    ap.add_argument("--allow-dirty", action="store_true", help="measure HEAD although the tree has changes")
    ap.add_argument("--no-write", action="store_true", help="print the record, change no document")
    args = ap.parse_args(argv)
    steps = [s for s in STEPS if s == "install" or s in args.only.split(",")]
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.strip()
    if dirty and not args.allow_dirty:
        sys.exit("measure: the tree has uncommitted changes (a fresh clone measures HEAD); commit, or --allow-dirty")
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.strip()
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="measure-"))
    clone, cache, logs = work / "clone", work / "cache", work / "logs"
    for p in (clone, cache):
        if p.exists():
            shutil.rmtree(p)
    cache.mkdir(parents=True)
    logs.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "clone", "--quiet", "--no-local", str(ROOT), str(clone)], check=True)
    subprocess.run(["git", "checkout", "--quiet", commit], cwd=clone, check=True)
    # a newcomer's shell: no virtual environment, no Python path or Hugging Face settings of ours — but the machine's
    # own settings kept (PYTHONDONTWRITEBYTECODE, set on the reference image, is what the Makefile must cope with)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("VIRTUAL_ENV", "HF_", "TRANSFORMERS_")) and k not in _SESSION_PYTHON_VARS}
    env.update(XDG_CACHE_HOME=str(cache), MPLCONFIGDIR=str(cache / "matplotlib"))
    env.pop("CI", None)
    record = {"commit": commit, "date": date.today().isoformat(),
              "machine": {"cores": os.cpu_count(), "memory_gib": _memory_gib(), "platform": platform.platform(),
                          "python": platform.python_version()},
              "steps": {}}
    for name in steps:
        record["steps"][name] = run_step(name, clone, env, logs)
        if name == "install" and record["steps"][name]["exit_status"] != 0:
            break
    print(json.dumps(record, indent=1))
    if not args.no_write:
        write_docs(record)
        print(f"[measure] wrote {RECORDS.relative_to(ROOT)}, README.md and docs/performance.md")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return record


def _memory_gib() -> int:
    try:
        kb = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                  if line.startswith("MemTotal:"))
        return round(kb / 2**20)
    except (OSError, StopIteration, ValueError):
        return 0


if __name__ == "__main__":
    main()
