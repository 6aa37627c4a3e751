"""Several reviews of one candidate list (methods.md §7.4): agreement between two reviewers and the combined decision.

Two reviewers write two review files; :func:`compare_reviews` gives their agreement, Cohen's kappa (scikit-learn)
and conflicts, :func:`merge_reviews` the combined decision per token (policy ``any``: a name for one reviewer is a
name — the privacy-safe default), :func:`judged_names` the tokens the scrub step renames.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from toolkit.errors import ToolkitError
from toolkit.review.store import DECISIONS, load_decisions


def _as_paths(paths: str | Path | Sequence[str | Path]) -> list[Path]:
    return [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]


def compare_reviews(a: str | Path, b: str | Path) -> dict[str, Any]:
    """Agreement between two review files on the tokens both decided: share of equal decisions, Cohen's kappa
    (``sklearn.metrics.cohen_kappa_score``; ``None`` when undefined, e.g. one decision only), the confusion counts
    and the conflicting tokens."""
    from sklearn.metrics import cohen_kappa_score

    da, db = load_decisions(a).set_index("token"), load_decisions(b).set_index("token")
    common = sorted(set(da.index) & set(db.index))
    ya, yb = da.loc[common, "decision"].tolist(), db.loc[common, "decision"].tolist()
    agree = sum(x == y for x, y in zip(ya, yb))
    kappa = None
    if common and len(set(ya) | set(yb)) > 1:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            k = cohen_kappa_score(ya, yb, labels=list(DECISIONS))
        kappa = None if pd.isna(k) else float(k)
    confusion = {x: {y: sum(1 for p, q in zip(ya, yb) if p == x and q == y) for y in DECISIONS} for x in DECISIONS}
    return {"reviewer_a": ", ".join(sorted(set(da["reviewer"]))), "reviewer_b": ", ".join(sorted(set(db["reviewer"]))),
            "n_a": len(da), "n_b": len(db), "n_common": len(common), "n_agree": agree,
            "agreement": agree / len(common) if common else None, "cohen_kappa": kappa, "confusion": confusion,
            "conflicts": [{"token": t, "a": x, "b": y} for t, x, y in zip(common, ya, yb) if x != y]}


def merge_reviews(paths: str | Path | Sequence[str | Path], *, policy: str = "any",
                  unsure_as_name: bool = True) -> pd.DataFrame:
    """Combined decision per token over several review files.

    ``policy``: ``any`` (a name when any reviewer says so), ``majority`` (a name when more reviewers say name than
    not), ``unanimous`` (a name only when every reviewer who decided says so). With ``unsure_as_name`` an ``unsure``
    counts as ``name`` (the privacy-safe reading: scrub what might be a name). Columns: token, decision, n_name,
    n_not_name, n_unsure, n_reviewers, conflict.
    """
    if policy not in ("any", "majority", "unanimous"):
        raise ToolkitError(f"policy must be any, majority or unanimous, got {policy!r}")
    frames = [load_decisions(p) for p in _as_paths(paths)]
    allf = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["token", "decision"])
    rows = []
    for tok, g in allf.groupby("token", sort=True):
        n = {d: int((g["decision"] == d).sum()) for d in DECISIONS}
        yes = n["name"] + (n["unsure"] if unsure_as_name else 0)
        no = n["not_name"] + (0 if unsure_as_name else n["unsure"])
        if policy == "any":
            is_name = yes > 0
        elif policy == "majority":
            is_name = yes > no
        else:
            is_name = yes > 0 and no == 0
        rows.append({"token": tok, "decision": "name" if is_name else "not_name", "n_name": n["name"],
                     "n_not_name": n["not_name"], "n_unsure": n["unsure"], "n_reviewers": len(g),
                     "conflict": len(set(g["decision"])) > 1})
    return pd.DataFrame(rows, columns=["token", "decision", "n_name", "n_not_name", "n_unsure", "n_reviewers",
                                       "conflict"])


def judged_names(paths: str | Path | Sequence[str | Path], *, policy: str = "any",
                 unsure_as_name: bool = True) -> list[str]:
    """Tokens whose combined decision is ``name`` (:func:`merge_reviews`): what the scrub step renames."""
    merged = merge_reviews(paths, policy=policy, unsure_as_name=unsure_as_name)
    return merged.loc[merged["decision"] == "name", "token"].tolist()


__all__ = ["compare_reviews", "judged_names", "merge_reviews"]
