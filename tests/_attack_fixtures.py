"""Attack-battery and verdict files written by hand, in the layout the attack step and ``toolkit audit`` write.

Until those steps write them on a real run, the report and notebook tests put synthetic ones into a copy of the tiny
run (``attacks/base/``, ``attacks/<strategy>/epoch-<N>/``) or into an audit directory (``<label>/`` folders and
``verdicts.json``): ``attacks.json``, ``roc.json``, ``scores.parquet`` (:meth:`BatteryResult.save` on
:func:`battery_from_scores` of seeded synthetic scores), ``identifiers.json`` and ``verdict.json``
(:func:`toolkit.audit.verdict.verdict` of those numbers).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from toolkit.audit.attacks import battery_from_scores
from toolkit.audit.verdict import verdict

ALL = ("loss", "zlib", "min_k", "min_k_plus_plus", "reference", "identifier_count")

#: the synthetic notes the attack tests score: 8 patients (two notes each), the name a gold span
NAMES = ["Alvarez", "Brennan", "Castillo", "Dorsey", "Eaton", "Fischer", "Garcia", "Hughes"]
WORDS = "patient doctor nurse took aspirin insulin morning evening pain knee walked rested".split()


def notes(n: int = 16, words: int = 20) -> list:
    """``n`` short seeded notes of 8 individuals ("Mr <name> <words>. Then <name> left."), the name a PATIENT span."""
    from toolkit.corpus import make_document

    rng = np.random.default_rng(0)
    out = []
    for i in range(n):
        nm = NAMES[i % 8]
        text = f"Mr {nm} " + " ".join(rng.choice(WORDS, words)) + f". Then {nm} left."
        out.append(make_document(f"d{i}", f"p{i % 8}", text, [(3, 3 + len(nm), "PATIENT")]))
    return out


def battery(shift: float, *, n: int = 8, attacks=ALL, seed: int = 0):
    """Scores of ``n`` members and ``n`` non-members per attack: both groups draw the same values (plus a jitter far
    below their spacing), members shifted up by ``shift``; ``shift=0`` is no signal (AUC near 0.5)."""
    rng = np.random.default_rng(seed)
    member = np.r_[np.ones(n, bool), np.zeros(n, bool)]
    cols = {}
    for i, a in enumerate(attacks):
        x = rng.normal(size=n)
        cols[a] = np.r_[x + shift * (1 + 0.25 * i), x + 1e-6 * rng.normal(size=n)]
    scores = pd.DataFrame(cols, index=[f"person-{i:02d}" for i in range(2 * n)])
    return battery_from_scores(scores, member, reference="base" if "reference" in attacks else None, n_bootstrap=50,
                               seed=seed)


def identifiers(top1: float, chance: float = 0.05, reference_top1: float | None = 0.05,
                canary_max: float = 2.0) -> dict:
    """An ``identifiers.json``: PII inference per category, memorisation summary, canary exposure per repeat count."""
    def pii(n, t):
        return {"n": n, "top1": t, "chance": chance, "reference_top1": reference_top1,
                "ratio_to_chance": t / chance}

    def mem(n, med):
        return {"n_types": n, "mean": med, "median": med, "q25": med - 0.5, "q75": med + 0.5, "max": med + 2,
                "share_positive": 0.5 + med / 10}

    log2 = float(8 * np.log2(10))
    return {"pii_inference": {"n_occurrences": 60, "n_occurrences_total": 60, "n_without_candidates": 0,
                              "n_candidates": int(round(1 / chance)), "window": 256, "seed": 0, "model": "m",
                              "reference": "base" if reference_top1 is not None else None,
                              "overall": pii(60, top1), "by_category": {"DATE": pii(20, top1), "NAME": pii(40, top1)}},
            "memorisation": {"n_occurrences": 80, "window": 256, "seed": 0, "overall": mem(30, top1),
                             "by_category": {"DATE": mem(10, top1), "NAME": mem(20, top1)}},
            "canaries": {"log2_space": log2, "by_repeats": {
                str(r): {"n": 4, "mean": canary_max * r / 32, "median": canary_max * r / 32,
                         "max": min(log2, canary_max * r / 16)} for r in (1, 4, 16)}}}


def write_model(d: Path, res, ids: dict, *, novel_privacy: float | None = 1.0,
                regurgitation: float | None = 0.0) -> dict:
    """The five files of one model in folder ``d``; returns the verdict dict."""
    d.mkdir(parents=True, exist_ok=True)
    res.save(d)
    (d / "identifiers.json").write_text(json.dumps(ids), encoding="utf-8")
    v = verdict(attacks=res, pii=ids["pii_inference"], novel_privacy=novel_privacy, regurgitation=regurgitation,
                canaries=ids["canaries"]).to_dict()
    (d / "verdict.json").write_text(json.dumps(v), encoding="utf-8")
    return v


def write_run_attacks(run_dir: Path) -> dict[str, dict]:
    """Attack files for the tiny run's base model and its clm / ppclm checkpoints (epochs 4 and 8): clm leaks (red),
    ppclm and the base model do not (incomplete: 8 members and 8 non-members are too few to judge membership).
    Returns ``label → verdict``."""
    att = Path(run_dir) / "attacks"
    out = {"base (epoch 0)": write_model(att / "base", battery(0.0, attacks=tuple(a for a in ALL if a != "reference")),
                                         identifiers(0.05, reference_top1=None, canary_max=1.0))}
    for strategy, shift, top1 in (("clm", 3.0, 0.4), ("ppclm", 0.0, 0.05)):
        for epoch in (4, 8):
            res = battery(shift * epoch / 8, seed=epoch)
            ids = identifiers(top1, canary_max=30.0 if strategy == "clm" else 1.0)
            out[f"{strategy} (epoch {epoch})"] = write_model(att / strategy / f"epoch-{epoch}", res, ids,
                                                             novel_privacy=1.0, regurgitation=0.0)
    return out


def write_audit_dir(out: Path) -> dict[str, dict]:
    """A ``toolkit audit`` output directory with two masked models (no Min-K%++, no reference model) in
    ``attacks/<label>/``: one leaking (amber or red), one not; and ``verdicts.json``."""
    out = Path(out)
    att = out / "attacks"
    masked = ("loss", "zlib", "min_k", "identifier_count")
    verdicts = {"bert-finetuned": write_model(att / "bert-finetuned", battery(1.5, attacks=masked, n=30, seed=3),
                                              identifiers(0.06, reference_top1=None), novel_privacy=None,
                                              regurgitation=None),
                "bert-ppmlm": write_model(att / "bert-ppmlm", battery(0.0, attacks=masked, n=30, seed=4),
                                          identifiers(0.05, reference_top1=None), novel_privacy=None,
                                          regurgitation=None)}
    (out / "verdicts.json").write_text(json.dumps(verdicts), encoding="utf-8")
    return verdicts


def tiny_clm(n: int = 16, words: int = 8):
    """A seeded one-layer GPT-2 on :func:`notes` (model in eval mode, tokenizer, the notes): the battery's fixture."""
    import torch

    from toolkit.models import TinyModelConfig, init_model, train_tokenizer

    torch.manual_seed(0)
    docs = notes(n, words)
    tok = train_tokenizer([d.text for d in docs] * 3, "clm", 300)
    cfg = TinyModelConfig(kind="clm", hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, max_length=96)
    return init_model(tok, cfg).eval(), tok, docs
