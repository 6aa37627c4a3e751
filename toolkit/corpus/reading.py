"""How a corpus is read, declared once: :class:`CorpusReading`.

Its fields are the reading options every command that reads a corpus takes — the format, the field mapping of
CSV/JSONL/Parquet exports, TAB's annotator, the person rule and the error policy. Each field's metadata holds its
flag, the reader keyword it becomes for each format it applies to, and its help text, so the command line
(:func:`toolkit.cli.common.add_reading_options`), the routing to the readers (:meth:`CorpusReading.resolve`) and
the checks that name a flag are one table. A new option is a new field here and nothing else.

>>> reading = CorpusReading(text_field="note", person_field="patient", id_field="note_id",
...                         split_field="cohort")
>>> corpus = reading.load("notes.csv")                        # doctest: +SKIP
"""

from __future__ import annotations

import re
from dataclasses import Field, dataclass, field, fields
from pathlib import Path
from typing import Any

from toolkit.errors import ToolkitError
from toolkit.corpus.formats.common import ON_ERROR, PathLike
from toolkit.corpus.load import FORMATS, detect_format, load_corpus
from toolkit.corpus.model import Corpus

__all__ = ["CorpusReading", "MAIL_FORMATS", "PERSON_MODES", "check_person_rule"]

#: The formats whose reader takes a ``person`` mode, and its values.
MAIL_FORMATS = ("mbox", "maildir", "enron")
PERSON_MODES = ("sender", "owner")
#: Tables and JSON exports: their columns or fields are named by the field options.
_TABULAR = ("csv", "jsonl", "parquet")

FORMAT_HELP = ("corpus format: auto (default: detect from the path), jsonl, csv, parquet, i2b2 (also n2c2 2014), tab, "
               "mbox, maildir, enron (the Enron corpus' own layout: mailbox folders of files 1., 2., ...), txt")
ON_ERROR_HELP = ("strict (default): stop at the first bad record; skip: leave bad records out, print how many and list "
                 "them (file, record, reason; never their text) in OUT/skipped.jsonl (OUT_STEM.skipped.jsonl beside "
                 "an output corpus file)")


def _option(flag: str, keywords: dict[str, str], helptext: str, metavar: str) -> Any:
    """A routed reading option: ``None`` unless given; ``keywords`` maps each format it applies to to the reader's
    keyword."""
    return field(default=None, metadata={"flag": flag, "keywords": keywords, "help": helptext, "metavar": metavar})


@dataclass(frozen=True)
class CorpusReading:
    """How to read a corpus (CLI: the same flags on every command that reads one).

    ``None`` for a routed option means "the reader's default". :meth:`resolve` checks the options against the
    corpus' format (an option that does not apply, a bad ``person_rule``) with errors naming the flag;
    :meth:`load` reads the corpus.
    """

    format: str = field(default="auto", metadata={"flag": "--format", "choices": ("auto", *FORMATS),
                                                  "help": FORMAT_HELP, "metavar": "FORMAT"})
    text_field: str | None = _option(
        "--text-field", {f: "text_field" for f in _TABULAR},
        "csv/jsonl/parquet: the column or field holding the text (default text)", "NAME")
    person_field: str | None = _option(
        "--person-field", {**{f: "person_field" for f in _TABULAR}, "tab": "person_field"},
        "csv/jsonl/parquet: the column or field naming the individual (default person_id); @row: none, each record "
        "is its own individual; tab: the key in a case's meta naming the person (default: one person per case)",
        "NAME")
    id_field: str | None = _option(
        "--id-field", {f: "id_field" for f in _TABULAR},
        "csv/jsonl/parquet: the column or field holding the document id (default doc_id); @row: ids from the record "
        "number", "NAME")
    split_field: str | None = _option(
        "--split-field", {f: "split_field" for f in _TABULAR},
        "csv/jsonl/parquet: the column or field holding the split (default split, optional)", "NAME")
    annotator: str | None = _option(
        "--annotator", {"tab": "annotator"},
        "tab: whose annotations become the gold spans (default per case: the quality-checked annotator)", "NAME")
    person_rule: str | None = _option(
        "--person-rule", {**{f: "person" for f in MAIL_FORMATS}, "i2b2": "person_rule", "txt": "person_rule"},
        "who a document is about. mbox/maildir/enron: sender (the From address; mbox and maildir default) or owner "
        "(the mailbox; enron default); i2b2: a regex whose first group is the person id (default: record ID, or the "
        "file name before '-' for n2c2); txt: stem (default), parent, or a regex on the relative path", "RULE")
    on_error: str = field(default="strict", metadata={"flag": "--on-error", "choices": ON_ERROR,
                                                      "help": ON_ERROR_HELP, "metavar": None})

    def __post_init__(self) -> None:
        for f in (CorpusReading.option("format"), CorpusReading.option("on_error")):
            value = getattr(self, f.name)
            if value not in f.metadata["choices"]:
                raise ToolkitError(f"unknown {f.metadata['flag']} {value!r}; one of: "
                                   f"{', '.join(f.metadata['choices'])}")

    @staticmethod
    def option(name: str) -> Field:
        """The declaration of the option ``name`` (its flag, help, and routing in ``metadata``)."""
        return next(f for f in fields(CorpusReading) if f.name == name)

    @staticmethod
    def routed() -> tuple[Field, ...]:
        """The options routed to a reader keyword (all but ``format`` and ``on_error``)."""
        return tuple(f for f in fields(CorpusReading) if "keywords" in f.metadata)

    def resolve(self, path: PathLike) -> tuple[str, dict[str, str]]:
        """The format of the corpus at ``path`` (:attr:`format`, else detected) and the reader keyword options the
        given options become.

        An option that does not apply to that format, or a ``person_rule`` that cannot be one for it, is a
        :class:`ToolkitError` naming the flag (and the formats it applies to)."""
        fmt = detect_format(path) if self.format == "auto" else self.format
        options = {}
        for f in self.routed():
            value = getattr(self, f.name)
            if value is None:
                continue
            keywords, flag = f.metadata["keywords"], f.metadata["flag"]
            if fmt not in keywords:
                raise ToolkitError(f"{flag} applies to --format {', '.join(keywords)}, not to this corpus ({path}), "
                                   f"read as --format {fmt}")
            if f.name == "person_rule":
                check_person_rule(value, fmt)
            options[keywords[fmt]] = value
        return fmt, options

    def load(self, path: PathLike, *, skipped_path: PathLike | None = None) -> Corpus:
        """The corpus at ``path`` read with these options (:func:`toolkit.corpus.load_corpus`); with
        ``on_error="skip"`` the skipped records are listed in ``Corpus.skipped`` and written to ``skipped_path``."""
        fmt, options = self.resolve(path)
        return load_corpus(path, format=fmt, on_error=self.on_error,
                           skipped_path=Path(skipped_path) if skipped_path is not None else None, **options)


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
