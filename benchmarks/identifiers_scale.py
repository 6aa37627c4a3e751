"""Benchmark: identifier analysis at hospital scale — the out-of-core engine against the in-memory one, in one run.

Corpora of 27M, 108M and 270M words are generated with the sample generator (``toolkit.samples``): blocks of 24,400
patients (~50,000 notes of ~540 words, ~27M words), each block with its own seed and an id prefix, written once as
JSON Lines to ``--data`` and reused. For every size and implementation one fresh process runs what
``python -m toolkit identifiers CORPUS --detector oracle --engine duckdb|memory`` runs (reading, analysis, writing the
set; not the command's separate detector-quality report) and reports its wall time and peak resident memory
(``getrusage`` maxrss: Python, Arrow and DuckDB together). The in-memory engine is skipped where it would not fit
(about 140 bytes of peak memory per word: ``--memory-skip-above``).
The outputs of both engines are compared (every table and the summary) wherever both ran. The machine's load average
is printed before each run: the machine may be shared, so compare the ratios of one run.

``--engines`` also compares DuckDB with Polars' streaming engine on the graph step alone (the unigram edge table,
term degrees and per-individual counts from the first pass's batch files of the 27M corpus): time and peak memory.

``--cli oracle,patterns`` runs the command itself instead (``python -m toolkit identifiers CORPUS --detector D``, its
default memory limit) and reports wall time, peak resident memory of the whole process tree (sampled from /proc),
peak disk used (free space sampled: outputs, intermediate files and DuckDB's spill) and the output's size: the
hospital-scale run is ``--sizes 1107 --cli oracle,patterns`` (41 blocks: 1.0M individuals, ~1.1B words; the corpus
is ~7 GB, generated straight to disk, one block in memory at a time).

Usage: ``python benchmarks/identifiers_scale.py [--sizes 27,108,270] [--memory-limit 8GB] [--engines] [--cli D]``
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BLOCK_PATIENTS = 24_400
BLOCK_WORDS_M = 27


def block(data: Path, index: int) -> Path:
    """Generated block ``index`` (seed ``1 + index``, ids prefixed ``bNNN-``), kept between runs."""
    path = data / f"block-{index:03d}.jsonl"
    if not path.is_file():
        data.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        tmp = path.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.writelines(block_lines(index))
        tmp.rename(path)
        print(f"  generated block {index} in {time.perf_counter() - t0:.0f} s", flush=True)
    return path


def generate(data: Path, size: int, jobs: int = 1) -> Path:
    """The corpus of ``size`` million words: ``size / 27`` blocks (rounded up), concatenated. Blocks already written
    (by a smaller size) are copied; the others are generated straight into the corpus by ``jobs`` processes, in
    order, a block of ~27M words at a time per process (a 1,100M-word corpus never holds more than ``jobs + 2``
    blocks in memory)."""
    import math
    import shutil
    from concurrent.futures import ProcessPoolExecutor

    path = data / f"notes-{size}M.jsonl"
    if not path.is_file():
        data.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        t0 = time.perf_counter()
        n_blocks = max(1, math.ceil(size / BLOCK_WORDS_M - 0.01))
        if n_blocks <= 10:
            for i in range(n_blocks):
                block(data, i)
        todo = [i for i in range(n_blocks) if not (data / f"block-{i:03d}.jsonl").is_file()]
        with open(tmp, "wb") as out, ProcessPoolExecutor(max(1, jobs)) as pool:
            made = iter(pool.map(block_bytes, todo)) if todo else iter(())
            for i in range(n_blocks):
                cached = data / f"block-{i:03d}.jsonl"
                if cached.is_file():
                    with open(cached, "rb") as fh:
                        shutil.copyfileobj(fh, out, 1 << 24)
                else:
                    out.write(next(made))
                print(f"  corpus {size}M: block {i + 1}/{n_blocks} written ({time.perf_counter() - t0:.0f} s)",
                      flush=True)
        tmp.rename(path)
    return path


def block_bytes(index: int) -> bytes:
    """Block ``index`` as UTF-8 JSON Lines (generated in a worker process of :func:`generate`)."""
    return b"".join(line.encode("utf-8") for line in block_lines(index))


def block_lines(index: int):
    """The JSON lines of block ``index`` (seed ``1 + index``, ids prefixed ``bNNN-``)."""
    from toolkit.samples import generate_clinical

    for r in generate_clinical(n_individuals=BLOCK_PATIENTS, seed=1 + index, words_per_note=500):
        r["doc_id"], r["person_id"] = f"b{index:03d}-{r['doc_id']}", f"b{index:03d}-{r['person_id']}"
        yield json.dumps(r, ensure_ascii=False) + "\n"


def tree_rss(pid: int) -> int:
    """Resident memory (bytes) of process ``pid`` and all its descendants, from /proc."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(entry.name))
            rss[int(entry.name)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            continue
    total, stack = 0, [pid]
    while stack:
        p = stack.pop()
        total += rss.get(p, 0)
        stack += children.get(p, [])
    return total


def cli_run(corpus: Path, out: Path, detector: str, extra: list[str]) -> dict:
    """``python -m toolkit identifiers CORPUS --detector D --out OUT`` as a user runs it (default memory limit):
    wall time, peak resident memory of the process tree (sampled every 0.5 s, and the largest single process's
    maxrss from the kernel), peak disk used (the file system's free space, sampled: outputs, intermediate files and
    DuckDB's spill together) and the output's size."""
    import shutil
    import threading

    shutil.rmtree(out, ignore_errors=True)
    load = os.getloadavg()[0]
    free0 = shutil.disk_usage(out.parent).free
    cmd = [sys.executable, "-m", "toolkit", "identifiers", str(corpus), "--detector", detector, "--out", str(out),
           *extra]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peak = {"rss": 0, "disk": 0}

    def sample() -> None:
        while proc.poll() is None:
            peak["rss"] = max(peak["rss"], tree_rss(proc.pid))
            peak["disk"] = max(peak["disk"], free0 - shutil.disk_usage(out.parent).free)
            time.sleep(0.5)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    log = proc.stdout.read()
    proc.wait()
    seconds = time.perf_counter() - t0
    sampler.join()
    maxrss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    if proc.returncode:
        print(log[-4000:])
        return {"failed": True, "rc": proc.returncode, "seconds": seconds, "load": load}
    out_bytes = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    summary = json.loads((out / "summary.json").read_text())
    return {"seconds": seconds, "peak_tree_rss_gb": peak["rss"] / 2**30, "max_process_rss_gb": maxrss / 2**30,
            "peak_disk_gb": peak["disk"] / 2**30, "output_gb": out_bytes / 2**30, "n_words": summary.get("n_words"),
            "n_individuals": summary.get("n_individuals"), "timings_s": summary.get("timings_s"), "load": load,
            "load_after": os.getloadavg()[0]}


def grown(data: Path, corpus: Path, share: float) -> Path:
    """``corpus`` followed by new patients' notes (block 900's first notes, seed 901, ids ``b900-``) making about
    ``share`` of its words more: what a hospital's next run sees after a month of new notes."""
    path = corpus.with_name(f"{corpus.stem}-grow{share:g}.jsonl")
    if not path.is_file():
        target = share * sum(len(json.loads(line)["text"].split()) for line in open(corpus, encoding="utf-8"))
        tmp = path.with_suffix(".tmp")
        added = 0
        with open(tmp, "w", encoding="utf-8") as out:
            with open(corpus, encoding="utf-8") as fh:
                for line in fh:
                    out.write(line)
            for line in block_lines(900):
                if added >= target:
                    break
                out.write(line)
                added += len(json.loads(line)["text"].split())
        tmp.rename(path)
        print(f"  {path.name}: {added:,} new words ({added / target * share:.1%} more)", flush=True)
    return path


def child(engine: str, corpus: str, out: str, memory_limit: str, threads: str) -> None:
    """Run one engine as the ``identifiers`` command runs it (read, analyse, write the set) and print wall time and
    peak memory as JSON. The command's detector-quality report (a separate step) is left out."""
    from toolkit.identifiers import IdentifierConfig, analyze, analyze_to_disk
    from toolkit.identifiers.stream import JsonlBatches

    cfg = IdentifierConfig(detector="oracle")
    t0 = time.perf_counter()
    if engine == "memory":
        from toolkit.corpus import load_corpus

        analyze(load_corpus(corpus), cfg, progress=False).save(out)
    else:
        analyze_to_disk(JsonlBatches(corpus), out, cfg, memory_limit=memory_limit, threads=int(threads) or None,
                        progress=False)
    out = {"seconds": time.perf_counter() - t0,
           "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}
    print("RESULT " + json.dumps(out), flush=True)


def run(corpus: Path, out: Path, engine: str, memory_limit: str, threads: str) -> dict:
    load = os.getloadavg()[0]
    cmd = [sys.executable, __file__, "--child", engine, str(corpus), str(out), memory_limit, threads]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    lines = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    if proc.returncode or not lines:
        print(proc.stdout[-2000:], proc.stderr[-4000:])
        return {"failed": True, "load": load}
    return {**json.loads(lines[-1][7:]), "load": load, "load_after": os.getloadavg()[0]}


def same_outputs(a: Path, b: Path) -> bool:
    from pandas.testing import assert_frame_equal

    from toolkit.identifiers import load_identifiers

    x, y = load_identifiers(a), load_identifiers(b)
    for name in ("terms", "individuals", "positions", "spans", "documents"):
        assert_frame_equal(x[name], y[name], check_exact=True)
    x["summary"].pop("timings_s"), y["summary"].pop("timings_s")
    return x["summary"] == y["summary"]


def engines(corpus: Path, work: Path, memory_limit: str) -> None:
    """DuckDB against Polars on the graph step (unigram edges, degrees, per-individual counts)."""
    script = f"""
import resource, sys, time
from pathlib import Path
work = Path({str(work)!r})
t0 = time.perf_counter()
if sys.argv[1] == "duckdb":
    import duckdb
    con = duckdb.connect(str(work / "bench.duckdb"))
    con.execute("SET memory_limit = '{memory_limit}'")
    con.execute("SET enable_progress_bar = false")
    con.execute("SET temp_directory = '" + str(work / "spill") + "'")
    src = lambda k: "read_parquet('" + str(work / k / "*" / "*.parquet") + "', hive_partitioning = true)"
    con.execute("CREATE TABLE gv AS SELECT term, (row_number() OVER (ORDER BY term) - 1)::INTEGER AS gid "
                "FROM (SELECT DISTINCT term FROM " + src("vocab") + ")")
    con.execute("CREATE TABLE vmap AS SELECT v.b, v.t, g.gid FROM " + src("vocab") + " v JOIN gv g USING (term)")
    con.execute("CREATE TABLE e1 AS SELECT m.gid, w.p, count(*) AS n_occ, count(*) FILTER (WHERE w.d) AS n_dir "
                "FROM " + src("words") + " w JOIN vmap m ON m.b = w.b AND m.t = w.t GROUP BY ALL")
    con.execute("CREATE TABLE t1 AS SELECT gid, count(*) AS n_ind, sum(n_occ) AS n_occ FROM e1 GROUP BY gid")
    n = con.execute("SELECT count(*) FROM (SELECT e.p, count(*) FROM e1 e JOIN t1 USING (gid) "
                    "WHERE t1.n_ind < 2 GROUP BY e.p)").fetchall()[0][0]
else:
    import polars as pl
    words = pl.scan_parquet(str(work / "words" / "*" / "*.parquet"), hive_partitioning=True)
    vocab = pl.scan_parquet(str(work / "vocab" / "*" / "*.parquet"), hive_partitioning=True)
    gv = vocab.select("term").unique().sort("term").with_row_index("gid").collect(engine="streaming").lazy()
    vmap = vocab.join(gv, on="term").select("b", "t", "gid")
    e1 = (words.join(vmap, on=["b", "t"]).group_by("gid", "p")
          .agg(pl.len().alias("n_occ"), pl.col("d").sum().alias("n_dir")))
    e1.sink_parquet(str(work / "e1.parquet"), engine="streaming")
    e1 = pl.scan_parquet(str(work / "e1.parquet"))
    t1 = e1.group_by("gid").agg(pl.len().alias("n_ind"), pl.col("n_occ").sum())
    n = (e1.join(t1.filter(pl.col("n_ind") < 2), on="gid").group_by("p").len()
         .collect(engine="streaming").height)
print(sys.argv[1], round(time.perf_counter() - t0, 1), "s", round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
      / 2**20, 2), "GB", n, "individuals with indirect words", flush=True)
"""
    from toolkit.identifiers.engine_passes import EngineRun  # the batch files of the first pass
    from toolkit.identifiers import IdentifierConfig
    from toolkit.identifiers.stream import JsonlBatches
    from toolkit.identifiers.storage import StagedIdentifiers

    work.mkdir(parents=True, exist_ok=True)
    with StagedIdentifiers(work / "unused") as staged:
        r = EngineRun(IdentifierConfig(detector="oracle"), staged, work, 2)
        t0 = time.perf_counter()
        for docs in JsonlBatches(corpus):
            r.add_batch(docs)
        print(f"first pass (batch files): {r.n_words / 1e6:.1f}M words in {time.perf_counter() - t0:.0f} s")
        r.spans.close(), r.documents.close()
    for name in ("duckdb", "polars"):
        subprocess.run([sys.executable, "-c", script, name], check=False)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        return child(*sys.argv[2:7])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="27,108,270", help="millions of words, multiples of 27")
    ap.add_argument("--data", default=str(Path(tempfile.gettempdir()) / "identifiers-scale"))
    ap.add_argument("--memory-limit", default="6GB", help="the duckdb engine's --memory-limit")
    ap.add_argument("--threads", default="0", help="the duckdb engine's threads (0: the CPUs available)")
    ap.add_argument("--memory-skip-above", type=float, default=110, help="skip the in-memory engine above this many "
                    "million words (it needs ~140 bytes per word)")
    ap.add_argument("--engines", action="store_true", help="also compare DuckDB and Polars on the graph step")
    ap.add_argument("--keep", action="store_true", help="keep the outputs")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                    help="processes generating a corpus's blocks (default: the CPUs)")
    ap.add_argument("--cli", metavar="DETECTORS", help="instead: run `python -m toolkit identifiers` itself with each "
                    "of these detectors (comma-separated, e.g. oracle,patterns) at its default memory limit on each "
                    "size, and report wall time, peak memory of the process tree, peak disk used; spaCy detectors "
                    "start from an empty NER cache of their own (--cache-dir in --data)")
    ap.add_argument("--grow", type=float, default=0.0, metavar="SHARE",
                    help="with --cli: run each detector again on the corpus plus SHARE more words of new patients' "
                         "notes, with the NER cache the first run filled (its saving at that size)")
    args = ap.parse_args()
    data = Path(args.data)
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"machine: {os.cpu_count()} CPUs, {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} "
          f"GiB; load average {os.getloadavg()}")
    if args.cli:
        import shutil

        for size in sizes:
            corpus = generate(data, size, args.jobs)
            print(f"{size}M: corpus {corpus.stat().st_size / 2**30:.2f} GB on disk", flush=True)
            for detector in args.cli.split(","):
                cache = data / f"ner-cache-{size}M-{detector}"
                shutil.rmtree(cache, ignore_errors=True)
                extra = ["--cache-dir", str(cache)] if "spacy" in detector else []
                res = cli_run(corpus, data / f"out-{size}M-cli-{detector}", detector, extra)
                print(f"RESULT {size}M {detector} " + json.dumps(res), flush=True)
                if args.grow:
                    more = grown(data, corpus, args.grow)
                    res = cli_run(more, data / f"out-{size}M-cli-{detector}-grow", detector, extra)
                    print(f"RESULT {size}M+{args.grow:g} {detector} (cache of the first run) " + json.dumps(res),
                          flush=True)
                if not args.keep:
                    shutil.rmtree(data / f"out-{size}M-cli-{detector}", ignore_errors=True)
                    shutil.rmtree(data / f"out-{size}M-cli-{detector}-grow", ignore_errors=True)
        return
    rows = []
    for size in sizes:
        corpus = generate(data, size, args.jobs)
        for engine in ("duckdb", "memory"):
            if engine == "memory" and size > args.memory_skip_above:
                rows.append((size, engine, None))
                print(f"{size}M words, memory engine: skipped (needs about {size * 0.14:.0f} GB)", flush=True)
                continue
            res = run(corpus, data / f"out-{size}M-{engine}", engine, args.memory_limit, args.threads)
            print(f"{size}M words, {engine}: {res}", flush=True)
            rows.append((size, engine, res))
        if (data / f"out-{size}M-memory").is_dir() and (data / f"out-{size}M-duckdb").is_dir():
            same = same_outputs(data / f"out-{size}M-duckdb", data / f"out-{size}M-memory")
            print(f"{size}M words: same outputs: {same}")
    n_words = {}
    for size in sizes:
        s = data / f"out-{size}M-duckdb" / "summary.json"
        n_words[size] = json.loads(s.read_text())["n_words"] if s.is_file() else size * 1e6
    print(f"\n{'words':>8} {'engine':<8} {'seconds':>8} {'words/s':>12} {'peak GB':>8} {'B/word':>7} {'load':>11}")
    for size, engine, res in rows:
        if res is None or res.get("failed"):
            print(f"{n_words[size] / 1e6:7.0f}M {engine:<8} {'skipped' if res is None else 'failed':>8}")
            continue
        print(f"{n_words[size] / 1e6:7.0f}M {engine:<8} {res['seconds']:8.1f} {n_words[size] / res['seconds']:12,.0f} "
              f"{res['peak_rss_gb']:8.2f} {res['peak_rss_gb'] * 2**30 / n_words[size]:7.1f} "
              f"{res['load']:5.1f}-{res['load_after']:<5.1f}")
    if args.engines:
        engines(data / f"notes-{sizes[0]}M.jsonl", data / "engines-work", args.memory_limit)
    if not args.keep:
        import shutil

        for size in sizes:
            for engine in ("duckdb", "memory"):
                shutil.rmtree(data / f"out-{size}M-{engine}", ignore_errors=True)


if __name__ == "__main__":
    main()
