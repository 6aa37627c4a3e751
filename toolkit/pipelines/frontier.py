"""The privacy–utility frontier (issue 27): every strategy at every corpus size and DP budget, in one table.

``python -m toolkit frontier configs/frontier.yaml --out DIR`` runs one experiment (:func:`run_experiment`) per
corpus size and ε, all from the config's ``experiment:`` template with a few keys set per run:

* ``corpus.path`` (the frontier's corpus) and ``corpus.n_individuals`` (the size: members and non-members each);
* ε = ∞: ``training.strategies`` = the strategies without DP (``clm``, ``ppclm``, ``ppclm_surrogate`` …);
* a finite ε: the DP strategies (``clm_dp``, ``ppclm_surrogate_dp`` …) with ``training.dp.epsilon`` = ε, the target
  ε for which Opacus calibrates the noise over the whole training (:mod:`toolkit.training.dp`; the unit is the
  individual unless the template says otherwise). A strategy without DP is the same model at every ε, so it is
  trained once, at ∞.

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
held-out utility relative to ``clm`` (``mlm`` for masked models) of the same size — the ≥ 0.9× condition of issue
27 — and utility on the training notes beside it, the strongest membership attack (its AUC, and the largest TPR at
1% FPR over the battery's attacks), PII inference top-1 and its chance level, the largest canary exposure (bits),
the one-run audit's empirical ε lower bound beside the accountant's ε, and the verdict (methods.md §4, §10–11).
"""

from __future__ import annotations

import json
import math
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from toolkit.errors import ToolkitError

#: the columns of the frontier table, in order
COLUMNS = ("size", "strategy", "epsilon", "dp", "epoch", "heldout_utility", "heldout_utility_vs_plain", "utility",
           "utility_vs_plain", "strongest_attack", "attack_auc", "attack_tpr_at_1pct_fpr", "pii_top1", "pii_chance",
           "canary_max_exposure", "empirical_epsilon", "accountant_epsilon", "verdict", "run_dir")
_KEYS = {"name", "description", "sizes", "epsilons", "strategies", "corpus", "experiment"}


@dataclass(frozen=True)
class FrontierConfig:
    """``configs/frontier.yaml``: the sizes (individuals among the members, as many non-members), the target ε's
    (``inf``: no DP), the strategies, the corpus (``path`` of an existing one, or ``generate_seed`` for the sample
    generator, used by the CLI) and the experiment template (an experiment config's keys)."""

    name: str
    sizes: tuple[int, ...]
    epsilons: tuple[float, ...]
    strategies: tuple[str, ...]
    experiment: dict[str, Any]
    corpus_path: str | None = None
    generate_seed: int | None = None
    description: str = ""
    source: str = "<config>"

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
    cfg = FrontierConfig(name=str(raw.get("name") or p.stem), sizes=ints("sizes"), epsilons=epsilons,
                         strategies=tuple(strategies), experiment=experiment, corpus_path=path_value,
                         generate_seed=corpus.get("generate_seed"), description=str(raw.get("description") or ""),
                         source=str(p))
    wrong = [s for s in strategies if STRATEGIES[s].kind != cfg.kind]
    if wrong:
        raise ToolkitError(f"{p}: strategies: {wrong[0]} trains a {STRATEGIES[wrong[0]].kind} model, "
                           f"experiment.model.kind is {cfg.kind}")
    if cfg.plain not in strategies or not any(math.isinf(e) for e in epsilons):
        raise ToolkitError(f"{p}: the frontier needs {cfg.plain} (the utility reference) and .inf among the "
                           f"epsilons")
    return cfg


def experiment_for(cfg: FrontierConfig, size: int, epsilon: float, strategies: list[str], corpus_path: str | Path,
                   prebuilt: str | Path | None = None):
    """The :class:`~toolkit.config.experiment.ExperimentConfig` of one run of the frontier (module docstring)."""
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
    return experiment_from_dict(raw, source=cfg.source)


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


# -- the table -----------------------------------------------------------------------------------------------------

@dataclass
class FrontierPoint:
    """One audited model of the frontier: the figures the table reads, as the run wrote them (``battery``:
    ``attacks.json``; ``identifiers``: ``identifiers.json``; ``verdict``: ``verdict.json``; ``dp``: the ``"dp"``
    block of the training's ``run.json``, None without DP)."""

    size: int
    epsilon: float
    strategy: str
    epoch: int
    utility: float | None
    heldout_utility: float | None
    battery: dict[str, Any] = field(default_factory=dict)
    identifiers: dict[str, Any] = field(default_factory=dict)
    verdict: dict[str, Any] = field(default_factory=dict)
    dp: dict[str, Any] | None = None
    run_dir: str = ""


def points_from_run(size: int, epsilon: float, result) -> list[FrontierPoint]:
    """The trained models of one :class:`~toolkit.pipelines.lm_experiment.RunResult` (last checkpoints)."""
    out = []
    for (name, epoch), att in result.attacks.items():
        if name == "base":
            continue
        m = (result.audits.get((name, epoch)) or {}).get("metrics") or {}
        run_json = Path(result.run_dir) / "runs" / name / "run.json"
        dp = json.loads(run_json.read_text(encoding="utf-8")).get("dp") if run_json.is_file() else None
        out.append(FrontierPoint(size=size, epsilon=epsilon, strategy=name, epoch=int(epoch),
                                 utility=m.get("utility"), heldout_utility=m.get("heldout_utility"),
                                 battery=att.get("attacks") or {}, identifiers=att.get("identifiers") or {},
                                 verdict=att.get("verdict") or {}, dp=dp, run_dir=str(result.run_dir)))
    return out


def _num(v) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def _one_run(p: FrontierPoint) -> dict[str, Any]:
    """The one-run audit's block (``epsilon_lower_bound`` …) wherever the run wrote it, else {}."""
    for where in (p.battery, p.identifiers, p.verdict):
        found = where.get("one_run") if isinstance(where, dict) else None
        if isinstance(found, dict):
            return found
    return {}


def frontier_row(p: FrontierPoint) -> dict[str, Any]:
    """The table's figures of one model (the ratios to plain fine-tuning are :func:`frontier_table`'s)."""
    attacks = p.battery.get("attacks") or {}
    best = p.battery.get("strongest") or (max(attacks, key=lambda a: attacks[a].get("auc") or 0) if attacks else None)
    tprs = [_num((a.get("tpr_at_fpr") or {}).get("0.01")) for a in attacks.values()]
    tprs = [t for t in tprs if t is not None]
    pii = (p.identifiers.get("pii_inference") or {}).get("overall") or {}
    by_repeats = (p.identifiers.get("canaries") or {}).get("by_repeats") or {}
    exposures = [_num(v.get("max")) for v in by_repeats.values()]
    exposures = [e for e in exposures if e is not None]
    one = _one_run(p)
    return {"size": p.size, "strategy": p.strategy, "epsilon": p.epsilon, "dp": p.dp is not None, "epoch": p.epoch,
            "heldout_utility": _num(p.heldout_utility), "utility": _num(p.utility), "strongest_attack": best,
            "attack_auc": _num(attacks[best].get("auc")) if best in attacks else None,
            "attack_tpr_at_1pct_fpr": max(tprs) if tprs else None,
            "pii_top1": _num(pii.get("top1")), "pii_chance": _num(pii.get("chance")),
            "canary_max_exposure": max(exposures) if exposures else None,
            "empirical_epsilon": _num(one.get("epsilon_lower_bound")),
            "accountant_epsilon": _num((p.dp or {}).get("spent_epsilon")),
            "verdict": p.verdict.get("level"), "run_dir": p.run_dir}


def frontier_table(points: list[FrontierPoint], plain: str = "clm") -> pd.DataFrame:
    """One row per model (columns :data:`COLUMNS`), sorted by size, strategy, ε; ``*_vs_plain``: the model's
    utility divided by that of ``plain`` (``clm`` / ``mlm``) at the same size (None where ``plain`` is missing)."""
    rows = [frontier_row(p) for p in points]
    table = pd.DataFrame(rows, columns=[c for c in COLUMNS if c not in ("heldout_utility_vs_plain",
                                                                         "utility_vs_plain")])
    for col in ("heldout_utility", "utility"):
        ref = {r["size"]: r[col] for r in rows if r["strategy"] == plain and r[col]}
        table[f"{col}_vs_plain"] = [r[col] / ref[r["size"]] if r[col] is not None and r["size"] in ref else None
                                    for r in rows]
    if not len(table):
        return table.reindex(columns=list(COLUMNS))
    return table[list(COLUMNS)].sort_values(["size", "strategy", "epsilon"], ignore_index=True)


def best_recipes(table: pd.DataFrame, *, min_utility: float = 0.9) -> dict[int, dict[str, Any]]:
    """Per size, the green model with the highest held-out utility ratio reaching ``min_utility`` (``found``), else
    the model closest to it: the green one with the highest ratio, or, without a green, the one whose strongest
    attack has the lowest AUC (``found: False``)."""
    out = {}
    for size, g in table.groupby("size"):
        green = g[g["verdict"] == "green"]
        ok = green[green["heldout_utility_vs_plain"].fillna(0) >= min_utility]
        if len(ok):
            r, found = ok.sort_values("heldout_utility_vs_plain", ascending=False).iloc[0], True
        elif len(green):
            r, found = green.sort_values("heldout_utility_vs_plain", ascending=False).iloc[0], False
        else:
            r, found = g.sort_values("attack_auc").iloc[0], False
        out[int(size)] = {"found": found, "strategy": r["strategy"], "epsilon": float(r["epsilon"]),
                          "heldout_utility_vs_plain": _num(r["heldout_utility_vs_plain"]),
                          "attack_auc": _num(r["attack_auc"]), "verdict": r["verdict"]}
    return out


@dataclass
class FrontierResult:
    """What :func:`run_frontier` returns: the table, the run directory of every (size, ε), the seconds each took."""

    table: pd.DataFrame
    runs: list[tuple[int, float, Path]]
    seconds: dict[str, float]
    plain: str = "clm"

    def save(self, out_dir: str | Path) -> dict[str, Path]:
        """``frontier.csv`` and ``frontier.json`` (records, ε = ∞ written as null, with the best recipe per size
        and the seconds of every run) into ``out_dir``."""
        from toolkit.io import atomic_write_json, atomic_write_text

        out = Path(out_dir)
        records = json.loads(self.table.to_json(orient="records"))  # NaN → null
        for r, eps in zip(records, self.table["epsilon"]):
            r["epsilon"] = None if math.isinf(eps) else float(eps)
        best = best_recipes(self.table) if len(self.table) else {}
        return {"csv": atomic_write_text(self.table.to_csv(index=False), out / "frontier.csv"),
                "json": atomic_write_json({"plain": self.plain, "rows": records,
                                           "best": {str(k): v for k, v in best.items()},
                                           "seconds": self.seconds}, out / "frontier.json")}


def run_frontier(cfg: FrontierConfig, out_dir: str | Path, *, corpus_path: str | Path | None = None,
                 progress: bool = True, echo: bool = True) -> FrontierResult:
    """Run every (size, ε) of ``cfg`` (:meth:`FrontierConfig.runs`) into ``out_dir`` and write the table
    (:meth:`FrontierResult.save`). ``corpus_path`` overrides the config's (the CLI passes the generated corpus)."""
    from toolkit.pipelines.cache import read_step
    from toolkit.pipelines.lm_experiment import run_experiment

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
    for size, eps, strategies in cfg.runs():
        run_dir = out / run_dir_name(size, eps)
        if math.isinf(eps):
            plain_dirs[size] = run_dir
        elif size in plain_dirs:
            share_steps(plain_dirs[size], run_dir, everything)
        t0 = time.perf_counter()
        result = run_experiment(experiment_for(cfg, size, eps, strategies, corpus, prebuilt=bases), run_dir,
                                progress=progress, echo=echo)
        seconds[run_dir_name(size, eps)] = round(time.perf_counter() - t0, 1)
        base = run_dir / f"base_{cfg.kind}"
        step = read_step(base)
        if step and step.get("status") == "done" and step.get("key") and not (bases / step["key"]).exists():
            shutil.copytree(base, bases / step["key"])  # the next runs copy this base instead of pre-training
        runs.append((size, eps, run_dir))
        points += points_from_run(size, eps, result)
    res = FrontierResult(frontier_table(points, cfg.plain), runs, seconds, cfg.plain)
    res.save(out)
    return res


__all__ = ["COLUMNS", "FrontierConfig", "FrontierPoint", "FrontierResult", "best_recipes", "experiment_for",
           "frontier_row", "frontier_table", "load_frontier", "points_from_run", "run_dir_name", "run_frontier",
           "share_steps"]
