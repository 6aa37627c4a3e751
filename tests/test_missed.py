"""The gold identifiers the detector missed (toolkit.audit.missed, methods.md §2.1): which spans are missed on a
hand-made corpus, their counts, PII inference on them with a scorer that knows the members' values, the keyed hashes
(no plain identifier in missed.json or the report), the oracle detector (no step planned, the report says why), and
`toolkit audit` / `toolkit run` with the `patterns` detector on the sample notes, whose report holds the section."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from toolkit.audit.attacks.pii_inference import normalize
from toolkit.audit.hashing import hash_term
from toolkit.audit.missed import (gold_fingerprint, missed_audit, missed_spans, regurgitation_targets)
from toolkit.corpus import Corpus, Document, Span, load_corpus
from toolkit.pipelines.missed_steps import run_missed, wants_missed

ROOT = Path(__file__).resolve().parents[1]
KEY = bytes(range(32))


def _doc(doc_id, person, text, spans):
    return Document(doc_id=doc_id, person_id=person, text=text,
                    spans=tuple(Span(text.index(v), text.index(v) + len(v), lab) for v, lab in spans))


def _positions(doc, words):
    """Protected-position rows of the given words of ``doc`` (first occurrence each)."""
    return [(doc.doc_id, doc.text.index(w), doc.text.index(w) + len(w)) for w in words]


def test_missed_spans_by_hand():
    a = _doc("a", "p1", "Anna Berg saw Dr Lee at Oslo General on 2001-03-04 (ok).",
             [("Anna Berg", "PATIENT"), ("Lee", "DOCTOR"), ("Oslo General", "HOSPITAL"), ("2001-03-04", "DATE"),
              ("(", "OTHER")])
    b = _doc("b", "p2", "Berg Anna came back.", [("Berg Anna", "PATIENT")])
    pos = pd.DataFrame(_positions(a, ["Anna", "Oslo", "2001"]) + _positions(b, ["Berg", "Anna"]),
                       columns=["doc_id", "start", "end"])
    t = missed_spans(Corpus([a, b]), pos)
    # "(" covers no word: not counted; the five others are, in document order
    assert list(t["term"]) == ["Anna Berg", "Lee", "Oslo General", "2001-03-04", "Berg Anna"]
    assert list(t["category"]) == ["NAME", "NAME", "ORGANIZATION", "DATE", "NAME"]
    assert list(t["n_words"]) == [2, 1, 2, 3, 2]
    assert list(t["n_missed_words"]) == [1, 1, 1, 2, 0]
    assert list(t["missed"]) == [True, True, True, True, False]
    assert list(t["missed_words"]) == [("berg",), ("lee",), ("general",), ("03", "04"), ()]
    # regurgitation looks for the missed words that can name someone: not "general" (a generic part), not a
    # two-digit number, not a one-letter word
    assert regurgitation_targets({"berg", "lee", "general", "03", "04", "2001", "x"}) == {"berg", "lee", "2001"}
    # a word half inside a protected position counts as protected (a shared character)
    half = pd.DataFrame([("a", 5, 7)], columns=["doc_id", "start", "end"])
    assert missed_spans(Corpus([a]), half)["n_missed_words"].iloc[0] == 1  # "Anna" visible, "Berg" covered


def _groups():
    members = Corpus([_doc("m1", "p1", "Seen by Ada Okafor today.", [("Ada Okafor", "PATIENT")]),
                      _doc("m2", "p2", "Seen by Bob Lamb today.", [("Bob Lamb", "PATIENT")])])
    nonmembers = Corpus([_doc("n1", "p3", "Seen by Cy Nowak today.", [("Cy Nowak", "PATIENT")]),
                         _doc("n2", "p4", "Seen by Di Young today.", [("Di Young", "PATIENT")]),
                         _doc("n3", "p4", "Seen by Di Young again.", [("Di Young", "PATIENT")])])
    return members, nonmembers


def test_missed_audit_counts_infers_and_hashes():
    members, nonmembers = _groups()
    # the detector found Bob Lamb only; nothing else protected
    pos_m = pd.DataFrame(_positions(members.get("m2"), ["Bob", "Lamb"]), columns=["doc_id", "start", "end"])
    pos_n = pd.DataFrame(columns=["doc_id", "start", "end"])
    known = ("Ada Okafor",)  # a "model" that learnt the member's missed name and nothing else

    def scorer(texts):
        return [float(sum(t.count(v) for v in known)) for t in texts]

    res = missed_audit(None, None, members, nonmembers, pos_m, pos_n, n_candidates=4, max_occurrences=None,
                       window=None, seed=0, scorer=scorer, hash_key=KEY)
    assert res["members"]["gold_spans"] == 2 and res["members"]["missed_spans"] == 1
    assert res["members"]["wholly_missed_spans"] == 1 and res["members"]["missed_words"] == 2
    assert res["nonmembers"]["missed_spans"] == 3 and res["nonmembers"]["missed_identifiers"] == 2
    assert res["by_category"] == {"NAME": {"members": {"gold_spans": 2, "missed_spans": 1},
                                           "nonmembers": {"gold_spans": 3, "missed_spans": 3}}}
    # the member's value is ranked first against the 3 other individuals' names; each non-member's has the learnt
    # member's name among its 3 candidates (every other individual's), which the "model" ranks first
    pm, pn = res["pii_inference"]["members"]["overall"], res["pii_inference"]["nonmembers"]["overall"]
    assert pm["n"] == 1 and pm["top1"] == 1.0 and pm["chance"] == pytest.approx(1 / 4)
    assert pn["n"] == 3 and pn["top1"] == 0.0 and pn["chance"] == pytest.approx(1 / 4)
    adv = res["pii_inference"]["member_advantage"]["overall"]
    assert adv["members_rate"] == 1.0 and adv["difference"] > 0 and adv["n_members"] == 1 and adv["n_nonmembers"] == 2
    # one record per missed identifier, hashed with the key, counts per group
    by_hash = {r["hash"]: r for r in res["identifiers"]}
    ada, di = by_hash[hash_term(normalize("Ada Okafor"), KEY)], by_hash[hash_term(normalize("Di Young"), KEY)]
    assert ada["members"] == {"occurrences": 1, "individuals": 1, "wholly_missed": 1}
    assert ada["inferred"] and ada["recovered"] and ada["regurgitation"] is None
    assert di["nonmembers"] == {"occurrences": 2, "individuals": 1, "wholly_missed": 2} and not di["recovered"]
    assert hash_term(normalize("Bob Lamb"), KEY) not in by_hash and len(by_hash) == 3
    assert res["n_recovered"]["members"] == 1
    text = json.dumps(res)
    for value in ("Okafor", "Lamb", "Nowak", "Young"):  # (no hex-only word: the hashes are hex)
        assert value.lower() not in text.lower(), value
    for value in ("p1", "p3", "m1", "n2"):  # person and document ids
        assert f'"{value}"' not in text, value


def test_gold_fingerprint_follows_the_spans_only():
    members, _ = _groups()
    moved = Corpus([Document(d.doc_id, d.person_id, d.text, spans=d.spans[:0]) for d in members])
    assert gold_fingerprint(members) == gold_fingerprint(Corpus(list(members)))
    assert gold_fingerprint(members) != gold_fingerprint(moved)


def test_oracle_plans_no_step_and_the_report_says_why():
    from toolkit.report.coverage import coverage_blocks
    from toolkit.report.missed import missed_section
    from toolkit.results.collect import RunData

    members, nonmembers = _groups()
    bare = Corpus([Document(d.doc_id, d.person_id, d.text) for d in members])
    assert wants_missed("patterns", members, nonmembers) and wants_missed("clinical+spacy", members)
    assert not wants_missed("oracle", members) and not wants_missed("patterns+oracle", members)
    assert not wants_missed("patterns", bare) and not wants_missed(None, members)
    # toolkit run with the oracle detector: no step, the cache never asked
    cfg = SimpleNamespace(audit=SimpleNamespace(attacks=SimpleNamespace(enabled=True)),
                          identifiers=SimpleNamespace(detector="oracle"))
    data = SimpleNamespace(members=members, nonmembers=nonmembers)
    assert run_missed(cfg, None, Path("unused"), data=data, tables={}, checkpoints={}, train_keys={}, base=None,
                      base_key=None, canary_key=None, identifier_keys={}, fingerprints={}) == {}
    run = RunData(path=Path("."), label="x", ids_summary={"members": {"config": {"detector": "oracle"}}})
    assert "The gold spans were the detector ('oracle')" in missed_section(run)[0]["body"]
    run = RunData(path=Path("."), label="x", ids_summary={"members": {"config": {"detector": "patterns"}}})
    assert "detected identifiers only" in missed_section(run)[0]["body"]
    # a corpus without gold spans keeps the corpus section's wording; with them, it points to the new section
    assert "Gold identifiers the detector missed" not in coverage_blocks("patterns")[0]["body"]
    assert "Gold identifiers the detector missed" in coverage_blocks("patterns", missed_listed=True)[0]["body"]


def _tiny_gpt2(tok, seed):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    return GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=1, n_head=2, n_inner=64, n_positions=64,
                                      pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
                                      eos_token_id=tok.eos_token_id))


def test_audit_with_a_detector_lists_what_it_missed_hashed(tmp_path):
    from toolkit.config.sections import AttacksSection
    from toolkit.models import train_tokenizer
    from toolkit.pipelines.audit_only import audit_models, model_label

    notes = load_corpus(ROOT / "data_samples/clinical/notes.jsonl")
    docs = Corpus(list(notes.filter(split="train")[:4]) + list(notes.filter(split="heldout")[:4]))
    tok = train_tokenizer((d.text for d in notes.filter(split="public")[:30]), "clm", 300)
    for d, seed in ((tmp_path / "m", 0), (tmp_path / "r", 1)):
        _tiny_gpt2(tok, seed).save_pretrained(d)
        tok.save_pretrained(d)
    opts = AttacksSection(window=64, pii_candidates=5, pii_occurrences=12, pii_window=32,
                          memorisation_occurrences=40, canary_references=50)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        kw = dict(members="train", nonmembers="heldout", reference=tmp_path / "r", detector="patterns",
                  out_dir=tmp_path / "out", window=64, n_bootstrap=20, progress=False, options=opts)
        res = audit_models([tmp_path / "m"], docs, **kw)
        label = model_label(tmp_path / "m")
        f = tmp_path / "out" / "missed" / label / "missed.json"
        step = json.loads((f.parent / "step.json").read_text(encoding="utf-8"))
        assert step["step"] == f"missed/{label}" and step["status"] == "done"
        html = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
        again = audit_models([tmp_path / "m"], docs, **kw, report=False)  # cached: the same key
    finally:
        torch.set_num_threads(threads)
    assert json.loads((f.parent / "step.json").read_text(encoding="utf-8"))["key"] == step["key"]
    assert again.missed[label] == res.missed[label] == json.loads(f.read_text(encoding="utf-8"))
    m = res.missed[label]
    members, nonmembers = docs.filter(split="train"), docs.filter(split="heldout")
    spans = missed_spans(members, json_free_positions(tmp_path / "out", "members"))
    assert m["members"]["missed_spans"] == int(spans["missed"].sum()) > 0
    assert m["members"]["gold_spans"] == len(spans) == sum(len(d.spans) for d in members)
    assert m["regurgitation"] is not None and m["pii_inference"]["members"]["overall"]["n"] > 0
    assert 'id="run1-missed"' in html and "Gold identifiers the detector missed" in html
    assert m["identifiers"][0]["hash"] in html
    text = f.read_text(encoding="utf-8")
    values = {d.text[s.start:s.end] for d in list(members) + list(nonmembers) for s in d.spans}
    values = sorted(v for v in values if len(v) >= 5 and any(c.isalpha() for c in v))  # names, places, hospitals
    assert len(values) > 10
    body = html[html.index('id="run1-missed"'):html.index('id="run1-strategies"')]
    for value in values:
        assert value.lower() not in text.lower(), "a gold value in missed.json"
        assert value not in body, "a gold value in the report's section"
    for d in docs:
        assert f'"{d.person_id}"' not in text and d.doc_id not in text


def json_free_positions(out: Path, part: str) -> pd.DataFrame:
    from toolkit.identifiers import load_identifiers

    return load_identifiers(out / f"identifiers_{part}")["positions"]
