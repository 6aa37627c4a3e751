# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 00 — Quick start: does a language model remember the patients it learnt from?
#
# A hospital fine-tunes a language model on its clinical notes and would like to share the model. Before it does,
# its privacy office asks one question: **can the model give away who was in the notes?**
#
# In a few minutes this notebook walks through the whole audit on synthetic notes (every name and number in
# `data_samples/` is made up); the run itself takes about 80 s on a 2-core laptop CPU:
#
# 1. an experiment is a small YAML file (`configs/quickstart.yaml`): which notes, which model, which training
#    strategies, which audits;
# 2. `python -m toolkit run` — here its library entry point — finds the identifiers, trains a tiny GPT-2 twice
#    (`clm`: plain fine-tuning; `ppclm`: identifiers stay in the text but the model is never trained to write them),
#    and audits every checkpoint;
# 3. we look at what the models learnt, whether an attacker can tell who was in the training data, write the
#    report a privacy office reads, and end with its verdict per model (red / incomplete / amber / green).
#
# Everything is cached under `work_dir`: the first run trains (about 80 s on 2 cores; the tiny base model is copied
# from `prebuilt/`), later runs only read.
#
# **Executed copies contain text of the corpus, including identifiers: treat them like the corpus.** Once run, this
# notebook (and its HTML export under `outputs/`) shows notes, predictions and tables of the corpus it read: keep
# executed copies owner-only, never publish or share them, and commit the notebook stripped (`nbstripout`); the
# inventory of everything the toolkit writes, and how to delete it, is in `PRIVACY.md`.

# %% tags=["parameters"]
config = "../configs/quickstart.yaml"
work_dir = "../outputs/work/00_quickstart"
report_path = "../outputs/00_quickstart_report.html"
overrides = {}  # dotted config keys to change, e.g. {"training.epochs": [2, 4]}
show_identifiers = False

# %%
from pathlib import Path

import pandas as pd
from IPython.display import HTML, Markdown, display

from toolkit import plots
from toolkit.pipelines.lm_experiment import load_data, load_experiment, run_experiment
from toolkit.identifiers import load_identifiers
from toolkit.plots.attacks import ATTACK_NAMES, attack_name
from toolkit.plots.widgets import privacy_utility_explorer
from toolkit.report import build_report, collect_run, run_findings, thresholds_html, verdicts_html
from toolkit.results import evidence_table, results_table
from toolkit.results.evidence import disagreement, gain_texts, heldout_summary

plots.setup_notebook()
cfg = load_experiment(config, overrides)

# %% [markdown]
# ## 1. The experiment is data
# The config names the corpus and the roles of its splits (members are trained on, non-members are held out for the
# attack, the public split builds the small base model), the identifier definition (methods.md §2: `k`, `n`, the
# detector), the strategies and checkpoints, and the audits. A typo or an unknown strategy stops here with a message
# naming the file and the key.

# %%
pd.Series(cfg.summary(), name=cfg.name).to_frame()

# %% [markdown]
# ## 2. Run it
# One row per status of the run's steps (ran, cached, prebuilt), with the steps and their seconds. A step whose output
# exists and was made from the same inputs is skipped ("cached"):
# change one setting and only the steps that depend on it run again.

# %%
result = run_experiment(cfg, work_dir, progress=False, echo=False)
steps = pd.DataFrame(result.manifest["steps"])[["name", "status", "seconds"]]
steps.groupby("status").agg(n=("name", "size"), seconds=("seconds", "sum"), steps=("name", ", ".join))

# %% [markdown]
# ## 3. What the toolkit calls an identifier
# One training note, with **direct identifiers** (inside a PII span: names, dates, record numbers, places) in red and
# **indirect identifiers** (words used by a single patient: a rare drug, an unusual occupation) in blue. Both kinds
# can single a person out; pseudonymisation only removes the red ones.

# %%
ids = load_identifiers(Path(work_dir) / "identifiers_members")
note = load_data(cfg).members[0]
pos = ids["positions"][ids["positions"]["doc_id"] == note.doc_id]
marks = [(int(r.start), int(r.end), "both" if r.direct and r.indirect else "direct" if r.direct else "indirect")
         for r in pos.itertuples()]
display(HTML(plots.highlight_html(note.text, marks)))
s = ids["summary"]
print(f"{s['n_documents']} training notes about {s['n_individuals']} patients: {s['n_I_direct']} direct and "
      f"{s['n_I_indirect']} indirect identifier types, {s['share_protected_positions']:.0%} of all words")

# %% [markdown]
# ## 4. Did the models learn the identifiers — and anything that carries to unseen people?
# The audit predicts every word of every training note once. **Privacy** (the papers' metric) = share of identifier
# types the model never produces. **Utility** is measured twice: on the training notes (the papers' metric — it also
# rewards memorising those notes) and on **held-out** notes of people who were not in training, which is what
# fine-tuning taught about notes in general. Epoch 0 is the base model before fine-tuning, drawn as a star; the
# question is how privacy and held-out utility move as each strategy trains longer. For `ppclm`, the
# figure's legend gives its **gain retained**: the share of plain fine-tuning's held-out gain over the base model that
# it kept, (U − U_base) / (U_plain − U_base).

# %%
results = results_table(result.audits)
run = collect_run(work_dir)
evidence = evidence_table(run)
gains = gain_texts(evidence)
display(results.round(3))
plots.privacy_utility(results, gains=gains).show()
display(Markdown(heldout_summary(evidence) or "_Held-out utility was not measured in this run._"))

# %% [markdown]
# Explore: pick a strategy in the menu and move the checkpoint slider (they work in the saved HTML too); the figure
# above is the same view with every strategy and every checkpoint.

# %%
privacy_utility_explorer(results, gains=gains).show()

# %% [markdown]
# ## 5. Can an attacker tell who was in the training data?
# The papers' attack: for each patient the attacker counts how many of *their* rare words the model predicts on
# their notes. If the model memorised its training notes, members score higher than patients it never saw: the ROC
# curve leaves the dashed chance line (linear axes; the buttons switch to log axes). The run also attacked every
# model with a battery of loss-based attacks (loss, zlib, Min-K%, reference model), which do not need the model to
# *write* an identifier; the lines under the table put the two side by side, computed for this run.

# %%
last = {name: result.audits[(name, ckpts[-1][0])]["roc"] for name, ckpts in result.checkpoints.items()}
plots.roc_curves(last, log=False).show()
display(plots.tpr_table(last, with_ci=True, drop_unresolvable=True))
note = plots.tpr_table_note(last)
clashes = [line for _, r in evidence.iterrows() if (line := disagreement(r, ATTACK_NAMES))]
display(Markdown("\n".join(f"- {line}" for line in ([note] if note else []) + [
    f"{r['model']}: the papers' count attack AUC {r['count_auc']:.2f}; the strongest battery attack "
    f"({attack_name(r['strongest_attack'])}) AUC {r['attack_auc']:.2f}"
    for _, r in evidence.iterrows() if r["strongest_attack"] and pd.notna(r["count_auc"])] + clashes)))

# %% [markdown]
# ## 6. In plain words (computed from this run)
# The evidence each verdict of section 8 rests on, one line per model: its colour and deciding rule, the strongest
# attack with its 95% interval, held-out utility, gain retained, and the papers' own metrics beside them (labelled).

# %%
display(Markdown("\n".join(f"- {f}" for f in run_findings(run, results))))

# %% [markdown]
# ## 7. The report for the privacy office
# One self-contained HTML file: statistics, the figures above and more, the manifest (versions, seeds, data
# fingerprints, timings), and what the figures do and do not show. Identifiers appear only hashed.

# %%
out = build_report(work_dir, report_path, show_identifiers=show_identifiers)
display(HTML(f"Report: <a href='{out}' target='_blank'>{out}</a> ({out.stat().st_size / 1e6:.1f} MB, opens offline)"))

# %% [markdown]
# ## 8. The verdict
# Each audited model (the base model and each strategy's last checkpoint) gets a traffic light from fixed rules:
# **red** when an attack clearly finds leakage, **incomplete** (grey) when membership or PII inference was not measured
# or this many patients cannot resolve it, **amber** for signs of leakage, **green** when these attacks found none at
# this sample size — with the smallest AUC this many patients could have revealed. Green is not a certificate: a
# stronger attack or more patients could find what these did not. The same verdicts open the report.

# %%
display(HTML(verdicts_html([run], show_run=False)))
display(HTML("<details><summary>The rules and their thresholds</summary>" + thresholds_html() + "</details>"))

# %% [markdown] tags=["exercise"]
# **Exercise 1.** `ppclm` is never trained to write an identifier. Put, for every model, the papers' privacy and
# count-attack AUC beside the strongest battery attack and the verdict: which figure decides the colour, and why can
# a model keep its identifiers private and still give away who was in its training data?

# %% tags=["solution"]
evidence[["model", "privacy", "count_auc", "strongest_attack", "attack_auc", "attack_auc_low", "verdict",
          "verdict_rule"]].round(3)

# %% [markdown]
# The colour follows the verdict's rule (`verdict_rule`), which reads every attack; the papers' two figures read only
# what the model *writes*. Where privacy is high and the count attack near 0.5 but a loss-based attack is far above
# 0.5, the model fits its training notes better than unseen ones — membership shows without a single identifier
# written out.

# %% [markdown] tags=["exercise"]
# **Exercise 2.** Did fine-tuning teach anything that carries to unseen patients? Compute each checkpoint's held-out
# utility minus the base model's, and its training-note utility minus the base's.

# %% tags=["solution"]
base_row = results[results["strategy"] == "base"].iloc[0]
results.assign(heldout_gain=results["heldout_utility"] - base_row["heldout_utility"],
               training_gain=results["utility"] - base_row["utility"])[
    ["strategy", "epoch", "heldout_gain", "training_gain"]].round(3)

# %% [markdown]
# A training-note gain with no held-out gain is memorisation: the model got better at the notes it saw, not at
# notes in general. The sign of `heldout_gain` says which this run shows.

# %% [markdown] tags=["exercise"]
# **Exercise 3.** How many members does the strongest attack find while wrongly accusing at most 10% of
# non-members? Read it from the attack files of each model.

# %% tags=["solution"]
pd.DataFrame({label: {"strongest attack": m["attacks"]["strongest"],
                      "TPR at FPR 10%": m["attacks"]["attacks"][m["attacks"]["strongest"]]["tpr_at_fpr"].get("0.1"),
                      "members": m["attacks"]["n_members"]}
              for label, m in run.attack_models().items() if m.get("attacks")}).T

# %% [markdown]
# TPR × members is the number of members found at that false-alarm rate; with few non-members one false accusation
# already moves the FPR by 1/n, which is why lower FPRs are not shown.

# %% [markdown]
# ## Where next
# | notebook | what it adds |
# |---|---|
# | [01 — Identifier analysis](01_identifier_analysis.ipynb) | detectors against gold spans, `k` and `n` with sliders |
# | [02 — Masked-LM strategies](02_masked_lm_strategies.ipynb) | PPMLM and its baselines, DP-SGD, downstream utility |
# | [03 — Causal-LM strategies](03_causal_lm_strategies.ipynb) | PPclm and its baselines, free-running regurgitation |
# | [04 — E-mail addresses](04_rmft_and_extraction.ipynb) | the extraction attack, RMFT, PII-aware dedup, MaxTER / AURC |
# | [05 — Vocabulary scrubbing](05_vocabulary_scrubbing.ipynb) | name review by hand, scrubbing, the anonymity test |
# | [06 — Results and report](06_results_and_report.ipynb) | all runs side by side and the full report |
#
# From a terminal: `python -m toolkit run configs/quickstart.yaml --out runs/quickstart` then
# `python -m toolkit report runs/quickstart --out report.html`.

# %% [markdown] tags=["takeaway"]
# ### Take-away
# - A verdict reads every attack and rule; the papers' privacy and count attack read only what the model writes —
#   when they disagree, the verdict's evidence is the one to report.
# - Judge utility on held-out notes: utility on the training notes also rewards memorisation.
# - A private strategy is worth its cost only if it keeps some of plain fine-tuning's held-out gain (gain retained).
# - Green means "not detected by these attacks at this sample size", with the smallest AUC the sample could have seen.
# - Every figure and colour of this notebook is explained in the [cheat sheet](../docs/cheatsheet.md).
