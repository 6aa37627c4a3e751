"""The verdicts at the top of the report and at the end of notebooks 00 and 06, in plain words.

Each audited model's ``verdict.json`` (:class:`toolkit.audit.verdict.Verdict`) becomes a coloured badge (red /
grey "incomplete" / amber / green), the deciding rule and attack in plain words with the figure that decided it; for
incomplete, what could not be judged and why (the verdict's statement); for green, the wording of
:data:`toolkit.audit.verdict.GREEN_STATEMENT` with the smallest AUC the audit could have detected at its sample size.
The rules are printed with the thresholds they use (:class:`~toolkit.audit.verdict.VerdictThresholds`), in their
order of precedence.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from toolkit.audit.verdict import GREEN_STATEMENT, VerdictThresholds, split_words
from toolkit.plots.attacks import attack_name

#: the deciding rule of a verdict, in plain words (the rules of older verdict files too)
RULES = {
    "novel_privacy": "the model writes out identifiers of the training notes that its base model could not have "
                     "known (novel-identifier privacy)",
    "novel_identifiers": "the model writes out identifiers its base model could not have known significantly more "
                         "often on the notes of people it was trained on than on the notes of people it never saw",
    "novel_privacy_unchecked": "the model writes out identifiers of the training notes that its base model could "
                               "not have known — compared with nobody (the non-members were not probed)",
    "regurgitation": "continuing the first words of notes, the model writes out the identifiers of people it was "
                     "trained on significantly more often than those of people it never saw",
    "regurgitation_unchecked": "continuing the first words of training notes, the model writes out their "
                               "identifiers — compared with nobody (neither non-members nor a reference model)",
    "regurgitation_base_level": "continuing the first words of training notes, the model writes out their "
                                "identifiers — no more often than its base model, which never saw these notes",
    "one_run_dp_broken": "made-up records inserted into the training notes are recognised beyond what the model's "
                         "DP guarantee allows: the DP implementation is broken",
    "one_run_audit": "made-up records inserted into the training notes are recognised: the training is provably "
                     "not private at the level usually called strong (ε > 1)",
    "pii_inference": "given a note with one identifier blanked out, an attacker guesses the identifier of people "
                     "the model was trained on significantly more often than chance and than for people it never "
                     "saw",
    "pii_reference_level": "given a training note with one identifier blanked out, an attacker guesses the "
                           "identifier more often than chance — but not significantly more often than with the "
                           "base model, which never saw these notes",
    "pii_inference_category": "given a note with one identifier of a given kind (e.g. names) blanked out, an "
                              "attacker guesses it for people the model was trained on significantly more often "
                              "than chance and than for people it never saw",
    "membership_tpr": "an attacker finds people who were in the training data while wrongly accusing few who were "
                      "not",
    "membership_auc_unresolvable_fpr": "an attacker clearly separates people who were in the training data from "
                                       "people who were not (too few non-members to count false accusations at 1%)",
    "membership_auc": "an attack separates people who were in the training data from people who were not better "
                      "than chance",
    "membership_auc_inverted": "an attack separates people who were in the training data from people who were not "
                               "— the other way round (members score lower): as telling as the mirror image",
    "membership_auc_beyond_reference": "members and non-members already differ before fine-tuning, and an attack "
                                       "separates them significantly more than on the model that saw neither",
    "membership_auc_beyond_blind": "members and non-members differ as texts (a classifier of the text alone "
                                   "separates them), and an attack separates them significantly more than the "
                                   "text alone does",
    "canary_exposure": "a made-up record inserted once into the training notes is recognised by the model",
    "canary_exposure_repeated": "a made-up record inserted several times into the training notes is recognised by "
                                "the model",
    "membership_not_measured": "no membership attack was run",
    "membership_unjudgeable": "too few people (or missing counts) to tell whether membership shows",
    "pii_not_measured": "PII inference was not run",
    "pii_unjudgeable": "too few identifiers to tell whether they can be inferred",
    "none": "no rule triggered",
}
COLORS = {"green": "#2e7d32", "amber": "#b26a00", "red": "#c62828", "incomplete": "#616161"}
HEADLINES = {"red": "leakage found", "amber": "signs of leakage", "incomplete": "could not be judged",
             "green": GREEN_STATEMENT}
MISSING = ("No verdict: this run has no attack results (attacks/ or verdict files missing; runs made before the "
           "attack battery have none).")
#: why a run has no verdict, per kind of run (:func:`missing_verdict`)
MISSING_BY_KIND = {
    "extraction": "No verdict by design: an e-mail extraction run (paper 002) is judged by its extraction rates "
                  "(TER, SER) and MaxTER/AURC, not by the attack battery, which it does not run.",
    "scrubbing": "No verdict by design: a vocabulary-scrubbing run (paper 003) is judged by its anonymity test (how "
                 "often a name slot is filled with a name), not by the attack battery, which it does not run.",
    "unbatteried": MISSING,
    "empty": "No verdict: this run has no audited model and no attack results.",
}


def missing_verdict(run) -> str:
    """Why a run without verdicts has none, in the words of its kind: an extraction run (notebook 04) or a
    vocabulary-scrubbing run (notebook 05) has none by design; a run with audits but no battery was audited before
    it; anything else has no attack results (:data:`MISSING`)."""
    if getattr(run, "extraction", None) is not None and len(run.extraction):
        return MISSING_BY_KIND["extraction"]
    if getattr(run, "anonymity", None) or getattr(run, "reviews", None):
        return MISSING_BY_KIND["scrubbing"]
    if getattr(run, "audits", None):
        return MISSING_BY_KIND["unbatteried"]
    return MISSING_BY_KIND["empty"]


def thresholds(th: VerdictThresholds | None = None) -> list[tuple[str, str]]:
    """``(level, rule with its test and threshold)`` for every rule of :func:`toolkit.audit.verdict.verdict`."""
    th = th or VerdictThresholds()
    times = "once" if th.canary_repeats == 1 else f"{th.canary_repeats} times"
    fprs = ", ".join(f"{f:.1%}".replace(".0%", "%") for f in th.fprs)
    return [
        ("amber", f"any test below is significant, the whole family's false-alarm rate held at {th.alpha:g} (Holm): "
                  "evidence of leakage. Red when the evidence is also beyond the rule's floor (in brackets)"),
        ("amber", "membership, every attack: its AUC against 0.5, two-sided (Mann–Whitney; an AUC below 0.5 is "
                  "reported as inverted: are the groups swapped?) and its TPR at FPR "
                  f"{fprs} against that FPR (exact beta-binomial, the threshold set on the same non-members) "
                  f"[red: TPR ≥ {th.tpr_red:.0%} at FPR ≤ {th.fpr:.0%}; with "
                  f"fewer than 100 non-members the AUC's {th.confidence:.0%} interval beyond "
                  f"{th.auc_lower_red_unresolvable:g}]"),
        ("amber", "PII inference, overall, per kind of identifier, private and shared identifiers (identifiers the "
                  "public split names are left out): the members' top-1 above chance (exact binomial) and above the "
                  "non-members' (permutation over individuals) [red: members − non-members > "
                  f"{th.pii_chance_factor - 1:g} × chance]; without the non-members' figure, above chance alone, "
                  "amber at most. Above chance for non-members too: reported as knowledge of the population"),
        ("amber", "free-running regurgitation: members' identifiers written out more often than non-members' "
                  f"(permutation over individuals) [red: by more than {th.regurgitation_red:.0%}]"),
        ("amber", f"canaries: the largest exposure e of m canaries, p = m·2^−e [red: a canary inserted {times} at "
                  f"log2|R| − {th.canary_margin_bits:g} bits or more]"),
        ("amber", "a split whose groups differ before fine-tuning (the reference model separates them): attacks that "
                  "do not calibrate by the reference are judged by their AUC's excess over the reference model's; "
                  "the reference attack and RMIA as above"),
        ("amber", "novel identifiers (unknown to the base model): members' written out on their own notes more often "
                  "than non-members' (permutation over individuals) "
                  f"[red: by more than {1 - th.novel_privacy_red:.0%}]; without the non-members probed, novel privacy "
                  f"below {th.novel_privacy_amber:g} is amber, compared with nobody"),
        ("red", "a DP model's one-run audit bound (95%) above what its accountant's ε allows for one canary (2ε); "
                f"amber: a model without DP whose bound exceeds {th.one_run_epsilon_amber:g}"),
        ("incomplete", "no test above significant, and membership or PII inference was not measured or cannot be "
                       "judged (significant evidence decides red or amber and this is said beside it): no "
                       "results, fewer than 2 members or non-members, a smallest detectable AUC of "
                       f"{th.auc_lower_red_unresolvable:g} or more, or fewer than {th.pii_min_category_occurrences} "
                       "identifier occurrences with no finding (the verdict says which, and why)"),
        ("green", f"none of the above: {GREEN_STATEMENT}, with the smallest AUC the sample size can detect "
                  f"(0.5 + the half-width of the AUC's {th.confidence:.0%} interval when nothing leaks)"),
    ]


def _plain(reason: str) -> str:
    """A verdict reason with its attack's key (``"min_k: …"``) replaced by the attack's plain name."""
    head, sep, rest = reason.partition(":")
    key = head.replace(" (strongest)", "")
    return f"{attack_name(key)}{head[len(key):]}{sep}{rest}" if sep and key.isidentifier() else reason


def model_verdict(label: str, model: dict[str, Any]) -> dict[str, Any]:
    """One model's verdict in plain words: ``label``, ``strategy``, ``level``, ``rule``, ``attack``, ``figure``,
    ``statement``, ``detectable`` (text), ``others`` (further reasons), ``not_measured``, ``not_judged``,
    ``incomplete`` (a red or amber verdict's inputs that could not be judged, said beside the evidence), ``inverted``
    (every significant membership finding has members below non-members: swapped groups?).

    An incomplete verdict's statement says what could not be judged and why; its ``others`` are the further
    findings (amber reasons), not the unjudgeable inputs the statement already names."""
    v = model["verdict"]
    att = model.get("attacks") or {}
    level = v.get("level") or "incomplete"
    reasons = list(v.get("reasons") or [])
    unjudgeable = list(v.get("unjudgeable") or [])
    out = {"label": label, "strategy": model.get("strategy") or label, "level": level,
           "rule": RULES.get(v.get("rule"), v.get("rule")), "attack": attack_name(v["attack"]) if v.get("attack") else None,
           "figure": v.get("figure"), "others": [_plain(r) for r in reasons[1:]],
           "not_measured": list(v.get("not_measured") or []), "not_judged": list(v.get("not_judged") or []),
           "detectable": None, "population": list(v.get("population") or []), "split": v.get("split"),
           "inverted": bool(v.get("inverted")), "blind": v.get("blind")}
    out["statement"] = HEADLINES.get(level, v.get("statement", ""))
    out["incomplete"] = []
    if level in ("red", "amber") and unjudgeable:  # significant evidence decides; what is missing is said beside it
        out["incomplete"] = unjudgeable
        out["others"] = [_plain(r) for r in reasons[1:] if r not in unjudgeable]
    if level == "incomplete":
        why = "; ".join(unjudgeable) or str(v.get("statement", "")).removeprefix("incomplete: ")
        out["statement"] = f"{HEADLINES['incomplete']}: {why}"
        out["others"] = [_plain(r) for r in reasons if r not in unjudgeable]
        out["not_judged"] = [x for x in out["not_judged"] if x.split(": ", 1)[-1] not in why]
    if v.get("power"):
        out["detectable"] = v["power"]
    elif v.get("detectable_auc") is not None:
        n = (f" with {att['n_members']} members and {att['n_nonmembers']} non-members"
             if att.get("n_members") is not None else "")
        out["detectable"] = f"smallest detectable AUC ≈ {v['detectable_auc']:.3f}{n}"
    return out


def split_shift(models: dict[str, Any]) -> str | None:
    """A warning when members and non-members differ before fine-tuning: a model's verdict says so (its ``split``:
    the reference model, which saw neither group, separates them — :func:`toolkit.audit.verdict.split_check`), or
    the run's base model separates them: its verdict's ``separation``, the same check on its own attacks (AUCs
    two-sided, Holm at α), read as the verdict recorded it — nothing is re-tested here. Then every membership figure
    of the fine-tuned models contains that difference. None when no check says so (a verdict file older than the
    ``separation`` record says nothing)."""
    for m in models.values():
        split = (m.get("verdict") or {}).get("split")
        if split:
            return f"{split[0].upper()}{split[1:]}. Draw members and non-members from the same population " \
                   "(docs/guide.md, sample data)."
    base = next((m for m in models.values() if m.get("strategy") == "base"), {})
    separation = (base.get("verdict") or {}).get("separation") or {}
    text = split_words(separation.get("strongest"), "the base model")
    if not text:
        return None
    return f"{text[0].upper()}{text[1:]}. Draw members and non-members from the same population (docs/guide.md, " \
           "sample data)."


def run_verdicts(runs: Iterable) -> list[dict[str, Any]]:
    """``[{"run", "models": [model_verdict …], "missing", "warning"}]`` for the report's top and the notebooks
    (``warning``: :func:`split_shift`)."""
    out = []
    for run in runs:
        found = run.attack_models()
        models = [model_verdict(label, m) for label, m in found.items() if m.get("verdict")]
        out.append({"run": run.label, "models": models, "missing": None if models else missing_verdict(run),
                    "warning": split_shift(found)})
    return out


def _badge(level: str) -> str:
    return (f'<span style="display:inline-block;min-width:4.2em;text-align:center;padding:.15em .5em;'
            f'border-radius:.3em;color:#fff;font-weight:700;background:{COLORS.get(level, "#555")}">'
            f"{html.escape(level.upper())}</span>")


def verdicts_html(runs: Iterable, *, show_run: bool = True, compact: bool = False) -> str:
    """The verdicts as an HTML fragment (inline styles: it reads the same in the report and in a notebook).

    ``compact``: one table row per model (run, model, colour, deciding rule, strongest attack with its figure) and
    everything else (statement, further rules, what was not judged or measured) folded into a ``<details>`` below
    the table (:func:`verdicts_compact_html`)."""
    if compact:
        return verdicts_compact_html(runs)
    esc = html.escape
    parts = []
    for item in run_verdicts(runs):
        if show_run:
            parts.append(f'<h3 style="margin:.8em 0 .3em">{esc(item["run"])}</h3>')
        if item["missing"]:
            parts.append(f'<p style="color:#666;font-style:italic">{esc(item["missing"])}</p>')
            continue
        if item.get("warning"):
            parts.append(f'<p class="split-shift" style="border-left:4px solid {COLORS["amber"]};padding:.3em .6em">'
                         f'<strong>Members and non-members differ.</strong> {esc(item["warning"])}</p>')
        rows = []
        for m in item["models"]:
            lines = [f"<strong>{esc(m['label'])}</strong>: {esc(m['statement'])}"]
            if m["level"] in ("green", "incomplete"):
                if m["detectable"]:
                    lines.append(esc(m["detectable"]) + ".")
            else:
                lines.append(f"Deciding rule: {esc(m['rule'])}."
                             + (f" Attack: {esc(m['attack'])}." if m["attack"] else "")
                             + (f" Figure: {esc(m['figure'])}." if m["figure"] else ""))
            if m["others"]:  # every further rule that triggered, the first few in full (a one-minute read)
                more = len(m["others"]) - 3
                lines.append(f"Also triggered ({len(m['others'])}): " + esc("; ".join(m["others"][:3]))
                             + (f"; and {more} more (see the Attacks section)." if more > 0 else "."))
            if m.get("incomplete"):
                lines.append("Incomplete beside it: " + esc("; ".join(m["incomplete"])) + ".")
            if m.get("blind"):  # the groups differ as texts: the attacks it could explain did not decide
                lines.append("Groups differ as texts: " + esc(m["blind"]) + ".")
            if m.get("inverted"):
                lines.append("Every significant membership finding is inverted: members score lower than "
                             "non-members — are the groups swapped?")
            if m["not_judged"]:
                lines.append("Not judged: " + esc("; ".join(m["not_judged"])) + ".")
            for line in m["population"]:  # what the model knows of people it never saw: not leakage
                lines.append("Not leakage: " + esc(line) + ".")
            if m["not_measured"]:
                lines.append("Not measured: " + esc(", ".join(m["not_measured"])) + ".")
            rows.append(f'<tr class="verdict verdict-{esc(m["level"])}"><td style="vertical-align:top;'
                        f'padding:.35em .8em .35em 0">{_badge(m["level"])}</td><td style="padding:.35em 0">'
                        + "<br>".join(lines) + "</td></tr>")
        parts.append('<table style="border-collapse:collapse">' + "".join(rows) + "</table>")
    return "\n".join(parts)


def strongest_attack(battery: dict[str, Any] | None) -> str:
    """The battery's strongest membership attack with its AUC and the AUC's 95% interval
    (:func:`toolkit.metrics.mia.auc_interval`: the recorded one, else Hanley–McNeil from the counts); "" without."""
    from toolkit.metrics.mia import auc_interval

    battery = battery or {}
    name = battery.get("strongest")
    rep = (battery.get("attacks") or {}).get(name) if name else None
    if not isinstance(rep, dict) or rep.get("auc") is None:
        return ""
    ci = auc_interval(rep, battery.get("n_members"), battery.get("n_nonmembers"))
    return f"{attack_name(name)}: AUC {float(rep['auc']):.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def verdicts_compact_html(runs: Iterable) -> str:
    """The verdicts as one compact table — run, model, colour, deciding rule (its key; the plain words on hover)
    with the deciding figure, and the strongest membership attack with its AUC's interval
    (:func:`strongest_attack`) — and, per run, one line for a run without verdicts (:func:`missing_verdict`). The
    details of every model (statement, further rules, not judged, not measured, population) sit in one collapsed
    ``<details>`` below the table."""
    esc = html.escape
    cell = 'style="padding:.2em .6em .2em 0;text-align:left"'
    rows, missing, details = [], [], []
    runs = list(runs)
    batteries = {(r.label, label): m.get("attacks") for r in runs for label, m in r.attack_models().items()}
    for item in run_verdicts(runs):
        if item["missing"]:
            missing.append(f"<li><strong>{esc(item['run'])}</strong>: {esc(item['missing'])}</li>")
            continue
        if item.get("warning"):
            missing.append(f"<li><strong>{esc(item['run'])}</strong>: members and non-members differ. "
                           f"{esc(item['warning'])}</li>")
        for m in item["models"]:
            rule = "" if m["level"] in ("green", "incomplete") else (m["rule"] or "")
            key = next((k for k, v in RULES.items() if v == m["rule"]), m["rule"] or "")
            deciding = ": ".join(x for x in (m["attack"], m["figure"]) if x)
            if m["level"] in ("green", "incomplete"):
                deciding = m["detectable"] or m["statement"]
            rows.append(f'<tr class="verdict verdict-{esc(m["level"])}" valign="top"><td {cell}>{esc(item["run"])}</td>'
                        f'<td {cell}>{esc(m["label"])}</td><td {cell}>{_badge(m["level"])}</td>'
                        f'<td {cell} title="{esc(rule)}">{esc(key if rule else m["level"])}</td>'
                        f'<td {cell}>{esc(deciding)}</td>'
                        f'<td {cell}>{esc(strongest_attack(batteries.get((item["run"], m["label"]))))}</td></tr>')
            more = ([m["statement"]] + [f"also: {o}" for o in m["others"]]
                    + [f"not judged: {x}" for x in m["not_judged"]] + [f"not leakage: {x}" for x in m["population"]]
                    + ([f"not measured: {', '.join(m['not_measured'])}"] if m["not_measured"] else []))
            details.append(f"<li><strong>{esc(item['run'])} · {esc(m['label'])}</strong> ({esc(m['level'])}"
                           + (f"; {esc(rule)}" if rule else "") + "): " + esc("; ".join(more)) + "</li>")
    head = "".join(f"<th {cell}>{h}</th>" for h in ("run", "model", "verdict", "deciding rule",
                                                      "deciding figure (interval)",
                                                      "strongest membership attack, AUC [95% interval]"))
    out = (f'<table style="border-collapse:collapse"><tr>{head}</tr>' + "".join(rows) + "</table>") if rows else ""
    if missing:
        out += '<ul style="color:#555">' + "".join(missing) + "</ul>"
    if details:
        out += ("<details><summary>Every model's verdict in full (statement, further rules, what was not judged "
                "or measured)</summary><ul>" + "".join(details) + "</ul></details>")
    return out


#: the verdict's measured operating characteristic (benchmarks/verdict_error_rates.py --publish)
OPERATING_CHARACTERISTIC = Path(__file__).resolve().parents[1] / "audit" / "operating_characteristic.json"


def error_rates(path: str | Path | None = None) -> list[str]:
    """The verdict's measured false-alarm rate (null worlds: members and non-members both unseen) and power (planted
    leaks), one line each, from ``benchmarks/verdict_error_rates.py``'s published result; [] when there is none."""
    p = Path(path) if path is not None else OPERATING_CHARACTERISTIC
    try:
        oc = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []

    def share(x: dict, what: str) -> str:
        n = x["n"]
        k = n - x["levels"]["green"] if what == "non_green" else x["levels"]["red"]
        lo, hi = x[what]["ci95"]
        return f"{k} of {n} ({lo:.1%}–{hi:.1%})"

    commit = str(oc.get("commit"))
    head = f"measured at commit{'s' if ',' in commit else ''} {commit} on {oc.get('machine')}"
    lines = []
    for name, x in (oc.get("null_worlds") or {}).items():
        lines.append(f"False alarms, null world {name}: non-green {share(x, 'non_green')}, red {share(x, 'red')}")
    for name, x in (oc.get("power") or {}).items():
        y = x.get("membership and PII (no canaries)") or {}
        can = "; ".join(f"r = {r}: {c['detected']} of {c['n']}" for r, c in (x.get("canaries detected") or {}).items())
        lines.append(f"Power, {name} (40 of its members vs 40 unseen): non-green {share(y, 'non_green')}, red "
                     f"{share(y, 'red')}" + (f"; canaries detected {can}" if can else ""))
    return [f"{line} — {head}" for line in lines[:1]] + lines[1:] if lines else []


def thresholds_html(th: VerdictThresholds | None = None) -> str:
    rows = "".join(f"<li>{_badge(level)} {html.escape(text)}</li>" for level, text in thresholds(th))
    rates = error_rates()
    measured = ("<p><strong>Measured error rates of these rules</strong> (Clopper–Pearson 95% intervals; "
                "docs/methods.md §11.1):</p><ul>" + "".join(f"<li>{html.escape(x)}</li>" for x in rates) + "</ul>"
                if rates else "")
    return ('<p>The first level whose rule applies decides, in this order: red, amber (a significant test), '
            'incomplete, amber (a finding compared with nobody), green. What could not be judged is said beside '
            'significant evidence, never instead of it.</p>'
            f'<ul style="list-style:none;padding-left:0;line-height:1.9">{rows}</ul>' + measured)


def verdicts_frame(runs: Iterable) -> pd.DataFrame:
    """One row per run and audited model: level, deciding rule, attack, figure, statement (notebook 06)."""
    rows = [{"run": item["run"], "model": m["label"], "verdict": m["level"], "deciding rule": m["rule"],
             "attack": m["attack"] or "", "figure": m["figure"] or "",
             "statement": m["statement"] + (f" ({m['detectable']})" if m["level"] in ("green", "incomplete")
                                            and m["detectable"] else "")}
            for item in run_verdicts(runs) for m in item["models"]]
    return pd.DataFrame(rows, columns=["run", "model", "verdict", "deciding rule", "attack", "figure", "statement"])


__all__ = ["COLORS", "HEADLINES", "MISSING", "MISSING_BY_KIND", "OPERATING_CHARACTERISTIC", "RULES", "error_rates",
           "missing_verdict", "model_verdict", "run_verdicts", "strongest_attack", "thresholds", "thresholds_html", "verdicts_compact_html",
           "verdicts_frame", "verdicts_html"]
