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
# The causal half of paper 001 (SPEC.md §3–5): a GPT-style model learns to predict the next token. For the
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

# %% tags=["parameters"]
profile = "cpu"
corpus_path = "../data_samples/clinical/notes.jsonl"
n_individuals = 40  # members (train split) and as many non-members (heldout split)
strategies = ["clm", "clm_pseudo", "ppclm", "dppclm", "ippclm", "clm_dp"]
epochs = None  # checkpoint epochs (None: those of the profile)
dp_epochs = [4, 8]  # checkpoint epochs of clm_dp (None: same as epochs)
pretrain_epochs = None  # pre-training epochs of the tiny base model (None: those of the profile)
detector = "oracle"
work_dir = "../outputs/work/03_causal_lm"
n_bootstrap = 1000
regurgitation_prefix = 32  # prompt = the first tokens of each member note
regurgitation_new_tokens = 64

# %%
from pathlib import Path

import pandas as pd
from IPython.display import Markdown, display

from toolkit import plots
from toolkit.audit import regurgitation_rate
from toolkit.audit.evaluate import corpus_word_types, identifier_sets
from toolkit.config import load_profile
from toolkit.corpus import Corpus, load_corpus
from toolkit.models import load_model
from toolkit.pipelines.steps import (audit_runs, ensure_base, ensure_identifiers, findings, results_table,
                              runs_table, train_strategies)

plots.setup_notebook()
work = Path(work_dir)
prof = load_profile(profile)
cfg = prof.finetune["clm"]
if epochs:
    cfg.epochs = sorted(int(e) for e in epochs)
cfg.__post_init__()
if pretrain_epochs and "clm" in prof.pretrain:
    prof.pretrain["clm"].epochs = [int(pretrain_epochs)]

# %% [markdown]
# ## 1. Data and the base model (built from the `public` split only)

# %%
corpus = load_corpus(corpus_path)
public = corpus.filter(split="public")
members = corpus.filter(person_ids=corpus.filter(split="train").person_ids[:n_individuals])
nonmembers = corpus.filter(person_ids=corpus.filter(split="heldout").person_ids[:n_individuals])
base = ensure_base(public, work / "base_clm", "clm", profile=prof)
ids_train = ensure_identifiers(members, work / "identifiers_members", detector=detector)
ids_all = ensure_identifiers(Corpus(list(members) + list(nonmembers)), work / "identifiers_all", detector=detector)
base_vocabulary = corpus_word_types(public)
pd.Series({k: ids_train["summary"][k] for k in ("n_words", "n_I_direct", "n_I_indirect",
                                                "share_protected_positions")}).to_frame("members")

# %% [markdown]
# ## 2. Train every strategy

# %%
runs = train_strategies(members, base, work / "runs", strategies, cfg, ids=ids_train, dp_epochs=dp_epochs)
runs_table(runs, work / "runs")

# %% [markdown]
# ## 3. Teacher-forced audit of every checkpoint (and the base model)

# %%
audits = audit_runs(base, runs, members, nonmembers, ids_train, ids_all, out_dir=work / "audit",
                    base_vocabulary=base_vocabulary, n_bootstrap=n_bootstrap)
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
# ## 6. Free-running regurgitation
# Greedy continuation (KV cache, batched) of each member note's first tokens; the share of the note's later
# identifiers that the model writes out verbatim. Reproduced identifiers are shown hashed, never in clear.

# %%
identifiers = identifier_sets(ids_train)
vocab = identifiers["I_direct"] | identifiers["I_indirect"]
regurg = {}
for name in ["base"] + strategies:
    path = base if name == "base" else runs[name][-1][1]
    model, tokenizer = load_model(path, kind="clm")
    regurg[name] = regurgitation_rate(model, tokenizer, members, vocab, prefix_tokens=regurgitation_prefix,
                                      max_new_tokens=regurgitation_new_tokens, progress=False)
pd.DataFrame(regurg).T[["n_documents", "n_identifier_occurrences", "n_reproduced", "share_reproduced"]]

# %% [markdown]
# ## 7. What the figures show on this run (computed, not written in advance)

# %%
display(Markdown(findings(results)))
