"""Hostile inputs for every corpus loader and for the identifier analysis: hypothesis strategies and properties.

Shared by ``tests/test_hostile_inputs.py`` (a few dozen derandomised examples per property, in the default test run)
and ``benchmarks/fuzz_loaders.py`` (the same properties with thousands of random examples).

A *property* is a pair ``(strategy, check)``: ``check(case)`` writes the generated case to disk in one format, loads
it with the toolkit and returns ``"ok"`` (loaded, and equal to what was written) or ``"error"`` (a
:class:`~toolkit.corpus.CorpusError` that the case calls for, naming the file and the record); anything else — a
library exception, a silently dropped or altered document, a missing error, a hang — fails with ``AssertionError``.
The oracle of each format is written from the format's documented rules (``toolkit/corpus/formats/``), not from the
reader's code: JSONL and CSV keep text exactly; XML normalises line ends unless they are escaped and cannot hold
some control characters; e-mail writers normalise body line ends; mbox quotes body lines starting with ``From ``.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import mailbox
import os
import re
import signal
import tempfile
import unicodedata
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterator
from email.message import EmailMessage
from pathlib import Path, PurePosixPath
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from hypothesis import strategies as st

from toolkit.corpus import (Corpus, CorpusError, CorpusWarning, load_corpus, make_document, read_tab,
                            read_txt_folder)
from toolkit.errors import ToolkitError
from toolkit.identifiers import analyze, load_identifiers, normalize_term, word_pattern

# ----------------------------------------------------------------------------------------------------------------
# text
# ----------------------------------------------------------------------------------------------------------------

#: Pieces hostile texts are built from: combining marks, right-to-left script and controls, emoji (ZWJ sequences,
#: flags, skin tones), NUL and other C0/C1 controls, every line break Python knows, BOM, zero-width characters,
#: noncharacters, compatibility forms, non-ASCII digits, and the syntax of every format (quotes, braces, XML
#: markup and CDATA end, mbox ``From `` lines, backslashes).
PIECES = [
    "a", "Z", "é", "e\u0301", "\u0301", "\u20dd", "\u0308\u0308", "\u05d0\u05d1", "\u0627\u0644", "\u202e", "\u200f",
    "\u2067", "🙂", "👩\u200d⚕\ufe0f", "🇳🇱", "👍🏽", "\x00", "\x01", "\x08", "\x1b", "\x7f", "\x85", "\x9f", "\r", "\n",
    "\r\n", "\t", "\x0b", "\x0c", "\x1c", " ", "  ", "\u00a0", "\u2028", "\u2029", "\ufeff", "\u200b", "\ufdd0",
    "\uffff", "\ufffe", "\ufffd", "ﬁ", "Ａ", "٣", "5", "2019-03-04", "(617) 555-0199", "MRN 1234567", "x@y.org", ".",
    ",", "'", '"', "-", "_", "@", "<", ">", "&", "&amp;", "]]>", "<PHI>", "{", "}", "[", "\\", "\\u0000", "From ",
    "\nFrom x", "=?utf-8?q?x?=", "\U0010fffd", "\U0001d400", "Alice", "Bob",
]
SURROGATE = "\ud800"
_LINE_BREAKS = re.compile(r"\r\n|\r")
#: Characters XML 1.0 cannot hold, not even as a character reference.
XML_INVALID = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
SURROGATES = re.compile("[\ud800-\udfff]")


def texts(*, surrogates: bool = False, max_pieces: int = 24) -> st.SearchStrategy[str]:
    """Hostile texts: joined pieces, or arbitrary Unicode (hypothesis' own generator; no surrogates by default)."""
    pieces = PIECES + [SURROGATE] if surrogates else PIECES
    alphabet = st.characters(codec="utf-8") if not surrogates else st.characters()
    base = st.one_of(st.lists(st.sampled_from(pieces), max_size=max_pieces).map("".join),
                     st.text(alphabet=alphabet, max_size=40))
    if not surrogates:
        return base
    # hypothesis' own text() never draws surrogates: also insert one at a random place in a third of the texts
    inserted = st.tuples(base, st.integers(0, 40), st.sampled_from(["\ud800", "\udbff", "\udc80", "\udfff"])).map(
        lambda t: t[0][:t[1]] + t[2] + t[0][t[1]:])
    return st.one_of(base, base, inserted)


def safe_names(max_size: int = 12) -> st.SearchStrategy[str]:
    """Names usable in file names and e-mail headers: hostile Unicode but no '/', NUL, line breaks or surrogates."""
    return st.text(alphabet=st.characters(codec="utf-8", exclude_characters="/\x00\r\n", exclude_categories=("Cc",)),
                   min_size=1, max_size=max_size).filter(lambda s: s not in (".", "..") and len(s.encode()) < 120)


LABELS = ["PATIENT", "DOCTOR", "DATE", "ID", "x", "PERSON", "ä\u0301", "🙂", " ", "HOSPITAL"]


def is_blank(value: Any) -> bool:
    return isinstance(value, str) and not value.strip()


@st.composite
def spans_for(draw, length: int, *, valid_only: bool = False) -> list[tuple[int, int, str]]:
    """Spans over a text of ``length`` characters: valid non-overlapping ones (often at the edges 0 and ``length``),
    or arbitrary ones (out of range, empty, reversed, overlapping)."""
    if valid_only or length == 0 or draw(st.booleans()):
        cuts = sorted(draw(st.lists(st.integers(0, length), max_size=6)) + draw(st.sampled_from([[], [0], [length],
                                                                                                 [0, length]])))
        spans = [(a, b) for a, b in zip(cuts[::2], cuts[1::2]) if a < b]
    else:
        spans = draw(st.lists(st.tuples(st.integers(-2, length + 2), st.integers(-2, length + 3)), max_size=4))
    return [(a, b, draw(st.sampled_from(LABELS[:6] if valid_only else LABELS))) for a, b in spans]


@st.composite
def documents(draw, *, surrogates: bool = False, valid_only: bool = False, max_docs: int = 5,
              text_strategy: st.SearchStrategy[str] | None = None) -> list[dict[str, Any]]:
    """A list of documents ``{doc_id, person_id, text, spans, split}``: hostile texts, one or several individuals,
    people with no words, and (unless ``valid_only``; in half of the lists) blank or duplicate ids, lone surrogates
    and bad spans."""
    n = draw(st.integers(0 if not valid_only else 1, max_docs))
    valid_only = valid_only or draw(st.booleans())
    surrogates = surrogates and not valid_only
    people = draw(st.lists(texts(surrogates=surrogates, max_pieces=3).filter(lambda s: valid_only is False or (
        s.strip() and not SURROGATES.search(s))), min_size=1, max_size=3))
    docs = []
    for i in range(n):
        text = draw(text_strategy if text_strategy is not None else texts(surrogates=surrogates))
        if valid_only:
            doc_id = f"d{i}" + draw(st.sampled_from(["", "\u0301", " ü", "🙂", "/x"]))
        else:
            doc_id = draw(st.sampled_from([f"d{i}", f"d{i}", f"d{i}é", "d0", " ", "\t", f"\u200f{i}"]))
        docs.append({"doc_id": doc_id, "person_id": draw(st.sampled_from(people)), "text": text,
                     "spans": draw(spans_for(len(text), valid_only=valid_only)),
                     "split": draw(st.sampled_from([None, "train", "heldout", "ü\u0301"]))})
    return docs


def doc_problem(doc: dict[str, Any]) -> str | None:
    """Why :func:`toolkit.corpus.make_document` must refuse ``doc`` (methods.md §1), or ``None``."""
    if is_blank(doc["doc_id"]) or is_blank(doc["person_id"]):
        return "missing field"
    if any(isinstance(doc.get(f), str) and SURROGATES.search(doc[f]) for f in ("doc_id", "person_id", "text", "split")):
        return "lone surrogate"
    spans = doc["spans"]
    for s, e, label in spans:
        if not 0 <= s < e <= len(doc["text"]):
            return "outside the text"
        if not label.strip():
            return "label"
    ordered = sorted(spans)
    if any(b[0] < a[1] for a, b in zip(ordered, ordered[1:])):
        return "overlap"
    return None


def first_failure(docs: list[dict[str, Any]], key: Callable[[dict], str] = lambda d: str(d["doc_id"])) -> int | None:
    """Index of the first document a reader must stop at (a refused document or a duplicate id), or ``None``."""
    seen = set()
    for i, d in enumerate(docs):
        if doc_problem(d) is not None or key(d) in seen:
            return i
        seen.add(key(d))
    return None


def expected_spans(doc: dict[str, Any]) -> list[tuple[int, int, str]]:
    return sorted(doc["spans"])


def got_spans(doc) -> list[tuple[int, int, str]]:
    return [(s.start, s.end, s.label) for s in doc.spans]


# ----------------------------------------------------------------------------------------------------------------
# harness
# ----------------------------------------------------------------------------------------------------------------


class Hang(AssertionError):
    """A loader or analysis step ran past its time limit."""


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Fail with :class:`Hang` when the block runs longer than ``seconds`` (SIGALRM; main thread only)."""
    def on_alarm(signum, frame):
        raise Hang(f"no result after {seconds} s: a hang or super-linear behaviour")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


#: Seconds one loader call may take on a small generated case before it counts as a hang.
LIMIT_S = float(os.environ.get("HOSTILE_LIMIT_S", "30"))


def load(fn: Callable[[], Corpus], path: Path) -> tuple[Corpus | None, CorpusError | None, list]:
    """Run a loader: ``(corpus, None, warnings)`` or ``(None, CorpusError, warnings)``. Any other exception fails,
    and so does a ``CorpusError`` that does not name ``path``."""
    with warnings.catch_warnings(record=True) as caught, time_limit(LIMIT_S):
        warnings.simplefilter("always")
        try:
            corpus = fn()
        except CorpusError as e:
            assert str(path) in str(e) or (e.path or "").startswith(str(path)), f"error does not name {path}: {e}"
            assert "Traceback" not in str(e)
            return None, e, [w for w in caught if issubclass(w.category, CorpusWarning)]
        except ToolkitError as e:  # pragma: no cover - a reader must raise CorpusError
            raise AssertionError(f"a reader raised ToolkitError instead of CorpusError: {e}") from e
    check_corpus_invariants(corpus)
    return corpus, None, [w for w in caught if issubclass(w.category, CorpusWarning)]


def check_corpus_invariants(corpus: Corpus) -> None:
    """What every loaded corpus holds: unique ids, valid Unicode, spans inside the text and non-overlapping."""
    assert isinstance(corpus, Corpus) and len(corpus) > 0
    assert len({d.doc_id for d in corpus}) == len(corpus)
    for d in corpus:
        assert isinstance(d.text, str) and not SURROGATES.search(d.text)
        assert d.doc_id.strip() and str(d.person_id).strip()
        prev_end = 0
        for s in d.spans:
            assert prev_end <= s.start < s.end <= len(d.text)
            prev_end = s.end


def expect_located_error(err: CorpusError | None, *, line: int | None = None, record: str | None = None,
                         what: str = "") -> str:
    assert err is not None, f"no error although the input calls for one ({what})"
    if line is not None:
        assert err.line == line, f"error names line {err.line}, expected line {line}: {err}"
    if record is not None:
        assert record in str(err), f"error does not name {record!r}: {err}"
    return "error"


@contextlib.contextmanager
def workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="hostile-") as d:
        yield Path(d)


# ----------------------------------------------------------------------------------------------------------------
# JSONL
# ----------------------------------------------------------------------------------------------------------------


@st.composite
def jsonl_cases(draw, surrogates: bool = True) -> dict[str, Any]:
    docs = draw(documents(surrogates=surrogates))
    return {"docs": docs, "ensure_ascii": draw(st.booleans()), "crlf": draw(st.booleans()), "bom": draw(st.booleans()),
            "blank": draw(st.lists(st.sampled_from(["", " ", "\t", "\r", "  \r"]), max_size=len(docs) + 1)),
            "int_ids": draw(st.booleans())}


def write_jsonl_case(case: dict[str, Any], path: Path) -> list[int]:
    """Write the case; returns the line number of every document."""
    lines, numbers = [], []
    blanks = list(case["blank"])
    for i, d in enumerate(case["docs"]):
        if blanks:
            lines.append(blanks.pop())
        obj = {"doc_id": i if case["int_ids"] and d["doc_id"] == f"d{i}" else d["doc_id"],
               "person_id": d["person_id"], "text": d["text"],
               "spans": [{"start": s, "end": e, "label": lab} for s, e, lab in d["spans"]]}
        if d["split"] is not None:
            obj["split"] = d["split"]
        lines.append(json.dumps(obj, ensure_ascii=case["ensure_ascii"]))
        numbers.append(len(lines))
    sep = "\r\n" if case["crlf"] else "\n"
    data = sep.join(lines).encode("utf-8", "surrogatepass")
    path.write_bytes((b"\xef\xbb\xbf" if case["bom"] else b"") + data)
    return numbers


def check_jsonl(case: dict[str, Any]) -> str:
    with workdir() as tmp:
        path = tmp / "notes.jsonl"
        numbers = write_jsonl_case(case, path)
        corpus, err, _ = load(lambda: load_corpus(path), path)
        docs = [dict(d, doc_id=str(i) if case["int_ids"] and d["doc_id"] == f"d{i}" else d["doc_id"])
                for i, d in enumerate(case["docs"])]
        if not docs:
            return expect_located_error(err, what="empty corpus")
        raw_surrogate = case["ensure_ascii"] is False and any(
            SURROGATES.search(json.dumps(d, ensure_ascii=False)) for d in docs)
        if raw_surrogate:  # written with surrogatepass: bytes that are not UTF-8, reported with their line
            return expect_located_error(err, what="non-UTF-8 bytes")
        bad = first_failure(docs)
        if bad is not None:
            return expect_located_error(err, line=numbers[bad], what=f"document #{bad}: {doc_problem(docs[bad])}")
        assert err is None, f"valid input refused: {err}"
        assert [d.doc_id for d in corpus] == [d["doc_id"] for d in docs]
        for got, want in zip(corpus, docs):
            assert got.text == want["text"] and got.person_id == want["person_id"]
            assert got_spans(got) == expected_spans(want) and got.split == want["split"]
        return "ok"


# ----------------------------------------------------------------------------------------------------------------
# CSV
# ----------------------------------------------------------------------------------------------------------------


@st.composite
def csv_cases(draw) -> dict[str, Any]:
    columns = ["doc_id", "person_id", "text", "spans", "split"]
    return {"docs": draw(documents()), "order": draw(st.permutations(columns)),
            "quoting": draw(st.sampled_from([csv.QUOTE_MINIMAL, csv.QUOTE_ALL])),
            "terminator": draw(st.sampled_from(["\r\n", "\n"])), "bom": draw(st.booleans())}


def check_csv(case: dict[str, Any]) -> str:
    with workdir() as tmp:
        path = tmp / "notes.csv"
        rows = [case["order"]]
        for d in case["docs"]:
            row = {"doc_id": d["doc_id"], "person_id": d["person_id"], "text": d["text"], "split": d["split"] or "",
                   "spans": json.dumps([{"start": s, "end": e, "label": lab} for s, e, lab in d["spans"]])
                   if d["spans"] else ""}
            rows.append([row[c] for c in case["order"]])
        quoting = case["quoting"]
        if case["terminator"] == "\n" and any("\r" in field for row in rows for field in row):
            # Python's csv.writer leaves a bare CR unquoted when lineterminator="\n": the file is then ambiguous
            # (RFC 4180 readers, ours included, take the CR as a line end); a correct writer quotes the field
            quoting = csv.QUOTE_ALL
        buf = io.StringIO()
        csv.writer(buf, quoting=quoting, lineterminator=case["terminator"]).writerows(rows)
        path.write_bytes((b"\xef\xbb\xbf" if case["bom"] else b"") + buf.getvalue().encode("utf-8"))
        corpus, err, _ = load(lambda: load_corpus(path), path)
        docs = case["docs"]
        if not docs:
            return expect_located_error(err, what="header only")
        bad = first_failure(docs)
        if bad is not None:
            return expect_located_error(err, record=f"record {bad + 1}", what=doc_problem(docs[bad]) or "duplicate")
        assert err is None, f"valid input refused: {err}"
        assert [d.doc_id for d in corpus] == [d["doc_id"] for d in docs]
        for got, want in zip(corpus, docs):
            assert got.text == want["text"] and got.person_id == want["person_id"]
            assert got_spans(got) == expected_spans(want) and got.split == (want["split"] or None)
        return "ok"


# ----------------------------------------------------------------------------------------------------------------
# i2b2 2006 (inline PHI) and n2c2 2014 (offsets) XML
# ----------------------------------------------------------------------------------------------------------------


def xml_text(text: str, escape_cr: bool) -> str:
    out = escape(text)
    return out.replace("\r", "&#13;") if escape_cr else out


def parsed_text(text: str, escape_cr: bool) -> str:
    """What an XML parser returns for character data written by :func:`xml_text` (XML 1.0 §2.11)."""
    return text if escape_cr else _LINE_BREAKS.sub("\n", text)


@st.composite
def i2b2_2006_cases(draw) -> dict[str, Any]:
    return {"docs": draw(documents(valid_only=draw(st.booleans()))), "escape_cr": draw(st.booleans())}


def check_i2b2_2006(case: dict[str, Any]) -> str:
    with workdir() as tmp:
        path = tmp / "deid_surrogate_train.xml"
        records, expected = [], []
        for d in case["docs"]:
            valid_spans = doc_problem(dict(d, doc_id="x", person_id="x")) is None
            spans = expected_spans(d) if valid_spans else []
            parts, pos, text, want_spans = [], 0, "", []
            for s, e, label in spans:
                gap, phi = d["text"][pos:s], d["text"][s:e]
                parts += [xml_text(gap, case["escape_cr"]), f"<PHI TYPE={quoteattr(label)}>",
                          xml_text(phi, case["escape_cr"]), "</PHI>"]
                text += parsed_text(gap, case["escape_cr"])
                phi_parsed = parsed_text(phi, case["escape_cr"])
                want_spans.append((len(text), len(text) + len(phi_parsed), label))
                text += phi_parsed
                pos = e
            parts.append(xml_text(d["text"][pos:], case["escape_cr"]))
            text += parsed_text(d["text"][pos:], case["escape_cr"])
            records.append(f'<RECORD ID={quoteattr(d["doc_id"])}>\n<TEXT>{"".join(parts)}</TEXT>\n</RECORD>')
            expected.append({"doc_id": d["doc_id"], "person_id": d["doc_id"], "text": text, "spans": want_spans,
                             "split": None})
        xml = "<ROOT>\n" + "\n".join(records) + "\n</ROOT>\n"
        path.write_bytes(xml.encode("utf-8", "surrogatepass"))
        corpus, err, _ = load(lambda: load_corpus(path), path)
        if XML_INVALID.search(xml):
            return expect_located_error(err, what="characters XML cannot hold")
        if not expected:
            return expect_located_error(err, what="no records")
        bad = first_failure(expected)
        if bad is not None:
            return expect_located_error(err, what=f"record #{bad}")
        assert err is None, f"valid input refused: {err}"
        assert [(d.doc_id, d.person_id, d.text, got_spans(d)) for d in corpus] == \
            [(d["doc_id"], d["person_id"], d["text"], d["spans"]) for d in expected]
        return "ok"


@st.composite
def n2c2_2014_cases(draw) -> dict[str, Any]:
    n = draw(st.integers(0, 3))
    escape_cr = draw(st.booleans())
    files = []
    for i in range(n):
        text = draw(texts())
        parsed = parsed_text(text, escape_cr)
        files.append({"person": draw(safe_names(8).filter(lambda s: "-" not in s)), "text": text,
                      "spans": draw(spans_for(len(parsed))), "tag": draw(st.sampled_from(["NAME", "DATE", "ID"])),
                      "typed": draw(st.booleans()), "wrong_surface": draw(st.integers(0, 9)) == 0})
    return {"files": files, "escape_cr": escape_cr, "cdata": draw(st.booleans())}


def resolve_overlaps(spans: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """Reference rule of the XML and TAB readers: longer span first, then earlier start; overlapping ones dropped."""
    kept: list[tuple[int, int, str]] = []
    for s in sorted(spans, key=lambda c: (-(c[1] - c[0]), c[0], c[1], c[2])):
        if all(s[1] <= k[0] or k[1] <= s[0] for k in kept):
            kept.append(s)
    return sorted(kept)


def check_n2c2_2014(case: dict[str, Any]) -> str:
    with workdir() as tmp:
        folder = tmp / "n2c2"
        folder.mkdir()
        expect_error = not case["files"]
        expected, dropping = [], False
        for i, f in enumerate(case["files"]):
            stem = f"{f['person']}-{i:02d}"
            parsed = parsed_text(f["text"], case["escape_cr"])
            use_cdata = case["cdata"] and "]]>" not in f["text"] and "\r" not in f["text"]
            body = f"<![CDATA[{f['text']}]]>" if use_cdata else xml_text(f["text"], case["escape_cr"])
            tags, labels = [], []
            for j, (s, e, label) in enumerate(f["spans"]):
                surface = parsed[s:e] if 0 <= s < e <= len(parsed) else "?"
                if f["wrong_surface"] and surface != "?":
                    surface += "x"
                typ = f" TYPE={quoteattr(label)}" if f["typed"] else ""
                tags.append(f'<{f["tag"]} id="P{j}" start="{s}" end="{e}" text={quoteattr(surface)}{typ} />')
                labels.append(label if f["typed"] and label else f["tag"])
            xml = f'<?xml version="1.0" encoding="UTF-8" ?>\n<deIdi2b2>\n<TEXT>{body}</TEXT>\n<TAGS>\n' + \
                "\n".join(tags) + "\n</TAGS>\n</deIdi2b2>\n"
            (folder / f"{stem}.xml").write_bytes(xml.encode("utf-8"))
            spans = [(s, e, lab) for (s, e, _), lab in zip(f["spans"], labels)]
            if XML_INVALID.search(xml) or any(not 0 <= s < e <= len(parsed) for s, e, _ in spans) or \
                    (f["wrong_surface"] and spans) or is_blank(f["person"]) or any(is_blank(lab) for lab in labels):
                expect_error = True
            kept = resolve_overlaps(spans)
            dropping |= len(kept) < len(spans)
            expected.append((stem, f["person"], parsed, kept))
        corpus, err, warned = load(lambda: load_corpus(folder), folder)
        if expect_error:
            return expect_located_error(err, what="invalid XML, bad offsets, wrong tag text or no files")
        assert err is None, f"valid input refused: {err}"
        assert sorted((d.doc_id, d.person_id, d.text, got_spans(d)) for d in corpus) == sorted(expected)
        assert bool(warned) == dropping, "overlapping tags must be resolved with a CorpusWarning, never silently"
        return "ok"


# ----------------------------------------------------------------------------------------------------------------
# TAB JSON
# ----------------------------------------------------------------------------------------------------------------


@st.composite
def tab_cases(draw) -> dict[str, Any]:
    docs = draw(documents(surrogates=True))
    for d in docs:
        d["itypes"] = [draw(st.sampled_from(["DIRECT", "QUASI", "NO_MASK"])) for _ in d["spans"]]
        d["wrong_surface"] = draw(st.integers(0, 9)) == 0
        d["annotator"] = draw(st.sampled_from(["annotator1", "ä", "🙂", ""]))
    return {"docs": docs, "ensure_ascii": draw(st.booleans())}


def check_tab(case: dict[str, Any]) -> str:
    with workdir() as tmp:
        path = tmp / "echr_train.json"
        items, expected = [], []
        for d in case["docs"]:
            mentions, kept_spans, bad = [], [], False
            for k, ((s, e, label), itype) in enumerate(zip(d["spans"], d["itypes"])):
                surface = d["text"][s:e] if 0 <= s < e <= len(d["text"]) else "?"
                if d["wrong_surface"]:
                    surface += "x"
                mentions.append({"entity_type": label, "entity_mention_id": f"m{k}", "start_offset": s,
                                 "end_offset": e, "span_text": surface, "identifier_type": itype})
                if itype != "NO_MASK":
                    bad |= not 0 <= s < e <= len(d["text"]) or d["wrong_surface"]
                    kept_spans.append((s, e, f"{label}/{itype}"))
            items.append({"doc_id": d["doc_id"], "text": d["text"], "dataset_type": d["split"],
                          "annotations": {d["annotator"]: {"entity_mentions": mentions}}})
            kept = resolve_overlaps(kept_spans) if not bad else kept_spans
            expected.append({"doc_id": d["doc_id"], "person_id": d["doc_id"], "text": d["text"], "spans": kept,
                             "split": d["split"], "bad": bad, "dropped": len(kept) < len(kept_spans)})
        data = json.dumps(items, ensure_ascii=case["ensure_ascii"], indent=1)
        path.write_bytes(data.encode("utf-8", "surrogatepass"))
        corpus, err, warned = load(lambda: read_tab(path), path)
        if not expected:
            return expect_located_error(err, what="empty list")
        if not case["ensure_ascii"] and SURROGATES.search(data):
            return expect_located_error(err, what="non-UTF-8 bytes")
        seen: set[str] = set()
        for i, want in enumerate(expected):
            if want["bad"] or doc_problem(dict(want, spans=[])) or str(want["doc_id"]) in seen:
                return expect_located_error(err, record=f"#{i + 1}", what="bad mention, id or duplicate")
            seen.add(str(want["doc_id"]))
        assert err is None, f"valid input refused: {err}"
        assert [(d.doc_id, d.text, got_spans(d), d.split) for d in corpus] == \
            [(w["doc_id"], w["text"], w["spans"], w["split"]) for w in expected]
        assert bool(warned) == any(w["dropped"] for w in expected)
        return "ok"


# ----------------------------------------------------------------------------------------------------------------
# e-mail: mbox and Maildir
# ----------------------------------------------------------------------------------------------------------------

_LOCAL = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789._-", min_size=1, max_size=8).filter(
    lambda s: not s.startswith(".") and not s.endswith(".") and ".." not in s)


@st.composite
def mail_cases(draw) -> dict[str, Any]:
    n = draw(st.integers(0, 4))
    # the e-mail writer refuses header values with any str.splitlines() break (a header injection guard)
    header_text = texts(max_pieces=6).map(lambda s: re.sub("[\r\n\x0b\x0c\x1c-\x1e\x85\u2028\u2029]", " ", s))
    msgs = [{"local": draw(_LOCAL), "name": draw(header_text), "subject": draw(header_text),
             "body": draw(texts()), "mid": draw(st.sampled_from([f"m{i}", f"m{i}", "m0"]))} for i in range(n)]
    return {"messages": msgs}


def _message(m: dict[str, Any]) -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = f"{json.dumps(m['name'])} <{m['local']}@Example.org>"
    msg["To"] = "archive@example.org"
    msg["Subject"] = m["subject"]
    msg["Message-ID"] = f"<{m['mid']}@example.org>"
    msg.set_content(m["body"])
    return msg


def expected_body(body: str) -> str:
    """A body as :meth:`EmailMessage.set_content` stores it: line ends normalised to LF, a final LF."""
    body = _LINE_BREAKS.sub("\n", body)
    return body if body.endswith("\n") else body + "\n"


def _unquote_from(text: str) -> str:
    return re.sub(r"(?m)^>From ", "From ", text)


def check_mail(case: dict[str, Any], fmt: str) -> str:
    with workdir() as tmp:
        path = tmp / ("box.mbox" if fmt == "mbox" else "box")
        box = mailbox.mbox(path) if fmt == "mbox" else mailbox.Maildir(path)
        try:
            for m in case["messages"]:
                box.add(_message(m))
        finally:
            box.close()
        corpus, err, _ = load(lambda: load_corpus(path), path)
        msgs = case["messages"]
        if not msgs:
            return expect_located_error(err, what="no messages")
        mids = [m["mid"] for m in msgs]
        if len(set(mids)) < len(mids):
            return expect_located_error(err, what="duplicate Message-ID")
        assert err is None, f"valid input refused: {err}"
        got = {d.doc_id: d for d in corpus}
        assert len(got) == len(msgs), "one document per message"
        for m in msgs:
            d = got[f"{m['mid']}@example.org"]
            assert d.person_id == f"{m['local']}@example.org"
            head, sep, body = d.text.partition("\n\n")
            assert sep and head.startswith("From: ") and "\nSubject: " in head
            want = expected_body(m["body"])
            if fmt == "mbox":  # mbox quotes body lines starting with "From " as ">From " (mboxo); not undone
                body, want = _unquote_from(body), _unquote_from(want)
            assert body == want
        return "ok"


# ----------------------------------------------------------------------------------------------------------------
# folder of .txt files
# ----------------------------------------------------------------------------------------------------------------


@st.composite
def txt_cases(draw) -> dict[str, Any]:
    names = draw(st.lists(safe_names(10), max_size=4, unique_by=lambda s: s.lower()))
    files = []
    for name in names:
        sub = draw(st.sampled_from(["", "", "sub/", "ü\u0301/"]))
        content = draw(st.one_of(texts().map(lambda t: t.encode("utf-8")), st.binary(max_size=30)))
        files.append({"rel": f"{sub}{name}.txt", "content": draw(st.sampled_from([b"", b"\xef\xbb\xbf"])) + content})
    return {"files": files}


def check_txt(case: dict[str, Any]) -> str:
    with workdir() as tmp:
        root = tmp / "notes"
        root.mkdir()
        written = {}
        for f in case["files"]:
            p = root / f["rel"]
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(f["content"])
            written[f["rel"]] = f["content"]  # a later file with the same path replaces the earlier one
        corpus, err, _ = load(lambda: read_txt_folder(root), root)
        if not written:
            return expect_located_error(err, what="no files")
        expected = {}
        for rel, content in written.items():
            try:
                text = content.decode("utf-8")
            except UnicodeDecodeError:
                return expect_located_error(err, what=f"{rel} is not UTF-8")
            stem = PurePosixPath(rel).stem
            if is_blank(stem) or is_blank(str(PurePosixPath(rel).with_suffix(""))):
                return expect_located_error(err, what="blank id")
            expected[str(PurePosixPath(rel).with_suffix(""))] = (stem, text.removeprefix("\ufeff"))
        assert err is None, f"valid input refused: {err}"
        assert {d.doc_id: (d.person_id, d.text) for d in corpus} == expected
        return "ok"


# ----------------------------------------------------------------------------------------------------------------
# byte-level mutations of valid files (the fuzz part)
# ----------------------------------------------------------------------------------------------------------------

INTERESTING = [b"\x00", b"\xff", b"\xfe\xff", b"\xed\xa0\x80", b"\xc3", b"\r", b"\n", b"\r\n", b'"', b"\\", b"{", b"}",
               b"[", b"]", b",", b":", b"<", b">", b"&", b"]]>", b"<![CDATA[", b"<PHI TYPE=\"X\">", b"</TEXT>",
               b"From ", b"\nFrom a@b.c Mon Jan 1 00:00:00 2000\n", b"Content-Type: multipart/mixed; boundary=x\n",
               b"=?utf-8?b?====?=", b"charset=klingon", b"\\ud800", b'"start": -1', b"99999999999999999999",
               b"[" * 50, b"\xef\xbb\xbf", b"NaN", b"1e999"]


@st.composite
def mutations(draw) -> list[tuple[str, int, bytes]]:
    ops = draw(st.lists(st.tuples(st.sampled_from(["flip", "insert", "delete", "truncate", "repeat"]),
                                  st.integers(0, 1 << 16), st.sampled_from(INTERESTING)), min_size=1, max_size=4))
    return ops


def mutate(data: bytes, ops: list[tuple[str, int, bytes]]) -> bytes:
    buf = bytearray(data)
    for op, pos, piece in ops:
        i = pos % (len(buf) + 1)
        if op == "flip" and buf:
            buf[i % len(buf)] ^= 1 << (pos % 8)
        elif op == "insert":
            buf[i:i] = piece
        elif op == "delete":
            del buf[i:i + 1 + pos % 7]
        elif op == "truncate":
            del buf[i:]
        elif op == "repeat":
            buf[i:i] = buf[max(0, i - 40):i]
    return bytes(buf)


def sample_bytes(fmt: str) -> bytes:
    """A small valid file of each single-file format (the seed the mutations start from)."""
    t = "Alma Qorvath, MRN 1234567, seen 2031-04-02.\nDr. Pharro \u05d0 e\u0301 🙂"
    a, b = t.index("Alma"), t.index("Qorvath") + len("Qorvath")
    if fmt == "jsonl":
        rows = [{"doc_id": "n1", "person_id": "p1", "text": t, "spans": [{"start": a, "end": b, "label": "PATIENT"}]},
                {"doc_id": "n2", "person_id": "p2", "text": "second\r\nnote", "split": "train"}]
        return "\n".join(json.dumps(r, ensure_ascii=False) for r in rows).encode() + b"\n"
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerows([["doc_id", "person_id", "text", "spans"], ["n1", "p1", t, json.dumps([[a, b, "PATIENT"]])],
                     ["n2", "p2", "second, \"quoted\"\r\nnote", ""]])
        return buf.getvalue().encode()
    if fmt == "i2b2":
        return (f'<ROOT><RECORD ID="1"><TEXT>{escape(t[:a])}<PHI TYPE="PATIENT">{escape(t[a:b])}</PHI>'
                f'{escape(t[b:])}</TEXT></RECORD><RECORD ID="2"><TEXT>x</TEXT></RECORD></ROOT>').encode()
    if fmt == "n2c2":
        return (f'<deIdi2b2><TEXT><![CDATA[{t}]]></TEXT><TAGS><NAME id="P0" start="{a}" end="{b}" '
                f'text="{t[a:b]}" TYPE="PATIENT"/></TAGS></deIdi2b2>').encode()
    if fmt == "tab":
        return json.dumps([{"doc_id": "001", "text": t, "dataset_type": "train", "annotations": {"a1": {
            "entity_mentions": [{"entity_type": "PERSON", "entity_mention_id": "m1", "start_offset": a,
                                 "end_offset": b, "span_text": t[a:b], "identifier_type": "DIRECT"}]}}}]).encode()
    if fmt in ("mbox", "maildir"):
        msgs = [{"local": "alma", "name": "Alma Qorvath", "subject": "Hi 🙂", "body": t, "mid": "m1"},
                {"local": "bob", "name": "Bob", "subject": "Re", "body": "From here\nok", "mid": "m2"}]
        return b"".join(_message(m).as_bytes(policy=_message(m).policy.clone(linesep="\n")) for m in msgs[:1]) \
            if fmt == "maildir" else b"".join(b"From x@y Mon Jan  1 00:00:00 2000\n" + _message(m).as_bytes() + b"\n"
                                              for m in msgs)
    if fmt == "txt":
        return t.encode()
    raise ValueError(fmt)


FUZZ_FORMATS = ("jsonl", "csv", "i2b2", "n2c2", "tab", "mbox", "maildir", "txt")


def check_mutated(fmt: str, ops: list[tuple[str, int, bytes]]) -> str:
    """A valid file with bytes flipped, inserted, deleted or truncated: a corpus or a clear error, nothing else."""
    data = mutate(sample_bytes(fmt), ops)
    with workdir() as tmp:
        if fmt == "maildir":
            path = tmp / "box"
            for sub in ("cur", "new", "tmp"):
                (path / sub).mkdir(parents=True)
            (path / "new" / "1700000000.M1P1.host").write_bytes(data)
            (path / "cur" / "1700000001.M2P1.host:2,S").write_bytes(sample_bytes("maildir"))
        elif fmt == "txt":
            path = tmp / "notes"
            path.mkdir()
            (path / "a.txt").write_bytes(data)
            (path / "b.txt").write_bytes(sample_bytes("txt"))
        else:
            suffix = {"jsonl": ".jsonl", "csv": ".csv", "i2b2": ".xml", "n2c2": ".xml", "tab": ".json",
                      "mbox": ".mbox"}[fmt]
            path = tmp / f"corpus{suffix}"
            path.write_bytes(data)
        corpus, err, _ = load(lambda: load_corpus(path), path)
        return "ok" if err is None else "error"


# ----------------------------------------------------------------------------------------------------------------
# identifier analysis
# ----------------------------------------------------------------------------------------------------------------


def corpus_of(docs: list[dict]) -> Corpus:
    return Corpus([make_document(d["doc_id"], d["person_id"], d["text"], d["spans"], d["split"]) for d in docs])


def _assigned(text: str) -> bool:
    """Every character is assigned in Python's Unicode tables (RE2's may be newer: docs/guide.md, known limitations)."""
    return all(unicodedata.category(c) != "Cn" for c in text)


def check_analysis(corpus: Corpus, detector: str, k: int, n: int, out_dir: Path) -> None:
    with time_limit(60):
        r = analyze(corpus, detector=detector, k=k, n=n, progress=False)
    w = r.words
    docs = list(corpus)
    # words: the methods.md §1 definition (stdlib reference pattern), offsets into the original text
    ref = [(i, m.start(), m.end()) for i, d in enumerate(docs) for m in word_pattern().finditer(d.text)]
    got = list(zip(w.doc.tolist(), w.start.tolist(), w.end.tolist()))
    if all(_assigned(d.text) for d in docs):
        assert got == ref
    words = [normalize_term(docs[i].text[s:e]) for i, s, e in got]
    assert list(w.vocab[w.term]) == words
    # detector spans: sorted, non-overlapping, inside the text; the oracle returns the gold spans
    for d, spans in zip(docs, r.spans):
        assert all(0 <= a.start < a.end <= len(d.text) for a in spans)
        assert all(a.end <= b.start for a, b in zip(spans, spans[1:]))
        if detector == "oracle":
            assert spans == list(d.spans)
    # direct: a word overlapping any detected span (brute force)
    direct = [any(sp.start < e and s < sp.end for sp in r.spans[i]) for i, s, e in got]
    assert r.direct.tolist() == direct
    # indirect: terms (m <= n) used by fewer than k individuals, brute force with dict of sets
    users: dict[tuple, set] = defaultdict(set)
    covered = [False] * len(got)
    rows = defaultdict(list)
    for row, (i, _, _) in enumerate(got):
        rows[i].append(row)
    for i, rs in rows.items():
        for m in range(1, n + 1):
            for j in range(len(rs) - m + 1):
                users[tuple(words[x] for x in rs[j:j + m])].add(docs[i].person_id)
    for i, rs in rows.items():
        for m in range(1, n + 1):
            for j in range(len(rs) - m + 1):
                if len(users[tuple(words[x] for x in rs[j:j + m])]) < k:
                    for x in rs[j:j + m]:
                        covered[x] = True
    assert r.indirect.tolist() == covered
    t = r.terms
    uni = t[t["n"] == 1]
    assert dict(zip(uni["term"], uni["n_individuals"])) == {key[0]: len(v) for key, v in users.items() if len(key) == 1}
    for m in range(2, n + 1):  # m-gram strings may coincide (NFKC can put a space inside one word): compare multisets
        assert sorted(zip(t.loc[t["n"] == m, "term"], t.loc[t["n"] == m, "n_individuals"])) == \
            sorted((" ".join(key), len(v)) for key, v in users.items() if len(key) == m)
    # per individual: every person has a row, people with no words have zeros
    ind = r.individuals.set_index("person_id")
    assert list(ind.index) == corpus.person_ids
    assert ind["n_documents"].sum() == len(docs) and ind["n_words"].sum() == len(got)
    assert ind["n_protected"].sum() == int(r.protected.sum())
    json.dumps(r.summary, allow_nan=False)
    # persistence: what is saved is what was computed
    r.save(out_dir)
    loaded = load_identifiers(out_dir)
    assert loaded["terms"]["term"].tolist() == t["term"].tolist()
    assert loaded["positions"][["doc_id", "start", "end"]].values.tolist() == \
        r.positions()[["doc_id", "start", "end"]].values.tolist()
    assert loaded["summary"]["n_words"] == len(got)



# ----------------------------------------------------------------------------------------------------------------
# registry
# ----------------------------------------------------------------------------------------------------------------

#: name -> (strategy, check); the default test run and the fuzz benchmark run the same properties.
LOADER_PROPERTIES: dict[str, tuple[st.SearchStrategy, Callable[[Any], str]]] = {
    "jsonl": (jsonl_cases(), check_jsonl),
    "csv": (csv_cases(), check_csv),
    "i2b2_2006": (i2b2_2006_cases(), check_i2b2_2006),
    "n2c2_2014": (n2c2_2014_cases(), check_n2c2_2014),
    "tab": (tab_cases(), check_tab),
    "mbox": (mail_cases(), lambda case: check_mail(case, "mbox")),
    "maildir": (mail_cases(), lambda case: check_mail(case, "maildir")),
    "txt": (txt_cases(), check_txt),
    "mutated": (st.tuples(st.sampled_from(FUZZ_FORMATS), mutations()), lambda c: check_mutated(*c)),
}


def _check_analysis_case(case) -> str:
    docs, detector, k, n = case
    with workdir() as tmp:
        check_analysis(corpus_of(docs), detector, k, n, tmp / "ids")
    return "ok"


#: The identifier analysis on hostile corpora, compared with a brute-force recomputation (methods.md §2).
ANALYSIS_PROPERTY = (st.tuples(documents(valid_only=True, max_docs=6, text_strategy=texts(max_pieces=40)),
                               st.sampled_from(["oracle", "patterns", "oracle+patterns"]), st.integers(2, 4),
                               st.integers(1, 3)), _check_analysis_case)

