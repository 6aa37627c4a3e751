"""The privacy–utility frontier's table (issue 27): one row per audited model of a frontier run.

:func:`frontier_table` builds it from the figures every run wrote (:class:`FrontierPoint`); :class:`FrontierResult`
saves it as ``frontier.csv`` / ``frontier.json`` and :func:`load_frontier_result` reads a saved one back (the report
and notebook 07 read frontiers only through it). The runs themselves: :mod:`toolkit.pipelines.frontier`.

Columns (:data:`COLUMNS`): the share of plain fine-tuning's held-out gain over the untouched base model that the
model kept (:func:`gain_retained`, the frontier's measure; with the base's held-out utility and strongest attack AUC
at that size beside it), held-out utility relative to ``clm`` (``mlm`` for masked models) of the same size beside
it, utility on the training notes beside them, the strongest membership attack (its AUC, and the largest TPR at 1%
FPR over the battery's attacks), PII inference top-1 and its chance level, the largest canary exposure (bits), the
one-run audit's empirical ε lower bound beside the accountant's ε, a DP row's per-step noise-to-signal ratio
(:func:`noise_to_signal`: how much of the ambient dimension its noise pays for), and the verdict with its deciding
rule and the rules that judged it (``verdict_rules``: the verdict's ``rules_version``,
:data:`toolkit.audit.verdict.RULES_VERSION`; None for a verdict written before verdicts recorded it — a shipped table
of such rows says under which rules they were judged in ``verdicts_judged``) (methods.md §4, §10–11). The frontier's goal (:data:`GAIN_GOAL`): a model green under every attack that keeps
at least half of plain fine-tuning's held-out gain; :func:`best_recipes` names, per size, the green model that keeps
the most.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from toolkit.audit import files
from toolkit.errors import ToolkitError

#: the columns of the frontier table, in order
COLUMNS = ("size", "strategy", "epsilon", "dp", "epoch", "heldout_utility", "heldout_utility_vs_plain",
           "heldout_gain_retained", "heldout_gain_retained_low", "heldout_gain_retained_high", "base_heldout_utility",
           "base_attack_auc", "utility", "utility_vs_plain", "strongest_attack", "attack_auc", "attack_tpr_at_1pct_fpr",
           "pii_top1", "pii_chance", "canary_max_exposure", "empirical_epsilon", "accountant_epsilon",
           "noise_to_signal", "verdict", "verdict_rule", "verdict_rules", "run_dir")


@dataclass
class FrontierPoint:
    """One audited model of the frontier: the figures the table reads, as the run wrote them (``battery``:
    ``attacks.json``; ``identifiers``: ``identifiers.json``; ``verdict``: ``verdict.json``; ``dp``: the ``"dp"``
    block of the training's ``run.json``, None without DP; ``base_*``: the untouched base model's held-out utility and
    strongest attack AUC in the same run, None where the run did not audit it)."""

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
    base_heldout_utility: float | None = None
    base_attack_auc: float | None = None


def points_from_dir(size: int, epsilon: float, run_dir: str | Path) -> list[FrontierPoint]:
    """The audited models of one finished (or partly finished) run directory, read through
    :class:`~toolkit.results.layout.RunLayout`: every strategy's last checkpoint that has a verdict, with its §4
    metrics (``audit/``), attack files (``attacks/``) and training record's DP block (``runs/<strategy>/run.json``).
    The base model is not a row of the frontier: its held-out utility (``audit/base/metrics.json``) and strongest
    attack AUC (``attacks/base/attacks.json``) go with every point (:func:`gain_retained`'s ``u_base``, the figure's
    base point); a model without ``verdict.json`` (not finished) is left out."""
    from toolkit.results.layout import BASE, RunLayout, read_json

    layout = RunLayout(Path(run_dir))
    base_metrics = layout.audit(BASE) / "metrics.json"
    base_heldout = _num((read_json(base_metrics) if base_metrics.is_file() else {}).get("heldout_utility"))
    base_attacks_file = layout.attacks(BASE) / files.ATTACKS
    base_battery = read_json(base_attacks_file) if base_attacks_file.is_file() else {}
    base_auc = _strongest(base_battery)[1]
    last: dict[str, tuple[int, Path]] = {}
    for name, epoch, folder in layout.attack_dirs():
        if name != BASE and epoch is not None and (folder / files.VERDICT).is_file():
            if name not in last or epoch > last[name][0]:
                last[name] = (epoch, folder)
    out = []
    for name, (epoch, folder) in sorted(last.items()):
        metrics_file = layout.audit(name, epoch) / "metrics.json"
        m = read_json(metrics_file) if metrics_file.is_file() else {}
        run_json = layout.train(name) / "run.json"
        dp = read_json(run_json).get("dp") if run_json.is_file() else None
        out.append(FrontierPoint(size=size, epsilon=epsilon, strategy=name, epoch=int(epoch),
                                 utility=m.get("utility"), heldout_utility=m.get("heldout_utility"),
                                 battery=read_json(folder / files.ATTACKS),
                                 identifiers=read_json(folder / files.IDENTIFIERS),
                                 verdict=read_json(folder / files.VERDICT), dp=dp, run_dir=str(run_dir),
                                 base_heldout_utility=base_heldout, base_attack_auc=base_auc))
    return out


def epsilon_text(eps: float | None) -> str:
    """ε as the tables and sentences show it: ``∞`` for no DP (``inf``, or None as ``frontier.json`` stores it)."""
    return "∞" if eps is None or math.isinf(float(eps)) else f"{float(eps):g}"


def _num(v) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def _strongest(battery: dict[str, Any]) -> tuple[str | None, float | None]:
    """The strongest attack of an ``attacks.json`` (its ``strongest``, else the highest AUC) and its AUC."""
    attacks = (battery or {}).get("attacks") or {}
    best = battery.get("strongest") if battery else None
    best = best or (max(attacks, key=lambda a: attacks[a].get("auc") or 0) if attacks else None)
    return best, (_num(attacks[best].get("auc")) if best in attacks else None)


#: the frontier's goal: a green model keeping at least this share of plain fine-tuning's held-out gain over the base
#: (gain retained ≥ 50%: issue 35's "moonshot", docs/methods.md §4 *Gain retained*; before 2026-12-03 the goal was
#: "≥ 0.9× plain's held-out utility", a ratio that starts from the base, not from zero)
GAIN_GOAL = 0.5

#: why :func:`gain_retained` is undefined when plain fine-tuning gained nothing over the base model
GAIN_UNDEFINED = ("undefined: plain fine-tuning's held-out utility is not above the base model's (or not "
                  "significantly, where the runs' predictions are at hand), so there is no gain to retain")


def gain_retained(u: float | None, u_base: float | None, u_plain: float | None) -> float:
    """The share of plain fine-tuning's held-out gain over the untouched base model that a model kept:

    .. math:: G = \\frac{U - U_{\\text{base}}}{U_{\\text{plain}} - U_{\\text{base}}}

    with ``U`` the model's held-out utility (methods.md §4), ``U_base`` the base model's before any fine-tuning and
    ``U_plain`` plain fine-tuning's (``clm`` / ``mlm``), all three at the same number of individuals. 1 (100%): as
    much as plain fine-tuning learnt; 0: nothing beyond the base; below 0: worse than the base.

    Why beside the ratio to plain (U / U_plain): the ratio starts from the base, not from zero. At 1,000 individuals
    the base is already at 0.651 / 0.789 = 0.83× plain, so a DP model at 0.665 reads 0.84× — close to 0.9× —
    while it kept (0.665 − 0.651) / (0.789 − 0.651) = 10% of what fine-tuning learnt.

    Its interval (the table's ``heldout_gain_retained_low`` / ``_high``) needs the three models' per-word predictions:
    :func:`toolkit.metrics.probing.heldout_gain_interval`, a paired bootstrap over the held-out individuals, which
    :func:`frontier_table` runs where the runs' ``audit/<model>/mia_predictions.parquet`` are at hand. Undefined —
    ``nan``, never a division error — where ``U_plain ≤ U_base`` (:data:`GAIN_UNDEFINED`: no gain to retain, and a
    negative denominator would read a model above the base as a negative share) or any of the three is missing
    (None / nan). :func:`frontier_table` also leaves it undefined where plain's gain is positive but not significant
    (the interval's bootstrap, :func:`toolkit.metrics.probing.heldout_gain_interval`).
    """
    u, u_base, u_plain = _num(u), _num(u_base), _num(u_plain)
    if u is None or u_base is None or u_plain is None or not u_plain > u_base:
        return math.nan
    return (u - u_base) / (u_plain - u_base)


def noise_to_signal(dp: dict[str, Any] | None) -> float:
    """A DP training's per-step noise norm over the largest norm its signal can have, from the run's ``"dp"`` block
    (``training_log.json`` / ``run.json``; :mod:`toolkit.training.dp`, :mod:`toolkit.training.subspace`):

    .. math:: \\rho = \\frac{\\sigma_r \\sqrt{k\\,C_0^2 + (D - k)\\,C_1^2}}{\\mathbb{E}[B]\\,\\sqrt{C_0^2 + C_1^2}}

    The released sum of a step is Σ_{i∈B} clip(g_i) + z: the signal's norm is at most E[B]·C (E[B] =
    ``expected_batch_size``, the expected number of individuals drawn), the noise z has D = ``noised_parameters``
    Gaussian coordinates and norm ≈ σ_r·C·√D (σ_r = ``release_noise_multiplier`` where recorded, else σ =
    ``noise_multiplier``). DP-SGD and DP-LoRA: C_1 = 0 and k = D, so ρ = σ·√D / E[B] — the ambient dimension's price
    (docs/results.md, 2026-11-27: σ = 0.644, D = 941,568, E[B] = 15.9 give ρ ≈ 39). PDP-SGD: D = k (the subspace's
    rank), ρ = σ·√k / E[B]. GEP: the embedding's k coordinates clipped to C_0 = C, the residual's D − k = P to C_1 =
    ``residual_clip``, both released with σ_r = √2·σ, the signal bounded by E[B]·√(C_0² + C_1²) (the two parts are
    orthogonal).

    A lower bound of the true ratio, not an estimate of it: members' clipped gradients point in different directions,
    so their sum is shorter than E[B]·C. ρ ≫ 1: a step's update is mostly noise, and fine-tuning can keep little of
    its gain (issue 35). ``nan`` without DP or where the block lacks a figure.
    """
    dp = dp or {}
    sigma = _num(dp.get("release_noise_multiplier", dp.get("noise_multiplier")))
    c0, batch, d = _num(dp.get("max_grad_norm")), _num(dp.get("expected_batch_size")), _num(dp.get("noised_parameters"))
    if sigma is None or c0 is None or batch is None or d is None or batch <= 0 or c0 <= 0:
        return math.nan
    c1 = _num(dp.get("residual_clip")) or 0.0
    k = _num(dp.get("subspace_rank")) if c1 else d
    if k is None or k > d:
        return math.nan
    return sigma * math.sqrt(k * c0 ** 2 + (d - k) * c1 ** 2) / (batch * math.sqrt(c0 ** 2 + c1 ** 2))


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
    best, auc = _strongest(p.battery)
    tprs = [_num((a.get("tpr_at_fpr") or {}).get("0.01")) for a in attacks.values()]
    tprs = [t for t in tprs if t is not None]
    pii = (p.identifiers.get("pii_inference") or {}).get("overall") or {}
    by_repeats = (p.identifiers.get("canaries") or {}).get("by_repeats") or {}
    exposures = [_num(v.get("max")) for v in by_repeats.values()]
    exposures = [e for e in exposures if e is not None]
    one = _one_run(p)
    return {"size": p.size, "strategy": p.strategy, "epsilon": p.epsilon, "dp": p.dp is not None, "epoch": p.epoch,
            "heldout_utility": _num(p.heldout_utility), "utility": _num(p.utility), "strongest_attack": best,
            "attack_auc": auc, "base_heldout_utility": _num(p.base_heldout_utility),
            "base_attack_auc": _num(p.base_attack_auc),
            "attack_tpr_at_1pct_fpr": max(tprs) if tprs else None,
            "pii_top1": _num(pii.get("top1")), "pii_chance": _num(pii.get("chance")),
            "canary_max_exposure": max(exposures) if exposures else None,
            "empirical_epsilon": _num(one.get("epsilon_lower_bound")),
            "accountant_epsilon": _num((p.dp or {}).get("spent_epsilon")),
            "noise_to_signal": noise_to_signal(p.dp) if p.dp is not None else None,
            "verdict": p.verdict.get("level"), "verdict_rule": p.verdict.get("rule"),
            "verdict_rules": p.verdict.get("rules_version"), "run_dir": p.run_dir}


def frontier_table(points: list[FrontierPoint], plain: str = "clm") -> pd.DataFrame:
    """One row per model (columns :data:`COLUMNS`), sorted by size, strategy, ε; ``*_vs_plain``: the model's
    utility divided by that of ``plain`` (``clm`` / ``mlm``) at the same size (None where ``plain`` is missing);
    ``base_*``: the base model's of the same size (as ``plain``'s run recorded it, else the first run of that size
    that did); ``heldout_gain_retained``: :func:`gain_retained` of the row's held-out utility (nan where the base's or
    ``plain``'s is missing, or equal)."""
    rows = [frontier_row(p) for p in points]
    derived = ("heldout_utility_vs_plain", "utility_vs_plain", "heldout_gain_retained", "heldout_gain_retained_low",
               "heldout_gain_retained_high")
    table = pd.DataFrame(rows, columns=[c for c in COLUMNS if c not in derived])
    for col in ("heldout_utility", "utility"):
        ref = {r["size"]: r[col] for r in rows if r["strategy"] == plain and r[col]}
        table[f"{col}_vs_plain"] = [r[col] / ref[r["size"]] if r[col] is not None and r["size"] in ref else None
                                    for r in rows]
    for col in ("base_heldout_utility", "base_attack_auc"):
        ordered = sorted(rows, key=lambda r: r["strategy"] != plain)  # plain's run first
        ref = {}
        for r in ordered:
            if r[col] is not None:
                ref.setdefault(r["size"], r[col])
        table[col] = [ref.get(r["size"]) for r in rows]
    plain_heldout = {r["size"]: r["heldout_utility"] for r in rows if r["strategy"] == plain}
    table["heldout_gain_retained"] = [gain_retained(r["heldout_utility"], b, plain_heldout.get(r["size"]))
                                      for r, b in zip(rows, table["base_heldout_utility"])]
    intervals, unsure = _gain_intervals(points, plain)
    table["heldout_gain_retained_low"] = [lo for lo, _ in intervals]
    table["heldout_gain_retained_high"] = [hi for _, hi in intervals]
    table.loc[table["size"].isin(unsure), "heldout_gain_retained"] = math.nan  # plain's gain not significant
    if not len(table):
        return table.reindex(columns=list(COLUMNS))
    return table[list(COLUMNS)].sort_values(["size", "strategy", "epsilon"], ignore_index=True)


#: the resamples of the gain retained's interval (:func:`toolkit.metrics.probing.heldout_gain_interval`)
GAIN_BOOTSTRAP = 2000


def _gain_intervals(points: list[FrontierPoint], plain: str) -> tuple[list[tuple[float, float]], set[int]]:
    """Per point, the 95% interval of its gain retained (:func:`toolkit.metrics.probing.heldout_gain_interval`) from
    the held-out predictions of the model, the base model audited in its run, and ``plain`` at the same size; ``nan``
    where a file is missing (a table read from points without run directories, a run without a base audit) or where
    the gain is not estimable. Each run's non-members are the people of its ``mia_predictions`` who are not in its
    member ``predictions`` (as the audit counts them, :func:`toolkit.pipelines.steps.audit_checkpoint`). Also the
    sizes whose gain retained is not estimable: plain's gain over the base, in plain's run, is not above 0 at 95%
    (``heldout_gain_interval`` with plain as the model returns nan exactly then)."""
    from functools import cache

    from toolkit.metrics.probing import heldout_gain_interval
    from toolkit.results.layout import BASE, RunLayout

    read = cache(pd.read_parquet)  # plain's and a run's base predictions serve every point of their size: read once

    def files(p: FrontierPoint, name: str, epoch: int | None) -> tuple[Path, Path]:
        d = RunLayout(Path(p.run_dir)).audit(name, epoch)
        return d / "mia_predictions.parquet", d / "predictions.parquet"

    def interval(p: FrontierPoint, ref: FrontierPoint) -> tuple[float, float, float] | None:
        """heldout_gain_interval of ``p`` against ``ref`` (plain) and ``p``'s run's base; None without the files."""
        if not p.run_dir or not ref.run_dir:
            return None
        paths = [files(p, p.strategy, p.epoch), files(p, BASE, None), files(ref, plain, ref.epoch)]
        if not all(m.is_file() for m, _ in paths) or not paths[0][1].is_file():
            return None
        model, base, plain_preds = (read(m) for m, _ in paths)
        members = set(pd.read_parquet(paths[0][1], columns=["person_id"])["person_id"])
        held = set(model["person_id"]) - members
        return heldout_gain_interval(model, base, plain_preds, held, n_bootstrap=GAIN_BOOTSTRAP, seed=0)

    plain_at = {p.size: p for p in points if p.strategy == plain}
    unsure = set()
    for size, ref in plain_at.items():  # plain's own gain: G = 1 wherever it is estimable
        own = interval(ref, ref)
        if own is not None and math.isnan(own[0]):
            unsure.add(int(size))
    out = []
    for p in points:
        ref = plain_at.get(p.size)
        got = None if p.strategy == plain or ref is None else interval(p, ref)  # plain: 100% by definition
        out.append((math.nan, math.nan) if got is None else got[1:])
    return out, unsure


def best_recipes(table: pd.DataFrame, *, min_gain: float = GAIN_GOAL) -> dict[int, dict[str, Any]]:
    """Per size, the green model that kept the largest share of plain fine-tuning's held-out gain
    (``heldout_gain_retained``, :func:`gain_retained`), ``found`` where that share reaches ``min_gain``
    (:data:`GAIN_GOAL`). Ties, and a size where the gain retained is undefined (plain fine-tuning gained nothing, or
    nothing significant, over the base: ``gain_defined`` False, never ``found``), are ranked by held-out utility.
    Without a green model: the one whose strongest attack has the lowest AUC (``found`` False). Each entry: the
    model's strategy, ε, gain retained with its 95% interval (None where not at hand), held-out utility, ratio to
    plain, strongest attack AUC, verdict and deciding rule."""
    out = {}
    for size, g in table.groupby("size"):
        gains = pd.to_numeric(g["heldout_gain_retained"], errors="coerce")
        ranked = g.assign(_g=gains.fillna(-math.inf), _u=pd.to_numeric(g["heldout_utility"], errors="coerce")
                          .fillna(-math.inf), _a=pd.to_numeric(g["attack_auc"], errors="coerce").fillna(math.inf))
        green = ranked[ranked["verdict"] == "green"]
        if len(green):
            r = green.sort_values(["_g", "_u"], ascending=False, kind="stable").iloc[0]
        else:
            r = ranked.sort_values("_a", kind="stable").iloc[0]
        gain = _num(r["heldout_gain_retained"])
        out[int(size)] = {"found": bool(len(green)) and gain is not None and gain >= min_gain,
                          "strategy": r["strategy"], "epsilon": float(r["epsilon"]),
                          "heldout_gain_retained": gain, "gain_defined": bool(gains.notna().any()),
                          "heldout_gain_retained_low": _num(r.get("heldout_gain_retained_low")),
                          "heldout_gain_retained_high": _num(r.get("heldout_gain_retained_high")),
                          "heldout_utility": _num(r["heldout_utility"]),
                          "heldout_utility_vs_plain": _num(r["heldout_utility_vs_plain"]),
                          "attack_auc": _num(r["attack_auc"]), "verdict": r["verdict"],
                          "verdict_rule": r.get("verdict_rule")}
    return out


#: the columns of the base-strength table (:func:`bases_table`), in order
BASES_COLUMNS = ("n_public", "size", "base_heldout_utility", "plain_heldout_utility", "plain_gain", "best_private",
                 "best_epsilon", "best_green", "best_gain_retained", "best_vs_plain", "best_attack_auc",
                 "best_verdict")


def bases_table(results: dict[int, pd.DataFrame], plain: str = "clm") -> pd.DataFrame:
    """The frontiers of several base strengths side by side (issue 35 item 4): ``results`` maps the public split's
    size a base was pre-trained on (``n_public``) to that frontier's table (:func:`frontier_table`). One row per
    ``(n_public, size)``: the base's held-out utility, plain fine-tuning's (``plain``) and its gain over the base
    (``plain_gain`` = U_plain − U_base), and the best private recipe — of the DP rows, the green one that kept the
    most of that gain (:func:`gain_retained`), else, without a green DP row, the DP row that kept the most
    (``best_green`` False) — with its ε, gain retained, ratio to plain, strongest attack AUC and verdict. Where the
    gain retained is undefined (plain's gain over the base not significant: ``best_gain_retained`` nan) the best
    is the one with the highest held-out utility."""
    rows = []
    for n_public, table in sorted(results.items()):
        for size, g in table.groupby("size"):
            private = g[g["dp"].astype(bool)]
            green = private[private["verdict"] == "green"]
            pool = green if len(green) else private
            ranked = pool.assign(_g=pool["heldout_gain_retained"].astype(float).fillna(-math.inf),
                                 _u=pool["heldout_utility"].astype(float).fillna(-math.inf))
            best = ranked.sort_values(["_g", "_u"], ascending=False, kind="stable").iloc[0] if len(ranked) else None
            known = g["base_heldout_utility"].dropna()
            u_base = _num(known.iloc[0]) if len(known) else None
            plain_rows = g[g["strategy"] == plain]["heldout_utility"].dropna()
            u_plain = _num(plain_rows.iloc[0]) if len(plain_rows) else None
            rows.append({"n_public": int(n_public), "size": int(size), "base_heldout_utility": u_base,
                         "plain_heldout_utility": u_plain,
                         "plain_gain": None if u_base is None or u_plain is None else u_plain - u_base,
                         "best_private": None if best is None else best["strategy"],
                         "best_epsilon": None if best is None else float(best["epsilon"]),
                         "best_green": bool(len(green)),
                         "best_gain_retained": None if best is None else _num(best["heldout_gain_retained"]),
                         "best_vs_plain": None if best is None else _num(best["heldout_utility_vs_plain"]),
                         "best_attack_auc": None if best is None else _num(best["attack_auc"]),
                         "best_verdict": None if best is None else best["verdict"]})
    return pd.DataFrame(rows, columns=list(BASES_COLUMNS))


def save_bases_table(table: pd.DataFrame, out_dir: str | Path) -> dict[str, Path]:
    """``bases.csv`` and ``bases.json`` (records) of :func:`bases_table` into ``out_dir``."""
    from toolkit.io import atomic_write_json, atomic_write_text

    out = Path(out_dir)
    return {"csv": atomic_write_text(table.to_csv(index=False), out / "bases.csv"),
            "json": atomic_write_json({"rows": json.loads(table.to_json(orient="records"))}, out / "bases.json")}


@dataclass
class FrontierResult:
    """What :func:`run_frontier` returns: the table, the run directory of every (size, ε), the seconds each took."""

    table: pd.DataFrame
    runs: list[tuple[int, float, Path]]
    seconds: dict[str, float]
    plain: str = "clm"
    best: dict[int, dict[str, Any]] = field(default_factory=dict)
    #: a table whose rows do not record their rules (``verdict_rules``) says under which rules they were judged:
    #: ``rules`` (words), ``rules_version`` (date), ``rules_commit``, ``recomputable``, ``missing`` (what re-judging
    #: would need), ``rule_words`` (a deciding rule whose meaning has changed since: its words then) and ``checked``
    #: (the rules, commit and date it was last compared with, and how many rows could be re-judged)
    verdicts_judged: dict[str, Any] | None = None

    def save(self, out_dir: str | Path) -> dict[str, Path]:
        """``frontier.csv`` and ``frontier.json`` (records, ε = ∞ written as null, with the best recipe per size
        and the seconds of every run) into ``out_dir``."""
        from toolkit.io import atomic_write_json, atomic_write_text

        out = Path(out_dir)
        table = self.table.copy()
        table["run_dir"] = [_relative(r, out) for r in table["run_dir"]]  # no machine path in a shippable table
        records = json.loads(table.to_json(orient="records"))  # NaN → null
        for r, eps in zip(records, self.table["epsilon"]):
            r["epsilon"] = None if math.isinf(eps) else float(eps)
        best = best_recipes(self.table) if len(self.table) else {}  # under the current goal, never a stored one
        return {"csv": atomic_write_text(table.to_csv(index=False), out / "frontier.csv"),
                "json": atomic_write_json({"plain": self.plain, "rows": records,
                                           "best": {str(k): v for k, v in best.items()},
                                           "seconds": self.seconds}
                                          | ({"verdicts_judged": self.verdicts_judged} if self.verdicts_judged
                                             else {}), out / "frontier.json")}


def _relative(path, base: Path):
    """``path`` relative to ``base`` when it lies inside it (``size-100/eps-8``), else as it is."""
    try:
        return str(Path(path).resolve().relative_to(base.resolve()))
    except (TypeError, ValueError):
        return path


def load_frontier_result(directory: str | Path) -> FrontierResult:
    """Read what :meth:`FrontierResult.save` wrote into ``directory`` (``frontier.json``; ε = null read as ∞; the best
    recipe per size recomputed by :func:`best_recipes`)."""
    path = Path(directory) / "frontier.json"
    if not path.is_file():
        raise ToolkitError(f"{path}: missing (expected the output of `python -m toolkit frontier`)")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        rows = raw["rows"]
        table = pd.DataFrame(rows, columns=list(COLUMNS))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ToolkitError(f"{path}: not a frontier table ({type(exc).__name__})") from None
    table["epsilon"] = [math.inf if r.get("epsilon") is None else float(r["epsilon"]) for r in rows]
    runs = []
    # the best recipe per size is read off the rows under the current goal (GAIN_GOAL), not the stored "best":
    # a table saved before 2026-12-03 named it by the retired ratio to plain
    return FrontierResult(table, runs, dict(raw.get("seconds") or {}), str(raw.get("plain") or "clm"),
                          best=best_recipes(table) if len(table) else {},
                          verdicts_judged=raw.get("verdicts_judged"))


__all__ = ["BASES_COLUMNS", "COLUMNS", "GAIN_BOOTSTRAP", "GAIN_GOAL", "GAIN_UNDEFINED", "FrontierPoint", "FrontierResult",
           "bases_table", "best_recipes", "epsilon_text", "frontier_row", "frontier_table", "gain_retained",
           "load_frontier_result", "noise_to_signal", "points_from_dir", "save_bases_table"]
