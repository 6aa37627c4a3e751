"""Review state and review file (methods.md §7.4): decisions, undo, filters, resume, crash safety, merge, comparison."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import pandas as pd
import pytest

from toolkit.errors import ToolkitError
from toolkit.review.compare import compare_reviews, judged_names, merge_reviews
from toolkit.review.session import ReviewSession
from toolkit.review.store import (FORMAT_VERSION, ReviewFileWarning, ReviewStore, ReviewWriteError, load_decisions,
                                  read_review)

TOKENS = ["okafor", "Bowers", "nurse", "lindqvist", "Mrs", "patient"]


def candidates() -> pd.DataFrame:
    return pd.DataFrame({"token": TOKENS, "score": [0.9, 0.8, 0.7, 0.6, 0.5, 0.4],
                         "n_sentences": [3, 9, 1, 5, 2, 7], "best_rank": [4, 1, 6, 2, 3, 5],
                         "examples": [[f"seen by nurse <mask> ({t})."] for t in TOKENS]})


def test_decide_advance_undo_and_file(tmp_path):
    path = tmp_path / "review.jsonl"
    s = ReviewSession(candidates(), path, "alice")
    assert s.current == "okafor" and s.progress()["n_pending"] == 6
    rec = s.decide("name")
    assert rec["token"] == "okafor" and s.current == "Bowers"
    s.decide("not_name")
    s.decide("unsure")
    assert s.current == "lindqvist"
    assert s.progress() == {"n_total": 6, "n_decided": 3, "n_pending": 3, "name": 1, "not_name": 1, "unsure": 1}
    undone = s.undo()
    assert undone["token"] == "nurse" and s.current == "nurse" and s.decision("nurse") is None
    s.decide("name", "nurse", advance=False)
    assert s.current == "nurse"
    recs = read_review(path)
    assert [(r["token"], r["decision"]) for r in recs] == [
        ("okafor", "name"), ("Bowers", "not_name"), ("nurse", "unsure"), ("nurse", "undo"), ("nurse", "name")]
    assert all(r["format_version"] == FORMAT_VERSION and r["reviewer"] == "alice" and r["session"] == s.session
               for r in recs)
    assert recs[0]["context"] == "seen by nurse <mask> (okafor)." and recs[0]["score"] == 0.9
    assert recs[0]["timestamp"].endswith("+00:00")
    with pytest.raises(ToolkitError, match="unknown decision"):
        s.decide("maybe")
    with pytest.raises(ToolkitError, match="not a candidate"):
        s.decide("name", "someone-else")


def test_undo_restores_the_previous_decision_and_resumes(tmp_path):
    path = tmp_path / "review.jsonl"
    s = ReviewSession(candidates(), path, "alice")
    s.decide("name", "Mrs")
    s.decide("not_name", "Mrs")          # changed their mind
    s.decide("name", "okafor")
    s2 = ReviewSession(candidates(), path, "alice")  # a second review session resumes; undo reaches the first's too
    assert s2.decisions == {"Mrs": "not_name", "okafor": "name"}
    assert s2.current == "Bowers"                     # first pending in score order
    assert s2.undo()["token"] == "okafor"
    assert s2.undo()["token"] == "Mrs" and s2.decision("Mrs") == "name"  # the earlier decision stands again
    assert s2.undo()["token"] == "Mrs" and s2.decision("Mrs") is None
    assert s2.undo() is None
    assert load_decisions(path).empty


def test_filters_sort_and_table(tmp_path):
    s = ReviewSession(candidates(), tmp_path / "r.jsonl", "alice")
    s.decide("name", "lindqvist", advance=False)
    s.set_filter(sort_by="n_sentences")
    assert s.order == ["Bowers", "patient", "lindqvist", "okafor", "Mrs", "nurse"]
    s.set_filter(show="pending", min_score=0.55)
    assert s.order == ["Bowers", "okafor", "nurse"]
    s.set_filter(contains="o", sort_by="token", ascending=True)
    assert s.order == ["Bowers", "okafor"]
    s.set_filter(show="name", contains="", min_score=None)
    assert s.order == ["lindqvist"] and s.table()["decision"].tolist() == ["name"]
    s.set_filter(show="pending", sort_by="score", ascending=False)
    s.goto("okafor")
    s.decide("name")                       # leaves the "pending" view: the next shown token becomes current
    assert s.current == "Bowers"
    assert "okafor" not in s.order
    s.goto("okafor")                       # a token outside the filter: the filter opens up to show it
    assert s.current == "okafor" and s.filter.show == "all"
    with pytest.raises(ToolkitError):
        s.set_filter(show="everything")


def test_apply_script_and_resume(tmp_path):
    script = tmp_path / "script.csv"
    script.write_text("token,decision\nokafor,name\nlindqvist,name\nMrs,unsure\nunknown_token,name\n", "utf-8")
    path = tmp_path / "review.jsonl"
    s = ReviewSession(candidates(), path, "script")
    s.decide("not_name", "okafor")          # decided by hand first: the script leaves it alone
    assert s.apply_script(script, default="not_name") == 5
    d = load_decisions(path).set_index("token")["decision"].to_dict()
    assert d == {"okafor": "not_name", "lindqvist": "name", "Mrs": "unsure", "Bowers": "not_name",
                 "nurse": "not_name", "patient": "not_name"}
    bad = tmp_path / "bad.csv"
    bad.write_text("token,decision\nokafor,perhaps\n", "utf-8")
    with pytest.raises(ToolkitError, match="perhaps"):
        ReviewSession(candidates(), tmp_path / "other.jsonl", "x").apply_script(bad)


def test_newer_format_version_is_a_clear_error(tmp_path):
    path = tmp_path / "review.jsonl"
    ok = {"format_version": 1, "token": "a", "decision": "name", "reviewer": "r", "timestamp": "t"}
    path.write_text(json.dumps(ok) + "\n" + json.dumps({**ok, "format_version": FORMAT_VERSION + 1}) + "\n", "utf-8")
    with pytest.raises(ToolkitError, match=r"review\.jsonl, line 2: review file format version 2 is newer"):
        read_review(path)
    with pytest.raises(ToolkitError, match="newer"):
        ReviewSession(candidates(), path, "alice")
    before = path.read_bytes()
    with pytest.raises(ToolkitError, match="newer"):
        ReviewStore(path).append({"token": "b", "decision": "name", "reviewer": "r", "timestamp": "t"})
    assert path.read_bytes() == before     # nothing appended to a file this toolkit cannot read


def test_damaged_middle_line_is_an_error_not_skipped(tmp_path):
    path = tmp_path / "review.jsonl"
    ok = json.dumps({"format_version": 1, "token": "a", "decision": "name", "reviewer": "r", "timestamp": "t"})
    path.write_text(ok + "\n{broken\n" + ok + "\n", "utf-8")
    with pytest.raises(ToolkitError, match="line 2: not a JSON record"):
        read_review(path)
    path.write_text(ok.replace('"name"', '"perhaps"') + "\n", "utf-8")
    with pytest.raises(ToolkitError, match=r"line 1: unknown decision \(a str of 7 characters\)"):
        read_review(path)


def test_torn_last_line_is_skipped_then_cut(tmp_path):
    path = tmp_path / "review.jsonl"
    s = ReviewSession(candidates(), path, "alice")
    s.decide("name")
    s.decide("not_name")
    with open(path, "ab") as fh:          # what a crash in the middle of a write leaves behind
        fh.write(b'{"format_version": 1, "token": "nurse", "deci')
    with pytest.warns(ReviewFileWarning, match="unfinished last line"):
        s2 = ReviewSession(candidates(), path, "alice")
    assert s2.decisions == {"okafor": "name", "Bowers": "not_name"}
    with pytest.warns(ReviewFileWarning):
        s2.decide("unsure")                # the append cuts the torn line first
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [r["token"] for r in read_review(path)] == ["okafor", "Bowers", "nurse"]



def _disk_full_after(n_bytes: int):
    """An ``os.write`` that writes ``n_bytes`` of the first call's data, then fails as a full disk does (ENOSPC)."""
    real = os.write
    state = {"left": n_bytes}

    def write(fd, data):
        if state["left"] <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        n = real(fd, bytes(data[:state["left"]]))
        state["left"] -= n
        return n

    return write


def test_disk_full_is_not_acknowledged_and_leaves_the_file_as_it_was(tmp_path, monkeypatch):
    path = tmp_path / "review.jsonl"
    s = ReviewSession(candidates(), path, "alice")
    s.decide("name")
    before = path.read_bytes()
    monkeypatch.setattr(os, "write", _disk_full_after(20))   # a torn line: 20 bytes written, then ENOSPC
    with pytest.raises(ReviewWriteError, match="not saved.*as it was before") as err:
        s.decide("not_name")
    monkeypatch.undo()
    assert err.value.errno == errno.ENOSPC and isinstance(err.value, (OSError, ToolkitError))
    assert "Bowers" not in str(err.value) and "nurse" not in str(err.value)   # no record text in the message
    assert path.read_bytes() == before                      # truncated back: no torn line left
    assert s.decisions == {"okafor": "name"} and s.current == "Bowers"   # the session did not take it either
    s.decide("not_name")                                     # space again: the next decision is kept
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [(r["token"], r["decision"]) for r in read_review(path)] == [("okafor", "name"), ("Bowers", "not_name")]


def test_failed_fsync_is_not_acknowledged(tmp_path, monkeypatch):
    path = tmp_path / "review.jsonl"
    st = ReviewStore(path)
    st.append({"token": "a", "decision": "name", "reviewer": "r", "timestamp": "t"})
    before = path.read_bytes()
    real_fsync = os.fsync
    calls = {"n": 0}

    def fsync(fd):
        calls["n"] += 1
        if calls["n"] == 1:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(ReviewWriteError) as err:
        st.append({"token": "b", "decision": "name", "reviewer": "r", "timestamp": "t"})
    assert err.value.errno == errno.EIO and path.read_bytes() == before


def test_torn_tail_is_cut_before_every_append(tmp_path, monkeypatch):
    """The issue: a failed append whose clean-up fails too leaves a torn line; the next append (same store) must
    not glue its line to it — that made the whole file unreadable and lost the acknowledged decision."""
    path = tmp_path / "review.jsonl"
    st = ReviewStore(path)
    rec = {"decision": "name", "reviewer": "r", "timestamp": "t"}
    st.append({"token": "a", **rec})
    monkeypatch.setattr(os, "write", _disk_full_after(25))

    def no_truncate(fd, length):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "ftruncate", no_truncate)
    with pytest.raises(ReviewWriteError, match="partial line may remain"):
        st.append({"token": "b", **rec})
    monkeypatch.undo()
    assert not path.read_bytes().endswith(b"\n")              # the torn line is there
    with pytest.warns(ReviewFileWarning, match="line 2: unfinished last line"):
        assert [r["token"] for r in read_review(path)] == ["a"]
    with pytest.warns(ReviewFileWarning, match=r"line 2: unfinished last line \(25 bytes.*cut before appending"):
        st.append({"token": "c", **rec})                    # acknowledged: must be readable and kept
    assert st.n_torn_cut == 1
    with open(path, "ab") as fh:                             # a crash in another process, same store still open
        fh.write(b'{"format_version": 1, "tok')
    with pytest.warns(ReviewFileWarning, match="line 3: unfinished"):
        st.append({"token": "d", **rec})
    assert st.n_torn_cut == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [r["token"] for r in read_review(path)] == ["a", "c", "d"]


def test_complete_last_record_without_newline_is_kept(tmp_path):
    path = tmp_path / "review.jsonl"
    ok = {"format_version": 1, "token": "a", "decision": "name", "reviewer": "r", "timestamp": "t"}
    path.write_text(json.dumps(ok), "utf-8")                # e.g. edited by hand, no final newline
    st = ReviewStore(path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        st.append({**ok, "token": "b"})
        assert [r["token"] for r in read_review(path)] == ["a", "b"]
    assert st.n_torn_cut == 0

WRITER = textwrap.dedent("""
    import sys, time
    import pandas as pd
    from toolkit.review.session import ReviewSession
    tokens = [f"tok{i:04d}" for i in range(2000)]
    cand = pd.DataFrame({"token": tokens, "score": [1 - i / 4000 for i in range(2000)]})
    s = ReviewSession(cand, sys.argv[1], sys.argv[2])
    print("ready", flush=True)
    while s.current is not None and s.decision(s.current) is None:
        tok = s.current
        s.decide("name" if int(tok[3:]) % 3 == 0 else "not_name")
        print("saved", tok, flush=True)   # acknowledged: the line is on disk
        time.sleep(0.002)
""")


def _killed_writer(path, reviewer, n_ack: int) -> list[str]:
    """Start a writer, SIGKILL it after ``n_ack`` acknowledged decisions (a crash); return what it acknowledged."""
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path), reviewer], stdout=subprocess.PIPE, text=True)
    acked: list[str] = []
    try:
        assert proc.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 120
        while len(acked) < n_ack and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            acked.append(line.split()[1])
        os.kill(proc.pid, signal.SIGKILL)
        rest = proc.stdout.read()          # acknowledgements printed before the kill landed
        acked += [ln.split()[1] for ln in rest.splitlines() if ln.startswith("saved")]
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    return acked


@pytest.mark.slow
def test_crash_resume_and_merge(tmp_path):
    a, b = tmp_path / "alice.jsonl", tmp_path / "bob.jsonl"
    acked = _killed_writer(a, "alice", 40)
    assert len(acked) >= 40
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReviewFileWarning)  # the kill may have cut a line: skipped, never lost data
        recs = read_review(a)
    on_disk = [r["token"] for r in recs]
    assert on_disk[:len(acked)] == acked  # every acknowledged decision survived the crash, in order
    tokens = [f"tok{i:04d}" for i in range(2000)]
    cand = pd.DataFrame({"token": tokens, "score": [1 - i / 4000 for i in range(2000)]})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReviewFileWarning)
        s = ReviewSession(cand, a, "alice")
    assert s.current == tokens[len(on_disk)]  # resumes at the first pending candidate
    for _ in range(5):
        s.decide("name")
    final = read_review(a)                     # a clean file again (no warning, no torn line)
    assert [r["token"] for r in final] == tokens[:len(on_disk) + 5]

    # a second reviewer crashes too; merging both files uses every acknowledged decision
    acked_b = _killed_writer(b, "bob", 25)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReviewFileWarning)
        merged = merge_reviews([a, b]).set_index("token")
        db = load_decisions(b).set_index("token")["decision"]
    assert set(acked_b) <= set(db.index)
    assert set(merged.index) == set(load_decisions(a)["token"]) | set(db.index)
    assert (merged.loc[[f"tok{i:04d}" for i in range(0, 25, 3)], "n_reviewers"] == 2).all()


def _write(path, decisions: dict[str, str], reviewer: str) -> None:
    st = ReviewStore(path)
    for tok, d in decisions.items():
        st.append({"token": tok, "decision": d, "reviewer": reviewer, "timestamp": "2025-01-01T00:00:00+00:00"})


def test_compare_reviews_kappa_and_conflicts(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    _write(a, {"t1": "name", "t2": "name", "t3": "not_name", "t4": "not_name", "t5": "unsure", "only_a": "name"},
           "alice")
    _write(b, {"t1": "name", "t2": "not_name", "t3": "not_name", "t4": "not_name", "t5": "name", "only_b": "name"},
           "bob")
    r = compare_reviews(a, b)
    assert (r["n_common"], r["n_agree"], r["agreement"]) == (5, 3, 0.6)
    # by hand: p_o = 3/5; marginals a = (name 2, not 2, unsure 1), b = (name 2, not 3, unsure 0)
    p_e = (2 * 2 + 2 * 3 + 1 * 0) / 25
    assert r["cohen_kappa"] == pytest.approx((0.6 - p_e) / (1 - p_e))
    assert {c["token"] for c in r["conflicts"]} == {"t2", "t5"}
    assert r["confusion"]["unsure"]["name"] == 1 and (r["reviewer_a"], r["reviewer_b"]) == ("alice", "bob")


def test_merge_policies(tmp_path):
    a, b, c = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    _write(a, {"x": "name", "y": "not_name", "z": "unsure"}, "a")
    _write(b, {"x": "not_name", "y": "not_name", "z": "not_name"}, "b")
    _write(c, {"x": "not_name", "y": "not_name"}, "c")
    assert judged_names([a, b, c]) == ["x", "z"]                          # any reviewer; unsure counts as name
    assert judged_names([a, b, c], unsure_as_name=False) == ["x"]
    assert judged_names([a, b, c], policy="majority") == []
    assert judged_names([a], policy="unanimous") == ["x", "z"]
    m = merge_reviews([a, b, c]).set_index("token")
    assert m.loc["x", "conflict"] and not m.loc["y", "conflict"] and m.loc["z", "n_reviewers"] == 2
    with pytest.raises(ToolkitError, match="policy"):
        merge_reviews([a], policy="vote")


def test_widget_is_a_thin_view_over_the_session(tmp_path):
    from toolkit.review.widget import ReviewWidget, highlight

    w = ReviewWidget(ReviewSession(candidates(), tmp_path / "r.jsonl", "alice"))
    assert "okafor" in w.token.value and "0 / 6 decided" in w.progress_label.value
    w.act("name")                                   # a button
    w._on_key(w.keyboard, {"key": "x"}, [])          # a keyboard shortcut from the browser
    w._on_key(w.keyboard, {"key": "q"}, [])          # not a shortcut: ignored
    assert [(r["token"], r["decision"]) for r in read_review(tmp_path / "r.jsonl")] == [("okafor", "name"),
                                                                                       ("Bowers", "not_name")]
    assert "2 / 6 decided" in w.progress_label.value and "nurse" in w.token.value
    w.show.value = "name"                            # the filter goes to the session
    assert w.session.order == ["okafor"] and "okafor" in w.table.value and "Bowers" not in w.table.value
    w.act("undo")
    assert "Undone" in w.status.value and w.session.decision("Bowers") is None
    assert highlight("seen by <b> nurse <mask>.", "okafor") == \
        "seen by &lt;b&gt; nurse <mark><b>okafor</b></mark>."


def test_review_app_configuration(tmp_path):
    from toolkit.scrub.candidates import save_candidates
    from toolkit.review.widget import review_app, review_file_for

    missing = review_app({"REVIEW_CANDIDATES": str(tmp_path / "none.parquet")})
    assert "candidate file not found" in missing.value and "notebook" in missing.value
    assert "start it again" in missing.value and "reload this page" not in missing.value  # read when the app starts
    save_candidates(candidates(), tmp_path / "cand.parquet")
    app = review_app({"REVIEW_CANDIDATES": str(tmp_path / "cand.parquet"), "QUERY_STRING": "reviewer=Dr%20Bob/x"})
    assert review_file_for(tmp_path / "cand.parquet", "Dr Bob/x").name in app.children[0].value  # the reviewer's own
    assert "<h3" not in app.children[0].value  # the app page has its own title: it is shown once


def test_table_headers_sort_and_read_plainly(tmp_path):
    """A click on a sortable header (the browser sends ``{"sort": column}``) sorts by it, a second click reverses;
    headers show plain names and the current order."""
    from toolkit.review.widget import review_widget

    w = review_widget(candidates(), tmp_path / "r.jsonl", "alice")
    assert "<th data-sort='n_sentences'" in w.table.value and ">sentences" in w.table.value
    assert "n_sentences</th>" not in w.table.value and "ner_share" not in w.table.value.split("<tbody>")[0]
    w._on_key(None, {"sort": "token"}, [])
    assert w.session.filter.sort_by == "token" and w.session.filter.ascending
    assert w.session.order == sorted(w.session.order)  # pandas sorts tokens by code point
    assert "token ▲</th>" in w.table.value
    w._on_key(None, {"sort": "token"}, [])
    assert not w.session.filter.ascending and "token ▼</th>" in w.table.value
    w._on_key(None, {"sort": "score"}, [])
    scores = [float(c["score"]) for c in candidates().to_dict("records")]
    assert w.session.filter.sort_by == "score" and not w.session.filter.ascending
    assert w.session.order[0] == candidates().iloc[scores.index(max(scores))]["token"]
    w._on_key(None, {"sort": "examples"}, [])  # not a sortable column: ignored
    assert w.session.filter.sort_by == "score"
