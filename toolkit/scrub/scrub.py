"""Step 4 of the two-step method (methods.md §7.5, paper 003 §4.3): rename judged names in the tokenizer vocabulary.

Every vocabulary entry whose surface form (:func:`~toolkit.scrub.candidates.vocabulary_surfaces`: without the
WordPiece ``##`` prefix or the byte-level space marker) contains a judged name as a methods.md §1 word — ``okafor``,
``##okafor``, ``Ġokafor``, ``Ġokafor.`` — is renamed to ``unk`` + a random 13-digit number, **keeping its id**: the
embedding row and every weight stay as they were (the model files are copied byte for byte), other ids are
unchanged, and the model can never produce the name's string again; a masked LM that "wants" the name now emits
``unk4839201928374`` (paper 003 Table 1). Names are compared after NFKC and, unless ``match_case``, lower-casing, so
``Okafor`` goes with ``okafor``. Special tokens are never renamed.

Files updated together, so that the fast and the slow tokenizer agree (checked by :func:`check_tokenizer_files`
before the output appears):

* ``tokenizer.json`` — WordPiece / WordLevel vocab, BPE vocab **and merges** (a merge that uses or produces a renamed
  token is removed: it could rebuild the name, and the ``tokenizers`` library refuses merges outside the vocabulary),
  Unigram pieces, non-special ``added_tokens``;
* ``vocab.txt`` (BERT), ``vocab.json`` + ``merges.txt`` (GPT-2 / RoBERTa), ``added_tokens.json`` and the
  ``added_tokens_decoder`` of ``tokenizer_config.json`` when present.

A SentencePiece binary model file (``*.model``) cannot be edited here: such a directory is refused rather than left
with a stale copy of the names.

``scrub_manifest.json`` lists what was replaced: for each renamed id the new string and the **salted SHA-256** of the
old one (the salt is in the manifest, so whoever holds a name can check whether it was removed; the names themselves
are written only with ``reveal_names``). Hashes of short names can be found by trying a list of names: keep the
manifest with the review files, not with the published model.
"""

from __future__ import annotations

import hashlib
import json
import random
import secrets
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from toolkit.errors import ToolkitError
from toolkit.identifiers.words import normalize_term, word_pattern
from toolkit.io import atomic_write_json, atomic_write_text

MANIFEST = "scrub_manifest.json"
MANIFEST_VERSION = 1
SLOW_FILES = ("vocab.txt", "vocab.json", "merges.txt", "added_tokens.json")


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ToolkitError(f"{path}: cannot read JSON ({exc})") from None


def _merge_pair(m) -> tuple[str, str]:
    if isinstance(m, str):
        a, _, b = m.partition(" ")
        return a, b
    return str(m[0]), str(m[1])


def _read_vocab_txt(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _read_merges_txt(path: Path) -> tuple[list[str], list[tuple[str, str]]]:
    header, merges = [], []
    for line in path.read_text(encoding="utf-8").split("\n"):
        if line.startswith("#version") or (not merges and line.startswith("#")):
            header.append(line)
        elif line:
            parts = line.split(" ")
            if len(parts) != 2:
                raise ToolkitError(f"{path}: bad merge line {line[:40]!r}")
            merges.append((parts[0], parts[1]))
    return header, merges


def tokenizer_vocab(model_dir: str | Path) -> dict[int, str]:
    """id → token string from ``tokenizer.json`` (or, without it, ``vocab.txt`` / ``vocab.json``)."""
    d = Path(model_dir)
    tj = d / "tokenizer.json"
    if tj.is_file():
        data = _read_json(tj)
        model = data.get("model", {})
        kind = model.get("type")
        if kind == "Unigram":
            vocab = {i: p[0] for i, p in enumerate(model.get("vocab", []))}
        elif kind in ("WordPiece", "BPE", "WordLevel"):
            vocab = {int(i): t for t, i in model.get("vocab", {}).items()}
        else:
            raise ToolkitError(f"{tj}: tokenizer model {kind!r} is not supported (WordPiece, BPE, Unigram, WordLevel)")
        for a in data.get("added_tokens", []):
            vocab[int(a["id"])] = a["content"]
        return vocab
    if (d / "vocab.txt").is_file():
        return dict(enumerate(_read_vocab_txt(d / "vocab.txt")))
    if (d / "vocab.json").is_file():
        return {int(i): t for t, i in _read_json(d / "vocab.json").items()}
    raise ToolkitError(f"{d}: no tokenizer.json, vocab.txt or vocab.json")


def check_tokenizer_files(model_dir: str | Path) -> list[str]:
    """Inconsistencies between ``tokenizer.json`` and the slow-tokenizer files of a directory (empty: consistent).

    Compared: the vocabulary of ``tokenizer.json`` (model vocab, without added tokens) with ``vocab.txt`` (line = id)
    and ``vocab.json``; the BPE merges with ``merges.txt``.
    """
    d = Path(model_dir)
    tj = d / "tokenizer.json"
    if not tj.is_file():
        return []
    problems = []
    model = _read_json(tj).get("model", {})
    if model.get("type") == "Unigram":
        fast = {i: p[0] for i, p in enumerate(model.get("vocab", []))}
    else:
        fast = {int(i): t for t, i in model.get("vocab", {}).items()}
    if (d / "vocab.txt").is_file():
        slow = dict(enumerate(_read_vocab_txt(d / "vocab.txt")))
        diff = [i for i in set(fast) | set(slow) if fast.get(i) != slow.get(i)]
        if diff:
            problems.append(f"vocab.txt differs from tokenizer.json at {len(diff)} id(s), e.g. id {min(diff)}")
    if (d / "vocab.json").is_file():
        slow = {int(i): t for t, i in _read_json(d / "vocab.json").items()}
        diff = [i for i in set(fast) | set(slow) if fast.get(i) != slow.get(i)]
        if diff:
            problems.append(f"vocab.json differs from tokenizer.json at {len(diff)} id(s), e.g. id {min(diff)}")
    if (d / "merges.txt").is_file() and model.get("type") == "BPE":
        _, slow_m = _read_merges_txt(d / "merges.txt")
        fast_m = [_merge_pair(m) for m in model.get("merges", [])]
        if slow_m != fast_m:
            problems.append(f"merges.txt ({len(slow_m)} merges) differs from tokenizer.json ({len(fast_m)})")
    return problems


def _salted(salt: str, text: str) -> str:
    return hashlib.sha256((salt + text).encode("utf-8")).hexdigest()


def names_in_vocabulary(tokenizer, names: Iterable[str], *, match_case: bool = False) -> dict[int, str]:
    """Ids (non-special) whose surface form contains one of ``names`` as a word, with the name matched."""
    from toolkit.scrub.candidates import vocabulary_surfaces

    wanted = {normalize_term(n.strip(), not match_case) for n in names if n and n.strip()}
    specials = set(tokenizer.all_special_ids)
    wp = word_pattern()
    out = {}
    for i, surface in vocabulary_surfaces(tokenizer).items():
        if i in specials:
            continue
        for w in wp.findall(surface):
            if normalize_term(w, not match_case) in wanted:
                out[i] = normalize_term(w, not match_case)
                break
    return out


def _new_strings(n: int, taken: set[str], seed: int | None) -> list[str]:
    rng = random.Random(seed) if seed is not None else secrets.SystemRandom()
    out: list[str] = []
    seen = set(taken)
    while len(out) < n:
        s = f"unk{rng.randint(10 ** 12, 10 ** 13 - 1)}"
        if s not in seen:
            seen.add(s)
            out.append(s)
    return out


def _load_tokenizer(path: Path):
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(str(path))
    except (OSError, ValueError, Exception) as exc:  # noqa: BLE001 - tokenizers raises its own Exception type
        raise ToolkitError(f"{path}: cannot load the tokenizer ({type(exc).__name__}: {exc})") from None
    if not getattr(tok, "is_fast", False):
        raise ToolkitError(f"{path}: a fast tokenizer is required")
    return tok


def _rewrite_tokenizer_files(d: Path, renames: dict[int, str], old: dict[int, str]) -> dict[str, Any]:
    """Apply ``renames`` (id → new string) to every tokenizer file in ``d``; returns what was changed."""
    renamed_old = {old[i] for i in renames}
    new_of_old = {old[i]: renames[i] for i in renames}
    changed: dict[str, Any] = {"files": [], "merges_removed": 0}

    tj = d / "tokenizer.json"
    if tj.is_file():
        data = _read_json(tj)
        model = data["model"]
        kind = model.get("type")
        if kind == "Unigram":
            for i, new in renames.items():
                if i < len(model["vocab"]):
                    model["vocab"][i][0] = new
        else:
            model["vocab"] = {new_of_old.get(t, t) if int(v) in renames else t: v for t, v in model["vocab"].items()}
        if kind == "BPE":
            kept = []
            for m in model.get("merges", []):
                a, b = _merge_pair(m)
                if a in renamed_old or b in renamed_old or (a + b) in renamed_old:
                    changed["merges_removed"] += 1
                    continue
                kept.append(m)
            model["merges"] = kept
        for a in data.get("added_tokens", []):
            if int(a["id"]) in renames and not a.get("special", False):
                a["content"] = renames[int(a["id"])]
        atomic_write_text(json.dumps(data, ensure_ascii=False, indent=2) + "\n", tj)
        changed["files"].append(tj.name)
    if (d / "vocab.txt").is_file():
        lines = _read_vocab_txt(d / "vocab.txt")
        for i, new in renames.items():
            if i < len(lines):
                lines[i] = new
        atomic_write_text("\n".join(lines) + "\n", d / "vocab.txt")
        changed["files"].append("vocab.txt")
    if (d / "vocab.json").is_file():
        vocab = _read_json(d / "vocab.json")
        vocab = {new_of_old.get(t, t) if int(v) in renames else t: v for t, v in vocab.items()}
        atomic_write_text(json.dumps(vocab, ensure_ascii=False) + "\n", d / "vocab.json")
        changed["files"].append("vocab.json")
    if (d / "merges.txt").is_file():
        header, merges = _read_merges_txt(d / "merges.txt")
        kept = [m for m in merges if not (m[0] in renamed_old or m[1] in renamed_old or (m[0] + m[1]) in renamed_old)]
        if not tj.is_file():
            changed["merges_removed"] += len(merges) - len(kept)
        atomic_write_text("\n".join(header + [f"{a} {b}" for a, b in kept]) + "\n", d / "merges.txt")
        changed["files"].append("merges.txt")
    if (d / "added_tokens.json").is_file():
        added = _read_json(d / "added_tokens.json")
        added = {renames.get(int(v), t): v for t, v in added.items()}
        atomic_write_text(json.dumps(added, ensure_ascii=False) + "\n", d / "added_tokens.json")
        changed["files"].append("added_tokens.json")
    tc = d / "tokenizer_config.json"
    if tc.is_file():
        cfg = _read_json(tc)
        dec = cfg.get("added_tokens_decoder") or {}
        touched = False
        for k, v in dec.items():
            if int(k) in renames and not v.get("special", False):
                v["content"] = renames[int(k)]
                touched = True
        if touched:
            atomic_write_text(json.dumps(cfg, ensure_ascii=False, indent=2) + "\n", tc)
            changed["files"].append(tc.name)
    return changed


def scrub_model(model_dir: str | Path, names: Iterable[str], out_dir: str | Path, *, match_case: bool = False,
                reveal_names: bool = False, seed: int | None = None, review_files: Sequence[str | Path] = (),
                overwrite: bool = False) -> dict[str, Any]:
    """Copy ``model_dir`` to ``out_dir`` with every vocabulary entry containing a judged name renamed (methods.md §7.5).

    Parameters
    ----------
    model_dir:
        A local Hugging Face model directory (weights, config, tokenizer files).
    names:
        The tokens judged names (:func:`toolkit.review.store.judged_names`).
    out_dir:
        Where the scrubbed model goes (built in a temporary folder beside it and renamed into place once verified).
    match_case:
        Rename only entries whose words match a name with the same case (default: case-insensitive).
    reveal_names:
        Write the old token strings into the manifest (default: salted hashes only).
    seed:
        Seed of the random 13-digit numbers (default: unpredictable, from ``secrets``).
    review_files:
        Review files the names came from (their SHA-256 goes into the manifest).

    Returns the manifest (also written to ``out_dir/scrub_manifest.json``).
    """
    src, out = Path(model_dir), Path(out_dir)
    if not src.is_dir() or not (src / "config.json").is_file():
        raise ToolkitError(f"{src}: not a local model directory (config.json missing); scrubbing rewrites the "
                           f"tokenizer files, so save the model to a folder first")
    binary = sorted(p.name for p in src.glob("*.model"))
    if binary:
        raise ToolkitError(f"{src}: SentencePiece model file(s) {binary} cannot be scrubbed here (their vocabulary is "
                           f"binary); remove them if tokenizer.json is complete, or convert the tokenizer")
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise ToolkitError(f"{out} exists and is not empty; choose a new output directory")
    names = sorted({n.strip() for n in names if n and n.strip()})
    tokenizer = _load_tokenizer(src)
    old = tokenizer_vocab(src)
    hits = names_in_vocabulary(tokenizer, names, match_case=match_case)
    new = _new_strings(len(hits), set(old.values()), seed)
    renames = dict(zip(sorted(hits), new))

    tmp = out.with_name(f".{out.name}.scrub-tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    shutil.copytree(src, tmp, ignore=shutil.ignore_patterns(MANIFEST, ".*"))
    try:
        changed = _rewrite_tokenizer_files(tmp, renames, old)
        problems = check_tokenizer_files(tmp)
        if problems:
            raise ToolkitError(f"scrubbed tokenizer files disagree: {'; '.join(problems)}")
        after = _load_tokenizer(tmp)
        got = after.convert_ids_to_tokens(list(range(len(after))))
        expect = {i: renames.get(i, t) for i, t in old.items()}
        wrong = [i for i, t in enumerate(got) if i in expect and t != expect[i]]
        if wrong or len(after) != len(tokenizer):
            raise ToolkitError(f"scrubbed tokenizer does not keep the ids ({len(wrong)} id(s) differ, e.g. "
                               f"{wrong[:3]}; size {len(tokenizer)} -> {len(after)})")
        still = names_in_vocabulary(after, names, match_case=match_case)
        if still:
            raise ToolkitError(f"{len(still)} vocabulary entries still decode to a judged name after scrubbing")
        salt = secrets.token_hex(16)
        wanted = {normalize_term(n, not match_case) for n in names}
        found = set(hits.values())
        manifest = {
            "format_version": MANIFEST_VERSION, "method": "methods.md §7.5: rename to 'unk' + 13 random digits, ids kept",
            "source": str(src), "tokenizer_model": _read_json(tmp / "tokenizer.json")["model"].get("type")
            if (tmp / "tokenizer.json").is_file() else None,
            "match_case": match_case, "n_names": len(wanted), "n_names_in_vocabulary": len(found),
            "n_renamed": len(renames), "merges_removed": changed["merges_removed"], "files_updated": changed["files"],
            "hash": {"algorithm": "sha256(salt + text)", "salt": salt},
            "renamed": [{"id": i, "new_token": renames[i], "old_token_sha256": _salted(salt, old[i]),
                         **({"old_token": old[i]} if reveal_names else {})} for i in sorted(renames)],
            "names": [{"name_sha256": _salted(salt, n), "in_vocabulary": n in found,
                       "n_ids": sum(1 for v in hits.values() if v == n), **({"name": n} if reveal_names else {})}
                      for n in sorted(wanted)],
            "review_files": [{"path": str(p), "sha256": hashlib.sha256(Path(p).read_bytes()).hexdigest()}
                             for p in review_files],
        }
        atomic_write_json(manifest, tmp / MANIFEST)
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return manifest


__all__ = ["MANIFEST", "check_tokenizer_files", "names_in_vocabulary", "scrub_model", "tokenizer_vocab"]
