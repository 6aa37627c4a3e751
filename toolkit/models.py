"""Tokenizers and models: a tiny base model built offline from scratch, or any Hugging Face model id / local path.

The CPU profile cannot fine-tune bert-base (12 s per step here), so the toolkit builds its own base the way the
papers' base models were built, only smaller: a tokenizer trained (``tokenizers``) on the ``public`` split and a
2-layer transformer pre-trained from scratch on it with the plain ``mlm`` / ``clm`` objective. The result is saved in
Hugging Face format, so every later step loads it exactly as it would load ``bert-base-cased``, ``roberta-large`` or
``gpt2`` (``load_model``): nothing in the toolkit special-cases the tiny model.

* masked LM: WordPiece (cased, BERT pre-tokenizer) + ``BertForMaskedLM``;
* causal LM: byte-level BPE (GPT-2 style) + ``GPT2LMHeadModel``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from toolkit.errors import ToolkitError

MODEL_KINDS = ("mlm", "clm")
#: Files that hold a tokenizer's vocabulary (fast ``tokenizer.json``, WordPiece, BPE, SentencePiece). A saved model
#: directory without any of them would otherwise load an *empty* tokenizer built from the config's model type
#: (transformers 5 does that silently: every word becomes ``[UNK]``).
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "sentencepiece.bpe.model",
                   "tokenizer.model")


@dataclass
class TinyModelConfig:
    """Architecture of a model built from scratch (CPU profile defaults; see ``docs/cpu_recipes.md``)."""

    kind: str = "mlm"
    vocab_size: int = 4000
    hidden_size: int = 128
    num_layers: int = 2
    num_heads: int = 2
    intermediate_size: int = 512
    max_length: int = 256

    def __post_init__(self) -> None:
        if self.kind not in MODEL_KINDS:
            raise ToolkitError(f"model kind must be one of {MODEL_KINDS}, got {self.kind!r}")
        if self.hidden_size % self.num_heads:
            raise ToolkitError(f"hidden_size {self.hidden_size} is not divisible by num_heads {self.num_heads}")


def train_tokenizer(texts: Iterable[str], kind: str, vocab_size: int = 4000):
    """Train a fast tokenizer on ``texts``: WordPiece for ``mlm``, byte-level BPE for ``clm``."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    if kind == "mlm":
        specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        normalizer = normalizers.BertNormalizer(lowercase=False, strip_accents=False, clean_text=True)
        pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok = Tokenizer(models.WordPiece(_wordpiece_vocab(texts, normalizer, pre_tokenizer, vocab_size, specials),
                                         unk_token="[UNK]", continuing_subword_prefix="##"))
        tok.normalizer, tok.pre_tokenizer = normalizer, pre_tokenizer
        cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
            special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
        tok.decoder = decoders.WordPiece()
        return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]",
                                       cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")
    if kind == "clm":
        eos = "<|endoftext|>"
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.train_from_iterator(texts, trainer=trainers.BpeTrainer(
            vocab_size=vocab_size, special_tokens=[eos], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
        tok.decoder = decoders.ByteLevel()
        return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=eos, eos_token=eos, unk_token=eos,
                                       pad_token=eos)
    raise ToolkitError(f"model kind must be one of {MODEL_KINDS}, got {kind!r}")


#: Private-use planes 15 and 16: the code points :func:`_wordpiece_vocab` spells the characters of a word with.
_PRIVATE_USE = (range(0xF0000, 0xFFFFE), range(0x100000, 0x10FFFE))


def _wordpiece_vocab(texts: Iterable[str], normalizer, pre_tokenizer, vocab_size: int,
                     specials: list[str]) -> dict[str, int]:
    """The vocabulary ``tokenizers``' ``WordPieceTrainer`` learns, learnt reproducibly.

    Why not ``WordPieceTrainer`` itself: it gives a different vocabulary in each process (huggingface/tokenizers
    #1794). It trains BPE with the ``##`` continuation prefix, and creates the ``##x`` symbols while walking a hash map
    of the words, so their ids — which break ties between equally frequent merges — follow the process's hash seed;
    every fresh masked base, and every figure measured on it, differed. Its BPE without a prefix is reproducible
    (the alphabet is sorted first), so this spells each word's characters in private-use code points, one for a
    word-initial and one for a continuing character, in sorted order (the same algorithm: word counts, the whole
    alphabet, merges by count), trains ``BpeTrainer`` on those words and spells the vocabulary back (``##`` before a
    continuing piece) — the ids the library's ``WordPiece.from_bpe`` would keep.
    """
    from collections import Counter
    from itertools import chain, islice

    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    counts: Counter[str] = Counter()
    for text in texts:
        counts.update(w for w, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text)))
    chars = sorted({c for w in counts for c in w})
    points = list(islice(chain(*_PRIVATE_USE), 2 * len(chars)))
    if len(points) < 2 * len(chars):
        raise ToolkitError(f"{len(chars)} distinct characters: the masked-LM tokenizer can learn at most "
                           f"{sum(map(len, _PRIVATE_USE)) // 2}")
    first = {c: chr(points[i]) for i, c in enumerate(chars)}
    rest = {c: chr(points[len(chars) + i]) for i, c in enumerate(chars)}
    back = {v: (c, False) for c, v in first.items()} | {v: (c, True) for c, v in rest.items()}
    spelt = {first[w[0]] + "".join(rest[c] for c in w[1:]): n for w, n in counts.items()}

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    chunks = (f"{w} " * min(n - k, 4096) for w, n in sorted(spelt.items()) for k in range(0, n, 4096))
    bpe.train_from_iterator(chunks, trainer=trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=specials, initial_alphabet=list(first.values()),
        show_progress=False))
    vocab = {}
    for piece, i in bpe.get_vocab().items():
        if piece in specials:
            vocab[piece] = i
            continue
        text, continuing = "".join(back[c][0] for c in piece), back[piece[0]][1]
        vocab["##" + text if continuing else text] = i
    return vocab


def init_model(tokenizer, config: TinyModelConfig, seed: int = 0):
    """A randomly initialised model of ``config.kind`` sized for ``tokenizer``."""
    import torch
    from transformers import BertConfig, BertForMaskedLM, GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    if config.kind == "mlm":
        return BertForMaskedLM(BertConfig(
            vocab_size=len(tokenizer), hidden_size=config.hidden_size, num_hidden_layers=config.num_layers,
            num_attention_heads=config.num_heads, intermediate_size=config.intermediate_size,
            max_position_embeddings=config.max_length, pad_token_id=tokenizer.pad_token_id))
    return GPT2LMHeadModel(GPT2Config(
        vocab_size=len(tokenizer), n_embd=config.hidden_size, n_layer=config.num_layers, n_head=config.num_heads,
        n_inner=config.intermediate_size, n_positions=config.max_length, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id))


def split_lm_head(model):
    """``(base_model, head)`` when the model is a base model plus one LM-head module holding the output embeddings
    (BERT: ``bert`` + ``cls``, RoBERTa: ``roberta`` + ``lm_head``), else ``None``. Lets training and probing apply
    the vocabulary projection only at target positions."""
    base = getattr(model, "base_model", None)
    out_emb = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if base is None or base is model or out_emb is None:
        return None
    cands = [m for _, m in model.named_children() if m is not base and next(m.parameters(), None) is not None]
    if len(cands) != 1 or not any(m is out_emb for m in cands[0].modules()):
        return None
    return base, cands[0]


def model_kind(model) -> str:
    """``"mlm"`` or ``"clm"`` from a loaded model's architecture."""
    from transformers.models.auto.modeling_auto import (MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
                                                        MODEL_FOR_MASKED_LM_MAPPING_NAMES)

    name = type(model).__name__
    if name in set(MODEL_FOR_MASKED_LM_MAPPING_NAMES.values()) or name.endswith("ForMaskedLM"):
        return "mlm"
    if name in set(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.values()) or name.endswith(("LMHeadModel", "ForCausalLM")):
        return "clm"
    raise ToolkitError(f"{name} is neither a masked nor a causal language model")


#: the file a shipped result (:mod:`toolkit.pipelines.workshop`) leaves in a checkpoint folder whose weights it left out
WEIGHTS_NOT_SHIPPED = "WEIGHTS_NOT_SHIPPED.txt"


def load_model(name_or_path: str | Path, kind: str | None = None):
    """Load ``(model, tokenizer)`` from a Hugging Face id or a local directory, without network access by default.

    ``kind`` (``"mlm"``/``"clm"``) selects the head; when omitted it is read from the saved config's architecture.
    A missing directory, a directory without config or tokenizer files (:data:`TOKENIZER_FILES`), a corrupt or
    truncated checkpoint (config, tokenizer or weights), weights that do not fit the config, a tokenizer larger than
    the model's embedding, or a model of the wrong kind is a :class:`ToolkitError` naming the directory.
    """
    import pickle

    from safetensors import SafetensorError
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForMaskedLM, AutoTokenizer

    src = str(name_or_path)
    local = Path(src).exists()
    if not local and (Path(src).is_absolute() or src.startswith(("./", "../", "~"))):
        raise ToolkitError(f"{src}: no such model directory")
    if local and not (Path(src) / "config.json").is_file():
        raise ToolkitError(f"{src}: no config.json — not a saved Hugging Face model directory")
    if local and (Path(src) / WEIGHTS_NOT_SHIPPED).is_file():
        raise ToolkitError(f"{src}: a shipped result without its model weights (workshop mode, prebuilt/notebooks/): this "
                           "step needs the model — run the notebook live (another work_dir, or make demo)")
    if local and not any((Path(src) / f).is_file() for f in TOKENIZER_FILES):
        raise ToolkitError(f"{src}: no tokenizer files (expected one of {', '.join(TOKENIZER_FILES)}); save the "
                           "tokenizer with the model (tokenizer.save_pretrained)")
    try:
        config = AutoConfig.from_pretrained(src)
    except (OSError, ValueError) as exc:
        raise ToolkitError(f"{src}: cannot load the model config ({exc}). Model hubs are not reachable here: "
                           f"pass a local directory, or a model id already in the local Hugging Face cache") from exc
    archs = config.architectures or []
    if kind is None:
        kind = "clm" if any(a.endswith(("LMHeadModel", "ForCausalLM")) for a in archs) else "mlm"
    if kind not in MODEL_KINDS:
        raise ToolkitError(f"model kind must be one of {MODEL_KINDS}, got {kind!r}")
    wrong = [a for a in archs if (kind == "mlm" and a.endswith(("LMHeadModel", "ForCausalLM")))
             or (kind == "clm" and a.endswith("ForMaskedLM"))]
    if wrong:
        raise ToolkitError(f"{src} is a {'causal' if kind == 'mlm' else 'masked'} language model ({wrong[0]}); "
                           f"this step needs a {'masked' if kind == 'mlm' else 'causal'} one")
    try:
        tokenizer = AutoTokenizer.from_pretrained(src)
    except Exception as exc:  # noqa: BLE001 - a truncated or hand-edited tokenizer file fails in the Rust parser
        # (a bare Exception) or in the Python glue (KeyError, TypeError ...): all mean "this tokenizer is broken"
        raise ToolkitError(f"{src}: cannot load the tokenizer ({type(exc).__name__}: {exc})") from exc
    if not getattr(tokenizer, "is_fast", False):
        raise ToolkitError(f"{src}: a fast tokenizer (tokenizer.json) is required for word offsets")
    auto = AutoModelForMaskedLM if kind == "mlm" else AutoModelForCausalLM
    try:
        model = auto.from_pretrained(src)
    except (OSError, ValueError, RuntimeError, SafetensorError, pickle.UnpicklingError, EOFError) as exc:
        # SafetensorError: truncated or overwritten model.safetensors; the others: pytorch_model.bin, size mismatch
        raise ToolkitError(f"{src}: cannot load the model weights, the checkpoint is incomplete or corrupt "
                           f"({type(exc).__name__}: {exc})") from exc
    n_embeddings = model.get_input_embeddings().num_embeddings
    if len(tokenizer) > n_embeddings:
        raise ToolkitError(f"{src}: the tokenizer has {len(tokenizer)} tokens but the model's embedding only "
                           f"{n_embeddings} rows: tokenizer and weights do not belong together")
    if kind == "clm" and tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


def vocabulary_surfaces(tokenizer, ids: Sequence[int] | None = None) -> dict[int, str]:
    """Surface form of token ids (default: the whole vocabulary): the string the token stands for, without the
    WordPiece continuation prefix (``##``) or the byte-level space marker, stripped. Special tokens stay as they are."""
    if ids is None:
        ids = range(len(tokenizer))
    ids = [int(i) for i in ids]
    toks = tokenizer.convert_ids_to_tokens(ids)
    specials = set(tokenizer.all_special_tokens)
    prefix = _continuation_prefix(tokenizer)
    out = {}
    for i, t in zip(ids, toks):
        if t is None:
            out[i] = ""
        elif t in specials:
            out[i] = t
        else:
            if prefix and t.startswith(prefix) and len(t) > len(prefix):
                t = t[len(prefix):]
            out[i] = tokenizer.convert_tokens_to_string([t]).strip()
    return out


def _continuation_prefix(tokenizer) -> str | None:
    """The WordPiece continuation prefix (``##``) of a fast tokenizer, ``None`` for other models."""
    from tokenizers import models

    model = getattr(getattr(tokenizer, "backend_tokenizer", None), "model", None)
    return model.continuing_subword_prefix if isinstance(model, models.WordPiece) else None
