# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 01 — Identifier analysis: who can be recognised in the training data?
#
# Before a language model is fine-tuned on patient notes, we need to know **which words could identify a patient**
# if the model learned to reproduce them. This notebook walks through the analysis of paper 000 §4 (methods.md §2):
#
# 1. **Direct identifiers** — names, hospitals, dates, phone numbers… found by a detector: spaCy NER, regular
#    expressions, or the corpus' gold annotations (the *oracle*, to separate detector quality from method quality).
# 2. **Indirect identifiers** — words that are not names but still single a person out: a rare occupation, a rare
#    disease, an unusual drug. We build the bipartite graph *individuals × words* and call a word an indirect
#    identifier when fewer than **k** individuals use it (k = 2: a single individual). With **n** > 1, word
#    sequences (n-grams) count too.
# 3. **Protected positions** — every occurrence that a privacy-preserving training must never use as a target.
#
# The sample corpus is synthetic (Faker names): nothing here is a real person.
#
# **Executed copies contain text of the corpus, including identifiers: treat them like the corpus.** Once run, this
# notebook (and its HTML export under `outputs/`) shows notes, predictions and tables of the corpus it read: keep
# executed copies owner-only, never publish or share them, and commit the notebook stripped (`nbstripout`); the
# inventory of everything the toolkit writes, and how to delete it, is in `PRIVACY.md`.

# %% tags=["parameters"]
profile = "cpu"
corpus_path = "../data_samples/clinical/notes.jsonl"
splits = ["train", "heldout"]  # the fine-tuning members and the held-out non-members (the auditor sees both)
detectors = ["oracle", "patterns", "spacy", "spacy+patterns"]
main_detector = "spacy+patterns"
k = 2
n = 1
ks = [2, 3, 4, 5]
ns = [1, 2, 3]
max_documents = None  # e.g. 100 for a quick run
out_dir = "../outputs/identifiers"

# %%
import pandas as pd
from IPython.display import HTML, display

from toolkit import plots
from toolkit.plots.widgets import indirect_share_explorer
from toolkit.corpus import load_corpus
from toolkit.identifiers import IdentifierConfig, analyze, detector_scores, make_detector, merge_spans

plots.setup_notebook()

# %% [markdown]
# ## 1. The corpus
# One JSON line per note: `doc_id`, `person_id` (the patient), `text`, gold PHI `spans` and a `split`.

# %%
corpus = load_corpus(corpus_path).filter(split=splits)
if max_documents:
    corpus = corpus[: int(max_documents)]
docs = list(corpus)
print(corpus)
pd.Series([d.split for d in docs]).value_counts().rename("documents").to_frame()

# %% [markdown]
# ## 2. Direct identifiers: how good is each detector?
# Each detector is scored against the gold spans **at the word level**, the unit that training protects:
# precision = share of flagged words that are gold PII, recall = share of gold PII words flagged. Recall per gold
# category shows *what* a detector misses — typically names written in lower case, which spaCy's English model does
# not recognise as names.

# %%
# each detector runs once; a combination ("spacy+patterns") is the union of its parts' spans, as
# make_detector("spacy+patterns") computes it
spans_by_detector = {}
for name in sorted(detectors, key=lambda d: "+" in d):
    parts = name.split("+")
    if len(parts) > 1 and all(p in spans_by_detector for p in parts):
        spans_by_detector[name] = [merge_spans(per_doc) for per_doc in zip(*(spans_by_detector[p] for p in parts))]
    else:
        spans_by_detector[name] = make_detector(name).detect(docs, progress="spacy" in name)  # one bar: NER
oracle = analyze(corpus, IdentifierConfig(detector="oracle", k=k, n=n), spans=spans_by_detector["oracle"],
                 progress=False)
scores = {name: detector_scores(oracle.words, spans, spans_by_detector["oracle"])
          for name, spans in spans_by_detector.items() if name != "oracle"}
# one row per detector: precision and recall over all PII words, then recall per gold category (a per-category
# precision is undefined where a detector never predicts that category)
pd.DataFrame({name: {"precision": s.set_index("category").loc["all", "precision"],
                     "recall": s.set_index("category").loc["all", "recall"],
                     **{f"recall {c}": r for c, r in zip(s["category"], s["recall"]) if c != "all"}}
              for name, s in scores.items()}).T.round(3)

# %%
plots.detector_recall(scores).show()

# %% [markdown]
# ## 3. The individuals × words graph
# We now analyse the corpus with the detector a real user would run (`main_detector`), and with the oracle for
# comparison. `terms` has one row per word type: how many individuals use it, how often it occurs, and whether it
# is a direct and/or an indirect identifier.

# %%
result = analyze(corpus, IdentifierConfig(detector=main_detector, k=k, n=n), spans=spans_by_detector[main_detector],
                 progress=False)
summary = pd.Series({key: value for key, value in result.summary.items() if not isinstance(value, dict)},
                    dtype=object)
summary.to_frame("value")

# %% [markdown]
# **The papers' finding** (000 Fig. 3): most *distinct* words are used by a single individual, yet they make up only
# a small share of all word *occurrences*. Protecting them costs little training signal.

# %%
print(f"{result.summary['share_distinct_words_below_k']:.1%} of distinct words are used by fewer than k={k} "
      f"individuals; they are {result.summary['share_occurrences_below_k']:.1%} of all word occurrences.")
plots.term_sharing_cdf(result.terms, k=k).show()

# %% [markdown]
# Per individual: how many words they wrote about them, and how many direct and indirect identifiers they have
# (000 Fig. 2). Some indirect identifiers are also direct (a rare surname is both).

# %%
plots.identifier_cdfs(result.individuals).show()
result.individuals.describe().round(1)

# %% [markdown]
# What do indirect identifiers look like? The most frequent ones that are **not** direct identifiers — the rare
# occupations, conditions and drugs that a name detector cannot find.

# %%
t = result.terms
t[(t["n"] == 1) & t["indirect"] & ~t["direct"]].sort_values("n_occurrences", ascending=False).head(15)

# %% [markdown]
# ## 4. Protected positions in one note
# Red: direct identifiers; blue: indirect identifiers; purple: both. These are the positions a privacy-preserving
# model (PPMLM, PPclm) never learns to predict — they remain visible as context.

# %%
doc_index = max(range(len(docs)), key=lambda i: len(result.protected_spans(i, "indirect")))
direct_set = set(result.protected_spans(doc_index, "direct"))
indirect_set = set(result.protected_spans(doc_index, "indirect"))
marks = [(s, e, "both" if (s, e) in direct_set and (s, e) in indirect_set else
          "direct" if (s, e) in direct_set else "indirect") for s, e in sorted(direct_set | indirect_set)]
display(HTML(plots.highlight_html(docs[doc_index].text, marks)))

# %% [markdown]
# ## 5. How k and n change the picture
# Raising **k** protects words shared by up to k−1 individuals (000 Fig. 8); raising **n** adds word sequences
# unique to one individual (000 Fig. 10). Changing k is free on the same graph; each extra n costs one pass.
# (On the synthetic sample, built from a limited set of sentence templates with Faker-drawn names and dates, bigrams
# add far more indirect identifiers than the doubling paper 000 reports on n2c2: the template words around a
# patient-specific word form bigrams that are themselves unique.)

# %%
wide = analyze(corpus, IdentifierConfig(detector=main_detector, k=k, n=max(ns)), spans=spans_by_detector[main_detector], progress=False)
counts = wide.indirect_counts(ks=ks, ns=ns)
plots.indirect_by_parameter(counts[counts["n"] == n], "k").show()
plots.indirect_by_parameter(counts[counts["k"] == k], "n").show()
counts.groupby(["k", "n"])["n_indirect"].describe()[["mean", "50%", "max"]].round(1)

# %% [markdown]
# Explore interactively (in JupyterLab): move the sliders to see the share of protected word occurrences. A static
# copy of this notebook (the HTML under `outputs/`) cannot run the sliders; the grid above them holds the same
# read-out for every k and n of this notebook (hover for the median per individual).

# %%
plots.indirect_share_grid(wide.graph.indirect_shares(range(2, max(ks) + 1), range(1, max(ns) + 1))).show()
display(indirect_share_explorer(wide.graph, k=k, n=n, max_k=max(ks), max_n=max(ns)))

# %% [markdown]
# ## 6. Save the analysis
# The same files as `python -m toolkit identifiers CORPUS --out DIR --detector ... --k ... --n ...`; the training
# notebooks read `positions.parquet` (what never becomes a target) and `terms.parquet` (the identifier vocabulary).

# %%
saved = result.save(out_dir)
sorted(p.name for p in saved.iterdir())

# %% [markdown] tags=["exercise"]
# **Exercise 1.** Move k from 2 to 3: which words join the indirect identifiers? List the words used by exactly two
# individuals that no detector flagged, and compare the share of protected word occurrences at k = 2 and k = 3.

# %% tags=["solution"]
joining = t[(t["n"] == 2) & ~t["direct"]].sort_values("n_occurrences", ascending=False)
at = wide.graph.indirect_shares([2, 3], [n]).set_index("k")["share"]
print(f"{len(joining)} word types join at k=3; protected occurrences {at[2]:.1%} at k=2 → {at[3]:.1%} at k=3")
joining.head(10)

# %% [markdown]
# Words shared by two patients single out a pair, not a person: whether to protect them is the choice k makes. The
# share printed above is the training signal that choice costs.

# %% [markdown] tags=["exercise"]
# **Exercise 2.** Which detector misses the most gold PII words, and in which category does it miss most?

# %% tags=["solution"]
recall = pd.DataFrame({name: s.set_index("category")["recall"] for name, s in scores.items()})
recall.assign(worst_detector=recall.idxmin(axis=1)).round(3)

# %% [markdown]
# A missed word is neither protected in training nor counted as a leak (paper 000 §7): the lowest recall per row is
# where an audit with that detector under-counts.

# %% [markdown] tags=["exercise"]
# **Exercise 3.** How many individuals have no indirect identifier at all at this k and n, and how many have more
# than ten?

# %% tags=["solution"]
per_person = wide.graph.indirect_per_individual(k, n)
pd.Series({"individuals": len(per_person), "with none": int((per_person == 0).sum()),
           "with more than ten": int((per_person > 10).sum())}).to_frame(f"k={k}, n={n}")

# %% [markdown]
# Individuals without an indirect identifier can be singled out only through direct ones; those with many have notes
# full of words nobody else uses, and a model that memorises them would make them recognisable.

# %% [markdown] tags=["takeaway"]
# ### Take-away
# - Direct identifiers come from a detector; its recall bounds what any later protection or audit can cover.
# - Indirect identifiers are words fewer than k individuals use: raising k or n protects more, at a cost in training
#   signal that the share of protected occurrences measures.
# - The protected positions computed here are what PP strategies never use as training targets (notebooks 02, 03).
# - Every figure and term of this notebook: the [cheat sheet](../docs/cheatsheet.md).
