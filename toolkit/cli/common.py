"""What every command shares: option helpers, corpus loading, and running a command with the toolkit's error policy.

Errors the toolkit raises on purpose (:class:`~toolkit.errors.ToolkitError`: bad input, bad config) are printed as
one line ``error: …`` naming the problem and exit with status 2; anything else is a bug and keeps its traceback.
Everything a command writes (also through libraries: checkpoints, trainer states) is private to the user (umask 077).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from toolkit.errors import ToolkitError

CORPUS_HELP = "corpus file or folder (JSONL, CSV, i2b2 XML, TAB JSON, mbox, maildir, .txt)"
FORMAT_HELP = "corpus format (default: detect from the path)"
QUIET_HELP = "no progress bars"


def csv_list(value: str) -> list[str]:
    """``"a, b,,c"`` -> ``["a", "b", "c"]`` (comma-separated option values)."""
    return [v.strip() for v in value.split(",") if v.strip()]


def epochs(value: str) -> list[int]:
    """``--epochs 2,4,8`` -> ``[2, 4, 8]``; anything else is a :class:`ToolkitError`."""
    try:
        return [int(v) for v in csv_list(value)]
    except ValueError:
        raise ToolkitError(f"--epochs must be comma-separated integers such as 2,4,8, got {value!r}") from None


def load_corpus_split(path, split: str | None = None, format: str = "auto"):
    """The corpus at ``path``, restricted to the comma-separated ``split`` names when given (empty: all)."""
    from toolkit.corpus import load_corpus

    corpus = load_corpus(path, format=format)
    return corpus.filter(split=csv_list(split)) if split else corpus


def load_args_corpus(args: argparse.Namespace):
    """The corpus named by a command's ``corpus``, ``--format`` and ``--split`` options."""
    return load_corpus_split(args.corpus, args.split, args.format)


def with_suffix(path: Path, suffix: str) -> Path:
    """``corpus2.jsonl`` -> ``corpus2<suffix>`` (side files of a transformed corpus)."""
    return path.with_name(path.stem + suffix) if path.suffix else path.with_name(path.name + suffix)


def require_files(paths: list[str], what: str) -> None:
    """A :class:`ToolkitError` naming every one of ``paths`` that is not a file (``what``: e.g. "review file(s)")."""
    missing = [f for f in paths if not Path(f).is_file()]
    if missing:
        raise ToolkitError(f"{what} not found: {', '.join(missing)}")


def add_corpus_options(parser: argparse.ArgumentParser, *, positional: bool = False, split: str | None = None,
                       split_help: str = "comma-separated splits to keep (default: all documents)",
                       corpus_help: str = CORPUS_HELP) -> None:
    """The corpus (positional ``corpus`` or required ``--corpus``), ``--split`` and ``--format`` options."""
    if positional:
        parser.add_argument("corpus", help=corpus_help)
    else:
        parser.add_argument("--corpus", required=True, help=corpus_help)
    parser.add_argument("--split", default=split, help=split_help)
    parser.add_argument("--format", default="auto", help=FORMAT_HELP)


def add_quiet(parser: argparse.ArgumentParser, helptext: str = QUIET_HELP) -> None:
    parser.add_argument("--quiet", action="store_true", help=helptext)


def run_command(args: argparse.Namespace) -> int:
    """``args.func(args)`` under umask 077; a :class:`ToolkitError` becomes one line on stderr and status 2, Ctrl-C
    status 130."""
    old_umask = os.umask(0o077)
    try:
        return int(args.func(args) or 0)
    except ToolkitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        os.umask(old_umask)
