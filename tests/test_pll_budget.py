"""Budgeted pseudo-log-likelihood (toolkit.audit.pll, methods.md §10) and Min-K%++ on masked models: drawn positions
paired across models and runs, exact when the budget covers the window, unbiased for the mean loss, one-line errors
for a bad budget; masked Min-K%++ against a brute-force transcription of its formula."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from toolkit.audit.attacks import ATTACKS, run_battery
from toolkit.audit.losses import token_losses
from toolkit.audit.pll import check_budget, draw_positions, strided_groups
from toolkit.config import load_profile
from toolkit.config.experiment import experiment_from_dict, load_experiment
from toolkit.corpus import Corpus, make_document
from toolkit.errors import ToolkitError
from toolkit.models import TinyModelConfig, init_model, train_tokenizer

WORDS = "patient doctor nurse took aspirin insulin morning evening pain knee walked rested at home".split()
TINY = dict(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, max_length=64)


def _texts(n: int = 8, words: int = 30) -> list[str]:
    rng = np.random.default_rng(1)
    return [f"Note {i}: " + " ".join(rng.choice(WORDS, words - i)) + "." for i in range(n)]


TEXTS = _texts()
pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def tok():
    return train_tokenizer(TEXTS * 3, "mlm", 200)


@pytest.fixture(scope="module")
def berts(tok):
    """Two different tiny BERTs (other seeds) sharing the tokenizer."""
    return [init_model(tok, TinyModelConfig(kind="mlm", **TINY), seed=s).eval() for s in (0, 1)]


def test_positions_are_paired_across_models_orders_and_runs(tok, berts):
    a, b = berts
    tl = [token_losses(m, tok, TEXTS, window=48, pll_positions=6, pll_seed=3, progress=False) for m in (a, b)]
    again = token_losses(a, tok, TEXTS[::-1], window=48, pll_positions=6, pll_seed=3, progress=False)
    other = token_losses(a, tok, TEXTS, window=48, pll_positions=6, pll_seed=4, progress=False)
    exact = token_losses(a, tok, TEXTS, window=48, progress=False)
    assert tl[0].meta["pll"] == {"estimator": "budgeted", "positions": 6, "seed": 3}
    assert exact.meta["pll"] == {"estimator": "exact", "positions": "all"}
    for i in range(len(TEXTS)):
        assert tl[0].losses[i].size == 6 < exact.losses[i].size
        np.testing.assert_array_equal(tl[0].offsets[i], tl[1].offsets[i])           # the same positions, model b
        np.testing.assert_array_equal(tl[0].offsets[i], again.offsets[-1 - i])      # another order, another run
        assert not np.allclose(tl[0].losses[i], tl[1].losses[i])                    # ... scored by other weights
        # a subsample of the exact per-position losses (one per stratum of the window)
        idx = np.searchsorted(exact.offsets[i][:, 0], tl[0].offsets[i][:, 0])
        np.testing.assert_allclose(tl[0].losses[i], exact.losses[i][idx], atol=1e-6)
        n = exact.losses[i].size
        j = np.arange(6)
        assert np.all((np.floor(j * n / 6) <= idx) & (idx < (j + 1) * n / 6))
    assert any(not np.array_equal(x, y) for x, y in zip(tl[0].offsets, other.offsets))  # another seed: other draws


def test_budget_covering_the_window_is_exact(tok, berts):
    exact = token_losses(berts[0], tok, TEXTS, window=48, progress=False)
    full = token_losses(berts[0], tok, TEXTS, window=48, pll_positions=48, pll_seed=7, progress=False)
    for a, b, ma, mb in zip(exact.losses, full.losses, exact.mu, full.mu):
        np.testing.assert_allclose(b, a, atol=1e-6)
        np.testing.assert_allclose(mb, ma, atol=1e-6)
    assert check_budget("all") is None and check_budget(None) is None and check_budget(16) == 16


def test_budgeted_mean_is_unbiased(tok, berts):
    """E[mean over the drawn positions] = exact mean: averaged over R seeds, within 4 standard errors (the spread of
    the budgeted means over the seeds); and each position is drawn with probability N/n."""
    exact = token_losses(berts[0], tok, TEXTS[:1], window=64, progress=False)
    losses = exact.losses[0]
    n, budget, runs = losses.size, 7, 3000
    draws = [draw_positions(exact.token_ids[0], budget, seed) for seed in range(runs)]
    assert all(d.size == budget and np.all(np.diff(d) >= 1) and d[-1] < n for d in draws)
    means = np.array([losses[d].mean() for d in draws])
    assert abs(means.mean() - losses.mean()) < 4 * means.std(ddof=1) / math.sqrt(runs)
    freq = np.bincount(np.concatenate(draws), minlength=n) / runs
    p = budget / n
    assert np.all(np.abs(freq - p) < 4 * math.sqrt(p * (1 - p) / runs))
    assert means.std() > 0  # the estimator does vary with the seed (the checks above are not vacuous)


def test_bad_budget_is_a_one_line_error(tmp_path, tok, berts):
    for bad in (0, -3, "some", 2.5, True):
        with pytest.raises(ToolkitError, match=r"^pll_positions: must be 'all' or an integer >= 1, got ") as e:
            check_budget(bad)
        assert "\n" not in str(e.value)
    with pytest.raises(ToolkitError, match="pll_positions"):
        token_losses(berts[0], tok, TEXTS[:1], pll_positions=0, progress=False)
    cfg = load_experiment("cpu_masked")
    raw = {"name": "x", "profile": "cpu", "corpus": {"path": cfg.corpus.path}, "model": {"kind": "mlm"},
           "training": {"strategies": ["mlm"]}}
    for bad in (0, "some"):
        with pytest.raises(ToolkitError) as e:
            experiment_from_dict({**raw, "audit": {"attacks": {"pll_positions": bad}}}, source=tmp_path / "x.yaml")
        msg = str(e.value)
        assert msg.startswith(f"{tmp_path / 'x.yaml'}: audit.attacks.pll_positions: must be") and "\n" not in msg
    # the default is the profile's (named in the attack steps' keys); a config overrides it
    assert cfg.audit.attacks.pll_positions == load_profile("cpu").pll_positions
    assert load_profile("paper").pll_positions == "all"
    ok = experiment_from_dict({**raw, "audit": {"attacks": {"pll_positions": "all"}}}, source=tmp_path / "x.yaml")
    assert ok.audit.attacks.pll_positions == "all"
    prof = tmp_path / "p.yaml"
    prof.write_text("name: p\npll_positions: some\n", encoding="utf-8")
    with pytest.raises(ToolkitError, match=rf"^{prof}: pll_positions: must be"):
        load_profile(prof)


def _brute_min_k_pp(model, tok, text: str, k: float = 0.2, window: int = 64) -> float:
    """Min-K%++ of a masked model written out: each position masked alone, one forward, log-softmax, z-score."""
    enc = tok(text, truncation=True, max_length=window, return_special_tokens_mask=True)
    x = torch.tensor(enc["input_ids"])[None]
    z = []
    for t in np.flatnonzero(~np.array(enc["special_tokens_mask"], bool)):
        y = x.clone()
        y[0, t] = tok.mask_token_id
        with torch.no_grad():
            lp = torch.log_softmax(model(input_ids=y).logits[0, t].double(), -1)
        p = lp.exp()
        mu = (p * lp).sum()
        sigma = ((p * lp ** 2).sum() - mu ** 2).sqrt()
        z.append(((lp[x[0, t]] - mu) / sigma).item())
    return float(np.sort(z)[:math.ceil(k * len(z))].mean())


def test_min_k_plus_plus_on_a_masked_model_against_brute_force(tok):
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(0)  # a wide initialisation: peaked predictive distributions, sigma far from 0
    model = BertForMaskedLM(BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                       intermediate_size=64, max_position_embeddings=64, initializer_range=0.5,
                                       pad_token_id=tok.pad_token_id)).eval()
    texts = TEXTS[:4]
    tl = token_losses(model, tok, texts, window=64, batch_size=1, progress=False)
    got = ATTACKS["min_k_plus_plus"](tl)
    for i, text in enumerate(texts):
        assert got[i] == pytest.approx(_brute_min_k_pp(model, tok, text), abs=1e-6)
    assert np.isfinite(got).all() and np.ptp(got) > 1e-3


def test_battery_names_the_estimator_and_runs_min_k_plus_plus_on_masked_models(tok, berts):
    docs = [make_document(f"d{i}", f"p{i}", t) for i, t in enumerate(TEXTS)]
    members, nonmembers = Corpus(docs[:4]), Corpus(docs[4:])
    res = run_battery(berts[0], tok, members, nonmembers, reference=(berts[1], tok), window=48, n_bootstrap=20,
                      pll_positions=5, seed=2, progress=False)
    js = res.to_json()
    assert js["scoring"] == {"kind": "mlm", "estimator": "budgeted", "positions": 5, "seed": 2}
    assert "min_k_plus_plus" in js["attacks"]
    exact = run_battery(berts[0], tok, members, nonmembers, window=48, n_bootstrap=20, progress=False)
    assert exact.to_json()["scoring"] == {"kind": "mlm", "estimator": "exact", "positions": "all"}


def test_report_method_line_names_the_estimator():
    from toolkit.report.attack_sections import scoring_line

    budgeted = scoring_line({"scoring": {"kind": "mlm", "estimator": "budgeted", "positions": 32, "seed": 0}})
    assert "budgeted pseudo-log-likelihood, 32 positions per window" in budgeted
    assert "exact pseudo-log-likelihood" in scoring_line({"scoring": {"kind": "mlm", "estimator": "exact"}})
    assert "exact log-likelihood" in scoring_line({"scoring": {"kind": "clm", "estimator": "exact"}})
    assert scoring_line({}) == ""  # attacks.json of a run made before the field: no claim


# ---- strided copies (pll_copies) -------------------------------------------------------------------------------------


def test_strided_groups_score_every_position_once_k_apart():
    for n, k in ((1, 4), (7, 3), (20, 4), (33, 32), (10, 10), (5, 64)):
        groups = strided_groups(n, k)
        assert sorted(np.concatenate(groups).tolist()) == list(range(n))           # every position, exactly once
        assert len(groups) == min(n, k)
        assert all((np.diff(g) == k).all() for g in groups if g.size > 1)           # masked together: K apart


def test_strided_losses_against_brute_force_and_exact(tok, berts):
    model = berts[0]
    k = 3
    got = token_losses(model, tok, TEXTS[:3], window=48, pll_copies=k, progress=False)
    assert got.meta["pll"] == {"estimator": "strided", "copies": k, "positions": "all"}
    exact = token_losses(model, tok, TEXTS[:3], window=48, progress=False)
    for i, text in enumerate(TEXTS[:3]):
        enc = tok(text, truncation=True, max_length=48, return_special_tokens_mask=True)
        x = torch.tensor(enc["input_ids"])[None]
        pos = np.flatnonzero(~np.array(enc["special_tokens_mask"], dtype=bool))
        want = np.empty(pos.size)
        for j in range(k):                                    # copy j: every k-th scorable position from j, masked
            sel = pos[j::k]
            y = x.clone()
            y[0, sel] = tok.mask_token_id
            with torch.no_grad():
                lp = torch.log_softmax(model(input_ids=y).logits[0].double(), -1)
            want[j::k] = -lp[sel, x[0, sel]].numpy()
        np.testing.assert_allclose(got.losses[i], want, atol=1e-6)
        np.testing.assert_array_equal(got.offsets[i], exact.offsets[i])             # every position, in order
        assert not np.allclose(got.losses[i], exact.losses[i])                      # an approximation, not exact
    wide = token_losses(model, tok, TEXTS[:3], window=48, pll_copies=64, progress=False)   # K >= n: exact
    for a, b in zip(wide.losses, exact.losses):
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_one_estimator_at_a_time(tok, berts):
    with pytest.raises(ToolkitError, match="not both"):
        token_losses(berts[0], tok, TEXTS[:1], pll_positions=4, pll_copies=4, progress=False)
    with pytest.raises(ToolkitError, match="pll_copies"):
        token_losses(berts[0], tok, TEXTS[:1], pll_copies=0, progress=False)
    assert load_profile("cpu").pll_copies == 32 and load_profile("paper").pll_copies == "all"


def _brute_strided_pll(model, tok, text: str, k: int) -> float:
    """Strided pseudo-log-likelihood of a whole text, by hand: copy j masks every k-th scorable token from j."""
    enc = tok(text, return_special_tokens_mask=True)
    x = torch.tensor(enc["input_ids"])[None]
    pos = np.flatnonzero(~np.array(enc["special_tokens_mask"], dtype=bool))
    total = 0.0
    for j in range(min(k, pos.size)):
        sel = pos[j::k]
        y = x.clone()
        y[0, sel] = tok.mask_token_id
        with torch.no_grad():
            lp = torch.log_softmax(model(input_ids=y).logits[0].double(), -1)
        total += float(lp[sel, x[0, sel]].sum())
    return total


def test_pii_inference_and_canaries_follow_the_strided_estimator(tok, berts, monkeypatch):
    """A masked audit's PII inference and canaries take the membership estimator (issue 37): the candidates' scores
    are the strided pseudo-log-likelihood computed by hand, the estimator is recorded, and K ≥ the window is exact."""
    from toolkit.audit.attacks import exposure, make_canaries, pii_inference

    model, k = berts[0], 3
    names = ["Ana Lopez", "Bo Chen", "Cy Dorn", "Di Evans", "Ed Fox", "Flo Grant"]
    docs = [make_document(f"d{i}", f"p{i}", f"Note {i}: {n} took aspirin in the morning and rested at home.",
                          [(len(f"Note {i}: "), len(f"Note {i}: ") + len(n), "NAME")])
            for i, n in enumerate(names)]
    corpus = Corpus(docs)
    pos = pd.DataFrame([{"doc_id": d.doc_id, "start": s.start, "end": s.end, "category": "NAME",
                         "term": d.text[s.start:s.end]} for d in docs for s in d.spans])
    seen: list[str] = []

    def by_hand(texts):
        seen.extend(texts)
        return np.array([_brute_strided_pll(model, tok, t, k) for t in texts])

    import importlib

    module = importlib.import_module("toolkit.audit.attacks.pii_inference")  # the package exports the function

    calls = []
    real = module.sequence_log_likelihoods

    def spy(*args, **kwargs):
        calls.append((list(args[2]), real(*args, **kwargs)))
        return calls[-1][1]

    monkeypatch.setattr(module, "sequence_log_likelihoods", spy)
    kw = dict(window=40, n_candidates=4, seed=1, progress=False, return_table=True)
    got, t_got = pii_inference(model, tok, corpus, pos, pll_copies=k, **kw)
    want, t_want = pii_inference(model, tok, corpus, pos, scorer=by_hand, **kw)
    assert len(seen) == t_got["n_candidates"].sum() and got["pll"] == {"estimator": "strided", "copies": k,
                                                                       "positions": "all"}
    assert calls[0][0] == seen                                                  # the same windows, scored alike
    hand = [_brute_strided_pll(model, tok, t, k) for t in seen[:8]]
    np.testing.assert_allclose(calls[0][1][:8], hand, atol=1e-4)
    np.testing.assert_array_equal(t_got["top1"], t_want["top1"])
    assert got["overall"]["top1"] == pytest.approx(want["overall"]["top1"])
    exact, t_exact = pii_inference(model, tok, corpus, pos, **kw)
    wide, t_wide = pii_inference(model, tok, corpus, pos, pll_copies=64, **kw)   # K >= every window: exact
    assert exact["pll"] == {"estimator": "exact", "positions": "all"}
    np.testing.assert_array_equal(t_wide["top1"], t_exact["top1"])
    # canaries: the same estimator on each record
    can = make_canaries(2, seed=4)
    recs = []
    ex = exposure(model, tok, can, n_reference=12, pll_copies=k, progress=False)
    hand = exposure(model, tok, can, n_reference=12, progress=False,
                    scorer=lambda texts: (recs.extend(texts), by_hand(texts))[1])
    assert len(recs) == 2 * 13
    np.testing.assert_allclose(ex["log_likelihood"], hand["log_likelihood"], atol=1e-4)
    np.testing.assert_allclose(ex["exposure"], hand["exposure"], atol=1e-3)


# ---- PII inference's and canaries' own estimator (pii_pll_copies) ----------------------------------------------------
def test_pii_estimator_setting_follows_membership_unless_given(tmp_path):
    """``audit.attacks.pii_pll_copies``: the profile's only where membership takes the profile's estimator too; a config
    that sets the membership estimator (e.g. exact, the benchmark's other side) gets the same for PII inference."""
    cfg = lambda over=None: load_experiment("configs/cpu_masked.yaml", over).audit.attacks  # noqa: E731
    prof = load_profile("cpu")
    a = cfg()
    assert (a.pll_copies, a.pii_pll_copies) == (prof.pll_copies, prof.pii_pll_copies or prof.pll_copies)
    assert (cfg({"audit.attacks.pll_copies": "all"}).pii_pll_copies, cfg({"audit.attacks.pll_copies": 8})
            .pii_pll_copies) == ("all", 8)
    assert cfg({"audit.attacks.pii_pll_copies": 24}).pii_pll_copies == 24
    assert cfg({"audit.attacks.pii_pll_copies": "all"}).pll_copies == prof.pll_copies
    with pytest.raises(ToolkitError, match="pii_pll_copies"):
        cfg({"audit.attacks.pii_pll_copies": 0})
    bad = tmp_path / "p.yaml"
    bad.write_text("name: p\npii_pll_copies: -3\n", encoding="utf-8")
    with pytest.raises(ToolkitError, match="pii_pll_copies"):
        load_profile(bad)
    assert load_profile("paper").pii_pll_copies is None


def test_attack_step_scores_pii_and_canaries_with_their_own_estimator(tmp_path, monkeypatch):
    """The attack step passes ``pll_copies`` to the membership battery and ``pii_pll_copies`` to PII inference and
    the canaries' exposure (spies record what each is given; the step stops at the canaries)."""
    import toolkit.audit.attacks as attacks
    from toolkit.config.sections import AttacksSection
    import toolkit.audit.model_audit as model_audit

    seen = {}

    class Stop(Exception):
        pass

    class Battery:
        meta: dict = {}

    def record(name, result=None):
        def f(*args, **kwargs):
            seen[name] = kwargs.get("pll_copies")
            if result is Stop:
                raise Stop
            return result
        return f

    monkeypatch.setattr(model_audit, "load_models", lambda *a, **k: ((None, None), None))
    monkeypatch.setattr(attacks, "canary_ranges", lambda *a, **k: None)
    monkeypatch.setattr(attacks, "run_battery", record("battery", Battery()))
    monkeypatch.setattr(attacks, "pii_inference", record("pii", {}))
    monkeypatch.setattr(attacks, "exposure", record("exposure", Stop))
    docs = [make_document("d0", "p0", "Ana took aspirin.", []), make_document("d1", "p1", "Bo rested.", [])]
    for membership, pii, want in ((16, 32, (16, 32)), (8, None, (8, 8)), ("all", "all", ("all", "all"))):
        seen.clear()
        with pytest.raises(Stop):
            model_audit.audit_model(
                "m", Corpus(docs[:1]), Corpus(docs[1:]), {"spans": None, "positions": None},
                context=model_audit.AuditContext(canaries=pd.DataFrame({"canary_id": ["c"]})),
                settings=model_audit.AuditSettings(AttacksSection(pll_copies=membership, pii_pll_copies=pii)))
        assert seen == {"battery": want[0], "pii": want[1], "exposure": want[1]}
