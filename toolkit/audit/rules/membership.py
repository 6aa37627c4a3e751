"""Membership rules of the verdict (methods.md §11): every attack's AUC against 0.5, two-sided (Mann–Whitney null),
its TPR at every resolvable FPR against that FPR (beta-binomial, the threshold set on the same non-members), and the
split check — the reference model, which saw neither group, attacked on the same members and non-members; where it
separates them, the attacks that do not calibrate by it are judged by their AUC's excess over its own."""

from __future__ import annotations

from toolkit.audit.attacks.registry import calibrated_attacks, model_free_attacks
from toolkit.audit.rules import RuleResult, SplitCheck, count, num, p_text
from toolkit.metrics.mia import auc_interval, detectable_auc
from toolkit.metrics.significance import (auc_difference_p_value, auc_p_value, fpr_resolvable, holm,
                                          tpr_p_value)

#: membership attacks that calibrate each score by the reference model(s): still judged on a confounded split (the
#: registry's ``calibrated`` entries when this module was imported; the rules read the registry itself)
CALIBRATED_ATTACKS = calibrated_attacks()


def _interval(rep: dict, auc: float, n_m: int, n_n: int, confidence: float) -> tuple[float, float, str]:
    """``(lo, hi, method)`` of an attack's AUC interval (:func:`toolkit.metrics.mia.auc_interval`) with the sizes
    the verdict settled on (≥ 2 of each, so there always is one)."""
    return auc_interval({**rep, "auc": auc, "n_members": n_m, "n_nonmembers": n_n}, confidence=confidence)


def _se(rep: dict, auc: float, n_m: int, n_n: int, confidence: float) -> float:
    """Standard error of an attack's AUC from its interval (half-width / z)."""
    from scipy.stats import norm

    lo, hi, _ = _interval(rep, auc, n_m, n_n, confidence)
    return (hi - lo) / (2 * float(norm.ppf(0.5 + confidence / 2)))


def _sizes(rep: dict, battery: dict) -> tuple[int | None, int | None]:
    n_m = count(rep.get("n_members")) if count(rep.get("n_members")) is not None else count(battery.get("n_members"))
    n_n = (count(rep.get("n_nonmembers")) if count(rep.get("n_nonmembers")) is not None
           else count(battery.get("n_nonmembers")))
    return n_m, n_n


def _effective(rep: dict, n_m: int, n_n: int) -> tuple[int, int]:
    """Sample sizes of the AUC test: the individuals where the unit is the document (``n_clusters``)."""
    cl = rep.get("n_clusters")
    if isinstance(cl, dict) and count(cl.get("members")) and count(cl.get("nonmembers")):
        return count(cl["members"]), count(cl["nonmembers"])
    return n_m, n_n


AUC_TEST = "AUC vs 0.5, two-sided (Mann–Whitney null)"
TPR_TEST = "TPR at FPR vs that FPR, one-sided (beta-binomial, threshold on the same non-members)"
BEYOND_TEST = "AUC beyond the reference model's on the same split, one-sided z"
#: the question an inverted finding asks: members and non-members given the other way round
SWAPPED = "inverted: members score lower than non-members — are the groups swapped?"


def split_check(battery: dict | None, *, alpha: float = 0.05, confidence: float = 0.95,
                own: bool = False, who: str | None = None) -> SplitCheck:
    """Do the reference model's own attacks (``reference_model_attacks`` of ``attacks.json``: the base model, which
    saw neither group, attacked on the same members and non-members) separate them? Each of its AUCs two-sided
    against 0.5, Holm at ``alpha``; the result's ``strongest`` is the significant one farthest from 0.5, None when
    none is (``checked`` False when nothing could be checked). ``own``: test the battery's own ``attacks`` instead —
    the split check of a model that saw neither group (a run's base model), recorded in every verdict."""
    ref = (battery or {}).get("attacks" if own else "reference_model_attacks")
    who = who or (battery or {}).get("reference") or "the reference model"
    if not isinstance(ref, dict) or not ref:
        return SplitCheck(who=who)
    rows = []
    free = model_free_attacks()  # a text-only check is the blind baseline's (blind_check), not the model's
    for name, rep in ref.items():
        if name in free:
            continue
        rep = rep if isinstance(rep, dict) else {}
        auc = num(rep.get("auc"))
        n_m, n_n = _sizes(rep, battery)
        if auc is None or not n_m or not n_n or n_m < 2 or n_n < 2:
            continue
        rows.append((name, auc, auc_p_value(auc, *_effective(rep, n_m, n_n)), rep, n_m, n_n))
    if not rows:
        return SplitCheck(who=who)
    sig = holm([r[2] for r in rows], alpha)
    tests = [RuleResult("split_check", name, test=AUC_TEST, p=p, effect=auc - 0.5, significant=s,
                        direction="inverted" if auc < 0.5 else None, figure=f"{name} AUC {auc:.3f}")
             for (name, auc, p, *_), s in zip(rows, sig)]
    found = [r for r, s in zip(rows, sig) if s]
    if not found:
        return SplitCheck(True, tests, None, who)
    name, auc, p, rep, n_m, n_n = max(found, key=lambda r: abs(r[1] - 0.5))
    lo, hi, _ = _interval(rep, auc, n_m, n_n, confidence)
    return SplitCheck(True, tests, {"attack": name, "auc": auc, "lo": lo, "hi": hi, "p": p,
                                    "confidence": confidence}, who)


BLIND_TEST = "blind baseline's AUC vs 0.5, one-sided (Mann–Whitney null)"


def blind_check(battery: dict | None, *, alpha: float = 0.05, confidence: float = 0.95) -> SplitCheck:
    """Do the model-free attacks (the blind baseline, :mod:`toolkit.audit.attacks.blind`) separate the groups by
    their text alone? Each one's AUC one-sided above 0.5 (cross-fitted scores lean below 0.5 under the null: the
    one-sided test stays at its level), Holm at ``alpha``; outside the verdict's family (not evidence of leakage)."""
    reps = (battery or {}).get("attacks") or {}
    free = [n for n in reps if n in model_free_attacks()]
    rows = []
    for name in free:
        rep = reps[name] if isinstance(reps[name], dict) else {}
        auc = num(rep.get("auc"))
        n_m, n_n = _sizes(rep, battery)
        if auc is None or not n_m or not n_n or n_m < 2 or n_n < 2:
            continue
        two = auc_p_value(auc, *_effective(rep, n_m, n_n))
        rows.append((name, auc, two / 2 if auc > 0.5 else 1 - two / 2, rep, n_m, n_n))
    who = "the blind baseline"
    if not rows:
        return SplitCheck(who=who, kind="blind")
    sig = holm([r[2] for r in rows], alpha)
    tests = [RuleResult("blind_check", name, test=BLIND_TEST, p=p, effect=auc - 0.5, significant=s,
                        figure=f"{name} AUC {auc:.3f}") for (name, auc, p, *_), s in zip(rows, sig)]
    found = [r for r, s in zip(rows, sig) if s]
    if not found:
        return SplitCheck(True, tests, None, who, "blind")
    name, auc, p, rep, n_m, n_n = max(found, key=lambda r: r[1])
    lo, hi, _ = _interval(rep, auc, n_m, n_n, confidence)
    return SplitCheck(True, tests, {"attack": name, "auc": auc, "lo": lo, "hi": hi, "p": p, "confidence": confidence,
                                    "se": _se(rep, auc, n_m, n_n, confidence)}, who, "blind")


def membership_tests(battery: dict | None, th, confounded: bool = False,
                     blind: dict | None = None) -> tuple[list[RuleResult], float | None, str | None]:
    """The membership rules (module docstring) on one battery: ``(results, detectable AUC, power text)``;
    ``confounded``: the split check found that the groups differ before fine-tuning; ``blind``: the blind baseline's
    significant separation (:func:`blind_check`'s ``strongest``), against which the attacks that do not calibrate
    by a reference are judged (their AUC's excess over it, one-sided z, amber at most). Model-free attacks are not
    in the family (they are the check)."""
    out: list[RuleResult] = []
    reps = (battery or {}).get("attacks") or {}
    if not reps:
        return [RuleResult.not_measured("membership attacks"),
                RuleResult.unjudgeable("membership_not_measured", None, None,
                                       "membership not measured (no attack results)")], None, None
    ref_reps = (battery or {}).get("reference_model_attacks") or {}
    calibrated = calibrated_attacks()
    problems: dict[str, str] = {}
    power: list[tuple[float, int, int]] = []
    free = model_free_attacks()
    for name, rep in reps.items():
        if name in free:
            continue
        rep = rep if isinstance(rep, dict) else {}
        auc = num(rep.get("auc"))
        n_m, n_n = _sizes(rep, battery)
        if auc is None:
            problems[name] = "no AUC recorded"
            continue
        if n_m is None or n_n is None:
            problems[name] = "numbers of members and non-members not recorded"
            continue
        counts = f"{n_m} members and {n_n} non-members"
        det = detectable_auc(n_m, n_n, th.confidence)
        power.append((det, n_m, n_n))
        if n_m < 2 or n_n < 2:
            problems[name] = f"{counts}: fewer than 2 of either"
            continue
        if det >= th.auc_lower_red_unresolvable:
            problems[name] = f"{counts}: smallest detectable AUC {det:.2f}"
        e_m, e_n = _effective(rep, n_m, n_n)
        if (confounded or blind) and name not in calibrated:
            se = _se(rep, auc, n_m, n_n, th.confidence)
            ps, figs, effect = [], [], None
            if confounded:
                ref = ref_reps.get(name) if isinstance(ref_reps.get(name), dict) else None
                r_auc = num(ref.get("auc")) if ref else None
                if r_auc is None:
                    out.append(RuleResult.not_judged(f"membership attack {name}: the split is confounded and the "
                                                     "reference model was not attacked with it"))
                    continue
                r_m, r_n = _sizes(ref, battery)
                # the model's separation beyond the reference's, in the direction the reference already separates
                sign = 1.0 if r_auc >= 0.5 else -1.0
                ps.append(auc_difference_p_value(sign * (auc - 0.5), se, sign * (r_auc - 0.5),
                                                 _se(ref, r_auc, r_m or n_m, r_n or n_n, th.confidence)))
                figs.append(f"the reference model's {r_auc:.3f} on the same split")
                effect = sign * (auc - r_auc)
            if blind:  # beyond what the text alone tells (members above: the blind check is one-sided)
                ps.append(auc_difference_p_value(auc - 0.5, se, blind["auc"] - 0.5, blind["se"]))
                figs.append(f"the blind baseline's {blind['auc']:.3f}")
                effect = auc - blind["auc"] if effect is None else min(effect, auc - blind["auc"])
            p = max(ps)
            fig = f"AUC = {auc:.3f} vs {' and '.join(figs)} ({p_text(p)})"
            out.append(RuleResult("membership_auc_beyond_reference" if confounded else "membership_auc_beyond_blind",
                                  name, test=BEYOND_TEST, p=p, effect=effect, figure=fig,
                                  reason=f"{name}: {fig}: separates the groups more than "
                                  + ("the model that saw neither" if confounded else "their text alone")))
            continue
        p = auc_p_value(auc, e_m, e_n)
        lo, hi, method = _interval(rep, auc, n_m, n_n, th.confidence)
        tprs = rep.get("tpr_at_fpr") if isinstance(rep.get("tpr_at_fpr"), dict) else {}
        one_pct = num(tprs.get(format(th.fpr, "g")))
        unresolved = one_pct is None and not fpr_resolvable(th.fpr, n_n)
        inverted = auc < 0.5
        floor = unresolved and (hi < 1 - th.auc_lower_red_unresolvable if inverted
                                else lo > th.auc_lower_red_unresolvable)
        fig = f"AUC = {auc:.3f}, {th.confidence:.0%} interval [{lo:.3f}, {hi:.3f}] ({method}; {p_text(p)})"
        if inverted:
            reason = f"{name}: {fig}: {SWAPPED}"
        else:
            reason = f"{name}: {fig}"
        if floor:
            reason += (f"; FPR {th.fpr:g} unresolvable with {n_n} non-members and the interval beyond "
                       f"{th.auc_lower_red_unresolvable:g}")
        rule = ("membership_auc_unresolvable_fpr" if floor else
                "membership_auc_inverted" if inverted else "membership_auc")
        out.append(RuleResult(rule, name, test=AUC_TEST, p=p, effect=auc - 0.5, floor=floor, figure=fig,
                              reason=reason, direction="inverted" if inverted else None))
        for f in th.fprs:
            tpr = num(tprs.get(format(f, "g")))
            if tpr is None:
                continue
            p = tpr_p_value(tpr, f, n_m, n_n)
            if p is None:
                continue
            fl = f <= th.fpr + 1e-12 and tpr >= th.tpr_red
            fig = f"TPR = {tpr:.3f} at FPR {f:g} ({n_m} members, {n_n} non-members; {p_text(p)})"
            out.append(RuleResult("membership_tpr", name, test=TPR_TEST, p=p, effect=tpr - f, floor=fl, figure=fig,
                                  reason=f"{name}: {fig}" + (f" ≥ {th.tpr_red:g}" if fl else
                                                             f", {tpr / f:.1f}× the FPR")))
    if problems:
        by_why: dict[str, list[str]] = {}
        for name, why in problems.items():
            by_why.setdefault(why, []).append(name)
            out.append(RuleResult.not_judged(f"membership attack {name}: {why}"))
        text = (next(iter(by_why)) if len(by_why) == 1 and len(problems) == len(reps) else
                "; ".join(f"{', '.join(names)}: {why}" for why, names in by_why.items()))
        out.append(RuleResult.unjudgeable("membership_unjudgeable", next(iter(problems)) if len(problems) == 1 else None,
                                          text, f"membership not judgeable — {text}"))
    if not power:
        return out, None, None
    det, n_m, n_n = max(power)
    text = f"smallest detectable AUC ≈ {det:.3f} with {n_m} members and {n_n} non-members"
    unscoreable = count(battery.get("n_unscoreable"))
    if unscoreable:
        text += f"; {unscoreable} {battery.get('unit') or 'unit'}(s) without any scoreable token left out"
    return out, det, text


__all__ = ["AUC_TEST", "BLIND_TEST", "CALIBRATED_ATTACKS", "SWAPPED", "blind_check", "membership_tests",
           "split_check"]
