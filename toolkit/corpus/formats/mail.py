"""E-mail corpora: Unix mbox files and Maildir folders, one document per message."""

from __future__ import annotations

import contextlib
import email
import email.policy
import email.utils
import mailbox
import warnings
from email.headerregistry import HeaderRegistry, UnstructuredHeader
from email.message import EmailMessage
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from toolkit.errors import CorpusError
from toolkit.corpus.model import Corpus, Document, make_document
from toolkit.corpus.formats.common import Builder, CorpusWarning, PathLike, existing

__all__ = ["read_maildir", "read_mbox"]

T = TypeVar("T")

#: The headers kept in a message's text, in this order (the same for every e-mail format).
MAIL_HEADERS = ("From", "To", "Cc", "Bcc", "Subject", "Date")

# Every header is read as unstructured text: RFC 2047-decoded and unfolded, but otherwise verbatim (the default
# policy would re-render addresses and dates, e.g. "3 Jan" -> "03 Jan").
MAIL_POLICY = email.policy.default.clone(
    header_factory=HeaderRegistry(default_class=UnstructuredHeader, use_default_map=False))


def _parse_message(fh: Any) -> EmailMessage:
    return email.message_from_binary_file(fh, policy=MAIL_POLICY)  # type: ignore[return-value]


def read_mbox(path: PathLike, *, person: str = "sender", owner: str | None = None,
              charset_errors: str = "strict", on_error: str = "strict") -> Corpus:
    """Read a Unix mbox file, one document per message.

    Each message becomes a document whose text is the ``From``, ``To``, ``Cc``, ``Bcc``, ``Subject`` and ``Date``
    headers present, as ``"Name: value"`` lines in that order (header values RFC 2047-decoded and unfolded, otherwise
    verbatim), a blank line, then the plain-text body: the body part chosen by
    :meth:`email.message.EmailMessage.get_body` preferring ``text/plain`` (attachments are not bodies). A message
    without a ``text/plain`` body keeps only the headers, and a :class:`CorpusWarning` counts such messages.

    The body is decoded with the charset the part declares; an undeclared charset is read as UTF-8 (a superset of
    the RFC default US-ASCII). Bytes invalid in that charset are an error naming the message and the charset,
    unless ``charset_errors`` says otherwise (e.g. ``"replace"``).

    Parameters
    ----------
    path : str or os.PathLike
        The mbox file.
    person : {"sender", "owner"}, default "sender"
        ``"sender"``: ``person_id`` is the lower-cased address in ``From`` (:func:`email.utils.parseaddr`).
        ``"owner"``: every message belongs to the mailbox owner, ``owner`` or else the file stem.
    owner : str, optional
        The owner's id for ``person="owner"``.
    charset_errors : str, default "strict"
        The ``errors`` argument of :meth:`bytes.decode` for bodies.
    on_error : {"strict", "skip"}, default "strict"
        ``"skip"``: a bad message (unparsable, an undecodable body or header, no ``From`` address under
        ``person="sender"``, a duplicate ``Message-ID``) is left out and listed in ``Corpus.skipped`` (message
        number and reason, no text) instead of stopping the read.

    Returns
    -------
    Corpus
        ``doc_id`` is the ``Message-ID`` without ``<>``, or ``"<file name>#<n>"`` (n counted from 1) when absent.

    Raises
    ------
    CorpusError
        Naming the file and ``message N``: an unparsable message, an undecodable body or unknown charset, a
        message without a ``From`` address under ``person="sender"``, no messages, a duplicate ``Message-ID``
        (naming the message numbers; a Message-ID often holds an address, so it is never printed).
    """
    p = existing(path)
    if p.is_dir():
        raise CorpusError("expected an mbox file, got a folder (use read_maildir for a Maildir)", p)
    check_person_mode(person, p)
    try:
        box = mailbox.mbox(p, factory=_parse_message, create=False)
    except (OSError, mailbox.Error) as e:
        raise CorpusError(f"cannot open the mbox file: {e}", p) from e
    with contextlib.closing(box):
        return _read_mailbox(box, p, person=person, owner=owner if owner is not None else p.stem,
                             charset_errors=charset_errors, on_error=on_error,
                             empty_hint="an mbox file starts each message with a 'From ' line")


def read_maildir(path: PathLike, *, person: str = "sender", owner: str | None = None,
                 charset_errors: str = "strict", on_error: str = "strict") -> Corpus:
    """Read a Maildir folder (with ``cur/`` and ``new/`` subfolders), one document per message.

    Messages are read in sorted key order (Maildir keys start with the delivery time). Documents are built as in
    :func:`read_mbox`; with ``person="owner"`` the default owner is the folder name, and the fallback ``doc_id`` is
    ``"<folder name>#<n>"``.

    Parameters
    ----------
    path : str or os.PathLike
        The Maildir folder.
    person : {"sender", "owner"}, default "sender"
    owner : str, optional
    charset_errors : str, default "strict"
    on_error : {"strict", "skip"}, default "strict"
        See :func:`read_mbox`.

    Returns
    -------
    Corpus
    """
    p = existing(path)
    missing = [sub for sub in ("cur", "new") if not (p / sub).is_dir()]
    if missing:
        raise CorpusError(f"not a Maildir: missing subfolder(s) {', '.join(missing)} (a Maildir has cur/, new/ and "
                          "tmp/)", p)
    check_person_mode(person, p)
    try:
        box = mailbox.Maildir(p, factory=_parse_message, create=False)
    except (OSError, mailbox.Error) as e:
        raise CorpusError(f"cannot open the Maildir: {e}", p) from e
    with contextlib.closing(box):
        return _read_mailbox(box, p, person=person, owner=owner if owner is not None else p.name,
                             charset_errors=charset_errors, on_error=on_error,
                             empty_hint="no messages in cur/ or new/")


def check_person_mode(person: str, path: Path) -> None:
    if person not in ("sender", "owner"):
        raise CorpusError(f"person must be 'sender' or 'owner', got {person!r}", path)


def _read_mailbox(box: mailbox.Mailbox, path: Path, *, person: str, owner: str, charset_errors: str, on_error: str,
                  empty_hint: str) -> Corpus:
    try:
        keys = sorted(box.keys()) if isinstance(box, mailbox.Maildir) else list(box.keys())
    except (OSError, mailbox.Error) as e:
        raise CorpusError(f"cannot list the messages: {e}", path) from e
    builder = Builder(path, on_error)
    no_plain = [0]

    def one(n: int, key: Any) -> None:
        record = f"message {n}"
        msg = guarded(lambda: box[key], path, record)
        doc, has_plain = guarded(lambda: message_document(msg, path, record, message_id(msg) or f"{path.name}#{n}",
                                                          person=person, owner=owner, charset_errors=charset_errors),
                                 path, record)
        builder.add(doc, record=record)
        no_plain[0] += not has_plain

    for n, key in enumerate(keys, start=1):
        builder.attempt(lambda: one(n, key))
    warn_no_plain(path, no_plain[0])
    return builder.corpus(hint=empty_hint)


def guarded(fn: Callable[[], T], path: Path, record: str | None) -> T:
    """``fn()`` with any exception of the email package turned into a :class:`CorpusError` naming the message.

    The message names the exception type only: the email package's messages can quote the header they choke on.
    """
    try:
        return fn()
    except CorpusError:
        raise
    except Exception as e:  # the email package raises many types on malformed input
        raise CorpusError(f"cannot parse the message ({type(e).__name__})", path, record=record) from e


def warn_no_plain(path: Path, count: int, stacklevel: int = 4) -> None:
    """One :class:`CorpusWarning` counting messages without a plain-text body (``stacklevel``: the reader's caller)."""
    if count:
        warnings.warn(f"{path}: {count} message(s) have no text/plain body; their text holds the headers only",
                      CorpusWarning, stacklevel=stacklevel)


def message_id(msg: EmailMessage) -> str:
    """The ``Message-ID`` without its angle brackets ('' when absent)."""
    return str(msg.get("Message-ID", "") or "").strip().strip("<>").strip()


def message_document(msg: EmailMessage, path: Path, record: str | None, doc_id: str, *, person: str, owner: str,
                     charset_errors: str) -> tuple[Document, bool]:
    """The document of one message (see :func:`read_mbox` for its text) and whether it has a plain-text body."""
    lines = [f"{name}: {value}" for name in MAIL_HEADERS
             for value in _header_values(msg, name, path, record, charset_errors)]
    body = _plain_body(msg, path, record, charset_errors)
    text = "\n".join(lines) + "\n\n" + (body or "")
    if person == "sender":
        address = email.utils.parseaddr(str(msg.get("From", "") or ""))[1].strip().lower()
        if not address:
            raise CorpusError("the message has no From address (use person='owner' to group by mailbox)", path,
                              record=record)
        person_id = address
    else:
        person_id = owner
    return make_document(doc_id, person_id, text, path=path, record=record), body is not None


def _header_values(msg: EmailMessage, name: str, path: Path, record: str | None, errors: str) -> list[str]:
    """Decoded values of header ``name``; raw non-UTF-8 bytes in a header are an error unless ``errors`` allows.

    The email package silently turns undecodable raw (non RFC 2047) header bytes into U+FFFD; this is caught here
    so that no text is lost without notice.
    """
    values = [str(v) for v in msg.get_all(name) or []]
    raws = [raw for key, raw in msg.raw_items() if key.lower() == name.lower()]
    for value, raw in zip(values, raws):
        if "\ufffd" in value and errors == "strict" and isinstance(raw, str):
            try:
                raw.encode("utf-8", "surrogateescape").decode("utf-8")
            except UnicodeDecodeError as e:
                raise CorpusError(f"header {name} holds raw bytes that are not UTF-8 ({e.reason}); pass "
                                  "charset_errors='replace' to substitute U+FFFD", path, record=record) from e
    return values


def _plain_body(msg: EmailMessage, path: Path, record: str | None, errors: str) -> str | None:
    """The decoded ``text/plain`` body, or ``None`` when the message has none."""
    part = msg.get_body(preferencelist=("plain",))
    if part is None:
        return None
    payload = part.get_payload(decode=True)
    if payload is None:
        return ""
    if isinstance(payload, str):  # defensive: some malformed parts yield str
        return payload
    charset = part.get_content_charset() or "utf-8"
    try:
        return payload.decode(charset, errors=errors)
    except LookupError as e:
        raise CorpusError(f"unknown charset {charset!r} (or unknown charset_errors={errors!r})", path,
                          record=record) from e
    except UnicodeDecodeError as e:
        raise CorpusError(f"the body is not valid {charset}: byte(s) {payload[e.start:e.end].hex(' ')} at body "
                          f"byte offset {e.start}; pass charset_errors='replace' to substitute U+FFFD", path,
                          record=record) from e
