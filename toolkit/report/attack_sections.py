"""The report's "Attacks" section: the membership-inference battery and the identifier attacks of every audited model
(``attacks.json``, ``roc.json``, ``identifiers.json`` of :mod:`toolkit.results.attack_files`).

For a run: the strongest attack per model (bars in the strategy's colour) and the AUC of every attack at every
checkpoint; then, for the base model and each strategy's last checkpoint, one ROC figure with every attack (log-log,
chance line), the table of AUC with its 95% CI and TPR at 0.1% / 1% / 10% FPR (``n/r`` where the number of
non-members cannot resolve the rate), the strongest attack named, PII inference top-1 against chance and the
reference model per category, memorisation of identifier types and canary exposure per repeat count.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from toolkit.plots import attacks as aplots
from toolkit.results.collect import RunData
from toolkit.report.formatting import block, figure, fmt, table

INTRO = ("Each attack gives every person a score from the model alone; people whose notes trained the model "
         "(members) should not score higher than people it never saw (non-members). AUC: the chance that a random "
         "member scores above a random non-member (0.5 = a coin toss, 1 = always). TPR at a false-positive rate: the "
         "share of members found when that share of non-members is wrongly accused; the low rates are what matter "
         "for an individual. The papers' own attack (predicted rare words) is one of them.")
ABSENT = ("No attack results in this run (no attacks/ folder: the run was made before the attack battery, or "
          "without it). The count-based attack of the papers is in the membership-inference section.")


def _detectable(models: dict) -> dict[str, float]:
    return {label: m["verdict"]["detectable_auc"] for label, m in models.items()
            if (m.get("verdict") or {}).get("detectable_auc") is not None}


def scoring_line(att: dict) -> str:
    """The method line: how the token losses behind the scores were computed (``attacks.json``'s ``scoring``)."""
    sc = att.get("scoring") or {}
    if sc.get("kind") == "mlm" and sc.get("estimator") == "budgeted":
        return (f" Token losses: budgeted pseudo-log-likelihood, {sc.get('positions')} positions per window (seeded, "
                "the same for the reference model; methods.md §10).")
    if sc.get("kind") == "mlm" and sc.get("estimator") == "strided":
        return (f" Token losses: strided pseudo-log-likelihood, every position scored from {sc.get('copies')} masked "
                "copies per window (every K-th position masked together; an approximation of exact PLL whose "
                "agreement with it is measured in docs/performance.md; methods.md §10).")
    if sc.get("kind") == "mlm":
        return " Token losses: exact pseudo-log-likelihood (every position of the window)."
    return " Token losses: exact log-likelihood." if sc.get("kind") == "clm" else ""


def one_run_line(one: dict) -> str:
    """The one-run audit (``attacks.json``'s ``one_run``, methods.md §10) in one sentence: the ε lower bound, its
    confidence and δ, the guesses, and the accountant's ε it is compared with."""
    acc = one.get("accountant_epsilon")
    return (f"One-run audit (Steinke et al. 2023): ε ≥ {one['epsilon_lower_bound']:.2f} at "
            f"{one.get('confidence', 0.95):.0%} confidence (δ = {one.get('delta', 0):.0e}), from "
            f"{one.get('n_correct')} right of {one.get('n_guesses')} membership guesses on {one.get('m')} canaries "
            f"({one.get('n_included')} inserted, each with probability ½; {one.get('attack')} score). "
            + (f"The DP accountant's ε is {acc:.2f}: a lower bound above it would be a broken DP implementation."
               if acc is not None else "No DP claim: the bound is what the audit proves about an inserted record."))


def _model_blocks(label: str, m: dict) -> list[dict]:
    blocks = [block("h", label)]
    att, roc = m.get("attacks"), m.get("roc")
    if roc:
        blocks.append(block("figure", figure(aplots.attack_roc(roc, f"{label}: every membership attack (ROC)",
                                                               attacks=att)),
                            "Log-log axes: the low false-positive rates, where an individual is singled out, take "
                            "most of the width; a rate of 0 is drawn at half the smallest measurable one. The thin "
                            "dashed diagonal is chance; a curve on it is an attack that finds nothing."))
    if att and att.get("attacks"):
        n_non = att.get("n_nonmembers")
        strongest = att.get("strongest")
        best = (att["attacks"].get(strongest) or {}) if strongest else {}
        caption = (f"{fmt(att.get('n_members'))} members and {fmt(n_non)} non-members "
                   f"({att.get('unit', 'individual')}s). Strongest attack: {aplots.attack_name(strongest)}"
                   + (f" (AUC {best['auc']:.3f})" if best.get("auc") is not None else "") + ". "
                   + (f"n/r: a false-positive rate below 1/{n_non} cannot be measured with {n_non} non-members."
                      if n_non else "") + scoring_line(att))
        blocks.append(block("table", table(aplots.attacks_table(att)), caption))
    ids = m.get("identifiers") or {}
    pii = aplots.pii_table(ids.get("pii_inference") or {})
    if pii is not None:
        ref = Path(str(ids["pii_inference"].get("reference") or "not measured")).name  # a model folder: its name
        blocks.append(block("table", table(pii),
                            "PII inference: the share of blanked-out identifiers the attacker guesses right "
                            f"(top-1) among {ids['pii_inference'].get('n_candidates', '?')} candidates, against "
                            f"chance and against the same attack on the reference model ({ref})."))
    adv = aplots.pii_advantage_table(ids.get("pii_inference") or {})
    if adv is not None:
        n_public = ids["pii_inference"].get("n_public") or 0
        blocks.append(block("table", table(adv),
                            "PII inference on the members' notes against the same attack on the non-members' notes "
                            "(the verdict's test: a permutation over individuals). Private: an identifier of one "
                            "individual; shared: of several (clinicians, organisations); "
                            f"{n_public} occurrence(s) of identifiers named in the public split left out (public)."))
    mem = aplots.memorisation_table(ids.get("memorisation") or {})
    if mem is not None:
        blocks.append(block("table", table(mem),
                            "Memorisation of identifier types: log-likelihood of the identifier under this model "
                            "minus under the base model (> 0: more likely after fine-tuning)."))
    can = aplots.canary_table(ids.get("canaries") or {})
    if can is not None:
        blocks.append(block("table", table(can, digits=2),
                            "Canary exposure in bits: how much more likely the model finds a made-up record's number "
                            "than random numbers; about 1 bit is chance, the maximum is log2 |R|."))
    if (att or {}).get("one_run"):
        blocks.append(block("p", one_run_line(att["one_run"])))
    if len(blocks) == 1:
        blocks.append(block("absent", "No attack table for this model (attacks.json missing)."))
    return blocks


def _protection(run: RunData, models: dict) -> pd.DataFrame | None:
    """:func:`toolkit.results.tables.protection_table` of a run's attacked models (None for fewer than two)."""
    from toolkit.results.tables import protection_table

    keys = {(m["strategy"], m["epoch"]): m for m in models.values() if m.get("strategy")}
    if len(keys) < 2:
        return None
    audits = {k: {"metrics": (run.audits.get(k) or {}).get("metrics") or {}} for k in keys}
    return protection_table(audits, keys)


def attacks_section(run: RunData) -> list[dict]:
    """The blocks of the "Attacks" section of one run (absent for runs made before the battery)."""
    every = run.attack_models(last_only=False)
    if not any(m.get("attacks") or m.get("roc") for m in every.values()):
        return [block("absent", ABSENT)]
    last = run.attack_models()
    blocks = [block("p", INTRO)]
    with_att = {k: m for k, m in last.items() if (m.get("attacks") or {}).get("attacks")}
    if len(with_att) > 1:
        blocks.append(block("figure", figure(aplots.strongest_auc_figure(with_att, detectable=_detectable(with_att))),
                            "The strongest attack on each model (named inside the bar). A bar whose whisker reaches "
                            "below the black tick is within what this many people cannot tell from chance."))
    protection = _protection(run, with_att)
    if protection is not None:
        from toolkit.results.tables import protection_findings

        blocks.append(block("h", "What each strategy protects"))
        blocks.append(block("table", table(protection.drop(columns=["strategy"]), digits=3),
                            "Per model: the papers' privacy (identifier types never written out), utility on the "
                            "training notes (the papers' figure, which also rewards memorising them) and on held-out "
                            "notes of people not in training (what fine-tuning taught in general), the "
                            "strongest membership attack, PII inference (the true identifier ranked first among "
                            "candidates from its context) against chance and the base model, the largest canary "
                            "exposure where canaries were inserted, and the verdict. A PP strategy keeps "
                            "identifiers out of what the model writes; whether they stay inferable from their "
                            "context, and whether membership shows, are separate questions."))
        blocks.append(block("figure", figure(aplots.protection_figure(protection)),
                            "Black tick: chance for PII inference; grey tick: the base model's PII inference; "
                            "diamond: utility on held-out notes."))
        read = protection_findings(protection)
        if read:
            blocks.append(block("p", "Read off the table for this run:"))
            blocks.append(block("list", read))
    matrix = aplots.auc_matrix({k: m for k, m in every.items() if m.get("attacks")})
    if len(matrix):
        levels = pd.Series({k: (m.get("verdict") or {}).get("level", "—") for k, m in every.items()})
        matrix.insert(0, "verdict", levels.reindex(matrix.index).fillna("—"))
        blocks.append(block("table", table(matrix),
                            "AUC [95% CI] of every attack on every audited checkpoint; — : the attack does not "
                            "apply (the reference attack needs a reference model) or was not run (runs made before "
                            "it covered masked models)."))
    for label, m in last.items():
        blocks += _model_blocks(label, m)
    return blocks


__all__ = ["ABSENT", "INTRO", "attacks_section", "one_run_line", "scoring_line"]
