"""Vocabulary scrubbing (methods.md §7): anonymisation + offset map, sentences, fill-mask top-k, candidates, scrubbing
(WordPiece and byte-level BPE, fast and slow files), the anonymity test, and the CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from toolkit.cli import main
from toolkit.corpus import Corpus, CorpusError, Span, make_document
from toolkit.errors import ToolkitError
from toolkit.models import TinyModelConfig, init_model, train_tokenizer
from toolkit.scrub.sentences import MASK, read_sentences, split_dev_test, tag_sentences, word_hash, write_sentences
from toolkit.scrub.anonymize import AnonymizeConfig, anonymize_corpus, load_anonymized, parse_labels, replace_spans
from toolkit.scrub.candidates import NameScoreConfig, fill_mask, rank_candidates, token_kind, vocabulary_surfaces
from toolkit.scrub.anonymity import anonymity_test, prediction_count_table
from toolkit.scrub.scrub import check_tokenizer_files, names_in_vocabulary, scrub_model
from toolkit.scrub.candidates import score_tokens, token_statistics

ROOT = Path(__file__).resolve().parents[1]
MEDROBERTA = ROOT / "data_external" / "medroberta_anonymization_testset.csv"
SCRUBBED = re.compile(r"unk\d{13}")


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


# ---------------------------------------------------------------------------------------------------------------------
# step 1: anonymisation and the offset map


def test_replace_spans_and_offsets():
    text = "Dr. Okafor saw John Smith in Paris today."
    new, rows = replace_spans(text, [(4, 10, "PERSON"), (15, 25, "PERSON"), (29, 34, "GPE")])
    assert new == "Dr. PERSON saw PERSON in GPE today."
    for (s, e, os_, oe), tag in zip(rows, ["PERSON", "PERSON", "GPE"]):
        assert new[s:e] == tag
    assert [text[os_:oe] for _, _, os_, oe in rows] == ["Okafor", "John Smith", "Paris"]
    with pytest.raises(ToolkitError):
        replace_spans(text, [(4, 10, "PERSON"), (8, 12, "PERSON")])


def _corpus_with_gold() -> Corpus:
    t1 = "Mrs. Tammy Kirby was seen by nurse okafor. She lives in Boston."
    t2 = "Plan d/w dr. lindqvist. Mr. Brown agrees and goes home to Salem today."
    return Corpus([
        make_document("d1", "p1", t1, [(5, 16, "PATIENT"), (35, 41, "DOCTOR"), (56, 62, "LOCATION")], split="train"),
        make_document("d2", "p2", t2, [(13, 22, "DOCTOR"), (28, 33, "PATIENT"), (58, 63, "LOCATION")],
                      split="heldout"),
    ])


def _entities(corpus):
    """What an NER might find: 'Kirby' only (part of the gold 'Tammy Kirby'), the cities, 'Brown'; misses okafor and
    lindqvist; a LOC and an ORG."""
    t1, t2 = corpus[0].text, corpus[1].text
    return [[Span(t1.index("Kirby"), t1.index("Kirby") + 5, "PERSON"), Span(56, 62, "GPE")],
            [Span(28, 33, "PERSON"), Span(58, 63, "LOC"), Span(0, 4, "ORG")]]


def test_anonymize_offset_map_and_gold(tmp_path):
    corpus = _corpus_with_gold()
    an = anonymize_corpus(corpus, AnonymizeConfig(), entities=_entities(corpus), progress=False)
    a1, a2 = an.corpus[0].text, an.corpus[1].text
    assert a1 == "Mrs. Tammy PERSON was seen by nurse okafor. She lives in GPE."
    assert a2 == "Plan d/w dr. lindqvist. Mr. PERSON agrees and goes home to GPE today."  # LOC -> GPE, ORG kept
    assert an.summary["replaced_by_tag"] == {"GPE": 2, "PERSON": 2}
    assert an.summary["replaced_by_label"] == {"GPE": 1, "LOC": 1, "PERSON": 2}
    # offset map: the tag's place in the new text and the entity's in the old one
    for _, r in an.offsets.iterrows():
        doc = corpus.get(r["doc_id"])
        new = an.corpus.get(r["doc_id"]).text
        assert new[r["start"]:r["end"]] == r["tag"]
        assert doc.text[r["orig_start"]:r["orig_end"]] in ("Kirby", "Boston", "Brown", "Salem")
    # any anonymised span maps back to the original sentence
    s, e = 0, a1.index("okafor.") + len("okafor.")
    assert an.original_sentence(corpus, "d1", s, e) == "Mrs. Tammy Kirby was seen by nurse okafor."
    assert an.to_original("d2", a2.index("agrees"), len(a2)) == (corpus[1].text.index("agrees"), len(corpus[1].text))
    tag_at = a2.index("PERSON")
    assert an.to_original("d2", tag_at + 2, tag_at + 4) == (28, 33)   # a boundary inside a tag: the whole entity
    # gold spans: what NER missed stays, shifted ("Tammy" of "Tammy Kirby", the staff names); replaced parts go
    kept = {(d.doc_id, d.text[sp.start:sp.end], sp.label) for d in an.corpus for sp in d.spans}
    assert kept == {("d1", "Tammy", "PATIENT"), ("d1", "okafor", "DOCTOR"), ("d2", "lindqvist", "DOCTOR")}
    assert an.summary["gold_missed"] == {"DOCTOR": 2, "PATIENT": 1}
    an.save(tmp_path / "anon.jsonl")
    back = load_anonymized(tmp_path / "anon.jsonl")
    assert [d.text for d in back.corpus] == [a1, a2]
    pd.testing.assert_frame_equal(back.offsets, an.offsets)
    with pytest.raises(ToolkitError, match="offset map"):
        load_anonymized(tmp_path / "missing.jsonl")


def test_parse_labels():
    assert parse_labels("PERSON,GPE,LOC=GPE") == {"PERSON": "PERSON", "GPE": "GPE", "LOC": "GPE"}
    assert parse_labels(["PER=PERSON"]) == {"PER": "PERSON"}
    for bad in ("", "PERSON=two words", "=X"):
        with pytest.raises(ToolkitError):
            parse_labels(bad)


def test_anonymize_cli_with_spacy(tmp_path, capsys):
    rows = [{"doc_id": "a", "person_id": "A", "split": "train",
             "text": "John Smith was admitted in Chicago. Mr. Smith is stable.", "spans": []}]
    src = tmp_path / "c.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert main(["anonymize", str(src), "--out", str(tmp_path / "anon.jsonl"), "--labels", "PERSON,GPE",
                 "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "1 documents anonymised" in printed and "Smith" not in printed and "Chicago" not in printed
    an = load_anonymized(tmp_path / "anon.jsonl")
    text = an.corpus[0].text
    assert "Smith" not in text and "Chicago" not in text and "PERSON" in text and "GPE" in text
    assert (tmp_path / "anon.summary.json").is_file()
    assert main(["anonymize", str(src), "--out", str(tmp_path / "x.jsonl"), "--labels", "PERSON=a b"]) == 2


# ---------------------------------------------------------------------------------------------------------------------
# step 3: sentences


def test_tag_sentences_and_split(tmp_path):
    docs, ents = [], []
    for i in range(12):
        split = "train" if i < 6 else "heldout"
        text = (f"Mr. Kirby{i} was seen today by the team. Kirby{i} and Moss{i} went home. Short Kirby{i}.\n"
                f"Plan discussed with Mr. Kirby{i}, who agrees.")
        spans = [(m.start(), m.end(), "PATIENT") for m in re.finditer(rf"(Kirby|Moss){i}", text)]
        docs.append(make_document(f"d{i}", f"p{i}", text, spans, split=split))
        ents.append([Span(a, b, "PERSON") for a, b, _ in spans])
    corpus = Corpus(docs)
    an = anonymize_corpus(corpus, entities=ents, progress=False)
    pool = tag_sentences(an, original=corpus, min_words=4, max_words=40)
    # "Mr. PERSON was seen..." (unique per doc after masking? no: identical) and "Plan discussed ..." qualify;
    # two tags in one sentence and the 2-word sentence do not
    assert set(pool["sentence"]) == {f"Mr. {MASK} was seen today by the team.",
                                     f"Plan discussed with Mr. {MASK}, who agrees."}
    assert pool.loc[pool["sentence"].str.startswith("Mr."), "n_copies"].item() == 12
    first = pool.iloc[0]
    assert first["source"] == "seen" and first["original_hashes"] == [word_hash("Kirby0")]
    # distinct texts per document: seen/unseen split, dev and test disjoint
    docs2, ents2 = [], []
    for i in range(40):
        text = f"Mr. Kirby{i} was seen today for problem number {i}."
        docs2.append(make_document(f"e{i}", f"q{i}", text, [(4, 4 + len(f'Kirby{i}'), "PATIENT")],
                                   split="train" if i % 2 else "heldout"))
        ents2.append([Span(4, 4 + len(f"Kirby{i}"), "PERSON")])
    an2 = anonymize_corpus(Corpus(docs2), entities=ents2, progress=False)
    pool2 = tag_sentences(an2, original=Corpus(docs2))
    dev, test = split_dev_test(pool2, n_seen=5, n_unseen=5, seed=1)
    assert dev["source"].value_counts().to_dict() == {"seen": 5, "unseen": 5}
    assert not set(dev["sentence"]) & set(test["sentence"])
    with pytest.warns(UserWarning, match="only 20 distinct seen"):
        d3, t3 = split_dev_test(pool2, n_seen=15, n_unseen=5)
    assert (d3["source"] == "seen").sum() == 10 and (t3["source"] == "seen").sum() == 10
    # gold filter: an NER "PERSON" on a drug name is not a name slot
    bad = make_document("z", "z", "Started aspirin today for the pain and fever.", [], split="train")
    zc = Corpus(list(docs2) + [bad])
    an3 = anonymize_corpus(zc, entities=ents2 + [[Span(8, 15, "PERSON")]], progress=False)
    assert len(tag_sentences(an3, original=zc)) == 41
    assert len(tag_sentences(an3, original=zc, gold_labels=["PATIENT"])) == 40
    # files round-trip
    write_sentences(dev, tmp_path / "dev.jsonl")
    back = read_sentences(tmp_path / "dev.jsonl")
    assert back["sentence"].tolist() == dev["sentence"].tolist()
    assert back["original_hashes"].tolist() == dev["original_hashes"].tolist()
    write_sentences(dev, tmp_path / "dev.csv")
    assert read_sentences(tmp_path / "dev.csv")["original_hashes"].tolist() == dev["original_hashes"].tolist()


def test_read_medroberta_format_and_errors(tmp_path):
    s = read_sentences(MEDROBERTA, source="unseen")
    assert len(s) == 100 and (s["sentence"].str.count(MASK) == 1).all() and (s["source"] == "unseen").all()
    assert s["sentence"].iloc[0] == "Broertje heeft astma en eczeem, <mask> alleen eczeem."
    bad = tmp_path / "bad.csv"
    bad.write_text("sentences\n<mask> zag <mask>.\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"bad\.csv, line 2: sentence has 2 '<mask>' markers"):
        read_sentences(bad)
    other = tmp_path / "x.csv"
    other.write_text("text\nhello <mask>\n", encoding="utf-8")
    with pytest.raises(CorpusError, match="no 'sentence' or 'sentences' column"):
        read_sentences(other)


# ---------------------------------------------------------------------------------------------------------------------
# tiny models (random weights: these tests check plumbing, not what a trained model predicts)

TEXTS = ([f"seen by nurse okafor on day {i}. Okafor rn aware of plan. plan d/w dr. lindqvist re: dispo."
          for i in range(30)] +
         [f"Mrs. PERSON is a {20 + i}-year-old woman who lives in GPE. The patient is well today." for i in range(30)])


def _wordpiece_model(dir_: Path, *, slow_files: bool = True) -> Path:
    tok = train_tokenizer(TEXTS, "mlm", 300)
    model = init_model(tok, TinyModelConfig(kind="mlm", vocab_size=300, hidden_size=32, num_layers=1, num_heads=2,
                                            intermediate_size=64, max_length=64), seed=0)
    model.save_pretrained(dir_)
    tok.save_pretrained(dir_)
    if slow_files:  # an older checkpoint's slow-tokenizer file beside tokenizer.json
        vocab = tok.get_vocab()
        (dir_ / "vocab.txt").write_text("\n".join(sorted(vocab, key=vocab.get)) + "\n", encoding="utf-8")
    return dir_


def _bpe_model(dir_: Path) -> Path:
    """A RoBERTa-style masked LM with a byte-level BPE tokenizer, vocab.json + merges.txt beside tokenizer.json."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast, RobertaConfig, RobertaForMaskedLM

    t = Tokenizer(models.BPE())
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    t.decoder = decoders.ByteLevel()
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    t.train_from_iterator(TEXTS, trainers.BpeTrainer(vocab_size=400, special_tokens=specials,
                                                     initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    t.post_processor = processors.RobertaProcessing(("</s>", t.token_to_id("</s>")), ("<s>", t.token_to_id("<s>")))
    tok = PreTrainedTokenizerFast(tokenizer_object=t, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                  pad_token="<pad>", cls_token="<s>", sep_token="</s>",
                                  mask_token=AddedToken("<mask>", lstrip=True, special=True))
    torch.manual_seed(0)
    model = RobertaForMaskedLM(RobertaConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=1,
                                             num_attention_heads=2, intermediate_size=64, max_position_embeddings=80,
                                             pad_token_id=tok.pad_token_id))
    model.save_pretrained(dir_)
    tok.save_pretrained(dir_)
    data = json.loads((dir_ / "tokenizer.json").read_text(encoding="utf-8"))
    (dir_ / "vocab.json").write_text(json.dumps(data["model"]["vocab"], ensure_ascii=False), encoding="utf-8")
    merges = [" ".join(m) if isinstance(m, list) else m for m in data["model"]["merges"]]
    (dir_ / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n", encoding="utf-8")
    return dir_


def _load(d):
    from toolkit.models import load_model

    return load_model(d, kind="mlm")


def test_fill_mask_collects_top_k_like_the_pipeline(tmp_path):
    from transformers import pipeline

    model, tok = _load(_wordpiece_model(tmp_path / "wp", slow_files=False))
    sents = [f"seen by nurse {MASK} on day 3.", f"{MASK} rn aware of plan.", f"Mrs. {MASK} is a 25-year-old woman.",
             f"plan d/w dr. {MASK} re: dispo, and the patient is well today after a long night."]
    preds = fill_mask(model, tok, sents, top_k=7, batch_size=3, progress=False)
    assert len(preds) == 4 * 7 and preds.groupby("sentence_index")["rank"].apply(list).map(
        lambda r: r == list(range(1, 8))).all()
    fill = pipeline("fill-mask", model=model, tokenizer=tok, top_k=7, device=-1)
    for i, s in enumerate(sents):
        ref = fill(s.replace(MASK, tok.mask_token))
        got = preds[preds["sentence_index"] == i]
        assert got["token_id"].tolist() == [r["token"] for r in ref]
        np.testing.assert_allclose(got["prob"].to_numpy(), [r["score"] for r in ref], rtol=1e-4, atol=1e-6)
    # batching and padding do not change the result
    one = fill_mask(model, tok, sents, top_k=7, batch_size=1, progress=False)
    pd.testing.assert_frame_equal(one, preds, check_exact=False, rtol=1e-5)
    with pytest.raises(ToolkitError, match="exactly one"):
        fill_mask(model, tok, ["no mask here"], progress=False)


def test_token_kinds_and_surfaces(tmp_path):
    model, tok = _load(_bpe_model(tmp_path / "bpe"))
    surf = vocabulary_surfaces(tok)
    ids = {t: i for i, t in tok.convert_ids_to_tokens(list(range(len(tok)))) and enumerate(
        tok.convert_ids_to_tokens(list(range(len(tok)))))}
    assert surf[ids["Ġokafor"]] == "okafor" and surf[tok.mask_token_id] == "<mask>"
    assert token_kind("okafor") == "word" and token_kind("O'Brien") == "word" and token_kind("PERSONGPE") == "tag"
    assert token_kind("unk1234567890123") == "scrubbed" and token_kind("25") == "other" and token_kind(".") == "other"
    assert token_kind("[MASK]", specials={"[MASK]"}) == "special"


def test_rank_candidates_score_formula():
    sentences = pd.DataFrame({"sentence": [f"seen by nurse {MASK}.", f"Mr. {MASK} is well.", f"{MASK} agrees."],
                              "source": ["seen", "unseen", "seen"], "sentence_id": ["a", "b", "c"]})
    rows = []
    for si, toks in enumerate([["okafor", "the", "PERSON", "."], ["Okafor", "okafor", "12", "unk1234567890123"],
                               ["okafor", "He", "the", "Kirby"]]):
        rows += [{"sentence_index": si, "rank": r + 1, "token_id": r, "token": t, "prob": 0.1} for r, t in
                 enumerate(toks)]
    preds = pd.DataFrame(rows)
    cand = rank_candidates(preds, sentences, NameScoreConfig(use_ner=False)).set_index("token")
    assert set(cand.index) == {"okafor", "the", "Okafor", "He", "Kirby"}   # words only
    assert cand.attrs["kinds"] == {"word": 5, "other": 2, "tag": 1, "scrubbed": 1}
    # okafor: not capitalised, not a common word, in all 3 sentences (frequency 1): 0.3 + 0.1
    assert cand.loc["okafor", "score"] == pytest.approx(0.4)
    assert cand.loc["okafor", "n_sentences"] == 3 and cand.loc["okafor", "n_seen"] == 2
    assert cand.loc["okafor", "best_rank"] == 1 and cand.loc["okafor", "examples"][0] == f"seen by nurse {MASK}."
    assert cand.loc["Kirby", "score"] == pytest.approx(0.2 + 0.3 + 0.1 / 3, abs=1e-4)
    assert cand.loc["the", "score"] == pytest.approx(0.1 * 2 / 3, abs=1e-4) and cand.loc["He", "common_word"]
    assert cand.index[0] == "Kirby"                                        # highest score first
    # the NER part: spaCy labels the filled token PERSON
    stats = token_statistics(preds[preds["token"] == "Kirby"], sentences)
    scored = score_tokens(stats.assign(examples=[[f"Yesterday Mr. {MASK} met Dr. Jones in the clinic."]]))
    assert scored["ner_share"].item() == 1.0


# ---------------------------------------------------------------------------------------------------------------------
# step 4: scrubbing


def _same_outputs(a_dir: Path, b_dir: Path, ids: list[int]) -> None:
    ma, _ = _load(a_dir)
    mb, _ = _load(b_dir)
    x = torch.tensor([ids])
    with torch.no_grad():
        assert torch.equal(ma(input_ids=x).logits, mb(input_ids=x).logits)


@pytest.mark.parametrize("kind", ["wordpiece", "bpe"])
def test_scrub_renames_names_keeps_ids_and_outputs(tmp_path, kind):
    src = _wordpiece_model(tmp_path / "src") if kind == "wordpiece" else _bpe_model(tmp_path / "src")
    _, before = _load(src)
    hits = names_in_vocabulary(before, ["okafor", "lindqvist"])
    assert hits, "the tiny vocabulary should hold the staff names"
    manifest = scrub_model(src, ["okafor", "lindqvist"], tmp_path / "out", seed=3)
    out = tmp_path / "out"
    _, after = _load(out)
    old = before.convert_ids_to_tokens(list(range(len(before))))
    new = after.convert_ids_to_tokens(list(range(len(after))))
    assert len(old) == len(new)
    changed = [i for i in range(len(old)) if old[i] != new[i]]
    assert sorted(changed) == sorted(hits) == [r["id"] for r in manifest["renamed"]]
    assert all(SCRUBBED.fullmatch(new[i]) for i in changed)                 # unk + 13 digits, ids kept
    # no token decodes to the names any more (only a sequence of several pieces can spell them)
    decoded = [after.decode([i]).lower() for i in range(len(after))]
    assert not [d for d in decoded if "okafor" in d or "lindqvist" in d]
    assert [d for d in (before.decode([i]).lower() for i in range(len(before))) if "okafor" in d]
    assert not names_in_vocabulary(after, ["okafor", "lindqvist"])
    enc = after("seen by nurse okafor, Okafor rn")["input_ids"]
    assert not set(enc) & set(changed)                                       # the name is now split into pieces
    assert "okafor" in after.decode(enc, skip_special_tokens=True).replace(" ", "").lower()  # text still round-trips
    # fast and slow tokenizer files agree
    assert check_tokenizer_files(out) == []
    if kind == "wordpiece":
        lines = (out / "vocab.txt").read_text(encoding="utf-8").splitlines()
        assert lines == new[:len(lines)]
        from transformers.models.bert import BertTokenizerLegacy

        slow = BertTokenizerLegacy(vocab_file=str(out / "vocab.txt"), do_lower_case=False)
        assert slow.convert_ids_to_tokens(changed) == [new[i] for i in changed]
    else:
        assert manifest["merges_removed"] > 0
        vj = json.loads((out / "vocab.json").read_text(encoding="utf-8"))
        assert all(vj[new[i]] == i for i in changed)
        from transformers import RobertaTokenizer

        slow_only = tmp_path / "slow"  # the slow files alone (no tokenizer.json) give the same tokenizer
        slow_only.mkdir()
        for f in ("vocab.json", "merges.txt"):
            (slow_only / f).write_bytes((out / f).read_bytes())
        rt = RobertaTokenizer.from_pretrained(str(slow_only))
        text = "seen by nurse okafor on day 4. plan d/w dr. lindqvist"
        assert rt(text)["input_ids"] == after(text)["input_ids"]
    # model outputs unchanged (weights copied byte for byte), for inputs with and without the renamed ids
    _same_outputs(src, out, before("Mrs. PERSON is well today.")["input_ids"])
    _same_outputs(src, out, [before.cls_token_id] + changed[:3] + [before.sep_token_id])
    # fill-mask on the scrubbed model never yields the name
    model, tok = _load(out)
    preds = fill_mask(model, tok, [f"seen by nurse {MASK} today."], top_k=len(tok) - 5, progress=False)
    assert not preds["token"].str.lower().isin(["okafor", "lindqvist"]).any()
    # the manifest holds hashes, not names (unless asked)
    text = (out / "scrub_manifest.json").read_text(encoding="utf-8").lower()
    assert "okafor" not in text and "lindqvist" not in text
    assert manifest["n_names"] == 2 and manifest["n_names_in_vocabulary"] == 2
    revealed = scrub_model(src, ["okafor"], tmp_path / "out2", reveal_names=True, seed=3)
    assert {r["old_token"].lstrip("Ġ#").lower() for r in revealed["renamed"]} == {"okafor"}


def test_scrub_match_case_and_refusals(tmp_path):
    src = _wordpiece_model(tmp_path / "src")
    _, tok = _load(src)
    ci = names_in_vocabulary(tok, ["OKAFOR"])
    cs = names_in_vocabulary(tok, ["okafor"], match_case=True)
    assert len(ci) > len(cs) >= 1            # "Okafor" and "okafor" vs only "okafor"
    assert not names_in_vocabulary(tok, ["[MASK]", "[CLS]"])   # special tokens are never renamed
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "x").write_text("keep", encoding="utf-8")
    with pytest.raises(ToolkitError, match="not empty"):
        scrub_model(src, ["okafor"], tmp_path / "out")
    with pytest.raises(ToolkitError, match="not a local model directory"):
        scrub_model(tmp_path / "nowhere", ["okafor"], tmp_path / "o2")
    (src / "spiece.model").write_bytes(b"\x00")
    with pytest.raises(ToolkitError, match="SentencePiece"):
        scrub_model(src, ["okafor"], tmp_path / "o3")


# ---------------------------------------------------------------------------------------------------------------------
# the anonymity test (methods.md §7.6) and the CLI


def test_anonymity_test_counts(tmp_path):
    model, tok = _load(_wordpiece_model(tmp_path / "wp", slow_files=False))
    sents = pd.DataFrame({"sentence": [f"seen by nurse {MASK} today.", f"Mrs. {MASK} is well.",
                                       f"plan d/w dr. {MASK}, pt agrees."],
                          "source": ["seen", "seen", "unseen"], "sentence_id": ["a", "b", "c"],
                          "original_hashes": [[], [], []]})
    top = fill_mask(model, tok, sents["sentence"].tolist(), top_k=5, progress=False)
    first_c = top[top["sentence_index"] == 2]["token"].iloc[2]            # rank 3 of sentence c
    sents.loc[2, "original_hashes"] = [word_hash(first_c)]
    words = top[top["token"].map(token_kind) == "word"]
    name = words["token"].iloc[0]
    report, preds = anonymity_test(model, tok, sents, top_k=5, names=[name.upper()])
    assert report["n_predictions"] == 15 and len(preds) == 15
    n = int((preds["token"].str.lower() == name.lower()).sum())
    assert report["n_name_like"] == n and report["share_name_like"] == pytest.approx(n / 15)
    assert report["best_rank"] == int(preds.loc[preds["name_like"], "rank"].min())
    assert report["n_sentences_with_name"] == preds.loc[preds["name_like"], "sentence_id"].nunique()
    assert report["n_sentences_with_original"] == 1 and report["n_original_name_predicted"] == 1
    assert report["n_original_name_predicted_by_source"] == {"seen": 0, "unseen": 1}
    nothing, _ = anonymity_test(model, tok, sents, top_k=5, names=["zzzz"])
    assert nothing["n_name_like"] == 0 and nothing["best_rank"] is None
    with pytest.raises(ToolkitError):
        anonymity_test(model, tok, sents)


def test_prediction_count_table():
    preds = pd.DataFrame({"token": ["PERSON"] * 120 + ["Mw"] * 65 + ["okafor"] * 12 + ["pt"] * 5 + ["x"] * 2,
                          "source": "seen"})
    t = prediction_count_table(preds, source="seen", hide=["okafor"])
    assert t["tokens"].tolist() == ["PERSON", "Mw", "‹name›", "pt"]
    assert t["times predicted"].tolist() == ["120", "60 ≤ t < 100", "10 ≤ t < 30", "4 ≤ t < 10"]


def test_cli_candidates_scrub_anonymity(tmp_path, capsys):
    src = _wordpiece_model(tmp_path / "model")
    sents = pd.DataFrame({"sentence_id": ["s1", "s2", "s3"], "source": ["seen", "unseen", "seen"],
                          "sentence": [f"seen by nurse {MASK} today.", f"Mrs. {MASK} is well.",
                                       f"plan d/w dr. {MASK}, pt agrees."],
                          "original_hashes": [[word_hash("okafor")], [], []], "doc_id": ["d1", "d2", "d3"]})
    write_sentences(sents, tmp_path / "dev.jsonl")
    assert main(["candidates", str(src), "--sentences", str(tmp_path / "dev.jsonl"), "--out",
                 str(tmp_path / "cand"), "--top-k", "40", "--no-ner", "--quiet"]) == 0
    cand = pd.read_parquet(tmp_path / "cand" / "candidates.parquet")
    assert len(cand) and (cand["score"].diff().dropna() <= 0).all()
    review = tmp_path / "review.jsonl"
    review.write_text(json.dumps({"format_version": 1, "token": "okafor", "decision": "name", "reviewer": "r",
                                  "timestamp": "2025-01-01T00:00:00+00:00"}) + "\n", encoding="utf-8")
    assert main(["scrub", str(src), "--review", str(review), "--out", str(tmp_path / "scrubbed"), "--seed", "1"]) == 0
    assert main(["anonymity-test", str(tmp_path / "scrubbed"), "--sentences", str(tmp_path / "dev.jsonl"),
                 "--out", str(tmp_path / "anon"), "--review", str(review), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "okafor" not in printed.lower()                                 # counts only on the terminal
    rep = json.loads((tmp_path / "anon" / "anonymity.json").read_text(encoding="utf-8"))
    for key in ("n_predictions", "n_name_like", "share_name_like", "best_rank", "n_sentences_with_name",
                "n_original_name_predicted"):
        assert key in rep
    assert rep["n_predictions"] == 60 and rep["n_name_like"] == 0 and rep["n_original_name_predicted"] == 0
    assert main(["scrub", str(src), "--review", str(tmp_path / "none.jsonl"), "--out", str(tmp_path / "s2")]) == 2
    assert main(["anonymity-test", str(src), "--sentences", str(tmp_path / "nope.csv"), "--out",
                 str(tmp_path / "a2"), "--auto"]) == 2
    assert main(["anonymity-test", str(src), "--sentences", str(tmp_path / "dev.jsonl"), "--out",
                 str(tmp_path / "a3")]) == 2                               # neither names nor --auto
