"""Attack battery (methods.md §10): token losses against direct computations, attack scores against hand numbers,
ROC against scikit-learn, exposure against exact ranks, PII inference against a brute-force recount (the verdict
rules of §11 are tested in tests/test_verdict.py)."""

from __future__ import annotations

import json
import math
import zlib

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.metrics import roc_auc_score

from toolkit.audit.attacks import (ATTACKS, battery_from_scores, exposure, exposure_from_samples, exposure_summary,
                                   insert_canaries, make_canaries, membership_scores, memorisation_scores,
                                   occurrence_window, person_scores, pii_inference, run_battery)
from toolkit.audit.losses import TokenLosses, leading_token, load_audit_model, span_log_likelihoods, token_losses
from toolkit.corpus import Corpus, make_document
from toolkit.models import TinyModelConfig, init_model, train_tokenizer

from _attack_fixtures import NAMES, notes

TINY = dict(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, max_length=64)


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def _docs(n: int = 16, words: int = 20) -> list:
    return notes(n, words)


TEXTS = [d.text for d in _docs()]


@pytest.fixture(scope="module")
def gpt2():
    tok = train_tokenizer(TEXTS * 3, "clm", 300)
    return init_model(tok, TinyModelConfig(kind="clm", **TINY)).eval(), tok


@pytest.fixture(scope="module")
def bert():
    tok = train_tokenizer(TEXTS * 3, "mlm", 300)
    return init_model(tok, TinyModelConfig(kind="mlm", **TINY)).eval(), tok


def _bpe_tokenizer(template: str):
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    t = Tokenizer(models.BPE())
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    t.decoder = decoders.ByteLevel()
    t.train_from_iterator(TEXTS * 3, trainers.BpeTrainer(vocab_size=300, special_tokens=["<s>", "<pad>", "</s>",
                                                                                         "<unk>", "<mask>"],
                                                         initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    bos, eos = ("<s>", t.token_to_id("<s>")), ("</s>", t.token_to_id("</s>"))
    t.post_processor = (processors.RobertaProcessing(eos, bos, trim_offsets=False) if template == "roberta"
                        else processors.TemplateProcessing(single="<s> $A", special_tokens=[bos]))
    return PreTrainedTokenizerFast(tokenizer_object=t, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                   pad_token="<pad>", cls_token="<s>", sep_token="</s>",
                                   mask_token=AddedToken("<mask>", lstrip=True, special=True))


def _naive_pll(model, tok, text, window=64):
    ids = tok(text, truncation=True, max_length=window, return_special_tokens_mask=True)
    x = torch.tensor(ids["input_ids"])[None]
    out = []
    for t in np.flatnonzero(~np.array(ids["special_tokens_mask"], bool)):
        y = x.clone()
        y[0, t] = tok.mask_token_id
        with torch.no_grad():
            lp = torch.log_softmax(model(input_ids=y).logits[0, t].float(), -1)
        out.append(-lp[x[0, t]].item())
    return np.array(out)


def _direct_causal(model, tok, text, window=64):
    """``(rows, targets)``: the log-probability rows of the scored tokens and their ids, computed by hand as
    token_losses scores them — a text without a special start (GPT-2 style) has its first token predicted from the
    BOS alone (one forward pass of the BOS), every later one from the plain sequence; a text that starts with the
    tokenizer's own BOS (Llama) has it as context only."""
    ids = tok(text, truncation=True, max_length=window)["input_ids"]
    with torch.no_grad():
        lp = torch.log_softmax(model(input_ids=torch.tensor(ids)[None]).logits[0].double(), -1).numpy()
        lead = leading_token(tok)
        if lead is None:
            return lp[:-1], np.array(ids[1:])
        lp0 = torch.log_softmax(model(input_ids=torch.tensor([[lead]])).logits[0, -1].double(), -1).numpy()
    return np.vstack([lp0[None], lp[:-1]]), np.array(ids)


# ---- token losses --------------------------------------------------------------------------------------------------


def test_causal_losses_match_direct_forward(gpt2):
    model, tok = gpt2
    texts = TEXTS[:5] + ["Mr Eaton", "x"]
    tl = token_losses(model, tok, texts, batch_size=3, progress=False)   # padded batches of unequal lengths
    for i, text in enumerate(texts):
        lp, tg = _direct_causal(model, tok, text)
        assert tl.losses[i].size == len(tg) == min(64, len(tok(text)["input_ids"]))  # every content token, the first too
        np.testing.assert_allclose(tl.losses[i], -lp[np.arange(len(tg)), tg], atol=1e-5)
        p = np.exp(lp)
        mu = (p * lp).sum(1)
        np.testing.assert_allclose(tl.mu[i], mu, atol=1e-5)
        np.testing.assert_allclose(tl.sigma[i], np.sqrt((p * lp ** 2).sum(1) - mu ** 2), atol=1e-4)
    cut = token_losses(model, tok, texts[:1], window=8, progress=False)    # the window holds no BOS: 8 content tokens
    assert cut.losses[0].size == 8 and cut.n_truncated == 1 and texts[0].startswith(cut.window_texts[0])


@pytest.mark.parametrize("arch", ["bert", "roberta"])
def test_masked_pll_matches_naive_loop(bert, arch):
    if arch == "bert":
        model, tok = bert
    else:
        from transformers import RobertaConfig, RobertaForMaskedLM

        tok = _bpe_tokenizer("roberta")
        torch.manual_seed(0)
        model = RobertaForMaskedLM(RobertaConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=1,
                                                 num_attention_heads=2, intermediate_size=64,
                                                 max_position_embeddings=80, pad_token_id=tok.pad_token_id)).eval()
    texts = TEXTS[:3] + ["Mr Eaton left."]
    tl = token_losses(model, tok, texts, window=64, batch_size=7, progress=False)
    assert [m.shape for m in tl.mu] == [a.shape for a in tl.losses]  # Min-K%++ moments (tests/test_pll_budget.py)
    for i, text in enumerate(texts):
        np.testing.assert_allclose(tl.losses[i], _naive_pll(model, tok, text), atol=1e-5)


def test_tiny_llama_with_bos():
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = _bpe_tokenizer("llama")
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                                         max_position_embeddings=64, pad_token_id=tok.pad_token_id)).eval()
    tl = token_losses(model, tok, TEXTS[:2], progress=False)
    for i, text in enumerate(TEXTS[:2]):
        lp, tg = _direct_causal(model, tok, text)
        assert tok(text)["input_ids"][0] == tok.bos_token_id and tl.losses[i].size == len(tg)  # BOS: context only
        np.testing.assert_allclose(tl.losses[i], -lp[np.arange(len(tg)), tg], atol=1e-5)


def test_oom_halves_batch(gpt2, monkeypatch):
    model, tok = gpt2
    ref = token_losses(model, tok, TEXTS[:6], batch_size=6, progress=False)
    forward, sizes = model.forward, []

    def flaky(*a, **kw):
        sizes.append(kw["input_ids"].shape[0])
        if sizes[-1] > 2:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return forward(*a, **kw)

    monkeypatch.setattr(model, "forward", flaky)
    got = token_losses(model, tok, TEXTS[:6], batch_size=6, progress=False)
    assert sizes[:3] == [6, 3, 1]
    for a, b in zip(ref.losses, got.losses):
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_progress_bar_label(bert, capsys):
    model, tok = bert
    token_losses(model, tok, TEXTS[:1], progress=True, label="membership")
    assert "membership PLL · BertForMaskedLM" in capsys.readouterr().err


def test_load_audit_model_dtype(gpt2, tmp_path):
    model, tok = gpt2
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    m16, t16 = load_audit_model(tmp_path, dtype="bf16", device_map="auto")
    assert next(m16.parameters()).dtype == torch.bfloat16
    a = token_losses(model, tok, TEXTS[:2], progress=False).mean_loss()
    b = token_losses(m16, t16, TEXTS[:2], progress=False).mean_loss()
    np.testing.assert_allclose(a, b, rtol=0.02)


def test_losses_of_a_saved_model_are_computed_once_per_process(bert, gpt2, tmp_path):
    """The reference model of every checkpoint is the same base scoring the same windows: its losses are reused,
    the very arrays, and recomputed when the model's files change or for a model without files."""
    for name, (model, tok) in (("mlm", bert), ("clm", gpt2)):
        d = tmp_path / name
        model.save_pretrained(d)
        tok.save_pretrained(d)
        m, t = load_audit_model(d)
        first = token_losses(m, t, TEXTS[:4], progress=False)
        calls = []
        m.get_input_embeddings().register_forward_pre_hook(lambda *a: calls.append(1))  # any forward pass
        again = token_losses(m, t, [w for w in first.window_texts], progress=False)  # the same token ids
        assert not calls and all(a is b for a, b in zip(first.losses, again.losses))
        if name == "clm":  # losses with Min-K%++ moments serve a request without them, not the other way round
            assert token_losses(m, t, TEXTS[:4], moments=False, progress=False).mu is None and not calls
        with pytest.raises(ValueError):
            again.losses[0][0] = 0.0  # shared arrays are read-only
        other = token_losses(m, t, TEXTS[:3], progress=False)  # other texts: computed
        assert calls
        calls.clear()
        m2, t2 = load_audit_model(d)  # loaded again from the same files: reused
        assert token_losses(m2, t2, TEXTS[:3], progress=False).losses[0] is other.losses[0]
        model.save_pretrained(d)  # the files are written again: computed afresh
        m3, t3 = load_audit_model(d)
        assert token_losses(m3, t3, TEXTS[:3], progress=False).losses[0] is not other.losses[0]
        np.testing.assert_allclose(token_losses(model, tok, TEXTS[:3], progress=False).losses[0], other.losses[0],
                                   rtol=1e-5)  # the in-memory model (no files): computed, the same losses
        # identifier spans scored in their slot (the memorisation attack's reference): masked, the span's tokens are
        # masked together, a computation of its own, kept per spans; causal, read off the token losses kept above
        spans = [(3, 9)] * 3
        m3.get_input_embeddings().register_forward_pre_hook(lambda *a: calls.append(1))
        calls.clear()
        ll = span_log_likelihoods(m3, t3, TEXTS[:3], spans, progress=False)
        assert bool(calls) == (name == "mlm")
        calls.clear()
        assert np.array_equal(span_log_likelihoods(m3, t3, TEXTS[:3], spans, progress=False), ll, equal_nan=True)
        assert not calls
        span_log_likelihoods(m3, t3, TEXTS[:3], [(0, 2)] * 3, progress=False)  # other spans
        assert bool(calls) == (name == "mlm")


# ---- attack scores --------------------------------------------------------------------------------------------------


def _fixed_losses(mu=None, sigma=None) -> TokenLosses:
    losses = [np.array([1.0, 2.0, 3.0, 4.0, 5.0]), np.array([0.5, 4.0])]
    return TokenLosses("clm", losses, [np.zeros(a.size, int) for a in losses], [np.zeros((a.size, 2)) for a in losses],
                       ["aaaa bbbb aaaa bbbb", "xyz"], mu=mu, sigma=sigma)


def test_zlib_and_min_k_hand_computed():
    tl = _fixed_losses()
    z = ATTACKS["zlib"](tl)
    assert z[0] == pytest.approx(-3.0 / len(zlib.compress(b"aaaa bbbb aaaa bbbb")))
    assert z[1] == pytest.approx(-2.25 / len(zlib.compress(b"xyz")))
    np.testing.assert_allclose(ATTACKS["min_k"](tl), [-5.0, -4.0])            # ceil(1.0) = 1, ceil(0.4) = 1
    np.testing.assert_allclose(ATTACKS["min_k"](tl, k=0.5), [-4.0, -4.0])     # ceil(2.5) = 3, ceil(1.0) = 1
    np.testing.assert_allclose(ATTACKS["loss"](tl), [-3.0, -2.25])
    ref = TokenLosses("clm", [np.array([4.0]), np.array([1.0])], [], [], ["", ""])
    np.testing.assert_allclose(ATTACKS["reference"](tl, reference_losses=ref), [1.0, -1.25])
    assert list(membership_scores(tl, reference_losses=ref).columns) == ["loss", "zlib", "min_k", "reference"]


def test_min_k_plus_plus_against_numpy(gpt2):
    model, tok = gpt2
    tl = token_losses(model, tok, TEXTS[:3], progress=False)
    got = ATTACKS["min_k_plus_plus"](tl)
    for i, text in enumerate(TEXTS[:3]):
        lp, tg = _direct_causal(model, tok, text)
        mu = (np.exp(lp) * lp).sum(1)
        sd = np.sqrt((np.exp(lp) * lp ** 2).sum(1) - mu ** 2)
        z = (lp[np.arange(len(tg)), tg] - mu) / sd
        assert got[i] == pytest.approx(np.sort(z)[:math.ceil(0.2 * z.size)].mean(), abs=1e-4)


def test_person_scores_mean():
    doc = pd.DataFrame({"loss": [1.0, 3.0, 5.0, np.nan]})
    out = person_scores(doc, ["b", "a", "b", "a"])
    assert list(out.index) == ["b", "a"] and out["loss"].tolist() == [3.0, 3.0]


# ---- battery --------------------------------------------------------------------------------------------------------


def test_battery_keeps_the_windows_its_attacks_read_in_memory_only(gpt2, tmp_path):
    """``BatteryResult.window_texts``: the texts the attacks scored, in ``doc_scores``' order — each document's
    window with its excluded ranges cut out, the very texts the blind baseline was fitted on (its scores recomputed
    from them) — and never in a file the result writes."""
    from toolkit.audit.attacks.blind import blind_score

    model, tok = gpt2
    docs = _docs(16)
    members = Corpus([d for d in docs if int(d.person_id[1:]) < 4])
    nonmembers = Corpus([d for d in docs if int(d.person_id[1:]) >= 4])
    first = docs[0]
    cut = (5, 15)
    res = run_battery(model, tok, members, nonmembers, window=32, progress=False, exclude={first.doc_id: [cut]})
    d = res.doc_scores
    assert len(res.window_texts) == len(d)
    by_id = {x.doc_id: x.text for x in docs}
    for doc_id, text in zip(d["doc_id"], res.window_texts):
        whole = by_id[doc_id] if doc_id != first.doc_id else by_id[doc_id][:cut[0]] + by_id[doc_id][cut[1]:]
        assert text and whole.startswith(text)
    labels = [bool(m) for m in d["member"]]
    again = blind_score(res.window_texts, labels, list(d["person_id"]), seed=0)
    ok = d["scoreable"].to_numpy(bool)
    assert np.allclose(again[ok], d["blind"].to_numpy(float)[ok], rtol=0, atol=1e-12)
    written = "".join(p.read_bytes().decode("latin-1") for p in res.save(tmp_path).values())
    assert not any(t in written for t in res.window_texts)
    assert "window_texts" not in repr(res)


def test_battery_roc_matches_sklearn(gpt2, tmp_path):
    model, tok = gpt2
    docs = _docs(16)
    members = Corpus([d for d in docs if int(d.person_id[1:]) < 4])
    nonmembers = Corpus([d for d in docs if int(d.person_id[1:]) >= 4])
    counts = {f"p{i}": i % 3 for i in range(8)}
    res = run_battery(model, tok, members, nonmembers, reference=(model, tok), window=32, progress=False,
                      extra_scores={"identifier_count": counts})
    js = res.to_json()
    assert set(js) == {"unit", "n_members", "n_nonmembers", "reference", "strongest", "attacks", "bootstrap_unit",
                       "reference_normalisation", "n_unscoreable", "unscoreable", "n_excluded_tokens", "scoring",
                       "reference_model_attacks"}
    assert js["scoring"] == {"kind": "clm", "estimator": "exact"}
    # the split check: the reference model (here the model itself) attacked on the same split, by the attacks that
    # need no reference — its AUCs equal the model's own
    assert set(js["reference_model_attacks"]) == {"loss", "zlib", "min_k"}
    for name, rep in js["reference_model_attacks"].items():
        assert rep["auc"] == pytest.approx(js["attacks"][name]["auc"]) and rep["n_members"] == 4
    assert (js["n_members"], js["n_nonmembers"]) == (4, 4)
    # with a reference of the same vocabulary EZ-MIA runs; the blind baseline always (no public split: no DC-PDD, ReCaLL)
    assert set(js["attacks"]) == {"loss", "zlib", "min_k", "min_k_plus_plus", "reference", "ez", "blind",
                                  "identifier_count"}
    for name, rep in js["attacks"].items():
        y, s = res.scores["member"].to_numpy(), res.scores[name].to_numpy()
        assert rep["auc"] == pytest.approx(roc_auc_score(y, s))
        assert rep["auc_ci"][0] <= rep["auc_ci"][1] and rep["tpr_at_fpr"]["0.01"] is None   # 4 non-members
    assert js["strongest"] == max(js["attacks"], key=lambda a: js["attacks"][a]["auc"])
    assert res.scores["reference"].abs().max() < 1e-9                                      # model is its own reference
    paths = res.save(tmp_path)
    assert json.loads(paths["attacks"].read_text()) == json.loads(json.dumps(js))
    assert len(pd.read_parquet(paths["scores"])) == 8 and set(res.roc_curves) == set(js["attacks"])
    doc = run_battery(model, tok, members, nonmembers, unit="document", window=32, progress=False)
    assert doc.n_members == len(members) and "reference" not in doc.reports
    with pytest.raises(ValueError, match="lacks"):
        run_battery(model, tok, members, nonmembers, window=32, progress=False, extra_scores={"x": {"p0": 1}})
    with pytest.raises(ValueError, match="both members"):
        run_battery(model, tok, members, Corpus(list(nonmembers) + [make_document("z", "p0", "Mr x")]),
                    progress=False)


def test_strongest_tie_break_registry_order():
    scores = pd.DataFrame({"loss": [1.0, 0.0], "zlib": [1.0, 0.0]}, index=["a", "b"])
    assert battery_from_scores(scores, [True, False], n_bootstrap=10).strongest == "loss"
    scores["min_k"] = [np.nan, 0.0]                       # no finite member score: the attack is left out
    res = battery_from_scores(scores, [True, False], n_bootstrap=10)
    assert "min_k" not in res.reports and res.meta["n_dropped"]["min_k"] == 1


# ---- canaries and exposure -----------------------------------------------------------------------------------------


def test_exposure_estimator_against_exact_rank():
    from scipy.stats import skewnorm

    rng = np.random.default_rng(0)
    n = 10 ** 6
    pop = skewnorm.rvs(-4, loc=-30, scale=5, size=n, random_state=rng)
    srt = np.sort(pop)
    sample = rng.choice(pop, 10_000, replace=False)
    for q, tol in [(0.5, 0.1), (0.1, 0.1), (0.01, 0.2), (1e-3, 0.4), (1e-5, 1.5)]:
        s = srt[int((1 - q) * n)] + 1e-9
        exact = np.log2(n) - np.log2(1 + (pop > s).sum())
        assert exposure_from_samples(s, sample, n)[0][0] == pytest.approx(exact, abs=tol)


def test_canaries_insert_and_exposure(gpt2):
    can = make_canaries(6, seed=1)
    assert can.equals(make_canaries(6, seed=1)) and can["number"].str.fullmatch(r"\d{8}").all()
    texts = TEXTS[:8]
    new, table = insert_canaries(texts, can, repeats=(1, 4))
    assert texts == TEXTS[:8] and table["repeats"].tolist() == [1, 4] * 3
    for r in table.itertuples():
        assert sum(t.count(r.text) for t in new) == r.repeats
    # a scorer for which the canary's own number is the most likely: top exposure; a scorer of noise: ~1 bit
    best = exposure(None, None, can, n_reference=2000,
                    scorer=lambda t: np.r_[8.0, np.random.default_rng(0).normal(size=len(t) - 1)])
    assert (best["exposure"] >= best.attrs["log2_space"] - 1).all()
    noise = make_canaries(40, seed=2)
    rnd = exposure(None, None, noise, n_reference=2000,
                   scorer=lambda t: np.random.default_rng(len(t) + hash(t[0]) % 997).normal(size=len(t)))
    assert 0.4 < rnd["exposure"].median() < 2.0
    model, tok = gpt2
    real = exposure(model, tok, table.head(2), n_reference=50, progress=False)
    summary = exposure_summary(real)
    assert set(summary["by_repeats"]) == {"1", "4"} and summary["log2_space"] == pytest.approx(8 * np.log2(10))


# ---- PII inference and memorisation ---------------------------------------------------------------------------------


def _positions(docs):
    return pd.DataFrame([{"doc_id": d.doc_id, "start": s.start, "end": s.end, "category": "NAME",
                          "term": d.text[s.start:s.end]} for d in docs for s in d.spans])


def test_pii_inference_brute_force(gpt2):
    model, tok = gpt2
    docs = _docs(16, words=60)
    corpus = Corpus(docs)
    seen: list[str] = []

    def scorer(texts):
        seen.extend(texts)
        return np.array([float(zlib.crc32(t.encode()) % 7) for t in texts])   # fixed, many ties

    out, table = pii_inference(model, tok, corpus, _positions(docs), window=24, n_candidates=5, seed=3,
                               scorer=scorer, reference_scorer=lambda t: np.zeros(len(t)), return_table=True)
    bounds = np.r_[0, np.cumsum(table["n_candidates"])]
    credit = []
    for i, r in enumerate(table.itertuples()):
        s = np.array([zlib.crc32(t.encode()) % 7 for t in seen[bounds[i]:bounds[i + 1]]], float)
        credit.append((s[0] == s.max()) / (s == s.max()).sum())
        others = [n for n in NAMES if n != r.term]                      # the other candidates are other people's
        assert r.term in seen[bounds[i]] and all(sum(n in t for n in others) == 1 for t in seen[bounds[i] + 1:
                                                                                                 bounds[i + 1]])
        assert len(tok(seen[bounds[i]])["input_ids"]) <= 24 - 16 + 2
    assert out["overall"]["top1"] == pytest.approx(np.mean(credit))
    assert out["overall"]["chance"] == pytest.approx(0.2) and out["overall"]["reference_top1"] == pytest.approx(0.2)
    # same seed, same candidates: an oracle scorer that ranks each true window first has top-1 = 1 = 5 x chance
    oracle = pii_inference(model, tok, corpus, _positions(docs), window=24, n_candidates=5, seed=3, progress=False,
                           scorer=lambda ts: np.isin(np.arange(len(ts)), bounds[:-1]).astype(float))
    assert oracle["overall"]["top1"] == 1.0 and oracle["overall"]["ratio_to_chance"] == pytest.approx(5.0)
    capped = pii_inference(model, tok, corpus, _positions(docs), max_occurrences=5, scorer=scorer, progress=False)
    assert capped["n_occurrences"] == 5 and capped["by_category"]["NAME"]["n"] == 5
    real = pii_inference(model, tok, corpus, _positions(docs[:8]), window=24, progress=False)
    assert 0 <= real["overall"]["top1"] <= 1


def test_occurrence_window_and_multi_token_spans(gpt2, bert):
    model, tok = gpt2
    text = TEXTS[0] + " " + TEXTS[1]
    s = text.rindex("Brennan")
    wt, a, b = occurrence_window(text, s, s + 7, tok, 20, slack=4)
    assert wt[a:b] == "Brennan" and len(tok(wt)["input_ids"]) <= 16
    # causal: the span's log-likelihood is the sum over all its tokens
    tl = token_losses(model, tok, [wt], progress=False)
    sel = (tl.offsets[0][:, 0] < b) & (tl.offsets[0][:, 1] > a)
    assert sel.sum() > 1
    got = span_log_likelihoods(model, tok, [wt], [(a, b)], progress=False)
    assert got[0] == pytest.approx(-tl.losses[0][sel].sum())
    # masked: the span's tokens are masked together
    mmodel, mtok = bert
    enc = mtok(wt, return_offsets_mapping=True, return_special_tokens_mask=True)
    offs = np.array(enc["offset_mapping"])
    pos = np.flatnonzero((offs[:, 0] < b) & (offs[:, 1] > a) & ~np.array(enc["special_tokens_mask"], bool))
    x = torch.tensor(enc["input_ids"])
    y = x.clone()
    y[pos] = mtok.mask_token_id
    with torch.no_grad():
        lp = torch.log_softmax(mmodel(input_ids=y[None]).logits[0], -1)
    assert span_log_likelihoods(mmodel, mtok, [wt], [(a, b)], progress=False)[0] == \
        pytest.approx(lp[pos, x[pos]].sum().item(), abs=1e-4)


def test_memorisation_scores_injected():
    docs = _docs(8)
    pos = _positions(docs)
    types, summary = memorisation_scores(None, None, None, Corpus(docs), pos, window=None,
                                         scorer=lambda t, s: np.array([float(e - a) for a, e in s]) - 6.0,
                                         reference_scorer=lambda t, s: np.zeros(len(t)))
    want = {n.lower(): len(n) - 6.0 for n in NAMES}
    assert dict(zip(types["term"], types["score"])) == want
    assert summary["overall"]["share_positive"] == pytest.approx(np.mean([v > 0 for v in want.values()]))


def test_canaries_into_corpus_moves_spans_and_avoids_them():
    from toolkit.audit.attacks import canaries_into_corpus, canary_ranges

    # a gold span holding ". " (a sentence-like break): no canary may be inserted inside it
    docs = [make_document(f"d{i}", f"p{i % 3}", f"Seen by Dr. Alvarez today. Pain in knee. Then St. Mary ward {i}.",
                          [(8, 19, "DOCTOR"), (46, 54, "LOCATION")]) for i in range(6)]
    corpus = Corpus(docs, source="notes")
    new, table = canaries_into_corpus(corpus, 5, (1, 4), seed=3)
    assert [d.doc_id for d in new] == [d.doc_id for d in docs] and new.source == "notes"
    assert table["repeats"].tolist() == [1, 4, 1, 4, 1]
    for old, d in zip(docs, new):
        assert [d.text[s.start:s.end] for s in d.spans] == [old.text[s.start:s.end] for s in old.spans]
        assert (d.person_id, d.split) == (old.person_id, old.split)
    ranges = canary_ranges(new, table)
    assert sum(len(r) for r in ranges.values()) == table["repeats"].sum()
    for doc_id, rs in ranges.items():
        d = new.get(doc_id)
        for a, b in rs:
            assert d.text[a:b] in set(table["text"]) and not any(s.start < a < s.end for s in d.spans)
    for r in table.itertuples():
        assert sorted(r.doc_ids) == sorted({doc_id for doc_id, rs in ranges.items()
                                            for a, b in rs if new.get(doc_id).text[a:b] == r.text})
    with pytest.raises(ValueError, match="16 repeats need 16 texts"):
        canaries_into_corpus(corpus, 3, (16,))
