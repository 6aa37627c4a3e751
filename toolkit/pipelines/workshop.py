"""Workshop mode: a notebook reads the shipped results of a finished run, so a lesson shows in seconds.

A notebook's work folder (``work_dir``, e.g. ``outputs/work/00_quickstart``) holds one sub-folder per cached step,
each with its ``step.json`` (the step's key, a hash of its inputs: :mod:`toolkit.pipelines.cache`). :func:`ship`
copies a finished work folder into ``prebuilt/notebooks/<notebook>/`` — every result file (identifier tables, audits,
attack scores, verdicts, regurgitation, the training logs and each checkpoint's ``config.json``), **without model
weights** (``*.safetensors``, ``*.bin``, the trainer's resume state; a checkpoint folder gets
:data:`~toolkit.models.WEIGHTS_NOT_SHIPPED` instead), without the run's lock and manifest (the next run writes its
own), with ``shipped.json``: the notebook, its work folder, the parameters it ran with (``notebooks/workshop.yaml``),
the key of every step, the commit and date. A step already under ``prebuilt/<key>/`` (a tiny base, RMIA's reference
models, notebook 05's model) is not shipped twice: the notebook copies it from there, weights included, as on any
first run. The quick start's 49 MB work folder ships in about 2 MB.

:func:`install` (``make workshop``) copies each shipped folder into the notebook's work folder; the notebook then
finds every step current by the one cache rule and only reads. ``make workshop`` runs the notebooks with
:data:`~toolkit.pipelines.cache.REQUIRE_CACHED` set: a step that would run — because the code or the parameters
changed its key since the results were shipped — stops with a :class:`~toolkit.errors.ToolkitError` naming the
step, never retrains silently over a result without weights; a checkpoint without its weights that a step loads
anyway stops likewise (:func:`toolkit.models.load_model`). :func:`check_shipped` is that rule as a test: the run of
the shipped config is repeated over a copy of the shipped folder with ``REQUIRE_CACHED`` set, so
``tests/test_workshop.py`` fails when a shipped result is stale (its step keys no longer the current code's or
config's), as ``tests/test_prebuilt.py`` does for the pre-built bases.

Ship after the notebook ran (at the parameters of ``notebooks/workshop.yaml``)::

    python -m toolkit.pipelines.workshop --ship 00_quickstart          # outputs/work/00_quickstart → prebuilt/notebooks
    python -m toolkit.pipelines.workshop --check 00_quickstart         # is it current? (what the test runs)
    python -m toolkit.pipelines.workshop --install                     # prebuilt/notebooks/* → outputs/work/*
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolkit.errors import ToolkitError

#: the repository root (notebooks/, prebuilt/, configs/ beside the package)
ROOT = Path(__file__).resolve().parents[2]
#: where shipped runs live, one folder per notebook
SHIPPED = ROOT / "prebuilt" / "notebooks"
#: the workshop's parameters per notebook (the format of notebooks/demo.yaml)
PARAMETERS = ROOT / "notebooks" / "workshop.yaml"
#: what a shipped copy leaves out: model weights and resume state (file suffixes, folder names), the run's own files
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".msgpack", ".h5")
LEFT_OUT_DIRS = ("trainer",)
LEFT_OUT_FILES = (".lock", "manifest.json")
#: a checkpoint folder without its weights keeps no tokenizer either (its config and training log stay)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "vocab.txt", "merges.txt",
                   "special_tokens_map.json", "added_tokens.json")
#: the record of a shipped folder
RECORD = "shipped.json"
_PLACEHOLDER = "{root}"
_WORK = "{work_dir}"


def default_work_dir(notebook: str, notebooks: Path = ROOT / "notebooks") -> Path:
    """The ``work_dir`` a notebook's parameters cell sets (``../outputs/work/NN_name``), resolved from its folder."""
    script = notebooks / f"{notebook}.py"
    if not script.is_file():
        raise ToolkitError(f"{script}: no such notebook")
    cell = script.read_text(encoding="utf-8").split('# %% tags=["parameters"]', 1)
    if len(cell) < 2:
        raise ToolkitError(f"{script}: no parameters cell")
    for node in ast.parse(cell[1].split("\n# %%", 1)[0]).body:
        if (isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "work_dir" for t in node.targets)
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
            return (notebooks / node.value.value).resolve()
    raise ToolkitError(f"{script}: its parameters cell sets no work_dir: nothing to ship")


def _steps(folder: Path) -> dict[str, str]:
    """``{step folder relative to folder: key}`` of every ``step.json`` under ``folder``; a step not done is an error."""
    out = {}
    for p in sorted(folder.rglob("step.json")):
        info = json.loads(p.read_text(encoding="utf-8"))
        rel = str(p.parent.relative_to(folder)) or "."
        if info.get("status") != "done" or not info.get("key"):
            raise ToolkitError(f"{p}: step {info.get('step', rel)} is not finished: run the notebook to its end "
                               "before shipping")
        out[rel] = info["key"]
    return out


def _prebuilt_keys(folder: Path = ROOT / "prebuilt") -> set[str]:
    """The keys of the finished steps shipped under ``prebuilt/<key>/``."""
    from toolkit.pipelines.cache import is_current

    return {p.name for p in folder.iterdir() if p.is_dir() and is_current(p, p.name)} if folder.is_dir() else set()


def _relative(value: Any, root: str, placeholder: str = _PLACEHOLDER) -> Any:
    """``value`` with every string under the folder ``root`` written ``placeholder/…`` (``{root}``: the repository;
    ``{work_dir}``: the work folder) — a shipped file holds no machine path."""
    if isinstance(value, str):
        return placeholder + value[len(root):] if value == root or value.startswith(root + os.sep) else value
    if isinstance(value, dict):
        return {k: _relative(v, root, placeholder) for k, v in value.items()}
    if isinstance(value, list):
        return [_relative(v, root, placeholder) for v in value]
    return value


def _absolute(value: Any, root: str, placeholder: str = _PLACEHOLDER) -> Any:
    """:func:`_relative` undone: ``placeholder/…`` written under the folder ``root``."""
    if isinstance(value, str):
        return root + value[len(placeholder):] if value.startswith(placeholder) else value
    if isinstance(value, dict):
        return {k: _absolute(v, root, placeholder) for k, v in value.items()}
    if isinstance(value, list):
        return [_absolute(v, root, placeholder) for v in value]
    return value


def _unpack(work: Path) -> None:
    """The JSON files of a shipped copy now at ``work`` with their paths written for this machine and folder."""
    for p in work.rglob("*.json"):
        info = json.loads(p.read_text(encoding="utf-8"))
        new = _absolute(_absolute(info, str(work), _WORK), str(ROOT))
        if new != info:
            p.write_text(json.dumps(new, indent=1) + "\n", encoding="utf-8")


def _commit() -> str | None:
    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True, timeout=30).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def ship(notebook: str, *, work_dir: str | Path | None = None, into: str | Path = SHIPPED,
         parameters: dict[str, Any] | None = None) -> Path:
    """Copy the finished work folder of ``notebook`` (default: its parameters cell's ``work_dir``) without weights
    into ``into/<notebook>`` (replacing an older copy) with its :data:`RECORD`; returns that folder. ``parameters``:
    what it ran with beyond its defaults (default: ``notebooks/workshop.yaml``'s entry)."""
    import yaml

    from toolkit.models import WEIGHTS_NOT_SHIPPED

    work = (Path(work_dir) if work_dir is not None else default_work_dir(notebook)).resolve()
    if not work.is_dir():
        raise ToolkitError(f"{work}: no work folder of {notebook}: run the notebook first")
    steps = _steps(work)
    if not steps:
        raise ToolkitError(f"{work}: no cached step: nothing to ship")
    # a step already under prebuilt/ by its key (a tiny base, RMIA's reference models, notebook 05's model) is not
    # shipped twice: the notebook copies it from there, with its weights, as on any first run
    prebuilt = _prebuilt_keys()
    from_prebuilt = sorted(rel for rel, key in steps.items() if key in prebuilt)
    steps = {rel: key for rel, key in steps.items() if rel not in from_prebuilt}
    if parameters is None:
        from toolkit.pipelines.notebooks import read_demo_parameters

        parameters = read_demo_parameters(PARAMETERS).get(notebook, {}) if PARAMETERS.is_file() else {}
    target = Path(into) / notebook
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{notebook}.", dir=target.parent))
    root = str(ROOT)
    try:
        left_out = 0

        def ignore(d, names):
            nonlocal left_out
            weights = any(n.endswith(WEIGHT_SUFFIXES) for n in names)
            here = Path(d).resolve()
            skip = [n for n in names if (here / n).is_dir() and os.path.relpath(here / n, work) in from_prebuilt]
            names = [n for n in names if n not in skip]
            skip += [n for n in names if n in LEFT_OUT_DIRS and (Path(d) / n).is_dir()
                    or n.endswith(WEIGHT_SUFFIXES) or (weights and n in TOKENIZER_FILES)
                    or (Path(d).resolve() == work and n in LEFT_OUT_FILES)]
            left_out += sum(1 for n in skip if n.endswith(WEIGHT_SUFFIXES))
            if any(n.endswith(WEIGHT_SUFFIXES) for n in skip):
                (staging / Path(d).relative_to(work)).mkdir(parents=True, exist_ok=True)
                (staging / Path(d).relative_to(work) / WEIGHTS_NOT_SHIPPED).write_text(
                    "The model weights of this checkpoint were not shipped (toolkit/pipelines/workshop.py): the "
                    "results beside it were computed from them. Run the notebook live to train them.\n",
                    encoding="utf-8")
            return skip

        shutil.copytree(work, staging, dirs_exist_ok=True, ignore=ignore)
        for p in staging.rglob("*.json"):  # this machine's clock and paths left out; keys and inputs kept
            info = json.loads(p.read_text(encoding="utf-8"))
            new = _relative(_relative(info, str(work), _WORK), root)
            if p.name == "step.json":
                new = {k: v for k, v in new.items() if k not in ("started", "finished")}
            if new != info:  # a file without a machine path keeps its bytes (some are listed by their SHA-256)
                p.write_text(json.dumps(new, indent=1) + "\n", encoding="utf-8")
        home = default_work_dir(notebook)  # where install() puts it back, whichever folder was shipped
        record: dict[str, Any] = {"notebook": notebook, "work_dir": os.path.relpath(home, ROOT / "notebooks"),
                                  "parameters": parameters, "steps": steps, "from_prebuilt": from_prebuilt,
                                  "commit": _commit(),
                                  "date": time.strftime("%Y-%m-%d"), "weights_left_out": left_out}
        config = work / "config.yaml"
        if config.is_file() and (work / "manifest.json").is_file():  # a run of toolkit.pipelines.lm_experiment
            record["experiment"] = _relative(yaml.safe_load(config.read_text(encoding="utf-8")), root)
            source = json.loads((work / "manifest.json").read_text(encoding="utf-8")).get("config_file")
            if source:
                # a notebook's run names it from notebooks/ (its working directory), a command's from the root
                found = next((b / source for b in (ROOT / "notebooks", ROOT) if (b / source).is_file()), ROOT / source)
                record["config_file"] = os.path.relpath(found.resolve() if not Path(source).is_absolute()
                                                        else Path(source), ROOT)
            (staging / "config.yaml").write_text(yaml.safe_dump(record["experiment"], sort_keys=False,
                                                                allow_unicode=True), encoding="utf-8")
        record["bytes"] = sum(f.stat().st_size for f in staging.rglob("*") if f.is_file())
        (staging / RECORD).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        for dirpath, _, filenames in os.walk(staging):  # repository files: synthetic data only, readable by all
            os.chmod(dirpath, 0o755)
            for name in filenames:
                os.chmod(os.path.join(dirpath, name), 0o644)
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return target


def read_record(folder: str | Path) -> dict[str, Any]:
    """The :data:`RECORD` of a shipped folder (a :class:`ToolkitError` naming it when absent or unreadable)."""
    p = Path(folder) / RECORD
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ToolkitError(f"{p}: not a shipped run ({type(exc).__name__})") from None


def shipped(into: str | Path = SHIPPED) -> dict[str, Path]:
    """``{notebook: shipped folder}`` of every shipped run under ``into``."""
    base = Path(into)
    return {p.parent.name: p.parent for p in sorted(base.glob(f"*/{RECORD}"))} if base.is_dir() else {}


def _same_steps(folder: Path, steps: dict[str, str]) -> bool:
    from toolkit.pipelines.cache import read_step

    return all((read_step(folder / rel) or {}).get("key") == key for rel, key in steps.items())


def install(into: str | Path = SHIPPED, *, notebooks: str | Path = ROOT / "notebooks", force: bool = False,
            only: list[str] | None = None) -> dict[str, str]:
    """Copy every shipped run (names starting with one of ``only``) into its notebook's work folder (the record's
    ``work_dir``, relative to ``notebooks``); returns ``{notebook: "copied" | "in place"}``. A work folder that
    already holds these steps is left as it is; one that holds other results (a live run) is a
    :class:`ToolkitError` unless ``force`` (then replaced)."""
    from toolkit.io import restrict_tree

    done = {}
    for name, folder in shipped(into).items():
        if only and not any(name.startswith(o) for o in only):
            continue
        record = read_record(folder)
        work = (Path(notebooks) / record["work_dir"]).resolve()
        if work.exists() and _same_steps(work, record["steps"]):
            done[name] = "in place"
            continue
        if work.exists() and any(work.iterdir()) and not force:
            raise ToolkitError(f"{work}: holds results of another run of {name}; move it away or install with "
                               "--force (replaces it)")
        if work.exists():
            shutil.rmtree(work)
        work.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(folder, work, ignore=lambda d, names: [RECORD] if Path(d) == folder else [])
        _unpack(work)
        restrict_tree(work)  # owner-only, as a run's own output
        done[name] = "copied"
    return done


@dataclass
class WorkshopPlan:
    """What ``toolkit demo --workshop`` runs (:func:`prepare_workshop`): the notebooks with shipped results
    (``shipped``: run with every step required cached), every notebook to run (``run``), the parameters file, and one
    line per notebook to print."""

    shipped: set[str]
    run: list[str]
    parameters: Path
    lines: list[str]


def prepare_workshop(notebooks: Path, *, only: list[str] | None = None, force: bool = False,
                     parameters: str | Path | None = None, into: str | Path = SHIPPED) -> WorkshopPlan:
    """Install the shipped runs (:func:`install`; names starting with one of ``only``) and choose the notebooks of
    workshop mode: those with shipped results and those ``parameters`` (default :data:`PARAMETERS`) lists — they run
    in seconds; any other would train at its full size for up to an hour and is left out, said so."""
    from toolkit.pipelines.notebooks import read_demo_parameters

    def wanted(name: str) -> bool:
        return not only or any(name.startswith(o) for o in only)

    lines = [f"{name}: shipped results {what}" for name, what in install(into, notebooks=notebooks, force=force,
                                                                          only=only).items()]
    shipped = {line.split(":", 1)[0] for line in lines}
    params = Path(parameters) if parameters else PARAMETERS
    run = sorted(n for n in shipped | set(read_demo_parameters(params)) if wanted(n))
    left = sorted(p.stem for p in Path(notebooks).glob("*.ipynb") if p.stem not in run and wanted(p.stem))
    if left:
        lines.append(f"workshop mode: no shipped results for {', '.join(left)} (run them live: make demo)")
    if not run:
        lines.append("workshop mode: no notebook to run")
    return WorkshopPlan(shipped, run, params, lines)


@contextmanager
def require_cached():
    """Every step must be found done (:data:`~toolkit.pipelines.cache.REQUIRE_CACHED`) inside the block."""
    from toolkit.pipelines.cache import REQUIRE_CACHED

    old = os.environ.get(REQUIRE_CACHED)
    os.environ[REQUIRE_CACHED] = "1"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(REQUIRE_CACHED, None)
        else:
            os.environ[REQUIRE_CACHED] = old


def _flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def shipped_config(record: dict[str, Any]):
    """The experiment a shipped run ran: its ``config_file`` with, as dotted-key overrides, every value in which the
    shipped ``config.yaml`` differs from that file (a notebook's parameters); a :class:`ToolkitError` when the
    overrides do not give back the shipped config."""
    from toolkit.config.experiment import load_experiment

    if "config_file" not in record:
        raise ToolkitError(f"{record['notebook']}: the shipped record names no config file")
    path = ROOT / record["config_file"]
    shipped_cfg = _flat(_absolute(record["experiment"], str(ROOT)))
    plain = _flat(load_experiment(path).to_dict())
    overrides = {k: v for k, v in shipped_cfg.items() if plain.get(k, object()) != v}
    try:
        cfg = load_experiment(path, overrides)
    except ToolkitError as exc:
        raise ToolkitError(f"{record['notebook']}: the shipped config is not {record['config_file']} with "
                           f"overrides ({exc})") from None
    if _flat(cfg.to_dict()) != shipped_cfg:
        raise ToolkitError(f"{record['notebook']}: {record['config_file']} with overrides does not give back the "
                           f"shipped config")
    return cfg


def check_shipped(folder: str | Path) -> float:
    """Repeat the shipped run over a copy of ``folder`` with every step required cached; returns the seconds it
    took. A stale shipped result (a step key that is no longer the current code's or config's) is a
    :class:`ToolkitError` naming the step. A shipped run of no experiment config is checked by running its notebook
    in workshop mode (``python -m toolkit demo --workshop --only NAME``)."""
    from toolkit.pipelines.lm_experiment import run_experiment

    record = read_record(folder)
    if "experiment" not in record:
        raise ToolkitError(f"{folder}: not a run of an experiment config: check it by running its notebook "
                           f"(python -m toolkit demo --workshop --only {record['notebook']})")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "work"
        shutil.copytree(folder, work, ignore=lambda d, names: [RECORD] if Path(d) == Path(folder) else [])
        _unpack(work)
        cfg = shipped_config(record)
        t0 = time.perf_counter()
        with require_cached():
            result = run_experiment(cfg, work, progress=False, echo=False)
        seconds = time.perf_counter() - t0
    ran = [s["name"] for s in result.manifest["steps"] if s["status"] not in ("cached", "prebuilt", "external")
           and s["name"] != "data"]
    if ran:  # pragma: no cover - begin_step refuses first; kept as the rule's statement
        raise ToolkitError(f"{folder}: steps {', '.join(ran)} were not found cached")
    return seconds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m toolkit.pipelines.workshop", description=__doc__.splitlines()[0])
    ap.add_argument("--ship", nargs="+", metavar="NOTEBOOK", default=[],
                    help="ship these notebooks' finished work folders (e.g. 00_quickstart) into --into")
    ap.add_argument("--work-dir", help="with one --ship: the work folder to ship (default: the notebook's work_dir)")
    ap.add_argument("--check", nargs="*", metavar="NOTEBOOK",
                    help="check that these shipped runs (none named: all) are current for the code and config")
    ap.add_argument("--install", action="store_true", help="copy every shipped run into its notebook's work folder")
    ap.add_argument("--force", action="store_true", help="with --install: replace work folders of other runs")
    ap.add_argument("--into", default=str(SHIPPED), help=f"folder of the shipped runs (default {SHIPPED})")
    args = ap.parse_args(argv)
    try:
        if args.work_dir and len(args.ship) != 1:
            raise ToolkitError("--work-dir goes with one --ship NOTEBOOK")
        for name in args.ship:
            path = ship(name, work_dir=args.work_dir, into=args.into)
            rec = read_record(path)
            print(f"{name}: shipped {len(rec['steps'])} steps, {rec['bytes'] / 1e6:.1f} MB, "
                  f"{rec['weights_left_out']} weight files left out → {path}")
        if args.check is not None:
            for name, folder in shipped(args.into).items():
                if not args.check or name in args.check:
                    print(f"{name}: current ({check_shipped(folder):.1f} s, every step cached)")
        if args.install:
            for name, what in install(args.into, force=args.force).items():
                print(f"{name}: {what}")
    except ToolkitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["LEFT_OUT_DIRS", "PARAMETERS", "RECORD", "SHIPPED", "TOKENIZER_FILES", "WEIGHT_SUFFIXES", "check_shipped",
           "WorkshopPlan", "default_work_dir", "install", "prepare_workshop", "read_record", "require_cached", "ship",
           "shipped", "shipped_config"]
