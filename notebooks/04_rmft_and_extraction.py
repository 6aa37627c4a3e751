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
# reaches at a checkpoint whose MDP% stays ≤ τ; **AURC** = the area under that curve.
#
# The CPU profile uses a tiny GPT-2 pre-trained on synthetic messages among *other* people, and a subset of the
# sample, so absolute numbers are not the paper's; the direction of the effects is what to look at. The sample is
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
from toolkit.metrics.extraction import compare_to_baseline, maxter_table, optimal_checkpoints
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
# The training messages are fine-tuned on; the test messages are held out for perplexity. A few addresses (the
# busiest senders and recipients) occur hundreds of times, most only a handful of times: a power law.

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
# The tiny base is pre-trained on synthetic messages among other people, so before fine-tuning it knows e-mail
# language but no training address (checkpoint 0 below). Each technique is fine-tuned with the same schedule;
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
# most τ. Where no checkpoint qualifies the curve is undefined (shaded: *infeasible*). The table gives the
# checkpoint to pick for `tau`. The curves and AURC are saved under `work_dir/maxter` (what notebook 06 and the
# HTML report read).

# %%
report = write_maxter(comparison, work / "maxter", tau_max)
xplots.maxter_curves(maxter_table(comparison, report["tau_max"]), report).show()
optimal_checkpoints(comparison, tau)

# %% [markdown]
# ## 7. What this run shows (computed, not written in advance)

# %%
display(Markdown(findings(tables, comparison, report)))
