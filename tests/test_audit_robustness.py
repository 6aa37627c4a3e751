"""Fault injection on `python -m toolkit audit` (issue 25): options below the config's minima refused, one audit per
folder (the `run` lock), a full disk reported in one line after the verdicts, the window clipped and recorded, an
earlier audit's outputs removed before new work, no raw identifier in the files PRIVACY.md lists as free of them,
`--pll-positions` passed to the attacks, one line per step.

One tiny random GPT-2 (64 positions) audited once per module; each test works on a copy of that finished folder, so
the steps it does not change are cached."""

from __future__ import annotations

import errno
import functools
import io
import json
import re
import shutil
import socket
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pandas as pd
import pytest
import torch

from toolkit.cli import main
from toolkit.config.sections import AttacksSection
from toolkit.corpus import Corpus, load_corpus, write_jsonl
from toolkit.models import train_tokenizer
import toolkit.audit.model_audit as model_audit
from toolkit.pipelines import audit_only
from toolkit.pipelines.audit_only import model_label
from toolkit.pipelines.lock import LOCK_NAME

ROOT = Path(__file__).resolve().parents[1]
SMALL = dict(pii_candidates=5, pii_occurrences=12, pii_window=32, memorisation_occurrences=40, canary_references=50)
#: files PRIVACY.md lists as holding raw identifiers (the identifier tables the audit makes from a detector)
RAW_FOLDERS = ("identifiers_members", "identifiers_all")


@pytest.fixture(autouse=True)
def _small_attacks(monkeypatch):
    monkeypatch.setattr(audit_only, "AttacksSection", functools.partial(AttacksSection, **SMALL))


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """The corpus (4 + 4 patients), the tiny model, the audit's arguments and a finished audit folder (with what it
    printed)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    root = tmp_path_factory.mktemp("audit_robust")
    notes = load_corpus(ROOT / "data_samples/clinical/notes.jsonl")
    docs = Corpus(list(notes.filter(split="train")[:4]) + list(notes.filter(split="heldout")[:4]))
    corpus = write_jsonl(docs, root / "notes.jsonl")
    tok = train_tokenizer([d.text for d in notes.filter(split="public")[:30]], "clm", 400)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=1, n_head=2, n_inner=64,
                                       n_positions=64, pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
                                       eos_token_id=tok.eos_token_id))
    model_dir = root / "tiny-gpt2"
    model.save_pretrained(model_dir)
    tok.save_pretrained(model_dir)
    args = [str(model_dir), "--corpus", str(corpus), "--members", "train", "--nonmembers", "heldout", "--detector",
            "oracle", "--window", "64", "--bootstrap", "20", "--reference", "none"]
    out, printed = root / "done", io.StringIO()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with pytest.MonkeyPatch.context() as mp, redirect_stdout(printed):
            mp.setattr(audit_only, "AttacksSection", functools.partial(AttacksSection, **SMALL))
            assert main(["audit", *args, "--out", str(out)]) == 0
    finally:
        torch.set_num_threads(threads)
    return {"docs": docs, "model": model_dir, "args": args, "done": out, "printed": printed.getvalue(),
            "label": model_label(model_dir)}


def _copy(setup, tmp_path) -> Path:
    out = tmp_path / "out"
    shutil.copytree(setup["done"], out)
    return out


def _audit(setup, out, *extra) -> int:
    return main(["audit", *setup["args"], *extra, "--out", str(out), "--quiet"])


def _json(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("option,value,message", [
    ("--bootstrap", "-1", "--bootstrap: must be an integer >= 0"),
    ("--window", "3", "--window: must be an integer >= 8"),
    ("--seed", "-2", "--seed: must be an integer >= 0"),
    ("--n-individuals", "0", "--n-individuals: must be an integer >= 1"),
    ("--k", "1", "--k: must be an integer >= 2"),
    ("--pll-positions", "0", "--pll-positions: must be 'all' or an integer >= 1"),
    ("--pii-pll-copies", "0", "--pii-pll-copies: must be 'all', 'candidate' or an integer >= 1"),
])
def test_options_below_the_config_minima_are_refused_before_anything_is_written(setup, tmp_path, capsys, option,
                                                                                value, message):
    out = tmp_path / "o"
    assert _audit(setup, out, option, value) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
    assert not out.exists()


def test_bootstrap_zero_gives_hanley_mcneil_intervals_and_says_so(setup, tmp_path):
    done = _json(setup["done"] / "attacks.json")
    assert (done["n_bootstrap"], done["auc_ci_method"]) == (20, "bootstrap")
    out = _copy(setup, tmp_path)
    assert _audit(setup, out, "--bootstrap", "0") == 0
    att = _json(out / "attacks.json")
    assert (att["n_bootstrap"], att["auc_ci_method"]) == (0, "hanley-mcneil")
    assert att == _json(out / "attacks" / setup["label"] / "attacks.json")
    for name, r in att["attacks"].items():
        lo, hi = r["auc_ci"]
        assert 0.0 <= lo <= r["auc"] <= hi <= 1.0, name
    assert "Hanley–McNeil interval" in (out / "report.html").read_text(encoding="utf-8")


def test_window_beyond_the_model_is_clipped_recorded_and_noted(setup, tmp_path, capsys):
    out = _copy(setup, tmp_path)
    before = {p: p.read_text() for p in out.rglob("step.json")}
    assert _audit(setup, out, "--window", "100000") == 0   # the same window as 64: every step cached
    err = capsys.readouterr().err
    assert "window 100000 tokens is more than the model's 64 positions: the audit uses 64 tokens" in err
    assert {p: p.read_text() for p in out.rglob("step.json")} == before
    att = _json(out / "attacks.json")
    assert (att["window"], att["window_requested"]) == (64, 100000)
    assert att == _json(out / "attacks" / setup["label"] / "attacks.json")
    assert "window 64 tokens of the 100000 asked" in (out / "report.html").read_text(encoding="utf-8")
    assert _json(setup["done"] / "attacks.json")["window"] == 64


def test_a_second_audit_of_the_same_folder_stops_naming_the_holder(setup, tmp_path, capsys):
    out = _copy(setup, tmp_path)
    top = {n: (out / n).read_bytes() for n in ("attacks.json", "verdicts.json", "report.html")}
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (out / LOCK_NAME).write_text(json.dumps({"pid": child.pid, "host": socket.gethostname()}))
        assert _audit(setup, out) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and f"pid {child.pid}" in err and "another run" in err, err
        assert {n: (out / n).read_bytes() for n in top} == top        # nothing removed nor rewritten
        assert _json(out / LOCK_NAME)["pid"] == child.pid
    finally:
        child.kill()
        child.wait()
    # the holder died: its lock is taken over, the audit runs, and its own lock is gone afterwards
    assert _audit(setup, out) == 0
    assert not (out / LOCK_NAME).exists() and (out / "report.html").is_file()


@pytest.mark.parametrize("target,code", [("report", errno.ENOSPC), ("json", errno.EDQUOT), ("report", errno.EROFS)])
def test_a_full_disk_is_one_line_after_the_verdicts(setup, tmp_path, capsys, monkeypatch, target, code):
    import toolkit.io
    import toolkit.report.render

    out = _copy(setup, tmp_path)

    def full(*args, **kwargs):
        raise OSError(code, "simulated")

    if target == "report":
        monkeypatch.setattr(toolkit.report.render, "atomic_write_text", full)
    else:
        monkeypatch.setattr(toolkit.io, "atomic_write_json", full)
    assert _audit(setup, out) == 2
    printed = capsys.readouterr()
    verdict = _json(setup["done"] / "verdicts.json")[setup["label"]]
    assert printed.out.strip().splitlines()[-1].startswith(f"{setup['model']}: {verdict['level']}")
    err = printed.err.strip()
    name = "report.html" if target == "report" else "attacks.json"
    assert len(err.splitlines()) == 1 and name in err and errno.errorcode[code] in err, err
    assert "Traceback" not in err


def test_an_interrupted_rerun_leaves_no_stale_verdict_and_the_report_says_why(setup, tmp_path, monkeypatch, capsys):
    out = _copy(setup, tmp_path)
    label = setup["label"]
    for parent, step in ((out / "attacks", "attacks"), (out / "audit", "audit")):  # another model audited here before
        shutil.copytree(parent / label, parent / "other-model")
        info = _json(parent / "other-model" / "step.json")
        (parent / "other-model" / "step.json").write_text(json.dumps({**info, "step": f"{step}/other-model"}))

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(model_audit, "audit_model", killed)
    assert _audit(setup, out, "--seed", "1") == 130     # interrupted during the attacks of the new seed
    for name in ("attacks.json", "identifiers.json", "verdicts.json", "report.html"):
        assert not (out / name).exists(), name
    assert not (out / "attacks" / "other-model").exists() and not (out / "audit" / "other-model").exists()
    assert not (out / "attacks" / label / "verdict.json").exists()          # the earlier seed's verdict went with its folder
    assert _json(out / "audit" / label / "step.json")["status"] == "done"
    capsys.readouterr()
    assert main(["report", str(out)]) == 0
    text = (out / "report.html").read_text(encoding="utf-8")
    assert f"The audit of model {label} did not finish" in text and "other-model" not in text


def _identifier_words(docs) -> set[str]:
    """Names and record numbers of the test corpus: the words (4+ characters) of its PATIENT, DOCTOR and ID spans."""
    words = set()
    for d in docs:
        for s in d.spans:
            if s.label in ("PATIENT", "DOCTOR", "ID"):
                words |= {w for w in re.findall(r"\w+", d.text[s.start:s.end]) if len(w) >= 4}
    return words


def _found(root: Path, words: set[str]) -> dict[str, set[str]]:
    """``file → identifiers found`` in every file under ``root`` but the identifier tables (parquet read cell by cell;
    report.html without the plotly.js bundle), matched as whole words, case-insensitively."""
    from plotly.offline import get_plotlyjs

    pattern = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, sorted(words))) + r")(?!\w)", re.IGNORECASE)
    hits = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if not p.is_file() or rel.parts[0] in RAW_FOLDERS:
            continue
        if p.suffix == ".parquet":
            frame = pd.read_parquet(p)
            text = "\n".join(" ".join(map(str, frame[c].tolist())) for c in frame.columns)
        else:
            text = p.read_bytes().decode("utf-8", errors="replace").replace(get_plotlyjs(), "")
        found = {m.lower() for m in pattern.findall(text)}
        if found:
            hits[str(rel)] = found
    return hits


def test_no_file_of_the_audit_holds_a_raw_identifier_unless_privacy_md_says_so(setup, tmp_path):
    words = _identifier_words(setup["docs"])
    assert len(words) >= 8
    files = {p.relative_to(setup["done"]) for p in setup["done"].rglob("*") if p.is_file()}
    assert {"audit/" + setup["label"] + "/predictions.hashed.parquet", "report.html"} <= {str(f) for f in files}
    assert _found(setup["done"], words) == {}
    privacy = (ROOT / "PRIVACY.md").read_text(encoding="utf-8")
    listed = privacy[privacy.index("### What `python -m toolkit audit` writes"):]
    listed = listed[:listed.index("\n#")]
    for f in files:   # every file the audit writes is in PRIVACY.md's list of the audit's outputs
        assert re.search(r"`(?:[^`\s]*/)?" + re.escape(f.name) + "`", listed), f
    assert "`OUT/audit/<model>/predictions.parquet`, `mia_predictions.parquet` (only with `--raw-predictions`" in listed
    # the scan finds them where they are: the words themselves, with --raw-predictions
    out = _copy(setup, tmp_path)
    assert _audit(setup, out, "--raw-predictions") == 0
    hits = _found(out, words)
    raw = {f"audit/{setup['label']}/predictions.parquet", f"audit/{setup['label']}/mia_predictions.parquet"}
    assert set(hits) == raw and all(hits.values())
    assert not (out / "audit" / setup["label"] / "predictions.hashed.parquet").exists()
    # the count attack is the same on the hashes as on the words
    hashed, clear = (pd.read_parquet(d / "attacks" / setup["label"] / "scores.parquet") for d in (setup["done"], out))
    pd.testing.assert_series_equal(hashed["identifier_count"], clear["identifier_count"])
    assert len(clear) == len({d.person_id for d in setup["docs"]})        # one row per individual


def test_pll_positions_reach_the_attacks_and_are_recorded(setup, tmp_path, monkeypatch):
    seen = []
    original = model_audit.audit_model

    def spy(*args, settings, **kwargs):
        seen.append(settings.options.pll_positions)
        return original(*args, settings=settings, **kwargs)

    monkeypatch.setattr(model_audit, "audit_model", spy)
    out = _copy(setup, tmp_path)
    assert _audit(setup, out, "--pll-positions", "4") == 0
    assert seen == [4] and _json(out / "attacks.json")["pll_positions"] == 4
    assert _json(setup["done"] / "attacks.json")["pll_positions"] == "all"
    with pytest.raises(SystemExit):
        main(["audit", *setup["args"], "--pll-positions", "some", "--out", str(tmp_path / "x")])


def test_pll_copies_of_membership_and_of_pii_inference_reach_the_attacks(setup, tmp_path, monkeypatch):
    """``--pii-pll-copies`` sets PII inference's and the canaries' estimator apart from membership's; without it they
    follow ``--pll-copies``; attacks.json records both."""
    seen = []
    original = model_audit.audit_model

    def spy(*args, settings, **kwargs):
        seen.append((settings.options.pll_copies, settings.options.pii_pll_copies))
        return original(*args, settings=settings, **kwargs)

    monkeypatch.setattr(model_audit, "audit_model", spy)
    for flags, want in ((["--pll-copies", "4", "--pii-pll-copies", "8"], (4, 8)), (["--pll-copies", "4"], (4, 4))):
        out = _copy(setup, tmp_path / str(len(seen)))
        assert _audit(setup, out, *flags) == 0
        got = _json(out / "attacks.json")
        assert seen[-1] == want and (got["pll_copies"], got["pii_pll_copies"]) == want


def test_one_line_per_step_unless_quiet(setup, tmp_path, capsys):
    label = setup["label"]
    lines = setup["printed"].splitlines()
    for what in ("identifiers of the members", f"{label}: §4 probe", f"{label}: membership battery"):
        assert any(line.startswith(f"[audit] {what}") and line.endswith(" ...") for line in lines), what
        assert any(line.startswith(f"[audit] {what}") and re.search(r"done in \d+\.\d s$", line)
                   for line in lines), what
    assert lines[-1].startswith(f"{setup['model']}: ")                   # the verdict is the last line
    out = _copy(setup, tmp_path)
    assert main(["audit", *setup["args"], "--out", str(out)]) == 0
    again = capsys.readouterr().out.splitlines()
    assert f"[audit] {label}: membership battery, PII inference, memorisation: up to date (cached)" in again
    assert _audit(setup, out) == 0
    assert not [line for line in capsys.readouterr().out.splitlines() if line.startswith("[audit]")]


def test_the_count_attack_on_keyed_hashes_equals_the_one_on_words(setup):
    """Predictions naming some of each individual's indirect identifiers (alone, after punctuation, beside another
    word, in another person's rows): the counts on hashed tables are those on the words, and not all zero."""
    from toolkit.audit.evaluate import indirect_by_person, membership_scores
    from toolkit.identifiers import load_identifiers
    from toolkit.pipelines.audit_outputs import hash_predictions, hashed_membership_scores

    docs, ids = setup["docs"], load_identifiers(setup["done"] / "identifiers_all")
    by_person = indirect_by_person(ids, docs)
    people = list(by_person)
    rows = []
    for i, p in enumerate(people):
        terms = sorted(by_person[p])
        other = sorted(by_person[people[(i + 1) % len(people)]])
        for j, t in enumerate(terms[: i + 1]):   # person i predicts i + 1 of their types, in varied forms
            rows.append({"person_id": p, "original": t.upper(), "predicted": [t, f": {t.title()}", f"al {t}"][j % 3],
                         "top_k": [t, "the", ""]})
        rows += [{"person_id": p, "original": "x", "predicted": w, "top_k": []} for w in other[:2]] + \
            [{"person_id": p, "original": "x", "predicted": None, "top_k": []}]
    frame = pd.DataFrame(rows)
    key = bytes(range(32))
    clear = membership_scores(frame, ids, docs)
    hashed = hashed_membership_scores(hash_predictions(frame, key), ids, docs, key)
    pd.testing.assert_series_equal(hashed, clear)
    assert clear.sum() >= len(people) and clear.nunique() > 1
    table = hash_predictions(frame, key)
    words = {t for ts in by_person.values() for t in ts}
    cells = " ".join(map(str, table["original"])) + " ".join(map(str, table["predicted"])) + str(list(table["top_k"]))
    assert not [w for w in words if re.search(rf"\b{re.escape(w)}\b", cells)]
    assert table["predicted"].isna().sum() == frame["predicted"].isna().sum()


def test_stale_removal_spares_the_audits_own_inputs(setup, tmp_path):
    """`--identifiers OUT/identifiers_members` of an earlier audit: an input of this one, not stale output."""
    from toolkit.pipelines.audit_outputs import remove_stale

    out = _copy(setup, tmp_path)
    removed = remove_stale(out, {}, keep=(out / "identifiers_all",))
    assert (out / "identifiers_all" / "terms.parquet").is_file() and not (out / "identifiers_members").exists()
    assert {"report.html", "identifiers_members", f"attacks/{setup['label']}", f"audit/{setup['label']}"} <= set(removed)
    assert "identifiers_all" not in removed and (out / ".hash_key").is_file()
