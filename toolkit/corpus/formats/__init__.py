"""One module per corpus file format; :mod:`toolkit.corpus.load` detects the format and dispatches."""

from __future__ import annotations

from toolkit.corpus.formats.common import CorpusWarning
from toolkit.corpus.formats.csv import read_csv
from toolkit.corpus.formats.enron import read_enron
from toolkit.corpus.formats.i2b2 import read_i2b2
from toolkit.corpus.formats.jsonl import read_jsonl, write_jsonl
from toolkit.corpus.formats.mail import read_maildir, read_mbox
from toolkit.corpus.formats.parquet import read_parquet
from toolkit.corpus.formats.tab import read_tab
from toolkit.corpus.formats.txt import read_txt_folder

__all__ = ["CorpusWarning", "read_csv", "read_enron", "read_i2b2", "read_jsonl", "read_maildir", "read_mbox",
           "read_parquet", "read_tab", "read_txt_folder", "write_jsonl"]
