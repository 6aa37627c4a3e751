"""Errors raised for bad corpus input.

Every error names the file, the line or record, and what is wrong, so that a user fixing a 50,000-document
export never has to read a traceback from inside a parser library.
"""

from __future__ import annotations

from pathlib import Path


class ToolkitError(Exception):
    """Base class of every error the toolkit raises on purpose (bad input, bad config)."""


class CorpusError(ToolkitError, ValueError):
    """A corpus file that cannot be read as documents.

    Parameters
    ----------
    message:
        What is wrong, in plain words.
    path:
        The file (or folder) being read.
    line:
        1-based line number in a line-oriented file (JSONL, CSV, mbox), when known.
    record:
        A record identifier (doc_id, message number, XML element, JSON key path) when there is no line.
    """

    def __init__(self, message: str, path: str | Path | None = None, *, line: int | None = None,
                 record: str | None = None):
        self.message = message
        self.path = str(path) if path is not None else None
        self.line = line
        self.record = record
        where = []
        if self.path is not None:
            where.append(self.path)
        if line is not None:
            where.append(f"line {line}")
        if record is not None:
            where.append(f"record {record}")
        prefix = ", ".join(where)
        super().__init__(f"{prefix}: {message}" if prefix else message)
