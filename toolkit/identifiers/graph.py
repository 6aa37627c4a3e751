"""The bipartite individuals × terms graph and indirect identifiers (methods.md §2; paper 000 §4.1, App. B–C).

Terms are word m-grams for m = 1..n inside one document (an m-gram never spans two documents). A term is an
**indirect identifier** iff it is used by fewer than ``k`` distinct individuals:

.. math::  \\mathrm{indirect}_k(t) \\iff |\\{u \\in U : (u, t) \\in E\\}| < k

The graph is never materialised as Python objects. Each m-gram occurrence gets a dense integer id by hashing
(previous (m-1)-gram id, next word id) with ``pandas.factorize``; the edge set E is the set of distinct
(term id, individual id) pairs; degrees are ``numpy.bincount``. Changing ``k`` is free, raising ``n`` costs one more
factorisation. ``benchmarks/identifiers.py`` compares this with a networkx bipartite graph.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from toolkit.identifiers.words import WordTable


@dataclass
class GramLayer:
    """All occurrences of m-grams for one m.

    ``pos[i]`` is the word-table row of the first word of occurrence ``i``; ``gid[i]`` its dense term id.
    ``pair_gid``/``pair_person`` are the graph's edges (distinct term × individual pairs).
    """

    m: int
    pos: np.ndarray
    gid: np.ndarray
    n_terms: int
    pair_gid: np.ndarray
    pair_person: np.ndarray
    n_individuals: np.ndarray
    n_occurrences: np.ndarray

    def term_strings(self, words: WordTable) -> np.ndarray:
        """The text of each term id (its words joined by a space), taken from its first occurrence."""
        first = np.full(self.n_terms, -1, dtype=np.int64)
        # the first occurrence of each id: scatter in reverse order so the smallest position wins
        first[self.gid[::-1]] = self.pos[::-1]
        parts = [pd.Series(words.vocab[words.term[first + j]]) for j in range(self.m)]
        out = parts[0]
        for p in parts[1:]:
            out = out.str.cat(p, sep=" ")
        return out.to_numpy(dtype=object)


class TermGraph:
    """Individuals × terms graph over a :class:`WordTable`.

    Parameters
    ----------
    words:
        The corpus' word occurrences.
    person_of_doc:
        Individual index (0..n_individuals-1) of every document.
    n_individuals:
        Number of individuals.
    """

    def __init__(self, words: WordTable, person_of_doc: np.ndarray, n_individuals: int):
        self.words = words
        self.person_of_word = np.asarray(person_of_doc, dtype=np.int64)[words.doc] if len(words) else \
            np.zeros(0, dtype=np.int64)
        self.n_people = int(n_individuals)
        self._layers: dict[int, GramLayer] = {}

    def layer(self, m: int) -> GramLayer:
        """The m-gram layer (computed once, from the (m-1)-gram layer)."""
        if m < 1:
            raise ValueError(f"gram size must be >= 1, got {m}")
        if m not in self._layers:
            self._layers[m] = self._build(m)
        return self._layers[m]

    def _build(self, m: int) -> GramLayer:
        w = self.words
        if m == 1:
            pos = np.arange(len(w), dtype=np.int64)
            gid = w.term.astype(np.int64)
            n_terms = len(w.vocab)
        else:
            prev = self.layer(m - 1)
            # an (m-1)-gram at position p extends to an m-gram iff word p+m-1 is in the same document
            last = prev.pos + (m - 1)
            ok = last < len(w)
            ok[ok] &= w.doc[last[ok]] == w.doc[prev.pos[ok]]
            pos = prev.pos[ok]
            keys = prev.gid[ok] * np.int64(len(w.vocab)) + w.term[last[ok]].astype(np.int64)
            codes, uniq = pd.factorize(keys, sort=False)
            gid = codes.astype(np.int64)
            n_terms = len(uniq)
        person = self.person_of_word[pos]
        edge_keys = pd.unique(gid * np.int64(self.n_people) + person)
        pair_gid = edge_keys // self.n_people
        pair_person = edge_keys % self.n_people
        return GramLayer(m=m, pos=pos, gid=gid, n_terms=n_terms, pair_gid=pair_gid, pair_person=pair_person,
                         n_individuals=np.bincount(pair_gid, minlength=n_terms),
                         n_occurrences=np.bincount(gid, minlength=n_terms))

    def indirect_terms(self, k: int, m: int) -> np.ndarray:
        """Boolean per m-gram id: used by fewer than ``k`` individuals."""
        return self.layer(m).n_individuals < k

    def indirect_per_individual(self, k: int, n: int) -> np.ndarray:
        """Number of distinct indirect terms (m = 1..n) of each individual."""
        counts = np.zeros(self.n_people, dtype=np.int64)
        for m in range(1, n + 1):
            lay = self.layer(m)
            sel = lay.n_individuals[lay.pair_gid] < k
            counts += np.bincount(lay.pair_person[sel], minlength=self.n_people)
        return counts

    def indirect_positions(self, k: int, n: int) -> np.ndarray:
        """Boolean per word occurrence: a unigram indirect identifier, or covered by an indirect m-gram (m ≥ 2)."""
        mask = self.indirect_terms(k, 1)[self.words.term] if len(self.words) else np.zeros(0, dtype=bool)
        for m in range(2, n + 1):
            lay = self.layer(m)
            starts = lay.pos[lay.n_individuals[lay.gid] < k]
            for j in range(m):
                mask[starts + j] = True
        return mask

    def indirect_shares(self, ks, ns) -> pd.DataFrame:
        """For every ``(k, n)``: ``share`` of word occurrences that are (covered by) indirect identifiers and the
        ``median`` number of distinct indirect terms per individual — the read-out of notebook 01's k/n sliders, as
        a table that a static copy of the notebook keeps."""
        rows = [{"k": int(k), "n": int(n), "share": float(self.indirect_positions(int(k), int(n)).mean())
                 if len(self.words) else 0.0,
                 "median": float(np.median(self.indirect_per_individual(int(k), int(n))))}
                for n in ns for k in ks]
        return pd.DataFrame(rows, columns=["k", "n", "share", "median"])
