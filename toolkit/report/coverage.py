"""What the identifier findings could not see (methods.md §2): every identifier finding of the report (direct
identifiers, PII inference, regurgitation and extraction of identifiers) covers the identifiers the run's detector
found. With the gold spans (``oracle``) that is every annotated identifier; with a detector it is only what the
detector found, so the report says so and prints the detector's measured recall on the nearest gold corpus
(:func:`toolkit.identifiers.evaluation.measured_quality`, written by ``benchmarks/detection_quality.py``)."""

from __future__ import annotations

from typing import Any

from toolkit.identifiers.evaluation import measured_quality
from toolkit.report.formatting import block, fmt


def coverage_blocks(detector: Any, *, missed_listed: bool = False) -> list[dict]:
    """One paragraph on what the findings cover, for the run's ``identifiers.detector``; ``missed_listed``: the run
    holds the missed gold identifiers (``missed/``), which the report lists and attacks in a section of its own."""
    if detector is None:
        return []
    spec = str(detector)
    if spec.strip().lower() == "oracle":
        return [block("p", "Identifier findings cover the corpus' annotated (gold) identifiers: the 'oracle' detector "
                           "uses them as they are.")]
    q = measured_quality(spec)
    head = (f"Identifier findings cover the identifiers the '{spec}' detector found, not those it missed: a missed "
            f"name is neither protected by PP* strategies nor tested by PII inference or regurgitation. ")
    if missed_listed:
        head += ("This corpus has gold spans: the gold identifiers the detector missed are listed and attacked in "
                 "the section 'Gold identifiers the detector missed'. ")
    if q is None:
        return [block("p", head + "This detector's recall was not measured on a gold corpus "
                                  "(docs/results.md, \"Detection quality on clinical note formats\").")]
    return [block("p", head + f"Its measured word-level recall on {q['corpus']}: {fmt(q['recall'])} of gold PHI words "
                              f"(names {fmt(q['name_recall'])}), precision {fmt(q['precision'])} (commit "
                              f"{q['commit']}, {q['date']}; docs/results.md, \"Detection quality on clinical note "
                              f"formats\").")]


__all__ = ["coverage_blocks"]
