# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 02 — Masked-LM strategies: does the model remember who was in the data?
#
# We fine-tune a masked language model (BERT-style) on clinical notes with each strategy of paper 000 (methods.md §3)
# and audit every checkpoint the way a privacy office would (methods.md §4–5):
#
# | strategy | what it trains on | which words may be prediction targets |
# |---|---|---|
# | `mlm` | the original notes | every word |
# | `mlm_pseudo` (MLMA) | notes with every PII span replaced by `X` | every word |
# | `ppmlm` | the original notes | no direct or indirect identifier (they stay visible as context) |
# | `dppmlm` / `ippmlm` | the original notes | no direct / no indirect identifier |
# | `mlm_dp` | the original notes | every word, with DP-SGD (ε = 8, δ = 1e-5, C = 10) |
#
# **The audit**: every word of every training note is masked once; the model's prediction is compared with the
# original. *Utility* = accuracy on ordinary words; *privacy* = share of identifier types the model never
# predicts, anywhere. The **membership inference attack** counts, for each patient, how many of their indirect
# identifiers the model predicts on their notes: a model that memorised the training data gives members higher
# counts than patients it never saw.
#
# The CPU profile uses a tiny model built from the sample data, so absolute numbers are not the paper's; the
# direction of the effects is what to look at. This notebook runs the experiment config `configs/cpu_masked.yaml`
# (the same run as `python -m toolkit run configs/cpu_masked.yaml`); its parameters below override the config.
# Everything is cached under `work_dir`: re-running only computes what changed.
#
# **Executed copies contain text of the corpus, including identifiers: treat them like the corpus.** Once run, this
# notebook (and its HTML export under `outputs/`) shows notes, predictions and tables of the corpus it read: keep
# executed copies owner-only, never publish or share them, and commit the notebook stripped (`nbstripout`); the
# inventory of everything the toolkit writes, and how to delete it, is in `PRIVACY.md`.

# %% tags=["parameters"]
config = "cpu_masked"  # the experiment config (configs/cpu_masked.yaml): its values are this notebook's defaults
profile = None  # "cpu" or "paper" (make demo passes it); None: the config's
n_individuals = None  # members (train split) and as many non-members (heldout split); None: the config's
strategies = None  # None: the config's (every masked-LM strategy)
epochs = None  # checkpoint epochs; None: the profile's
dp_epochs = None  # checkpoint epochs of mlm_dp (DP-SGD is slower per epoch); None: the config's
pretrain_epochs = None  # pre-training epochs of the tiny base model; None: the profile's
detector = None  # None: the config's ("oracle": gold PHI); "spacy+patterns" to include detector errors
k = None  # indirect identifiers: terms used by fewer than k individuals; None: the config's
work_dir = "../outputs/work/02_masked_lm"
n_bootstrap = None  # bootstrap resamples of the ROC; None: the config's
attacks = None  # audit.attacks options to change, e.g. {"pii_occurrences": 20}; None: the config's
known_categories = ["drug", "condition"]  # the auxiliary-knowledge attacker (001 §6.1)
downstream_epochs = 6  # methods.md §8; 0 to skip

# %%
from pathlib import Path

import pandas as pd
from IPython.display import Markdown, display

from toolkit import plots
from toolkit.audit import downstream_f1, majority_baseline_f1
from toolkit.audit.evaluate import indirect_by_person, regurgitation
from toolkit.config.experiment import load_experiment
from toolkit.corpus import Corpus
from toolkit.metrics import auxiliary_knowledge_identifiable, mia_report, mia_scores
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
    "identifiers.k": k, "audit.n_bootstrap": n_bootstrap}.items() if value is not None}
overrides.update({f"audit.attacks.{name}": value for name, value in (attacks or {}).items()})
cfg = load_experiment(config, overrides)
pd.Series(cfg.summary(), name=cfg.name).to_frame()

# %% [markdown]
# ## 1. Data, identifiers, training and audits: one cached run
# The base model is built from the `public` split only (its tokenizer and weights never saw a member). Members are
# the first `n_individuals` patients of `train`; non-members the first `n_individuals` of `heldout`.
# `run_experiment` chains the steps — base model, identifiers, training of every strategy (one trainer for all:
# Hugging Face `Trainer`; Opacus for DP), the audit of the base model and of every checkpoint — and skips a step
# whose inputs have not changed since it last ran (a new `k` or `detector` re-runs the identifier analysis and
# everything that depends on it, nothing else).
#
# Each audit probes members and non-members once; privacy is measured on members, the attack uses both. The base
# model's row shows what it "leaks" before any fine-tuning (pooled doctors, common first names it saw in `public`):
# those leaks are not caused by fine-tuning, which is why *novel* privacy (identifiers absent from `public`) is
# reported too.

# %%
result = run_experiment(cfg, work_dir, progress=False, echo=False)
members, nonmembers = result.data.members, result.data.nonmembers
ids_train, ids_all = result.identifiers["members"], result.identifiers["all"]
runs, audits = result.checkpoints, result.audits
strategies = list(runs)
display(pd.DataFrame({"individuals": [len(c.person_ids) for c in (result.data.public, members, nonmembers)],
                      "notes": [len(c) for c in (result.data.public, members, nonmembers)]},
                     index=["public (base model)", "members (fine-tuning)", "non-members (held out)"]))
display(pd.Series({key: ids_train["summary"][key] for key in ("n_words", "n_I_direct", "n_I_indirect", "n_I",
                                                              "share_protected_positions")}).to_frame("members"))
display(runs_table(runs, Path(work_dir) / "runs"))
results = results_table(audits)
run = collect_run(work_dir)
evidence = evidence_table(run)  # per model: verdict, strongest attack, held-out utility, gain retained, papers' metrics
gains = gain_texts(evidence)
results.round(3)

# %% [markdown]
# ## 4. Privacy–utility trade-off (000 Fig. 4, 7)
# One line per strategy, one point per checkpoint (the label is the epoch); the star is the base model before
# fine-tuning. Left: against **held-out utility** (notes of people not in training); right: against the papers'
# utility on the training notes, which also rewards memorising them. Up and to the right is better; a checkpoint
# left of the dotted line is worse on unseen notes than the base model. The legend gives each strategy's **gain
# retained** at its last checkpoint, (U − U_base) / (U_plain − U_base) on held-out notes, with its 95% bootstrap
# interval over the held-out patients. The line under the figures is computed from this run.

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
# ## 5. Membership inference (000 Fig. 6, Table 2)
# ROC of the papers' count-based attack at the last checkpoint of each strategy, linear axes (the buttons switch to
# log axes); the dashed line is chance. With `n_individuals` non-members, an FPR below 1/`n_individuals` cannot be
# measured: the table leaves out the TPR columns no model can resolve.

# %%
last = {name: audits[(name, runs[name][-1][0])] for name in strategies}
rocs = {name: a["roc"] for name, a in last.items()}
plots.roc_curves(rocs, log=False).show()
display(plots.tpr_table(rocs, with_ci=True, drop_unresolvable=True))
display(Markdown(plots.tpr_table_note(rocs)))

# %% [markdown]
# ### The attack battery next to the papers' attack
# The count of predicted rare words is one attack among several. The battery scores every person from the model's
# losses on their notes — loss, loss ÷ zlib size, Min-K% (the least likely 20% of words), the reference-model attack
# (the audited model against the base model) — and the papers' attack joins it as "predicted rare words". One panel
# per model (the base model and each strategy's last checkpoint), every attack in each, linear axes (buttons: log),
# the thin dashed line is chance. Min-K%++ is computed at the masked positions of the pseudo-log-likelihood
# (docs/methods.md §10). Under the table: where the papers' count attack and the verdict disagree, computed.
#
# **What a PP strategy protects, and what it does not.** `ppmlm` never uses an identifier as a prediction target:
# the model is not trained to *write* names, dates or rare words, which is why its privacy stays high. It still
# learns **the rest of each note** — the wording, the ordinary words, the identifiers as *context* for the words
# around them — so a model fine-tuned with `ppmlm` may still fit its training notes better than unseen ones, and a
# membership attack would then tell members from non-members. PP strategies protect identifiers as outputs, not
# membership; the battery measures how much of the latter remains.

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
# **Auxiliary knowledge** (001 §6.1): an attacker who only knows some categories of words (here drugs and
# conditions) can only use those indirect identifiers.

# %%
term_categories = pd.read_csv(Path(cfg.corpus.path[0]).parent / "term_categories.csv")
cat_map = dict(zip(term_categories["term"], term_categories["category"]))
both = Corpus(list(members) + list(nonmembers))
aux = auxiliary_knowledge_identifiable(indirect_by_person(ids_all, both), cat_map, known_categories)
aux_rows = {}
for name, a in last.items():
    scores = mia_scores(a["mia_predictions"], indirect_by_person(ids_all, both), restrict_to=aux["restrict_to"])
    rep = mia_report(scores[scores.index.isin(members.person_ids)], scores[scores.index.isin(nonmembers.person_ids)],
                     n_bootstrap=0)
    aux_rows[name] = {"AUC (known categories only)": rep["auc"], "TPR@10%": rep["tpr_at_fpr"]["0.1"]}
print(f"{aux['share_identifiable']:.0%} of individuals have at least one indirect identifier in "
      f"{', '.join(known_categories)}")
pd.DataFrame(aux_rows).T.round(3)

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
# ## 6. What leaks: regurgitation against training frequency (000 Fig. 5) and leaked identifier types

# %%
plots.regurgitation_cdf({name: regurgitation(a["predictions"][a["predictions"]["person_id"].isin(members.person_ids)],
                                             ids_train) for name, a in last.items()}).show()
pd.DataFrame({name: {cat: v["n_leaked"] for cat, v in a["metrics"]["leaked_by_category"].items()}
              for name, a in last.items()}).fillna(0).astype(int)

# %% [markdown]
# ## 7. Downstream utility (methods.md §8): smoking status from the fine-tuned encoder
# All layers frozen but the last, 6 epochs, warm-up to 2e-5. With a tiny model this mostly shows whether the
# strategies *damage* the encoder; compare with the majority-class baseline.

# %%
if downstream_epochs:
    seen_labels = {d.labels["smoking"] for d in members}
    test = result.data.corpus.filter(split="test")
    test = Corpus([d for d in test if d.labels["smoking"] in seen_labels])  # classes the members have
    f1 = {name: downstream_f1(last_path, members, test, epochs=downstream_epochs, progress=False)["macro_f1"]
          for name, last_path in [(n, runs[n][-1][1]) for n in strategies]}
    f1["majority baseline"] = majority_baseline_f1(members, test)["macro_f1"]
    display(pd.Series(f1, name="macro F1").round(3).to_frame())

# %% [markdown]
# ## 8. What the figures show on this run
# Computed from the results above (not written in advance), one line per model: the verdict's colour and deciding
# rule, the strongest attack with its 95% interval, held-out utility, gain retained, and the papers' own metrics
# beside them (labelled).

# %%
display(Markdown("\n".join(f"- {line}" for line in run_findings(run, results))))

# %% [markdown] tags=["exercise"]
# **Exercise 1.** What does DP-SGD keep? For `mlm_dp` (and every other strategy), compare its held-out utility with
# the base model's and plain `mlm`'s, and read its gain retained with its interval.

# %% tags=["solution"]
evidence[["model", "verdict", "heldout_utility", "base_heldout_utility", "gain_retained", "gain_retained_low",
          "gain_retained_high", "gain_note"]].round(3)

# %% [markdown]
# A gain retained near 0 (or an interval containing 0) means the model kept nothing of what plain fine-tuning learnt
# on unseen notes; undefined means plain fine-tuning itself learnt nothing there, so there is no gain to keep. Either
# way a green verdict then says that nothing leaked, not that DP was cheap.

# %% [markdown] tags=["exercise"]
# **Exercise 2.** Which green or incomplete verdict rests on the weakest evidence? Sort the models by the smallest AUC
# their sample could have detected.

# %% tags=["solution"]
evidence[["model", "verdict", "detectable_auc", "n_members", "n_nonmembers"]].sort_values("detectable_auc",
                                                                                        ascending=False)

# %% [markdown]
# The smallest detectable AUC shrinks toward 0.5 as members and non-members grow; a green at a detectable AUC of 0.7
# or more cannot exclude an attack that separates members from non-members that well.

# %% [markdown] tags=["exercise"]
# **Exercise 3.** Can a model keep its identifiers private and still give away who was in its training data? Compare
# the papers' privacy and count-attack AUC with the strongest battery attack and the verdict, model by model
# (`ppmlm` first).

# %% tags=["solution"]
evidence[["model", "privacy", "count_auc", "strongest_attack", "attack_auc", "attack_auc_low", "verdict"]].round(3)

# %% [markdown]
# The papers' figures count identifiers the model *predicts*; the loss-based attacks ask whether it fits a person's
# notes better than unseen ones. A model never trained to predict identifiers can still fit the rest of its
# training notes, which is what a high loss-attack AUC beside a count-attack AUC near 0.5 shows.

# %% [markdown] tags=["takeaway"]
# ### Take-away
# - PP strategies keep identifiers out of what the model writes; whether membership shows is the battery's question.
# - Read utility on held-out notes, beside the base model's: training-note utility also rewards memorisation.
# - A private strategy's cost is its gain retained; a green DP model that kept no gain learnt nothing to leak.
# - A green verdict's strength is its smallest detectable AUC: few patients, weak evidence.
# - Every figure, metric and colour of this notebook: the [cheat sheet](../docs/cheatsheet.md).
