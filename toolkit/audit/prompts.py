"""Extraction prompts cut from training messages right before an address (an auditor's attack on its own data).

Paper 002 prompts with web text; an auditor who holds the training data can ask the sharper question of
"extractable memorisation" (Carlini et al. 2021, used by methods.md §4 for probing): given the text that preceded an
address in a training message, does the model write that address? :func:`address_prompts` draws messages at random
(seeded), one prompt per message, and cuts each right before an address occurrence that is the **first
occurrence of that address in the message** — so the target never appears in the prompt and cannot be copied from
it. The cut falls after a header field (``To: ``), inside a display form (``Jane Doe <``), before a signature
address or a body mention; ``kind`` says which. Prompts keep the message's text as written (the extraction attack
drops trailing spaces and keeps the last ``prompt_tokens`` tokens).

The output has the columns of ``data_samples/email/prompts.jsonl``: ``prompt_id``, ``doc_id``, ``prompt``,
``target`` (plus ``kind``), and :func:`write_prompts` writes it as JSONL for ``python -m toolkit extract --prompts``.
Prompts and targets are training text: files only, never printed.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pandas as pd

from toolkit.corpus import Corpus
from toolkit.errors import ToolkitError
from toolkit.io import atomic_write
from toolkit.identifiers.addresses import EMAIL_RE
from toolkit.strategies.dedup import HEADER_RE

PROMPT_COLUMNS = ["prompt_id", "doc_id", "prompt", "target", "kind"]


def _kind(text: str, start: int) -> str:
    line_start = text.rfind("\n", 0, start) + 1
    before = text[line_start:start]
    if before.rstrip().endswith("<"):
        return "display"
    if HEADER_RE.match(before) is not None:
        return "header"
    return "body"


def address_prompts(corpus: Corpus, n: int = 300, *, seed: int = 0) -> pd.DataFrame:
    """``n`` prompts (fewer if fewer messages hold an address), one per randomly drawn message (module docstring).

    Each prompt is the message's text up to a first-in-message address occurrence chosen uniformly among them;
    rows are in corpus order. Columns :data:`PROMPT_COLUMNS`.
    """
    if n < 1:
        raise ToolkitError(f"n must be >= 1, got {n}")
    rng = random.Random(seed)
    eligible = []
    for i, doc in enumerate(corpus):
        seen, firsts = set(), []
        for m in EMAIL_RE.finditer(doc.text):
            a = m.group().lower()
            if a not in seen:
                seen.add(a)
                firsts.append((m.start(), m.group()))
        if firsts:
            eligible.append((i, firsts))
    if not eligible:
        raise ToolkitError("no document of the corpus holds an e-mail address")
    chosen = sorted(rng.sample(range(len(eligible)), min(n, len(eligible))))
    rows = []
    for k, j in enumerate(chosen, 1):
        i, firsts = eligible[j]
        start, target = firsts[rng.randrange(len(firsts))]
        doc = corpus[i]
        rows.append((f"c{k:04d}", doc.doc_id, doc.text[:start], target, _kind(doc.text, start)))
    return pd.DataFrame(rows, columns=PROMPT_COLUMNS)


def write_prompts(prompts: pd.DataFrame, path: str | Path) -> Path:
    """Write prompts as JSONL (one object per line, the frame's columns), atomically."""
    cols = [c for c in PROMPT_COLUMNS if c in prompts.columns]
    return atomic_write(path, lambda fh: fh.writelines(
        json.dumps({c: r[c] for c in cols}, ensure_ascii=False) + "\n" for r in prompts.to_dict("records")))


def combine_prompts(*frames: pd.DataFrame | None) -> pd.DataFrame:
    """Stack prompt tables (``read_prompts`` / :func:`address_prompts` outputs; ``None`` skipped) into one with
    ``prompt_id``, ``prompt``, ``target``; a ``prompt_id`` that repeats gets its table's position as a prefix."""
    parts = [f for f in frames if f is not None and len(f)]
    if not parts:
        raise ToolkitError("no prompts")
    out = []
    for i, f in enumerate(parts):
        f = f.reindex(columns=["prompt_id", "prompt", "target"]).astype(object)
        out.append(f.assign(prompt_id=f["prompt_id"].astype(str)))
    both = pd.concat(out, ignore_index=True)
    if both["prompt_id"].duplicated().any():
        both["prompt_id"] = [f"{i}:{p}" for i, f in enumerate(out) for p in f["prompt_id"]]
    return both


__all__ = ["PROMPT_COLUMNS", "address_prompts", "combine_prompts", "write_prompts"]
