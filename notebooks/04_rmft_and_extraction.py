# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 04 — E-mail addresses: RMFT, PII-aware deduplication and the extraction attack
#
# Paper 002 (methods.md §6): a language model fine-tuned on e-mail can be prompted into writing the e-mail addresses
# it was trained on, and the addresses that repeat most are the ones it learns. Two ways to change the data before
# fine-tuning:
#
# | technique | what the model trains on |
# |---|---|
# | `baseline` | the messages as they are |
# | `rmft` (Randomized Masked Fine-Tuning) | every address keeps its **first** occurrence; each later one is replaced by a random *look-alike* that keeps one part (first name, last name or domain) and draws the others from the corpus' own parts |
# | `dedup` (PII-aware deduplication) | header lines (`From:`, `To:`, `Cc:` …) that repeat an address already seen are deleted; bodies stay |
#
# **The attack**: prompts of 50 tokens, greedy decoding, a regular expression pulls addresses out of what the model
# writes. **TER** (total extraction rate) = leaked addresses / all original training addresses; **SER** (seen
# extraction rate) = leaked / addresses seen so far in training. **Utility**: perplexity on held-out messages;
# **MDP%** = its increase over the baseline at the same checkpoint. **MaxTER(τ)** = the best TER drop a technique
# reaches at a checkpoint whose MDP% stays ≤ τ; **AURC** = the area under that curve, in **%²** (τ in percent of
# perplexity times MaxTER in percent of TER; AURC / τ_max is the mean MaxTER over the axis, in %).
#
# **The question**: does RMFT or dedup leak fewer training addresses than plain fine-tuning, and at what cost in
# held-out perplexity? A difference in leaked addresses counts only where its exact interval excludes "no change"
# (section 4); with a few leaks of a few hundred addresses an interval may hold both a large reduction and an
# increase, and the notebook then says "no conclusion at this size".
#
# The CPU profile uses a tiny GPT-2 pre-trained on synthetic messages among *other* people, and a subset of the
# sample, so absolute numbers are not the paper's. The sample is
# synthetic (Faker names, fictional companies): the addresses shown below belong to no one. Everything is cached under
# `work_dir`.
#
# **Executed copies contain text of the corpus, including identifiers: treat them like the corpus.** Once run, this
# notebook (and its HTML export under `outputs/`) shows notes, predictions and tables of the corpus it read: keep
# executed copies owner-only, never publish or share them, and commit the notebook stripped (`nbstripout`); the
# inventory of everything the toolkit writes, and how to delete it, is in `PRIVACY.md`.

# %% tags=["parameters"]
profile = "cpu"
train_path = "../data_samples/email/train.jsonl"
test_path = "../data_samples/email/test.jsonl"
prompts_path = "../data_samples/email/prompts.jsonl"
techniques = ["baseline", "rmft", "dedup"]
train_documents = None  # fine-tune on the first N training messages (None: the profile's)
heldout_documents = None  # perplexity on the first N test messages (None: the profile's)
epochs = None  # checkpoint epochs, e.g. [1, 2, 3] (None: the profile's)
checkpoints_per_epoch = None  # step checkpoints per epoch (None: the profile's)
pretrain_epochs = None  # pre-training epochs of the tiny base (None: the profile's)
public_documents = None  # messages the tiny base is pre-trained on (None: the profile's)
corpus_prompts = None  # prompts cut from training messages before an address (None: the profile's)
file_prompts = None  # use the first N prompts of the prompt file (None: all)
tau = 10.0  # allowed perplexity increase (MDP%) for the recommended checkpoint
tau_max = None  # right end of the MaxTER axis in % (None: the largest MDP% observed)
show_examples = True  # show a message before and after RMFT / dedup (synthetic sample only)
work_dir = "../outputs/work/04_rmft_extraction"

# %%
from pathlib import Path

import pandas as pd
from IPython.display import HTML, Markdown, display

from toolkit import plots
from toolkit.config import load_profile
from toolkit.corpus import load_corpus
from toolkit.config.email import EmailProfile
from toolkit.identifiers.addresses import address_counts
from toolkit.metrics.extraction import (compare_to_baseline, extraction_reductions, maxter_table, optimal_checkpoints,
                                        rate_ratio_ci)
from toolkit.strategies.dedup import dedup
from toolkit.audit.extraction import load_extraction, read_prompts
from toolkit.strategies.rmft import rmft
from toolkit.plots import extraction as xplots
from toolkit.plots.examples import before_after_html
from toolkit.pipelines.email_extraction import (ensure_email_base, extract_techniques, findings, runs_summary,
                                         train_techniques, write_maxter)
from toolkit.audit.prompts import address_prompts, combine_prompts
from toolkit.samples.email import public_email_corpus

plots.setup_notebook()
pd.set_option("display.max_colwidth", None)  # table cells in full (the `why` of an infeasible row)
work = Path(work_dir)
prof = load_profile(profile)
email = prof.email or EmailProfile()
cfg = email.finetune
if epochs:
    cfg.epochs = sorted(int(e) for e in epochs)
if checkpoints_per_epoch is not None:
    cfg.checkpoints_per_epoch = int(checkpoints_per_epoch)
cfg.__post_init__()
if pretrain_epochs:
    email.pretrain.epochs = [int(pretrain_epochs)]
if public_documents:
    email.public_documents = int(public_documents)
n_train = train_documents or email.train_documents
n_heldout = heldout_documents or email.heldout_documents
n_corpus_prompts = email.corpus_prompts if corpus_prompts is None else int(corpus_prompts)

# %% [markdown]
# ## 1. How often does each address repeat? (002 Fig. 1)
# The training messages are fine-tuned on; the test messages are held out for perplexity. Paper 002 found a power
# law (a few addresses repeated very often, most only a handful of times); the figure and table show how this
# sample's counts fall.

# %%
train = load_corpus(train_path)
test = load_corpus(test_path)
if n_train:
    train = train[: int(n_train)]
if n_heldout:
    test = test[: int(n_heldout)]
counts = {"train": address_counts(train), "test": address_counts(test)}
xplots.rank_frequency(counts).show()
pd.DataFrame({name: {"messages": len(c_), "address occurrences": int(counts[name].sum()),
                     "distinct addresses": len(counts[name]), "most frequent": int(counts[name].iloc[0]),
                     "addresses seen once": int((counts[name] == 1).sum())}
              for name, c_ in (("train", train), ("test", test))})

# %% [markdown]
# ## 2. RMFT and PII-aware deduplication of the training messages
# Counts before and after (no address is printed). After RMFT every original address occurs exactly once; the
# other occurrences are look-alikes. Dedup keeps an address wherever it is not in a repeated header line.

# %%
res_rmft = rmft(train, seed=email.rmft_seed)
res_dedup = dedup(train)
summary = pd.DataFrame({
    "original": res_rmft.summary["before"],
    "rmft": res_rmft.summary["after"],
    "dedup": res_dedup.summary["after"]}).loc[["n_occurrences", "n_distinct", "n_original_occurrences",
                                               "n_original_distinct", "original_max_repetition"]]
summary

# %%
xplots.rank_frequency({"original": counts["train"],
                       "after RMFT (original addresses)": address_counts(res_rmft.corpus)[
                           lambda c: c.index.isin(counts["train"].index)],
                       "after dedup": address_counts(res_dedup.corpus)}).show()

# %% [markdown]
# One message before and after each technique (addresses highlighted: kept in green, replaced in orange; removed
# header lines struck through).

# %%
if show_examples:
    display(HTML(before_after_html(train, res_rmft, res_dedup)))

# %% [markdown]
# ## 3. The base model and the three fine-tuning runs
# The tiny base is pre-trained on synthetic messages among other people, so before fine-tuning it has seen e-mail
# language but no training message (checkpoint 0 below measures what it writes out all the same). Each technique is fine-tuned with the same schedule;
# a checkpoint is saved every `1/checkpoints_per_epoch` of an epoch together with the addresses the consumed
# batches contained (the SER denominator).

# %%
public = public_email_corpus(email.public_documents)  # synthetic messages among other people (generator seed 1)
base = ensure_email_base(work / "base_clm", public, email, prof, prebuilt="../prebuilt")  # built ahead (make prebuilt)
runs = train_techniques(train, base, work / "runs", techniques, cfg, seed=email.rmft_seed)
runs_summary(work / "runs", techniques)

# %% [markdown]
# ## 4. The extraction attack on every checkpoint
# Prompts: the sample's prompt file (messages cut right after `From:` / `To:` / `Cc:`) plus prompts cut from the
# training messages right before an address that does not occur earlier in the message (after a header field, in
# a display name `Jane Doe <`, before a signature) — the auditor knows its training data. Every prompt keeps its
# last 50 tokens.

# %%
file_p = read_prompts(prompts_path)
if file_prompts:
    file_p = file_p.head(int(file_prompts))
prompt_set = combine_prompts(file_p, address_prompts(train, n_corpus_prompts, seed=0) if n_corpus_prompts else None)
tables = extract_techniques(work / "runs", techniques, prompt_set, work / "extraction", heldout=test,
                            config=email.extraction)
pd.DataFrame({"prompts": [len(prompt_set)], "from the prompt file": [len(file_p)],
              "cut from training messages": [len(prompt_set) - len(file_p)]})

# %%
xplots.extraction_rates(tables).show()
last = pd.DataFrame({t: tab[tab["checkpoint"] > 0].iloc[-1] for t, tab in tables.items()}).T
last[["epoch", "ter", "ser", "n_leaked", "n_leaked_uncopied", "n_seen", "n_original", "target_hits",
      "perplexity"]].astype(float).round(3)

# %% [markdown]
# **Is a reduction there, or could it be chance?** At the last checkpoint, each technique's leaked addresses against
# the baseline's: TER out of the training addresses, SER out of the addresses seen so far. The interval of the
# reduction 1 − θ (θ: the technique's rate over the baseline's) is exact and conditional — given the leaks of both,
# the technique's share of them is binomial (`toolkit.metrics.extraction.rate_ratio_ci`, Clopper–Pearson) —
# Bonferroni-adjusted over the techniques × 2 rates shown. Where it holds 0 the table says **no conclusion at this
# size**: more addresses (a larger corpus or more prompts) would be needed to tell.

# %%
reductions = extraction_reductions(tables)
reductions.round({"reduction": 1, "reduction_low": 1, "reduction_high": 1, "p_value": 4, "confidence": 4})

# %% [markdown]
# ## 5. Utility: held-out perplexity and MDP per checkpoint (002 Fig. 3)

# %%
loaded = {t: load_extraction(work / "extraction" / t) for t in techniques}
others = [t for t in techniques if t != "baseline"]
comparison = compare_to_baseline(loaded["baseline"]["extraction"], {t: loaded[t]["extraction"] for t in others},
                                 {t: loaded[t]["perplexity"] for t in others}, loaded["baseline"]["perplexity"])
xplots.perplexity_per_checkpoint(tables, comparison).show()
comparison.groupby("technique", sort=False)[["ter", "baseline_ter", "ter_drop", "mdp_percent",
                                             "mean_delta_perplexity"]].mean().round(3)

# %% [markdown]
# ## 6. MaxTER and AURC (002 Fig. 4)
# For each allowed perplexity increase τ, the largest TER drop among the technique's checkpoints whose MDP% is at
# most τ. Where no checkpoint qualifies the curve is undefined (shaded: *infeasible*): a technique whose every
# checkpoint raises held-out perplexity by more than τ has no MaxTER at τ, so its curve starts at its smallest MDP%.
# Dedup trains on messages without their repeated header lines while the held-out perplexity is measured on whole
# messages, headers included; the line below gives each technique's smallest MDP%. AURC is in %² (see the top);
# infeasible stretches count 0. The table gives the checkpoint to pick for `tau` (an infeasible technique has no
# checkpoint, hence no numbers: `why` says why). The slider below it moves τ (needs a kernel). MaxTER and AURC are
# the paper's point estimates, with no interval: a TER drop of 100% may rest on a few leaks (read them beside the
# intervals of section 4). The curves and AURC are saved under `work_dir/maxter` (what notebook 06 and the HTML
# report read).

# %%
report = write_maxter(comparison, work / "maxter", tau_max)
fig = xplots.maxter_curves(maxter_table(comparison, report["tau_max"]), report)
fig.add_vline(x=tau, line_dash="dash", line_color="black", annotation_text=f"τ = {tau:g}%")
fig.show()
display(Markdown("Smallest MDP% over the checkpoints (MaxTER is infeasible below it): " + "; ".join(
    f"**{name}** {g['mdp_percent'].min():.1f}%" for name, g in comparison.groupby("technique", sort=False))
    + f". AURC / τ_max (mean MaxTER over 0–{report['tau_max']:g}%): " + "; ".join(
    f"**{name}** {a / report['tau_max']:.1f}%" for name, a in report["aurc"].items()) + "."))
optimal_checkpoints(comparison, tau)

# %%
xplots.maxter_explorer(comparison, report, tau=tau)

# %% [markdown]
# ## 7. What this run shows (computed, not written in advance)

# %%
display(Markdown(findings(tables, comparison, report)))

# %% [markdown] tags=["exercise"]
# **Exercise 1.** The reductions above are judged at the last checkpoint. Does the verdict "reduces" / "no
# conclusion" hold at every checkpoint? Compute the TER ratio's exact interval of each technique against the
# baseline at every checkpoint (`rate_ratio_ci`, 95%, unadjusted).

# %% tags=["solution"]
per_checkpoint = []
for name in others:
    both = tables[name].merge(tables["baseline"], on="checkpoint", suffixes=("", "_b"))
    for r in both[both["checkpoint"] > 0].itertuples():
        ci = rate_ratio_ci(r.n_leaked, r.n_original, r.n_leaked_b, r.n_original_b)
        per_checkpoint.append({"technique": name, "checkpoint": r.checkpoint, "leaked": r.n_leaked,
                               "baseline leaked": r.n_leaked_b, "ratio low": ci["ratio_low"],
                               "ratio high": ci["ratio_high"], "separates": ci["separates"]})
per_checkpoint = pd.DataFrame(per_checkpoint)
display(per_checkpoint.round(3))
display(Markdown("Checkpoints whose 95% interval excludes no change: " + "; ".join(
    f"**{t}** {int(g['separates'].sum())} of {len(g)}" for t, g in per_checkpoint.groupby("technique", sort=False))
    + "."))

# %% [markdown]
# *Reading*: a checkpoint whose interval holds 1 says nothing either way; 95% intervals per checkpoint are not
# adjusted for looking at many checkpoints, so a lone separating checkpoint among many is weak evidence.

# %% [markdown] tags=["exercise"]
# **Exercise 2.** Move τ: for τ = 1%, 5%, 10%, 25% and τ_max, which checkpoint would each technique recommend, and
# which techniques have none?

# %% tags=["solution"]
taus = sorted({1.0, 5.0, 10.0, 25.0, float(report["tau_max"])})
by_tau = pd.concat([optimal_checkpoints(comparison, t_) for t_ in taus], ignore_index=True)
display(by_tau[["tau", "technique", "feasible", "checkpoint", "mdp_percent", "ter_drop", "why"]].round(2))
display(Markdown("Infeasible (technique at τ): " + (", ".join(
    f"{r.technique} at {r.tau:g}%" for r in by_tau[~by_tau["feasible"]].itertuples()) or "none") + "."))

# %% [markdown]
# *Reading*: MaxTER never falls as τ grows (a larger budget admits more checkpoints); a technique is feasible from
# its smallest MDP% on.

# %% [markdown] tags=["exercise"]
# **Exercise 3.** A leaked address might simply have been copied from the prompt. What share of each technique's
# leaks at the last checkpoint were never in the prompt that produced them?

# %% tags=["solution"]
uncopied = last[["n_leaked", "n_leaked_uncopied"]].astype(int)
uncopied["share never in the prompt"] = (uncopied["n_leaked_uncopied"] / uncopied["n_leaked"].where(
    uncopied["n_leaked"] > 0)).round(3)
display(uncopied)
display(Markdown("; ".join(f"**{t}**: {int(r.n_leaked_uncopied)} of {int(r.n_leaked)}"
                           for t, r in uncopied.iterrows()) + " leaked addresses were never in their prompt."))

# %% [markdown]
# *Reading*: only an address the prompt did not contain shows that the model wrote it from memory.

# %% [markdown] tags=["takeaway"]
# ### Take-away
# - TER counts leaked training addresses of all of them, SER of those seen so far; both at each checkpoint.
# - A reduction is a finding only where its exact interval excludes no change; a handful of leaks seldom does.
# - MaxTER(τ) is the best TER drop within a perplexity budget τ; below a technique's smallest MDP% it is undefined.
# - AURC is in %² (τ × MaxTER); divided by τ_max it is the mean MaxTER over the axis.
# - Glossary, figures and colours: the [cheat sheet](../docs/cheatsheet.md).
