"""What ``python -m toolkit audit`` (:func:`toolkit.pipelines.audit_only.audit_models`) does around its steps so that
an audit folder is as robust as a ``toolkit run`` directory: options checked against the config's minima, the
window clipped to the model's position table, prediction tables without raw identifiers, stale outputs of an earlier
audit removed before any new work, and a full disk or a read-only folder reported in one line.

**Prediction tables.** The §4 probe's ``predictions`` and ``mia_predictions`` tables hold every probed word and
every prediction — names, record numbers. By default the audit writes them with the words replaced by keyed hashes
(:func:`hash_predictions`): each normalised word ``w`` of ``original``, ``predicted`` and of every ``top_k`` entry
becomes :func:`toolkit.audit.hashing.hash_term` ``(w, key)`` with the audit folder's key (``OUT/.hash_key``, the
report's), the words of one value joined by a space, so equal words stay equal and the report's hashed tokens match.
The papers' count attack (methods.md §5) is computed in that space (:func:`hashed_membership_scores`): an individual's
indirect-identifier types are hashed the same way, and HMAC being injective in practice (48-bit tokens; a collision
among a corpus' few thousand types has probability ≈ n² / 2⁴⁹), the counts equal those on the words.
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd

from toolkit.config.sections import ATTACK_MINIMA
from toolkit.errors import ToolkitError
from toolkit.results.layout import RunLayout

#: errors of writing that mean "this folder cannot take the outputs", turned into one line naming the file
WRITE_ERRORS = {errno.ENOSPC: "no space left on the device (free some space or choose another --out)",
                errno.EDQUOT: "disk quota exceeded (free some space or choose another --out)",
                errno.EROFS: "read-only file system (choose another --out)",
                errno.EACCES: "permission denied (choose another --out, or fix the folder's permissions)"}
#: the audit's outputs at the top of its folder (rewritten at the end of every audit)
TOP_FILES = ("attacks.json", "identifiers.json", "verdicts.json", "report.html")


@contextmanager
def writing(path: str | Path, within: str | Path | None = None) -> Iterator[None]:
    """Turn an ``OSError`` of :data:`WRITE_ERRORS` raised in the block into a one-line :class:`ToolkitError` naming
    the file (the error's own file name when it has one, else ``path``) and the errno's meaning. With ``within``, an
    error about a file outside that folder (reading a model, say) is not the outputs' and passes unchanged."""
    try:
        yield
    except OSError as exc:
        if exc.errno not in WRITE_ERRORS:
            raise
        if within is not None and exc.filename and not Path(str(exc.filename)).resolve().is_relative_to(
                Path(within).resolve()):
            raise
        where = exc.filename if exc.filename else path
        raise ToolkitError(f"{where}: cannot write: {WRITE_ERRORS[exc.errno]} "
                           f"[{errno.errorcode[exc.errno]}]") from None


def check_int(value: Any, name: str, minimum: int, config: str | None = None) -> int:
    """``value`` when it is an integer ≥ ``minimum``; else a one-line :class:`ToolkitError` naming ``name`` and the
    config key with the same minimum (what ``toolkit run`` checks, :mod:`toolkit.config.experiment`)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        same = f" (as {config} of an experiment config)" if config else ""
        raise ToolkitError(f"{name}: must be an integer >= {minimum}{same}, got {value!r}")
    return value


def check_options(*, window, n_bootstrap, seed, n_individuals=None, batch_size=32, k=2, n=1, pll_positions="all",
                  pll_copies="all", pii_pll_copies=None, flags: bool = False):
    """Each option of :func:`audit_models` against the minimum ``toolkit run`` enforces for the same config key
    (:mod:`toolkit.config.experiment`; :data:`~toolkit.config.sections.ATTACK_MINIMA`), as one-line errors naming the
    option (``flags``: as the command line spells it). Returns the PLL budget (None: exact)."""
    from toolkit.audit.pll import check_budget, check_pii_estimator

    def name(param: str, flag: str) -> str:
        return flag if flags else param

    check_int(window, name("window", "--window"), ATTACK_MINIMA["window"], "audit.attacks.window")
    check_int(n_bootstrap, name("n_bootstrap", "--bootstrap"), 0, "audit.n_bootstrap")
    check_int(seed, name("seed", "--seed"), 0, "seed")
    if n_individuals is not None:
        check_int(n_individuals, name("n_individuals", "--n-individuals"), 1, "corpus.n_individuals")
    check_int(batch_size, "batch_size", 1, "audit.batch_size")
    check_int(k, name("k", "--k"), 2, "identifiers.k")
    check_int(n, name("n", "--n"), 1, "identifiers.n")
    if check_budget(pll_copies, name("pll_copies", "--pll-copies")) is not None and pll_positions != "all":
        raise ToolkitError(f"{name('pll_positions', '--pll-positions')} and {name('pll_copies', '--pll-copies')}: "
                           "give one estimator of the pseudo-log-likelihood, not both")
    check_pii_estimator(pii_pll_copies, name("pii_pll_copies", "--pii-pll-copies"))
    return check_budget(pll_positions, name("pll_positions", "--pll-positions"))


def position_limit(model: str | Path) -> int | None:
    """The longest sequence ``model``'s position table takes (:func:`toolkit.audit.losses.model_max_tokens` of its
    configuration; read without loading the weights), or None when none is known (rotary models, no config)."""
    from types import SimpleNamespace

    from transformers import AutoConfig

    from toolkit.audit.losses import model_max_tokens

    try:
        cfg = AutoConfig.from_pretrained(str(model))
    except (OSError, ValueError, KeyError):
        return None
    try:
        return model_max_tokens(SimpleNamespace(config=cfg))
    except (TypeError, ValueError):
        return None


def hash_predictions(frame: pd.DataFrame, key: bytes) -> pd.DataFrame:
    """A probe's predictions with ``original``, ``predicted`` and ``top_k`` as keyed hashes of their normalised
    words (module docstring); missing values stay missing, a value without a word becomes ``""``. Other columns
    (ids, offsets, flags) are kept."""
    from toolkit.audit.hashing import hash_term
    from toolkit.metrics.probing import prediction_words

    memo: dict[str, str] = {}

    def one(value):
        if not isinstance(value, str):
            return value
        if value not in memo:
            words = prediction_words(pd.Series([value], dtype=object)).iloc[0]
            memo[value] = " ".join(hash_term(w, key) for w in words)
        return memo[value]

    out = frame.copy()
    for col in ("original", "predicted"):
        if col in out.columns:
            out[col] = out[col].astype(object).map(one)
    if "top_k" in out.columns:
        out["top_k"] = out["top_k"].map(lambda alts: [one(a) for a in alts] if alts is not None else alts)
    return out


def hashed_membership_scores(predictions: pd.DataFrame, ids: dict[str, Any], corpus, key: bytes) -> pd.Series:
    """:func:`toolkit.audit.evaluate.membership_scores` of keyed-hash predictions (:func:`hash_predictions` with
    ``key``): each individual's indirect-identifier types hashed alike, so the counts are those on the words."""
    from toolkit.audit.evaluate import indirect_by_person
    from toolkit.audit.hashing import hash_term
    from toolkit.metrics.mia import mia_scores
    from toolkit.metrics.probing import norm_set

    by_person = {p: {hash_term(t, key) for t in norm_set(ts)} for p, ts in indirect_by_person(ids, corpus).items()}
    return mia_scores(predictions, by_person)


def remove_stale(out: Path, expected: dict[str, str], keep: tuple[str | Path, ...] = ()) -> list[str]:
    """Remove from the audit folder ``out`` what an earlier audit left and this one will not rewrite as it is: the
    top-level outputs (:data:`TOP_FILES`, written again at the end), and every step folder — ``identifiers_*``,
    ``audit/<label>``, ``attacks/<label>``, ``missed/<label>`` or a top-level ``<label>`` (a folder holding a ``step.json`` of those
    steps) — whose step and key are not in ``expected`` (``step name → key`` of this audit), or that is not where
    the run layout puts its step (:class:`~toolkit.results.layout.RunLayout`: the step's name is its path; e.g. a
    ``<label>/`` folder of an audit made before the attacks moved to ``attacks/<label>/``). Called before any new
    work, so an interrupted audit never leaves the previous audit's verdicts beside its own half-done folders.
    Folders without a ``step.json`` of an audit step (anything the audit did not write) are left alone, and so is a
    folder holding or inside one of ``keep`` (this audit's inputs, e.g. ``--identifiers OUT/identifiers_members``).
    Returns the removed paths, relative to ``out``."""
    layout = RunLayout(out)
    kept = [Path(k).resolve() for k in keep]
    removed = []
    for name in TOP_FILES:
        p = out / name
        if p.is_file() or p.is_symlink():
            p.unlink()
            removed.append(name)
    candidates = [d for d in out.iterdir() if d.is_dir() and not d.is_symlink()] if out.is_dir() else []
    for sub in (layout.audit_root, layout.attacks_root, layout.missed_root):
        if sub.is_dir():
            candidates += [d for d in sub.iterdir() if d.is_dir() and not d.is_symlink()]
    for d in candidates:
        info = layout.step_info(d)
        if info is None or not info["step"].startswith(("identifiers_", "audit/", "attacks/", "missed/")):
            continue
        inside = any(k.is_relative_to(d.resolve()) or d.resolve().is_relative_to(k) for k in kept)
        misplaced = layout.relative(d) != info["step"]
        if (misplaced or expected.get(info["step"]) != info.get("key")) and not inside:
            shutil.rmtree(d)
            removed.append(os.path.relpath(d, out))
    return removed


__all__ = ["TOP_FILES", "WRITE_ERRORS", "check_int", "check_options", "hash_predictions", "hashed_membership_scores",
           "position_limit", "remove_stale", "writing"]
