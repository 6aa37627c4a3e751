"""The masked-LM data collator of every ``*mlm*`` strategy (methods.md §3): protected whole-word masking.

Rule, for each batch (so afresh every epoch)
--------------------------------------------
* **Eligible words.** A word (tokens sharing a chunk-local ``word_ids`` value >= 0) is eligible when *none* of its
  tokens is flagged in ``special_tokens_mask``. The example builder (:func:`toolkit.strategies.training_examples`)
  flags special tokens, tokens outside words and every token of a protected word, so under ``ppmlm`` /
  ``dppmlm`` / ``ippmlm`` protected words are never targets but stay visible as context; under ``mlm`` every word
  is eligible.
* **Choice.** Each eligible word is chosen independently with probability ``mlm_probability`` (15%): one Bernoulli
  draw *per word*, not per token, from the collator's generator (``seed=`` makes the sequence of draws
  reproducible; each call is a fresh draw, which is how "15% of eligible words chosen afresh each epoch" comes
  about).
* **Targets.** Every sub-token of a chosen word is a target (label = original id); all other tokens, padding
  included, get label -100.
* **Replacement.** Per target *token* (as in BERT and in the stock collator): 80% ``[MASK]``, 10% a random
  non-special token of the vocabulary, 10% unchanged (``mask_replace_prob``, ``random_replace_prob``). So the
  word is chosen as a whole, while the sub-tokens of a chosen word may be replaced differently.

Why not ``DataCollatorForLanguageModeling(whole_word_mask=True)``: that path needs offset mappings in the examples
and derives words from token adjacency (the tokenizer's pre-tokenisation), not from the toolkit's words of methods.md §1
on which protection is decided (``O'Brien`` is one adjacency word but the two toolkit words ``o`` and ``brien``), and
it forces ``mask_replace_prob=1``, i.e. no 80/10/10. Here the words come from the example's own ``word_ids``, so
protection decided on words reaches every sub-token, and the replacement is methods.md §3's.

Everything else is inherited from :class:`transformers.DataCollatorForLanguageModeling`: argument validation,
``seed`` / generator handling (in DataLoader workers the generator also follows the worker seed, which changes
every epoch), padding of the model inputs through the tokenizer (``pad_to_multiple_of``, padding side), PyTorch
tensors. The masking is vectorised over the batch (no loop over tokens or words).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

import numpy as np
import torch
import torch.utils.data
from transformers import DataCollatorForLanguageModeling
from transformers.data.data_collator import pad_without_fast_tokenizer_warning

_ANNOTATIONS = ("word_ids", "special_tokens_mask")


@dataclass
class ProtectedWholeWordCollator(DataCollatorForLanguageModeling):
    """Whole-word masking over eligible (non-protected) words with 80/10/10 replacement per target token.

    Consumes examples ``{"input_ids", "special_tokens_mask", "word_ids"}`` (see
    :func:`toolkit.strategies.training_examples`) and returns ``{"input_ids", "attention_mask", "labels"}``
    (PyTorch tensors, padded by the tokenizer). See the module docstring for the rule (methods.md §3).

    Parameters (besides the inherited ``tokenizer``, ``pad_to_multiple_of``, ``seed``)
    ----------
    mlm_probability:
        Probability that an eligible *word* is chosen (default 0.15).
    mask_replace_prob, random_replace_prob:
        Per target token: share replaced by the mask token (0.8), by a random non-special token (0.1); the rest
        (0.1) is left unchanged.
    """

    mlm: bool = field(default=True, init=False)
    whole_word_mask: bool = field(default=False, init=False)  # HF's offset-based path is not used (see module doc)
    mlm_probability: float | None = 0.15
    mask_replace_prob: float = 0.8
    random_replace_prob: float = 0.1
    return_tensors: str = "pt"

    def __post_init__(self) -> None:
        if self.return_tensors != "pt":
            raise ValueError(f"{type(self).__name__} returns PyTorch tensors only (return_tensors='pt'), "
                             f"got {self.return_tensors!r}")
        super().__post_init__()
        self._mask_id = int(self.tokenizer.mask_token_id)
        vocab = len(self.tokenizer)
        allowed = torch.ones(vocab, dtype=torch.bool)
        special = [i for i in self.tokenizer.all_special_ids if i is not None and 0 <= i < vocab]
        allowed[special] = False
        pool = allowed.nonzero().squeeze(1)
        # random replacements: any non-special token (all tokens if the vocabulary is nothing but special tokens)
        self._random_pool = pool if len(pool) else torch.arange(vocab)

    def create_rng(self) -> None:
        """The seeded generator; in a DataLoader worker it also depends on the worker's seed, which the DataLoader
        draws afresh for every epoch (HF seeds workers with ``seed + worker id`` only, so non-persistent workers
        would repeat the same masks every epoch)."""
        info = torch.utils.data.get_worker_info()
        if info is None:
            super().create_rng()
            return
        self.generator = torch.Generator().manual_seed((self.seed * 1_000_003 + info.seed) % 2**63)

    # -- collation ---------------------------------------------------------------------------------------------------

    def torch_call(self, examples: list[Mapping[str, Any]]) -> dict[str, Any]:
        if self.seed is not None and self.generator is None:
            self.create_rng()
        if not examples or not isinstance(examples[0], Mapping):
            raise ValueError(f"{type(self).__name__} needs examples as dicts with input_ids, special_tokens_mask and "
                             f"word_ids (toolkit.strategies.training_examples)")
        try:
            word_lists = [ex["word_ids"] for ex in examples]
            flag_lists = [ex["special_tokens_mask"] for ex in examples]
        except KeyError as exc:
            raise ValueError(f"{type(self).__name__}: every example needs {exc.args[0]!r} "
                             f"(toolkit.strategies.training_examples builds them)") from None
        lengths = [len(ex["input_ids"]) for ex in examples]
        if [len(w) for w in word_lists] != lengths or [len(f) for f in flag_lists] != lengths:
            raise ValueError("word_ids or special_tokens_mask differ in length from input_ids in some example")
        # The tokenizer pads the model inputs (pad id, attention mask, side, pad_to_multiple_of); the two per-token
        # annotations are padded here (word -1, flag 1): one np.fromiter each instead of the tokenizer's
        # pure-Python flatten + torch.tensor, which costs ~1 ms per 32 x 256 list of lists.
        features = [{k: v for k, v in ex.items() if k not in _ANNOTATIONS} for ex in examples]
        batch = pad_without_fast_tokenizer_warning(self.tokenizer, features, return_tensors="pt",
                                                   pad_to_multiple_of=self.pad_to_multiple_of)
        batch.pop("special_tokens_mask", None)
        batch.pop("offset_mapping", None)
        keep = self._unpadded(lengths, batch["input_ids"].shape[1])
        total = int(sum(lengths))
        word_ids = torch.full(keep.shape, -1, dtype=torch.int64).masked_scatter_(
            keep, torch.from_numpy(np.fromiter(chain.from_iterable(word_lists), dtype=np.int64, count=total)))
        flagged = torch.ones(keep.shape, dtype=torch.bool).masked_scatter_(
            keep, torch.from_numpy(np.fromiter(chain.from_iterable(flag_lists), dtype=np.bool_, count=total)))
        batch["input_ids"], batch["labels"] = self.torch_mask_tokens(batch["input_ids"], flagged, word_ids=word_ids)
        return batch

    def _unpadded(self, lengths: list[int], width: int) -> torch.Tensor:
        """``(batch, width)`` mask of the positions holding an example's tokens, on the tokenizer's padding side."""
        n = torch.tensor(lengths, dtype=torch.int64)[:, None]
        pos = torch.arange(width)
        return pos < n if self.tokenizer.padding_side == "right" else pos >= width - n

    # -- masking -----------------------------------------------------------------------------------------------------

    def torch_mask_tokens(self, inputs: torch.Tensor, special_tokens_mask: Any | None = None,
                          offset_mapping: Any | None = None, *, word_ids: torch.Tensor | None = None
                          ) -> tuple[torch.Tensor, torch.Tensor]:
        """Choose whole eligible words, then replace target tokens 80/10/10; returns ``(inputs, labels)``.

        ``inputs`` is modified in place. ``word_ids`` (same shape, -1 = no word) is required;
        ``special_tokens_mask`` (1 = never a target) defaults to the tokenizer's special tokens.
        """
        if word_ids is None:
            raise ValueError(f"{type(self).__name__}.torch_mask_tokens needs word_ids")
        if special_tokens_mask is None:
            special_tokens_mask = [self.tokenizer.get_special_tokens_mask(v, already_has_special_tokens=True)
                                   for v in inputs.tolist()]
        # Elementwise ops, index_fill / index_select and masked_* only: on a busy 2-core CPU (torch 2.13), x[mask] and
        # take() on a 32 x 256 batch took 1-3 ms against 10-40 us for masked_select / index_select.
        flagged = torch.as_tensor(special_tokens_mask).bool()
        word_ids = torch.as_tensor(word_ids, dtype=torch.int64)
        rows, width = inputs.shape
        in_word = word_ids >= 0
        # one slot per (example, word), then a final dump slot for tokens outside words and padding
        top = int(word_ids.max()) + 1 if rows * width else 0
        slot = word_ids + torch.arange(rows)[:, None] * top
        dump = rows * top
        if top > width:  # word numbers not chunk-local (e.g. corpus-wide rows): renumber the batch's words 0..k-1
            uniq, local = torch.unique(slot.masked_select(in_word), return_inverse=True)
            slot = slot.masked_scatter(in_word, local)
            dump = len(uniq)
        slot = slot.masked_fill_(~in_word, dump).view(-1)
        # a word with any flagged token is not eligible; the dump slot never is
        ineligible = torch.zeros(dump + 1, dtype=torch.bool).index_fill_(0, slot.masked_select(flagged.view(-1)), True)
        ineligible[dump] = True
        chosen = torch.rand(dump + 1, generator=self.generator) < self.mlm_probability  # one draw per word
        chosen &= ~ineligible
        targets = chosen.index_select(0, slot).view(rows, width)

        labels = inputs.masked_fill(~targets, -100)
        # one uniform draw per target token: mask (u < p_mask), random (u < p_mask + p_random) or unchanged
        u = torch.rand(inputs.shape, generator=self.generator)
        to_mask = targets & (u < self.mask_replace_prob)
        to_random = targets & ~to_mask & (u < self.mask_replace_prob + self.random_replace_prob)
        inputs.masked_fill_(to_mask, self._mask_id)
        n_random = int(to_random.sum())
        if n_random:
            pick = torch.randint(len(self._random_pool), (n_random,), generator=self.generator)
            inputs.masked_scatter_(to_random, self._random_pool.index_select(0, pick))
        return inputs, labels


def masked_lm_collator(tokenizer, seed: int | None = None, **kw: Any) -> ProtectedWholeWordCollator:
    """The methods.md §3 masked-LM collator for ``tokenizer`` (``kw``: ``mlm_probability``, ``mask_replace_prob``,
    ``random_replace_prob``, ``pad_to_multiple_of``)."""
    return ProtectedWholeWordCollator(tokenizer=tokenizer, seed=seed, **kw)


__all__ = ["ProtectedWholeWordCollator", "masked_lm_collator"]
