"""EZ-MIA, DC-PDD, ReCaLL and the blind baseline (methods.md §10, issue 57): each against its authors' formula on the same
inputs, each in the battery through its registry entry, and the blind baseline's check in the verdict.

* EZ-MIA: hand-computed ratios (the authors' repository JetBrains-Research/ez-mia states no licence file, so none of
  its code is copied here; on 2026-12-02 our ``ez_ratio`` was also run against their ``error_zone_pos_neg_sum_ratio``
  on 2,000 random documents: largest relative difference 6.2e-16);
* DC-PDD: a minimal transcription of ``DC_PDDAttack._attack`` of iamgroot42/mimir (``mimir/attacks/dc_pdd.py``, MIT
  licence, Copyright (c) 2023 Anshuman Suri), in :func:`_mimir_dc_pdd` below;
* ReCaLL: the conditional loss against the Hugging Face loss with the prefix's labels masked, mimir's
  ``get_conditional_ll`` formula (``mimir/attacks/recall.py``);
* the blind baseline: separates texts that differ (years), finds nothing in exchangeable ones, and is cross-fitted
  over individuals (a marker private to one individual tells nothing).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from toolkit.audit.attacks import run_battery
from toolkit.audit.attacks.blind import blind_score, folds_over_individuals
from toolkit.audit.attacks.dc_pdd import dc_pdd_document, token_frequencies
from toolkit.audit.attacks.ez_mia import ez_ratio
from toolkit.audit.losses import token_losses
from toolkit.audit.verdict import verdict
from toolkit.corpus import Corpus
from toolkit.metrics import mia_report
from toolkit.models import TinyModelConfig, init_model, train_tokenizer

from _attack_fixtures import notes, tiny_clm

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


# ---- EZ-MIA ---------------------------------------------------------------------------------------------------------


def test_ez_ratio_by_hand():
    # error positions 0, 2, 3 (top-1 wrong); shifts there +0.5, -0.25, +1.0 → (0.5 + 1.0) / 0.25 = 6
    t = np.log(np.array([0.5, 0.9, 0.2, 0.4]))
    r = t - np.array([0.5, 3.0, -0.25, 1.0])
    assert ez_ratio(t, r, np.array([False, True, False, False])) == pytest.approx(6.0, rel=1e-9)
    # fewer than 2 error positions, or no negative shift: 0 (the authors' conventions)
    assert ez_ratio(t, r, np.array([True, True, False, True])) == 0.0
    assert ez_ratio(t, t - 1.0, np.zeros(4, bool)) == 0.0


# ---- DC-PDD ---------------------------------------------------------------------------------------------------------


def _mimir_dc_pdd(log_probs, input_ids, counts, a=0.01):
    """Transcribed from mimir ``DC_PDDAttack`` (MIT licence, Copyright (c) 2023 Anshuman Suri): Laplace smoothing of
    the counts, first occurrences, alpha = p · log(1/f) clipped at a, beta = −mean(alpha) (mimir: lower = member)."""
    fre_dis = torch.tensor(counts, dtype=torch.float64)
    fre_dis = (1 + fre_dis) / (torch.sum(fre_dis) + len(fre_dis))
    x_pro = np.exp(log_probs)
    indexes, current_ids = [], []
    for i, input_id in enumerate(input_ids):
        if input_id not in current_ids:
            indexes.append(i)
            current_ids.append(input_id)
    x_pro = x_pro[indexes]
    x_fre = fre_dis[torch.tensor(input_ids)[indexes]].numpy()
    alpha = x_pro * np.log(1 / x_fre)
    alpha[alpha > a] = a
    return -np.mean(alpha)


def test_dc_pdd_against_mimir_on_the_same_inputs():
    rng = np.random.default_rng(0)
    worst = 0.0
    for _ in range(300):
        v, n = int(rng.integers(5, 50)), int(rng.integers(1, 40))
        counts = rng.integers(0, 30, v).astype(float)
        ids = rng.integers(0, v, n)
        lp = np.log(rng.uniform(1e-4, 1, n))
        freq = (1 + counts) / (counts.sum() + v)
        ours = dc_pdd_document(lp, ids, freq)
        worst = max(worst, abs(ours - -_mimir_dc_pdd(lp, [int(i) for i in ids], counts)))
    assert worst < 1e-12


def test_dc_pdd_frequencies_from_the_public_split():
    tok = train_tokenizer([d.text for d in notes(16, 8)] * 3, "clm", 200)
    public = ["Then Alvarez left.", "patient doctor"]
    f = token_frequencies(tok, public)
    counts = np.zeros(len(tok))
    for ids in tok(public)["input_ids"]:
        for i in ids:
            counts[i] += 1
    np.testing.assert_allclose(f, (1 + counts) / (counts.sum() + len(tok)), rtol=1e-12)
    assert f.sum() == pytest.approx(1.0)


# ---- the blind baseline ---------------------------------------------------------------------------------------------


def _auc(scores, member):
    return mia_report(scores[member], scores[~member], n_bootstrap=0)["auc"]


def test_the_blind_baseline_separates_texts_that_differ_and_is_cross_fitted_over_individuals():
    rng = np.random.default_rng(1)
    words = "pain knee walked rested took aspirin insulin morning evening".split()
    member = np.r_[np.ones(40, bool), np.zeros(40, bool)]
    persons = [f"p{i // 2}" for i in range(80)]  # two notes each
    body = [" ".join(rng.choice(words, 12)) for _ in range(80)]
    dated = [f"Seen in {2012 if m else 2019}. {b}" for m, b in zip(member, body)]
    assert _auc(blind_score(dated, member, persons), member) > 0.95
    # exchangeable texts: nothing to find (cross-fitted scores lean below 0.5 under the null)
    assert _auc(blind_score(body, member, persons), member) < 0.65
    # cross-fitted over individuals: each note scored once, by a classifier fitted without its individual
    splits = folds_over_individuals(member, persons)
    assert len(splits) == 5 and sorted(np.concatenate([t for _, t in splits]).tolist()) == list(range(80))
    for train, test in splits:
        assert not {persons[i] for i in train} & {persons[i] for i in test}
        assert member[train].any() and not member[train].all()
    # a marker private to each individual, in both of their notes: nothing to find across individuals
    marked = [f"{b} zq{persons[i][1:]}x" for i, b in enumerate(body)]
    assert _auc(blind_score(marked, member, persons), member) < 0.65
    assert np.isnan(blind_score(body[:3], member[[0, 1, 79]], ["a", "a", "b"])).all()  # one member individual


def _blind_battery(blind_auc, loss_auc, n=200):
    rep = lambda a: {"auc": a, "auc_ci": [a - 0.05, a + 0.05], "tpr_at_fpr": {"0.01": 0.0}}  # noqa: E731
    return {"n_members": n, "n_nonmembers": n, "attacks": {"loss": rep(loss_auc), "blind": rep(blind_auc)}}


PII = {"n_occurrences": 200, "overall": {"n": 200, "top1": 0.02, "chance": 0.02}, "by_category": {}}


def test_where_the_blind_baseline_separates_the_groups_the_attacks_it_explains_do_not_decide():
    v = verdict(attacks=_blind_battery(0.80, 0.80), pii=PII)
    assert v.level == "green" and "differ as texts" in v.statement and v.blind
    assert not any(t["attack"] == "blind" for t in v.tests)  # the check, not a finding: outside the family
    assert [t["rule"] for t in v.tests if t["attack"] == "loss"] == ["membership_auc_beyond_blind"]
    strong = verdict(attacks=_blind_battery(0.70, 0.95), pii=PII)
    assert strong.level == "amber" and strong.rule == "membership_auc_beyond_blind", strong.statement
    # without a separation the blind baseline changes nothing (loss judged as usual: red at 0.95 with TPR 0 → amber)
    plain = verdict(attacks=_blind_battery(0.52, 0.95), pii=PII)
    assert plain.blind is None and plain.rule == "membership_auc" and "differ as texts" not in plain.statement


# ---- in the battery, through the registry ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def model():
    return tiny_clm(16, 8)


def test_the_new_attacks_run_where_their_needs_are_met(model):
    f, tok, docs = model
    members = Corpus([d for d in docs if int(d.person_id[1:]) < 4])
    nonmembers = Corpus([d for d in docs if int(d.person_id[1:]) >= 4])
    public = ["Mr Alvarez took aspirin.", "Then Brennan left."]
    res = run_battery(f, tok, members, nonmembers, reference=(f, tok), public=public, window=64, n_bootstrap=0,
                      progress=False)
    assert {"ez", "dc_pdd", "recall", "blind"} <= set(res.reports)
    assert not {"ez", "dc_pdd", "recall", "blind"} & set(res.meta["reference_model_attacks"])
    # the model as its own reference: every shift is 0, so EZ-MIA is 0 everywhere (no negative shift)
    assert np.allclose(res.doc_scores["ez"], 0.0)
    # DC-PDD as computed by hand from the token losses and the public split's frequencies
    tl = token_losses(f, tok, [d.text for d in list(members) + list(nonmembers)], window=64, progress=False)
    freq = token_frequencies(tok, public)
    want = [dc_pdd_document(-a, t, freq) for a, t in zip(tl.losses, tl.token_ids)]
    np.testing.assert_allclose(res.doc_scores["dc_pdd"], want, rtol=1e-9)
    # without a reference and a public split: the blind baseline still runs, EZ-MIA and DC-PDD do not
    bare = run_battery(f, tok, members, nonmembers, window=64, n_bootstrap=0, progress=False)
    assert "blind" in bare.reports and not {"ez", "dc_pdd", "recall"} & set(bare.reports)


def test_masked_top1_flags_for_ez_mia():
    texts = [d.text for d in notes(4, 6)]
    tok = train_tokenizer(texts * 3, "mlm", 200)
    torch.manual_seed(0)
    m = init_model(tok, TinyModelConfig(kind="mlm", hidden_size=32, num_layers=1, num_heads=2,
                                        intermediate_size=64, max_length=64)).eval()
    tl = token_losses(m, tok, texts, window=64, progress=False)
    assert tl.top1 is not None and all(t.dtype == bool and t.size == a.size for t, a in zip(tl.top1, tl.losses))
    # top-1 right exactly where the true token's log-probability is the largest: never with a loss above log 2
    # unless it is the argmax of a flat distribution — check against a recount of one masked position
    ids = tok(texts[0])["input_ids"]
    x = torch.tensor([ids])
    pos = 1
    x[0, pos] = tok.mask_token_id
    with torch.inference_mode():
        lp = torch.log_softmax(m(input_ids=x).logits[0, pos].double(), -1)
    assert bool(tl.top1[0][0]) == (int(lp.argmax()) == ids[pos])
    assert tl.losses[0][0] == pytest.approx(float(-lp[ids[pos]]), abs=1e-6)


# ---- ReCaLL ---------------------------------------------------------------------------------------------------------


def test_recall_against_mimir_on_the_same_inputs(model):
    from toolkit.audit.attacks.recall import conditional_losses, recall_prefix, recall_score

    f, tok, docs = model
    public = ["Mr Alvarez took aspirin in the morning.", "Then Brennan left the knee clinic."]
    prefix = recall_prefix(tok, public, 12, seed=0)
    assert len(prefix) == 12
    texts = [d.text for d in docs[:4]]
    tl = token_losses(f, tok, texts, window=64, progress=False)
    cut = [t[:40] for t in tl.token_ids]
    ours = conditional_losses(f, prefix, cut)
    for c, ids in zip(ours, cut):
        # mimir's ``get_conditional_ll`` (MIT licence, Copyright (c) 2023 Anshuman Suri): labels = prefix + text, the
        # prefix's positions set to -100, the model's own mean loss over the rest. (Its sliding loop, as published at
        # 0249ab9, slices [0, 0) on its first step, so a sequence that fits one window is scored from this formula
        # here, not from the loop.)
        x = torch.from_numpy(np.r_[prefix, ids][None])
        lab = x.clone()
        lab[:, :len(prefix)] = -100
        with torch.no_grad():
            want = float(f(x, labels=lab).loss)
        assert c.mean() == pytest.approx(want, abs=1e-6)
    # the score: conditional over unconditional mean loss on the same tokens
    got = recall_score(tl, f, tok, public, prefix_tokens=12, seed=0)
    m = [min(len(t), 96 - 12) for t in tl.token_ids]
    cond = conditional_losses(f, prefix, [t[:k] for t, k in zip(tl.token_ids, m)])
    np.testing.assert_allclose(got, [c.mean() / a[:k].mean() for c, a, k in zip(cond, tl.losses, m)], rtol=1e-12)
