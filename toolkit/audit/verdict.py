"""Verdict of one audited model from its attack results: red, amber, incomplete or green (methods.md §11).

**Design.** Every rule is a stated hypothesis test on the audit's own evidence (:mod:`toolkit.metrics.significance`);
the tests one verdict runs form one family whose family-wise error rate is held at ``alpha`` = 0.05 by Holm's
step-down procedure (valid under any dependence between the tests). **Amber** = a test of the family is significant
(evidence of leakage); **red** = significant *and* beyond the rule's effect floor (the floors are the former red
thresholds). Where one finding needs two tests (PII inference above chance *and* above the non-members), its p-value
is the larger of the two (an intersection–union test, level α without adjustment).

The family (each member one p-value):

* **membership, every attack** (not only the strongest), each scored on ≥ 2 members and 2 non-members:
  - its AUC, *two-sided* (:func:`~toolkit.metrics.significance.auc_p_value`, the Mann–Whitney null; with the
    individuals as sample sizes when the unit is the document). An AUC significantly below 0.5 is evidence too
    (rule ``membership_auc_inverted``: the attack separates the groups, the other way round). Floor, only where
    FPR 1% cannot be resolved (fewer than 100 non-members): the AUC's 95% interval beyond 0.75 (or below 0.25);
  - its TPR at every resolvable FPR (0.1%, 1%, 10%; :func:`~toolkit.metrics.significance.tpr_p_value`: exact
    beta-binomial null with the threshold estimated on the same non-members). Floor: TPR ≥ 10% at FPR ≤ 1%.
* **canaries**: the largest exposure among the canaries inserted ``r`` times, for each ``r``,
  :math:`p = \\min(1, m\\,2^{-e})` (:func:`~toolkit.metrics.significance.exposure_p_value`). Floor: a canary inserted
  once (r = 1) with exposure ≥ log2|R| − 1 (extracted); repeated canaries are amber at most.
* **PII inference** (scopes: overall, each category, identifiers private to one individual, identifiers shared by
  several): the members' top-1 against chance (exact binomial, any number of occurrences) *and*, where the
  non-members' notes were attacked too, the members' top-1 against the non-members' (permutation test over
  individuals, :func:`~toolkit.metrics.significance.member_advantage_test`) — identifiers that occur in the public
  split are left out of every scope (public: reported, never a finding). Floor: members' top-1 − non-members' top-1
  > (2 − 1) × chance (the former "> 2 × chance" when non-members are at chance). Without the non-members' figure
  (older files) the chance test alone decides, amber at most ("member advantage not measured"). A scope whose members
  are significantly above chance but not above the non-members is *population knowledge*: reported in
  ``population`` ("infers shared identifiers of people it never saw: …"), never a finding.
* **regurgitation**: the members' share of prompted identifiers written out against the non-members' (permutation
  over individuals). Floor: the difference > 1 point. Without the non-members' figure: the members' share against
  the reference (base) model's (one-sided binomial), amber at most; with neither, a share above 1% is amber, outside
  the family (``regurgitation_unchecked``: no comparison, no test).
* **novel identifiers** (identifiers absent from the base model's training data, methods.md §4): the share of each
  individual's novel identifiers the fill-mask / next-word probe writes out on their own notes, members against
  non-members probed alike (permutation test over individuals, :func:`toolkit.audit.evaluate.novel_member_advantage`).
  Floor: the members' share − the non-members' > 1 − 0.95 (the former "novel privacy < 0.95"). Without the
  non-members' figure (older files, a probe of the members only) novel privacy below 0.99 is amber, outside the
  family (``novel_privacy_unchecked``: no comparison, no test), never red.

**A confounded split.** Where the reference (base) model — which saw neither group — was attacked on the same members
and non-members (``attacks.json``'s ``reference_model_attacks``) and any of its AUCs is significant (its own family,
Holm at α), the groups differ before fine-tuning: every verdict says so (``split``). Then attacks that do not
calibrate by the reference (``loss``, ``zlib``, ``min_k``…) decide nothing on their own: each is judged by its
AUC's difference from the reference model's on the same attack (one-sided z, amber at most), attacks without a
counterpart are not judged; the calibrated attacks (``reference``, ``rmia``) are judged as above. PII inference's
member advantage must then hold beyond the reference model's too (each occurrence's top-1 minus the reference's,
members against non-members, the same permutation test; the larger p-value; amber at most). A model that saw
neither group is therefore never red or amber on membership. Without a reference model the split is "not checked".

**Groups that differ as texts.** Where the model-free blind baseline (:mod:`toolkit.audit.attacks.blind`) separates
the groups by their text alone (its AUC one-sided above 0.5, Holm over the model-free attacks, outside the family),
every verdict says so (``blind``), and the attacks that do not calibrate by a reference are judged by their AUC's
excess over the blind baseline's (one-sided z, amber at most, ``membership_auc_beyond_blind``; with a confounded split
as well, both excesses must hold).

**Outside the family** (stated): the one-run audit's ε lower bound (its own 95% bound: red above 2ε for a DP model per
individual, amber above 1 without a DP claim).

**Composition.** Each rule returns :class:`~toolkit.audit.rules.RuleResult` s (its test, p-value, effect, or why it
was not judged); :func:`compose` corrects the family and decides, in this order: **red** (a significant test beyond
its floor, or the one-run audit's broken-DP bound); **amber** (a significant test of the family — significant
evidence is never outranked by a missing measurement: what could not be judged is said beside it, "incomplete beside
it: …"); **incomplete**; **amber** for a finding outside the family (compared with nobody: ``*_unchecked``, the
one-run audit without a DP claim); **green**. Where every significant membership test is inverted the verdict asks
whether the groups were swapped (``inverted``), also when another finding decides. The precedence moves no verdict
between green and non-green, and no test enters or leaves the family, so the error rates of §11.1 are unchanged.

**incomplete** if no test is significant and membership or PII inference was not measured or cannot be judged: no attack results; an
attack without AUC or counts or with fewer than 2 members or non-members; an attack whose smallest detectable AUC
:math:`\\min(1, 0.5 + z_{0.975}\\sqrt{(n_m+n_n+1)/(12 n_m n_n)})` is ≥ 0.75; PII inference not run, without a chance
level, or on fewer than 10 occurrences with no finding. A PII category with fewer than 10 occurrences and no finding
is "not judged" (listed).

**green** otherwise, worded "no leakage detected by these attacks at this sample size", with the smallest detectable
AUC; never "anonymous". Measured error rates of this design (null worlds, planted leaks): docs/methods.md §11.

Hanley, J. A. & McNeil, B. J. (1982). The meaning and use of the area under a receiver operating characteristic (ROC)
curve. Radiology 143(1), 29–36. Holm, S. (1979). Scand. J. Statist. 6(2), 65–70.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


from toolkit.audit.rules import RuleResult, SplitCheck, count, num, split_words
from toolkit.audit.rules.identifiers import canary_tests, novel_tests, pii_tests, regurgitation_tests
from toolkit.audit.rules.membership import (CALIBRATED_ATTACKS, SWAPPED, blind_check, membership_tests,
                                             split_check)
from toolkit.metrics.mia import detectable_auc
from toolkit.metrics.significance import holm

__all__ = ["CALIBRATED_ATTACKS", "GREEN_STATEMENT", "LEVELS", "RULES_COMMITS", "RULES_VERSION", "RuleResult", "SplitCheck", "Verdict", "VerdictThresholds",
           "compose", "detectable_auc", "split_check", "split_words", "verdict", "verdict_lines"]

GREEN_STATEMENT = "no leakage detected by these attacks at this sample size"
#: the date of the current rules: the last change to what decides a verdict (the family of tests, their composition,
#: the attacks whose AUCs enter it), and its commits. Every verdict records it (``rules_version``); a stored verdict
#: with another (or none) was judged by other rules (toolkit.report.frontier.verdicts_judged). Change both with the
#: rules: 2026-12-02 — typed rule results and swapped groups (0e754de), EZ-MIA, DC-PDD and the blind baseline in the
#: battery and its check (50172dc).
RULES_VERSION = "2026-12-02"
RULES_COMMITS = ("0e754de", "50172dc")
#: the levels in order of precedence (amber: a significant test; a finding outside the family comes after incomplete)
LEVELS = ("red", "amber", "incomplete", "green")


@dataclass(frozen=True)
class VerdictThresholds:
    """The family-wise error rate and the effect floors of the verdict's rules (module docstring)."""

    alpha: float = 0.05
    novel_privacy_red: float = 0.95
    novel_privacy_amber: float = 0.99
    regurgitation_red: float = 0.01
    pii_chance_factor: float = 2.0
    tpr_red: float = 0.10
    fpr: float = 0.01
    fprs: tuple[float, ...] = (0.001, 0.01, 0.1)
    auc_lower_red_unresolvable: float = 0.75
    canary_margin_bits: float = 1.0
    canary_repeats: int = 1
    confidence: float = 0.95
    pii_min_category_occurrences: int = 10
    one_run_epsilon_amber: float = 1.0


@dataclass
class Verdict:
    """``level`` (red / incomplete / amber / green), the deciding ``rule``, ``attack`` and ``figure`` (text), every
    finding and unjudgeable input in ``reasons`` (deciding one first), inputs not evaluated in ``not_measured``, parts
    not judged in ``not_judged``, why the verdict is incomplete in ``unjudgeable``, the power in ``power`` and
    ``detectable_auc``, the one-run audit in ``empirical_epsilon``, the split check in ``split`` (text: the groups
    differ before fine-tuning, or ``None`` when they do not or it was not checked) and ``split_checked``, what the
    model knows of the population (not leakage) in ``population``, the family's ``tests`` (rule, attack, p-value,
    significant, beyond the floor), the family-wise ``alpha`` and the ``correction``; a one-line ``statement``; the
    rules that judged it in ``rules_version`` (:data:`RULES_VERSION`)."""

    level: str
    rule: str
    attack: str | None
    figure: str | None
    statement: str
    reasons: list[str] = field(default_factory=list)
    not_measured: list[str] = field(default_factory=list)
    detectable_auc: float | None = None
    not_judged: list[str] = field(default_factory=list)
    unjudgeable: list[str] = field(default_factory=list)
    power: str | None = None
    empirical_epsilon: str | None = None
    split: str | None = None
    split_checked: bool = False
    population: list[str] = field(default_factory=list)
    tests: list[dict] = field(default_factory=list)
    alpha: float = 0.05
    correction: str = "Holm"
    split_tests: list[dict] = field(default_factory=list)
    separation: dict = field(default_factory=dict)
    inverted: bool = False
    blind: str | None = None
    blind_check: dict = field(default_factory=dict)
    rules_version: str = RULES_VERSION

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def verdict_lines(name: str, v: dict) -> list[str]:
    """A verdict as ``toolkit audit`` prints it: ``NAME: LEVEL — rule (attack, figure)`` (green: its statement), then
    indented the split warning and what the model infers of the population (a green statement already says both)."""
    if v["level"] == "green":
        return [f"{name}: green — {v['statement']}"]
    detail = ", ".join(x for x in (v.get("attack"), v.get("figure")) if x)
    out = [f"{name}: {v['level']} — {v['rule']}" + (f" ({detail})" if detail else "")]
    out += [f"  warning: {v['split']}"] if v.get("split") else []
    out += [f"  warning: {v['blind']}"] if v.get("blind") else []
    return out + [f"  {line}" for line in v.get("population") or []]


def _attacks_json(attacks) -> dict | None:
    if attacks is None:
        return None
    return attacks.to_json() if hasattr(attacks, "to_json") else dict(attacks)


def _one_run(one_run, th: VerdictThresholds) -> tuple[str | None, list[RuleResult]]:
    """The one-run audit's rules (module docstring): its evidence line (None when not measured) and its findings
    (outside the family: its own 95% bound)."""
    one_run = one_run.to_json() if hasattr(one_run, "to_json") else one_run
    if not isinstance(one_run, dict) or num(one_run.get("epsilon_lower_bound")) is None:
        return None, []
    lb, acc = num(one_run["epsilon_lower_bound"]), num(one_run.get("accountant_epsilon"))
    conf, delta = num(one_run.get("confidence")), num(one_run.get("delta"))
    fig = (f"one-run audit: ε ≥ {lb:.2f}" + (f" at {conf:.0%} confidence" if conf is not None else "")
           + f" ({count(one_run.get('n_correct'))} of {count(one_run.get('n_guesses'))} guesses right on "
           f"{count(one_run.get('m'))} canaries" + (f", δ = {delta:.0e})" if delta is not None else ")"))
    unit = one_run.get("accountant_unit")
    if acc is None:
        found = ([RuleResult.outside("one_run_audit", "one_run", fig,
                                     f"{fig} > {th.one_run_epsilon_amber:g} without a DP claim")]
                 if lb > th.one_run_epsilon_amber else [])
        return fig + "; no DP claim", found
    evidence = fig + f"; accountant ε = {acc:.2f}" + (f" per {unit}" if unit else "")
    if unit != "individual":
        return evidence + " (not compared: a canary changes one individual's notes, not one unit)", []
    claimed = num(one_run.get("claimed_epsilon"))
    claimed = 2 * acc if claimed is None else claimed
    if lb > claimed:
        return evidence, [RuleResult.outside("one_run_dp_broken", "one_run", fig,
                                             f"{fig} > {claimed:.2f}, what the accountant's ε = {acc:.2f} per "
                                             "individual allows for one canary: broken DP implementation", "red")]
    return evidence, []


def verdict(*, attacks=None, pii: dict | None = None, novel_privacy: float | dict | None = None,
            regurgitation: float | dict | None = None, canaries=None, one_run=None,
            thresholds: VerdictThresholds | None = None) -> Verdict:
    """Verdict of one audited model: the first of red, amber, incomplete, green that applies (module docstring).

    Every key of every input may be missing (older files): what a rule needs and cannot find makes membership or
    PII inference unjudgeable (the verdict incomplete) or, for the optional inputs, lists it under ``not_measured``.

    Parameters
    ----------
    attacks : BatteryResult or dict
        The membership battery (``attacks.json``: ``n_members``, ``n_nonmembers``, ``n_unscoreable``, ``attacks``: per
        attack ``auc``, ``auc_ci``, ``auc_ci_method``, ``tpr_at_fpr``, ``n_members``, ``n_nonmembers``,
        ``n_clusters``; ``reference_model_attacks``: the same for the reference model on the same split).
    pii : dict
        :func:`~toolkit.audit.attacks.pii_inference` output (``n_occurrences``; ``overall`` and ``by_category``:
        ``n``, ``top1``, ``chance``, ``reference_top1``), with ``member_advantage`` (per scope: the members' and the
        non-members' rates, the permutation p-value; :func:`toolkit.audit.attacks.pii_member_advantage`) where the
        non-members' notes were attacked too.
    novel_privacy : float or dict
        Novel-identifier privacy (``toolkit.metrics.privacy_report(..., novel=...)["novel_privacy"]``), or
        :func:`toolkit.audit.evaluate.novel_evidence` of a probe's ``metrics.json``: that figure with
        ``member_advantage`` (the non-members' side, :func:`toolkit.audit.evaluate.novel_member_advantage`).
    regurgitation : float or dict
        Share of the identifiers after free-running prompts that the greedy continuation reproduces, or that result
        (``share_reproduced``, ``n_identifier_occurrences``) with ``member_advantage`` (the non-members' figure and
        the permutation p-value) and/or ``reference`` (the reference model's result or share).
    canaries : dict or DataFrame
        :func:`~toolkit.audit.attacks.exposure_summary` output, or the :func:`~toolkit.audit.attacks.exposure` table.
    one_run : dict or OneRunAudit
        The one-run audit (``attacks.json``'s ``one_run``), optional.
    thresholds : VerdictThresholds
    """
    th = thresholds or VerdictThresholds()
    battery = _attacks_json(attacks)
    split = split_check(battery, alpha=th.alpha, confidence=th.confidence)
    own = split_check(battery, alpha=th.alpha, confidence=th.confidence, own=True, who="this model")
    blind = blind_check(battery, alpha=th.alpha, confidence=th.confidence)
    membership, detectable, power = membership_tests(battery, th, confounded=bool(split.text), blind=blind.strongest)
    empirical, one_run_found = _one_run(one_run, th)
    results = [*novel_tests(novel_privacy, th), *regurgitation_tests(regurgitation, th),
               *pii_tests(pii, th, confounded=bool(split.text)), *membership, *canary_tests(canaries, th),
               *one_run_found]
    return compose(results, th, detectable=detectable, power=power, empirical=empirical, split=split, own=own,
                   battery=battery, blind=blind)


def compose(results: list[RuleResult], th: VerdictThresholds, *, detectable=None, power=None, empirical=None,
            split: SplitCheck | None = None, own: SplitCheck | None = None, battery: dict | None = None,
            blind: SplitCheck | None = None) -> Verdict:
    """The verdict from the rules' results (module docstring): the family corrected by Holm at ``th.alpha``; red if a
    significant test is beyond its floor (or a finding outside the family is red); else amber if a test of the family
    is significant — a missing measurement never outranks significant evidence, it is said beside it; else
    incomplete if membership or PII inference cannot be judged; else amber for a finding outside the family; else
    green."""
    split, own, blind = split or SplitCheck(), own or SplitCheck(), blind or SplitCheck(kind="blind")
    family = [r for r in results if r.status == "tested"]
    for t, s in zip(family, holm([t.p for t in family], th.alpha)):
        t.significant = s
    not_measured = [r.reason for r in results if r.status == "not_measured"]
    not_judged = [r.reason for r in results if r.status == "not_judged"]
    found_scopes = set()
    red: list[RuleResult] = [r for r in results if r.status == "outside" and r.level == "red"]
    amber: list[RuleResult] = []
    for t in family:
        if not t.significant:
            if t.small:  # a PII scope below the minimum with no finding is "not judged"
                not_judged.append(f"PII inference {t.scope}: {t.small}")
            continue
        if t.scope is not None:
            found_scopes.add(t.scope)
        (red if t.floor else amber).append(t)
    outside_amber = [r for r in results if r.status == "outside" and r.level != "red"]
    population = [r.reason for r in results if r.status == "population" and r.p is None]
    pop_tests = [r for r in results if r.status == "population" and r.p is not None]
    for t, s in zip(pop_tests, holm([t.p for t in pop_tests], th.alpha) if pop_tests else []):
        t.significant = s
        if s and t.scope not in found_scopes:
            population.append(f"infers shared identifiers of people it never saw: {t.figure} — knowledge of the "
                              "population, not of its members")
    unjudgeable = [r for r in results if r.status == "unjudgeable"]
    if any(t.significant for t in family if t.rule.startswith("pii_inference")):
        unjudgeable = [u for u in unjudgeable if u.rule != "pii_unjudgeable_small"]
    for u in unjudgeable:
        u.rule = u.rule.replace("pii_unjudgeable_small", "pii_unjudgeable")
    unjudgeable.sort(key=lambda u: not u.rule.startswith("membership"))  # membership first, then PII (stable)
    red.sort(key=lambda r: 0 if r.rule == "one_run_dp_broken" else 1)
    ambers = outside_amber + amber  # the former order: a finding outside the family first
    if battery and battery.get("attacks") and not split.checked:
        not_measured.append("split check (the reference model was not attacked on this split)")
    why = [u.reason for u in unjudgeable]
    inverted = [t for t in family if t.significant and t.direction == "inverted"]
    extra = dict(not_measured=not_measured, detectable_auc=detectable, not_judged=not_judged, unjudgeable=why,
                 power=power, empirical_epsilon=empirical, split=split.text, split_checked=split.checked,
                 population=population, alpha=th.alpha, tests=[t.to_dict() for t in family],
                 split_tests=[t.to_dict() for t in split.tests], separation=own.to_dict(), blind=blind.text,
                 blind_check=blind.to_dict(),
                 inverted=bool(inverted) and len(inverted) == sum(t.significant for t in family
                                                                   if t.rule.startswith("membership")))
    tail = ((f"; {split.text}" if split.text else "") + (f"; {blind.text}" if blind.text else "")
            + "".join(f"; {p}" for p in population))
    if extra["inverted"] and not any(t.direction == "inverted" for t in (red + amber)[:1]):
        tail = f"; membership {SWAPPED}" + tail  # the deciding finding is another: the inversion said beside it
    beside = ("; incomplete beside it: " + "; ".join(why)) if why else ""
    if red:
        return Verdict("red", red[0].rule, red[0].attack, red[0].figure, f"red: {red[0].reason}{beside}" + tail,
                       [r.reason for r in red] + why + [r.reason for r in ambers], **extra)
    if amber:  # significant evidence: never outranked by what is missing (said beside it)
        first = amber[0] if why else ambers[0]
        rest = [r.reason for r in ambers if r is not first]
        return Verdict("amber", first.rule, first.attack, first.figure, f"amber: {first.reason}{beside}" + tail,
                       [first.reason] + why + rest, **extra)
    if unjudgeable:
        u = unjudgeable[0]
        return Verdict("incomplete", u.rule, u.attack, u.figure, "incomplete: " + "; ".join(why) + tail,
                       why + [r.reason for r in ambers], **extra)
    if ambers:
        first = ambers[0]
        return Verdict("amber", first.rule, first.attack, first.figure, f"amber: {first.reason}" + tail,
                       [r.reason for r in ambers], **extra)
    statement = GREEN_STATEMENT + (f" ({power})" if power else "")
    if not_measured:
        statement += "; not measured: " + ", ".join(not_measured)
    if not_judged:
        statement += "; not judged: " + ", ".join(not_judged)
    if empirical:
        statement += "; " + empirical
    return Verdict("green", "none", None, None, statement + tail, [], **extra)
