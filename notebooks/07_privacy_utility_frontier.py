# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 07 — The privacy–utility frontier: how much of what fine-tuning learns can a green recipe keep?
#
# Notebooks 02 and 03 audit each strategy on one corpus. This one asks the question no paper answers: of the
# fine-tuning recipes whose model is **green under every attack** of the audit (membership incl. RMIA, PII inference,
# canaries, regurgitation; methods.md §10–11), which keeps the largest share of what plain fine-tuning (`clm`, same
# epochs) learns — its **gain retained**, (U − U_base) / (U_plain − U_base), U the held-out utility on notes the
# model never saw (methods.md §4): 0% is the untouched base model, 100% plain fine-tuning? And how does that share
# move with ε and the corpus size? (The ratio to plain, U / U_plain, is shown beside it; it starts from the base,
# not from zero, so it is not the question.)
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
current_rules_dirs = ["../docs/data/frontier_reserve/reserve1000", "../docs/data/frontier_reserve/rates1000"]  # shipped
# frontiers at 1,000 individuals judged under the current verdict rules (section 5; [] to skip)

# %%
from pathlib import Path

import pandas as pd
from IPython.display import HTML, Markdown, display

from toolkit import plots
from toolkit.plots.frontier import frontier_explorer, frontier_figure
from toolkit.report import build_report
from toolkit.report.frontier import RETIRED_RULES, base_sentence, gain_sentences, shown_table, verdicts_judged
from toolkit.report.verdicts import RULES
from toolkit.results.frontier import load_frontier_result

plots.setup_notebook()
pd.set_option("display.max_colwidth", None)  # the rules in plain words, in full
if run:
    import subprocess
    import sys

    frontier_dir = "../outputs/work/07_frontier"
    cmd = [sys.executable, "-m", "toolkit", "frontier", "../configs/frontier.yaml", "--out", frontier_dir, "--quiet"]
    subprocess.run(cmd + (["--sizes", str(sizes)] if sizes else []), check=True)
result = load_frontier_result(frontier_dir)
table = result.table.assign(verdict_judged=verdicts_judged(result))
print(f"{Path(frontier_dir).resolve().name}: {len(table)} models, corpus sizes {sorted(set(table['size']))}, "
      f"{sum(result.seconds.values()) / 60:.0f} min of compute (each step once, as its manifest recorded it)")

# %% [markdown]
# **Under which rules were these verdicts judged?** A verdict is stored in the table as it was judged when the table
# was written. A table judged under older rules says so (`verdicts_judged` in `frontier.json`), and a deciding rule
# the current rules no longer have marks its row too; such rows cannot be re-judged without the runs' attack results,
# which a shipped table does not hold (docs/data/frontier/README.md).

# %%
older = table["verdict_judged"] != "current rules"
display(Markdown(f"**{int(older.sum())} of {len(table)}** rows were judged under older rules" + (
    f": {result.verdicts_judged['rules']}." if result.verdicts_judged else ".") + (
    " Their colours are shown as they were judged; read them as the older rules' answer, not today's."
    if older.any() else " Every verdict is the current rules' answer.")))

# %% [markdown]
# ## 1. The frontier
# Each marker is one model: its **gain retained** (y; 0 = the base model, 1 = plain fine-tuning) against the AUC of
# the strongest membership attack on it (x; 0.5 = chance). A model near chance is not yet green: only its verdict
# (hover, and the table below) says whether *every* attack — PII inference, canaries and regurgitation included —
# found nothing. The second figure shows the ratio to plain for comparison: its black point or dotted line per size
# is the base model before any fine-tuning, the level the ratio starts from (the sentence above the table in section
# 3 gives it). Below them, an ε dropdown and the choice of y axis redraw the figure (needs a kernel).

# %%
frontier_figure(table, y_col="heldout_gain_retained").show()
frontier_figure(table).show()
frontier_explorer(table)

# %% [markdown]
# ## 2. The best green private recipe per corpus size
# Of the private (DP) models whose verdict is green, the one with the largest gain retained (its 95% interval where
# the runs' predictions were at hand); where none is green, the one keeping the most, with its verdict.

# %%
display(Markdown("\n".join(f"- {s}" for s in gain_sentences(table, result.plain))
                 + ("\n\n_Verdicts judged under older rules (see above)._" if older.any() else "")))

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
shown_table(table).assign(**{"verdict judged under": table["verdict_judged"]}).round(3)

# %% [markdown]
# ## 4. What keeps each model from green
# The deciding rule of every verdict that is not green, in plain words: membership (an attack separates members),
# PII inference, canaries, regurgitation or the one-run audit. The rules and their thresholds are printed at the top
# of the report.

# %%
blocked = table[table["verdict"] != "green"]
rules = blocked.groupby("verdict_rule", dropna=False).agg(models=("strategy", "size"),
                                                          strategies=("strategy", lambda s: ", ".join(sorted(set(s)))))
rules.index = [RULES.get(r, str(r)) + (" (a rule of older verdicts, no longer applied)" if r in RETIRED_RULES else "")
               for r in rules.index]
rules if len(rules) else Markdown("_Every model is green._")

# %% [markdown]
# ## 5. The current rules' answer at 1,000 individuals
# The shipped frontiers of `current_rules_dirs` were judged under the current verdict rules (their strategies' learning
# rates searched on a public reserve, docs/data/frontier_reserve/README.md; not the same runs as the table above).

# %%
current = []
for d in current_rules_dirs:
    if Path(d, "frontier.json").is_file():
        r = load_frontier_result(d)
        current.append(r.table.assign(verdict_judged=verdicts_judged(r), source=Path(d).name))
if current:
    both = pd.concat(current, ignore_index=True)
    both = both[~(both["strategy"].eq("clm") & both.duplicated(["size", "strategy"]))]  # plain: in both tables
    display(Markdown(f"{len(both)} models; judged under the current rules: "
                     f"{int((both['verdict_judged'] == 'current rules').sum())}.\n\n"
                     + "\n".join(f"- {s}" for s in gain_sentences(both, "clm"))))
else:
    display(Markdown("_No frontier of `current_rules_dirs` found._"))

# %% [markdown]
# ## 5. The report
# The same figure, table and sentences as a section of the audit report (`python -m toolkit report FRONTIER_DIR`;
# given beside run directories, it is one section of their report).

# %%
out = build_report([frontier_dir], report_path, title="Privacy–utility frontier")
display(HTML(f'Report written: <a href="{out}">{out}</a>'))

# %% [markdown] tags=["exercise"]
# **Exercise 1.** Raise ε: what does DP keep? For every private strategy and corpus size, list the gain retained at
# each ε, and whether it grows with ε.

# %% tags=["solution"]
private = table[table["dp"].astype(bool)]
by_eps = private.pivot_table(index=["size", "strategy"], columns="epsilon", values="heldout_gain_retained")
display(by_eps.round(3))
grows = pd.Series({k: r.dropna().is_monotonic_increasing for k, r in by_eps.iterrows()}, dtype=bool)
display(Markdown(f"The gain retained grows with ε for {int(grows.sum())} of {len(grows)} strategy–size pairs"
                 + (f"; not for {', '.join(f'{s} at {n}' for n, s in grows[~grows].index)}" if (~grows).any() else "")
                 + "."))

# %% [markdown]
# *Reading*: a larger ε adds less noise, so more of the gain may be kept; a non-monotone row can be within the
# runs' noise (compare the intervals in section 3).

# %% [markdown] tags=["exercise"]
# **Exercise 2.** Which verdicts of this table would a reader have to re-judge under the current rules, and which
# of their deciding rules no longer exist?

# %% tags=["solution"]
stale = table[table["verdict_judged"] != "current rules"]
display(stale[["size", "strategy", "epsilon", "verdict", "verdict_rule"]])
gone = sorted(set(stale["verdict_rule"]) & RETIRED_RULES)
display(Markdown(f"{len(stale)} of {len(table)} rows were judged under older rules; of their deciding rules "
                 + (", ".join(f"`{r}`" for r in gone) if gone else "none") + " no longer exist."))

# %% [markdown]
# *Reading*: a verdict is only as current as the rules that judged it; the frontiers of section 5 show the current
# rules' answer.

# %% [markdown] tags=["takeaway"]
# ### Take-away
# - The frontier's question is the gain retained by a green model: 0% is the base model, 100% plain fine-tuning.
# - The ratio to plain starts from the base model's utility, not from zero; it flatters a model that learnt little.
# - Green means no attack of the battery found leakage at this sample size; it is judged per model.
# - A stored verdict is the answer of the rules that judged it; a table judged under older rules says so.
# - Glossary, figures and colours: the [cheat sheet](../docs/cheatsheet.md).
