"""What every command shares: option helpers, corpus loading, and running a command with the toolkit's error policy.

Errors the toolkit raises on purpose (:class:`~toolkit.errors.ToolkitError`: bad input, bad config) are printed as
one line ``error: …`` naming the problem and exit with status 2; anything else is a bug and keeps its traceback.
Everything a command writes (also through libraries: checkpoints, trainer states) is private to the user (umask 077).

Every command that reads a corpus takes the same reading options (:func:`add_read_options`): ``--format``, the field
mapping of CSV/JSONL exports, TAB's ``--annotator``, ``--person-rule`` (routed to the mail readers' ``person`` or to
``person_rule``) and ``--on-error``; :func:`read_options` checks them against the corpus' format, so an error names
the flag, and :func:`load_args_corpus` reads the corpus with them.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import warnings
from pathlib import Path

from toolkit.errors import ToolkitError

CORPUS_HELP = "corpus file or folder (JSONL, CSV, i2b2/n2c2 XML, TAB JSON, mbox, maildir, Enron layout, .txt)"
QUIET_HELP = "no progress bars"

#: Values of ``--format`` (``toolkit.corpus.FORMATS`` and ``auto``; a test keeps the two equal).
FORMAT_CHOICES = ("auto", "jsonl", "csv", "i2b2", "tab", "mbox", "maildir", "enron", "txt")
FORMAT_HELP = ("corpus format: auto (default: detect from the path), jsonl, csv, i2b2 (also n2c2 2014), tab, mbox, "
               "maildir, enron (the Enron corpus' own layout: mailbox folders of files 1., 2., ...), txt")
#: Values of ``--person-rule`` for the mail formats (their reader's ``person``).
MAIL_FORMATS = ("mbox", "maildir", "enron")
PERSON_MODES = ("sender", "owner")

#: The reading options: (attribute, flag, {format: reader keyword}, help). A flag given for a format that is not
#: listed is an error naming the formats it applies to.
READ_OPTIONS: tuple[tuple[str, str, dict[str, str], str], ...] = (
    ("text_field", "--text-field", {"csv": "text_field", "jsonl": "text_field"},
     "csv/jsonl: the column or field holding the text (default text)"),
    ("person_field", "--person-field", {"csv": "person_field", "jsonl": "person_field", "tab": "person_field"},
     "csv/jsonl: the column or field naming the individual (default person_id); @row: none, each record is its own "
     "individual; tab: the key in a case's meta naming the person (default: one person per case)"),
    ("id_field", "--id-field", {"csv": "id_field", "jsonl": "id_field"},
     "csv/jsonl: the column or field holding the document id (default doc_id); @row: ids from the record number"),
    ("split_field", "--split-field", {"csv": "split_field", "jsonl": "split_field"},
     "csv/jsonl: the column or field holding the split (default split, optional)"),
    ("annotator", "--annotator", {"tab": "annotator"},
     "tab: whose annotations become the gold spans (default per case: the quality-checked annotator)"),
    ("person_rule", "--person-rule", {"mbox": "person", "maildir": "person", "enron": "person",
                                      "i2b2": "person_rule", "txt": "person_rule"},
     "who a document is about. mbox/maildir/enron: sender (the From address; mbox and maildir default) or owner "
     "(the mailbox; enron default); i2b2: a regex whose first group is the person id (default: record ID, or the "
     "file name before '-' for n2c2); txt: stem (default), parent, or a regex on the relative path"),
)
ON_ERROR_HELP = ("strict (default): stop at the first bad record; skip: leave bad records out, print how many and list "
                 "them (file, record, reason; never their text) in OUT/skipped.jsonl (OUT_STEM.skipped.jsonl beside "
                 "an output corpus file)")


def csv_list(value: str) -> list[str]:
    """``"a, b,,c"`` -> ``["a", "b", "c"]`` (comma-separated option values)."""
    return [v.strip() for v in value.split(",") if v.strip()]


def epochs(value: str) -> list[int]:
    """``--epochs 2,4,8`` -> ``[2, 4, 8]``; anything else is a :class:`ToolkitError`."""
    try:
        return [int(v) for v in csv_list(value)]
    except ValueError:
        raise ToolkitError(f"--epochs must be comma-separated integers such as 2,4,8, got {value!r}") from None


def load_corpus_split(path, split: str | None = None, format: str = "auto", *, on_error: str = "strict",
                      skipped_path: Path | None = None, **options):
    """The corpus at ``path``, restricted to the comma-separated ``split`` names when given (empty: all).

    ``options`` are the reader's keyword options; with ``on_error="skip"`` the skipped records are written to
    ``skipped_path`` and counted on the terminal."""
    from toolkit.corpus import CorpusWarning, load_corpus

    with warnings.catch_warnings():
        # the command prints the count and the file itself; the reader's warning names the library attribute
        warnings.filterwarnings("ignore", message=r".*\(on_error='skip'\)", category=CorpusWarning)
        corpus = load_corpus(path, format=format, on_error=on_error, skipped_path=skipped_path, **options)
    if on_error == "skip":
        print(f"skipped {len(corpus.skipped)} bad record(s) (--on-error skip); file, record and reason of each: "
              f"{skipped_path}")
    return corpus.filter(split=csv_list(split)) if split else corpus


def read_options(args: argparse.Namespace, path) -> tuple[str, dict[str, str]]:
    """The format of the corpus at ``path`` (``--format``, else detected) and the reader options its flags name.

    A flag that does not apply to that format, or a ``--person-rule`` that is not ``sender``/``owner`` for a mail
    format, is a :class:`ToolkitError` naming the flag and the formats it applies to."""
    from toolkit.corpus import detect_format

    fmt = getattr(args, "format", "auto") or "auto"
    if fmt not in FORMAT_CHOICES:
        raise ToolkitError(f"unknown --format {fmt!r}; one of: {', '.join(FORMAT_CHOICES)}")
    if fmt == "auto":
        fmt = detect_format(path)
    options = {}
    for attr, flag, keywords, _ in READ_OPTIONS:
        value = getattr(args, attr, None)
        if value is None:
            continue
        if fmt not in keywords:
            raise ToolkitError(f"{flag} applies to --format {', '.join(keywords)}, not to this corpus ({path}), "
                               f"read as --format {fmt}")
        if attr == "person_rule":
            check_person_rule(value, fmt)
        options[keywords[fmt]] = value
    return fmt, options


def check_person_rule(value: str, fmt: str) -> None:
    """A :class:`ToolkitError` naming ``--person-rule`` when ``value`` cannot be a rule for ``fmt``: not ``sender``
    or ``owner`` for a mail format; for i2b2 and txt (but txt's ``stem``/``parent``), not a regular expression with
    a capturing group (its first group is the person id)."""
    if fmt in MAIL_FORMATS:
        if value not in PERSON_MODES:
            raise ToolkitError(f"--person-rule for --format {fmt} is {' or '.join(PERSON_MODES)}, got {value!r}")
        return
    if fmt == "txt" and value in ("stem", "parent"):
        return
    try:
        groups = re.compile(value).groups
    except re.error as e:
        raise ToolkitError(f"--person-rule {value!r} is not a valid regular expression: {e}") from None
    if groups < 1:
        raise ToolkitError(f"--person-rule {value!r} has no capturing group; its first group must hold the person id, "
                           "e.g. '^([0-9]+)-'")


def skipped_file(args: argparse.Namespace) -> Path:
    """Where ``--on-error skip`` lists the skipped records: ``OUT/skipped.jsonl`` for a command writing into a
    folder; ``OUT_STEM.skipped.jsonl`` beside the output for one writing a corpus file (``rmft``, ``dedup``,
    ``anonymize``) or replacing its folder whole (``base``)."""
    out = Path(args.out)
    return with_suffix(out, ".skipped.jsonl") if getattr(args, "skipped_beside", False) else out / "skipped.jsonl"


def load_args_corpus(args: argparse.Namespace, path=None, split: str | None = None):
    """The command's corpus: ``path`` (default its ``corpus`` option) read with its ``--format``, field, person and
    ``--on-error`` options, restricted to ``split`` (default its ``--split``)."""
    path = args.corpus if path is None else path
    fmt, options = read_options(args, path)
    on_error = getattr(args, "on_error", "strict")
    return load_corpus_split(path, args.split if split is None else split, fmt, on_error=on_error,
                             skipped_path=skipped_file(args) if on_error == "skip" else None, **options)


def with_suffix(path: Path, suffix: str) -> Path:
    """``corpus2.jsonl`` -> ``corpus2<suffix>`` (side files of a transformed corpus)."""
    return path.with_name(path.stem + suffix) if path.suffix else path.with_name(path.name + suffix)


def require_files(paths: list[str], what: str) -> None:
    """A :class:`ToolkitError` naming every one of ``paths`` that is not a file (``what``: e.g. "review file(s)")."""
    missing = [f for f in paths if not Path(f).is_file()]
    if missing:
        raise ToolkitError(f"{what} not found: {', '.join(missing)}")


def add_read_options(parser: argparse.ArgumentParser, of: str = "") -> None:
    """``--format``, the field and person options and ``--on-error`` (how a corpus is read; ``of`` names the corpus
    option they apply to when the command reads several corpora, e.g. ``"--corpus"``)."""
    suffix = f" (applies to {of})" if of else ""
    group = parser.add_argument_group("reading the corpus" + (f" ({of})" if of else ""))
    group.add_argument("--format", default="auto", choices=FORMAT_CHOICES, metavar="FORMAT",
                       help=FORMAT_HELP + suffix)
    for attr, flag, _, helptext in READ_OPTIONS:
        metavar = "NAME" if attr.endswith("_field") else "RULE" if attr == "person_rule" else None
        group.add_argument(flag, dest=attr, default=None, metavar=metavar, help=helptext)
    group.add_argument("--on-error", default="strict", choices=("strict", "skip"), help=ON_ERROR_HELP + suffix)


def add_corpus_options(parser: argparse.ArgumentParser, *, positional: bool = False, split: str | None = None,
                       split_help: str = "comma-separated splits to keep (default: all documents)",
                       corpus_help: str = CORPUS_HELP, skipped_beside: bool = False) -> None:
    """The corpus (positional ``corpus`` or required ``--corpus``), ``--split`` and the reading options
    (:func:`add_read_options`); ``skipped_beside``: ``--on-error skip`` writes its list beside ``--out``, not
    into it (:func:`skipped_file`)."""
    if positional:
        parser.add_argument("corpus", help=corpus_help)
    else:
        parser.add_argument("--corpus", required=True, help=corpus_help)
    parser.add_argument("--split", default=split, help=split_help)
    add_read_options(parser)
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
