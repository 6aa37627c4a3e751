"""Benchmark: detection on every core and on a Dask cluster (issue 36), in one run.

On a corpus of generated clinical notes (``toolkit.samples.generate_clinical``, ~500 words a note, written once as
JSON Lines to ``--data`` and reused):

1. **the pattern detector, 1 process vs all cores**: ``PatternDetector(n_process=1)`` and ``n_process=<cores>`` over
   the engine's batches (the corpus read first, so the time is the matching), spans compared document by document;
   then the whole ``identifiers`` run (the DuckDB engine, ``analyze_to_disk``) with both, every table compared;
2. **the detection pass through the Dask scheduler over TCP**: a ``LocalCluster`` of 1, then 2 worker processes (one
   thread each; started, and the toolkit imported there, before the clock starts), the pass of
   ``identifiers --scheduler`` (partitions of the JSON Lines file read by the workers, spans written to the store)
   timed alone, then the graph on the client; every table compared with the engine's without a cluster. Speed-up =
   time(1 worker) / time(N workers); efficiency = speed-up / N;
3. with ``--spacy-vs-bare MWORDS``: the toolkit's first ``identifiers --detector spacy`` run (no NER cache) against
   bare spaCy ``nlp.pipe`` on the documents' texts (NER components only, ``n_process`` 2, batch 256), on a corpus of
   MWORDS million words: the ratio of their times (issue 36 asks for at most 1.2x).

Printed: words (blank-separated), seconds, words/s (per process or worker too), speed-ups, and the machine's load
before each step (``os.getloadavg``; the machine may be shared: compare the ratios of one run).

Usage: ``python benchmarks/detection_scaling.py [--words 5] [--detector patterns] [--workers 1,2] [--data DIR]
[--spacy-vs-bare 0.27]`` (``--words``: millions of words).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path


def corpus(data: Path, words_m: float) -> Path:
    """The generated corpus of about ``words_m`` million words (seed 36), kept in ``data`` between runs."""
    from toolkit.samples import generate_clinical

    path = data / f"notes-{words_m:g}M.jsonl"
    if not path.is_file():
        data.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        people = max(10, round(words_m * 1e6 / (2.05 * 540)))
        tmp = path.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(r, ensure_ascii=False) + "\n"
                          for r in generate_clinical(n_individuals=people, seed=36, words_per_note=500))
        tmp.rename(path)
        print(f"generated {path} in {time.perf_counter() - t0:.0f} s", flush=True)
    return path


def same_sets(a: Path, b: Path) -> bool:
    from pandas.testing import assert_frame_equal

    from toolkit.identifiers import load_identifiers
    from toolkit.identifiers.storage import TABLES

    x, y = load_identifiers(a), load_identifiers(b)
    for name in TABLES:
        assert_frame_equal(x[name], y[name], check_exact=True, obj=name)
    for s in (x["summary"], y["summary"]):
        s.pop("timings_s"), s.pop("run_key"), s["config"].pop("n_process")
    return x["summary"] == y["summary"]


def load() -> float:
    return round(os.getloadavg()[0], 2)


def patterns_on_cores(path: Path, work: Path, cores: int) -> None:
    from toolkit.identifiers import PatternDetector
    from toolkit.identifiers.engine import analyze_to_disk
    from toolkit.identifiers.stream import JsonlBatches

    batches = list(JsonlBatches(path))
    words = sum(len(d.text.split()) for b in batches for d in b)
    print(f"\n## patterns: 1 process vs {cores} ({words:,} words, {sum(map(len, batches)):,} documents)")
    results, spans = {}, {}
    for n in (1, cores):
        det = PatternDetector(n_process=n)
        if n > 1:  # the pool started outside the clock, as in a run it is started once
            det.detect(batches[0][:2 * n], progress=False)
        before = load()
        t0 = time.perf_counter()
        spans[n] = [s for b in batches for s in det.detect(b, progress=False)]
        results[n] = time.perf_counter() - t0
        det.close()
        print(f"detection, {n} process(es): {results[n]:.1f} s, {words / results[n] / 1e6:.3f}M words/s "
              f"({words / results[n] / n / 1e6:.3f}M per process); load {before}", flush=True)
    same = spans[1] == spans[cores]
    print(f"speed-up {results[1] / results[cores]:.2f}x on {cores} processes (efficiency "
          f"{results[1] / results[cores] / cores:.0%}); spans identical: {same}")
    del batches, spans
    runs = {}
    for n in (1, cores):
        before = load()
        t0 = time.perf_counter()
        s = analyze_to_disk(JsonlBatches(path), work / f"engine-p{n}", detector="patterns", n_process=n,
                            progress=False)
        runs[n] = time.perf_counter() - t0
        t = s["timings_s"]
        print(f"identifiers --detector patterns --n-process {n}: {runs[n]:.1f} s (detect {t['detect_s']:.1f} s, "
              f"segment {t['segment_s']:.1f} s, graph {t['graph_s']:.1f} s); load {before}", flush=True)
    print(f"whole run speed-up {runs[1] / runs[cores]:.2f}x; every table identical: "
          f"{same_sets(work / 'engine-p1', work / f'engine-p{cores}')}")


def _peak_rss() -> int:
    """The worker's peak resident memory: VmHWM of its own address space (``ru_maxrss`` would carry the high-water
    mark of the process it was forked from before its exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def _warm_up() -> None:
    import toolkit.identifiers.distributed  # noqa: F401


def on_cluster(path: Path, work: Path, detector: str, workers: list[int]) -> None:
    from toolkit.identifiers import IdentifierConfig
    from toolkit.identifiers.distributed import ClusterSpans, connect, detect_on_cluster, partitions
    from toolkit.identifiers.engine import analyze_to_disk
    from toolkit.identifiers.stream import JsonlBatches

    cfg = IdentifierConfig(detector=detector, n_process=1, ner_cache=False)  # every run parses: no cache on disk
    words = sum(len(d.text.split()) for b in JsonlBatches(path) for d in b)
    print(f"\n## the detection pass ({detector}) through the Dask scheduler over TCP ({words:,} words)")
    before = load()
    t0 = time.perf_counter()
    analyze_to_disk(JsonlBatches(path), work / "reference", cfg, progress=False)
    print(f"reference: the engine without a cluster, n_process=1: {time.perf_counter() - t0:.1f} s; load {before}")
    times = {}
    for n in workers:
        store = Path(tempfile.mkdtemp(prefix="spans.", dir=work))
        with connect("local", n) as client:
            client.wait_for_workers(n, timeout=120)
            client.run(_warm_up)  # each worker imports the toolkit once, outside the clock (as the pattern pool)
            parts = partitions(JsonlBatches(path), n)
            before = load()
            t0 = time.perf_counter()
            k = detect_on_cluster(client, parts, cfg, tuple(p for p in detector.split("+") if p != "oracle"), store,
                                  progress=False)
            times[n] = time.perf_counter() - t0
            rss = client.run(_peak_rss)
        store_bytes = sum(f.stat().st_size for f in store.rglob("*.parquet"))
        t0 = time.perf_counter()
        analyze_to_disk(JsonlBatches(path), work / f"cluster-{n}", cfg, detect_with=ClusterSpans(detector, store, k),
                        progress=False)
        graph = time.perf_counter() - t0
        shutil.rmtree(store)
        print(f"{n} worker(s): detection pass {times[n]:.1f} s ({k} partitions), {words / times[n] / 1e6:.3f}M words/s "
              f"({words / times[n] / n / 1e6:.3f}M per worker); then the graph here {graph:.1f} s; load {before}; "
              f"tables identical to the engine's: {same_sets(work / 'reference', work / f'cluster-{n}')}; "
              f"workers' peak memory {max(rss.values()) / 2**20:.0f} MiB; spans written {store_bytes / 2**20:.2f} MiB "
              f"({store_bytes / words:.3f} bytes/word)", flush=True)
    base = min(workers)
    for n in workers:
        if n != base:
            speed = times[base] / times[n]
            print(f"speed-up {base} -> {n} workers: {speed:.2f}x, efficiency {speed / (n / base):.0%}")


def spacy_vs_bare(path: Path, work: Path, processes: int, batch: int) -> None:
    """The toolkit's first ``identifiers --detector spacy`` run (no NER cache) against bare ``nlp.pipe`` over the
    documents' texts, the same pipeline (NER components only), processes and batch size."""
    from toolkit.identifiers import SpacyDetector
    from toolkit.identifiers.engine import analyze_to_disk
    from toolkit.identifiers.stream import JsonlBatches

    texts = [d.text for b in JsonlBatches(path) for d in b]
    words = sum(len(t.split()) for t in texts)
    print(f"\n## spaCy: the toolkit against bare nlp.pipe ({words:,} words; n_process {processes}, batch {batch})")
    nlp = SpacyDetector().load()
    before = load()
    t0 = time.perf_counter()
    n_ents = sum(len(doc.ents) for doc in nlp.pipe(texts, batch_size=batch, n_process=processes))
    bare = time.perf_counter() - t0
    print(f"bare nlp.pipe: {bare:.1f} s, {words / bare:,.0f} words/s ({n_ents:,} entities); load {before}", flush=True)
    del nlp
    before = load()
    t0 = time.perf_counter()
    s = analyze_to_disk(JsonlBatches(path), work / "spacy", detector="spacy", n_process=processes, batch_size=batch,
                        ner_cache=False, progress=False)
    whole = time.perf_counter() - t0
    print(f"toolkit, identifiers --detector spacy (first run, no cache): {whole:.1f} s (detect "
          f"{s['timings_s']['detect_s']:.1f} s, model load included); load {before}")
    print(f"toolkit / bare: {whole / bare:.2f}x (whole run), {s['timings_s']['detect_s'] / bare:.2f}x (detection)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--words", type=float, default=5.0, help="millions of words (default 5)")
    ap.add_argument("--detector", default="patterns", help="the detector of the cluster pass (default patterns)")
    ap.add_argument("--workers", default="1,2", help="worker processes of the clusters (default 1,2)")
    ap.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "detection_scaling"))
    ap.add_argument("--skip-cores", action="store_true", help="skip the 1-process vs all-cores patterns part")
    ap.add_argument("--skip-cluster", action="store_true", help="skip the Dask part")
    ap.add_argument("--spacy-vs-bare", type=float, default=0.0, metavar="MWORDS",
                    help="also compare the toolkit's spaCy detection with bare nlp.pipe on a corpus of MWORDS million "
                         "words (n_process 2, batch 256)")
    args = ap.parse_args()
    from toolkit.threads import core_count

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"commit {commit}; {core_count()} cores, "
          f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.1f} GiB; "
          f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    path = corpus(Path(args.data), args.words)
    work = Path(tempfile.mkdtemp(prefix="run.", dir=args.data))
    try:
        if not args.skip_cores:
            patterns_on_cores(path, work, core_count())
        if not args.skip_cluster:
            on_cluster(path, work, args.detector, [int(x) for x in args.workers.split(",")])
        if args.spacy_vs_bare:
            spacy_vs_bare(corpus(Path(args.data), args.spacy_vs_bare), work, 2, 256)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"uptime at the end: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")


if __name__ == "__main__":
    main()
