"""The one cache rule of every pipeline: a step's key is a hash of its inputs.

A step writes into its own output directory, which holds ``step.json``: ``{"step", "key", "status", "inputs",
"seconds"}``. ``key`` is the SHA-256 of the canonical JSON of ``{step kind, STEP_VERSION, inputs}`` — the inputs being
the step's config section, the fingerprints of its data and the keys of the steps it depends on. A step is *current*
when ``step.json`` says ``done`` with the same key (and its main output file exists); then its result is loaded, not
recomputed. Otherwise the stale output is removed and the step runs again; a step that crashed keeps
``status: running``: a resumable step (training) with the same key resumes from its own state, any other step starts
over. A step returns its result (``compute()``'s value when it ran, ``load()``'s when it was current): nothing is
computed and then read back.

:func:`cached_step` is the rule for a single step (notebooks, the e-mail and scrubbing pipelines);
:class:`StepCache` applies it within a run and records every step in the run's manifest
(:class:`~toolkit.pipelines.manifest.Manifest`).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toolkit.io import atomic_write_json, make_private_dir, restrict_tree
from toolkit.pipelines.manifest import digest, jsonable

STEP_VERSION = 3  # bump when a step's outputs change meaning, to invalidate every cached step


def step_key(name: str, inputs: dict[str, Any]) -> str:
    """The step's cache key: SHA-256 of ``{step kind, STEP_VERSION, inputs}`` (kind = ``name`` up to the first ``/``)."""
    return digest({"step": name.split("/")[0], "version": STEP_VERSION, "inputs": inputs})


def read_step(out_dir: str | Path) -> dict[str, Any] | None:
    """``out_dir/step.json``, or None when absent or unreadable."""
    p = Path(out_dir) / "step.json"
    try:
        return json.loads(p.read_text(encoding="utf-8")) if p.is_file() else None
    except (OSError, json.JSONDecodeError):
        return None


def is_current(out_dir: str | Path, key: str, check: str | None = None) -> bool:
    """True when ``out_dir`` holds a finished step with this key (and its ``check`` file)."""
    info = read_step(out_dir)
    return bool(info and info.get("status") == "done" and info.get("key") == key
                and (check is None or (Path(out_dir) / check).exists()))


#: set (to any non-empty value) where every step must be found done — a notebook in workshop mode, which reads the
#: shipped results of a finished run (:mod:`toolkit.pipelines.workshop`): a step that would run stops with a
#: :class:`~toolkit.errors.ToolkitError` instead of training for minutes over a shipped result without its weights
REQUIRE_CACHED = "TOOLKIT_REQUIRE_CACHED"


def begin_step(name: str, out_dir: str | Path, key: str, inputs: dict[str, Any], *, resumable: bool = False) -> bool:
    """Prepare ``out_dir`` for a run of the step: stale output removed (kept when a resumable step with the same key
    was interrupted), ``step.json`` marked running. Returns True when it resumes. Where :data:`REQUIRE_CACHED` is set,
    a :class:`~toolkit.errors.ToolkitError` naming the step instead (nothing removed)."""
    import os

    out = Path(out_dir)
    if os.environ.get(REQUIRE_CACHED):
        from toolkit.errors import ToolkitError

        old = read_step(out)
        why = "not in the shipped results" if old is None else (
            f"its key is {key[:12]}…, the shipped one {str(old.get('key'))[:12]}…" if old.get("key") != key
            else f"its output is {old.get('status', 'unfinished')}")
        raise ToolkitError(f"{out}: step {name} would run ({why}): the shipped results are not this code's or these "
                           f"parameters' (re-ship them: python -m toolkit.pipelines.workshop --ship NOTEBOOK), or "
                           f"run live without {REQUIRE_CACHED}")
    old = read_step(out)
    keep = resumable and old is not None and old.get("key") == key and old.get("status") == "running"
    if out.exists() and not keep:
        shutil.rmtree(out)  # stale: made from other inputs, or an interrupted non-resumable step
    make_private_dir(out)
    atomic_write_json({"step": name, "key": key, "status": "running", "inputs": jsonable(inputs),
                       "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}, out / "step.json")
    return keep


def finish_step(name: str, out_dir: str | Path, key: str, inputs: dict[str, Any], seconds: float) -> None:
    atomic_write_json({"step": name, "key": key, "status": "done", "inputs": jsonable(inputs),
                       "seconds": round(seconds, 3), "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z")},
                      Path(out_dir) / "step.json")


def prebuilt_copy(prebuilt: str | Path | None, key: str, check: str | None = None) -> Path | None:
    """The finished output of the step ``key`` made before under ``prebuilt`` (its sub-folder named by the key), or
    None (no folder given, or none of this key: the step is computed)."""
    ready = Path(prebuilt) / key if prebuilt is not None else None
    return ready if ready is not None and is_current(ready, key, check) else None


def copy_prebuilt(ready: Path, out_dir: str | Path) -> None:
    """``ready`` (:func:`prebuilt_copy`) copied into ``out_dir``, owner-only as if computed there."""
    out = Path(out_dir)
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(ready, out)
    restrict_tree(out)


def cached_step(name: str, out_dir: str | Path, inputs: dict[str, Any], compute: Callable[[], Any],
                load: Callable[[], Any] | None = None, *, check: str | None = None, resumable: bool = False,
                prebuilt: str | Path | None = None) -> Any:
    """Run one step under the cache rule and return its result: ``load()`` when current, else ``compute()`` (which
    writes into ``out_dir``). ``prebuilt``: as :meth:`StepCache.run`'s (the output of this key made before, copied
    instead of computed)."""
    key = step_key(name, inputs)
    if is_current(out_dir, key, check):
        return load() if load is not None else None
    ready = prebuilt_copy(prebuilt, key, check)
    if ready is not None:
        copy_prebuilt(ready, out_dir)
        return load() if load is not None else None
    begin_step(name, out_dir, key, inputs, resumable=resumable)
    t0 = time.perf_counter()
    result = compute()
    finish_step(name, out_dir, key, inputs, time.perf_counter() - t0)
    return result


class StepCache:
    """:func:`cached_step` within a run: every step recorded in the manifest, one line per step on the terminal."""

    def __init__(self, manifest, *, echo: bool = True, state=None):
        self.manifest = manifest
        self.echo = echo
        self.state = state  # accelerate PartialState under `accelerate launch`, else None
        self.run_dir = manifest.path.parent

    digest = staticmethod(digest)
    key = staticmethod(step_key)
    read = staticmethod(read_step)
    is_current = staticmethod(is_current)

    def _say(self, text: str) -> None:
        if self.echo:
            print(text, flush=True)

    def run(self, name: str, out_dir: str | Path, inputs: dict[str, Any], compute: Callable[[], Any],
            load: Callable[[], Any] | None = None, *, check: str | None = None, resumable: bool = False,
            all_processes: bool = False, prebuilt: str | Path | None = None) -> Any:
        """Run ``compute`` (which writes into ``out_dir``) unless current; return its result, or ``load()``'s when
        the step was current.

        ``prebuilt``: a folder of this step's outputs made before, each in a sub-folder named by its key (the one
        cache rule: same key, same inputs). A finished output of this key there is copied into ``out_dir`` instead
        of computed (its ``step.json`` says so); a folder without one changes nothing.

        ``all_processes``: under ``accelerate launch`` every process calls ``compute`` (training); otherwise only the
        process calling this method does.
        """
        out = Path(out_dir)
        key = step_key(name, inputs)
        rel = self.output_of(out)
        main = self.state is None or self.state.is_main_process
        if is_current(out, key, check):
            info = read_step(out) or {}
            self.manifest.record(name, "cached", 0.0, key=key, output=rel, original_seconds=info.get("seconds"))
            self._say(f"[run] {name}: up to date (cached)")
            return load() if load is not None else None
        ready = prebuilt_copy(prebuilt, key, check)
        if main and ready is not None:
            t0 = time.perf_counter()
            copy_prebuilt(ready, out)
            self.manifest.record(name, "prebuilt", time.perf_counter() - t0, key=key, output=rel)
            self._say(f"[run] {name}: copied the pre-built output ({ready})")
            return load() if load is not None else None
        if main:
            resumed = begin_step(name, out, key, inputs, resumable=resumable)
            self._say(f"[run] {name}: {'resuming' if resumed else 'running'} ...")
        if all_processes and self.state is not None:
            self.state.wait_for_everyone()
        t0 = time.perf_counter()
        result = compute()
        seconds = time.perf_counter() - t0
        if all_processes and self.state is not None:
            self.state.wait_for_everyone()
        if main:
            self.record_ran(name, out, key, inputs, seconds)
        return result

    def output_of(self, out_dir: str | Path) -> str:
        """A step's folder as the manifest names it: relative to the run directory when inside it."""
        out = Path(out_dir)
        return str(out.relative_to(self.run_dir)) if out.is_relative_to(self.run_dir) else str(out)

    def record_ran(self, name: str, out_dir: str | Path, key: str, inputs: dict[str, Any], seconds: float, *,
                   where: str = "") -> None:
        """A step computed (here or, ``where``, in a worker process): ``step.json`` done, the manifest's record, the
        terminal's line."""
        finish_step(name, out_dir, key, inputs, seconds)
        self.manifest.record(name, "ran", seconds, key=key, output=self.output_of(out_dir))
        self._say(f"[run] {name}: done in {seconds:.1f} s{where}")


__all__ = ["REQUIRE_CACHED", "STEP_VERSION", "StepCache", "begin_step", "cached_step", "copy_prebuilt", "finish_step", "is_current",
           "prebuilt_copy", "read_step", "step_key"]
