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
from toolkit.report import build_report, collect_run, run_findings, thresholds_html, verdicts_html
from toolkit.results import results_table

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
# One line per step. A step whose output exists and was made from the same inputs is skipped ("cached"): change one
# setting and only the steps that depend on it run again.

# %%
result = run_experiment(cfg, work_dir, progress=False)
pd.DataFrame(result.manifest["steps"])[["name", "status", "seconds"]]

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
# ## 4. Did the models learn the identifiers?
# The audit masks (here: predicts) every word of every training note once. **Privacy** = share of identifier types
# the model never produces; **utility** = how often it gets ordinary words right. Epoch 0 is the base model before
# fine-tuning. Expect `clm` to lose privacy as it trains longer, and `ppclm` to keep it at a similar utility.

# %%
results = results_table(result.audits)
display(results.round(3))
plots.privacy_utility(results[results["strategy"] != "base"]).show()

# %% [markdown]
# ## 5. Can an attacker tell who was in the training data?
# For each patient the attacker counts how many of *their* rare words the model predicts on their notes. If the
# model memorised its training notes, members score higher than patients it never saw: the ROC curve leaves the
# dashed chance line. With 24 + 24 patients, false-positive rates below 1/24 cannot be measured (n/r).

# %%
last = {name: result.audits[(name, ckpts[-1][0])]["roc"] for name, ckpts in result.checkpoints.items()}
plots.roc_curves(last).show()
plots.tpr_table(last, with_ci=True)

# %% [markdown]
# ## 6. In plain words (computed from this run)

# %%
run = collect_run(work_dir)
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
