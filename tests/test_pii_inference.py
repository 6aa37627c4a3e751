"""PII inference (methods.md §10): the windows of the candidates differ by the candidate alone (no copy of the answer
left in any form), and causal models score the first token of a window (a BOS is put first when the tokenizer adds
none)."""

from __future__ import annotations

import importlib
import re

import numpy as np
import pandas as pd
import pytest
import torch

from toolkit.audit.losses import leading_token, span_log_likelihoods, token_losses
from toolkit.corpus import Corpus, make_document
from toolkit.models import TinyModelConfig, init_model, train_tokenizer

pii = importlib.import_module("toolkit.audit.attacks.pii_inference")   # the package exports the function too

PEOPLE = [("John", "Smith", "AB-1234", "03/12/2019"), ("Ada", "Okafor", "CD-5678", "11/02/2018"),
          ("Maria", "Castillo", "EF-9012", "07/30/2017"), ("Peter", "Dorsey", "GH-3456", "01/05/2016"),
          ("Omar", "Haddad", "JK-7890", "09/21/2015")]


def _doc(i: int, first: str, last: str, code: str, date: str):
    """One note naming its patient in four forms, and a code and a date twice (the second time in lower case)."""
    pieces = [(f"{first} {last}", "NAME"), (" came in on ", None), (date, "DATE"), (". Mr. ", None), (last, "NAME"),
              (" said ", None), (f"{first} {last}".upper(), "NAME"), (" felt fine; record ", None), (code, "ID"),
              (f". {last}'s knee hurt, see {code.lower()} of {date}. J. {last} and Dr Brown left at noon.", None)]
    text, spans = "", []
    for piece, category in pieces:
        if category is not None:
            spans.append((len(text), len(text) + len(piece), category))
        text += piece
    return make_document(f"d{i}", f"p{i}", text, spans)


def _whole_words(word: str, text: str) -> int:
    return len(re.findall(rf"(?<!\w){re.escape(word)}(?!\w)", text, re.IGNORECASE))


def _placeholders(text: str, value: str) -> str:
    """``text`` with the whole value and its replaced parts (case-insensitive, whole words) put as placeholders."""
    out = re.sub(rf"(?<!\w){re.escape(value)}(?!\w)", "<V>", text, flags=re.IGNORECASE)
    for i in pii.replaced_parts(value):
        out = re.sub(rf"(?<!\w){re.escape(pii.parts(value)[i])}(?!\w)", f"<P{i}>", out, flags=re.IGNORECASE)
    return out.lower()


def test_candidate_windows_differ_by_the_candidate_alone(monkeypatch):
    docs = [_doc(i, *p) for i, p in enumerate(PEOPLE)]
    positions = pd.DataFrame([{"doc_id": d.doc_id, "start": s.start, "end": s.end, "category": s.label}
                              for d in docs for s in d.spans])
    made: list[tuple[str, str, str]] = []   # (true value, candidate, window) in the order they are scored
    real = pii.substitute_spans

    def recording(text, start, end, candidate, **kw):
        out = real(text, start, end, candidate, **kw)
        made.append((text[start:end], candidate, out[0]))
        return out

    monkeypatch.setattr(pii, "substitute_spans", recording)
    out, table = pii.pii_inference(None, None, Corpus(docs), positions, n_candidates=5, window=None, seed=1,
                                   scorer=lambda ts: np.zeros(len(ts)), return_table=True, progress=False)
    bounds = np.r_[0, np.cumsum(table["n_candidates"])]
    assert len(table) == len(positions) and len(made) == bounds[-1] and (table["n_candidates"] > 1).all()
    n_wrong = 0
    for i in range(len(table)):
        value, first, true_text = made[bounds[i]]
        assert first == value and true_text == docs[int(table["doc_id"].iloc[i][1:])].text   # the true text is kept
        for _, cand, text in made[bounds[i] + 1:bounds[i + 1]]:
            n_wrong += 1
            assert cand.lower() != value.lower()
            # no part of the true identifier (name words, the code, the date) is left in a wrong candidate's window
            for p in [value] + [pii.parts(value)[j] for j in pii.replaced_parts(value)]:
                assert _whole_words(p, text) == 0, (value, cand, p)
            # the candidate's parts stand exactly where the true ones stood: the texts differ by the value alone
            assert _placeholders(text, cand) == _placeholders(true_text, value), (value, cand)
    assert n_wrong > 3 * len(table)
    # per category: n, top-1, chance and the reference's top-1 (none here)
    assert set(out["by_category"]) == {"DATE", "ID", "NAME"}
    for row in out["by_category"].values():
        assert {"n", "top1", "chance", "reference_top1"} <= set(row) and row["n"] > 0
        assert row["top1"] == pytest.approx(row["chance"])   # every score tied: exactly chance


def test_substitute_parts_case_and_stop_words():
    text = "John Smith saw Dr. Jones. J. Smith's wife and JOHN called SMITH at the Smithson Hospital; john smith left."
    s = text.index("John Smith")
    got = pii.substitute(text, s, s + 10, "Ada Okafor")
    assert got == ("Ada Okafor saw Dr. Jones. J. Okafor's wife and ADA called OKAFOR at the Smithson Hospital; "
                   "ada okafor left.")
    assert pii.substitute(text, s, s + 10, "John Smith") == text              # the true value gives the text back
    # "Dr" (a title), a one-letter initial and a generic word are never replaced on their own
    h = "Kennedy Memorial Hospital"
    note = f"At {h}: the hospital said Kennedy staff, memorial fund. Dr X."
    assert pii.substitute(note, 3, 3 + len(h), "Pagetown General Hospital") == \
        "At Pagetown General Hospital: the hospital said Pagetown staff, general fund. Dr X."
    assert pii.replaced_parts("Dr J. Smith") == [2] and pii.replaced_parts("03/12/2019") == []
    # part counts that differ: first to first, last to last, a middle part to the nearest (tie: earlier)
    assert pii.part_map(3, 2) == [0, 0, 1] and pii.part_map(2, 3) == [0, 2] and pii.part_map(2, 2) == [0, 1]
    t = "Mary Ann Lee met Ann and Lee."
    assert pii.substitute(t, 0, 12, "Ada Okafor") == "Ada Okafor met Ada and Okafor."
    # a number or date: every occurrence of the whole value, nothing else
    d = "On 03/12/2019, again 03/12/2019 (2019)."
    assert pii.substitute(d, 3, 13, "11/02/2018") == "On 11/02/2018, again 11/02/2018 (2019)."


# ---- causal models score the first token ----------------------------------------------------------------------------

TEXTS = [f"{f} {l} came in with knee pain and left at noon." for f, l, _, _ in PEOPLE]


@pytest.fixture(scope="module")
def gpt2():
    tok = train_tokenizer(TEXTS * 3, "clm", 300)
    model = init_model(tok, TinyModelConfig(kind="clm", hidden_size=32, num_layers=1, num_heads=2,
                                            intermediate_size=64, max_length=64)).eval()
    return model, tok


def test_causal_scores_every_content_token(gpt2):
    model, tok = gpt2
    bos = leading_token(tok)
    assert bos == tok.bos_token_id and tok(TEXTS[0])["input_ids"][0] != bos      # GPT-2 style: no BOS of its own
    tl = token_losses(model, tok, TEXTS, progress=False)
    for i, text in enumerate(TEXTS):
        enc = tok(text, return_offsets_mapping=True)
        ids = enc["input_ids"]
        assert tl.losses[i].size == len(ids) and list(tl.token_ids[i]) == ids       # every content token scored
        np.testing.assert_array_equal(tl.offsets[i], np.array(enc["offset_mapping"]))
        assert tl.window_texts[i] == text
        with torch.no_grad():
            lp = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0].double(), -1).numpy()
            lp0 = torch.log_softmax(model(input_ids=torch.tensor([[bos]])).logits[0, -1].double(), -1).numpy()
        # the first token given the BOS alone, every later one from the sequence as trained (no position shift)
        assert tl.losses[i][0] == pytest.approx(-lp0[ids[0]], abs=1e-5)              # -log p(x0 | BOS)
        np.testing.assert_allclose(tl.losses[i][1:], -lp[np.arange(len(ids) - 1), ids[1:]], atol=1e-5)
    cut = token_losses(model, tok, TEXTS[:1], window=6, progress=False)        # no BOS in the window: 6 tokens
    assert cut.losses[0].size == 6 and cut.n_truncated == 1 and TEXTS[0].startswith(cut.window_texts[0])
    # a window that starts at the identifier: the identifier's first token is part of its score
    name = TEXTS[0].split()[0]
    ll = span_log_likelihoods(model, tok, TEXTS[:1], [(0, len(name))], progress=False)[0]
    sel = tl.offsets[0][:, 0] < len(name)
    assert np.isfinite(ll) and sel[0] and ll == pytest.approx(-tl.losses[0][sel].sum())


def test_pii_window_counts_special_tokens_only(gpt2):
    model, tok = gpt2
    text = " ".join(TEXTS)
    s = text.index("Castillo")
    wt, a, b = pii.occurrence_window(text, s, s + 8, tok, 20, slack=4)
    assert wt[a:b] == "Castillo" and len(tok(wt)["input_ids"]) == 20 - 4
    assert pii.audit_window(256, model, None) == 64 and pii.audit_window(None) is None


def test_defaults_are_the_documented_ones():
    """Issue 25, case 10: the code's defaults are those docs/methods.md §10 states (50 candidates, a 256-token window,
    10,000 canary references), in the config section and in the functions alike."""
    import inspect
    from pathlib import Path

    from toolkit.audit.attacks import exposure
    from toolkit.config.sections import AttacksSection

    opt = AttacksSection()
    assert (opt.pii_candidates, opt.pii_window, opt.canary_references) == (50, 256, 10_000)
    sig = inspect.signature(pii.pii_inference).parameters
    assert sig["n_candidates"].default == 50 and sig["window"].default == 256
    assert inspect.signature(exposure).parameters["n_reference"].default == 10_000
    methods = (Path(__file__).resolve().parents[1] / "docs" / "methods.md").read_text(encoding="utf-8")
    assert "*Defaults* (50 candidates, 256-token window)" in methods and "(`canary_references`, default 10,000)" in methods


def test_population_decides_candidates_and_sharing():
    """Attacked on one individual's note, the candidates come from the population's occurrences (not only the attacked
    corpus'), an identifier two individuals use is ``shared``, one in ``public_keys`` is ``public``, and the rest
    ``private`` — recounted by hand."""
    a = make_document("a1", "pa", "Seen by Dr. Okafor at Mercy Clinic with Alma Brandt.")
    b = make_document("b1", "pb", "Seen by Dr. Okafor at Mercy Clinic with Rudi Vance.")

    def spans(d):
        return [{"doc_id": d.doc_id, "start": d.text.index(w), "end": d.text.index(w) + len(w), "category": c}
                for w, c in (("Okafor", "NAME"), ("Mercy Clinic", "ORG"), (d.text.split(" with ")[1][:-1], "NAME"))]

    positions = pd.DataFrame(spans(a) + spans(b))
    every = pii.identifier_occurrences(Corpus([a, b]), positions)
    alone, t0 = pii.pii_inference(None, None, Corpus([a]), positions, n_candidates=5, window=None,
                                  scorer=lambda ts: np.zeros(len(ts)), return_table=True, progress=False)
    assert alone["n_without_candidates"] == 3  # no other individual in the attacked corpus: no candidate at all
    kw = dict(n_candidates=5, window=None, population=every, scorer=lambda ts: np.zeros(len(ts)), return_table=True,
              progress=False)
    out, table = pii.pii_inference(None, None, Corpus([a]), positions, **kw)
    # Okafor (pa and pb) is shared, its candidate pb's "Rudi Vance"; Alma Brandt is pa's alone; Mercy Clinic is the
    # only ORG and both use it: no candidate of another individual, left out
    assert dict(zip(table["term"], table["sharing"])) == {"Okafor": "shared", "Alma Brandt": "private"}
    assert out["n_without_candidates"] == 1 and out["n_public"] == 0
    out, table = pii.pii_inference(None, None, Corpus([a]), positions, public_keys={"okafor"}, **kw)
    assert dict(zip(table["term"], table["sharing"])) == {"Okafor": "public", "Alma Brandt": "private"}
    assert out["n_public"] == 1 and set(out["by_sharing"]) == {"private", "public"}
