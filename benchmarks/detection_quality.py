"""Benchmark: detection quality of every detector and combination on every gold corpus the repository ships.

For each corpus and detector it measures, against the corpus' gold spans:

* **word level** (the i2b2 2014 evaluation's token measure, at the toolkit's word unit):
  :func:`toolkit.identifiers.detector_scores` — precision, recall per category (a gold word found under any label);
* **entity level**: :func:`toolkit.identifiers.evaluation.entity_scores` — a gold span found when all its words
  are detected, a detected span correct when it covers a gold word;
* **protected share**: of the gold words of each category, the share that the identifier analysis protects
  (direct ∪ indirect, ``k = 2``, ``n = 1``): what PPMLM / PPclm never train on.

Combinations are the union of their parts' spans (:func:`toolkit.identifiers.merge_spans`, exactly what
``make_detector("a+b")`` returns): each base detector runs once per corpus. ``presidio`` is measured when
``presidio-analyzer`` is installed.

Corpora: the five i2b2-format notes Philter ships (``data_external/i2b2_philter_sample``), the synthetic sample notes
and e-mails (``data_samples/``), the TAB record (``tests/data/real/tab``). The MedRoBERTa test sentences
(``data_external/medroberta_anonymization_testset.csv``) carry no gold spans (the names are already masked) and are
listed as not measurable.

Usage: ``python benchmarks/detection_quality.py [--out detection_quality.json] [--markdown] [--limit N]
[--corpora i2b2,notes,email,tab] [--detectors patterns,spacy,clinical,presidio]``
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import subprocess
import time
from pathlib import Path

import numpy as np

from toolkit.corpus import Corpus, load_corpus
from toolkit.identifiers import analyze, detector_scores, make_detector, mark_direct, merge_spans
from toolkit.identifiers.categories import CATEGORIES
from toolkit.identifiers.evaluation import entity_scores

ROOT = Path(__file__).resolve().parent.parent
CORPORA = {
    "i2b2": (ROOT / "data_external" / "i2b2_philter_sample", "i2b2", "i2b2-format notes (Philter's sample)"),
    "notes": (ROOT / "data_samples" / "clinical" / "notes.jsonl", None, "synthetic sample notes"),
    "email": (ROOT / "data_samples" / "email" / "test.jsonl", None, "synthetic sample e-mails (test split)"),
    "tab": (ROOT / "tests" / "data" / "real" / "tab" / "echr_dev_first_record.json", "tab", "TAB record (ECHR)"),
}
BASES = ("patterns", "spacy", "clinical", "presidio")
COMBINATIONS = ("patterns", "spacy", "spacy+patterns", "clinical", "clinical+patterns", "clinical+spacy+patterns",
                "presidio")


def _clean(v):
    if isinstance(v, float):
        return None if math.isnan(v) else round(v, 4)
    if isinstance(v, (np.integer,)):
        return int(v)
    return v


def _frame(df) -> dict:
    return {r["category"]: {k: _clean(v) for k, v in r.items() if k != "category"} for r in df.to_dict("records")}


def protected_share(corpus: Corpus, spans: list, gold: list) -> dict:
    """Per category: gold words protected (direct ∪ indirect at k = 2, n = 1) over gold words."""
    result = analyze(corpus, spans=spans, k=2, n=1, progress=False)
    true, cat = mark_direct(result.words, gold)
    protected = result.direct | result.indirect
    out = {"all": _clean(float(protected[true].mean())) if true.any() else None}
    for i, c in enumerate(CATEGORIES):
        sel = true & (cat == i)
        if sel.any():
            out[c] = _clean(float(protected[sel].mean()))
    return out


def measure(name: str, limit: int, detectors: list[str]) -> dict:
    path, fmt, title = CORPORA[name]
    corpus = load_corpus(path, format=fmt) if fmt else load_corpus(path)
    if limit and len(corpus) > limit:
        corpus = Corpus(list(corpus)[:limit])
    docs = list(corpus)
    gold = [list(d.spans) for d in docs]
    words = analyze(corpus, detector="oracle", progress=False).words
    base_spans, seconds = {}, {}
    for b in detectors:
        t = time.perf_counter()
        det = make_detector(b)
        base_spans[b] = det.detect(docs, progress=False)
        det.close()
        seconds[b] = round(time.perf_counter() - t, 1)
    rows = {}
    for combo in COMBINATIONS:
        parts = combo.split("+")
        if not all(p in base_spans for p in parts):
            continue
        spans = [merge_spans(per_doc) for per_doc in zip(*(base_spans[p] for p in parts))]
        rows[combo] = {"word_level": _frame(detector_scores(words, spans, gold)),
                       "entity_level": _frame(entity_scores(words, spans, gold)),
                       "protected_share_k2": protected_share(corpus, spans, gold),
                       "seconds": round(sum(seconds[p] for p in parts), 1)}
    return {"corpus": name, "title": title, "path": str(path.relative_to(ROOT)), "documents": len(docs),
            "gold_words": int(mark_direct(words, gold)[0].sum()), "detectors": rows}


def markdown(results: list[dict]) -> str:
    def f(x):
        return "–" if x is None else f"{x:.3f}"

    lines = []
    for res in results:
        lines += [f"**{res['title']}** (`{res['path']}`, {res['documents']} documents, {res['gold_words']} gold "
                  f"words)", "",
                  "| detector | word P | word R | names R | dates R | IDs R | entity P | entity R | names protected "
                  "(k=2) | all protected (k=2) |", "|---|---|---|---|---|---|---|---|---|---|"]
        for det, row in res["detectors"].items():
            w, e, p = row["word_level"], row["entity_level"], row["protected_share_k2"]
            lines.append(f"| `{det}` | {f(w['all']['precision'])} | {f(w['all']['recall'])} | "
                         f"{f(w.get('NAME', {}).get('recall'))} | {f(w.get('DATE', {}).get('recall'))} | "
                         f"{f(w.get('ID', {}).get('recall'))} | {f(e['all']['precision'])} | {f(e['all']['recall'])} | "
                         f"{f(p.get('NAME'))} | {f(p['all'])} |")
        lines.append("")
    return "\n".join(lines)


def publish(out: dict) -> None:
    """The i2b2 sample's overall precision / recall and name recall per detector, as package data."""
    res = next((r for r in out["corpora"] if r["corpus"] == "i2b2"), None)
    if res is None or out["limit"]:
        raise SystemExit("--publish needs the whole i2b2 corpus (--corpora with i2b2, no --limit)")
    rows = {det: {"precision": row["word_level"]["all"]["precision"], "recall": row["word_level"]["all"]["recall"],
                  "name_recall": row["word_level"].get("NAME", {}).get("recall")}
            for det, row in res["detectors"].items()}
    shipped = {"corpus": "the five i2b2-format notes Philter ships (data_external/i2b2_philter_sample)",
               "commit": out["commit"], "date": out["date"][:10], "detectors": rows}
    (ROOT / "toolkit" / "data" / "detection_quality.json").write_text(json.dumps(shipped, indent=1) + "\n")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="detection_quality.json")
    ap.add_argument("--corpora", default=",".join(CORPORA))
    ap.add_argument("--detectors", default=",".join(BASES))
    ap.add_argument("--limit", type=int, default=0, help="at most this many documents per corpus (0: all)")
    ap.add_argument("--markdown", action="store_true", help="print the tables as Markdown")
    ap.add_argument("--publish", action="store_true",
                    help="write the i2b2 sample's figures to toolkit/data/detection_quality.json (the report quotes "
                         "them for runs without gold spans)")
    args = ap.parse_args(argv)
    detectors = [d for d in args.detectors.split(",") if d]
    if "presidio" in detectors:
        try:
            import presidio_analyzer  # noqa: F401
        except ImportError:
            print("presidio-analyzer is not installed: presidio not measured")
            detectors.remove("presidio")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "toolkit", "benchmarks"], cwd=ROOT, capture_output=True,
                           text=True).stdout.strip()
    results = [measure(c, args.limit, detectors) for c in args.corpora.split(",") if c]
    out = {"commit": commit.stdout.strip() + ("+uncommitted changes" if dirty else ""), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "machine": f"{platform.machine()}, {platform.processor() or platform.system()}", "limit": args.limit,
           "not_measurable": {"medroberta": "data_external/medroberta_anonymization_testset.csv has no gold spans "
                                            "(each name is already replaced by <mask>)"},
           "corpora": results}
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    if args.publish:
        publish(out)
    print(markdown(results) if args.markdown else json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
