"""The HTML report: every section, self-contained, and no raw identifier unless --show-identifiers."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from _attack_fixtures import write_run_attacks
from _experiment_fixtures import CORPUS, ROOT, tiny_run

from toolkit.audit.evaluate import identifier_sets, regurgitation
from toolkit.audit.hashing import hash_term, run_key
from toolkit.cli import main
from toolkit.corpus import load_corpus
from toolkit.errors import ToolkitError
from toolkit.identifiers import load_identifiers
from toolkit.identifiers.words import iter_words, normalize_term
from toolkit.report import APPENDIX, SECTIONS, build_report, collect_run

pytestmark = pytest.mark.slow  # a tiny experiment is trained (the shared tiny run) for every test

EMAILS = ROOT / "data_samples" / "email" / "train.jsonl"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """The shared tiny run plus fixture files in the formats of the extraction (issue 5) and scrubbing (issue 6)
    steps, holding real identifiers of the sample data: leaked addresses and reviewed name tokens; and attack battery
    and verdict files (``attacks/``)."""
    src = tiny_run(tmp_path_factory)
    work = tmp_path_factory.mktemp("report") / "run"
    shutil.copytree(src, work)
    write_run_attacks(work)
    emails = [d.text[s.start:s.end] for d in list(load_corpus(EMAILS))[:40] for s in d.spans if s.label == "EMAIL"]
    emails = list(dict.fromkeys(emails))[:6]
    ex = work / "extraction" / "rmft"
    ex.mkdir(parents=True)
    pd.DataFrame({"checkpoint": [0, 1, 2], "step": [0, 10, 20], "epoch": [0.0, 0.5, 1.0],
                  "name": ["base", "step-10", "step-20"], "ter": [0.0, 1.5, 3.0], "ser": [None, 3.0, 4.5],
                  "n_leaked": [0, 2, 4], "n_leaked_uncopied": [0, 1, 2], "n_extracted": [1, 5, 9],
                  "n_seen": [0, 50, 80], "n_original": [133] * 3, "target_hits": [0.0, 1.0, 2.0],
                  "perplexity": [30.0, 20.0, 18.0], "seconds": [1.0, 1.0, 1.0],
                  "leaked": [[], emails[:2], emails[2:6]]}).to_parquet(ex / "extraction.parquet")
    pd.DataFrame({"technique": ["rmft"] * 3 + ["dedup"] * 3, "tau": [0.0, 5.0, 10.0] * 2,
                  "maxter": [float("nan"), 40.0, 60.0, 10.0, 10.0, 25.0],
                  "feasible": [False, True, True, True, True, True]}).to_parquet(work / "extraction" / "maxter.parquet")
    (work / "extraction" / "aurc.json").write_text(json.dumps(
        {"tau_max": 10.0, "aurc": {"rmft": 437.5, "dedup": 162.5}, "infeasible_below": {"rmft": 2.5, "dedup": 0.0}}))
    members = load_identifiers(work / "identifiers_members")
    names = sorted(set(members["positions"].loc[members["positions"]["category"] == "NAME", "term"].astype(str)))[:5]
    scrub = work / "scrub"
    scrub.mkdir()
    rows = [{"format_version": 1, "token": t, "decision": "name", "reviewer": "reviewer-a",
             "timestamp": f"2025-01-0{i + 1}T10:00:00+00:00", "context": f"seen by {t} <mask> today", "score": 0.5,
             "session": "s1"} for i, t in enumerate(names)]
    rows += [{"format_version": 1, "token": "daily", "decision": d, "reviewer": "reviewer-a",
              "timestamp": f"2025-01-09T10:0{j}:00+00:00", "context": "take <mask>", "score": 0.1, "session": "s2"}
             for j, d in enumerate(["name", "undo", "not_name"])]
    (scrub / "review-reviewer-a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (scrub / "anonymity.json").write_text(json.dumps(
        {"n_predictions": 4000, "n_name_like": 8, "share_name_like": 0.002, "best_rank": 3,
         "n_sentences_with_name": 7, "n_original_name_predicted": 1}))
    return {"dir": work, "emails": emails, "names": names}


@pytest.fixture(scope="module")
def reports(run_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("html")
    hidden = build_report(run_dir["dir"], out / "report.html")
    shown = build_report(run_dir["dir"], out / "report_raw.html", show_identifiers=True)
    return hidden.read_text(encoding="utf-8"), shown.read_text(encoding="utf-8")


def _content(html: str) -> str:
    """The report without the inlined plotly.js bundle (figures' data stay in: they are report content)."""
    start = html.index('<script type="text/javascript">')
    end = html.index("</script>", start)
    assert len(html[start:end]) > 1_000_000  # the bundle is there, once
    return html[:start] + html[end:]


def _words(text: str) -> set[str]:
    return {normalize_term(text[s:e]) for s, e in iter_words(text)}


def _source_words() -> set[str]:
    """Words the toolkit itself writes into a report (template, captions, figure titles, strategy descriptions)."""
    files = [*sorted((ROOT / "toolkit" / "report").glob("*.py")), *sorted((ROOT / "toolkit" / "plots").glob("*.py")),
             ROOT / "toolkit" / "strategies" / "__init__.py"]
    return set().union(*(_words(f.read_text(encoding="utf-8")) for f in files))


def test_every_section_and_self_contained(reports):
    html, _ = reports
    for sid, title in SECTIONS + APPENDIX:
        assert f'id="run1-{sid}"' in html, sid
        assert html.count(title) >= 1, title
    for heading in ("Summary in plain language", "What the figures show and do not show", "Opinion 28/2024",
                    "insignificant", "not a legal determination"):
        assert heading in html, heading
    # offline: one inline plotly.js, figures drawn by it, no external script, stylesheet or CDN
    assert html.count('<script type="text/javascript">') == 1
    assert not re.search(r"<script[^>]*\bsrc=", html) and "<link" not in html
    assert not re.findall(r"https?://", _content(html))  # outside the bundle: no URL at all (nothing to fetch)
    assert html.count("Plotly.newPlot") >= 8  # identifier CDFs, term sharing, trade-offs, ROC, regurgitation, ...
    # sections filled from the fixture files of the extraction and scrubbing steps
    assert "437.500" in html and "MaxTER" in html and "Training-data extraction rate" in html
    assert "review log" in html and "share name-like" in html and "0.20%" in html
    vocab = html[html.index('id="run1-vocabulary"'):html.index('id="run1-manifest"')]
    assert re.search(r"<th>now name</th>\s*<td>5</td>", vocab) and re.search(r"<th>undone</th>\s*<td>1</td>", vocab)
    assert re.search(r"<th>now not_name</th>\s*<td>1</td>", vocab) and "reviewer-a" not in html
    assert "TPR @ FPR 10%" in html and "clm (epoch 8)" in html and "base (epoch 0)" in html
    assert "manifest.json" in html and "torch" in html


def test_no_raw_identifier_by_default(reports, run_dir):
    html, shown = reports
    work = run_dir["dir"]
    content = _content(html)
    words = _words(re.sub(r"<[^>]+>", " ", content))
    ids_all = load_identifiers(work / "identifiers_all")
    sets = identifier_sets(ids_all)
    I = sets["I_direct"] | sets["I_indirect"]

    # the corpus' identifiers: words of the gold spans of every audited document that are identifiers (names,
    # places, record and phone numbers ...), and the planted rare patient terms (indirect identifiers)
    corpus = load_corpus(CORPUS)
    audited = set(ids_all["positions"]["doc_id"])
    span_words = {normalize_term(d.text[s.start:s.end][a:b]) for d in corpus if d.doc_id in audited
                  for s in d.spans for a, b in iter_words(d.text[s.start:s.end])}
    rare = set(pd.read_csv(CORPUS.parent / "term_categories.csv")["term"].map(normalize_term))
    # and what the models leaked: the identifier types predicted at any audited checkpoint
    run = collect_run(work)
    ids_members = load_identifiers(work / "identifiers_members")
    leaked = set()
    for (s, e) in run.audits:
        t = regurgitation(run.predictions(s, e), ids_members)
        leaked |= set(t.loc[t["n_predicted"] > 0, "term"])
    assert leaked, "the tiny run should leak identifiers (else this test could not fail)"

    def identifying(w: str) -> bool:  # words with a letter, or long digit runs (record / phone numbers)
        return (any(c.isalpha() for c in w) and len(w) >= 3) or (w.isdigit() and len(w) >= 5)

    boiler = _source_words()
    checked = {w for w in ((span_words | rare) & I) | leaked if identifying(w)} - boiler
    assert len(checked) > 50 and leaked - boiler
    assert not (words & checked), sorted(words & checked)[:20]
    # multi-word spans (full names, hospitals, addresses) never appear as such either
    spans = {d.text[s.start:s.end] for d in corpus if d.doc_id in audited for s in d.spans
             if " " in d.text[s.start:s.end]}
    assert not [s for s in spans if s in content][:5]
    # fixture identifiers: leaked e-mail addresses and reviewed names are hashed
    for e in run_dir["emails"]:
        assert e not in html and e.lower() not in html.lower()
    for n in run_dir["names"]:
        assert normalize_term(n) not in words
    assert hash_term(normalize_term(run_dir["emails"][0]), run_key(work)) in html
    assert "seen by" not in content  # review contexts never shown
    # ... and leaked identifiers are shown hashed, findable by whoever knows the word
    assert hash_term(_top_leak(work), run_key(work)) in html


def _top_leak(work: Path) -> str:
    """The most often predicted leaked identifier of clm's last checkpoint on its members."""
    run = collect_run(work)
    e, _ = run.last("clm")
    ids = load_identifiers(work / "identifiers_members")
    preds = run.predictions("clm", e)
    t = regurgitation(preds[preds["person_id"].isin(set(ids["individuals"]["person_id"]))], ids)
    return t.loc[t["n_predicted"] > 0, "term"].iloc[0]


def test_show_identifiers_prints_them(reports, run_dir):
    _, shown = reports
    content = _content(shown)
    words = _words(re.sub(r"<[^>]+>", " ", content))
    assert "contains raw identifiers" in shown
    for e in run_dir["emails"][:2]:  # the first checkpoint's leaks (the table shows five per checkpoint)
        assert e in shown
    for n in run_dir["names"]:
        assert normalize_term(n) in words
    # the most predicted leaked identifier of the clm model is in the leaked-identifier table, in clear
    assert _top_leak(run_dir["dir"]) in words


def test_report_cli_and_errors(run_dir, tmp_path, capsys):
    out = tmp_path / "r.html"
    assert main(["report", str(run_dir["dir"]), str(run_dir["dir"]), "--out", str(out), "--title", "Two runs"]) == 0
    html = out.read_text(encoding="utf-8")
    assert 'id="run2-mia"' in html and "Two runs" in html and "tiny_causal (2)" in html
    assert "self-contained" in capsys.readouterr().out
    assert main(["report", str(tmp_path / "missing"), "--out", str(out)]) == 2
    assert "not a directory" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    with pytest.raises(ToolkitError, match="no run outputs found"):
        build_report(tmp_path / "empty", tmp_path / "x.html")
    bad = tmp_path / "badlog"
    bad.mkdir()
    rec = {"format_version": 1, "token": "x", "decision": "name", "reviewer": "r", "timestamp": "t"}
    (bad / "review.jsonl").write_text(json.dumps(rec) + "\n{not json\n" + json.dumps(rec) + "\n")
    with pytest.raises(ToolkitError, match=r"review.jsonl, line 2: not a JSON record"):
        collect_run(bad)
    (bad / "review.jsonl").write_text('{"token": "x"}\n')  # not a review log (no decision): ignored
    with pytest.raises(ToolkitError, match="no run outputs found"):
        collect_run(bad)


def test_notebook_work_dir_without_manifest(run_dir, tmp_path):
    """A notebook work directory (no manifest, no config) is reported too; the kind is read from the metrics."""
    work = tmp_path / "nb"
    shutil.copytree(run_dir["dir"], work, ignore=shutil.ignore_patterns("manifest.json", "config.yaml"))
    run = collect_run(work)
    assert run.manifest is None and run.kind == "clm" and run.strategies == ["clm", "ppclm"]
    html = build_report(work, tmp_path / "nb.html").read_text(encoding="utf-8")
    assert "No manifest.json in this directory" in html and 'id="run1-tradeoff"' in html


@pytest.mark.parametrize("status", ["running", "failed"])
def test_interrupted_run_says_so_at_the_top(run_dir, tmp_path, status):
    """A run killed (its manifest still says ``running``) or stopped by an error (``failed``) is reported with a
    banner above the verdict; a finished run has none. The error's message is not shown (it may quote data)."""
    work = tmp_path / "run"
    shutil.copytree(run_dir["dir"], work)
    html = build_report(work, tmp_path / "done.html").read_text(encoding="utf-8")
    assert "Incomplete run" not in html
    m = json.loads((work / "manifest.json").read_text())
    m["status"] = status
    m["steps"] = m["steps"][:5]
    if status == "failed":
        m["error"] = "KeyError: 'okafor'"
    (work / "manifest.json").write_text(json.dumps(m))
    html = build_report(work, tmp_path / "cut.html").read_text(encoding="utf-8")
    assert "Incomplete run" in html and html.index("Incomplete run") < html.index('id="verdict"')
    assert "Only the 5 steps it recorded" in html
    banner = html[html.index("Incomplete run"):].split("</div>")[0]
    assert ("interrupted" in banner) == (status == "running") and "okafor" not in html.split('id="verdict"')[0]
    if status == "failed":
        assert "stopped with an error (KeyError)" in banner


def test_a_base_model_that_separates_the_groups_is_reported():
    """The base model saw neither group: an attack on it whose AUC interval lies above 0.55 means the groups differ
    (as the sample generator's splits did before 2026-11-26) — the report says so above the verdicts; at chance it
    says nothing."""
    from toolkit.audit.verdict import verdict
    from toolkit.report.verdicts import split_shift, verdicts_html

    def with_verdict(base):  # the report reads the check the verdict recorded (its ``separation``), re-running none
        return {**base, "verdict": verdict(attacks=base["attacks"]).to_dict()}

    def models(lo):
        base = with_verdict({"strategy": "base",
                             "attacks": {"n_members": 200, "n_nonmembers": 200,
                                         "attacks": {"loss": {"auc": lo + 0.05, "auc_ci": [lo, lo + 0.1]},
                                                     "zlib": {"auc": 0.5, "auc_ci": [0.4, 0.6]}}}})
        return {"base (epoch 0)": base, "clm (epoch 8)": {"strategy": "clm", "verdict": {"level": "red", "rule": "membership_auc",
                                                                           "figure": "AUC 0.9"}}}

    assert split_shift(models(0.50)) is None and split_shift({"clm (epoch 8)": {"strategy": "clm"}}) is None
    # its AUCs tested two-sided against 0.5 (Holm), as the verdict's split check: 0.55 on 200 + 200 is p = 0.08
    text = split_shift(models(0.56))
    assert text and "loss AUC 0.610, 95% interval [0.560, 0.660]" in text and "differ before fine-tuning" in text
    # a model's verdict that says so is reported as it says it
    said = {"clm": {"strategy": "clm", "verdict": {"level": "green", "split": "members and non-members differ x"}}}
    assert split_shift(said).startswith("Members and non-members differ x.")

    class Run:
        label = "r"

        def __init__(self, m):
            self.m = m

        def attack_models(self):
            return self.m

    assert "Members and non-members differ" in verdicts_html([Run(models(0.56))])
    assert "Members and non-members differ" not in verdicts_html([Run(models(0.5))])

    # an attacks.json without bootstrap intervals: the Hanley–McNeil interval from the counts, as the verdict's
    # (AUC 0.70 on 200 + 200: SE² = [A(1−A) + 199(Q1 − A²) + 199(Q2 − A²)] / 200², Q1 = A/(2−A), Q2 = 2A²/(1+A))
    import math
    a, n = 0.70, 200
    q1, q2 = a / (2 - a), 2 * a * a / (1 + a)
    lo = a - 1.959964 * math.sqrt((a * (1 - a) + (n - 1) * (q1 - a * a) + (n - 1) * (q2 - a * a)) / (n * n))
    bare = {"base": {"strategy": "base", "attacks": {"n_members": n, "n_nonmembers": n,
                                                     "attacks": {"loss": {"auc": a}}}}}
    assert f"[{lo:.3f}, " in split_shift({"base": with_verdict(bare["base"])}) and 0.64 < lo < 0.66
    bare["base"]["attacks"]["attacks"]["loss"]["auc"] = 0.53  # z = 0.03 / √(401 / 480000) = 1.04: not significant
    assert split_shift({"base": with_verdict(bare["base"])}) is None
    del bare["base"]["attacks"]["n_members"]  # no counts, no interval: nothing claimed
    bare["base"]["attacks"]["attacks"]["loss"]["auc"] = 0.9
    assert split_shift({"base": with_verdict(bare["base"])}) is None
    # a verdict file older than the recorded check (no ``separation``): nothing re-tested, nothing claimed
    assert split_shift({"base": {**models(0.56)["base (epoch 0)"], "verdict": {"level": "amber"}}}) is None
