"""RMIA (methods.md §10; toolkit/audit/attacks/rmia.py) against a brute-force transcription of the paper's formula and
against ML Privacy Meter's code; a case where RMIA separates members that LOSS cannot; the reference split; the
battery end to end with tiny random models."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from toolkit.audit.attacks import RMIAReferences, membership_scores, rmia_score, run_battery, tune_offline_a
from toolkit.audit.attacks.rmia import RMIASignals, out_probabilities
from toolkit.audit.losses import TokenLosses
from toolkit.corpus import Corpus
from toolkit.errors import ToolkitError
from toolkit.models import TinyModelConfig, init_model, train_tokenizer
from toolkit.pipelines.reference_models import reference_split

from _attack_fixtures import notes


# --- ML Privacy Meter, modules/mia/attacks/rmia.py (privacytrustlab/ml_privacy_meter, commit e384af8), verbatim
# except for the docstrings:
#
#   def get_out_ref_signals(ref_signals, ref_memberships, num_reference_models=None, offline_a=0.3):
#       non_members = ~ref_memberships
#       out_signals = ref_signals * non_members
#       if num_reference_models is None:
#           num_reference_models = ref_signals.shape[1]
#       if num_reference_models > 1:
#           out_signals = -np.sort(-out_signals, axis=1)[:, :num_reference_models]
#       else:
#           if offline_a != 0:
#               out_signals += ((ref_signals + offline_a - 1) / offline_a) * ref_memberships
#           else:
#               out_signals += ((ref_signals - 0.7) / 0.3) * ref_memberships
#       return out_signals
#
#   def run_rmia(target_signals, ref_signals, ref_memberships, z_target_signals, z_ref_signals, offline_a,
#                num_reference_models=None):
#       if num_reference_models is None:
#           num_reference_models = max(ref_signals.shape[1] // 2, 1)
#       out_signals = get_out_ref_signals(ref_signals, ref_memberships, num_reference_models, offline_a)
#       mean_out_x = np.mean(out_signals, axis=1)
#       mean_x = (1 + offline_a) / 2 * mean_out_x + (1 - offline_a) / 2
#       prob_ratio_x = target_signals.ravel() / mean_x
#       population_memberships = np.zeros_like(z_ref_signals).astype(bool)
#       z_out_signals = get_out_ref_signals(z_ref_signals, population_memberships, num_reference_models, offline_a)
#       mean_out_z = np.mean(z_out_signals, axis=1)
#       mean_z = (1 + offline_a) / 2 * mean_out_z + (1 - offline_a) / 2
#       prob_ratio_z = z_target_signals.ravel() / mean_z
#       ratios = prob_ratio_x[:, np.newaxis] / prob_ratio_z
#       counts = np.average(ratios > 1.0, axis=1)
#       return counts


def _mlpm_out(ref, members, num, a):
    out = ref * ~members
    if num > 1:
        out = -np.sort(-out, axis=1)[:, :num]
    elif a != 0:
        out = out + ((ref + a - 1) / a) * members
    else:
        out = out + ((ref - 0.7) / 0.3) * members
    return out


def _mlpm_rmia(target, ref, members, z_target, z_ref, a, num):
    mean_x = (1 + a) / 2 * np.mean(_mlpm_out(ref, members, num, a), axis=1) + (1 - a) / 2
    mean_z = (1 + a) / 2 * np.mean(_mlpm_out(z_ref, np.zeros_like(z_ref, bool), num, a), axis=1) + (1 - a) / 2
    ratios = (target / mean_x)[:, None] / (z_target / mean_z)
    return np.average(ratios > 1.0, axis=1)


def _brute(target, ref, z_target, z_ref, a, gamma=1.0):
    """Pr_z[(p(x|θ)/p(x)) / (p(z|θ)/p(z)) > γ], p(·) = ½((1 + a)·mean_r p(·|θ_r) + (1 − a)), one pair at a time."""
    def p(row):
        return 0.5 * ((1 + a) * sum(row) / len(row) + (1 - a))

    out = []
    for i in range(len(target)):
        hits = sum((target[i] / p(ref[i])) / (z_target[j] / p(z_ref[j])) > gamma for j in range(len(z_target)))
        out.append(hits / len(z_target))
    return np.array(out)


def _brute_groups(target, ref, a, population, groups, gamma=1.0):
    """RMIA with the non-members as the population: each x against every population document of another group."""
    def p(row):
        return 0.5 * ((1 + a) * sum(row) / len(row) + (1 - a))

    out = []
    for i in range(len(target)):
        zs = [j for j in range(len(target)) if population[j] and groups[j] != groups[i]]
        hits = sum((target[i] / p(ref[i])) / (target[j] / p(ref[j])) > gamma for j in zs)
        out.append(hits / len(zs) if zs else np.nan)
    return np.array(out)


def _probs(seed, n, m, r):
    rng = np.random.default_rng(seed)
    return (rng.uniform(0.05, 0.9, n), rng.uniform(0.05, 0.9, (n, r)), rng.uniform(0.05, 0.9, m),
            rng.uniform(0.05, 0.9, (m, r)))


@pytest.mark.parametrize("a", [0.0, 0.3, 1.0])
@pytest.mark.parametrize("r", [1, 2, 4])
def test_rmia_score_matches_brute_force_and_ml_privacy_meter(a, r):
    tx, rx, tz, rz = _probs(r, 12, 30, r)
    got = rmia_score(tx, rx, tz, rz, offline_a=a)
    np.testing.assert_allclose(got, _brute(tx, rx, tz, rz, a), atol=1e-12)
    # all reference models OUT: ML Privacy Meter with every column kept (num_reference_models = R)
    np.testing.assert_allclose(got, _mlpm_rmia(tx, rx, np.zeros_like(rx, bool), tz, rz, a, r), atol=1e-12)
    assert 0.0 < got.mean() < 1.0  # the case is not degenerate


@pytest.mark.parametrize("a", [0.0, 0.3])
def test_non_members_as_population_leave_out_their_own_individual(a):
    """The pipelines' population: the audited non-members, a document never compared with its own individual's
    (brute force, pair by pair); a non-member's score is then its rank among the other individuals' non-member
    documents — with one document per individual exactly 0, 1/(N−1), …, 1: uniform, whatever the models."""
    rng = np.random.default_rng(11)
    n_members, n_non = 9, 12
    tx, rx = rng.uniform(0.05, 0.9, n_members + n_non), rng.uniform(0.05, 0.9, (n_members + n_non, 2))
    population = np.r_[np.zeros(n_members, bool), np.ones(n_non, bool)]
    groups = np.r_[np.arange(n_members), 100 + np.arange(n_non) // 2]  # non-members: two documents each
    sig = RMIASignals(reference_x=rx, target_z=None, reference_z=None, offline_a=a, n_tokens_x=np.full(tx.size, 4),
                      population=population, groups=groups)
    got = membership_scores(_losses(-np.log(tx)), rmia=sig)["rmia"].to_numpy()
    np.testing.assert_allclose(got, _brute_groups(tx, rx, a, population, groups), atol=1e-12)
    one_each = RMIASignals(reference_x=rx, target_z=None, reference_z=None, offline_a=a,
                           n_tokens_x=np.full(tx.size, 4), population=population, groups=np.arange(tx.size))
    ranks = membership_scores(_losses(-np.log(tx)), rmia=one_each)["rmia"].to_numpy()[population]
    np.testing.assert_allclose(np.sort(ranks), np.arange(n_non) / (n_non - 1), atol=1e-12)


def test_a_model_that_saw_the_public_split_blinds_a_public_population():
    """Why the population is the non-members (rmia.py's docstring): the audited model's base was pre-trained on the
    public split, so public documents are likelier under it than under reference models fine-tuned away from them.
    With them as ``z`` every member and non-member of a model at its base's level scores 0 (AUC 0.50 by ties, as the
    frontier's DP models did); with the non-members as ``z`` the scores spread (non-members uniform) and a member
    signal is seen."""
    rng = np.random.default_rng(5)
    n = 40
    ref_x = rng.uniform(1.5, 2.5, 2 * n)  # reference models' mean token losses on members and non-members
    target = ref_x + 0.3 - np.r_[np.full(n, 0.15), np.zeros(n)]  # near its base: a faint member signal
    public_ref = rng.uniform(1.5, 2.5, 60)
    public_target = public_ref - 1.5  # the base saw these
    member = np.r_[np.ones(n, bool), np.zeros(n, bool)]
    rx = np.exp(-np.c_[ref_x])
    old = RMIASignals(reference_x=rx, target_z=np.exp(-public_target), reference_z=np.exp(-np.c_[public_ref]),
                      offline_a=0.3, n_tokens_x=np.full(2 * n, 4))
    blind = membership_scores(_losses(target), rmia=old)["rmia"].to_numpy()
    assert (blind == 0).all() and roc_auc_score(member, blind) == 0.5
    new = RMIASignals(reference_x=rx, target_z=None, reference_z=None, offline_a=0.3, n_tokens_x=np.full(2 * n, 4),
                      population=~member, groups=np.arange(2 * n))
    seen = membership_scores(_losses(target), rmia=new)["rmia"].to_numpy()
    assert 0.3 < np.median(seen[~member]) < 0.7 and roc_auc_score(member, seen) > 0.6


def test_rmia_score_hand_case_and_gamma():
    # one reference, a = 1: p(x) = p_OUT(x). ratios: x0 = .8/.4 = 2, x1 = .2/.4 = .5; z ratios: .5/.5 = 1, .3/.1 = 3
    s = rmia_score([0.8, 0.2], [[0.4], [0.4]], [0.5, 0.3], [[0.5], [0.1]], offline_a=1.0)
    np.testing.assert_allclose(s, [0.5, 0.0])  # x0 beats z0 (2 > 1), not z1 (2/3 < 1)
    np.testing.assert_allclose(rmia_score([0.8, 0.2], [[0.4], [0.4]], [0.5, 0.3], [[0.5], [0.1]], offline_a=1.0,
                                          gamma=2.5), [0.0, 0.0])
    # a = 0: p(x) = (p_OUT + 1)/2, the reference barely matters
    np.testing.assert_allclose(rmia_score([0.8], [[0.4]], [0.5], [[0.5]], offline_a=0.0), [1.0])  # .8/.7 > .5/.75


def test_in_references_are_converted_as_ml_privacy_meter():
    tx, rx, tz, rz = _probs(7, 10, 20, 3)
    inn = np.random.default_rng(1).random(rx.shape) < 0.5
    for a in (0.0, 0.4):
        ours = rmia_score(tx, rx, tz, rz, offline_a=a, reference_x_in=inn)
        np.testing.assert_allclose(ours, _mlpm_rmia(tx, rx, inn, tz, rz, a, 1), atol=1e-12)
    np.testing.assert_allclose(out_probabilities([[0.9, 0.5]], [[True, False]], offline_a=0.5), [(0.8 + 0.5) / 2])


def test_tune_offline_a_picks_the_best_auc_of_the_grid():
    rng = np.random.default_rng(3)
    n, m = 40, 50
    member = np.r_[np.ones(n // 2, bool), np.zeros(n // 2, bool)]
    rx = rng.uniform(0.1, 0.6, (n, 2))
    inn = np.c_[member, ~member]
    tx = np.clip(rx[:, 0] * np.where(member, 1.3, 1.0) + rng.normal(0, 0.05, n), 0.01, 0.99)
    tz, rz = rng.uniform(0.1, 0.6, m), rng.uniform(0.1, 0.6, (m, 2))
    a, aucs = tune_offline_a(tx, member, rx, inn, tz, rz)
    expect = {round(g, 1): roc_auc_score(member, _mlpm_rmia(tx, rx, inn, tz, rz, g, 1)) for g in np.arange(0, 1.1, .1)}
    assert aucs == pytest.approx(expect)
    assert aucs[a] == max(expect.values()) and a == min(g for g, v in expect.items() if v == max(expect.values()))


def _losses(mean_losses):
    arrs = [np.full(4, v) for v in mean_losses]
    return TokenLosses(kind="clm", losses=arrs, token_ids=[np.arange(4)] * len(arrs),
                       offsets=[np.zeros((4, 2), np.int64)] * len(arrs), window_texts=["t"] * len(arrs))


def test_rmia_separates_members_that_loss_cannot():
    """Members are intrinsically hard notes (every model finds them unlikely), non-members easy ones: LOSS ranks the
    easy non-members first; RMIA compares each note with what the reference models make of it. (With a = 1: at small
    document probabilities the offline term (1 − a)/2 dominates p(x) and RMIA falls back to LOSS's order, which is
    why ``a`` is tuned.)"""
    rng = np.random.default_rng(0)
    n = 20
    ref_hard, ref_easy = rng.uniform(3.0, 4.0, n), rng.uniform(1.0, 2.0, n)  # reference models' mean token losses
    target = np.r_[ref_hard - 0.5, ref_easy + rng.normal(0, 0.05, n)]  # members learnt: 0.5 nats lower
    ref = np.r_[ref_hard, ref_easy]
    pop_ref = rng.uniform(1.0, 4.0, 60)
    pop_target = pop_ref + rng.normal(0, 0.05, 60)
    sig = RMIASignals(reference_x=np.exp(-np.c_[ref, ref + 0.01]), target_z=np.exp(-pop_target),
                      reference_z=np.exp(-np.c_[pop_ref, pop_ref + 0.01]), offline_a=1.0,
                      n_tokens_x=np.full(2 * n, 4))
    scores = membership_scores(_losses(target), rmia=sig)
    member = np.r_[np.ones(n, bool), np.zeros(n, bool)]
    assert roc_auc_score(member, scores["loss"]) < 0.1  # LOSS calls the easy non-members members
    assert roc_auc_score(member, scores["rmia"]) > 0.9


def test_reference_split_is_seeded_and_independent():
    people = [f"p{i}" for i in range(30)]
    s = reference_split(people, 3, seed=4)
    assert s == reference_split(people, 3, seed=4) and s != reference_split(people, 3, seed=5)
    assert len(s.training) == 3
    for half in s.training:
        assert set(half) <= set(people) and len(half) == 15
    # independent halves: no reference model's half is another's complement (tuning a needs that)
    assert all(set(s.training[i]) != set(people) - set(s.training[j]) for i in range(3) for j in range(3))
    assert all(len(h) == 4 for h in reference_split(people, 2, seed=0, n_train=4).training)  # the members' count
    with pytest.raises(ToolkitError, match="at least 2"):
        reference_split(["a"], 2, seed=0)


@pytest.mark.usefixtures("one_thread")
def test_battery_runs_rmia_end_to_end_with_tiny_random_models(tmp_path):
    docs = notes(24, 12)
    texts = [d.text for d in docs]
    tok = train_tokenizer(texts * 3, "clm", 300)
    cfg = TinyModelConfig(kind="clm", hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64,
                          max_length=64)

    def model(seed):
        import torch

        torch.manual_seed(seed)
        return init_model(tok, cfg).eval()

    target, refs = model(0), [(model(1), tok), (model(2), tok)]
    members = Corpus([d for d in docs[:16] if int(d.person_id[1:]) < 4])
    nonmembers = Corpus([d for d in docs[:16] if int(d.person_id[1:]) >= 4])
    population = texts[16:]
    rmia = RMIAReferences(models=refs, population=population, tune_texts=texts[16:24],
                          tune_in=np.c_[np.arange(8) % 2 == 0, np.arange(8) % 2 == 1])
    res = run_battery(target, tok, members, nonmembers, rmia=rmia, window=64, n_bootstrap=20, progress=False)
    assert "rmia" in res.reports and res.scores["rmia"].between(0, 1).all()
    meta = res.to_json()["rmia"]
    assert meta["n_references"] == 2 and meta["n_population"] == 8 and meta["offline_a_tuned"]
    assert meta["offline_a"] in [round(x, 1) for x in np.arange(0, 1.1, 0.1)]
    res.save(tmp_path)
    saved = json.loads((tmp_path / "attacks.json").read_text())
    assert set(saved["attacks"]) >= {"loss", "rmia"} and saved["attacks"]["rmia"]["tpr_at_fpr"]
    # the same population and references with a fixed a: the scores follow the formula on the documents' likelihoods
    fixed = run_battery(target, tok, members, nonmembers, rmia=RMIAReferences(models=refs, population=population,
                                                                             offline_a=0.3),
                        window=64, n_bootstrap=0, progress=False, unit="document")
    from toolkit.audit.losses import token_losses

    def p(m, t):
        return np.exp(-token_losses(m, tok, t, window=64, moments=False, progress=False).mean_loss())

    x = [d.text for d in list(members) + list(nonmembers)]
    expect = _brute(p(target, x), np.c_[p(refs[0][0], x), p(refs[1][0], x)], p(target, population),
                    np.c_[p(refs[0][0], population), p(refs[1][0], population)], 0.3)
    np.testing.assert_allclose(fixed.scores["rmia"].to_numpy(), expect, atol=1e-12)
    # no population texts (the pipelines): the non-members are the population, a document against other individuals'
    own = run_battery(target, tok, members, nonmembers, rmia=RMIAReferences(models=refs, offline_a=0.3),
                      window=64, n_bootstrap=0, progress=False, unit="document")
    docs_x = list(members) + list(nonmembers)
    expect = _brute_groups(p(target, x), np.c_[p(refs[0][0], x), p(refs[1][0], x)], 0.3,
                           np.r_[np.zeros(len(members), bool), np.ones(len(nonmembers), bool)],
                           [d.person_id for d in docs_x])
    np.testing.assert_allclose(own.scores["rmia"].to_numpy(), expect, atol=1e-12)
    assert own.to_json()["rmia"]["n_population"] == len(nonmembers)
    assert "non-members" in own.to_json()["rmia"]["population"]


def test_offline_a_outside_the_unit_interval_is_a_config_error():
    from types import SimpleNamespace

    from toolkit.pipelines.reference_models import run_reference_models

    for bad in (1.5, -0.1, "half", True):
        cfg = SimpleNamespace(source="x.yaml", audit=SimpleNamespace(attacks=SimpleNamespace(
            rmia_references=2, rmia_offline_a=bad)))
        with pytest.raises(ToolkitError, match=r"x.yaml: audit.attacks.rmia_offline_a"):
            run_reference_models(cfg, None, None, public=None, base=None, base_key="k", public_fingerprint=None)
    cfg.audit.attacks.rmia_offline_a = 0.5  # valid, and no public split: no reference models (no rmia)
    assert run_reference_models(cfg, None, None, public=None, base=None, base_key="k", public_fingerprint=None) is None
