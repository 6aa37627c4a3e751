"""Folders of plain-text files, one document per file."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from toolkit.errors import CorpusError
from toolkit.corpus.model import Corpus, make_document
from toolkit.corpus.formats.common import (Builder, PathLike, PersonResolver, PersonRule, decode, existing,
                                           read_bytes)

__all__ = ["read_txt_folder"]


def read_txt_folder(path: PathLike, *, person_rule: PersonRule = "stem", pattern: str = "**/*.txt",
                    encoding: str = "utf-8", split: str | None = None, on_error: str = "strict") -> Corpus:
    """Read a folder of plain-text files, one document per file.

    ``doc_id`` is the path relative to the folder, POSIX style, without its suffix (``alice/note1``). Files are read
    in sorted order and their text kept exactly (no newline translation; a leading UTF-8 byte-order mark dropped).
    A single file may be given instead of a folder (its ``doc_id`` is then its stem).

    Parameters
    ----------
    path : str or os.PathLike
        The folder.
    person_rule : str or callable, default "stem"
        (CLI ``--person-rule``.) ``"stem"``: the file stem; ``"parent"``: the name of the file's parent folder (the
        root folder's name for files directly in it); any other string: a regular expression applied with
        :func:`re.search` to the relative path (``"alice/note1.txt"``) whose first group is the person id; a
        callable receiving that relative path and returning the person id.
    pattern : str, default "**/*.txt"
        Glob pattern relative to the folder.
    encoding : str, default "utf-8"
        Text encoding of the files.
    split : str, optional
        A split name given to every document.
    on_error : {"strict", "skip"}, default "strict"
        ``"skip"``: a bad file (bytes invalid in ``encoding``, a name that is not UTF-8, a person rule that does not
        match, a duplicate ``doc_id``) is left out and listed in ``Corpus.skipped`` (file and reason, no text)
        instead of stopping the read.

    Returns
    -------
    Corpus

    Raises
    ------
    CorpusError
        Naming the file: bytes invalid in ``encoding`` (with line and byte offset), a file name that is not UTF-8,
        a regex that does not match (or has no group), no matching files, a duplicate ``doc_id`` (``a.txt`` and
        ``a.TXT``).
    """
    p = existing(path)
    root, files = (p.parent, [p]) if p.is_file() else (p, sorted(f for f in p.glob(pattern) if f.is_file()))
    rule = PersonResolver(person_rule, path=p, default=lambda rel: PurePosixPath(rel).stem, keywords={
        "stem": lambda rel: PurePosixPath(rel).stem,
        "parent": lambda rel: PurePosixPath(rel).parent.name or root.name,
    })
    builder = Builder(p, on_error)
    hint = f"pass encoding= if the files are not {encoding}"

    def one(f: Path) -> None:
        rel = f.relative_to(root).as_posix()
        try:
            rel.encode("utf-8")
        except UnicodeEncodeError as e:  # os.fsdecode keeps undecodable name bytes as lone surrogates
            raise CorpusError("the file name is not valid UTF-8; rename the file (doc_id and person_id are taken "
                              "from it)", f) from e
        text = decode(read_bytes(f), f, encoding, hint=hint)
        person = rule(rel, file=f)
        doc_id = str(PurePosixPath(rel).with_suffix(""))
        builder.add(make_document(doc_id, person, text, split=split, path=f), file=f)

    for f in files:
        builder.attempt(lambda: one(f))
    return builder.corpus(hint=f"no files match {pattern!r}")
