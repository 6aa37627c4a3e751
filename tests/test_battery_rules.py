"""Membership battery rules (methods.md §10): an AUC interval that always exists (Hanley–McNeil), individuals
resampled by the bootstrap, canary text out of the membership scores, unscoreable notes named and counted, and the
reference attack normalised per byte across tokenizers."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from toolkit.audit.attacks import canaries_into_corpus, canary_ranges, make_canaries, run_battery
from toolkit.audit.attacks.battery import without_ranges
from toolkit.audit.losses import token_losses
from toolkit.corpus import Corpus, make_document
from toolkit.metrics import hanley_mcneil_ci, mia_report
from toolkit.models import TinyModelConfig, init_model, train_tokenizer

from _attack_fixtures import NAMES, notes

TINY = dict(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, max_length=96)


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def _docs(n: int = 16, words: int = 8) -> list:
    return notes(n, words)


TEXTS = [d.text for d in _docs()]


def _model(vocab: int, seed: int = 0):
    torch.manual_seed(seed)
    tok = train_tokenizer(TEXTS * 3 + list(make_canaries(4)["text"]), "clm", vocab)
    return init_model(tok, TinyModelConfig(kind="clm", **TINY)).eval(), tok


@pytest.fixture(scope="module")
def gpt2():
    return _model(300)


def _split(docs):
    return (Corpus([d for d in docs if int(d.person_id[1:]) < 4]),
            Corpus([d for d in docs if int(d.person_id[1:]) >= 4]))


# ---- 1. an interval that always exists ------------------------------------------------------------------------------


def test_hanley_mcneil_against_hand_computation():
    # A = 0.8, 10 positives, 15 negatives: Q1 = 0.8/1.2 = 2/3, Q2 = 2·0.64/1.8 = 32/45
    # SE² = [0.8·0.2 + 9·(2/3 − 0.64) + 14·(32/45 − 0.64)] / 150 = (0.16 + 0.24 + 0.995556) / 150 = 0.00930370
    # SE = 0.0964557, z(0.975) = 1.959964 → half-width 0.189050
    lo, hi = hanley_mcneil_ci(0.8, 10, 15)
    assert lo == pytest.approx(0.8 - 0.189050, abs=2e-6) and hi == pytest.approx(0.8 + 0.189050, abs=2e-6)
    lo90, hi90 = hanley_mcneil_ci(0.8, 10, 15, confidence=0.9)            # z(0.95) = 1.644854
    assert hi90 - lo90 == pytest.approx(2 * 1.644854 * 0.0964557, abs=2e-6)
    assert hanley_mcneil_ci(0.97, 3, 3)[1] == 1.0                         # clipped to [0, 1]
    assert hanley_mcneil_ci(0.03, 3, 3)[0] == 0.0
    rng = np.random.default_rng(0)
    m, n = rng.normal(0.5, 1, 40), rng.normal(0, 1, 60)
    rep = mia_report(m, n, n_bootstrap=0)
    assert rep["auc_ci_method"] == "hanley-mcneil" and rep["auc_ci"] == hanley_mcneil_ci(rep["auc"], 40, 60)
    assert rep["auc_ci"][0] < rep["auc"] < rep["auc_ci"][1]
    assert mia_report(m, n, n_bootstrap=100)["auc_ci_method"] == "bootstrap"
    with pytest.raises(ValueError, match="n_bootstrap"):
        mia_report(m, n, n_bootstrap=-1)
    with pytest.raises(ValueError):
        hanley_mcneil_ci(1.2, 3, 3)


# ---- 2. individual-level bootstrap ---------------------------------------------------------------------------------


def test_cluster_bootstrap_wider_with_correlated_documents_and_equal_without():
    rng = np.random.default_rng(1)
    per = 6                                     # documents per individual, all nearly the individual's own score
    pm, pn = rng.normal(0.6, 1, 15), rng.normal(0, 1, 15)
    m = np.repeat(pm, per) + 0.01 * rng.normal(size=15 * per)
    n = np.repeat(pn, per) + 0.01 * rng.normal(size=15 * per)
    groups = ([f"m{i}" for i in range(15) for _ in range(per)], [f"n{i}" for i in range(15) for _ in range(per)])
    doc = mia_report(m, n, n_bootstrap=400, seed=0)
    ind = mia_report(m, n, n_bootstrap=400, seed=0, groups=groups)
    assert ind["auc"] == doc["auc"] and ind["n_clusters"] == {"members": 15, "nonmembers": 15}
    width = (lambda r: r["auc_ci"][1] - r["auc_ci"][0])
    assert width(ind) > 1.6 * width(doc)        # ≈ √6 in theory
    hm = mia_report(m, n, n_bootstrap=0, groups=groups)
    assert hm["auc_ci"] == hanley_mcneil_ci(doc["auc"], 15, 15)  # individuals as the sample sizes
    # one document per individual: the cluster bootstrap is the document bootstrap, draw for draw
    m1, n1 = pm, pn
    one = ([f"z{i}" for i in range(15)], [f"a{i}" for i in range(15)][::-1])
    for seed in (0, 3):
        a = mia_report(m1, n1, n_bootstrap=300, seed=seed)
        b = mia_report(m1, n1, n_bootstrap=300, seed=seed, groups=one)
        assert a["auc_ci"] == b["auc_ci"] and a["tpr_at_fpr_ci"] == b["tpr_at_fpr_ci"]


# ---- 3 and 4. canaries out of the scores; unscoreable documents -----------------------------------------------------


def test_canary_text_is_not_scored(gpt2):
    model, tok = gpt2
    members, nonmembers = _split(_docs())
    corpus, table = canaries_into_corpus(members, 3, (1, 2), seed=0)     # the experiment's own insertion, mid-text
    where = canary_ranges(corpus, table, with_separator=True)
    assert canary_ranges(corpus, table) != where and len(where) >= 3
    cut, n = without_ranges(tok, [d.text for d in corpus], [where.get(d.doc_id, []) for d in corpus])
    assert cut == [d.text for d in members] and (n > 0).sum() == len(where)  # the notes as they were
    kw = dict(unit="document", window=96, n_bootstrap=50, progress=False)
    clean = run_battery(model, tok, members, nonmembers, **kw)
    excl = run_battery(model, tok, corpus, nonmembers, exclude=where, **kw)
    raw = run_battery(model, tok, corpus, nonmembers, **kw)
    cols = ["loss", "zlib", "min_k", "min_k_plus_plus"]
    assert np.abs(excl.scores[cols].to_numpy() - clean.scores[cols].to_numpy()).max() < 1e-9
    assert np.abs(raw.scores[cols].to_numpy() - clean.scores[cols].to_numpy()).max() > 1e-3  # the canary did count
    n_insertions = sum(len(v) for v in where.values())
    assert excl.meta["n_excluded_tokens"] == int(n.sum()) > 4 * n_insertions and raw.meta["n_excluded_tokens"] == 0
    assert excl.to_json()["n_excluded_tokens"] == excl.meta["n_excluded_tokens"]
    for r in table.itertuples():                 # a canary's whole record, never part of it, was counted
        assert r.text not in " ".join(cut)
    # every document scored, individuals resampled: 4 member and 4 non-member individuals
    assert excl.meta["bootstrap_unit"] == "individual"
    assert excl.reports["loss"]["n_clusters"] == {"members": 4, "nonmembers": 4}
    with pytest.raises(ValueError, match="unknown document"):
        run_battery(model, tok, corpus, nonmembers, exclude={"nope": [(0, 1)]}, progress=False)
    with pytest.raises(ValueError, match="outside the text"):
        run_battery(model, tok, corpus, nonmembers, exclude={"d0": [(0, 10 ** 6)]}, progress=False)


def test_unscoreable_notes_are_named_and_left_out_of_every_attack(gpt2, tmp_path):
    model, tok = gpt2
    members, nonmembers = _split(_docs())
    empty = [make_document("e1", "q1", ""), make_document("e2", "q2", "")]
    non = Corpus(list(nonmembers) + empty)
    people = members.person_ids + non.person_ids
    # the identifier count puts the two empty non-members below every member: alone it would score them
    counts = {p: (0.0 if p in ("q1", "q2") else 1.0 + (p < "p4")) for p in people}
    res = run_battery(model, tok, members, non, extra_scores={"identifier_count": counts}, window=96,
                      n_bootstrap=50, progress=False)
    js = json.loads(json.dumps(res.to_json()))
    assert js["n_unscoreable"] == 2 and js["unscoreable"] == {"documents": ["e1", "e2"], "individuals": ["q1", "q2"]}
    assert set(js["attacks"]) >= {"loss", "zlib", "min_k", "min_k_plus_plus", "identifier_count"}
    for name, rep in js["attacks"].items():
        assert (rep["n_members"], rep["n_nonmembers"]) == (4, 4), name
    assert (js["n_members"], js["n_nonmembers"]) == (4, 4) and "q1" not in set(res.scores["id"])
    assert js["attacks"]["identifier_count"]["auc"] == 1.0                 # 2 beats 1 on the 4 scoreable each
    doc = run_battery(model, tok, members, non, unit="document", window=96, n_bootstrap=20, progress=False)
    assert doc.meta["n_unscoreable"] == 2 and all(r["n_nonmembers"] == len(nonmembers) for r in doc.reports.values())
    assert not doc.doc_scores.set_index("doc_id").loc[["e1", "e2"], "scoreable"].any()
    with pytest.raises(ValueError, match="no scoreable non-member"):
        run_battery(model, tok, members, Corpus(empty), window=96, progress=False)


# ---- 5. reference attack across tokenizers --------------------------------------------------------------------------


def test_reference_per_byte_across_tokenizers(gpt2):
    f, tok_f = gpt2
    g, tok_g = _model(220, seed=1)
    assert tok_f.get_vocab() != tok_g.get_vocab()
    members, nonmembers = _split(_docs())
    kw = dict(unit="document", window=96, n_bootstrap=20, progress=False)
    res = run_battery(f, tok_f, members, nonmembers, reference=(g, tok_g), **kw)
    assert res.meta["reference_normalisation"] == "per-byte"
    assert res.to_json()["reference_normalisation"] == "per-byte"
    texts = [d.text for d in list(members) + list(nonmembers)]
    lf = token_losses(f, tok_f, texts, window=96, progress=False)
    lg = token_losses(g, tok_g, lf.window_texts, window=96, moments=False, progress=False)
    n_bytes = np.array([len(t.encode("utf-8")) for t in lf.window_texts], dtype=float)
    want = -(np.array([a.sum() for a in lf.losses]) / n_bytes - np.array([a.sum() for a in lg.losses]) / n_bytes)
    assert res.scores["reference"].to_numpy() == pytest.approx(want, abs=1e-9)
    token_mean = lg.mean_loss() - lf.mean_loss()
    assert np.abs(token_mean - want).max() > 1e-2                           # the two normalisations differ
    # one tokenizer: today's formula exactly
    g2 = init_model(tok_f, TinyModelConfig(kind="clm", **TINY)).eval()
    same = run_battery(f, tok_f, members, nonmembers, reference=(g2, tok_f), **kw)
    lg2 = token_losses(g2, tok_f, lf.window_texts, window=96, moments=False, progress=False)
    assert same.meta["reference_normalisation"] == "token-mean"
    assert same.scores["reference"].to_numpy() == pytest.approx(lg2.mean_loss() - lf.mean_loss(), abs=1e-12)
    assert run_battery(f, tok_f, members, nonmembers, **kw).to_json()["reference_normalisation"] is None


def test_attack_model_passes_the_canary_ranges(gpt2, tmp_path, monkeypatch):
    """The experiment's attack step scores the canary-bearing members without their canaries."""
    import toolkit.audit.attacks as attacks
    from toolkit.audit.model_audit import AuditContext, AuditSettings, audit_model
    from toolkit.config.sections import AttacksSection

    model, tok = gpt2
    model.save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    members, nonmembers = _split(_docs())
    corpus, table = canaries_into_corpus(members, 2, (1, 2), seed=0)
    seen = {}

    class Stop(Exception):
        pass

    def spy(*args, exclude=None, **kw):
        seen["exclude"] = exclude
        raise Stop

    monkeypatch.setattr(attacks, "run_battery", spy)
    with pytest.raises(Stop):
        audit_model(tmp_path / "m", corpus, nonmembers, {}, context=AuditContext(canaries=table),
                    settings=AuditSettings(AttacksSection()))
    assert seen["exclude"] == canary_ranges(corpus, table, with_separator=True) and seen["exclude"]
    with pytest.raises(Stop):
        audit_model(tmp_path / "m", members, nonmembers, {}, settings=AuditSettings(AttacksSection()))
    assert seen["exclude"] is None
