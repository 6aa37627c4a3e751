# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 03 — Causal-LM strategies: PPclm and its baselines
#
# The causal half of paper 001 (methods.md §3–5): a GPT-style model learns to predict the next token. For the
# privacy-preserving strategies the protected words **stay in the input** (the model reads them as context) but
# their tokens get label −100: the model is never trained to *produce* them.
#
# | strategy | text | targets |
# |---|---|---|
# | `clm` | original | every token |
# | `clm_pseudo` | PII spans → `X` | every token (the `X` too) |
# | `ppclm` | original | tokens of non-protected words |
# | `dppclm` / `ippclm` | original | as `ppclm`, direct-only / indirect-only protection |
# | `clm_dp` | original | every token, DP-SGD (ε = 8) |
#
# The audit reads each training note once, teacher-forced: at every word the model's arg-max next tokens are its
# prediction. For a protected word only its first occurrence in a note counts (later ones can be copied from the
# prefix). We also let the model write freely from the first tokens of each note and count identifiers it
# reproduces verbatim.
#
# **Executed copies contain text of the corpus, including identifiers: treat them like the corpus.** Once run, this
# notebook (and its HTML export under `outputs/`) shows notes, predictions and tables of the corpus it read: keep
# executed copies owner-only, never publish or share them, and commit the notebook stripped (`nbstripout`); the
# inventory of everything the toolkit writes, and how to delete it, is in `PRIVACY.md`.

# %% tags=["parameters"]
config = "cpu_causal"  # the experiment config (configs/cpu_causal.yaml): its values are this notebook's defaults
profile = None  # "cpu" or "paper" (make demo passes it); None: the config's
n_individuals = None  # members (train split) and as many non-members (heldout split); None: the config's
strategies = None  # None: the config's (every causal strategy)
epochs = None  # checkpoint epochs; None: the profile's
dp_epochs = None  # checkpoint epochs of clm_dp; None: the config's
pretrain_epochs = None  # pre-training epochs of the tiny base model; None: the profile's
detector = None  # None: the config's ("oracle": gold PHI)
k = None  # indirect identifiers: terms used by fewer than k individuals; None: the config's
work_dir = "../outputs/work/03_causal_lm"
n_bootstrap = None  # None: the config's
attacks = None  # audit.attacks options to change, e.g. {"pii_occurrences": 20}; None: the config's
regurgitation_prefix = None  # prompt = the first tokens of each member note; None: the config's
regurgitation_new_tokens = None  # None: the config's

# %%
from pathlib import Path

import pandas as pd
from IPython.display import Markdown, display

from toolkit import plots
from toolkit.config.experiment import load_experiment
from toolkit.pipelines.lm_experiment import run_experiment
from toolkit.plots.attacks import ATTACK_NAMES
from toolkit.plots.widgets import privacy_utility_explorer
from toolkit.report import collect_run, run_findings
from toolkit.results import evidence_table, protection_findings, protection_table, results_table, runs_table
from toolkit.results.evidence import disagreement, gain_texts, heldout_summary
from toolkit.report.attack_sections import ABSENT as NO_ATTACKS

plots.setup_notebook()
overrides = {key: value for key, value in {
    "profile": profile, "corpus.n_individuals": n_individuals, "training.strategies": strategies,
    "training.epochs": epochs, "training.dp_epochs": dp_epochs, "model.pretrain.epochs": pretrain_epochs,
    "identifiers.detector": detector,
    "identifiers.k": k, "audit.n_bootstrap": n_bootstrap,
    "audit.regurgitation.prefix_tokens": regurgitation_prefix,
    "audit.regurgitation.max_new_tokens": regurgitation_new_tokens}.items() if value is not None}
overrides.update({f"audit.attacks.{name}": value for name, value in (attacks or {}).items()})
cfg = load_experiment(config, overrides)
pd.Series(cfg.summary(), name=cfg.name).to_frame()

# %% [markdown]
# ## 1. Data, base model (built from the `public` split only), identifiers, training, audits: one cached run
# The teacher-forced audit of every checkpoint (and of the base model) and the free-running regurgitation of the
# last checkpoints are steps of the same run; a step whose inputs did not change is not recomputed.

# %%
result = run_experiment(cfg, work_dir, progress=False, echo=False)
ids_train = result.identifiers["members"]
runs, audits = result.checkpoints, result.audits
strategies = list(runs)
display(pd.Series({key: ids_train["summary"][key] for key in ("n_words", "n_I_direct", "n_I_indirect",
                                                              "share_protected_positions")}).to_frame("members"))
display(runs_table(runs, Path(work_dir) / "runs"))
results = results_table(audits)
run = collect_run(work_dir)
evidence = evidence_table(run)  # per model: verdict, strongest attack, held-out utility, gain retained, papers' metrics
gains = gain_texts(evidence)
results.round(3)

# %% [markdown]
# ## 4. Utility–privacy trade-off and its direct / indirect variants (001 Fig. 12–13)
# One line per strategy, a point per checkpoint (label: epoch), the base model a star. Left: privacy against
# **held-out utility** (next-word accuracy on notes of people not in training); right: against the papers' utility on
# the training notes, which also rewards memorising them. A checkpoint left of the dotted line is worse on unseen notes
# than the base model. The legend gives each strategy's **gain retained** at its last checkpoint, (U − U_base) /
# (U_plain − U_base) on held-out notes, with its 95% bootstrap interval. The line under the figure is computed.

# %%
plots.privacy_utility(results, gains=gains).show()
display(Markdown(heldout_summary(evidence) or "_Held-out utility was not measured in this run._"))
plots.privacy_variants(results).show()

# %% [markdown]
# Explore: one strategy at a time (menu), checkpoint by checkpoint (slider); they work in the saved HTML too, and the
# figures above hold the same points.

# %%
privacy_utility_explorer(results, gains=gains).show()

# %% [markdown]
# ## 5. Membership inference at the last checkpoint
# The papers' count-based attack (001 §6): ROC at each strategy's last checkpoint, linear axes (the buttons switch to
# log axes), and the TPR at fixed FPRs that this many non-members can resolve.

# %%
last = {name: audits[(name, runs[name][-1][0])] for name in strategies}
rocs = {name: a["roc"] for name, a in last.items()}
plots.roc_curves(rocs, log=False).show()
display(plots.tpr_table(rocs, with_ci=True, drop_unresolvable=True))
display(Markdown(plots.tpr_table_note(rocs)))

# %% [markdown]
# ### The attack battery next to the papers' attack
# The battery scores every person from the model's token losses on their notes — loss, loss ÷ zlib size, Min-K%,
# Min-K%++ (each token's likelihood against what the model expected at that place), the reference-model attack (the
# audited model against the base model) — and the papers' count of predicted rare words joins it. One panel per model
# (the base model and each strategy's last checkpoint), every attack in each, linear axes (buttons: log), the thin
# dashed line is chance. Under the table: where the papers' count attack and the verdict disagree, computed.
#
# **What a PP strategy protects, and what it does not.** In `ppclm` the tokens of identifiers get label −100: the
# model reads them but is never trained to *produce* them, so it rarely writes a name or a record number. It is
# still trained on **every other token of the note**, and those tokens are predicted *from* the identifiers before
# them: the model learns the rest of each note and the context of its identifiers. A loss-based attack does not
# need the model to write an identifier — it only asks whether the model fits a person's notes better than unseen
# ones — so membership can still show. PP protects identifiers as outputs, not membership.

# %%
battery = run.attack_models()
if battery:
    plots.attack_roc_grid(battery, title="Every attack at the last checkpoint of each strategy (ROC)", log=False).show()
    display(plots.auc_matrix(battery))
    clashes = [line for _, r in evidence.iterrows() if (line := disagreement(r, ATTACK_NAMES))]
    display(Markdown("\n".join(f"- {line}" for line in clashes) or
                     "_On this run the papers' count attack and the verdicts do not disagree._"))
else:
    display(Markdown(f"_{NO_ATTACKS}_"))

# %% [markdown]
# ### What each strategy protects
# One row per model (the base model and each strategy's last checkpoint): the papers' privacy and utility, the
# strongest membership attack, **PII inference** — given a training note with one identifier blanked out, how often
# the model ranks the true identifier first among same-category candidates (black tick: chance; grey: the base
# model) —, canary exposure where canaries were inserted, and the verdict. PP strategies keep identifiers out of what
# the model *writes*; the identifier is still in the input, so the model can learn how the rest of a note depends on
# it. The `*_surrogate` strategies replace each direct identifier in the input by a consistent made-up one of the same
# category, so there is nothing of the real identifier left to learn from.
#
# Utility is shown twice. The papers' utility is measured on the training notes themselves, so it also rewards
# memorising those notes; **held-out utility** is the same next-word / fill-mask accuracy on notes of people who were
# not in training (the non-members of the membership attack), i.e. what the fine-tuning taught about notes in general.
# The sentences under the table are computed from it for this run.

# %%
protection = protection_table(result.audits, result.attacks)
if len(protection):
    display(protection.drop(columns=["strategy"]).round(3),
            Markdown("\n".join(f"- {line}" for line in protection_findings(protection))))
    plots.protection_figure(protection).show()
else:
    display(Markdown(f"_{NO_ATTACKS}_"))

# %% [markdown]
# ## 6. Free-running regurgitation
# Greedy continuation (KV cache, batched) of each member note's first tokens; the share of the note's later
# identifiers that the model writes out verbatim. Reproduced identifiers are shown hashed, never in clear.

# %%
pd.DataFrame(result.regurgitation).T[["n_documents", "n_identifier_occurrences", "n_reproduced", "share_reproduced"]]

# %% [markdown]
# ## 7. What the figures show on this run (computed, not written in advance)
# One line per model: the verdict's colour and deciding rule, the strongest attack with its 95% interval, held-out
# utility, gain retained, and the papers' own metrics beside them (labelled); then regurgitation.

# %%
display(Markdown("\n".join(f"- {line}" for line in run_findings(run, results))))

# %% [markdown] tags=["exercise"]
# **Exercise 1.** Does `ppclm`'s identifiers' privacy decide its verdict? Put the papers' privacy and count-attack
# AUC beside the strongest battery attack and the verdict's rule, for every model.

# %% tags=["solution"]
evidence[["model", "privacy", "count_auc", "strongest_attack", "attack_auc", "attack_auc_low", "verdict",
          "verdict_rule"]].round(3)

# %% [markdown]
# The papers' figures count identifiers the model writes; the battery asks whether it fits a person's notes better
# than unseen ones. Label −100 on identifier tokens removes the first, not the second: compare the two AUC columns.

# %% [markdown] tags=["exercise"]
# **Exercise 2.** What does DP-SGD keep at this ε? Compare `clm_dp`'s held-out utility with the base model's and
# `clm`'s, and read its gain retained with its interval.

# %% tags=["solution"]
evidence[["model", "verdict", "heldout_utility", "base_heldout_utility", "gain_retained", "gain_retained_low",
          "gain_retained_high", "gain_note"]].round(3)

# %% [markdown]
# An interval containing 0 means no gain measurable over the base model; "undefined" means plain fine-tuning itself
# gained nothing on unseen notes. Notebook 07 draws the same measure across ε.

# %% [markdown] tags=["exercise"]
# **Exercise 3.** Does writing identifiers out freely follow the papers' privacy? Put each strategy's share of
# reproduced identifiers (section 6) beside its privacy at the last checkpoint.

# %% tags=["solution"]
pd.DataFrame({name: {"share reproduced": r.get("share_reproduced"),
                     "privacy (last checkpoint)": last[name]["metrics"]["privacy"] if name in last else None}
              for name, r in result.regurgitation.items()}).T

# %% [markdown]
# Both count identifiers the model produces, one teacher-forced word by word, the other writing freely from a
# prompt; where they rank the strategies differently, the prompt (the first tokens of each note) is what differs.

# %% [markdown] tags=["takeaway"]
# ### Take-away
# - PPclm keeps identifiers out of what the model writes; whether membership shows is the battery's question.
# - Read utility on held-out notes, beside the base model's: training-note utility also rewards memorisation.
# - A private strategy's cost is its gain retained; a green DP model that kept no gain learnt nothing to leak.
# - A green verdict's strength is its smallest detectable AUC: few patients, weak evidence.
# - Every figure, metric and colour of this notebook: the [cheat sheet](../docs/cheatsheet.md).
