"""The report's "Gold identifiers the detector missed" section (``missed/…/missed.json``, :mod:`toolkit.audit.missed`,
methods.md §2.1): per audited model, how many gold identifiers the protection (direct ∪ indirect identifiers) left
visible among members and non-members, per category; PII inference and regurgitation on them, members against
non-members, by the test the verdict uses for detected identifiers; and the missed identifiers themselves, as keyed
hashes with category and counts (never a value, a word or a person id).

With the ``oracle`` detector the gold spans are the detector and nothing is missed by definition; without gold spans
nothing can be listed, and the identifier findings cover detected identifiers only (the corpus section says so with
the detector's measured recall).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from toolkit.results.collect import RunData
from toolkit.report.formatting import block, fmt, pct, table

#: missed identifiers listed per model in the section (all of them are in missed.json)
MAX_LISTED = 40


def _detector(run: RunData) -> str | None:
    cfg = next(iter(run.ids_summary.values()), {}).get("config") or {}
    return cfg.get("detector")


def _advantage_line(what: str, adv: dict | None) -> str:
    if not adv:
        return f"{what}: not compared (no missed occurrence that is not public in one of the groups)."
    return (f"{what}: members {fmt(adv.get('members_rate'))} against non-members {fmt(adv.get('nonmembers_rate'))} "
            f"(difference {fmt(adv.get('difference'))}, permutation p = {fmt(adv.get('p_value'))} over individuals, "
            f"{adv.get('n_members', '?')} and {adv.get('n_nonmembers', '?')} individuals).")


def _counts_table(m: dict) -> pd.DataFrame:
    rows = {"gold spans": "gold_spans", "gold words": "gold_words", "missed spans (a word left visible)":
            "missed_spans", "wholly missed spans (no word protected)": "wholly_missed_spans",
            "missed words": "missed_words", "distinct gold identifiers": "gold_identifiers",
            "distinct missed identifiers": "missed_identifiers", "individuals with a missed identifier":
            "individuals_with_missed"}
    return pd.DataFrame({name: {label: (m.get(g) or {}).get(k) for label, k in rows.items()}
                         for g, name in (("members", "members"), ("nonmembers", "non-members"))})


def _category_table(m: dict) -> pd.DataFrame:
    rows = {}
    for cat, v in (m.get("by_category") or {}).items():
        mem, non = v.get("members") or {}, v.get("nonmembers") or {}
        rows[cat] = {"members: gold": mem.get("gold_spans"), "members: missed": mem.get("missed_spans"),
                     "non-members: gold": non.get("gold_spans"), "non-members: missed": non.get("missed_spans")}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("PII category")


def _identifier_table(m: dict) -> pd.DataFrame:
    rows = []
    for r in (m.get("identifiers") or [])[:MAX_LISTED]:
        pm, pn = (r.get("pii_inference") or {}).get("members"), (r.get("pii_inference") or {}).get("nonmembers")
        reg = r.get("regurgitation")
        rows.append({"identifier (keyed hash)": r["hash"], "category": r["category"],
                     "member occurrences": r["members"]["occurrences"],
                     "non-member occurrences": r["nonmembers"]["occurrences"],
                     "PII top-1 (members)": pm["top1"] if pm else None,
                     "reference top-1": pm.get("reference_top1") if pm else None,
                     "chance": pm["chance"] if pm else None,
                     "PII top-1 (non-members)": pn["top1"] if pn else None,
                     "reproduced / prompted (members)": f"{reg['members'][1]}/{reg['members'][0]}" if reg else "n/a",
                     "recovered": r.get("recovered")})
    return pd.DataFrame(rows)


def _model_blocks(label: str, m: dict) -> list[dict]:
    mem, non = m.get("members") or {}, m.get("nonmembers") or {}
    pii = m.get("pii_inference") or {}
    adv = (pii.get("member_advantage") or {}).get("overall")
    pm, pn = (pii.get("members") or {}).get("overall") or {}, (pii.get("nonmembers") or {}).get("overall") or {}
    reg = m.get("regurgitation")
    n_rec = (m.get("n_recovered") or {}).get("members", 0)
    text = (f"{label}: {fmt(mem.get('missed_spans'))} of {fmt(mem.get('gold_spans'))} gold spans of the members "
            f"and {fmt(non.get('missed_spans'))} of {fmt(non.get('gold_spans'))} of the non-members were missed "
            f"({fmt(mem.get('missed_identifiers'))} and {fmt(non.get('missed_identifiers'))} distinct identifiers). "
            f"PII inference on the missed occurrences: top-1 {fmt(pm.get('top1'))} for members "
            f"({fmt(pm.get('n'))} attacked, chance {fmt(pm.get('chance'))}, reference model "
            f"{fmt(pm.get('reference_top1'))}), {fmt(pn.get('top1'))} for non-members ({fmt(pn.get('n'))} attacked). ")
    if reg is not None:
        rn = reg.get("nonmembers") or {}
        text += (f"Regurgitation of the missed words: {fmt(reg.get('n_reproduced'))} of "
                 f"{fmt(reg.get('n_identifier_occurrences'))} reproduced for members ({pct(reg.get('share_reproduced'))}"
                 f"), {fmt(rn.get('n_reproduced'))} of {fmt(rn.get('n_identifier_occurrences'))} for non-members "
                 f"({pct(rn.get('share_reproduced'))}). ")
    else:
        text += "Regurgitation: not measured (a masked model, or no regurgitation settings). "
    text += (f"{n_rec} missed identifier(s) of the members were recovered by one attack or the other; by chance "
             "alone a candidate is ranked first once in |C| tries, so this count is no evidence on its own: the "
             "members' rate against the non-members' is.")
    blocks = [block("p", text),
              block("p", _advantage_line("Members against non-members, PII inference on missed identifiers", adv)
                    + (" " + _advantage_line("Regurgitation of missed words", reg.get("member_advantage"))
                       if reg is not None else ""))]
    cats = _category_table(m)
    if len(cats):
        blocks.append(block("table", table(cats), f"{label}: gold and missed spans per PII category."))
    ids = _identifier_table(m)
    if len(ids):
        n = len(m.get("identifiers") or [])
        blocks.append(block("table", table(ids, index=False),
                            f"{label}: the missed gold identifiers ({min(n, MAX_LISTED)} of {n} listed; every one in "
                            "missed.json), each as a keyed hash of its normalised value with its category and counts; "
                            "'recovered': ranked first alone by PII inference in one of its member occurrences, or "
                            "one of its words reproduced in a member's continuation.", appendix=True))
    return blocks


def missed_section(run: RunData) -> list[dict[str, Any]]:
    """The section's blocks for ``run`` (module docstring)."""
    detector = _detector(run)
    if not run.missed:
        if detector is not None and "oracle" in {p.strip().lower() for p in str(detector).split("+")}:
            return [block("absent", "The gold spans were the detector ('oracle'): no gold identifier is missed by "
                                    "definition, and every identifier finding covers every annotated identifier.")]
        return [block("absent", "No missed gold identifiers in this run: the corpus has no gold spans (the "
                                "identifier findings cover detected identifiers only; see the corpus section), or "
                                "the run was made before this step.")]
    first = next(iter(run.missed.values()))
    blocks = [block("p", f"Where the corpus has gold spans, the '{detector or '?'}' detector's protection (direct "
                         "and indirect identifiers) is compared with them word by word: "
                         f"{first.get('definition', '')}. The missed occurrences are attacked as the detected ones "
                         "are (PII inference; regurgitation for a causal model), in members' and non-members' notes, "
                         "and compared by the same permutation test over individuals. Identifiers are shown as "
                         f"{first.get('hash', 'keyed hashes')}."),
              block("table", table(_counts_table(first)), "Gold and missed spans (the first model's analysis; the "
                                                          "counts are the same for every model).")]
    for label, m in run.missed.items():
        blocks += _model_blocks(label, m)
    return blocks


__all__ = ["MAX_LISTED", "missed_section"]
