"""Benchmark: the toolkit's vectorised term-graph analysis against straightforward alternatives, in one run.

On a generated clinical corpus (default 50,000 documents, ~25M words) it times

* ``toolkit``      — ``toolkit.identifiers.analyze`` (oracle spans, k=2, n=1): word segmentation by RE2 in Arrow
                     kernels (threads), integer hashing + numpy bincount for the individuals x terms graph, plus
                     what the alternatives do not do (direct positions, term and individual tables, summary);
* ``dict of sets`` — a Python loop: ``users[term].add(person)`` for every word occurrence;
* ``networkx``     — a bipartite ``networkx.Graph`` with an edge person–term per occurrence, term degree < k;

checks that all three find the same indirect identifiers and per-individual counts, and prints times and ratios.
It then measures spaCy NER on the sample notes (and on an Enron-layout folder given with ``--enron``): document-level
NER (one text per document, as before the piece cache) against sentence pieces run once per distinct text
(:mod:`toolkit.identifiers.ner`, one process and ``n_process=0``): words/s, the share of distinct pieces, the share
of characters that went through the model, and precision / recall against the gold spans (sentence rows: the
difference to document-level).

Usage: ``python benchmarks/identifiers.py [--documents 50000] [--words-per-note 500] [--ner-only] [--enron DIR]``
"""

from __future__ import annotations

import argparse
import gc
import os
import time
from collections import defaultdict
from pathlib import Path

import networkx as nx

from toolkit.corpus import Corpus, make_document
from toolkit.identifiers import SpacyDetector, analyze, normalize_term, word_pattern
from toolkit.samples.clinical import generate_clinical

SAMPLE = Path(__file__).resolve().parent.parent / "data_samples" / "clinical" / "notes.jsonl"


def build_corpus(n_documents: int, words_per_note: int, seed: int) -> Corpus:
    # about 2 notes per individual on average
    rows = generate_clinical(n_individuals=max(1, n_documents // 2), seed=seed, words_per_note=words_per_note)
    rows = rows[:n_documents]
    return Corpus(make_document(r["doc_id"], r["person_id"], r["text"], r.get("spans"), r.get("split"),
                                r.get("labels")) for r in rows)


def dict_of_sets(corpus: Corpus, k: int) -> tuple[set[str], dict[str, int]]:
    pattern = word_pattern()
    norm_cache: dict[str, str] = {}
    users: dict[str, set[str]] = defaultdict(set)
    for d in corpus:
        for m in pattern.finditer(d.text):
            w = m.group()
            t = norm_cache.get(w)
            if t is None:
                t = norm_cache[w] = normalize_term(w)
            users[t].add(d.person_id)
    indirect = {t for t, u in users.items() if len(u) < k}
    per_person: dict[str, int] = defaultdict(int)
    for t in indirect:
        for p in users[t]:
            per_person[p] += 1
    return indirect, per_person


def networkx_graph(corpus: Corpus, k: int) -> tuple[set[str], dict[str, int]]:
    pattern = word_pattern()
    g = nx.Graph()
    for d in corpus:
        person = ("u", d.person_id)
        for m in pattern.finditer(d.text):
            g.add_edge(person, ("t", normalize_term(m.group())))
    terms = [n for n in g if n[0] == "t"]
    indirect = {n[1] for n in terms if g.degree(n) < k}
    per_person: dict[str, int] = defaultdict(int)
    for t in indirect:
        for p in g.neighbors(("t", t)):
            per_person[p[1]] += 1
    return indirect, per_person


def timed(label: str, fn, *args):
    gc.collect()
    t0 = time.perf_counter()
    out = fn(*args)
    dt = time.perf_counter() - t0
    print(f"  {label:<14} {dt:8.1f} s", flush=True)
    return out, dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--documents", type=int, default=50_000)
    ap.add_argument("--words-per-note", type=int, default=500)
    ap.add_argument("--spacy-docs", type=int, default=0, help="NER on the first N documents (0: all)")
    ap.add_argument("--enron", default=None, help="an Enron-layout folder: NER words/s and distinct pieces there too")
    ap.add_argument("--ner-only", action="store_true", help="only the NER comparison")
    ap.add_argument("--k", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--skip-networkx", action="store_true")
    args = ap.parse_args()
    if args.ner_only:
        return ner(args)

    t0 = time.perf_counter()
    corpus = build_corpus(args.documents, args.words_per_note, args.seed)
    print(f"corpus: {len(corpus)} documents, {len(corpus.person_ids)} individuals "
          f"(generated in {time.perf_counter() - t0:.1f} s)", flush=True)

    print("term graph, k=%d, n=1:" % args.k)
    result, t_toolkit = timed("toolkit", lambda: analyze(corpus, detector="oracle", k=args.k, n=1, progress=False))
    n_words = result.summary["n_words"]
    print(f"    {n_words / 1e6:.1f}M words; segmentation {result.summary['timings_s']['segment_s']:.1f} s, "
          f"graph + tables {result.summary['timings_s']['graph_s']:.1f} s")
    (ind_dict, pp_dict), t_dict = timed("dict of sets", dict_of_sets, corpus, args.k)
    toolkit_counts = dict(zip(result.individuals["person_id"], result.individuals["n_indirect"].tolist()))
    assert ind_dict == result.I_indirect, "dict-of-sets and toolkit disagree on indirect identifiers"
    assert {p: c for p, c in toolkit_counts.items() if c} == dict(pp_dict), "per-individual counts disagree"
    rows = [("toolkit (vectorised)", t_toolkit), ("dict of sets", t_dict)]
    if not args.skip_networkx:
        (ind_nx, pp_nx), t_nx = timed("networkx", networkx_graph, corpus, args.k)
        assert ind_nx == result.I_indirect and dict(pp_nx) == dict(pp_dict), "networkx disagrees"
        rows.append(("networkx bipartite", t_nx))
    print("\nresults agree across implementations.")
    print(f"{'implementation':<22} {'seconds':>9} {'words/s':>12} {'vs toolkit':>11}")
    for name, t in rows:
        print(f"{name:<22} {t:9.1f} {n_words / t:12,.0f} {t / t_toolkit:10.1f}x")

    ner(args)


def ner(args) -> None:
    """spaCy NER: document-level (one text per document, as before) against sentence pieces with the cache
    (:mod:`toolkit.identifiers.ner`): words/s, distinct-piece ratio, and precision / recall against the gold spans."""
    from toolkit.corpus import load_corpus
    from toolkit.identifiers import detector_scores, segment_corpus

    sources = [("sample", load_corpus(SAMPLE), True)]
    if args.enron:
        sources.append(("enron", load_corpus(args.enron, format="enron"), False))
    print(f"\nspaCy NER ({SpacyDetector().model}); machine load {os.getloadavg()[0]:.1f}")
    print(f"{'corpus':<8} {'mode':<22} {'words/s':>9} {'distinct':>9} {'run chars':>9} {'P':>7} {'R':>7}")
    for name, corpus, gold in sources:
        docs = list(corpus)[: args.spacy_docs or None]
        words = segment_corpus([d.text for d in docs], progress=False)
        modes = [("document", dict(unit="document", max_chars=10_000_000, cache_size=0, n_process=1)),
                 ("sentences, 1 process", dict(n_process=1)), ("sentences, auto", dict(n_process=0))]
        base = None
        for mode, kw in modes:
            det = SpacyDetector(**kw)
            det.detect([make_document("warm-up", "w", "Warm up.")], progress=False)  # model loaded outside the timing
            t0 = time.perf_counter()
            spans = det.detect(docs, progress=False)
            dt = time.perf_counter() - t0
            st = det.last_stats
            pr = ("", "")
            if gold:
                sc = detector_scores(words, spans, [list(d.spans) for d in docs]).set_index("category")
                p, r = sc.loc["all", "precision"], sc.loc["all", "recall"]
                base = base or (p, r)
                pr = (f"{p:.4f}", f"{r:.4f}") if mode == "document" else (f"{p - base[0]:+.4f}", f"{r - base[1]:+.4f}")
            print(f"{name:<8} {mode:<22} {len(words) / dt:9,.0f} {st['distinct_pieces'] / max(st['pieces'], 1):9.3f} "
                  f"{st['ner_chars'] / max(st['chars'], 1):9.3f} {pr[0]:>7} {pr[1]:>7}", flush=True)

if __name__ == "__main__":
    main()
