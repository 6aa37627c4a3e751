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
# model never saw (methods.md §4): 0% is the untouched base model, 100% plain fine-tuning? Does one keep at least the
# goal `GAIN_GOAL` (`toolkit.results.frontier`, 50%)? And how does that share move with ε and the corpus size? Where
# plain fine-tuning's held-out utility is not (significantly) above the base's, the gain retained is undefined and
# the notebook says so. (Held-out utility itself and its ratio to plain, U / U_plain, are shown beside it; the ratio
# starts from the base, not from zero, so it is not the question. Utility on the training notes, the papers'
# metric, is labelled where shown: it also rewards memorising them.)
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
reserve_dirs = ["../docs/data/frontier_reserve/reserve1000", "../docs/data/frontier_reserve/rates1000"]  # shipped
# frontiers at 1,000 individuals with rates searched on a public reserve (section 5; [] to skip)

# %%
from pathlib import Path

import pandas as pd
from IPython.display import HTML, Markdown, display

from toolkit import plots
from toolkit.plots.frontier import frontier_explorer, frontier_figure
from toolkit.report import build_report
from toolkit.report.frontier import (RETIRED_RULES, base_sentence, best_sentences, gain_sentences, rules_sentence,
                                     shown_table, verdict_sentences, verdicts_judged)
from toolkit.report.verdicts import RULES
from toolkit.results.frontier import GAIN_GOAL, best_recipes, epsilon_text, load_frontier_result

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
# **Under which rules were these verdicts judged?** A verdict is stored in the table as it was judged when its run
# finished, with the rules that judged it (`rules_version`, `toolkit.audit.verdict.RULES_VERSION`). A row counts as
# judged under the current rules only where it records them; a table whose rows do not says under which rules they
# were judged, what re-judging them would need and when that was checked (`verdicts_judged` in `frontier.json`).
# Re-judging needs the runs' attack results (scores, identifier probes), which a shipped table does not hold
# (docs/data/frontier/README.md).

# %%
older = table["verdict_judged"] != "current rules"
display(Markdown(f"**{int(older.sum())} of {len(table)}** rows were judged under older rules. " + rules_sentence(result)
                 + (" Their colours are shown as they were judged; read them as those rules' answer, not today's."
                    if older.any() else " Every verdict is the current rules' answer.")))

# %% [markdown]
# ## 1. The frontier
# Each marker is one model: its **gain retained** (y; 0 = the base model, 1 = plain fine-tuning) against the AUC of
# the strongest membership attack on it (x; 0.5 = chance); the shaded region is the goal (AUC ≤ 0.55, gain retained
# ≥ `GAIN_GOAL`). A model near chance is not yet green: only its verdict (hover, and the table below) says whether
# *every* attack — PII inference, canaries and regurgitation included — found nothing. The hover text gives its
# held-out utility and, labelled, its training-note utility. The second figure shows held-out utility itself: its
# black point or dotted line per size is the base model before any fine-tuning. Below them, an ε dropdown and the
# choice of y axis (gain retained, held-out utility, ratio to plain) redraw the figure (needs a kernel).

# %%
frontier_figure(table).show()
frontier_figure(table, y_col="heldout_utility").show()
frontier_explorer(table)

# %% [markdown]
# ## 2. The best green recipe per corpus size
# Of the models whose verdict is green, the one with the largest gain retained, and whether it reaches `GAIN_GOAL`
# (`best_recipes`); then, of the private (DP) models, the green one that keeps the most (its 95% interval where the
# runs' predictions were at hand) or, where none is green, the one keeping the most, with its verdict.

# %%
best = best_recipes(table)
display(Markdown("\n".join(f"- {s}" for s in best_sentences(best, result.plain) + gain_sentences(table, result.plain))
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
# ## 4. What decided each colour
# Per model, its colour and the deciding rule in plain words (a rule whose meaning has changed since, in the words of
# the rules that judged it), and under which rules it was judged; then the rules that keep models from green,
# counted: membership (an attack separates members), PII inference, canaries, regurgitation or the one-run audit.
# The current rules and their thresholds are printed at the top of the report.

# %%
display(Markdown("\n".join(f"- {s}" for s in verdict_sentences(result))))

# %%
blocked = table[table["verdict"] != "green"]
rules = blocked.groupby("verdict_rule", dropna=False).agg(models=("strategy", "size"),
                                                          strategies=("strategy", lambda s: ", ".join(sorted(set(s)))))
rules.index = [RULES.get(r, str(r)) + (" (a rule of older verdicts, no longer applied)" if r in RETIRED_RULES else "")
               for r in rules.index]
rules if len(rules) else Markdown("_Every model is green._")

# %% [markdown]
# ## 5. Other shipped frontiers at 1,000 individuals
# The shipped frontiers of `reserve_dirs` (their strategies' learning rates searched on a public reserve,
# docs/data/frontier_reserve/README.md; not the same runs as the table above): how many of their verdicts the current
# rules judged, and which green private model keeps the most of the gain.

# %%
current, stated = [], []
for d in reserve_dirs:
    if Path(d, "frontier.json").is_file():
        r = load_frontier_result(d)
        current.append(r.table.assign(verdict_judged=verdicts_judged(r), source=Path(d).name))
        stated.append(f"`{Path(d).name}`: {rules_sentence(r)}")
if current:
    both = pd.concat(current, ignore_index=True)
    both = both[~(both["strategy"].eq("clm") & both.duplicated(["size", "strategy"]))]  # plain: in both tables
    display(Markdown(f"{len(both)} models; judged under the current rules: "
                     f"{int((both['verdict_judged'] == 'current rules').sum())}.\n\n"
                     + "\n".join(f"- {x}" for x in stated + gain_sentences(both, "clm"))))
else:
    display(Markdown("_No frontier of `reserve_dirs` found._"))

# %% [markdown]
# ## 6. Findings
# Read off the table above: per corpus size, the best green model's gain retained against the goal, and how many
# verdicts the current rules judged.

# %%
lines = []
for size, b in sorted(best.items()):
    gain = b["heldout_gain_retained"]
    if not b["gain_defined"]:
        lines.append(f"{size} individuals: gain retained undefined (plain fine-tuning gained nothing significant on "
                     "held-out notes over the base model).")
    elif b["verdict"] != "green":
        lines.append(f"{size} individuals: no model is green.")
    else:
        lines.append(f"{size} individuals: the best green model, {b['strategy']} at ε = {epsilon_text(b['epsilon'])}, keeps "
                     f"{gain:.1%} of the gain — {'at or above' if b['found'] else 'below'} the goal of "
                     f"{GAIN_GOAL:.0%}.")
lines.append(f"{int((~older).sum())} of {len(table)} verdicts are the current rules' answer"
             + (f"; {int(older.sum())} were judged under older rules and are not re-judged here." if older.any()
                else "."))
display(Markdown("\n".join(f"- {x}" for x in lines)))

# %% [markdown]
# ## 7. The report
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
# *Reading*: a verdict is only as current as the rules that judged it; a row counts as current only where it records
# the current rules.

# %% [markdown] tags=["takeaway"]
# ### Take-away
# - The frontier's question is the gain retained by a green model: 0% is the base model, 100% plain fine-tuning; the
#   goal is at least 50% (`GAIN_GOAL`).
# - The ratio to plain starts from the base model's utility, not from zero; it flatters a model that learnt little.
# - Green means no attack of the battery found leakage at this sample size; it is judged per model.
# - A stored verdict is the answer of the rules that judged it; a table judged under older rules says so.
# - Glossary, figures and colours: the [cheat sheet](../docs/cheatsheet.md).
