# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 07 — The privacy–utility frontier: is any recipe green under every attack at useful utility?
#
# Notebooks 02 and 03 audit each strategy on one corpus. This one asks the question no paper answers: is there a
# fine-tuning recipe whose model is **green under every attack** of the audit (membership incl. RMIA, PII inference,
# canaries, regurgitation; methods.md §10–11) while keeping **at least 0.9× the held-out utility** of plain
# fine-tuning (`clm`, same epochs; utility on notes the model never saw, methods.md §4)? And from which corpus size
# on does differential privacy make that possible?
#
# `python -m toolkit frontier configs/frontier.yaml` trains and audits every strategy (`clm`, `ppclm`,
# `ppclm_surrogate`, and with DP-SGD per individual `clm_dp`, `ppclm_surrogate_dp`) at every target ε (1, 4, 8, 16;
# ∞ = no DP) for each corpus size, on generated clinical notes, with the tiny GPT-2 of the CPU profile. That takes
# longer than a notebook should (the times are in `docs/results.md`), so by default this notebook **reads** the
# frontier measured and shipped in `docs/data/frontier/` (its commit, machine and run time are in `docs/results.md`);
# set `frontier_dir` to your own `toolkit frontier` output to read that instead, or `run = True` to run the config
# here first.
#
# **Executed copies contain text of the corpus, including identifiers: treat them like the corpus.** This notebook
# shows only aggregates (utilities, AUCs, ε's, verdicts) of generated notes by default; with `run = True` on your own
# corpus it runs experiments whose folders hold notes and predictions: keep executed copies and run folders
# owner-only, and commit the notebook stripped (`PRIVACY.md` lists every file and how to delete it).

# %% tags=["parameters"]
profile = "cpu"  # passed by `make demo` to every notebook (the frontier's profile is in its config)
frontier_dir = "../docs/data/frontier"  # a `python -m toolkit frontier` output directory (frontier.json)
run = False  # True: run configs/frontier.yaml into ../outputs/work/07_frontier first (see docs/results.md for its time)
sizes = None  # with run = True: the corpus sizes to run, comma-separated (None: every size of the config)
report_path = "../outputs/frontier_report.html"

# %%
from pathlib import Path

from IPython.display import HTML, Markdown, display

from toolkit import plots
from toolkit.plots.frontier import frontier_figure
from toolkit.report import build_report
from toolkit.report.frontier import base_sentence, best_sentences, shown_table
from toolkit.results.frontier import load_frontier_result

plots.setup_notebook()
if run:
    import subprocess
    import sys

    frontier_dir = "../outputs/work/07_frontier"
    cmd = [sys.executable, "-m", "toolkit", "frontier", "../configs/frontier.yaml", "--out", frontier_dir, "--quiet"]
    subprocess.run(cmd + (["--sizes", str(sizes)] if sizes else []), check=True)
result = load_frontier_result(frontier_dir)
table = result.table
print(f"{Path(frontier_dir).resolve().name}: {len(table)} models, corpus sizes {sorted(set(table['size']))}, "
      f"{sum(result.seconds.values()) / 60:.0f} min of compute (each step once, as its manifest recorded it)")

# %% [markdown]
# ## 1. The frontier
# Each marker is one model: its held-out utility relative to `clm` of the same corpus size (y) against the AUC of
# the strongest membership attack on it (x; 0.5 = chance). The shaded region is the goal. A model inside it is not
# yet green: only its verdict (hover, and the table below) says whether *every* attack — PII inference, canaries and
# regurgitation included — found nothing.
#
# The black point per size is the **base model** before any fine-tuning (a dotted line at its height where its attack
# AUC was not recorded, as in the shipped frontier): fine-tuning starts from there, not from zero. At 1,000 individuals it is
# already at 0.83× plain, so a DP model at 0.84× looks close to the 0.9× goal while it kept about a tenth of what
# plain fine-tuning learnt. The hover text gives each model's **gain retained**, (U − U_base) / (U_plain − U_base).

# %%
frontier_figure(table).show()

# %% [markdown]
# ## 2. The best recipe per corpus size

# %%
display(Markdown("\n".join(f"- {s}" for s in best_sentences(result.best, result.plain))))

# %% [markdown]
# ## 3. Every model
# `× plain`: held-out utility divided by `clm`'s at the same size (training-note utility beside it); `gain retained`:
# (U − U_base) / (U_plain − U_base), the share of `clm`'s held-out gain over the untouched base model that the model
# kept (100%: all of it, 0%: none, below 0: worse than the base; n/a where the base's utility is not recorded or
# equals `clm`'s; its 95% interval in brackets, a bootstrap over the held-out individuals, where the runs' predictions were at hand); `TPR@1% FPR`: the largest over the battery's attacks
# (unresolvable with fewer than 100 non-members); `PII top-1` against its chance level (in brackets); `max canary
# exposure` in bits (of ≈ 26.6 possible); the one-run audit's empirical ε lower bound
# (95%) beside the DP accountant's ε — an empirical bound above what the accountant allows would mean a broken DP
# implementation (methods.md §10).

# %%
display(Markdown(base_sentence(table, result.plain)))
shown_table(table).round(3)

# %% [markdown]
# ## 4. What keeps each model from green
# The deciding rule of every verdict that is not green, in plain words: membership (an attack separates members),
# PII inference, canaries, regurgitation or the one-run audit. The rules and their thresholds are printed at the top
# of the report.

# %%
from toolkit.report.verdicts import RULES

blocked = table[table["verdict"] != "green"]
rules = blocked.groupby("verdict_rule", dropna=False).agg(models=("strategy", "size"),
                                                          strategies=("strategy", lambda s: ", ".join(sorted(set(s)))))
rules.index = [RULES.get(r, str(r)) for r in rules.index]
rules if len(rules) else Markdown("_Every model is green._")

# %% [markdown]
# ## 5. The report
# The same figure, table and sentences as a section of the audit report (`python -m toolkit report FRONTIER_DIR`;
# given beside run directories, it is one section of their report).

# %%
out = build_report([frontier_dir], report_path, title="Privacy–utility frontier")
display(HTML(f'Report written: <a href="{out}">{out}</a>'))
