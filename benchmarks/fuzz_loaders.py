"""Fuzz the corpus loaders and the identifier analysis: the properties of ``tests/test_hostile_inputs.py`` at a much
higher example count, with a random (or given) seed. Not part of the default test run.

Each property generates hostile cases with hypothesis (arbitrary Unicode, controls, line breaks, bad and overlapping
spans, blank and duplicate ids, byte-level mutations of valid files of every format) and checks that the toolkit
either reads them back exactly or stops with its own clear error naming the file and record, within a time limit.
Hypothesis stops a property at its first failure and shrinks it; the table reports, per property, how many cases were
tried, how many loaded and how many were clear errors, the time, and the minimal failing case if any.

    python benchmarks/fuzz_loaders.py                      # 2,000 cases per property, random seed
    python benchmarks/fuzz_loaders.py --examples 500 --seed 1 --only jsonl csv

The machine this ran on is shared; the timings are indicative only.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import traceback
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from hypothesis import HealthCheck, Phase, given, seed, settings  # noqa: E402

import hostile  # noqa: E402


def run_property(name: str, strategy, check, examples: int, rng_seed: int) -> dict:
    outcomes: Counter[str] = Counter()

    @seed(rng_seed)
    @settings(max_examples=examples, deadline=None, database=None, print_blob=True,
              phases=[Phase.generate, Phase.target, Phase.shrink],
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def prop(case):
        outcomes[check(case)] += 1

    t0 = time.perf_counter()
    failure = None
    try:
        prop()
    except Exception as exc:  # noqa: BLE001 - report every failure kind, with its shrunk example
        failure = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        notes = getattr(exc, "__notes__", [])
        if notes:
            failure += "\n" + "\n".join(notes)
    return {"property": name, "cases": sum(outcomes.values()), "ok": outcomes["ok"], "error": outcomes["error"],
            "seconds": time.perf_counter() - t0, "failure": failure}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--examples", type=int, default=2000, help="cases per property (default 2000)")
    ap.add_argument("--seed", type=int, default=None, help="random seed (default: a fresh one, printed)")
    ap.add_argument("--only", nargs="*", help="property names (default: all)")
    args = ap.parse_args(argv)
    rng_seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    props = dict(hostile.LOADER_PROPERTIES)
    props["analysis"] = hostile.ANALYSIS_PROPERTY
    names = args.only or list(props)
    print(f"seed {rng_seed}, up to {args.examples} cases per property; {hostile.LIMIT_S:.0f} s per call counts as "
          f"a hang")
    rows = []
    for name in names:
        strategy, check = props[name]
        row = run_property(name, strategy, check, args.examples, rng_seed)
        rows.append(row)
        status = "FAILED" if row["failure"] else "held"
        print(f"{name:10s} {row['cases']:6d} cases  {row['ok']:6d} loaded  {row['error']:6d} clear errors  "
              f"{row['seconds']:7.1f} s  {status}", flush=True)
        if row["failure"]:
            print("    " + row["failure"].replace("\n", "\n    "), flush=True)
    total = sum(r["cases"] for r in rows)
    failed = [r["property"] for r in rows if r["failure"]]
    print(f"\n{total} cases in {sum(r['seconds'] for r in rows):.0f} s; "
          + (f"failures in: {', '.join(failed)}" if failed else "every property held"))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
