"""i2b2 2006 and n2c2 2014 de-identification XML."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from toolkit.errors import CorpusError
from toolkit.corpus.model import Corpus, Document, make_document
from toolkit.corpus.formats.common import (Builder, PathLike, PersonResolver, PersonRule, cut, existing,
                                           mismatch_hint, read_bytes, resolve_overlaps, warn_dropped)

__all__ = ["read_i2b2"]


def read_i2b2(path: PathLike, *, person_rule: PersonRule = None, split: str | None = None,
              strict: bool = False, on_error: str = "strict") -> Corpus:
    """Read i2b2 / n2c2 de-identification XML: one file, or a folder searched recursively for ``*.xml``.

    The style of each file is detected from its content:

    * **2006** (i2b2 de-identification challenge): ``<ROOT><RECORD ID="..."><TEXT> ... <PHI TYPE="PATIENT">...</PHI>
      ...</TEXT></RECORD></ROOT>``. Each ``RECORD`` is a document with ``doc_id`` = its ``ID``; the plain text is
      rebuilt from the text and tails around the inline ``PHI`` tags, and each ``PHI`` element becomes a gold span
      labelled with its ``TYPE``. Default person: the record ``ID``.
    * **2014** (n2c2 de-identification track): ``<deIdi2b2><TEXT><![CDATA[...]]></TEXT><TAGS><NAME id="P0"
      start="16" end="20" text="..." TYPE="PATIENT"/>...</TAGS></deIdi2b2>``. One document per file with ``doc_id``
      = the file stem; each tag is a span labelled with its ``TYPE`` (the element name when ``TYPE`` is absent).
      Default person: the part of the stem before the first ``-`` (n2c2 files are ``<patient>-<record>.xml``, so
      ``110-01.xml`` is about person ``110``).

    Parameters
    ----------
    path : str or os.PathLike
        An ``.xml`` file or a folder (files are read in sorted path order).
    person_rule : None, str or callable
        (CLI ``--person-rule``.) How to get ``person_id`` from the key (the record ``ID`` for 2006, the file stem
        for 2014): ``None`` for the defaults above, a regular expression whose first group is the person id
        (:func:`re.search`), or a callable ``key -> person_id``.
    split : str, optional
        A split name given to every document.
    strict : bool, default False
        Overlapping 2014 tags are resolved by keeping the longer span (then the earlier start) with a
        :class:`CorpusWarning` giving the counts; ``strict=True`` makes an overlap an error.
    on_error : {"strict", "skip"}, default "strict"
        ``"skip"``: a bad file (invalid XML, an unknown root element), a bad 2006 record or 2014 document, and a bad
        2014 tag (its span only: offsets not integers, outside the text, or not matching its ``text``) are left out
        and listed in ``Corpus.skipped`` (file, record or tag id, reason; no text) instead of stopping the read.

    Returns
    -------
    Corpus

    Notes
    -----
    **Line ends.** The XML parser normalises ``\\r\\n`` and lone ``\\r`` to ``\\n`` (XML 1.0 §2.11), inside CDATA too.
    The document text is the text *as the parser returns it*, and the 2014 offsets are interpreted on that text,
    which is how the n2c2 tools and offsets count. Every 2014 tag with a ``text`` attribute is checked against
    ``text[start:end]``, so an offset shift cannot go unnoticed. Because XML also normalises whitespace in attribute
    values (a newline in ``text="..."`` reads as a space), the comparison treats tab, ``\\r`` and ``\\n`` as a space.

    Raises
    ------
    CorpusError
        Naming the file and record or tag id: invalid XML (with the line), an unknown root element, a record
        without ``ID`` or ``TEXT``, an unexpected element inside 2006 ``TEXT``, a non-integer or out-of-range
        offset, a 2014 tag whose ``text`` differs from ``text[start:end]`` (offsets, lengths and where the tag's
        text does occur nearby are shown, not the strings), a person rule that does not match, an empty corpus, a
        duplicate ``doc_id``.
    """
    p = existing(path)
    files = _xml_files(p)
    rule_2006 = PersonResolver(person_rule, path=p, default=lambda key: key)
    rule_2014 = PersonResolver(person_rule, path=p, default=lambda stem: stem.split("-", 1)[0])
    builder = Builder(p, on_error)
    dropped: dict[str, int] = {}

    def one_file(f: Path) -> None:
        root = _parse_xml(f)
        if root.tag == "deIdi2b2" or (root.find("TEXT") is not None and root.find("TAGS") is not None):
            doc, n = _i2b2_2014_document(root, f, rule_2014, split, strict, builder)
            builder.add(doc, file=f)
            if n:
                dropped[f.name] = n
        elif root.tag == "ROOT" or root.find("RECORD") is not None:
            records = root.findall("RECORD")
            if not records:
                raise CorpusError("no <RECORD> elements in the 2006-style file", f)
            for i, rec in enumerate(records, start=1):
                builder.attempt(lambda: _i2b2_2006_record(rec, i, f, rule_2006, split, builder))
        else:
            raise CorpusError(f"not an i2b2 de-identification file: root element <{root.tag}>; expected <ROOT> with "
                              "<RECORD> elements (2006) or <deIdi2b2> with <TEXT> and <TAGS> (2014)", f)

    for f in files:
        builder.attempt(lambda: one_file(f))
    warn_dropped(p, dropped, "tag")
    return builder.corpus()


def _xml_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    files = sorted(f for f in path.rglob("*.xml") if f.is_file())
    if not files:
        raise CorpusError("the corpus is empty: no .xml files in this folder", path)
    return files


def _parse_xml(path: Path) -> ET.Element:
    data = read_bytes(path)
    try:
        return ET.fromstring(data)
    except ET.ParseError as e:
        line = e.position[0] if getattr(e, "position", None) else None
        raise CorpusError(f"invalid XML: {e}", path, line=line) from e


def _i2b2_2006_record(rec: ET.Element, i: int, path: Path, rule: PersonResolver, split: str | None,
                      builder: Builder) -> None:
    rid = rec.get("ID")
    if rid is None or not rid.strip():
        raise CorpusError("<RECORD> without an ID attribute", path, record=f"RECORD #{i}")
    where = cut(rid)
    text_el = rec.find("TEXT")
    if text_el is None:
        raise CorpusError("<RECORD> without a <TEXT> element", path, record=where)
    text, spans = _inline_phi(text_el, path, where)
    person = rule(rid, file=path, record=where)
    builder.add(make_document(rid, person, text, spans, split, path=path, record=where), file=path, record=where)


def _inline_phi(text_el: ET.Element, path: Path, record: str) -> tuple[str, list[tuple[int, int, str]]]:
    """Plain text and spans from a 2006 ``TEXT`` element with inline ``PHI`` children."""
    parts = [text_el.text or ""]
    pos = len(parts[0])
    spans: list[tuple[int, int, str]] = []
    for child in text_el:
        if child.tag != "PHI":
            raise CorpusError(f"unexpected element <{child.tag}> inside <TEXT> (only <PHI> is expected)", path,
                              record=record)
        label = child.get("TYPE")
        if not label:
            raise CorpusError("<PHI> without a TYPE attribute", path, record=record)
        if len(child):
            raise CorpusError(f"nested element <{child[0].tag}> inside <PHI TYPE={label!r}>", path, record=record)
        content = child.text or ""
        if not content:
            raise CorpusError(f"empty <PHI TYPE={label!r}> element at character {pos}", path, record=record)
        spans.append((pos, pos + len(content), label))
        tail = child.tail or ""
        parts += [content, tail]
        pos += len(content) + len(tail)
    return "".join(parts), spans


def _same_surface(a: str, b: str) -> bool:
    table = str.maketrans("\t\r\n", "   ")
    return a.translate(table) == b.translate(table)


def _i2b2_2014_document(root: ET.Element, path: Path, rule: PersonResolver, split: str | None,
                        strict: bool, builder: Builder) -> tuple[Document, int]:
    text_el = root.find("TEXT")
    if text_el is None:
        raise CorpusError("no <TEXT> element in the 2014-style file", path)
    text = text_el.text or ""
    tags_el = root.find("TAGS")
    cands = [builder.attempt(lambda: _i2b2_2014_span(tag, j, text, path))
             for j, tag in enumerate(tags_el if tags_el is not None else [], start=1)]
    spans, dropped = resolve_overlaps([c for c in cands if c is not None], strict=strict, path=path,
                                      record=path.stem)
    person = rule(path.stem, file=path, record=path.stem)
    return make_document(path.stem, person, text, spans, split, path=path, record=path.stem), dropped


def _i2b2_2014_span(tag: ET.Element, j: int, text: str, path: Path) -> tuple[int, int, str, str]:
    tid = tag.get("id") or f"#{j}"
    record = f"tag {tid}"
    try:
        start, end = int(tag.get("start", "")), int(tag.get("end", ""))
    except ValueError as e:
        raise CorpusError(f"<{tag.tag}> needs integer start and end attributes", path, record=record) from e
    label = tag.get("TYPE") or tag.tag
    if not 0 <= start < end <= len(text):
        raise CorpusError(f"<{tag.tag}> [{start}, {end}) {label} lies outside the text (length {len(text)}) or is "
                          "empty", path, record=record)
    surface = tag.get("text")
    if surface is not None and not _same_surface(text[start:end], surface):
        raise CorpusError(f"offset/text mismatch: text[{start}:{end}] (length {end - start}) differs from the tag's "
                          f"text attribute (length {len(surface)}){mismatch_hint(text, surface, start)}", path,
                          record=record)
    return start, end, label, tid
