# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 06 — Results side by side, and the audit report
#
# The earlier notebooks each leave a finished run on disk (`../outputs/work/…`): the masked-LM strategies (02), the
# causal-LM strategies (03), the e-mail extraction experiment (04) and the vocabulary scrubbing (05), and the quick
# start (00). Nothing is trained or probed here: this notebook **reads** those runs, shows the **verdict** of every
# audited model (red / incomplete / amber / green, from its attack results), draws the runs next to each other
# (membership-inference ROC, privacy–utility trade-offs, MaxTER/AURC) with widgets to pick runs, strategies and
# checkpoints, and writes the **audit report**: one self-contained HTML file a privacy office can open offline
# (`python -m toolkit report RUN_DIR … --out report.html` does the same from the command line).
#
# A run that has not been made yet is skipped with a message: run its notebook (or `python -m toolkit run
# configs/….yaml`) and come back.
#
# **Executed copies contain text of the corpus, including identifiers: treat them like the corpus.** Once run, this
# notebook (and its HTML export under `outputs/`) shows notes, predictions and tables of the corpus it read: keep
# executed copies owner-only, never publish or share them, and commit the notebook stripped (`nbstripout`); the
# inventory of everything the toolkit writes, and how to delete it, is in `PRIVACY.md`.

# %% tags=["parameters"]
run_dirs = {
    "00 quick start": "../outputs/work/00_quickstart",
    "02 masked LM": "../outputs/work/02_masked_lm",
    "03 causal LM": "../outputs/work/03_causal_lm",
    "04 e-mail extraction": "../outputs/work/04_rmft_extraction",
    "05 vocabulary scrubbing": "../outputs/work/05_vocabulary_scrubbing",
}  # label -> run directory (a `python -m toolkit run` output or a notebook work directory)
report_path = "../outputs/report.html"
show_identifiers = False  # True prints leaked identifiers in clear: the report is then personal data

# %%
from pathlib import Path

import pandas as pd
from IPython.display import HTML, Markdown, display

from toolkit import plots
from toolkit.plots.widgets import roc_explorer
from toolkit.errors import ToolkitError
from toolkit.report import build_report, collect_run, run_findings, verdicts_frame, verdicts_html
from toolkit.plots.runs import (aurc_by_group, extraction_figure, last_checkpoints, maxter_figure,
                                    results_frame, roc_reports)

plots.setup_notebook()
pd.set_option("display.max_colwidth", None)  # table cells in full (the rules in plain words)

# %% [markdown]
# ## 1. Which runs are there?

# %%
runs, status = [], {}
for label, path in run_dirs.items():
    if not Path(path).is_dir():
        status[label] = "missing: skipped (run its notebook first)"
        continue
    try:
        runs.append(collect_run(path, label))
        status[label] = "found"
    except ToolkitError as exc:
        status[label] = f"skipped: {exc}"
display(pd.Series(status, name="status").to_frame())
if not runs:
    display(Markdown("**No finished run found.** Run notebooks 00–05 (or `make demo`) first; the sections below "
                     "stay empty."))

# %% [markdown]
# ## 2. The verdicts
# Every audited model of every run, from its attack results: **red** when an attack clearly finds leakage,
# **incomplete** (grey) when membership or PII inference was not measured or the sample cannot resolve it, **amber**
# for signs of it, **green** when these attacks found none at this sample size (with the smallest AUC the sample
# could have revealed; never a certificate). One row per model: its colour, the deciding rule (hover for it in plain
# words) with its figure, and the strongest membership attack's AUC with its 95% interval; every model's full verdict
# is folded below the table.
# A run without verdicts says why, in the words of its kind: the e-mail extraction run (04) and the vocabulary
# scrubbing run (05) run no attack battery by design — they are judged by their own measures (section 6, and 05's
# anonymity test in the report) — and a run audited before the attack battery existed has none. The report opens
# with the same verdicts, in full, and prints the rules with their thresholds.

# %%
verdicts = verdicts_frame(runs)
if runs:
    display(HTML(verdicts_html(runs, compact=True)))
    if not len(verdicts):
        display(Markdown("_No run has attack results yet: no verdict._"))
    for run in runs:
        battery = run.attack_models()
        if battery:
            plots.attack_roc_grid(battery, title=f"{run.label}: every attack, last checkpoints (ROC, log-log)").show()
else:
    display(Markdown("_No verdict: no finished run._"))

# %% [markdown]
# ## 3. Every strategy at its last checkpoint
# Privacy = share of identifier types the model never predicts when every word of its training notes is probed;
# utility = accuracy on ordinary words; `mia_auc` = how well the count-based attack separates members from
# non-members (0.5 = chance). Epoch 0 is the base model before fine-tuning.
#
# A column no run measured (all empty) is left out, and named above the table; an empty cell (NaN) left in a shown
# column is a figure that run did not measure (e.g. held-out utility of a run made before it was recorded).

# %%
summary = last_checkpoints(runs)
empty = [c for c in summary.columns if summary[c].isna().all()] if len(summary) else []
if len(summary) and empty:
    display(Markdown("Not measured by any run here, left out: " + ", ".join(f"`{c}`" for c in empty) + "."))
summary.drop(columns=empty).round(3) if len(summary) else Markdown("_No audited checkpoint in the runs found._")

# %% [markdown]
# ## 4. Privacy–utility trade-offs
# One line per strategy (and run), a point per checkpoint. The runs use different models and probes (fill-mask for
# a masked LM, next word for a causal LM), so compare strategies *within* a run; across runs compare directions.

# %%
points = results_frame(runs)
points = points[points["strategy"] != "base"] if len(points) else points
if len(points):
    points = points.assign(strategy=points["run"] + ": " + points["strategy"])
    plots.privacy_utility(points).show()
else:
    display(Markdown("_No trade-off to draw._"))

# %% [markdown]
# ## 5. Membership inference — pick a run, strategies and a checkpoint
# The widgets redraw the ROC (log-log axes, dashed chance line) and the TPR at fixed FPR. Below them, for a static
# copy of this notebook (widgets need a kernel), every run's last checkpoints are drawn as well.

# %%
audited = [r for r in runs if r.has_audits]


if audited:
    display(roc_explorer(audited))
    for run in audited:  # what the pickers show, for every run: kept by the exported (static) notebook
        reports = roc_reports(run, None, "last")
        if reports:
            plots.roc_curves(reports, title=f"{run.label}: membership attack ROC, last checkpoints").show()
            display(plots.tpr_table(reports, with_ci=True))
else:
    display(Markdown("_No membership-inference results in the runs found._"))

# %% [markdown]
# ## 6. E-mail extraction: TER per checkpoint, MaxTER and AURC (paper 002)
# How many training addresses greedy continuations of training prompts write out (TER), and — for RMFT and
# deduplication against the plain baseline — the largest TER drop reachable within a perplexity budget τ (MaxTER;
# AURC is the area under it).

# %%
shown = False
for run in runs:
    if run.extraction is not None and len(run.extraction):
        extraction_figure(run.extraction).update_layout(title=f"{run.label}: extraction rate per checkpoint").show()
        shown = True
    if run.maxter is not None and len(run.maxter):
        fig = maxter_figure(run.maxter, aurc_by_group(run.aurc))
        if fig is not None:
            fig.update_layout(title=f"{run.label}: MaxTER").show()
            shown = True
if not shown:
    display(Markdown("_No extraction results found (notebook 04 writes them)._"))

# %% [markdown]
# ## 7. What the runs show (computed from their numbers)

# %%
for run in runs:
    findings = run_findings(run, results_frame([run]).drop(columns="run") if run.has_audits else None)
    display(Markdown(f"**{run.label}**\n\n" + ("\n".join(f"- {f}" for f in findings) or "- no audit results")))

# %% [markdown]
# ## 8. The audit report
# One HTML file that opens with the verdicts, then every section (the attacks, corpus and identifier statistics,
# strategies, trade-offs, ROC and TPR@FPR, regurgitation, extraction, vocabulary review and anonymity test), a
# plain-language reading of what the figures show and do not show, a glossary, and an appendix with the technical
# material (manifests, package versions, hashed identifiers). Identifiers are hashed unless `show_identifiers`.

# %%
if runs:
    out = build_report([r.path for r in runs], report_path, show_identifiers=show_identifiers,
                       labels=[r.label for r in runs])
    display(HTML(f"Report written: <a href='{out}' target='_blank'>{out}</a> "
                 f"({out.stat().st_size / 1e6:.1f} MB, {len(runs)} run(s), opens offline)"))
else:
    display(Markdown("_No report written: no finished run._"))

# %% [markdown] tags=["exercise"]
# **Exercise 1.** How many models of each run are red, amber, incomplete and green?

# %% tags=["solution"]
if len(verdicts):
    counts = pd.crosstab(verdicts["run"], verdicts["verdict"])
    display(counts)
    display(Markdown("; ".join(f"**{run}**: " + ", ".join(f"{int(n)} {level}" for level, n in row.items() if n)
                               for run, row in counts.iterrows()) + "."))
else:
    display(Markdown("_No verdict in the runs found: run 00, 02 or 03 first._"))

# %% [markdown]
# *Reading*: a green model is one the attacks did not find at this sample size (see its smallest detectable AUC), not
# a model shown to be safe.

# %% [markdown] tags=["exercise"]
# **Exercise 2.** Which deciding rules keep the non-green models from green, and how often does each decide?

# %% tags=["solution"]
blocked = verdicts[verdicts["verdict"] != "green"] if len(verdicts) else verdicts
by_rule = blocked.groupby("deciding rule").size().sort_values(ascending=False) if len(blocked) else None
if by_rule is not None:
    display(by_rule.to_frame("models"))
    display(Markdown(f"{len(by_rule)} rule(s) decide the {len(blocked)} non-green verdicts; the most frequent "
                     f"decides {int(by_rule.iloc[0])}."))
else:
    display(Markdown("_No non-green verdict in the runs found._"))

# %% [markdown]
# *Reading*: the first rule that applies decides, in the order red, incomplete, amber, green; the report lists them.

# %% [markdown] tags=["takeaway"]
# ### Take-away
# - Every audited model gets one colour from a family of hypothesis tests: red, incomplete, amber or green.
# - The deciding rule and the strongest attack's figure say why; the report gives every rule with its threshold.
# - Green means no attack found leakage at this sample size, with the smallest AUC it could have detected.
# - Runs without an attack battery (04, 05) are judged by their own measures, not by a colour.
# - Glossary, figures and colours: the [cheat sheet](../docs/cheatsheet.md).
