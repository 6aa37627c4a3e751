"""Regenerate the sample data: ``python -m toolkit.samples [--out data_samples] [--seed 0] [--stats]``.

Writes ``clinical/notes.jsonl``, ``clinical/term_categories.csv``, ``email/{train,validation,test}.jsonl`` and
``email/prompts.jsonl`` under ``--out``. The same seed and Faker version always give the same bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from collections import Counter
from pathlib import Path

from toolkit.samples import write_all
from toolkit.samples.clinical import word_sharing
from toolkit.samples.email import address_counts


def _read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def print_stats(out: Path) -> None:
    """Print the statistics that data_samples/README.md reports."""
    notes = _read_jsonl(out / "clinical" / "notes.jsonl")
    by_split: Counter[str] = Counter(d["split"] for d in notes)
    people = {s: len({d["person_id"] for d in notes if d["split"] == s}) for s in sorted(by_split)}
    words = [len(d["text"].split()) for d in notes]
    print("clinical documents per split:", dict(sorted(by_split.items())), "individuals:", people)
    print(f"clinical words per note: mean {sum(words) / len(words):.1f}, min {min(words)}, max {max(words)}")
    print("clinical smoking labels:", dict(Counter(d["labels"]["smoking"] for d in notes).most_common()))
    print("clinical span labels:", dict(Counter(s["label"] for d in notes for s in d["spans"]).most_common()))
    print("clinical word sharing (train+heldout):", word_sharing(notes))
    train = _read_jsonl(out / "email" / "train.jsonl")
    counts = address_counts(train)
    sizes = {s: len(_read_jsonl(out / "email" / f"{s}.jsonl")) for s in ("train", "validation", "test")}
    print("email messages:", sizes)
    print("email addresses in train:", len(counts), "top 5:", counts.most_common(5),
          "singletons:", sum(v == 1 for v in counts.values()), "at most 5:", sum(v <= 5 for v in counts.values()))
    print("email span labels (train):", dict(Counter(s["label"] for d in train for s in d["spans"]).most_common()))
    prompts = _read_jsonl(out / "email" / "prompts.jsonl")
    print("prompts:", len(prompts), "ending with:", dict(Counter(p["prompt"].rsplit("\n", 1)[-1] for p in prompts)),
          "targets with >= 50 train occurrences:", sum(counts[p["target"].lower()] >= 50 for p in prompts))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m toolkit.samples", description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="data_samples", help="output folder (default: data_samples)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0, the committed samples)")
    parser.add_argument("--stats", action="store_true", help="also print the statistics the README reports")
    args = parser.parse_args(argv)
    out = Path(args.out)
    t0 = time.perf_counter()
    paths = write_all(out, seed=args.seed)
    elapsed = time.perf_counter() - t0
    for p in paths:
        digest = hashlib.sha256(p.read_bytes()).hexdigest()[:16]
        print(f"{p}  {p.stat().st_size:>9,} bytes  sha256 {digest}")
    print(f"generated in {elapsed:.1f} s")
    if args.stats:
        print_stats(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
