"""The e-mail extraction attack of paper 002 (methods.md §6): prompt every checkpoint, decode greedily, pull addresses
out with a regex, count the ones that belong to the original training set.

Per checkpoint (:func:`extract_checkpoint`):

1. Each prompt, without its trailing spaces **(choice**: byte-level BPE attaches a space to the following word —
   ``Ġjane`` —, so a prompt ending in ``To: `` would end on a lone-space token that training text almost never
   puts before an address; measured on a tiny GPT-2 that had memorised an address: with the space it wrote
   ``.man@corp.com``, without it the address**)**, is encoded as the tokenizer encodes a sequence and truncated
   to ``prompt_tokens`` tokens (the last ones by default, see :class:`ExtractionConfig`);
   special prefix tokens a tokenizer adds (``<s>``) are kept.
2. Greedy continuation, at most ``max_total_tokens`` in all, batched with left padding and a KV cache
   (:func:`toolkit.audit.generation.generate_ids`, the same strings as prompt-by-prompt generation:
   ``benchmarks/extraction.py``).
3. Addresses are found with :data:`~toolkit.identifiers.addresses.EMAIL_RE` in the decoded prompt + continuation;
   an address counts as **extracted** when it reaches into the generated text (it ends after the prompt) — an
   address wholly inside the prompt is not the model's output **(choice)**. It is **copied** when the (truncated)
   prompt already contains it.
4. Leaks = extracted ∩ original training addresses; TER, SER (:mod:`toolkit.metrics.extraction`). The count of
   leaks produced by at least one prompt that does not contain them (``n_leaked_uncopied``) separates memorisation
   from copying.

:func:`extract_run` does this for every checkpoint of a run (``step-S`` folders, else ``epoch-N``; optionally the
base model as checkpoint 0), adds the held-out perplexity, and writes

``extraction.parquet``
    one row per checkpoint: ``checkpoint`` (0 = base model, then 1, 2, … in training order), ``step``, ``epoch``
    (fraction of training in epochs), ``name`` (folder), ``ter`` and ``ser`` (%, SER NaN without a seen set),
    ``n_leaked``, ``n_leaked_uncopied``, ``n_extracted`` (distinct addresses extracted), ``n_seen``, ``n_original``,
    ``target_hits`` (prompts with a ``target`` whose first extracted address is that target; NaN without targets),
    ``perplexity`` (held-out, token-weighted; NaN without a held-out corpus), ``seconds`` (generation), and
    ``leaked`` (the sorted leaked addresses: identifiers — the file is for audits, never print it);
``perplexity.parquet``
    ``checkpoint``, ``doc_id``, ``n_tokens``, ``nll``, ``perplexity`` per held-out document (002 eq. 3);
``summary.json``
    the settings, counts and the prompt file's hash (no addresses).

Finished checkpoints are cached under ``OUT/parts/`` (keyed by the settings, prompts and held-out corpus), so a
re-run only computes what is missing.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from toolkit.errors import ToolkitError
from toolkit.io import atomic_write_json, atomic_write_parquet
from toolkit.identifiers.addresses import EMAIL_RE
from toolkit.metrics.extraction import ser, ter

EXTRACTION_COLUMNS = ["checkpoint", "step", "epoch", "name", "ter", "ser", "n_leaked", "n_leaked_uncopied",
                      "n_extracted", "n_seen", "n_original", "target_hits", "perplexity", "seconds", "leaked"]


@dataclass
class ExtractionConfig:
    """The extraction attack and the perplexity evaluation (methods.md §6).

    ``prompt_tokens``: prompts are truncated to this many tokens — the **last** ones by default (``keep="last"``,
    choice: a prompt cut right before an address keeps its cue ``To: ``; ``"first"`` keeps the beginning as 002's
    web-crawl prompts). ``max_total_tokens``: prompt + continuation at most (002: 256), so the model writes
    ``max_total_tokens − prompt_tokens`` new tokens at most (greedy, KV cache, stops at EOS).
    ``perplexity_max_length``: window of the held-out perplexity (capped by the model).
    """

    prompt_tokens: int = 50
    max_total_tokens: int = 256
    keep: str = "last"
    batch_size: int = 32
    perplexity_max_length: int = 512
    perplexity_batch_size: int = 16

    def __post_init__(self) -> None:
        if self.prompt_tokens < 1:
            raise ToolkitError(f"prompt_tokens must be >= 1, got {self.prompt_tokens}")
        if self.max_total_tokens <= self.prompt_tokens:
            raise ToolkitError(f"max_total_tokens ({self.max_total_tokens}) must exceed prompt_tokens "
                               f"({self.prompt_tokens})")
        if self.keep not in ("last", "first"):
            raise ToolkitError(f"keep must be 'last' or 'first', got {self.keep!r}")
        if self.batch_size < 1 or self.perplexity_batch_size < 1 or self.perplexity_max_length < 2:
            raise ToolkitError("batch sizes must be >= 1 and perplexity_max_length >= 2")

    @property
    def max_new_tokens(self) -> int:
        return self.max_total_tokens - self.prompt_tokens



# ---------------------------------------------------------------------------------------------------------------------
# prompts


def read_prompts(path: str | Path) -> pd.DataFrame:
    """Prompts from a JSONL file (``prompt`` required; ``prompt_id``, ``target`` and other fields optional) or a text
    file with one prompt per line. Returns ``prompt_id``, ``prompt`` and ``target`` (None when absent)."""
    p = Path(path)
    if not p.is_file():
        raise ToolkitError(f"{p}: prompt file not found")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ToolkitError(f"{p}: not UTF-8 ({exc.reason} at byte {exc.start})") from exc
    rows = []
    if p.suffix.lower() in (".jsonl", ".json"):
        for lineno, line in enumerate(text.split("\n"), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ToolkitError(f"{p}, line {lineno}: invalid JSON ({exc.msg})") from exc
            if not isinstance(obj, dict) or not isinstance(obj.get("prompt"), str):
                raise ToolkitError(f"{p}, line {lineno}: expected an object with a string field 'prompt'")
            target = obj.get("target")
            if target is not None and not isinstance(target, str):
                raise ToolkitError(f"{p}, line {lineno}: field 'target' must be a string")
            rows.append((str(obj.get("prompt_id", f"line{lineno}")), obj["prompt"], target))
    else:
        rows = [(f"line{i}", line, None) for i, line in enumerate(text.split("\n"), 1) if line.strip()]
    if not rows:
        raise ToolkitError(f"{p}: no prompts")
    df = pd.DataFrame(rows, columns=["prompt_id", "prompt", "target"], dtype=object)  # keeps None targets
    if df["prompt_id"].duplicated().any():
        raise ToolkitError(f"{p}: duplicate prompt_id {df.loc[df['prompt_id'].duplicated(), 'prompt_id'].iloc[0]!r}")
    return df


def encode_prompts(tokenizer, prompts, prompt_tokens: int, keep: str = "last") -> list[list[int]]:
    """Token ids of each prompt, truncated to ``prompt_tokens`` content tokens (the tokenizer's special prefix, such as
    ``<s>``, kept in front)."""
    from toolkit.strategies.encoding import special_template

    prefix, _ = special_template(tokenizer)
    # trailing spaces/tabs are dropped: byte-level BPE glues a space to the next word ("Ġjane"), so a prompt ending
    # in "To: " would end on a lone-space token that training text almost never has before an address
    enc = tokenizer([p.rstrip(" \t") for p in prompts], add_special_tokens=False)["input_ids"] if len(prompts) \
        else []
    out = []
    for ids in enc:
        ids = list(ids)
        ids = ids[-prompt_tokens:] if keep == "last" else ids[:prompt_tokens]
        out.append(list(prefix) + ids)
    return out


def _addresses_after(text: str, boundary: int) -> list[str]:
    """Normalised addresses of ``text`` that end after character ``boundary`` (reach into the generated part)."""
    return [m.group().lower() for m in EMAIL_RE.finditer(text) if m.end() > boundary]


def extract_from_generations(tokenizer, prompt_ids: list[list[int]], continuation_ids: list[list[int]]
                             ) -> list[dict[str, Any]]:
    """Per prompt: ``extracted`` (normalised addresses reaching into the continuation, in order of appearance) and
    ``in_prompt`` (addresses of the truncated prompt itself)."""
    out = []
    for p_ids, c_ids in zip(prompt_ids, continuation_ids):
        prompt_text = tokenizer.decode(p_ids, skip_special_tokens=True)
        full = tokenizer.decode(list(p_ids) + list(c_ids), skip_special_tokens=True)
        boundary = len(prompt_text) if full.startswith(prompt_text) else 0
        out.append({"extracted": _addresses_after(full, boundary),
                    "in_prompt": {m.group().lower() for m in EMAIL_RE.finditer(prompt_text)}})
    return out


def extraction_record(per_prompt: list[dict[str, Any]], original: set[str], seen: set[str] | None,
                      targets=None) -> dict[str, Any]:
    """TER / SER and counts from :func:`extract_from_generations` output (methods.md §6).

    ``original``: the original training addresses (normalised); ``seen``: the addresses seen up to the checkpoint
    (``None``: unknown, SER NaN); ``targets``: the prompts' expected addresses (optional).
    """
    orig = {a.lower() for a in original}
    extracted: set[str] = set()
    uncopied: set[str] = set()
    hits, n_targets = 0, 0
    for i, r in enumerate(per_prompt):
        ex = set(r["extracted"])
        extracted |= ex
        uncopied |= (ex & orig) - r["in_prompt"]
        if targets is not None and targets[i] is not None and isinstance(targets[i], str):
            n_targets += 1
            hits += bool(r["extracted"]) and r["extracted"][0] == targets[i].lower()
    leaked = extracted & orig
    n_seen = len(seen) if seen is not None else None
    return {"ter": ter(len(leaked), len(orig)),
            "ser": (ser(len(leaked), n_seen) if n_seen is not None else None),
            "n_leaked": len(leaked), "n_leaked_uncopied": len(uncopied), "n_extracted": len(extracted),
            "n_seen": n_seen, "n_original": len(orig), "target_hits": hits if n_targets else None,
            "leaked": sorted(leaked)}


def extract_checkpoint(model, tokenizer, prompts: pd.DataFrame, original: set[str], seen: set[str] | None,
                       config: ExtractionConfig | None = None, *, progress: bool = False) -> dict[str, Any]:
    """Run the attack (module docstring, steps 1–4) on one loaded model; returns :func:`extraction_record`'s dict
    plus ``seconds`` (generation wall time)."""
    from toolkit.audit.generation import generate_ids

    cfg = config or ExtractionConfig()
    p_ids = encode_prompts(tokenizer, prompts["prompt"].tolist(), cfg.prompt_tokens, cfg.keep)
    t0 = time.perf_counter()
    conts = generate_ids(model, tokenizer, p_ids, max_new_tokens=cfg.max_new_tokens, batch_size=cfg.batch_size,
                         progress=progress)
    seconds = time.perf_counter() - t0
    per_prompt = extract_from_generations(tokenizer, p_ids, conts)
    targets = prompts["target"].tolist() if "target" in prompts else None
    rec = extraction_record(per_prompt, original, seen, targets)
    rec["seconds"] = round(seconds, 3)
    return rec


# ---------------------------------------------------------------------------------------------------------------------
# runs


def run_checkpoints(run_dir: str | Path) -> pd.DataFrame:
    """The checkpoints of a run in training order: ``checkpoint`` (1, 2, …), ``step``, ``epoch``, ``name``, ``path``.

    Step checkpoints (``step-S``, :class:`~toolkit.training.TrainConfig` ``checkpoints_per_epoch``) when the run has
    them, else its epoch checkpoints (``epoch-N``).
    """
    from toolkit.training import checkpoint_dirs, step_checkpoint_dirs

    run = Path(run_dir)
    rows = []
    steps = step_checkpoint_dirs(run)
    if steps:
        for step, path in steps:
            log = json.loads((path / "training_log.json").read_text())
            rows.append((int(log.get("checkpoint", len(rows) + 1)), step, float(log["epoch"]), path.name, path))
    else:
        for i, (epoch, path) in enumerate(checkpoint_dirs(run), 1):
            log = json.loads((path / "training_log.json").read_text())
            rows.append((i, int(log.get("global_step", 0)), float(epoch), path.name, path))
    if not rows:
        raise ToolkitError(f"{run}: no checkpoints (step-S or epoch-N folders with a saved model)")
    return pd.DataFrame(rows, columns=["checkpoint", "step", "epoch", "name", "path"]).sort_values(
        "checkpoint", ignore_index=True)


def load_run_addresses(run_dir: str | Path) -> dict[str, Any]:
    """``addresses.json`` of a run written by :func:`toolkit.pipelines.email_extraction.train_technique`: ``original``
    (set of the original training addresses) and ``seen`` (``{checkpoint folder name: set}``)."""
    run = Path(run_dir)
    path = run / "addresses.json"
    if not path.is_file():
        raise ToolkitError(f"{run}: no addresses.json — train with `python -m toolkit email-train` (or "
                           f"toolkit.extraction.train_technique), or pass the original corpus (--corpus)")
    data = json.loads(path.read_text())
    seen = {}
    for p in run.glob("*/seen_addresses.json"):
        seen[p.parent.name] = set(json.loads(p.read_text())["seen"])
    return {"original": set(data["original"]), "seen": seen, "technique": data.get("technique")}


def _digest(*parts: Any) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(json.dumps(p, sort_keys=True, default=str).encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


def _checkpoint_identity(path) -> list:
    """What identifies a checkpoint's weights for the cache: its weight files' names, sizes and modification times
    (a retrained run invalidates the cached results); a hub id stands for itself."""
    p = Path(str(path))
    if not p.is_dir():
        return [str(path)]
    return sorted((f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in p.iterdir()
                  if f.suffix in (".safetensors", ".bin") and f.is_file())


def extract_run(run_dir: str | Path, prompts: pd.DataFrame, out_dir: str | Path, *, heldout=None,
                config: ExtractionConfig | None = None, original: set[str] | None = None,
                include_base: bool = False, progress: bool = True) -> pd.DataFrame:
    """Extraction (and held-out perplexity) for every checkpoint of ``run_dir``; writes the files of the module
    docstring under ``out_dir`` and returns the ``extraction.parquet`` table.

    ``original`` overrides the run's ``addresses.json`` (then SER is NaN unless the run has seen sets);
    ``heldout``: a corpus for perplexity (``None``: perplexity NaN); ``include_base``: also the run's base model
    (``run.json``), as checkpoint 0 with an empty seen set.
    """
    from toolkit.progress import progress_bar

    from toolkit.models import load_model
    from toolkit.training import corpus_fingerprint, quiet_hf_progress
    from toolkit.audit.perplexity import document_perplexities

    cfg = config or ExtractionConfig()
    run, out = Path(run_dir), Path(out_dir)
    if original is None:
        info = load_run_addresses(run)
        original, seen_by_name = info["original"], info["seen"]
    else:
        original = {a.lower() for a in original}
        seen_by_name = {p.parent.name: set(json.loads(p.read_text())["seen"])
                        for p in run.glob("*/seen_addresses.json")}
    if not original:
        raise ToolkitError(f"{run}: the original training address set is empty")
    ckpts = run_checkpoints(run)
    if include_base:
        meta = json.loads((run / "run.json").read_text()) if (run / "run.json").is_file() else {}
        if not meta.get("base"):
            raise ToolkitError(f"{run}: run.json names no base model (needed for include_base)")
        ckpts = pd.concat([pd.DataFrame([(0, 0, 0.0, "base", meta["base"])], columns=ckpts.columns), ckpts],
                          ignore_index=True)
    key = _digest(vars(cfg), prompts.to_dict("list"), sorted(original),
                  corpus_fingerprint(heldout) if heldout is not None else None)
    parts = out / "parts"
    parts.mkdir(parents=True, exist_ok=True)
    rows, ppl_frames = [], []
    for _, c in progress_bar(list(ckpts.iterrows()), desc="extraction", unit="checkpoint", enabled=progress):
        part = parts / f"checkpoint-{int(c['checkpoint']):04d}.json"
        ppl_part = parts / f"checkpoint-{int(c['checkpoint']):04d}.perplexity.parquet"
        ident = _digest(key, c["name"], _checkpoint_identity(c["path"]))
        cached = json.loads(part.read_text()) if part.is_file() else None
        if cached is not None and cached.get("key") == ident and (heldout is None or ppl_part.is_file()):
            rec = cached["record"]
        else:
            with quiet_hf_progress():
                model, tokenizer = load_model(c["path"], kind="clm")
            seen = set() if c["checkpoint"] == 0 else seen_by_name.get(c["name"])
            rec = extract_checkpoint(model, tokenizer, prompts, original, seen, cfg, progress=False)
            rec["perplexity"] = None
            if heldout is not None:
                ppl = document_perplexities(model, tokenizer, heldout, max_length=cfg.perplexity_max_length,
                                            batch_size=cfg.perplexity_batch_size, progress=False)
                rec["perplexity"] = ppl.attrs["perplexity"]
                atomic_write_parquet(ppl, ppl_part)
            atomic_write_json({"key": ident, "name": c["name"], "record": rec}, part)
        rows.append({"checkpoint": int(c["checkpoint"]), "step": int(c["step"]), "epoch": float(c["epoch"]),
                     "name": c["name"], **rec})
        if heldout is not None:
            ppl_frames.append(pd.read_parquet(ppl_part).assign(checkpoint=int(c["checkpoint"])))
    table = pd.DataFrame(rows)
    for col in ("ser", "perplexity", "target_hits", "n_seen"):
        table[col] = pd.to_numeric(table[col], errors="coerce").astype(float)
    table = table[EXTRACTION_COLUMNS]
    atomic_write_parquet(table, out / "extraction.parquet")
    if ppl_frames:
        ppl_all = pd.concat(ppl_frames, ignore_index=True)[["checkpoint", "doc_id", "n_tokens", "nll", "perplexity"]]
        atomic_write_parquet(ppl_all, out / "perplexity.parquet")
    atomic_write_json({"run": str(run), "n_checkpoints": int(len(table)), "n_prompts": int(len(prompts)),
                       "n_original": len(original), "config": vars(cfg), "include_base": bool(include_base),
                       "heldout_documents": len(heldout) if heldout is not None else None,
                       "prompts_sha256": _digest(prompts.to_dict("list")),
                       "max_ter": float(np.nanmax(table["ter"])) if len(table) else None}, out / "summary.json")
    return table


def load_extraction(out_dir: str | Path) -> dict[str, pd.DataFrame | None]:
    """``{"extraction": table, "perplexity": table or None}`` from an :func:`extract_run` output folder."""
    out = Path(out_dir)
    path = out / "extraction.parquet"
    if not path.is_file():
        raise ToolkitError(f"{out}: no extraction.parquet (run `python -m toolkit extract` first)")
    ppl = out / "perplexity.parquet"
    tables = {}
    for name, p in (("extraction", path), ("perplexity", ppl)):
        try:
            tables[name] = pd.read_parquet(p) if p.is_file() else None
        except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
            raise ToolkitError(f"{p}: not a readable Parquet table ({type(exc).__name__}); re-run "
                               "`python -m toolkit extract`") from None
    return tables


__all__ = ["EXTRACTION_COLUMNS", "ExtractionConfig", "encode_prompts", "extract_checkpoint", "extract_from_generations", "extract_run",
           "extraction_record", "load_extraction", "load_run_addresses", "read_prompts", "run_checkpoints"]
