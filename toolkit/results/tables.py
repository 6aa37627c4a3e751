"""The results tables of a run, computed from what its steps return or what its directory holds (the report,
notebooks 00/02/03/06 and ``toolkit run``'s summary read them; nothing here trains, probes or writes).

* :func:`results_table` — one row per audited checkpoint: utility, privacy variants, leaks, the count attack's AUC
  and TPR at FPR (methods.md §4–5);
* :func:`protection_table` / :func:`protection_findings` — what each strategy protects against the attacks
  (methods.md §10–11), and the sentences read off it;
* the closing findings, verdict and papers' metrics side by side: :mod:`toolkit.results.evidence`;
* :func:`runs_table` — checkpoints, training time and spent ε of each training run (its ``run.json``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from toolkit.results.layout import epoch_text


def results_table(audits: dict[tuple[str, int], dict[str, Any]]) -> pd.DataFrame:
    """One row per (strategy, epoch) audit: utility, privacy variants, leaks and the attack's AUC / TPR@FPR."""
    rows = []
    for (name, epoch), a in audits.items():
        m, r = a["metrics"], a["roc"]
        rows.append({"strategy": name, "epoch": epoch, "utility": m["utility"],
                     "heldout_utility": m.get("heldout_utility"), "token_accuracy": m.get("token_accuracy"),
                     "privacy": m["privacy"],
                     "novel_privacy": m.get("novel_privacy"), "direct_privacy": m["direct_privacy"],
                     "indirect_privacy": m["indirect_privacy"], "n_leaked": m["n_leaked"], "mia_auc": r["auc"],
                     "tpr@1%": r["tpr_at_fpr"]["0.01"], "tpr@10%": r["tpr_at_fpr"]["0.1"]})
    frame = pd.DataFrame(rows)
    # metrics no audit has are left out; the epoch stays, unknown (None) for audited models
    return frame.loc[:, frame.notna().any() | (frame.columns == "epoch")]


def protection_table(audits: dict[tuple[str, int], dict[str, Any]],
                     attacks: dict[tuple[str, int], dict[str, Any]]) -> pd.DataFrame:
    """What each strategy protects: one row per attacked model (the base model, each strategy's last checkpoint) with
    the papers' privacy (methods.md §4), novel privacy, utility on the training notes and on held-out ones (§4), the
    strongest membership attack and its AUC (§10),
    PII inference top-1 with its chance level and the reference (base) model's top-1 (§10), the largest canary
    exposure in bits (when the run inserted canaries) and the verdict (§11). Figures only, no identifier."""
    rows = []
    for (name, epoch), att in attacks.items():
        m = (audits.get((name, epoch)) or {}).get("metrics") or {}
        battery = att.get("attacks") or {}
        best = battery.get("strongest")
        pii = ((att.get("identifiers") or {}).get("pii_inference") or {}).get("overall") or {}
        can = (att.get("identifiers") or {}).get("canaries") or {}
        exposures = [v.get("max") for v in (can.get("by_repeats") or {}).values() if v.get("max") is not None]
        rows.append({"model": name if name == "base" else f"{name} ({epoch_text(epoch)})", "strategy": name,
                     "privacy": m.get("privacy"), "novel privacy": m.get("novel_privacy"),
                     "utility": m.get("utility"), "held-out utility": m.get("heldout_utility"),
                     "strongest membership attack": best,
                     "membership AUC": battery["attacks"][best]["auc"] if best else None,
                     "PII inference top-1": pii.get("top1"), "PII chance": pii.get("chance"),
                     "PII reference top-1": pii.get("reference_top1"),
                     "canary max exposure (bits)": max(exposures) if exposures else None,
                     "verdict": (att.get("verdict") or {}).get("level")})
    return pd.DataFrame(rows).set_index("model") if rows else pd.DataFrame()


def protection_findings(table: pd.DataFrame) -> list[str]:
    """Sentences read off :func:`protection_table`, computed for this run (plain text: the report lists them, a
    notebook joins them into bullets): each model's PII inference top-1 against chance (within 2× chance or not,
    methods.md §10), and each strategy that rewrites the input (``*_surrogate``, ``*_category``, ``*_pseudo``)
    against the PP strategy of its kind (``ppclm`` / ``ppmlm``): utility on the training notes and on held-out notes
    as a ratio of PP's (§4)."""
    from toolkit.strategies import STRATEGIES

    if not len(table):
        return []

    def num(v) -> float | None:
        return None if v is None or pd.isna(v) else float(v)

    def pii(r) -> str:
        top1, chance = num(r.get("PII inference top-1")), num(r.get("PII chance"))
        if top1 is None or not chance:
            return "PII inference not measured"
        ratio = top1 / chance
        return (f"PII inference top-1 {top1:.3f} = {ratio:.1f}× chance ({chance:.3f}), "
                + ("within" if ratio <= 2 else "above") + " twice chance")

    lines = [f"{label}: {pii(r)}" for label, r in table.iterrows()]
    last = {r["strategy"]: (label, r) for label, r in table.iterrows()}
    for name, (label, r) in last.items():
        strat = STRATEGIES.get(name)
        pp = "ppclm" if strat is not None and strat.kind == "clm" else "ppmlm"
        if strat is None or strat.text == "original" or pp not in last:
            continue
        ratios = []
        for col, where in (("utility", "training notes"), ("held-out utility", "held-out notes")):
            mine, theirs = num(r.get(col)), num(last[pp][1].get(col))
            if mine is not None and theirs:
                ratios.append(f"{mine:.3f} vs {theirs:.3f} on {where} ({mine / theirs:.2f}×)")
        if ratios:
            lines.append(f"{label} against {last[pp][0]}: utility " + "; ".join(ratios))
    return lines


def runs_table(runs: dict[str, list[tuple[int, Path]]], run_root: str | Path) -> pd.DataFrame:
    """Checkpoints, training seconds, tokens/s and (DP) spent ε of each run, from its ``run.json``."""
    rows = {}
    for name, ckpts in runs.items():
        info = json.loads((Path(run_root) / name / "run.json").read_text())
        rows[name] = {"checkpoints": ", ".join(str(e) for e, _ in ckpts), "seconds": info.get("seconds"),
                      "tokens/s": info.get("tokens_per_second"),
                      "spent ε": (info.get("dp") or {}).get("spent_epsilon")}
    return pd.DataFrame(rows).T


__all__ = ["protection_findings", "protection_table", "results_table", "runs_table"]
