"""Text Anonymization Benchmark (TAB, Pilán et al. 2022) JSON."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from toolkit.errors import CorpusError
from toolkit.corpus.model import Corpus, Document, make_document
from toolkit.corpus.formats.common import (Builder, CorpusWarning, PathLike, cut, decode, existing, mismatch_hint,
                                           names, read_bytes, resolve_overlaps, short, undecodable, warn_dropped)

__all__ = ["read_tab"]


def read_tab(path: PathLike, *, annotator: str | None = None,
             identifier_types: str | Iterable[str] = ("DIRECT", "QUASI"), person_field: str | None = None,
             strict: bool = False, on_error: str = "strict") -> Corpus:
    """Read a Text Anonymization Benchmark file (TAB, Pilán et al. 2022): a JSON list of ECHR cases.

    Each object has ``doc_id``, ``text``, ``dataset_type`` (``train``/``dev``/``test``, becomes ``split``),
    ``task``, ``meta`` and ``annotations``: ``{annotator_id: {"entity_mentions": [...]}}`` where a mention has
    ``entity_type``, ``entity_mention_id``, ``start_offset``, ``end_offset`` (exclusive), ``span_text``,
    ``identifier_type`` (``DIRECT``, ``QUASI`` or ``NO_MASK``) and ``entity_id``.

    Each mention whose ``identifier_type`` is in ``identifier_types`` becomes a span labelled
    ``"{entity_type}/{identifier_type}"`` (e.g. ``PERSON/DIRECT``, ``DATETIME/QUASI``), so both the category and the
    masking decision are kept. ``labels`` holds ``annotator`` (the annotator used), ``task`` and ``meta`` when present.

    Parameters
    ----------
    path : str or os.PathLike
        The ``.json`` file (e.g. ``echr_train.json``).
    annotator : str, optional
        Whose annotations to use (CLI ``--annotator``). Default, per document: the annotator listed in the
        document's ``quality_checked`` field (TAB's dev and test documents have several annotators and name the one
        whose annotation was checked; the first in sorted order if it names several); a document without
        ``quality_checked`` uses its only annotator (TAB training documents have one), or the first in sorted
        order, counted in one :class:`CorpusWarning`. A ``quality_checked`` naming no annotator of the document is
        an error. When given, a document lacking the annotator is an error naming the annotators it has. A
        document with an empty ``annotations`` object has no spans.
    identifier_types : str or iterable of str, default ("DIRECT", "QUASI")
        Which mentions become spans; ``NO_MASK`` mentions are skipped by default.
    person_field : str, optional
        Key in ``meta`` holding the person id (e.g. ``"applicant"``). Default: ``person_id = doc_id`` (one
        applicant per case).
    strict : bool, default False
        TAB has some nested mentions. By default overlapping kept mentions are resolved deterministically by
        keeping the longer span (then the earlier start), with one :class:`CorpusWarning` giving the number dropped
        per document; ``strict=True`` makes an overlap an error.
    on_error : {"strict", "skip"}, default "strict"
        ``"skip"``: a bad document (missing fields, a missing annotator or ``person_field``, invalid UTF-8) is left
        out, and so is a bad mention (its span only: missing fields, offsets not integers or outside the text, a
        ``span_text`` that differs from the text), each listed in ``Corpus.skipped`` (record, mention id, reason; no
        text) instead of stopping the read. Invalid JSON still stops it.

    Returns
    -------
    Corpus

    Raises
    ------
    CorpusError
        Naming the file and the document (``record #N (doc_id)``, and the mention id where relevant): invalid JSON
        (with the line), a top level that is not a list, missing fields, a missing annotator (listing those
        available), a missing ``person_field``, a mention whose ``span_text`` differs from
        ``text[start_offset:end_offset]`` (offsets and lengths shown, not the strings), non-UTF-8 bytes, an empty
        corpus, a duplicate ``doc_id`` (naming the record of the first).
    """
    p = existing(path)
    builder = Builder(p, on_error)
    items, lossy = _load_json(p, builder.lenient)
    if not isinstance(items, list):
        raise CorpusError(f"expected a JSON list of documents at the top level, got a {type(items).__name__}", p)
    wanted = {identifier_types} if isinstance(identifier_types, str) else set(identifier_types)
    dropped: dict[str, int] = {}
    unchecked: list[str] = []

    def one(item: Any, i: int) -> None:
        if lossy and undecodable(json.dumps(item, ensure_ascii=False)) is not None:
            raise CorpusError("not valid UTF-8: the document holds bytes that cannot be decoded", p, record=f"#{i}")
        doc, n, chosen_by_order = _tab_document(item, i, p, annotator=annotator, wanted=wanted,
                                                person_field=person_field, strict=strict, builder=builder)
        builder.add(doc, record=f"#{i} ({cut(doc.doc_id)})")
        if n:
            dropped[doc.doc_id] = n
        if chosen_by_order:
            unchecked.append(doc.doc_id)

    for i, item in enumerate(items, start=1):
        builder.attempt(lambda: one(item, i))
    warn_dropped(p, dropped, "mention")
    if unchecked:
        warnings.warn(f"{p}: {len(unchecked)} document(s) have several annotators and no 'quality_checked' field; "
                      f"the first annotator in sorted order was used (e.g. {', '.join(unchecked[:3])}); pass "
                      "--annotator to choose", CorpusWarning, stacklevel=2)
    return builder.corpus(hint="the JSON list is empty")


def _load_json(path: Path, lenient: bool) -> tuple[Any, bool]:
    """The parsed file and whether a lenient decode kept undecodable bytes (then every document is checked)."""
    text = decode(read_bytes(path), path, hint="re-encode the file as UTF-8", lenient=lenient)
    lossy = lenient and undecodable(text) is not None
    try:
        return json.loads(text), lossy
    except json.JSONDecodeError as e:
        raise CorpusError(f"invalid JSON: {e.msg} (column {e.colno})", path, line=e.lineno) from e
    except (ValueError, RecursionError) as e:  # an over-long integer; nesting beyond the recursion limit
        raise CorpusError(f"invalid JSON: {'nested too deeply' if isinstance(e, RecursionError) else e}",
                          path) from e


def _tab_document(item: Any, i: int, path: Path, *, annotator: str | None, wanted: set[str],
                  person_field: str | None, strict: bool, builder: Builder) -> tuple[Document, int, bool]:
    record = f"#{i}"
    if not isinstance(item, dict):
        raise CorpusError(f"expected a JSON object, got a {type(item).__name__}", path, record=record)
    missing = [k for k in ("doc_id", "text", "annotations") if k not in item]
    if missing:
        raise CorpusError(f"missing field(s) {', '.join(map(repr, missing))}", path, record=record)
    doc_id, text = item["doc_id"], item["text"]
    record = f"#{i} ({cut(doc_id)})"
    if not isinstance(text, str):
        raise CorpusError(f"field 'text' must be a string, got {type(text).__name__}", path, record=record)
    meta = item.get("meta")
    person = _tab_person(doc_id, meta, person_field, path, record)
    ann_id, mentions, by_order = _tab_mentions(item["annotations"], annotator, item.get("quality_checked"), path,
                                               record)
    cands = [builder.attempt(lambda: _tab_span(m, k, text, path, record, wanted))
             for k, m in enumerate(mentions, start=1)]
    spans, dropped = resolve_overlaps([c for c in cands if c is not None], strict=strict, path=path, record=record)
    labels: dict[str, Any] = {"annotator": ann_id}
    if item.get("task") is not None:
        labels["task"] = item["task"]
    if meta is not None:
        labels["meta"] = meta
    doc = make_document(doc_id, person, text, spans, item.get("dataset_type"), labels, path=path, record=record)
    return doc, dropped, by_order


def _tab_person(doc_id: Any, meta: Any, person_field: str | None, path: Path, record: str) -> Any:
    if person_field is None:
        return doc_id
    if not isinstance(meta, dict) or person_field not in meta:
        keys = sorted(meta) if isinstance(meta, dict) else []
        raise CorpusError(f"person_field {short(person_field)} not found in 'meta' (meta keys: {names(keys)})", path,
                          record=record)
    return meta[person_field]


def _tab_mentions(annotations: Any, annotator: str | None, checked: Any, path: Path,
                  record: str) -> tuple[str | None, list[Any], bool]:
    """``(annotator used, its mentions, whether it was chosen by sorted order among several)``."""
    if not isinstance(annotations, dict):
        raise CorpusError(f"field 'annotations' must be an object keyed by annotator, got "
                          f"{type(annotations).__name__}", path, record=record)
    available = sorted(annotations)
    by_order = False
    if annotator is None:
        annotator, by_order = _default_annotator(available, checked, path, record)
        if annotator is None:
            return None, [], False
    elif annotator not in annotations:
        raise CorpusError(f"annotator {short(annotator)} not found; this document has annotators: {names(available)}",
                          path,
                          record=record)
    block = annotations[annotator]
    mentions = block.get("entity_mentions") if isinstance(block, dict) else None
    if not isinstance(mentions, list):
        raise CorpusError(f"annotations[{short(annotator)}] must be an object with an 'entity_mentions' list", path,
                          record=record)
    return annotator, mentions, by_order


def _default_annotator(available: list[str], checked: Any, path: Path, record: str) -> tuple[str | None, bool]:
    """The annotator TAB marks as quality-checked; without that mark the only one, or the first in sorted order."""
    if checked is None or checked == []:
        return (available[0] if available else None), len(available) > 1
    checked_ids = [checked] if isinstance(checked, str) else checked
    if not isinstance(checked_ids, list) or not all(isinstance(n, str) for n in checked_ids):
        raise CorpusError(f"field 'quality_checked' must be a list of annotator ids, got {type(checked).__name__}",
                          path, record=record)
    present = sorted(n for n in checked_ids if n in available)
    if not present:
        raise CorpusError(f"'quality_checked' names {names(sorted(checked_ids))}, none of which annotated this "
                          f"document (it has {names(available)}); pass --annotator to choose", path, record=record)
    return present[0], False


def _tab_span(m: Any, k: int, text: str, path: Path, record: str,
              wanted: set[str]) -> tuple[int, int, str, str] | None:
    """``(start, end, label, mention id)`` of a mention, or ``None`` when its identifier type is not wanted.

    Offsets and ``span_text`` are checked only for wanted mentions (those that become spans).
    """
    if not isinstance(m, dict):
        raise CorpusError(f"entity mention #{k} must be an object, got {type(m).__name__}", path, record=record)
    mid = str(m.get("entity_mention_id", f"#{k}"))
    where = f"{record}, mention {mid}"
    missing = [f for f in ("entity_type", "identifier_type", "start_offset", "end_offset") if f not in m]
    if missing:
        raise CorpusError(f"missing field(s) {', '.join(map(repr, missing))}", path, record=where)
    start, end, etype, itype = m["start_offset"], m["end_offset"], m["entity_type"], m["identifier_type"]
    if not isinstance(itype, str) or not isinstance(etype, str):
        raise CorpusError(f"entity_type and identifier_type must be strings, got a {type(etype).__name__} and a "
                          f"{type(itype).__name__}", path, record=where)
    if itype not in wanted:
        return None
    if isinstance(start, bool) or isinstance(end, bool) or not isinstance(start, int) or not isinstance(end, int):
        raise CorpusError(f"offsets must be integers, got a {type(start).__name__} and a {type(end).__name__}",
                          path, record=where)
    if not 0 <= start < end <= len(text):
        raise CorpusError(f"[{start}, {end}) lies outside the text (length {len(text)}) or is empty", path,
                          record=where)
    surface = m.get("span_text")
    if surface is not None and text[start:end] != surface:
        raise CorpusError(f"offset/text mismatch: text[{start}:{end}] (length {end - start}) differs from span_text "
                          f"(length {len(surface) if isinstance(surface, str) else type(surface).__name__})"
                          f"{mismatch_hint(text, surface, start) if isinstance(surface, str) else ''}", path,
                          record=where)
    return start, end, f"{etype}/{itype}", mid
