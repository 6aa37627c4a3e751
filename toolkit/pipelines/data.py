"""The documents of one experiment run (:class:`ExperimentData`), selected from its corpus as the config says
(:func:`load_data`): the public split (the base model's pre-training data), the public reserve (public individuals
held back from the base: ``corpus.public_reserve``), the members (fine-tuning data) and the non-members (the attacks'
and the held-out probe's population), disjoint by individual."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from toolkit.config.experiment import ExperimentConfig
from toolkit.corpus import Corpus
from toolkit.errors import ToolkitError


def _select(corpus, split: str, n: int | None, what: str, where: str, skip: int = 0):
    """The documents of the individuals ``skip … skip + n`` of ``split`` (in the corpus' order; ``n`` None: all)."""
    from toolkit.errors import CorpusError

    try:
        part = corpus.filter(split=split)
    except CorpusError:
        raise ToolkitError(f"{where}: corpus.{what}: no document of split {split!r}; the corpus has splits "
                           f"{corpus.splits}") from None
    people = part.person_ids[skip:skip + n] if n else part.person_ids[skip:]
    return part.filter(person_ids=people)


def _refuse_shared(where: str, people, others, what: str) -> None:
    """A :class:`ToolkitError` (a count, never a name) when ``people`` and ``others`` share an individual."""
    shared = set(people) & set(others)
    if shared:
        raise ToolkitError(f"{where}: {len(shared)} individuals {what}; splits must be disjoint by individual")


@dataclass
class ExperimentData:
    """The documents of one run: the whole ``corpus`` and the selected ``public`` (None without a public split),
    ``members`` and ``nonmembers`` :class:`~toolkit.corpus.Corpus`, and the ``reserve`` (``corpus.public_reserve``'s
    public individuals, none of them in ``public``; None without one). The canaries step replaces ``members`` with
    the notes holding its canaries (every later step sees those) and records the one-run audit's canary table in
    ``one_run_canaries``."""

    corpus: Corpus
    public: Corpus | None
    members: Corpus
    nonmembers: Corpus
    one_run_canaries: pd.DataFrame | None = None
    reserve: Corpus | None = None

    @property
    def tuning_public(self) -> Corpus | None:
        """The public individuals the base model has not seen when there are some (the reserve), else the public
        split: a gradient-subspace strategy's anchors and the DP hyper-parameter search's data (methods.md §3)."""
        return self.reserve if self.reserve is not None else self.public


def load_data(cfg: ExperimentConfig) -> ExperimentData:
    """Load the corpus and select ``public``, ``members``, ``nonmembers`` (a :class:`Corpus` each, public may be
    None) as the config says."""
    from toolkit.corpus import load_corpus

    docs = []
    for p in cfg.corpus.path:
        docs.extend(load_corpus(p, format=cfg.corpus.format))
    corpus = Corpus(docs, source=cfg.corpus.path[0] if len(cfg.corpus.path) == 1 else ", ".join(cfg.corpus.path))
    src = cfg.source or "<config>"
    members = _select(corpus, cfg.corpus.member_split, cfg.corpus.n_individuals, "member_split", src)
    nonmembers = _select(corpus, cfg.corpus.nonmember_split, cfg.corpus.n_individuals, "nonmember_split", src)
    _refuse_shared(src, members.person_ids, nonmembers.person_ids, "are both members and non-members")
    public = reserve = None
    if cfg.corpus.public_split is not None and (cfg.models is None or cfg.corpus.public_split in corpus.splits):
        public = _select(corpus, cfg.corpus.public_split, cfg.corpus.n_public, "public_split", src)
        if cfg.corpus.public_reserve:
            start, after = ((cfg.corpus.n_public, "corpus.n_public") if cfg.corpus.public_reserve_start is None
                            else (cfg.corpus.public_reserve_start, "corpus.public_reserve_start"))
            reserve = _select(corpus, cfg.corpus.public_split, cfg.corpus.public_reserve, "public_split", src,
                              skip=start)
            if len(reserve.person_ids) < cfg.corpus.public_reserve:
                raise ToolkitError(f"{src}: corpus.public_reserve: split {cfg.corpus.public_split!r} has "
                                   f"{len(reserve.person_ids)} individuals after its first {start} "
                                   f"({after}), {cfg.corpus.public_reserve} asked")
            _refuse_shared(src, reserve.person_ids, [*members.person_ids, *nonmembers.person_ids],
                           "of the public reserve are members or non-members")
    return ExperimentData(corpus, public, members, nonmembers, reserve=reserve)


__all__ = ["ExperimentData", "load_data"]
