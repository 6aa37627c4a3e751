"""DP hyper-parameters chosen on the public split, never on the members (issue 35 item 3; docs/methods.md §3).

**Why.** Selecting a DP run's learning rate by the held-out utility of runs on the members is itself a computation on
the members: the chosen value, and the model trained with it, then depend on them beyond what the accountant counts
(Papernot & Steinke, ICLR 2022, "Hyperparameter Tuning with Renyi Differential Privacy", §1–2: tuning on the private
data leaks, and their bound needs every candidate run to be DP and the number of runs randomised). Here the search
touches no member at all, so it spends no privacy: the only things it takes from the experiment are public
individuals (the public reserve, or the base model's pre-training data; public by the threat model) and the member
count ``N`` (the corpus size the config names, which fixes the sampling rate; not a function of any member's data).

**Procedure** (:func:`search_strategy`, per DP strategy and corpus size):

1. The public individuals are split by the seed (:func:`split_public`): a share ``validation_share`` of them
   (shuffled with ``numpy.random.default_rng(seed)``) is the validation set ``V``; with ``anchor_share`` > 0 the next
   share of the same order is the anchor set ``A`` (the subspace strategies' public anchors, below), the rest the
   pseudo-members ``P``.
2. For every candidate ``h`` of the grid (the cartesian product of ``grid``'s lists, in the order written): the
   strategy's whole DP recipe of the target run — its TrainConfig at the search's ε, with δ, the privacy unit, the
   optimiser and the schedule unchanged — with ``h``'s values set, is trained on ``P`` from the same base
   model (a cached ``train`` step, :mod:`toolkit.pipelines.registry`: its key is a hash of the strategy, the config,
   the base's key and ``P``'s fingerprint).
3. The sampling rate: DP-SGD draws each unit with ``q = 1/⌈N/B⌉`` (:mod:`toolkit.training.dp`). With ``|P| = N'``
   units the search uses the batch size ``B'`` whose ``q' = 1/⌈N'/B'⌉`` is nearest to the target's ``q`` in ratio
   (:func:`matched_batch_size`), so σ — a function of (ε, δ, q, steps) — and the steps per epoch are the target's
   when ``q ≥ 1/N'``. When the member set is larger than ``P`` by more than the batch, ``q < 1/N'`` cannot be
   reached (at least one unit per expected batch): ``B' = 1``, ``q' = 1/N'``. In every case the expected batch
   ``N'·q'`` is smaller than the target's ``N·q`` when ``N' < N``, so each step's averaged gradient is noisier by
   about ``N·q / (N'·q')``; both figures are written with the result (``target``, ``search``).
4. Score: the next-word utility of the validation individuals' notes — the frontier's held-out utility
   (:func:`toolkit.metrics.probing.heldout_utility`: accuracy over the non-protected words of ``V``, protected
   positions from the identifier analysis of the public split, as the run's ``identifiers_all`` for the
   non-members), by the experiment's probe (:func:`toolkit.audit.probe_causal` / ``probe_masked``) of the last
   checkpoint. The base model is scored the same way (``base_utility``).
5. The choice is the grid's argmax of the validation utility (the first in grid order on a tie; a candidate whose
   validation notes give no scored word, ``nan``, ranks last). A choice on the grid's edge (the lowest or highest
   value of a key) is named as such (:meth:`SearchResult.at_edge`, ``"at_edge"`` in ``hp_search.json``, a line of
   the frontier command): the best value may lie beyond the grid.

**Ranges** (``configs/frontier.yaml``): Li, Tramèr, Liang & Hashimoto, ICLR 2022 ("Large language models can be
strong differentially private learners", and the authors' ``lxuechen/private-transformers``,
``examples/table2text/run.sh``) tune DP fine-tuning over grids of the learning rate and the batch size, with a small
clipping norm (C = 0.1, so nearly every per-example gradient is clipped and the update is a noisy mean of
directions), a constant rate, large batches (1,024: 16 × 64 accumulated) and fixed epochs (10–15); the script's rates
are 2·10⁻³ on E2E and 5·10⁻⁴ on DART ("lower learning rate for stability in large models"). The frontier's grid spans
the learning rate over a factor 30 around its shared 5·10⁻⁴ (half-decades); ``max_grad_norm``, ``batch_size`` (it
sets the target's ``q``, then matched as in 3) and ``epochs`` may be grid keys too. A candidate's ``epochs`` (a
whole number: it trains that many and is scored on its last checkpoint) is the number of passes at the same ε: σ is
calibrated for its steps, so more epochs mean more, noisier steps, the trade-off the search then scores; the chosen
number reaches the run as the strategy's own ``training.strategy_schedules.<name>.epochs``.

**Which public individuals.** With ``corpus.public_reserve`` the search's individuals are the reserve: public
patients held back from the base model's pre-training (:attr:`~toolkit.pipelines.data.ExperimentData.tuning_public`),
so fine-tuning on ``P`` teaches the base what fine-tuning on members does, and ``V`` gains as non-members would.
Without a reserve they are the base's own public split: the pseudo-members and the validation individuals were both
in its pre-training data, so fine-tuning on ``P`` gains less on ``V`` than fine-tuning on fresh members gains on
fresh non-members: the search's differences are compressed (≤ 0.0015 between harmless rates, docs/results.md,
levers), and its strongest signal is the damage a rate does (the utility of ``V`` falling below the base's when the
noisy updates move the weights too far), which is the failure the search exists to avoid (CHANGELOG.md, `fade1ed`:
PDP-SGD below its base at 5·10⁻⁴); that and the noisier steps of 3 push the search towards smaller rates.
**The subspace strategies' anchors** are never ``V`` (whose own gradients in the subspace would aim the candidates at
the notes they are scored on). With ``anchor_share: 0`` (the default, as in the searches shipped before the option)
they are the pseudo-members ``P`` themselves, so a candidate's projected signal is larger than the members' is in the
target run, whose anchors are other individuals (the reserve; the members are not among them): measured, this favours
aggressive recipes (results.md, learning-rate search: the search chose 1.5·10⁻⁴ and 32 epochs, 16.1% of the gain in
the run, against 19.4% for 5·10⁻⁵ and 32 epochs). With ``anchor_share`` > 0 (a three-way split) the anchors are ``A``,
individuals neither trained on nor scored, as in the run (measured, the same section: on the same grid it orders the
four recipes as their runs do in five pairs of six, the two-way search in one): the price is fewer pseudo-members (a
smaller expected batch at the matched rate, 3) and fewer anchor examples (``m`` is at most ``A``'s chunks). Every
searched strategy trains on the same ``P``, so the candidates of a search stay comparable (docs/methods.md §3,
*Limits*).
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from toolkit.corpus import Corpus
from toolkit.errors import ToolkitError

#: the grid's keys: a TrainConfig field, or DPConfig's clipping norm
GRID_KEYS = ("learning_rate", "max_grad_norm", "batch_size", "epochs")
#: the grid's keys whose values are whole numbers
INTEGER_KEYS = ("batch_size", "epochs")
_BLOCK_KEYS = {"grid", "strategies", "validation_share", "anchor_share", "epsilon"}


@dataclass(frozen=True)
class HpSearchConfig:
    """The frontier's ``hp_search:`` block: ``grid`` (key → candidate values, keys of :data:`GRID_KEYS`), the DP
    ``strategies`` searched (empty: every DP strategy of the frontier), ``validation_share`` of the public
    individuals, the ``epsilon`` the candidates are trained at (the chosen values serve every ε of the frontier),
    ``anchor_share`` of the public individuals set apart as the subspace strategies' anchors (0: the pseudo-members
    are the anchors; module docstring)."""

    grid: tuple[tuple[str, tuple[float, ...]], ...]
    strategies: tuple[str, ...] = ()
    validation_share: float = 0.3
    epsilon: float = 8.0
    anchor_share: float = 0.0

    def candidates(self) -> list[dict[str, float]]:
        """The grid's points, in the order written (the last key varies fastest)."""
        keys = [k for k, _ in self.grid]
        return [dict(zip(keys, values)) for values in itertools.product(*(v for _, v in self.grid))]

    def to_dict(self) -> dict[str, Any]:
        return {"grid": {k: list(v) for k, v in self.grid}, "strategies": list(self.strategies),
                "validation_share": self.validation_share, "anchor_share": self.anchor_share, "epsilon": self.epsilon}


def hp_search_config(raw: Any, source: str, dp_strategies: list[str]) -> HpSearchConfig:
    """Check the ``hp_search:`` block of ``source``; every problem one :class:`ToolkitError` naming file and key."""
    where = f"{source}: hp_search"
    if not isinstance(raw, dict):
        raise ToolkitError(f"{where}: must be a mapping of {', '.join(sorted(_BLOCK_KEYS))}")
    unknown = sorted(set(raw) - _BLOCK_KEYS)
    if unknown:
        raise ToolkitError(f"{where}: unknown key {unknown[0]!r}; expected {', '.join(sorted(_BLOCK_KEYS))}")
    grid = raw.get("grid")
    if not isinstance(grid, dict) or not grid:
        raise ToolkitError(f"{where}.grid: must be a non-empty mapping of {', '.join(GRID_KEYS)} to lists")
    out = []
    for key, values in grid.items():
        if key not in GRID_KEYS:
            raise ToolkitError(f"{where}.grid: unknown key {key!r}; expected {', '.join(GRID_KEYS)}")
        integer = key in INTEGER_KEYS
        ok = isinstance(values, list) and values and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 and math.isfinite(v)
            and (not integer or float(v).is_integer()) for v in values)
        if not ok or len(set(values)) != len(values):
            hint = " (YAML reads 5e-5 as text: write 5.0e-5)" if isinstance(values, list) and any(
                isinstance(v, str) for v in values) else ""
            raise ToolkitError(f"{where}.grid.{key}: must be a non-empty list of distinct "
                               f"{'integers ≥ 1' if integer else 'numbers > 0'}, got {values!r}{hint}")
        out.append((key, tuple(int(v) if integer else float(v) for v in values)))
    strategies = raw.get("strategies", [])
    if not isinstance(strategies, list) or any(s not in dp_strategies for s in strategies):
        bad = strategies if not isinstance(strategies, list) else [s for s in strategies if s not in dp_strategies]
        raise ToolkitError(f"{where}.strategies: {bad!r} is not among the frontier's DP strategies "
                           f"({', '.join(dp_strategies) or 'none'})")
    share = raw.get("validation_share", 0.3)
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share < 1:
        raise ToolkitError(f"{where}.validation_share: must be a number strictly between 0 and 1, got {share!r}")
    anchors = raw.get("anchor_share", 0.0)
    if isinstance(anchors, bool) or not isinstance(anchors, (int, float)) or not 0 <= anchors < 1 - share:
        raise ToolkitError(f"{where}.anchor_share: must be a number ≥ 0 and below 1 − validation_share "
                           f"({1 - share:g}), got {anchors!r}")
    eps = raw.get("epsilon", 8.0)
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0 < eps < math.inf:
        raise ToolkitError(f"{where}.epsilon: must be a finite number > 0, got {eps!r}")
    return HpSearchConfig(tuple(out), tuple(strategies), float(share), float(eps), float(anchors))


def split_public(public: Corpus, share: float, seed: int, anchor_share: float = 0.0) -> tuple[Corpus, Corpus, Corpus]:
    """``(pseudo-members, validation, anchors)``: the public individuals (sorted) shuffled by ``seed``; the first
    ``round(share·n)`` (at least 1) the validation set, the next ``round(anchor_share·n)`` (at least 1 when
    ``anchor_share`` > 0) the anchors, the rest (at least 2) the pseudo-members. With ``anchor_share = 0`` the
    anchors are the pseudo-members (the same object)."""
    import numpy as np

    people = sorted(public.person_ids)
    n_val = max(1, round(share * len(people)))
    n_anchor = max(1, round(anchor_share * len(people))) if anchor_share > 0 else 0
    if len(people) - n_val - n_anchor < 2:
        raise ToolkitError(f"the public split has {len(people)} individuals: too few to hold out "
                           f"{share:g} of them for validation{f' and {anchor_share:g} as anchors' if n_anchor else ''}"
                           " and train on at least 2 (hp_search.validation_share, hp_search.anchor_share)")
    order = np.random.default_rng(seed).permutation(len(people))
    validation = {people[i] for i in order[:n_val]}
    anchors = {people[i] for i in order[n_val:n_val + n_anchor]}
    pseudo = public.filter(person_ids=[p for p in people if p not in validation and p not in anchors])
    return (pseudo, public.filter(person_ids=[p for p in people if p in validation]),
            public.filter(person_ids=[p for p in people if p in anchors]) if n_anchor else pseudo)


def matched_batch_size(n_target: int, batch_target: int, n_search: int) -> int:
    """The batch size ``B'`` over ``n_search`` units whose sampling rate ``1/⌈n_search/B'⌉`` is nearest in ratio to
    the target's ``1/⌈n_target/batch_target⌉`` (module docstring, 3; the smallest ``B'`` on a tie)."""
    steps = math.ceil(n_target / batch_target)
    return min(range(1, n_search + 1), key=lambda b: abs(math.log(math.ceil(n_search / b) / steps)))


def _rates(n_units: int, batch: int) -> dict[str, Any]:
    steps = math.ceil(n_units / batch)
    return {"n_units": n_units, "batch_size": batch, "sample_rate": 1 / steps, "steps_per_epoch": steps,
            "expected_batch": n_units / steps}


def _train_values(values: dict[str, float]) -> dict[str, Any]:
    """A grid point's TrainConfig fields: every key but DPConfig's clipping norm, ``epochs`` as the checkpoint list
    (one: the candidate trains that many passes)."""
    return {k: [int(v)] if k == "epochs" else v for k, v in values.items() if k != "max_grad_norm"}


def candidate_config(target, candidate: dict[str, float], n_target: int, n_search: int):
    """The TrainConfig of one candidate: ``target`` (the strategy's DP recipe) with the candidate's values and the
    matched batch size (:func:`matched_batch_size`). Returns ``(search config, target config)``: the latter is what
    the frontier's run would train with if the candidate were chosen."""
    values = _train_values(candidate)
    dp = replace(target.dp, max_grad_norm=candidate["max_grad_norm"]) if "max_grad_norm" in candidate else target.dp
    chosen = replace(target, **values, dp=dp)
    return replace(chosen, batch_size=matched_batch_size(n_target, chosen.batch_size, n_search)), chosen


def validation_utility(checkpoint: str | Path, validation: Corpus, positions, out_dir: str | Path, *,
                       max_length: int, batch_size: int, seed: int) -> dict[str, Any]:
    """The held-out utility (:func:`toolkit.metrics.probing.heldout_utility`) of ``checkpoint`` on the
    ``validation`` individuals' notes, by the experiment's probe; written to ``out_dir/metrics.json``."""
    from toolkit.audit import probe_causal, probe_masked
    from toolkit.audit.losses import load_audit_model
    from toolkit.io import atomic_write_json, make_private_dir
    from toolkit.metrics.probing import heldout_utility
    from toolkit.models import model_kind

    model, tokenizer = load_audit_model(checkpoint)  # as the run's audit step loads a checkpoint
    kw = {"seed": seed} if model_kind(model) == "mlm" else {}
    probe = probe_masked if model_kind(model) == "mlm" else probe_causal
    preds = probe(model, tokenizer, validation, positions=positions, max_length=max_length, batch_size=batch_size,
                  progress=False, **kw)
    rows = preds[~preds["protected"].astype(bool)]
    res = {"validation_utility": heldout_utility(preds, validation.person_ids), "n_words": int(len(rows)),
           "n_individuals": len(validation.person_ids)}
    atomic_write_json(res, make_private_dir(out_dir) / "metrics.json")
    return res


@dataclass
class SearchResult:
    """One strategy's search: the chosen values, every candidate's validation utility (``scores``: the candidate's
    values, ``validation_utility``, its folder), the base model's, and the sampling of the target and the search."""

    strategy: str
    chosen: dict[str, float]
    scores: list[dict[str, Any]]
    base_utility: float
    target: dict[str, Any] = field(default_factory=dict)
    search: dict[str, Any] = field(default_factory=dict)

    def schedule(self) -> dict[str, Any]:
        """The chosen values as ``training.strategy_schedules.<strategy>`` takes them (the frontier's DP runs)."""
        out: dict[str, Any] = _train_values(self.chosen)
        if "max_grad_norm" in self.chosen:
            out["dp"] = {"max_grad_norm": self.chosen["max_grad_norm"]}
        return out

    def at_edge(self) -> dict[str, str]:
        """The grid keys whose chosen value is the lowest or highest of the values searched (``{"learning_rate":
        "lowest"}``): the optimum may lie beyond the grid, so the choice is a bound, not a maximum — widen the grid
        that way. A key searched at one value is never at an edge."""
        edge = {}
        for k, v in self.chosen.items():
            tried = sorted({float(s[k]) for s in self.scores if k in s})
            if len(tried) > 1 and float(v) in (tried[0], tried[-1]):
                edge[k] = "lowest" if float(v) == tried[0] else "highest"
        return edge

    def to_dict(self) -> dict[str, Any]:
        return {"strategy": self.strategy, "chosen": self.chosen, "at_edge": self.at_edge(),
                "base_validation_utility": self.base_utility, "scores": self.scores, "target": self.target,
                "search": self.search}


def _label(candidate: dict[str, float]) -> str:
    short = {"learning_rate": "lr", "max_grad_norm": "C", "batch_size": "B", "epochs": "E"}
    return "_".join(f"{short[k]}{v:g}" for k, v in candidate.items())


def search_strategy(strategy: str, target, n_target: int, public: Corpus, base, base_key, search: HpSearchConfig,
                    out_dir: str | Path, *, identifiers: dict[str, Any], probe: dict[str, Any], seed: int,
                    progress: bool = False) -> SearchResult:
    """The search of one DP ``strategy`` (module docstring): ``target`` its TrainConfig in the frontier's run at
    the search's ε, ``n_target`` the member units (individuals) of that run, ``public`` the public split, ``base``
    / ``base_key`` the base model and its step key, ``identifiers`` the experiment's identifier settings
    (:func:`~toolkit.pipelines.registry.identifier_settings`), ``probe`` its probe's ``max_length`` and
    ``batch_size``. Every step is cached in ``out_dir`` (identifiers, each candidate's ``train`` and score)."""
    from toolkit.identifiers import load_identifiers
    from toolkit.pipelines import steps
    from toolkit.pipelines.registry import IdentifiersInputs, ProbeInputs, TrainInputs, key, run_step
    from toolkit.strategies import get_strategy
    from toolkit.training import checkpoint_dirs, corpus_fingerprint, train

    out = Path(out_dir)
    pseudo, validation, anchors = split_public(public, search.validation_share, seed, search.anchor_share)
    fp = {"pseudo": corpus_fingerprint(pseudo), "validation": corpus_fingerprint(validation),
          "anchors": corpus_fingerprint(anchors)}
    ids, id_keys = {}, {}
    for part, docs in (("pseudo_members", pseudo), ("public", public)):
        inputs = IdentifiersInputs.of(identifiers, corpus_fingerprint(docs))
        d = out.parent / f"identifiers_{part}"
        ids[part] = run_step(None, "identifiers", inputs, lambda d=d, docs=docs: steps.identifiers(docs, d,
                                                                                                  **identifiers),
                             lambda d=d: load_identifiers(d), out_dir=d, name=f"identifiers_{part}")
        id_keys[part] = key("identifiers", inputs, f"identifiers_{part}")
    strat = get_strategy(strategy)
    n_search = len(pseudo.person_ids)

    def score(model_key, checkpoint: Path, d: Path, epoch: int | None) -> float:
        inputs = ProbeInputs(checkpoint="base" if epoch is None else f"epoch-{epoch}", model=str(model_key),
                             identifiers=id_keys["public"], documents=fp["validation"], base_vocabulary=None,
                             window=probe["max_length"], batch_size=probe["batch_size"], seed=seed)
        res = run_step(None, "probe", inputs,
                       lambda: validation_utility(checkpoint, validation, ids["public"]["positions"], d, seed=seed,
                                                  **probe),
                       lambda: json.loads((d / "metrics.json").read_text(encoding="utf-8")), out_dir=d)
        return float(res["validation_utility"])

    base_utility = score(base_key, Path(base), out.parent / "score_base", None)
    scores = []
    for candidate in search.candidates():
        cfg, _ = candidate_config(target, candidate, n_target, n_search)
        d = out / _label(candidate)
        # a subspace strategy's anchors: A (or P with anchor_share 0), never the validation individuals it is scored on
        inputs = TrainInputs.of(strat, cfg, base_key, fp["pseudo"], id_keys["pseudo_members"], fp["anchors"])
        kw = dict(corpus=pseudo, base=base, run_dir=d / "train", strategy=strategy, config=cfg,
                  positions=ids["pseudo_members"]["positions"], spans=ids["pseudo_members"]["spans"],
                  progress=progress, **({"public": anchors} if strat.subspace else {}))
        run_step(None, "train", inputs, lambda kw=kw: train(**kw), out_dir=d / "train", name=f"train/{strategy}")
        epoch, path = checkpoint_dirs(d / "train")[-1]
        scores.append({**candidate, "validation_utility": score(key("train", inputs, f"train/{strategy}"), path,
                                                                d / "score", epoch),
                       "folder": str(d.relative_to(out.parent))})
    def rank(i: int) -> tuple[float, int]:  # the first maximum; a candidate without a scored word (nan) last
        u = scores[i]["validation_utility"]
        return (-math.inf if math.isnan(u) else u, -i)

    best = max(range(len(scores)), key=rank)
    chosen_values = {k: scores[best][k] for k, _ in search.grid}
    _, target_chosen = candidate_config(target, chosen_values, n_target, n_search)
    return SearchResult(strategy, chosen_values, scores, base_utility,
                        target=_rates(n_target, target_chosen.batch_size),
                        search=_rates(n_search, matched_batch_size(n_target, target_chosen.batch_size, n_search)))


def experiment_search(cfg, search: HpSearchConfig, strategies: list[str], base, base_key, out_dir: str | Path, *,
                      progress: bool = False) -> dict[str, SearchResult]:
    """:func:`search_strategy` of every one of ``strategies`` for the experiment ``cfg`` (an
    :class:`~toolkit.config.experiment.ExperimentConfig` at the search's ε: its public split, member count, DP
    recipe, identifier and probe settings) into ``out_dir/<strategy>/``. The members' documents are loaded with the
    corpus and only counted."""
    from toolkit.config.experiment import resolved_settings
    from toolkit.pipelines.data import load_data
    from toolkit.pipelines.registry import identifier_settings

    data = load_data(cfg)
    if data.public is None:
        raise ToolkitError(f"{cfg.source}: hp_search needs the public split (corpus.public_split)")
    public = data.tuning_public  # the public reserve when the corpus has one: individuals the base has not seen
    settings = resolved_settings(cfg)
    if settings["dp_finetune"].dp.unit != "individual":
        raise ToolkitError(f"{cfg.source}: hp_search matches the sampling rate of individuals; dp.unit is "
                           f"{settings['dp_finetune'].dp.unit!r}")
    n_target = len(data.members.person_ids)  # a count (the size the config names), not a member's data
    probe = {"max_length": cfg.audit.max_length, "batch_size": cfg.audit.batch_size}
    return {name: search_strategy(name, settings["dp_finetune"], n_target, public, base, base_key, search,
                                  Path(out_dir) / name, identifiers=identifier_settings(cfg.identifiers),
                                  probe=probe, seed=cfg.seed, progress=progress)
            for name in strategies}


__all__ = ["GRID_KEYS", "HpSearchConfig", "SearchResult", "candidate_config", "experiment_search", "hp_search_config",
           "matched_batch_size", "search_strategy", "split_public", "validation_utility"]
