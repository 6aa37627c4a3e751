"""The privacy–utility frontier (issue 27): every strategy at every corpus size and DP budget, in one table.

``python -m toolkit frontier configs/frontier.yaml --out DIR`` runs one experiment (:func:`run_experiment`) per
corpus size and ε, all from the config's ``experiment:`` template with a few keys set per run:

* ``corpus.path`` (the frontier's corpus) and ``corpus.n_individuals`` (the size: members and non-members each);
* ε = ∞: ``training.strategies`` = the strategies without DP (``clm``, ``ppclm``, ``ppclm_surrogate`` …);
* a finite ε: the DP strategies (``clm_dp``, ``ppclm_surrogate_dp`` …) with ``training.dp.epsilon`` = ε, the target
  ε for which Opacus calibrates the noise over the whole training (:mod:`toolkit.training.dp`; the unit is the
  individual unless the template says otherwise). A strategy without DP is the same model at every ε, so it is
  trained once, at ∞.

With an ``hp_search:`` block the DP strategies' hyper-parameters are chosen on the public split, never on the
members (:mod:`toolkit.pipelines.hp_search`, docs/methods.md §3): each size's search runs after its ε = ∞ run and
before its DP runs (:func:`search_size`, into ``DIR/hp_search/size-N/``), which then train every searched strategy
with the chosen values (``training.strategy_schedules``); ``DIR/hp_search.json`` holds every candidate's score and
``frontier.json`` names the search and its choice. With ``corpus.public_reserve`` in the template the search, and the
gradient-subspace strategies' anchors, read the public reserve instead: public patients after the base's, never in
its pre-training data (:class:`toolkit.pipelines.data.ExperimentData`; the generated corpus holds them).

**Base strength** (issue 35 item 4): with ``bases: [100, 1000, 5000]`` the frontier is run once per size of the
public split the base model is pre-trained on (``corpus.n_public``, :func:`with_base`), each into ``DIR/base-N/``
(a whole frontier of its own: table, figure, search), from one corpus holding the largest public split, so the
members, the non-members and the smaller public splits (the first ``N`` public patients) are the same in every one;
``DIR/bases.csv`` / ``bases.json`` set them side by side (:func:`toolkit.results.frontier.bases_table`): per base and
size, the base's and plain fine-tuning's held-out utility and the best private recipe's gain retained — whether a
stronger base makes DP fine-tuning keep more of what fine-tuning learns.

Run directories: ``DIR/size-N/eps-inf``, ``DIR/size-N/eps-E``. Every run of the frontier pre-trains no base of its
own once one exists: the first run's tiny base is copied to ``DIR/bases/<step key>`` and the others name that folder
as ``model.prebuilt`` (:mod:`toolkit.pipelines.prebuilt`), so every size and ε is fine-tuned from the same base when
the template fixes ``corpus.n_public`` (the base step's key covers the public split). The steps of a size that no
strategy owns (identifiers, canaries, RMIA's reference models, the base model's regurgitation and attacks) are the
same at every ε: each finite-ε run starts with the finished ones of its size's ε = ∞ run copied in
(:func:`share_steps`), and the cache rule decides whether they are current (a copied step whose key differs from the
run's is computed again). A finished run is cached as any run is: a frontier interrupted and started again resumes
where it stopped.

The table (:func:`frontier_table`, ``DIR/frontier.csv`` / ``frontier.json``): one row per (size, strategy, ε) with
the gain retained over the untouched base model of that size (:func:`toolkit.results.frontier.gain_retained`, the
frontier's measure; its goal :data:`~toolkit.results.frontier.GAIN_GOAL`: a green model keeping ≥ 50% of plain
fine-tuning's held-out gain), held-out utility relative to ``clm`` (``mlm`` for masked models) of the same size beside
it, utility on the training notes beside them, the strongest membership attack (its AUC, and the largest TPR at
1% FPR over the battery's attacks), PII inference top-1 and its chance level, the largest canary exposure (bits),
the one-run audit's empirical ε lower bound beside the accountant's ε, and the verdict (methods.md §4, §10–11).
"""

from __future__ import annotations

import json
import math
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from toolkit.errors import ToolkitError
from toolkit.results.frontier import (COLUMNS, FrontierPoint, FrontierResult, best_recipes, frontier_row,
                                      frontier_table, points_from_dir)

_KEYS = {"name", "description", "sizes", "epsilons", "strategies", "corpus", "experiment", "hp_search", "bases"}


@dataclass(frozen=True)
class FrontierConfig:
    """``configs/frontier.yaml``: the sizes (individuals among the members, as many non-members), the target ε's
    (``inf``: no DP), the strategies, the corpus (``path`` of an existing one, or ``generate_seed`` for the sample
    generator, used by the CLI) and the experiment template (an experiment config's keys); ``hp_search``: the DP
    hyper-parameters' search on the public split (:mod:`toolkit.pipelines.hp_search`), None: the template's;
    ``bases``: the public split's sizes the base is pre-trained on, one frontier each (:func:`with_base`; empty: the
    template's ``corpus.n_public``, one frontier in ``DIR``)."""

    name: str
    sizes: tuple[int, ...]
    epsilons: tuple[float, ...]
    strategies: tuple[str, ...]
    experiment: dict[str, Any]
    corpus_path: str | None = None
    generate_seed: int | None = None
    description: str = ""
    source: str = "<config>"
    hp_search: Any = None  # HpSearchConfig | None
    bases: tuple[int, ...] = ()

    @property
    def searched(self) -> list[str]:
        """The DP strategies whose hyper-parameters the search chooses (none without ``hp_search``)."""
        from toolkit.strategies import get_strategy

        if self.hp_search is None:
            return []
        return list(self.hp_search.strategies) or [s for s in self.strategies if get_strategy(s).dp]

    @property
    def kind(self) -> str:
        return str((self.experiment.get("model") or {}).get("kind", "clm"))

    @property
    def plain(self) -> str:
        """The reference strategy of the utility ratios: plain fine-tuning of the model kind."""
        return self.kind

    def runs(self) -> list[tuple[int, float, list[str]]]:
        """``(size, ε, strategies)`` of every run, in the order they run (by size, ∞ first)."""
        from toolkit.strategies import get_strategy

        plain = [s for s in self.strategies if not get_strategy(s).dp]
        private = [s for s in self.strategies if get_strategy(s).dp]
        out = []
        for size in self.sizes:
            for eps in sorted(self.epsilons, key=lambda e: (not math.isinf(e), e)):
                chosen = plain if math.isinf(eps) else private
                if chosen:
                    out.append((size, eps, chosen))
        return out


def load_frontier(path: str | Path) -> FrontierConfig:
    """Read and check a frontier YAML; every problem a :class:`ToolkitError` naming the file and the key."""
    from toolkit.strategies import STRATEGIES

    p = Path(path)
    if not p.is_file():
        raise ToolkitError(f"frontier config {str(path)!r} not found")
    try:
        raw = yaml.safe_load(p.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ToolkitError(f"{p}: not a readable YAML file ({type(exc).__name__})") from None
    if not isinstance(raw, dict):
        raise ToolkitError(f"{p}: a frontier config is a mapping of {', '.join(sorted(_KEYS))}")
    unknown = set(raw) - _KEYS
    if unknown:
        raise ToolkitError(f"{p}: unknown key {sorted(unknown)[0]!r}; expected {', '.join(sorted(_KEYS))}")

    def ints(key: str) -> tuple[int, ...]:
        v = raw.get(key)
        if not isinstance(v, list) or not v or not all(isinstance(x, int) and x >= 2 for x in v):
            raise ToolkitError(f"{p}: {key} must be a non-empty list of integers ≥ 2, got {v!r}")
        return tuple(sorted(set(v)))

    eps = raw.get("epsilons")
    try:
        epsilons = tuple(sorted({float(e) for e in eps})) if isinstance(eps, list) and eps else ()
    except (TypeError, ValueError):
        epsilons = ()
    if not epsilons or any(not e > 0 for e in epsilons):
        raise ToolkitError(f"{p}: epsilons must be a non-empty list of numbers > 0 (.inf: no DP), got {eps!r}")
    strategies = raw.get("strategies")
    if not isinstance(strategies, list) or not strategies:
        raise ToolkitError(f"{p}: strategies must be a non-empty list of strategy names")
    for s in strategies:
        if s not in STRATEGIES:
            raise ToolkitError(f"{p}: strategies: unknown strategy {s!r}")
    experiment = raw.get("experiment")
    if not isinstance(experiment, dict):
        raise ToolkitError(f"{p}: experiment must be a mapping (an experiment config's keys)")
    corpus = raw.get("corpus") or {}
    if not isinstance(corpus, dict) or set(corpus) - {"path", "generate_seed"} or len(corpus) != 1:
        raise ToolkitError(f"{p}: corpus must be either {{path: FILE}} or {{generate_seed: N}}")
    path_value = corpus.get("path")
    if path_value is not None:
        path_value = str((p.parent / str(path_value)).resolve())
    search = None
    if "hp_search" in raw:
        from toolkit.pipelines.hp_search import hp_search_config

        search = hp_search_config(raw["hp_search"], str(p), [s for s in strategies if STRATEGIES[s].dp])
    _check_own_schedules(experiment, strategies, p)
    bases = ints("bases") if "bases" in raw else ()
    if bases and (experiment.get("corpus") or {}).get("n_public") is not None:
        raise ToolkitError(f"{p}: bases and experiment.corpus.n_public both set the public split's size: give one")
    cfg = FrontierConfig(name=str(raw.get("name") or p.stem), sizes=ints("sizes"), epsilons=epsilons,
                         strategies=tuple(strategies), experiment=experiment, corpus_path=path_value,
                         generate_seed=corpus.get("generate_seed"), description=str(raw.get("description") or ""),
                         source=str(p), hp_search=search, bases=bases)
    wrong = [s for s in strategies if STRATEGIES[s].kind != cfg.kind]
    if wrong:
        raise ToolkitError(f"{p}: strategies: {wrong[0]} trains a {STRATEGIES[wrong[0]].kind} model, "
                           f"experiment.model.kind is {cfg.kind}")
    if cfg.plain not in strategies or not any(math.isinf(e) for e in epsilons):
        raise ToolkitError(f"{p}: the frontier needs {cfg.plain} (the utility reference) and .inf among the "
                           f"epsilons")
    return cfg


def _check_own_schedules(experiment: dict, strategies: list[str], source: Path) -> None:
    """The template's ``training.strategy_schedules`` (a DP strategy's own values, e.g. a search's result of another
    size; :func:`experiment_for` gives each run those of the strategies it trains): a mapping of the frontier's
    strategies to mappings — their keys are checked with each run's experiment config."""
    training = experiment.get("training")
    given = training.get("strategy_schedules") if isinstance(training, dict) else None
    if given is None:
        return
    where = f"{source}: experiment.training.strategy_schedules"
    if not isinstance(given, dict):
        raise ToolkitError(f"{where}: must be a mapping of DP strategy to its values")
    stray = sorted(set(given) - set(strategies))
    if stray:
        raise ToolkitError(f"{where}: {stray[0]!r} is not among the frontier's strategies")
    for name, values in given.items():
        if not isinstance(values, dict):
            raise ToolkitError(f"{where}.{name}: must be a mapping (learning_rate, batch_size, epochs, dp)")


def with_base(cfg: FrontierConfig, n_public: int) -> FrontierConfig:
    """The frontier of one base strength: ``cfg`` with ``corpus.n_public = n_public`` in its template (the base is
    pre-trained on the first ``n_public`` public patients) and no ``bases`` axis; run it into ``DIR/base-N``
    (:func:`base_dir_name`)."""
    import copy
    import dataclasses

    experiment = copy.deepcopy(cfg.experiment)
    experiment.setdefault("corpus", {})["n_public"] = int(n_public)
    return dataclasses.replace(cfg, experiment=experiment, bases=())


def base_dir_name(n_public: int) -> str:
    return f"base-{int(n_public)}"


def _one_base(cfg: FrontierConfig) -> None:
    """A :class:`ToolkitError` for a config with ``bases``: its frontiers run one base at a time (:func:`with_base`)."""
    if cfg.bases:
        raise ToolkitError(f"{cfg.source}: a frontier with bases is run one base at a time, each into its own folder "
                           f"(with_base(cfg, n) into DIR/base-N; `python -m toolkit frontier` does this)")


def experiment_for(cfg: FrontierConfig, size: int, epsilon: float, strategies: list[str], corpus_path: str | Path,
                   prebuilt: str | Path | None = None, schedules: dict[str, dict[str, Any]] | None = None):
    """The :class:`~toolkit.config.experiment.ExperimentConfig` of one run of the frontier (module docstring);
    ``schedules``: a DP strategy's own values (the search's choice) as ``training.strategy_schedules``, over the
    template's own ``training.strategy_schedules`` (values the config names, e.g. a search's result of another size);
    a run gets those of the strategies it trains."""
    import copy

    from toolkit.config.experiment import experiment_from_dict

    raw = copy.deepcopy(cfg.experiment)
    raw["name"] = f"{cfg.name}-size{size}-eps{'inf' if math.isinf(epsilon) else f'{epsilon:g}'}"
    raw.setdefault("corpus", {})
    raw["corpus"].update({"path": str(Path(corpus_path).resolve()), "n_individuals": int(size)})
    raw.setdefault("training", {})["strategies"] = list(strategies)
    if not math.isinf(epsilon):
        raw["training"]["dp"] = {**(raw["training"].get("dp") or {}), "epsilon": float(epsilon)}
    if prebuilt is not None:
        raw.setdefault("model", {})["prebuilt"] = str(Path(prebuilt).resolve())
    # a DP strategy's own values: the template's (checked by load_frontier), then the search's over them; each run
    # gets those of the strategies it trains
    given, searched = raw["training"].pop("strategy_schedules", None) or {}, schedules or {}
    own = {name: {**given.get(name, {}), **searched.get(name, {})}
           for name in strategies if name in given or name in searched}
    if own:
        raw["training"]["strategy_schedules"] = own
    return experiment_from_dict(raw, source=cfg.source)


def search_size(cfg: FrontierConfig, size: int, corpus: str | Path, plain_dir: Path, out: Path, *,
                progress: bool = False) -> dict[str, Any]:
    """The hyper-parameter search of ``size`` (:func:`toolkit.pipelines.hp_search.experiment_search`, at
    ``hp_search.epsilon``, from the base model of the size's ε = ∞ run in ``plain_dir``) into
    ``out/hp_search/size-N/``; its result and its compute seconds are added to ``out/hp_search.json``: the seconds
    every step of the search recorded when it ran (its ``step.json``), each step once — so a search resumed after a
    kill, or found cached, reports what it cost, not the last invocation's wall time. Returns ``{strategy: result}``."""
    from toolkit.config.experiment import resolved_settings
    from toolkit.io import atomic_write_json
    from toolkit.pipelines.cache import read_step
    from toolkit.pipelines.hp_search import experiment_search

    exp = experiment_for(cfg, size, cfg.hp_search.epsilon, cfg.searched, corpus)
    spec = resolved_settings(exp)["base"]
    if isinstance(spec, str):  # a pre-trained base: its name is its key, as the base step records it
        base, base_key = spec, {"external": spec}
    else:
        base = plain_dir / f"base_{cfg.kind}"
        step = read_step(base)
        if not step or step.get("status") != "done":
            raise ToolkitError(f"{cfg.source}: hp_search: the base model of size {size} is not built ({base})")
        base_key = step["key"]
    found = experiment_search(exp, cfg.hp_search, cfg.searched, base, base_key, out / "hp_search" / f"size-{size}",
                              progress=progress)
    path = out / "hp_search.json"
    saved = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    saved = {"search": {**cfg.hp_search.to_dict(), "strategies": cfg.searched,
                        "data": (f"the public reserve only ({exp.corpus.public_reserve} public individuals the base "
                                 "was not pre-trained on)" if exp.corpus.public_reserve else "the public split only")
                                + ": pseudo-members and validation individuals"
                                + (", and the subspace strategies' anchors apart from both"
                                   if cfg.hp_search.anchor_share else "")},
             "sizes": {**(saved.get("sizes") or {}), str(size): {n: r.to_dict() for n, r in found.items()}},
             "seconds": {**(saved.get("seconds") or {}),
                         str(size): _search_seconds(out / "hp_search" / f"size-{size}")}}
    atomic_write_json(saved, path)
    return found


def _search_seconds(folder: Path) -> float:
    """The compute seconds of a search's finished steps: the ``seconds`` of every ``step.json`` under ``folder`` whose
    status is done (a step is one folder, so each counts once)."""
    from toolkit.pipelines.cache import read_step

    steps = (read_step(f.parent) for f in sorted(folder.rglob("step.json")))
    return round(sum(float(s.get("seconds") or 0) for s in steps if s and s.get("status") == "done"), 1)


def _name_search(out: Path) -> None:
    """Add the search and every (size, strategy)'s chosen values from ``hp_search.json`` to ``frontier.json``."""
    from toolkit.io import atomic_write_json

    path, table = out / "hp_search.json", out / "frontier.json"
    if path.is_file() and table.is_file():
        search = json.loads(path.read_text(encoding="utf-8"))
        chosen = {size: {n: r["chosen"] for n, r in found.items()} for size, found in search["sizes"].items()}
        atomic_write_json({**json.loads(table.read_text(encoding="utf-8")),
                           "hp_search": {**search["search"], "file": "hp_search.json", "chosen": chosen}}, table)


def share_steps(src: str | Path, dst: str | Path, strategies) -> list[str]:
    """Copy the finished steps of run directory ``src`` that belong to no strategy (a step directory — one with a
    ``step.json`` whose status is done — none of whose path parts is one of ``strategies`` or ``runs``) into ``dst``
    where ``dst`` has nothing at that path yet. Returns the relative paths copied. Safe whatever they hold: a step is
    reused only when its key is the one the run derives (:func:`toolkit.pipelines.cache.is_current`)."""
    from toolkit.pipelines.cache import read_step

    src, dst = Path(src), Path(dst)
    owned = set(strategies) | {"runs"}
    copied: list[str] = []
    for step_json in sorted(src.rglob("step.json"), key=lambda p: (len(p.parts), p)):  # outer steps first
        folder = step_json.parent
        rel = folder.relative_to(src)
        if not rel.parts or owned & set(rel.parts) or any(rel.is_relative_to(c) for c in map(Path, copied)):
            continue
        info = read_step(folder)
        if not info or info.get("status") != "done" or (dst / rel).exists():
            continue
        shutil.copytree(folder, dst / rel)
        copied.append(str(rel))
    return copied


def run_dir_name(size: int, epsilon: float) -> str:
    return f"size-{size}/eps-{'inf' if math.isinf(epsilon) else f'{epsilon:g}'}"


def _compute_seconds(steps: list[dict], counted: set) -> float:
    """Compute seconds of a manifest's steps (:func:`collect_frontier`); ``counted``: step keys already counted."""
    total = 0.0
    for s in steps:
        key = s.get("key")
        if key is not None:
            if key in counted:
                continue
            counted.add(key)
        cached = s.get("status") == "cached"
        total += float((s.get("original_seconds") if cached else s.get("seconds")) or 0)
    return total


def collect_frontier(cfg: FrontierConfig, out_dir: str | Path) -> FrontierResult:
    """The table of what the runs of ``cfg`` in ``out_dir`` have finished so far, written (:meth:`FrontierResult.save`)
    without training anything (``toolkit frontier --table-only``): a model without a verdict is left out. The seconds
    are compute seconds from the runs' manifests: each step's own time, a step the last invocation found cached by the
    time it took when it ran (``original_seconds``), and a step shared between runs (the same key) once — so a
    frontier run in slices, resumed or re-tabled is timed as one run would be."""
    _one_base(cfg)
    out = Path(out_dir)
    points, runs, seconds, counted = [], [], {}, set()
    for size, eps, _ in cfg.runs():
        run_dir = out / run_dir_name(size, eps)
        found = points_from_dir(size, eps, run_dir) if run_dir.is_dir() else []
        if found:
            runs.append((size, eps, run_dir))
            points += found
            manifest = run_dir / "manifest.json"
            steps = json.loads(manifest.read_text(encoding="utf-8")).get("steps") or [] if manifest.is_file() else []
            seconds[run_dir_name(size, eps)] = round(_compute_seconds(steps, counted), 1)
    res = FrontierResult(frontier_table(points, cfg.plain), runs, seconds, cfg.plain)
    res.save(out)
    _name_search(out)
    return res


def run_frontier(cfg: FrontierConfig, out_dir: str | Path, *, corpus_path: str | Path | None = None,
                 progress: bool = True, echo: bool = True) -> FrontierResult:
    """Run every (size, ε) of ``cfg`` (:meth:`FrontierConfig.runs`) into ``out_dir`` and write the table
    (:meth:`FrontierResult.save`). ``corpus_path`` overrides the config's (the CLI passes the generated corpus).
    With ``hp_search``, each size's search (:func:`search_size`) runs after its ε = ∞ run (which builds the base)
    and before its DP runs, which then train the searched strategies with the chosen values."""
    from toolkit.pipelines.cache import read_step
    from toolkit.pipelines.lm_experiment import run_experiment

    _one_base(cfg)
    corpus = corpus_path or cfg.corpus_path
    if corpus is None:
        raise ToolkitError(f"{cfg.source}: no corpus: set corpus.path, or run `python -m toolkit frontier`, which "
                           f"generates one for corpus.generate_seed")
    out = Path(out_dir)
    bases = out / "bases"
    points: list[FrontierPoint] = []
    runs, seconds = [], {}
    plain_dirs: dict[int, Path] = {}
    everything = [s for _, _, chosen in cfg.runs() for s in chosen]
    schedules: dict[int, dict[str, dict[str, Any]]] = {}
    for size, eps, strategies in cfg.runs():
        run_dir = out / run_dir_name(size, eps)
        if math.isinf(eps):
            plain_dirs[size] = run_dir
        elif size in plain_dirs:
            share_steps(plain_dirs[size], run_dir, everything)
        if not math.isinf(eps) and cfg.searched and size not in schedules:
            found = search_size(cfg, size, corpus, plain_dirs[size], out, progress=progress)
            schedules[size] = {name: r.schedule() for name, r in found.items()}
        t0 = time.perf_counter()
        result = run_experiment(experiment_for(cfg, size, eps, strategies, corpus, prebuilt=bases,
                                               schedules=schedules.get(size)), run_dir, progress=progress, echo=echo)
        seconds[run_dir_name(size, eps)] = round(time.perf_counter() - t0, 1)
        base = run_dir / f"base_{cfg.kind}"
        step = read_step(base)
        if step and step.get("status") == "done" and step.get("key") and not (bases / step["key"]).exists():
            shutil.copytree(base, bases / step["key"])  # the next runs copy this base instead of pre-training
        runs.append((size, eps, run_dir))
        points += points_from_dir(size, eps, result.run_dir)
    res = FrontierResult(frontier_table(points, cfg.plain), runs, seconds, cfg.plain)
    res.save(out)
    _name_search(out)
    return res


__all__ = ["COLUMNS", "FrontierConfig", "FrontierPoint", "FrontierResult", "base_dir_name", "best_recipes",
           "collect_frontier", "experiment_for", "frontier_row", "frontier_table", "load_frontier", "points_from_dir",
           "run_dir_name", "run_frontier", "search_size", "share_steps", "with_base"]
