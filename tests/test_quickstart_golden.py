"""The quick start's results, value by value, against a golden record (``tests/data/quickstart_golden.json``): what a
user of ``python -m toolkit run configs/quickstart.yaml`` sees — verdict colours and the rules that decided them, every
test's p-value and effect, attack AUCs, intervals and TPRs, PII inference's top-1 per category, regurgitation, the §4
probe's privacy and utility, identifier counts, training losses, and per result table its rows and column sums — and
nothing that is not a result: no timings (``seconds``, ``*_s``, ``tokens_per_second``), paths, hashes, keys, commits
or dates, and no prose (a string with white space: the statements and figures repeat the numbers compared here).

What is compared (:func:`digest`): the result files of the shipped quick start (``prebuilt/notebooks/00_quickstart``,
notebook 00's run of ``configs/quickstart.yaml`` at ``workshop.yaml``'s parameters — none —, copied by
``make workshop``; record ``files``), and those of the fresh, smaller run that ``tests/test_quickstart_cli.py`` makes
(:data:`CLI_SETTINGS`; record ``cli_files``), checked there. A fresh run of the full quick start (about 3–4 min on 2
cores) is compared with ``python -m tests.test_quickstart_golden --run DIR``: on 2026-12-03 (commit ``7b51861``) it gave the
shipped values (the largest difference 1.4e-8, a sum of the blind baseline's centred scores), and the smaller run gave
the same bits at 1 and 2 threads. Numbers agree within ``rel = 1e-4`` or ``abs = 1e-6`` (:data:`REL`, :data:`ABS`): a CPU run is deterministic
at a given thread count, and at another the training's float sums differ in their last bits; the AUCs of 24 + 24
individuals move in steps of 1/576 and the permutation p-values in steps of 1e-4, so a real change shows. Strings,
booleans, ``None`` and the set of files and keys compare exactly.

Regenerate the record after a change that is meant to change the quick start's results (say so in CHANGELOG.md, before
→ after)::

    python -m tests.test_quickstart_golden --update            # from the shipped run (prebuilt/notebooks/00_quickstart)
    python -m tests.test_quickstart_golden --update --run DIR  # from a run directory of the quick start
    python -m tests.test_quickstart_golden --update --cli DIR  # cli_files, from a run at CLI_SETTINGS

or ``TOOLKIT_UPDATE_GOLDEN=1 python -m pytest tests/test_quickstart_golden.py`` (the fast test rewrites the record
from the shipped run, then passes).
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "data" / "quickstart_golden.json"
SHIPPED = ROOT / "prebuilt" / "notebooks" / "00_quickstart"
REL, ABS = 1e-4, 1e-6
#: the smaller quick start of tests/test_quickstart_cli.py (``toolkit run configs/quickstart.yaml --quiet`` and these)
CLI_SETTINGS = ["--set", "training.epochs=[1,2]", "--set", "audit.n_bootstrap=20", "--set", "corpus.n_individuals=10",
                "--set", "audit.attacks.pii_occurrences=20", "--set", "audit.attacks.pii_candidates=5",
                "--set", "audit.attacks.memorisation_occurrences=50"]

#: the result files, as globs relative to a run directory
JSON_FILES = ("attacks/**/attacks.json", "attacks/**/identifiers.json", "attacks/**/verdict.json",
              "attacks/**/roc.json", "audit/**/metrics.json", "audit/**/roc.json", "regurgitation/*/regurgitation.json",
              "identifiers_members/summary.json", "identifiers_all/summary.json", "runs/*/epoch-*/training_log.json")
TABLES = ("attacks/**/scores.parquet", "attacks/**/one_run.parquet", "audit/**/mia_predictions.parquet",
          "audit/**/predictions.parquet", "identifiers_members/*.parquet", "identifiers_all/*.parquet")
#: keys that hold no result: timings, where files are, keyed hashes (a run's own random key), digests
SKIP_KEYS = {"seconds", "train_seconds", "tokens_per_second", "started", "date", "commit", "sha256", "run_key",
             "examples_hashed", "examples_hash", "checkpoint", "model", "base", "path", "work_dir",
             "base_fingerprint", "identifiers_fingerprint", "timings_s"}
_TIMING = re.compile(r".*(_s|_seconds|_runtime|_per_second|_sha256)$")


def _skip(key: str) -> bool:
    return key in SKIP_KEYS or bool(_TIMING.fullmatch(key))


def _values(x, out: dict, at: str) -> None:
    """Flatten ``x`` into ``out[path] = value``: numbers, booleans, None and strings without white space or ``/``."""
    if isinstance(x, dict):
        for k, v in x.items():
            if not _skip(str(k)):
                _values(v, out, f"{at}.{k}")
    elif isinstance(x, list) and x and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in x):
        out[at] = [v if math.isfinite(v) else repr(v) for v in x]  # a curve or a list of counts: one value
    elif isinstance(x, list):
        out[f"{at}#len"] = len(x)
        for i, v in enumerate(x):
            _values(v, out, f"{at}[{i}]")
    elif isinstance(x, str):
        if not re.search(r"[\s/\\]", x):
            out[at] = x
    elif isinstance(x, float) and not math.isfinite(x):
        out[at] = repr(x)
    else:
        out[at] = x


def _table(path: Path) -> dict:
    """Rows, columns and each numeric column's sum (NaN-free) of one parquet table: its values, not its text."""
    import pandas as pd

    df = pd.read_parquet(path)
    out: dict = {"rows": int(len(df)), "columns": [str(c) for c in df.columns]}
    for c in [c for c in df.columns if not _skip(str(c))]:
        s = df[c]
        if pd.api.types.is_bool_dtype(s):
            out[f"sum.{c}"] = int(s.sum())
        elif pd.api.types.is_numeric_dtype(s):
            v = pd.to_numeric(s, errors="coerce").astype(float)
            out[f"sum.{c}"] = float(v.sum(skipna=True))
            out[f"nan.{c}"] = int(v.isna().sum())
        else:
            out[f"distinct.{c}"] = int(s.astype(str).nunique())
    return out


def digest(run: Path) -> dict:
    """The values of a quick-start run directory's result files: ``{relative path: {flattened key: value}}``."""
    run = Path(run)
    out: dict = {}
    for pattern in JSON_FILES:
        for f in sorted(run.glob(pattern)):
            flat: dict = {}
            _values(json.loads(f.read_text(encoding="utf-8")), flat, "")
            out[f.relative_to(run).as_posix()] = flat
    for pattern in TABLES:
        for f in sorted(run.glob(pattern)):
            out[f.relative_to(run).as_posix()] = _table(f)
    return dict(sorted(out.items()))


def differences(got: dict, want: dict, rel: float = REL, abs_: float = ABS) -> list[str]:
    """One line per file, key or value of ``got`` that differs from ``want`` (numbers within ``rel``/``abs_``)."""
    lines = [f"{f}: missing" for f in want if f not in got] + [f"{f}: not in the record" for f in got if f not in want]
    for f in sorted(set(got) & set(want)):
        a, b = got[f], want[f]
        lines += [f"{f}: {k} missing" for k in b if k not in a] + [f"{f}: {k} new" for k in a if k not in b]
        for k in sorted(set(a) & set(b)):
            x, y = a[k], b[k]
            if _close(x, y, rel, abs_):
                continue
            lines.append(f"{f}: {k} = {x!r}, recorded {y!r}")
    return lines


def _close(x, y, rel: float, abs_: float) -> bool:
    """Numbers within the tolerance, lists of numbers element by element; anything else equal and of one type."""
    if isinstance(x, list) and isinstance(y, list):
        return len(x) == len(y) and all(_close(a, b, rel, abs_) for a, b in zip(x, y))
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (x, y)):
        return math.isclose(x, y, rel_tol=rel, abs_tol=abs_)
    return x == y and type(x) is type(y)


def write_golden(run: Path | None = None, cli: Path | None = None, path: Path = GOLDEN) -> dict:
    """Rewrite ``files`` from ``run`` and/or ``cli_files`` from ``cli`` (the other kept as recorded)."""
    old = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    record = {"source": "the quick start (configs/quickstart.yaml)", "rel": REL, "abs": ABS,
              "files": digest(run) if run is not None else old.get("files", {}),
              "cli_settings": CLI_SETTINGS, "cli_files": digest(cli) if cli is not None else old.get("cli_files", {})}
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [f' "{k}": {json.dumps(record[k])},' for k in ("source", "rel", "abs", "cli_settings")]
    for n, part in enumerate(("files", "cli_files")):
        lines.append(f' "{part}": {{')
        for i, (f, values) in enumerate(record[part].items()):  # one value a line: a change reads as one line
            body = ",\n".join(f"   {json.dumps(k)}: {json.dumps(v)}" for k, v in values.items())
            lines.append(f"  {json.dumps(f)}: {{\n{body}\n  }}" + ("," if i < len(record[part]) - 1 else ""))
        lines.append(" }," if n == 0 else " }")
    path.write_text("{\n" + "\n".join(lines) + "\n}\n", encoding="utf-8")
    return record


def check_golden(run: Path, part: str = "files") -> None:
    """Assert that ``run``'s result values are the record's ``part`` (``files`` or ``cli_files``)."""
    want = json.loads(GOLDEN.read_text(encoding="utf-8"))
    diff = differences(digest(run), want[part], want["rel"], want["abs"])
    assert not diff, f"{len(diff)} value(s) differ from {GOLDEN.name} (regenerate: see the module docstring):\n" + \
        "\n".join(diff[:40])


def test_the_shipped_quick_start_has_the_recorded_values():
    """The shipped run (what ``make workshop`` copies and notebook 00 shows) against the record: fast, no model run."""
    if os.environ.get("TOOLKIT_UPDATE_GOLDEN"):
        write_golden(SHIPPED)
    check_golden(SHIPPED)


def test_the_record_holds_the_results_and_no_timings():
    files = json.loads(GOLDEN.read_text(encoding="utf-8"))["files"]
    verdicts = {f: v[".level"] for f, v in files.items() if f.endswith("verdict.json")}
    assert set(verdicts) == {"attacks/base/verdict.json", "attacks/clm/epoch-12/verdict.json",
                             "attacks/ppclm/epoch-12/verdict.json"}
    assert all(level in {"green", "amber", "red", "incomplete"} for level in verdicts.values())
    keys = {k for v in files.values() for k in v}
    assert any(k.endswith(".auc") for k in keys) and any(k.endswith(".p_value") for k in keys)
    assert not [k for k in keys if re.search(r"(seconds|started|sha256|\.date|\.commit|_s)(\.|\[|$)", k)]


def test_a_changed_value_is_found():
    want = {"a.json": {".auc": 0.75, ".level": "red", ".n": 24}}
    assert differences({"a.json": {".auc": 0.75 + 1e-9, ".level": "red", ".n": 24}}, want) == []
    got = differences({"a.json": {".auc": 0.7517, ".level": "amber", ".n": 24.0 + 1}}, want)
    assert got == ["a.json: .auc = 0.7517, recorded 0.75", "a.json: .level = 'amber', recorded 'red'",
                   "a.json: .n = 25.0, recorded 24"]
    assert differences({}, want) == ["a.json: missing"]


def main(argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description="rewrite tests/data/quickstart_golden.json")
    ap.add_argument("--update", action="store_true", help="rewrite the record")
    ap.add_argument("--run", default=str(SHIPPED), help="the quick start's run directory (default: the shipped one)")
    ap.add_argument("--cli", help="a run directory of the quick start at CLI_SETTINGS (record cli_files)")
    args = ap.parse_args(argv)
    part, run = ("cli_files", Path(args.cli)) if args.cli else ("files", Path(args.run))
    if not args.update:
        diff = differences(digest(run), json.loads(GOLDEN.read_text(encoding="utf-8"))[part])
        print("\n".join(diff) or "same values")
        return 1 if diff else 0
    record = write_golden(**({"cli": run} if args.cli else {"run": run}))
    print(f"{GOLDEN}: {part}: {len(record[part])} files, {sum(map(len, record[part].values()))} values")
    return 0


if __name__ == "__main__":
    sys.exit(main())
