"""The Enron e-mail corpus in its original layout: one folder per mailbox, one RFC 822 file per message.

The corpus as distributed (the ``maildir/`` folder of the CMU release of the messages the US Federal Energy Regulatory
Commission made public) is neither mbox nor Maildir: ``maildir/allen-p/`` is the mailbox of one employee, its
sub-folders are his mail folders (``_sent_mail/``, ``inbox/``, ``all_documents/`` ..., sometimes nested), and each
message is a file named ``1.``, ``2.`` ... holding one RFC 822 message.
"""

from __future__ import annotations

import email
import os
import re
from pathlib import Path, PurePosixPath

from toolkit.errors import CorpusError
from toolkit.corpus.model import Corpus
from toolkit.corpus.formats.common import Builder, PathLike, existing, read_bytes
from toolkit.corpus.formats.mail import MAIL_POLICY, check_person_mode, guarded, message_document, warn_no_plain

__all__ = ["looks_like_enron", "read_enron"]

#: A message file: digits and a final dot (``1.``); without the dot too, as copies unpacked on Windows lose it.
_MESSAGE_NAME = re.compile(r"[0-9]+\.?")
#: The start of an RFC 822 message: a header field name (printable ASCII but ':'), a colon, a blank.
_HEADER_START = re.compile(rb"[!-9;-~]+:[ \t]")


def _message_files(root: Path) -> list[PurePosixPath]:
    """Message files under ``root`` relative to it, by folder and then by message number."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        rel = Path(dirpath).relative_to(root)
        found += [PurePosixPath(rel.as_posix(), name) for name in filenames if _MESSAGE_NAME.fullmatch(name)]
    return sorted(found, key=lambda r: (r.parts[:-1], int(r.name.rstrip("."))))


def looks_like_enron(folder: Path) -> bool:
    """Whether ``folder`` holds the original Enron layout: its first message file found starts with a header.

    Stops at the first file named like a message (``1.``), so detection costs one file read, not a tree read.
    """
    for dirpath, _dirnames, filenames in os.walk(folder):
        for name in filenames:
            if _MESSAGE_NAME.fullmatch(name):
                try:
                    with open(Path(dirpath, name), "rb") as fh:
                        head = fh.read(200)
                except OSError:
                    return False
                return _HEADER_START.match(head) is not None
    return False


def read_enron(path: PathLike, *, person: str = "owner", charset_errors: str = "strict",
               on_error: str = "strict") -> Corpus:
    """Read Enron mailboxes in their original layout, one document per message file.

    ``path`` is one of three things, told apart by the depth of the shallowest message file below it:

    * a folder of mailboxes (``maildir/``: messages at ``allen-p/inbox/1.``, depth 3 or more);
    * one mailbox (``maildir/allen-p``: messages at ``inbox/1.``, depth 2);
    * one mail folder of a mailbox (``maildir/allen-p/inbox``: messages at ``1.``, depth 1).

    The mailbox owner is the mailbox folder's name (``allen-p``): the first folder below a folder of mailboxes,
    the folder itself for a mailbox, the parent folder for a mail folder. ``doc_id`` is the message's path from the
    folder of mailboxes, without the file name's final dot (``allen-p/inbox/1``), whichever of the three was
    given, so ids agree between reads. Messages are read in folder order, then by message number. Other files
    (not named like a message) are ignored.

    The text of a document is built as for :func:`~toolkit.corpus.formats.mail.read_mbox`: the ``From``, ``To``,
    ``Cc``, ``Bcc``, ``Subject`` and ``Date`` headers present, a blank line, the plain-text body (line ends kept).
    Enron's ``X-From``/``X-To`` headers (display names added by the conversion) are not part of the text.

    Parameters
    ----------
    path : str or os.PathLike
        The folder.
    person : {"owner", "sender"}, default "owner"
        ``"owner"``: ``person_id`` is the mailbox owner (the mailbox folder name). ``"sender"``: the lower-cased
        address in ``From``.
    charset_errors : str, default "strict"
        The ``errors`` argument of :meth:`bytes.decode` for bodies (some Enron bodies declared ``us-ascii`` hold
        other bytes; ``"replace"`` substitutes U+FFFD).
    on_error : {"strict", "skip"}, default "strict"
        ``"skip"``: a bad message file (unparsable, an undecodable body, no ``From`` address under
        ``person="sender"``) is left out and listed in ``Corpus.skipped`` (file and reason, no text).

    Returns
    -------
    Corpus

    Raises
    ------
    CorpusError
        Naming the message file: an unparsable message, an undecodable body or unknown charset, a message without
        a ``From`` address under ``person="sender"``; a folder without message files; a duplicate ``doc_id``
        (``1.`` and ``1`` in one folder).
    """
    p = existing(path)
    if not p.is_dir():
        raise CorpusError("expected a folder of Enron mailboxes, a mailbox or a mail folder, got a file", p)
    check_person_mode(person, p)
    builder = Builder(p, on_error)
    files = _message_files(p)
    if not files:
        raise CorpusError("the corpus is empty: no message files (named 1., 2., ...) in this folder", p)
    depth = min(len(rel.parts) for rel in files)
    prefix = (p.parent.name, p.name) if depth == 1 else (p.name,) if depth == 2 else ()
    no_plain = [0]

    def one(rel: PurePosixPath) -> None:
        f = p.joinpath(*rel.parts)
        parts = prefix + rel.parts[:-1] + (rel.name.rstrip("."),)
        msg = guarded(lambda: email.message_from_bytes(read_bytes(f), policy=MAIL_POLICY), f, None)
        doc, has_plain = guarded(lambda: message_document(msg, f, None, "/".join(parts), person=person,
                                                          owner=parts[0], charset_errors=charset_errors), f, None)
        builder.add(doc, file=f)
        no_plain[0] += not has_plain

    for rel in files:
        builder.attempt(lambda: one(rel))
    warn_no_plain(p, no_plain[0], stacklevel=3)
    return builder.corpus()
