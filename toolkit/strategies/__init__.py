"""Fine-tuning strategies (methods.md §3): which text a model trains on and which words may be targets.

Every strategy shares one data pipeline (:func:`training_examples`) and one trainer (``toolkit.training``); a strategy
is data — the text variant, the protected identifier kinds, whether DP-SGD is used — not code.

Masked LM (whole-word masking, 15% of eligible words afresh each epoch, 80/10/10): ``mlm``, ``mlm_pseudo``,
``ppmlm``, ``dppmlm``, ``ippmlm``, ``mlm_dp``, ``ppmlm_category``, ``ppmlm_surrogate``, ``ppmlm_surrogate_targets``,
``ppmlm_surrogate_dp``.
Causal LM (protected tokens stay in the input with label -100): ``clm``, ``clm_pseudo``, ``ppclm``, ``dppclm``,
``ippclm``, ``clm_dp``, ``ppclm_category``, ``ppclm_surrogate``, ``ppclm_surrogate_targets``, ``ppclm_surrogate_dp``.

Text variants (:data:`TEXT_VARIANTS`): ``original``; ``pseudo`` (every PII span becomes ``X``); ``category`` (it
becomes its category, ``[NAME]``, ``[DATE]`` …); ``surrogate`` (a made-up value of its category, consistent per
individual: :mod:`toolkit.strategies.surrogates`). The rewritten variants read the detector's spans; PP-style
protection on them reads the identifier positions, carried over to the rewritten text
(:func:`toolkit.strategies.pseudonymize.remap_positions`): ``direct`` then protects the replacement's words.

PPclm / PPMLM keep the identifiers in the input, so the model still learns how the rest of a note depends on them
and a candidate-ranking attacker recovers them (PII inference); ``*_category`` and ``*_surrogate`` take them out of
the input as well. Surrogates are not targets by default (``*_surrogate``; ``*_surrogate_targets`` lets the model
learn them): on the quick-start setup the two were alike in PII inference and utility, while learning surrogate
dates and names made the model emit words that are identifier types elsewhere (audit privacy 0.95 against 0.985).

``*_dp_lora*`` (DP-LoRA, Yu et al. 2022) train as ``*_dp`` but only rank-r adapters of the attention and MLP
projections, the base frozen (``lora_rank``; :mod:`toolkit.training.lora`): ``mlm_dp_lora``, ``clm_dp_lora`` (r = 8),
``clm_dp_lora4``, ``clm_dp_lora16``, ``ppclm_surrogate_dp_lora``.

``*_dp_pdp`` / ``*_dp_gep`` (gradient subspace from public data: PDP-SGD, Zhou et al. 2021; GEP, Yu et al. 2021)
train as ``*_dp`` with DP-SGD's clipping and noise in the top-k subspace of the public split's gradients
(``subspace``, ``subspace_rank``, ``subspace_every``; :mod:`toolkit.training.subspace`): ``clm_dp_pdp``,
``clm_dp_gep``, ``ppclm_surrogate_dp_gep`` (k = 64, a basis every 10 steps).

``*_user`` (user-level sampling, DP-SGD-ULS of Charles et al. 2024) train as their DP strategy but take up to
``unit_examples`` chunks (8) of every drawn individual, whose *mean* gradient is clipped as one (sensitivity and
accountant unchanged; :mod:`toolkit.training.dp`): ``clm_dp_user``, ``clm_dp_gep_user``.

``*_surrogate_dp`` trains the ``*_surrogate`` text (surrogates in the input, never targets; indirect identifiers
protected) with DP-SGD (:mod:`toolkit.training.dp`, privacy unit: the individual): surrogates close the context leak
that DP's noise only bounds, DP bounds membership, which surrogates leave open (issue 27's frontier).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from toolkit.corpus import Corpus
from toolkit.errors import ToolkitError
from toolkit.identifiers.storage import check_coverage
from toolkit.identifiers.words import WordTable, segment_corpus
from toolkit.strategies.encoding import EncodedCorpus, encode_corpus, special_template
from toolkit.strategies.pseudonymize import pseudonymize, rewrite_corpus

KINDS = ("mlm", "clm")
TEXT_VARIANTS = ("original", "pseudo", "category", "surrogate")
PROTECTABLE = ("direct", "indirect")
SUBSPACE_METHODS = ("pdp", "gep")  # gradient-subspace DP-SGD from public data (toolkit.training.subspace)


@dataclass(frozen=True)
class Strategy:
    """One row of methods.md §3's tables; validated on construction (:class:`ToolkitError` naming the field)."""

    name: str
    kind: str  # "mlm" | "clm"
    text: str = "original"  # one of TEXT_VARIANTS
    protect: tuple[str, ...] = ()  # subset of ("direct", "indirect")
    dp: bool = False
    description: str = ""
    lora_rank: int = 0  # > 0: DP-LoRA, rank-r adapters of the attention and MLP projections (toolkit.training.lora)
    subspace: str = ""  # "pdp" | "gep": DP-SGD's noise in a rank-k subspace of public gradients (training.subspace)
    subspace_rank: int = 0  # k, the subspace's dimension
    subspace_every: int = 1  # steps between two bases (recomputed from the public anchors; the papers: every step)
    unit_examples: int = 1  # DP: examples (chunks) of a drawn privacy unit per step, their mean gradient clipped as
    # one (user-level sampling, Charles et al. 2024); 0: all of the unit's (toolkit.training.dp)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ToolkitError(f"a strategy needs a name, got {self.name!r}")
        if self.kind not in KINDS:
            raise ToolkitError(f"strategy {self.name}: kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if self.text not in TEXT_VARIANTS:
            raise ToolkitError(f"strategy {self.name}: text must be one of {', '.join(TEXT_VARIANTS)}, "
                               f"got {self.text!r}")
        if isinstance(self.protect, str) or not set(self.protect) <= set(PROTECTABLE) \
                or len(set(self.protect)) != len(tuple(self.protect)):
            raise ToolkitError(f"strategy {self.name}: protect must be distinct kinds among {', '.join(PROTECTABLE)}, "
                               f"got {self.protect!r}")
        if not isinstance(self.dp, bool):
            raise ToolkitError(f"strategy {self.name}: dp must be true or false, got {self.dp!r}")
        if isinstance(self.lora_rank, bool) or not isinstance(self.lora_rank, int) or self.lora_rank < 0:
            raise ToolkitError(f"strategy {self.name}: lora_rank must be an integer >= 0, got {self.lora_rank!r}")
        if self.lora_rank and not self.dp:
            raise ToolkitError(f"strategy {self.name}: lora_rank > 0 (DP-LoRA) needs dp: true")
        self._check_subspace()
        if isinstance(self.unit_examples, bool) or not isinstance(self.unit_examples, int) or self.unit_examples < 0:
            raise ToolkitError(f"strategy {self.name}: unit_examples must be an integer >= 0, "
                               f"got {self.unit_examples!r}")
        if self.unit_examples != 1 and not self.dp:
            raise ToolkitError(f"strategy {self.name}: unit_examples (chunks per drawn individual) needs dp: true")
        object.__setattr__(self, "protect", tuple(self.protect))

    def _check_subspace(self) -> None:
        for key, least in (("subspace_rank", 0), ("subspace_every", 1)):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ToolkitError(f"strategy {self.name}: {key} must be an integer >= {least}, got {value!r}")
        if self.subspace not in ("", *SUBSPACE_METHODS):
            raise ToolkitError(f"strategy {self.name}: subspace must be one of {', '.join(SUBSPACE_METHODS)} or "
                               f"empty, got {self.subspace!r}")
        if bool(self.subspace) != bool(self.subspace_rank):
            raise ToolkitError(f"strategy {self.name}: subspace and subspace_rank > 0 go together")
        if self.subspace and (not self.dp or self.lora_rank):
            raise ToolkitError(f"strategy {self.name}: a gradient subspace needs dp: true and no lora_rank")

    @property
    def reads_spans(self) -> bool:
        """Whether the strategy rewrites the detector's PII spans (and so reads ``spans.parquet``)."""
        return self.text != "original"


STRATEGIES: dict[str, Strategy] = {s.name: s for s in [
    Strategy("mlm", "mlm", description="masked LM on the original text, every word may be a target"),
    Strategy("mlm_pseudo", "mlm", text="pseudo", description="MLMA: PII spans replaced by the word X"),
    Strategy("ppmlm", "mlm", protect=("direct", "indirect"),
             description="PPMLM: direct and indirect identifiers never targets, visible as context"),
    Strategy("dppmlm", "mlm", protect=("direct",), description="direct identifiers protected only"),
    Strategy("ippmlm", "mlm", protect=("indirect",), description="indirect identifiers protected only"),
    Strategy("mlm_dp", "mlm", dp=True, description="masked LM with DP-SGD (Opacus)"),
    Strategy("clm", "clm", description="causal LM on the original text, every token a target"),
    Strategy("clm_pseudo", "clm", text="pseudo", description="PII spans replaced by X (a normal target)"),
    Strategy("ppclm", "clm", protect=("direct", "indirect"),
             description="PPclm: tokens of protected words get label -100 but stay in the input"),
    Strategy("dppclm", "clm", protect=("direct",), description="direct identifiers protected only"),
    Strategy("ippclm", "clm", protect=("indirect",), description="indirect identifiers protected only"),
    Strategy("clm_dp", "clm", dp=True, description="causal LM with DP-SGD (Opacus)"),
    # identifiers out of the input as well as out of the targets (PII inference on PP* finds them in the input)
    Strategy("ppmlm_category", "mlm", text="category", protect=("indirect",),
             description="PII spans replaced by their category ([NAME], [DATE] ...); indirect identifiers protected"),
    Strategy("ppmlm_surrogate", "mlm", text="surrogate", protect=("direct", "indirect"),
             description="PII spans replaced by made-up values of their category, consistent per individual, "
                         "never targets; indirect identifiers protected"),
    Strategy("ppmlm_surrogate_targets", "mlm", text="surrogate", protect=("indirect",),
             description="as ppmlm_surrogate, but surrogates may be targets"),
    Strategy("ppclm_category", "clm", text="category", protect=("indirect",),
             description="PII spans replaced by their category ([NAME], [DATE] ...); indirect identifiers protected"),
    Strategy("ppclm_surrogate", "clm", text="surrogate", protect=("direct", "indirect"),
             description="PII spans replaced by made-up values of their category, consistent per individual, "
                         "label -100; indirect identifiers protected"),
    Strategy("ppclm_surrogate_targets", "clm", text="surrogate", protect=("indirect",),
             description="as ppclm_surrogate, but surrogate tokens are targets"),
    # surrogates (the context leak) + person-level DP-SGD (membership)
    Strategy("ppmlm_surrogate_dp", "mlm", text="surrogate", protect=("direct", "indirect"), dp=True,
             description="ppmlm_surrogate trained with DP-SGD (Opacus), an individual as the privacy unit"),
    Strategy("ppclm_surrogate_dp", "clm", text="surrogate", protect=("direct", "indirect"), dp=True,
             description="ppclm_surrogate trained with DP-SGD (Opacus), an individual as the privacy unit"),
    # DP-LoRA (Yu et al. 2022): the base frozen, DP-SGD on rank-r adapters only (noise in r·(d+k) coordinates per
    # adapted matrix instead of every weight); the rank is the axis of the clm rows
    Strategy("mlm_dp_lora", "mlm", dp=True, lora_rank=8,
             description="masked LM with DP-SGD on rank-8 LoRA adapters of attention and MLP (base frozen)"),
    Strategy("clm_dp_lora4", "clm", dp=True, lora_rank=4,
             description="causal LM with DP-SGD on rank-4 LoRA adapters of attention and MLP (base frozen)"),
    Strategy("clm_dp_lora", "clm", dp=True, lora_rank=8,
             description="causal LM with DP-SGD on rank-8 LoRA adapters of attention and MLP (base frozen)"),
    Strategy("clm_dp_lora16", "clm", dp=True, lora_rank=16,
             description="causal LM with DP-SGD on rank-16 LoRA adapters of attention and MLP (base frozen)"),
    Strategy("ppclm_surrogate_dp_lora", "clm", text="surrogate", protect=("direct", "indirect"), dp=True, lora_rank=8,
             description="ppclm_surrogate trained with DP-SGD on rank-8 LoRA adapters (base frozen)"),
    # gradient subspace from the public split (toolkit.training.subspace): PDP-SGD (Zhou et al. 2021) noises k = 64
    # coordinates of the top-k subspace of public gradients; GEP (Yu et al. 2021) noises that embedding and, scaled
    # down, the residual; the basis recomputed from 128 public chunks every 10 steps (the papers: every step; on the
    # CPU profile a basis costs ~12 s against ~1.2 s for a step, so every step would make a run ~10x longer)
    Strategy("clm_dp_pdp", "clm", dp=True, subspace="pdp", subspace_rank=64, subspace_every=10,
             description="causal LM with DP-SGD projected on the top-64 subspace of public-split gradients "
                         "(PDP-SGD: noise in 64 coordinates)"),
    Strategy("clm_dp_gep", "clm", dp=True, subspace="gep", subspace_rank=64, subspace_every=10,
             description="causal LM with gradient embedding perturbation (GEP): the gradient's top-64 public-subspace "
                         "embedding and its residual clipped and noised apart"),
    Strategy("ppclm_surrogate_dp_gep", "clm", text="surrogate", protect=("direct", "indirect"), dp=True,
             subspace="gep", subspace_rank=64, subspace_every=10,
             description="ppclm_surrogate trained with GEP (top-64 public-gradient subspace, embedding and residual)"),
    # user-level sampling (DP-SGD-ULS, Charles et al. 2024): up to 8 chunks of every drawn individual per step, their
    # mean gradient clipped as one, instead of one chunk drawn at random (the same sensitivity C per individual)
    Strategy("clm_dp_user", "clm", dp=True, unit_examples=8,
             description="causal LM with DP-SGD, up to 8 chunks of each drawn individual per step, their mean "
                         "gradient clipped as one (user-level sampling)"),
    Strategy("clm_dp_gep_user", "clm", dp=True, subspace="gep", subspace_rank=64, subspace_every=10, unit_examples=8,
             description="clm_dp_gep with up to 8 chunks of each drawn individual per step, their mean gradient "
                         "clipped as one (user-level sampling)"),
]}


def get_strategy(name: str) -> Strategy:
    try:
        return STRATEGIES[name]
    except KeyError:
        raise ToolkitError(f"unknown strategy {name!r}; available: {', '.join(STRATEGIES)}") from None


def word_rows_of_positions(words: WordTable, doc_ids: list[str], positions: pd.DataFrame) -> np.ndarray:
    """Word-table rows of the ``(doc_id, start)`` word occurrences in ``positions`` (an identifiers output).

    Raises :class:`ToolkitError` when a position does not start a word of the corpus (identifiers computed on another
    corpus or another segmentation).
    """
    index = {d: i for i, d in enumerate(doc_ids)}
    doc = positions["doc_id"].map(index)
    if doc.isna().any():
        missing = positions.loc[doc.isna(), "doc_id"].iloc[0]
        raise ToolkitError(f"identifier positions mention document {missing!r}, which is not in the corpus")
    stride = np.int64(max(int(words.end.max(initial=0)), int(positions["end"].max()) if len(positions) else 0) + 1)
    keys = words.doc.astype(np.int64) * stride + words.start
    want = doc.to_numpy(dtype=np.int64) * stride + positions["start"].to_numpy(dtype=np.int64)
    rows = np.searchsorted(keys, want)
    bad = (rows >= len(keys)) | (keys[np.minimum(rows, len(keys) - 1)] != want)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ToolkitError(f"identifier position {positions.iloc[i]['doc_id']}:{int(positions.iloc[i]['start'])} "
                           f"does not start a word of the corpus (identifiers from another corpus?)")
    return rows


def protected_words(words: WordTable, doc_ids: list[str], positions: pd.DataFrame,
                    protect: tuple[str, ...]) -> np.ndarray:
    """Boolean per word-table row: protected under ``protect`` (``direct`` and/or ``indirect`` columns)."""
    mask = np.zeros(len(words), dtype=bool)
    if not protect or positions is None or len(positions) == 0:
        return mask
    sel = np.zeros(len(positions), dtype=bool)
    for kind in protect:
        sel |= positions[kind].to_numpy(dtype=bool)
    mask[word_rows_of_positions(words, doc_ids, positions[sel])] = True
    return mask


def strategy_inputs(corpus: Corpus, strategy: Strategy, positions: pd.DataFrame | None, spans: pd.DataFrame | None,
                    *, surrogate_key: bytes | None = None, tokenizer=None) -> tuple[list[str], pd.DataFrame | None]:
    """The training texts of a strategy and the identifier positions on them: the documents' texts and
    ``positions`` as they are (``original``), or rewritten (:func:`toolkit.strategies.pseudonymize.rewrite_corpus`:
    ``surrogate_key`` seeds the surrogates, None: a fresh random key; ``tokenizer``, the training model's, makes
    surrogate names as many tokens long as the originals)."""
    if strategy.text == "original":
        return [d.text for d in corpus], positions
    if spans is None:
        raise ToolkitError(f"strategy {strategy.name} needs the detector's PII spans (spans.parquet)")
    return rewrite_corpus(corpus, strategy.text, spans, positions, surrogate_key=surrogate_key, tokenizer=tokenizer)


def strategy_texts(corpus: Corpus, strategy: Strategy, spans: pd.DataFrame | None, *,
                   surrogate_key: bytes | None = None, tokenizer=None) -> list[str]:
    """The training texts of a strategy (:func:`strategy_inputs` without positions)."""
    return strategy_inputs(corpus, strategy, None, spans, surrogate_key=surrogate_key, tokenizer=tokenizer)[0]


def require_identifiers(corpus: Corpus, strategy: Strategy, positions: pd.DataFrame | None,
                        spans: pd.DataFrame | None) -> None:
    """Refuse to build a strategy's data unless the identifiers it reads exist and cover every document of
    ``corpus``, made from exactly its text (:func:`toolkit.identifiers.check_coverage`: document fingerprints carried
    by the tables ``load_identifiers`` / ``IdentifierAnalysis`` return). Without this, a document the identifiers
    miss, or whose text changed since, would be trained on with nothing protected or pseudonymised."""
    if strategy.protect:
        if positions is None:
            raise ToolkitError(f"strategy {strategy.name} needs identifier positions (positions.parquet)")
        check_coverage(corpus, positions, table="positions")
    if strategy.reads_spans:
        if spans is None:
            raise ToolkitError(f"strategy {strategy.name} needs the detector's PII spans (spans.parquet)")
        check_coverage(corpus, spans, table="spans")


@dataclass
class TrainingSet:
    """The examples of one epoch (see :func:`training_examples`) and, for each, the individual (``person_id`` of its
    document) it comes from: the privacy unit of DP-SGD's per-individual sampling."""

    examples: list[dict]
    person_ids: list[str] = field(default_factory=list)


def training_set(corpus: Corpus, tokenizer, strategy: Strategy | str, *, positions: pd.DataFrame | None,
                 spans: pd.DataFrame | None = None, max_length: int, progress: bool = True,
                 surrogate_key: bytes | None = None) -> TrainingSet:
    """:func:`training_examples` with the individual of every example."""
    strategy = get_strategy(strategy) if isinstance(strategy, str) else strategy
    require_identifiers(corpus, strategy, positions, spans)
    doc_ids = [d.doc_id for d in corpus]
    if strategy.protect and strategy.reads_spans:  # the positions must fit the original texts before moving
        word_rows_of_positions(segment_corpus([d.text for d in corpus], progress=False), doc_ids, positions)
    texts, positions = strategy_inputs(corpus, strategy, positions if strategy.protect else None, spans,
                                       surrogate_key=surrogate_key, tokenizer=tokenizer)
    words = segment_corpus(texts, progress=False)
    protected = protected_words(words, doc_ids, positions, strategy.protect)
    enc = encode_corpus(texts, tokenizer, max_length=max_length, words=words, progress=progress)
    people = [d.person_id for d in corpus]
    return TrainingSet(examples_from_encoding(enc, protected, strategy.kind),
                       [people[i] for i in enc.chunk_doc.tolist()])


def training_examples(corpus: Corpus, tokenizer, strategy: Strategy | str, *, positions: pd.DataFrame | None,
                      spans: pd.DataFrame | None = None, max_length: int, progress: bool = True,
                      surrogate_key: bytes | None = None) -> list[dict]:
    """The examples one epoch of a strategy trains on.

    Masked LM: ``{"input_ids", "special_tokens_mask", "word_ids"}`` where ``special_tokens_mask`` is 1 for every
    token that may never be a target (special tokens, tokens outside words, tokens overlapping a protected word) and
    ``word_ids`` numbers the words of the chunk (-1: none) for whole-word masking.
    Causal LM: ``{"input_ids", "labels"}`` with label -100 on every token overlapping a protected word.

    A strategy that reads identifiers refuses documents they do not cover (:func:`require_identifiers`). The
    ``*_surrogate`` strategies draw their surrogates under ``surrogate_key`` (None: a fresh random key).
    """
    return training_set(corpus, tokenizer, strategy, positions=positions, spans=spans, max_length=max_length,
                        progress=progress, surrogate_key=surrogate_key).examples


def examples_from_encoding(enc: EncodedCorpus, protected: np.ndarray, kind: str) -> list[dict]:
    """Examples from an encoding and the per-word ``protected`` flags: a token is protected when its characters
    overlap any protected word (``enc.overlap``; without it, when the word of its last character is protected)."""
    cum = np.concatenate([[0], np.cumsum(protected, dtype=np.int64)])
    out = []
    for c, (ids, rows) in enumerate(zip(enc.input_ids, enc.word_row)):
        in_word = rows >= 0
        prot = np.zeros(len(rows), dtype=bool)
        prot[in_word] = protected[rows[in_word]]
        if enc.overlap is not None:
            first, last = enc.overlap[c][:, 0], enc.overlap[c][:, 1]
            hit = first >= 0
            prot[hit] |= cum[last[hit] + 1] > cum[first[hit]]
        if kind == "mlm":
            local = np.full(len(rows), -1, dtype=np.int64)
            if in_word.any():
                _, local[in_word] = np.unique(rows[in_word], return_inverse=True)
            out.append({"input_ids": ids.tolist(), "special_tokens_mask": (~in_word | prot).astype(np.int64).tolist(),
                        "word_ids": local.tolist()})
        else:
            labels = ids.copy()
            labels[prot] = -100
            out.append({"input_ids": ids.tolist(), "labels": labels.tolist()})
    return out


__all__ = ["KINDS", "PROTECTABLE", "STRATEGIES", "SUBSPACE_METHODS", "TEXT_VARIANTS", "EncodedCorpus", "Strategy",
           "TrainingSet", "encode_corpus", "examples_from_encoding", "get_strategy", "protected_words",
           "pseudonymize", "require_identifiers", "special_template", "strategy_inputs", "strategy_texts",
           "training_examples", "training_set", "word_rows_of_positions"]
