"""What every command shares: option helpers, corpus loading, and running a command with the toolkit's error policy.

Errors the toolkit raises on purpose (:class:`~toolkit.errors.ToolkitError`: bad input, bad config) are printed as
one line ``error: …`` naming the problem and exit with status 2; anything else is a bug and keeps its traceback.
Everything a command writes (also through libraries: checkpoints, trainer states) is private to the user (umask 077).

Every command that reads a corpus takes the same reading options, declared once as the fields of
:class:`toolkit.corpus.CorpusReading` (``--format``, the field mapping of CSV/JSONL/Parquet exports, TAB's
``--annotator``, ``--person-rule``, ``--on-error``): :func:`add_reading_options` adds them to a command,
:func:`reading_from_args` gives them back as a ``CorpusReading``, and :func:`load_args_corpus` reads the corpus with
them (errors name the flag).
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from dataclasses import fields
from pathlib import Path

from toolkit.corpus.reading import CorpusReading
from toolkit.errors import ToolkitError

CORPUS_HELP = ("corpus file or folder (JSONL, CSV, Parquet, i2b2/n2c2 XML, TAB JSON, mbox, maildir, Enron layout, "
               ".txt)")
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


def load_corpus_split(path, split: str | None = None, reading: CorpusReading | None = None, *,
                      skipped_path: Path | None = None):
    """The corpus at ``path`` read as ``reading`` says (default: format detected, the readers' defaults), restricted
    to the comma-separated ``split`` names when given (empty: all).

    With ``on_error="skip"`` the skipped records are written to ``skipped_path`` and counted on the terminal."""
    from toolkit.corpus import CorpusWarning

    reading = reading or CorpusReading()
    with warnings.catch_warnings():
        # the command prints the count and the file itself; the reader's warning names the library attribute
        warnings.filterwarnings("ignore", message=r".*\(on_error='skip'\)", category=CorpusWarning)
        corpus = reading.load(path, skipped_path=skipped_path)
    if reading.on_error == "skip":
        print(f"skipped {len(corpus.skipped)} bad record(s) (--on-error skip); file, record and reason of each: "
              f"{skipped_path}")
    return corpus.filter(split=csv_list(split)) if split else corpus


def skipped_file(args: argparse.Namespace) -> Path:
    """Where ``--on-error skip`` lists the skipped records: ``OUT/skipped.jsonl`` for a command writing into a
    folder; ``OUT_STEM.skipped.jsonl`` beside the output for one writing a corpus file (``rmft``, ``dedup``,
    ``anonymize``) or replacing its folder whole (``base``)."""
    out = Path(args.out)
    return with_suffix(out, ".skipped.jsonl") if getattr(args, "skipped_beside", False) else out / "skipped.jsonl"


def reading_from_args(args: argparse.Namespace) -> CorpusReading:
    """The reading options a command was given (:func:`add_reading_options`), as a :class:`CorpusReading`."""
    return CorpusReading(**{f.name: getattr(args, f.name) for f in fields(CorpusReading)})


def load_args_corpus(args: argparse.Namespace, path=None, split: str | None = None):
    """The command's corpus: ``path`` (default its ``corpus`` option) read with its reading options
    (:func:`reading_from_args`), restricted to ``split`` (default its ``--split``)."""
    path = args.corpus if path is None else path
    reading = reading_from_args(args)
    return load_corpus_split(path, args.split if split is None else split, reading,
                             skipped_path=skipped_file(args) if reading.on_error == "skip" else None)


def with_suffix(path: Path, suffix: str) -> Path:
    """``corpus2.jsonl`` -> ``corpus2<suffix>`` (side files of a transformed corpus)."""
    return path.with_name(path.stem + suffix) if path.suffix else path.with_name(path.name + suffix)


def require_files(paths: list[str], what: str) -> None:
    """A :class:`ToolkitError` naming every one of ``paths`` that is not a file (``what``: e.g. "review file(s)")."""
    missing = [f for f in paths if not Path(f).is_file()]
    if missing:
        raise ToolkitError(f"{what} not found: {', '.join(missing)}")


def add_reading_options(parser: argparse.ArgumentParser, of: str = "") -> None:
    """The reading options (the fields of :class:`CorpusReading`: ``--format``, the field and person options,
    ``--annotator``, ``--on-error``) in one argument group; ``of`` names the corpus option they apply to when the
    command reads several corpora, e.g. ``"--corpus"``."""
    suffix = f" (applies to {of})" if of else ""
    group = parser.add_argument_group("reading the corpus" + (f" ({of})" if of else ""))
    for f in fields(CorpusReading):
        meta = f.metadata
        extra = {"choices": meta["choices"]} if "choices" in meta else {}
        group.add_argument(meta["flag"], dest=f.name, default=f.default, metavar=meta["metavar"],
                           help=meta["help"] + suffix, **extra)


def add_corpus_options(parser: argparse.ArgumentParser, *, positional: bool = False, split: str | None = None,
                       split_help: str = "comma-separated splits to keep (default: all documents)",
                       corpus_help: str = CORPUS_HELP, skipped_beside: bool = False) -> None:
    """The corpus (positional ``corpus`` or required ``--corpus``), ``--split`` and the reading options
    (:func:`add_reading_options`); ``skipped_beside``: ``--on-error skip`` writes its list beside ``--out``, not
    into it (:func:`skipped_file`)."""
    if positional:
        parser.add_argument("corpus", help=corpus_help)
    else:
        parser.add_argument("--corpus", required=True, help=corpus_help)
    parser.add_argument("--split", default=split, help=split_help)
    add_reading_options(parser)
    parser.set_defaults(skipped_beside=skipped_beside)


def add_quiet(parser: argparse.ArgumentParser, helptext: str = QUIET_HELP) -> None:
    parser.add_argument("--quiet", action="store_true", help=helptext)


def quiet_libraries() -> None:
    """Hugging Face's own progress bars ("Loading weights", "Writing model shards") and info logs off: the toolkit
    shows one labelled bar per step instead (none with ``--quiet``)."""
    import logging

    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    for name in ("transformers", "datasets", "accelerate", "opacus", "huggingface_hub"):
        logging.getLogger(name).setLevel(logging.ERROR)
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def run_command(args: argparse.Namespace) -> int:
    """``args.func(args)`` under umask 077; a :class:`ToolkitError` becomes one line on stderr and status 2, Ctrl-C
    status 130."""
    old_umask = os.umask(0o077)
    quiet_libraries()
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
