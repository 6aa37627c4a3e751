"""Personal data stays where it belongs: keyed hashes a word list cannot reverse, ``purge`` leaves no identifier
behind, library runs are owner-only under any umask, executed notebooks carry a warning, and each reviewer has a
file and an identity of their own."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import threading
from pathlib import Path

import pandas as pd
import pytest
from _experiment_fixtures import CORPUS, ROOT, TINY, tiny_run, write_config

from toolkit.audit.evaluate import regurgitation
from toolkit.audit.hashing import KEY_FILE, active_key, hash_term, keyed_hashing, run_key
from toolkit.cli import main
from toolkit.corpus import load_corpus
from toolkit.errors import ToolkitError
from toolkit.identifiers import load_identifiers
from toolkit.identifiers.words import iter_words, normalize_term
from toolkit.io import private_umask
from toolkit.pipelines.purge import purge_run
from toolkit.report import build_report, collect_run, render_report

WARNING = "executed copies contain text of the corpus, including identifiers: treat them like the corpus"
HEX12 = re.compile(r"(?<![0-9a-f])[0-9a-f]{12}(?![0-9a-f])")


def old_hash(term: str) -> str:
    """The scheme this toolkit used before: the first 12 hex digits of the unkeyed SHA-256 of the word."""
    return hashlib.sha256(term.encode("utf-8")).hexdigest()[:12]


@pytest.fixture(scope="module")
def corpus():
    return load_corpus(CORPUS)


@pytest.fixture(scope="module")
def dictionary(corpus) -> set[str]:
    """What an attacker with the corpus (or a name list) computes: the old digest of every word, normalised or not,
    and of every gold span."""
    words = set()
    for d in corpus:
        for s, e in iter_words(d.text):
            words |= {d.text[s:e], normalize_term(d.text[s:e])}
        words |= {normalize_term(d.text[s.start:s.end]) for s in d.spans}
    return {old_hash(w) for w in words}


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """A copy of the shared tiny run (with its key) and its report, built in keyed-hash mode."""
    w = tmp_path_factory.mktemp("privacy") / "run"
    shutil.copytree(tiny_run(tmp_path_factory), w, symlinks=True)
    build_report(w, w / "report.html")
    return w


def _content(html: str) -> str:
    """The report without the verbatim plotly.js bundle (a fixed asset of the plotly package, no data in it)."""
    from plotly.offline import get_plotlyjs

    bundle = get_plotlyjs()
    assert html.count(bundle) == 1
    return html.replace(bundle, "")


def _top_leak(work: Path) -> str:
    run = collect_run(work)
    e, _ = run.last("clm")
    ids = load_identifiers(work / "identifiers_members")
    t = regurgitation(run.predictions("clm", e), ids)
    return t.loc[t["n_predicted"] > 0, "term"].iloc[0]


# ------------------------------------------------------------------------------------------------------------------
# 1. keyed hashes
# ------------------------------------------------------------------------------------------------------------------


def test_run_key_is_private_created_once_and_per_run(tmp_path):
    old = os.umask(0o022)
    try:
        keys: list[bytes] = []
        errors: list[BaseException] = []

        def create() -> None:
            try:
                keys.append(run_key(tmp_path / "a"))
            except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
                errors.append(exc)

        threads = [threading.Thread(target=create) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        os.umask(old)
    assert not errors and len(keys) == 8 and len(set(keys)) == 1 and len(keys[0]) == 32  # racing creators agree
    assert stat.S_IMODE((tmp_path / "a" / KEY_FILE).stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "a").stat().st_mode) == 0o700
    assert run_key(tmp_path / "a") == keys[0] and run_key(tmp_path / "b") != keys[0]
    assert hash_term("okafor", keys[0]) != hash_term("okafor", run_key(tmp_path / "b"))
    assert hash_term("okafor", keys[0]) != old_hash("okafor") and len(hash_term("okafor", keys[0])) == 12
    with pytest.raises(ToolkitError, match="key"):
        hash_term("okafor", None)
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / KEY_FILE).write_text("not hex")
    with pytest.raises(ToolkitError, match=r"\.hash_key: not a hash key"):
        run_key(tmp_path / "c")
    assert active_key() is None
    with keyed_hashing(tmp_path / "a") as k:
        assert k == keys[0] and active_key() == k
    assert active_key() is None


@pytest.mark.slow
def test_report_and_regurgitation_tokens_resist_a_dictionary_attack(work, dictionary, corpus):
    html = (work / "report.html").read_text(encoding="utf-8")
    tokens = set(HEX12.findall(_content(html)))
    key = run_key(work)
    # the report does show hashed identifiers (else the check below could not fail) ...
    leak = _top_leak(work)
    assert hash_term(leak, key) in tokens
    reg = json.loads((work / "regurgitation" / "clm" / "regurgitation.json").read_text(encoding="utf-8"))
    assert reg["examples_hashed"] and "run's key" in reg["examples_hash"]
    assert set(reg["examples_hashed"]) <= tokens  # the report and the JSON of one run agree
    # ... and hashing every word of the corpus the old way matches none of them
    assert len(dictionary) > 5000
    assert not tokens & dictionary, sorted(tokens & dictionary)[:5]
    assert old_hash(leak) not in html
    for f in (work / "regurgitation").glob("*/regurgitation.json"):
        assert not set(json.loads(f.read_text(encoding="utf-8"))["examples_hashed"]) & dictionary
    assert "keyed hash" in html and "without it the tokens cannot be matched to names" in html
    # the key is in its file only: in no report, JSON or table of the run
    for p in work.rglob("*"):
        if p.is_file() and p.name != KEY_FILE:
            data = p.read_bytes()
            assert key.hex().encode() not in data and key not in data, p


@pytest.mark.slow
def test_the_dictionary_check_catches_unkeyed_hashes(work, dictionary, monkeypatch, tmp_path):
    """The check above fails on the old scheme: a report hashed without a key is matched by the dictionary; and an
    old regurgitation.json's unkeyed examples are not shown."""
    monkeypatch.setattr("toolkit.report.formatting.hash_term", lambda term, key: old_hash(term))
    html = render_report([collect_run(work)])
    assert set(HEX12.findall(_content(html))) & dictionary
    monkeypatch.undo()
    old = tmp_path / "old"
    shutil.copytree(work, old, symlinks=True)
    f = old / "regurgitation" / "clm" / "regurgitation.json"
    rec = json.loads(f.read_text(encoding="utf-8"))
    leaked = [old_hash("okafor"), old_hash("bowers")]
    rec["examples_hashed"] = leaked
    del rec["examples_hash"]
    f.write_text(json.dumps(rec), encoding="utf-8")
    html = render_report([collect_run(old)])
    assert not any(h in html for h in leaked) and "hashed without the run's key" in html


# ------------------------------------------------------------------------------------------------------------------
# 2. executed notebooks
# ------------------------------------------------------------------------------------------------------------------


def test_notebooks_and_the_demo_summary_warn_that_executed_copies_hold_the_corpus(tmp_path):
    import jupytext

    from toolkit.pipelines.notebooks import NotebookRun, write_summary

    scripts = sorted((ROOT / "notebooks").glob("*.py"))
    assert len(scripts) >= 7
    for script in scripts:
        for nb in (jupytext.read(script), jupytext.read(script.with_suffix(".ipynb"))):
            header = next(c for c in nb.cells if c.cell_type == "markdown")
            assert WARNING in " ".join(header.source.split()).lower(), script.name
    write_summary([NotebookRun("00_quickstart", True, 1.0)], tmp_path / "index.html", profile="cpu")
    assert WARNING in (tmp_path / "index.html").read_text(encoding="utf-8").lower()


# ------------------------------------------------------------------------------------------------------------------
# 3. purge
# ------------------------------------------------------------------------------------------------------------------


def _source_words() -> set[str]:
    """Lower-cased words of the toolkit's own source, outside the sample generator: its template, CSS, option names
    and config keys ("path", "strong", "center", "page") can be written by any run on purpose."""
    words: set[str] = set()
    for path in (ROOT / "toolkit").rglob("*.py"):
        if "samples" not in path.relative_to(ROOT / "toolkit").parts:
            words |= {w.lower() for w in re.findall(r"[^\W\d_]+", path.read_text(encoding="utf-8"))}
    return words


def _gold_needles(corpus) -> set[str]:
    """Words of at least 4 letters of every gold identifier span of the corpus, lower-cased."""
    words = {w.lower() for d in corpus for s in d.spans for w in re.findall(r"[^\W\d_]{4,}", d.text[s.start:s.end])}
    return words - _source_words()


def _visible_words(report: Path) -> set[str]:
    """Lower-cased words of at least 4 letters an HTML report shows (scripts and tags left out)."""
    import html as html_lib

    text = re.sub(r"<script.*?</script>", " ", report.read_text(encoding="utf-8"), flags=re.S)
    return set(re.findall(r"[^\W\d_]{4,}", html_lib.unescape(re.sub(r"<[^>]+>", " ", text)).lower()))


def _hits(root: Path, needles: set[str]) -> dict[str, set[str]]:
    """Needles found in the raw bytes of every file under ``root`` (case-insensitive, whole words; nothing is
    decompressed or parsed: Parquet, safetensors and pickles are read as bytes). In an HTML file the verbatim
    plotly.js bundle is left out."""
    from plotly.offline import get_plotlyjs

    bundle = get_plotlyjs().encode()
    # a needle of ASCII letters matches exactly where a maximal run of ASCII letters equals it (a set lookup per
    # run); the others (é, ß, ...) through one alternation of the regular expression
    ascii_needles = {n.encode() for n in needles if re.fullmatch(r"[a-z]+", n)}
    others = sorted((n.encode() for n in needles if not re.fullmatch(r"[a-z]+", n)), key=len, reverse=True)
    pat = re.compile(rb"(?<![a-z])(" + b"|".join(re.escape(n) for n in others) + rb")(?![a-z])") if others else None
    found: dict[str, set[str]] = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink():
            data = p.read_bytes()
            if p.suffix == ".html":
                data = data.replace(bundle, b"")
            data = data.lower()
            hits = {w.decode() for w in set(re.findall(rb"[a-z]+", data)) & ascii_needles}
            if pat is not None:
                hits |= {m.group(1).decode() for m in pat.finditer(data)}
            if hits:
                found[str(p.relative_to(root))] = hits
    return found


@pytest.fixture
def purgeable(work, tmp_path, corpus):
    """A copy of the finished run with a report in keyed-hash mode, one with --show-identifiers, and the files other
    steps leave in a work directory: a review file, a candidate table, skipped records, a link to the corpus."""
    from toolkit.scrub.candidates import save_candidates

    d = tmp_path / "run"
    shutil.copytree(work, d, symlinks=True)
    build_report(d, d / "report_raw.html", show_identifiers=True)
    names = sorted(_gold_needles(corpus))[:6]  # words of gold identifier spans
    (d / "scrub").mkdir()
    (d / "scrub" / "review-alice-0123456789ab.jsonl").write_text("".join(
        json.dumps({"format_version": 1, "token": n, "decision": "name", "reviewer": "alice", "timestamp": "t",
                    "context": "seen by <mask>"}) + "\n" for n in names), encoding="utf-8")
    save_candidates(pd.DataFrame({"token": names, "score": [0.5] * len(names),
                                  "examples": [[f"seen by {n} <mask>"] for n in names]}), d / "scrub" / "candidates.parquet")
    (d / "skipped.jsonl").write_text(json.dumps({"record": 3, "doc_id": names[0], "reason": "bad span"}) + "\n")
    (d / "corpus.jsonl").symlink_to(CORPUS)
    return d


@pytest.mark.slow
def test_purge_leaves_no_identifier_and_keeps_the_numbers(purgeable, corpus, capsys):
    needles = _gold_needles(corpus)
    assert len(needles) > 500
    before = _hits(purgeable, needles)
    # the check can fail: identifier tables, predictions, models, tokenizers, review files hold the gold words
    assert {"identifiers_members/positions.parquet", "audit/clm/epoch-8/predictions.parquet",
            "runs/clm/epoch-8/tokenizer.json", "scrub/review-alice-0123456789ab.jsonl",
            "skipped.jsonl"} <= set(before), "\n".join(sorted(before))
    # the --show-identifiers report prints identifiers the keyed one does not (which words depends on what the tiny
    # model leaked: on the sample data, words of hospital names — also words of the toolkit's own source, so not
    # needles above)
    gold = {w.lower() for d in corpus for sp in d.spans for w in re.findall(r"[^\W\d_]{4,}", d.text[sp.start:sp.end])}
    assert (_visible_words(purgeable / "report_raw.html") - _visible_words(purgeable / "report.html")) & gold

    dry = purge_run(purgeable, keep_report=True, dry_run=True)
    assert _hits(purgeable, needles) == before  # a dry run removes nothing
    assert main(["purge", str(purgeable), "--keep-report"]) == 0
    out = capsys.readouterr().out
    assert f"removed {len(dry.removed)} files" in out

    after = _hits(purgeable, needles)
    assert not after, after
    left = {str(p.relative_to(purgeable)) for p in purgeable.rglob("*") if p.is_file() or p.is_symlink()}
    assert {"report.html", "manifest.json", "config.yaml", "purge.json", "audit/clm/epoch-8/metrics.json",
            "audit/clm/epoch-8/roc.json", "regurgitation/clm/regurgitation.json",
            "identifiers_members/summary.json"} <= left
    assert not [p for p in left if p.endswith((".parquet", ".safetensors", ".pt", ".bin", ".jsonl", ".pth"))]
    assert KEY_FILE not in left and "report_raw.html" not in left and "corpus.jsonl" not in left
    assert not (purgeable / "runs" / "clm" / "epoch-8").exists() and not (purgeable / "base_clm").exists()
    assert CORPUS.is_file()  # a link is removed as a link: its target is untouched
    assert json.loads((purgeable / "purge.json").read_text())["n_removed"] == len(dry.removed)


@pytest.mark.slow
def test_purge_without_keep_report_removes_reports_and_refuses_other_folders(purgeable, tmp_path, capsys):
    res = purge_run(purgeable)
    assert Path("report.html") in res.removed and not list(purgeable.rglob("*.html"))
    other = tmp_path / "documents"
    other.mkdir()
    (other / "notes.txt").write_text("x")
    assert main(["purge", str(other)]) == 2
    err = capsys.readouterr().err
    assert "does not look like a run directory" in err and "nothing removed" in err
    assert (other / "notes.txt").is_file()


# ------------------------------------------------------------------------------------------------------------------
# 4. owner-only under a library call
# ------------------------------------------------------------------------------------------------------------------


def test_private_umask_restores_the_umask():
    old = os.umask(0o022)
    try:
        with pytest.raises(RuntimeError):
            with private_umask():
                assert os.umask(0o077) == 0o077
                raise RuntimeError
        assert os.umask(0o022) == 0o022
    finally:
        os.umask(old)


@pytest.mark.slow
def test_library_run_under_umask_022_writes_nothing_group_or_other_readable(tmp_path):
    import copy

    import torch

    from toolkit.config.experiment import load_experiment
    from toolkit.pipelines.lm_experiment import run_experiment

    cfg = copy.deepcopy(TINY)
    cfg["name"] = "umask"
    cfg["corpus"].update({"n_individuals": 3, "n_public": 6})
    cfg["training"].update({"strategies": ["clm"], "epochs": [1]})
    cfg["audit"]["n_bootstrap"] = 5
    out = tmp_path / "run"
    old, threads = os.umask(0o022), torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        run_experiment(load_experiment(write_config(tmp_path / "umask.yaml", cfg)), out, progress=False, echo=False)
        assert os.umask(0o022) == 0o022  # the caller's umask is back
    finally:
        os.umask(old)
        torch.set_num_threads(threads)
    paths = [out, *out.rglob("*")]
    assert any(p.name.startswith("checkpoint-") for p in paths)  # the Trainer's own state was written
    assert (out / KEY_FILE).is_file()
    loose = {str(p.relative_to(tmp_path)): oct(stat.S_IMODE(p.lstat().st_mode)) for p in paths
             if stat.S_IMODE(p.lstat().st_mode) & 0o077}
    assert not loose, loose


# ------------------------------------------------------------------------------------------------------------------
# 5. review identities (the browser test is tests/test_review_app.py)
# ------------------------------------------------------------------------------------------------------------------


def _review_candidates(path: Path) -> Path:
    from toolkit.scrub.candidates import save_candidates

    save_candidates(pd.DataFrame({"token": ["okafor", "nurse"], "score": [0.9, 0.1],
                                  "examples": [["seen by nurse <mask>."], ["the <mask> said"]]}), path)
    return path


def test_one_review_file_per_exact_reviewer_name(tmp_path):
    from toolkit.review.widget import review_file_for

    cand = tmp_path / "candidates.parquet"
    names = ["r smith", "r/smith", "r_smith", "R smith", "r  smith", "r.smith", "../r smith", "ř smith", "r smith?"]
    files = [review_file_for(cand, n) for n in names]
    assert len(set(files)) == len(names)
    assert all(f.parent == tmp_path and f.name.startswith("review-") and f.suffix == ".jsonl" for f in files)
    assert review_file_for(cand, "r smith") == review_file_for(cand, " r smith ") == files[0]


def test_reviewer_identity_is_fixed_for_the_session(tmp_path):
    from toolkit.review import read_review
    from toolkit.review.widget import review_app, review_file_for, review_widget

    cand = _review_candidates(tmp_path / "candidates.parquet")
    w = review_widget(cand, review_file_for(cand, "alice"), "alice")
    assert w.reviewer.disabled
    w.reviewer.value = "mallory"  # a change forced through the model: it reaches neither the session nor the file
    w.act("name")
    assert [r["reviewer"] for r in read_review(review_file_for(cand, "alice"))] == ["alice"]
    assert not review_file_for(cand, "mallory").exists()
    # an app started for alice refuses a page address naming bob; a shared REVIEW_FILE holding alice's decisions is
    # refused to bob
    env = {"REVIEW_CANDIDATES": str(cand), "REVIEWER": "alice", "QUERY_STRING": "token=x&reviewer=bob"}
    assert "started for one reviewer" in review_app(env).value
    env = {"REVIEW_CANDIDATES": str(cand), "REVIEW_FILE": str(review_file_for(cand, "alice")),
           "QUERY_STRING": "reviewer=bob"}
    assert "other reviewer" in review_app(env).value
    app = review_app({"REVIEW_CANDIDATES": str(cand), "QUERY_STRING": "token=x&reviewer=r%2Fsmith"})
    assert review_file_for(cand, "r/smith").name in app.children[0].value
