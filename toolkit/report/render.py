"""Build the self-contained HTML audit report (``python -m toolkit report``) from finished run directories.

One HTML file, readable offline: the plotly.js bundle is inlined once in the page head and every figure is a
``<div>`` drawn by it (no CDN, no external file). At the top, the verdict of every audited model with the rules and
thresholds (:mod:`toolkit.report.verdicts`); then a plain-language summary (:func:`run_findings`), the sections
(:mod:`toolkit.report.sections`) per run, what the figures show and do not show (:data:`READING`) with the EDPB
framing of paper 000 §6 (:data:`EDPB`), a glossary, and an appendix with the technical material (manifests, package
versions, tables of hashed identifiers).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pandas as pd

from toolkit.audit.hashing import run_key
from toolkit.errors import ToolkitError
from toolkit.io import atomic_write_text
from toolkit.plots import runs as figures
from toolkit.plots.attacks import ATTACK_NAMES
from toolkit.results.collect import RunData, collect_run
from toolkit.results.evidence import evidence_table
from toolkit.results.evidence import findings as evidence_findings
from toolkit.results.layout import RunLayout
from toolkit.report.formatting import Identifiers, fmt, pct
from toolkit.report.glossary import colour_key, glossary
from toolkit.report.sections import audit_results, run_sections
from toolkit.report.verdicts import RULES, thresholds_html, verdicts_html


def run_findings(run: RunData, results: pd.DataFrame | None) -> list[str]:
    """Plain-language sentences computed from a run's numbers (nothing written in advance): the data, the base
    model's own leaks, then per audited model the evidence its verdict rests on — colour and deciding rule, the
    strongest attack with its interval, held-out utility, gain retained, the papers' metrics beside them and where
    they disagree (:func:`toolkit.results.evidence.findings`) —, then regurgitation, extraction and scrubbing."""
    out = []
    s = run.ids_summary.get("members")
    if s:
        out.append(f"The fine-tuning data hold {fmt(s.get('n_documents'))} documents about "
                   f"{fmt(s.get('n_individuals'))} individuals ({fmt(s.get('n_words'))} words) with "
                   f"{fmt(s.get('n_I_direct'))} direct and {fmt(s.get('n_I_indirect'))} indirect identifier types; "
                   f"{pct(s.get('share_protected_positions'))} of the word positions are identifiers.")
    if results is not None and len(results):
        base = results[results["strategy"] == "base"]
        if len(base):
            b = base.iloc[0]
            if int(b["n_leaked"]):
                out.append(f"Before fine-tuning, the base model already predicts {int(b['n_leaked'])} identifier types "
                           f"(privacy {b['privacy']:.3f}): those come from its own training data, not from the "
                           "audited documents.")
            else:
                out.append("Before fine-tuning, the base model predicts none of these identifier types.")
    if results is not None and len(results) and run.strategies:
        trained = []
        for strat in run.strategies:
            e = run.last(strat)[0]
            trained.append(f"{strat} after {e} epochs" if e is not None
                           else f"{strat} (fine-tuned outside this run: epochs unknown)")
        out.append("Checkpoints audited: " + "; ".join(trained) + ".")
    out += evidence_findings(evidence_table(run), names=ATTACK_NAMES, rules=RULES)
    out += _attack_conditions(run)
    if results is not None and len(results):
        last = {st: run.last(st)[1]["metrics"]["privacy"] for st in run.strategies}
        if len(last) > 1 and max(last.values()) == min(last.values()):
            out.append(f"At the last checkpoints every strategy has the same privacy ({max(last.values()):.3f}; the "
                       "papers' metric).")
        elif len(last) > 1:
            best, worst = max(last, key=last.get), min(last, key=last.get)
            out.append(f"At the last checkpoints, {best} keeps the most identifiers private ({last[best]:.3f}) and "
                       f"{worst} the fewest ({last[worst]:.3f}) — the papers' privacy, which says nothing of "
                       "membership.")
    for name, r in run.regurgitation.items():
        if r.get("share_reproduced") is not None:
            out.append(f"Writing freely from the first tokens of each note, {name} reproduced {r['n_reproduced']} of "
                       f"{r['n_identifier_occurrences']} later identifiers ({pct(r['share_reproduced'])}).")
    if run.extraction is not None and "ter" in run.extraction.columns and len(run.extraction):
        g = figures.group_column(run.extraction)
        parts = []
        for name, sub in run.extraction.groupby(g, sort=False):
            if "checkpoint" in sub.columns:
                sub = sub[sub["checkpoint"].astype(float) > 0].sort_values("checkpoint")
            if len(sub):
                last = sub.iloc[-1]
                parts.append(f"{str(name).rsplit('/', 1)[-1]} {float(last['ter']):.2f}%"
                             + (f" ({int(last['n_leaked'])} of {int(last['n_original'])} training addresses)"
                                if {"n_leaked", "n_original"} <= set(sub.columns) else ""))
        if parts:
            out.append("E-mail extraction, TER at the last checkpoint: " + "; ".join(parts) + ".")
    for item in run.aurc:
        rep = item["data"] or {}
        for name, a in (rep.get("aurc") or {}).items():
            t0 = (rep.get("infeasible_below") or {}).get(name)
            out.append(f"{name}: AURC {float(a):,.0f} %² over τ ≤ {rep.get('tau_max', float('nan')):g}% (the larger, the "
                       f"more extraction it removes for a given perplexity cost)"
                       + ("; no checkpoint within any τ" if t0 is None else
                          f"; no checkpoint costs less than {t0:.1f}% perplexity" if t0 > 0 else "") + ".")
    for item in run.anonymity:
        a = item["data"]
        if "n_name_like" in a and "n_predictions" in a:
            out.append(f"Anonymity test ({item['source']}): {a['n_name_like']} of {a['n_predictions']} predictions "
                       f"for masked names are name-like"
                       + (f" ({pct(a.get('share_name_like'), 2)})" if a.get("share_name_like") is not None else "")
                       + (f"; an original name was predicted in {a['n_original_name_predicted']} sentences"
                          if a.get("n_original_name_predicted") is not None else "") + ".")
    return out


def _attack_conditions(run: RunData) -> list[str]:
    """Per attacked model, what its membership attacks' figures rest on: how many attacks, members and non-members,
    the window (and the model's clipping of the one asked) and how the AUC intervals were computed."""
    out = []
    for label, m in run.attack_models().items():
        att = m.get("attacks") or {}
        reps = att.get("attacks") or {}
        if not reps:
            continue
        out.append(f"{label}: {len(reps)} membership attacks on {att.get('n_members')} members and "
                   f"{att.get('n_nonmembers')} non-members"
                   + (f"; window {att['window']} tokens" if att.get("window") else "")
                   + (f" of the {att['window_requested']} asked, the model's limit"
                      if att.get("window_requested", att.get("window")) != att.get("window") else "")
                   + ("; Hanley–McNeil interval, no bootstrap" if att.get("auc_ci_method") == "hanley-mcneil"
                      else f"; {att['n_bootstrap']} bootstrap resamples" if att.get("n_bootstrap") else "") + ".")
    return out


READING = [
    "What they show: how often this model, probed the way methods.md §4 describes, writes out the identifiers of the "
    "documents it was fine-tuned on (privacy), how well it predicts ordinary words (utility), whether a simple "
    "attacker who knows the data can tell the individuals it was trained on from others (membership inference), "
    "and — where present — how many training e-mail addresses targeted prompts extract and how many names remain "
    "predictable after vocabulary scrubbing.",
    "What they do not show: a privacy of 1.000 means that this probe never produced an identifier, not that no "
    "prompt, decoding method or stronger attack could. The papers' membership attack is a low-cost one (counts of "
    "predicted indirect identifiers, no shadow models) and the battery beside it (loss, zlib, Min-K%, Min-K%++, "
    "reference model) is not the strongest possible either: a green verdict means no leakage detected by these "
    "attacks at this sample size, and an AUC near 0.5 is no proof that membership cannot be inferred otherwise. "
    "Confidence intervals are wide with few individuals, and a false-positive rate below one over the number of "
    "non-members cannot be measured at all (n/r).",
    "Identifiers are what the detector found (or the corpus' gold annotation) plus words rarer than k: an "
    "identifier missed by the detector is neither protected in training nor counted as a leak (paper 000 §7). "
    "The figures cover the fine-tuning documents only: a pre-trained base model may reproduce personal data from "
    "its own pre-training, which these audits do not measure (the base model's row and novel privacy separate what "
    "fine-tuning added). Synthetic sample data and tiny CPU models show the direction of the effects, not the "
    "papers' absolute values.",
]

EDPB = [
    "Paper 000 situates these audits in the European Data Protection Board's Opinion 28/2024 on AI models: a model "
    "trained on personal data cannot be considered anonymous in all cases, and the data controller has to show "
    "that the likelihood of extracting personal data from it — including through queries — is insignificant, "
    "taking into account all the means reasonably likely to be used. Paper 000 §3 takes the position of an "
    "auditor who knows the training data and checks that it is not regurgitated.",
    "Paper 000 §6 adds that fine-tuning with privacy-preserving strategies protects the fine-tuning data but does "
    "not by itself make the model anonymous when the foundation model was not anonymised: personal data learnt in "
    "pre-training may still be regurgitated, and the model remains subject to the conditions the EDPB sets for its "
    "re-use.",
    "This report is technical evidence for one part of such an assessment — measured leakage of the fine-tuning "
    "data under the stated probes and attacks. It is not a legal determination that a model is anonymous or that "
    "its use is lawful; that assessment belongs to the controller and, where relevant, the supervisory authority.",
]


# ---------------------------------------------------------------------------------------------------------------------
# assembly


def _run_context(run: RunData, i: int, show_identifiers: bool) -> dict[str, Any]:
    ids = Identifiers(True) if show_identifiers else Identifiers(False, run_key(run.path))  # the run's own key
    results = audit_results(run)
    main, absent, appendix, manifest = [], [], [], []
    for sec in run_sections(run, results, ids):
        kept = [b for b in sec["blocks"] if not b.get("appendix")]
        moved = [b for b in sec["blocks"] if b.get("appendix")]
        if sec["appendix"]:
            manifest.append(sec)
        elif kept and all(b["kind"] == "absent" for b in kept):  # one line at the end of the run, not a section
            absent.append({"title": sec["title"], "body": " ".join(str(b["body"]) for b in kept)})
        elif kept:
            main.append({**sec, "blocks": kept})
        if moved:  # tables of hashed identifiers: technical material
            appendix.append({"id": f"{sec['id']}-identifiers", "blocks": moved,
                             "title": f"{sec['title']}: identifiers" + ("" if ids.show else " (hashed)")})
    kind_text = {"mlm": "masked LM (fill-mask probe)", "clm": "causal LM (teacher-forced next-word probe)"}
    return {"id": f"run{i + 1}", "label": run.label, "path": str(run.path), "kind": run.kind,
            "kind_text": kind_text.get(run.kind, run.kind), "description": (run.config or {}).get("description"),
            "sections": main, "absent": absent, "appendix": appendix + manifest,
            "findings": run_findings(run, results)}


def run_status_warnings(runs: list[RunData]) -> list[str]:
    """One sentence per run whose ``manifest.json`` does not say ``done``: a run killed or still going
    (``running``) or stopped by an error (``failed``); one per model an audit folder started on and holds no verdict
    for (:meth:`~toolkit.results.layout.RunLayout.unfinished_models`). The report then covers only the steps that
    finished."""
    out = []
    for run in runs:
        m = run.manifest
        if not m or m.get("status") == "done":
            continue
        n_steps = len(m.get("steps") or [])
        if m.get("status") == "failed":
            # the exception's type only: a library's message may quote data
            what = "stopped with an error" + (f" ({str(m['error']).split(':')[0]})" if m.get("error") else "")
        else:
            what = (f"did not finish: it was interrupted, or was still running when this report was made "
                    f"(status {m.get('status')!r}, started {m.get('started')})")
        out.append(f"Run {run.label} {what}. Only the {n_steps} steps it recorded are reported; figures, verdicts "
                   "and strategies of the steps it did not reach are missing, not passed.")
    for run in runs:  # an audit folder (`python -m toolkit audit`): a model started on and left without a verdict
        for label in RunLayout(run.path).unfinished_models():
            out.append(f"The audit of model {label} did not finish (interrupted, or stopped by an error, before its "
                       "attacks were done): it has no verdict — missing, not passed. Run the audit again to finish "
                       "it.")
    return out


def _toolkit_version() -> str:
    """The installed toolkit's version ("" when it is not installed as a package)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("lm-anonymity-toolkit")
    except PackageNotFoundError:
        return ""


def render_report(runs: list[RunData], *, show_identifiers: bool = False, title: str | None = None,
                  frontiers: list[str | Path] = ()) -> str:
    """The report's HTML for already collected runs and frontier directories (:mod:`toolkit.report.frontier`)."""
    import jinja2
    from plotly.offline import get_plotlyjs

    from toolkit.report.template import TEMPLATE

    from toolkit.report.frontier import frontier_context
    from toolkit.results.frontier import GAIN_GOAL

    if not runs and not frontiers:
        raise ToolkitError("no run to report on")
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    markup = jinja2.utils.markupsafe.Markup
    strategies = ["base", *[m.get("strategy") or k for r in runs for k, m in r.attack_models(False).items()],
                  *[s for r in runs for s in r.strategies]]
    return env.from_string(TEMPLATE).render(
        incomplete=run_status_warnings(runs),
        verdicts_html=markup(verdicts_html(runs, show_run=len(runs) > 1 or not runs[0].verdicts) if runs else
                             "<p>No run directory given: the frontier's verdicts are in its table below.</p>"),
        frontiers=[frontier_context(f) for f in frontiers], gain_goal=f"{GAIN_GOAL:.0%}",
        thresholds_html=markup(thresholds_html()), glossary=glossary(), colours=colour_key(strategies),
        title=title or "Language-model anonymity audit report", version=_toolkit_version(),
        generated=time.strftime("%Y-%m-%d %H:%M:%S %Z"), show_identifiers=show_identifiers,
        plotly_js=jinja2.utils.markupsafe.Markup(get_plotlyjs()),
        runs=[_run_context(r, i, show_identifiers) for i, r in enumerate(runs)], reading=READING, edpb=EDPB)


def build_report(run_dirs, out: str | Path, *, show_identifiers: bool = False, title: str | None = None,
                 labels: list[str] | None = None) -> Path:
    """Collect ``run_dirs`` (one path or several; a frontier directory — one holding ``frontier.json`` — becomes the
    report's frontier section) and write the report to ``out`` atomically."""
    from toolkit.report.frontier import is_frontier_dir

    given = [run_dirs] if isinstance(run_dirs, (str, Path)) else list(run_dirs)
    named = list(zip(given, labels or [None] * len(given)))
    frontiers = [d for d, _ in named if is_frontier_dir(d)]
    runs = [collect_run(d, label) for d, label in named if not is_frontier_dir(d)]
    seen: dict[str, int] = {}
    for r in runs:  # distinct labels for the navigation
        seen[r.label] = seen.get(r.label, 0) + 1
        if seen[r.label] > 1:
            r.label = f"{r.label} ({seen[r.label]})"
    return atomic_write_text(render_report(runs, show_identifiers=show_identifiers, title=title, frontiers=frontiers),
                             out)


__all__ = ["EDPB", "READING", "build_report", "render_report", "run_findings", "run_status_warnings"]
