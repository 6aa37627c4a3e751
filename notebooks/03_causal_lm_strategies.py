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
from toolkit.report import collect_run
from toolkit.results import findings, protection_findings, protection_table, results_table, runs_table
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
results.round(3)

# %% [markdown]
# ## 4. Utility–privacy trade-off and its direct / indirect variants (001 Fig. 12–13)

# %%
points = results[results["strategy"] != "base"]
plots.privacy_utility(points).show()
plots.privacy_variants(points).show()

# %% [markdown]
# ## 5. Membership inference at the last checkpoint

# %%
last = {name: audits[(name, runs[name][-1][0])] for name in strategies}
plots.roc_curves({name: a["roc"] for name, a in last.items()}).show()
plots.tpr_table({name: a["roc"] for name, a in last.items()}, with_ci=True)

# %% [markdown]
# ### The attack battery next to the papers' attack
# The battery scores every person from the model's token losses on their notes — loss, loss ÷ zlib size, Min-K%,
# Min-K%++ (each token's likelihood against what the model expected at that place), the reference-model attack (the
# audited model against the base model) — and the papers' count of predicted rare words joins it. One panel per model
# (the base model and each strategy's last checkpoint), every attack in each, log-log axes, the thin dashed line is
# chance.
#
# **What a PP strategy protects, and what it does not.** In `ppclm` the tokens of identifiers get label −100: the
# model reads them but is never trained to *produce* them, so it rarely writes a name or a record number. It is
# still trained on **every other token of the note**, and those tokens are predicted *from* the identifiers before
# them: the model learns the rest of each note and the context of its identifiers. A loss-based attack does not
# need the model to write an identifier — it only asks whether the model fits a person's notes better than unseen
# ones — so membership can still show. PP protects identifiers as outputs, not membership.

# %%
battery = collect_run(work_dir).attack_models()
if battery:
    plots.attack_roc_grid(battery, title="Every attack at the last checkpoint of each strategy (ROC, log-log)").show()
    display(plots.auc_matrix(battery))
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

# %%
display(Markdown(findings(results)))
