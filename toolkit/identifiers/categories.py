"""Mapping of detector / gold labels to the toolkit's PII categories (methods.md §2).

Categories: NAME, LOCATION, ORGANIZATION (hospitals included), DATE, ID, PHONE, EMAIL, AGE, URL, OTHER.
Labels from i2b2/n2c2 (PATIENT, DOCTOR, HOSPITAL, MEDICALRECORD ...), spaCy/OntoNotes (PERSON, GPE, ORG ...), TAB
(``PERSON/DIRECT``: the part before ``/`` is used) and the pattern recogniser map here; unknown labels map to OTHER.
"""

from __future__ import annotations

import functools

CATEGORIES: tuple[str, ...] = ("NAME", "LOCATION", "ORGANIZATION", "DATE", "ID", "PHONE", "EMAIL", "AGE", "URL",
                               "OTHER")

_LABEL_TO_CATEGORY: dict[str, str] = {
    # names
    "PATIENT": "NAME", "DOCTOR": "NAME", "PERSON": "NAME", "NAME": "NAME", "USERNAME": "NAME", "PER": "NAME",
    # organisations
    "HOSPITAL": "ORGANIZATION", "ORG": "ORGANIZATION", "ORGANIZATION": "ORGANIZATION",
    # locations
    "LOCATION": "LOCATION", "LOC": "LOCATION", "GPE": "LOCATION", "FAC": "LOCATION", "CITY": "LOCATION",
    "STATE": "LOCATION", "COUNTRY": "LOCATION", "STREET": "LOCATION", "ZIP": "LOCATION",
    "LOCATION-OTHER": "LOCATION",
    # dates
    "DATE": "DATE", "TIME": "DATE", "DATETIME": "DATE",
    # identifiers
    "ID": "ID", "IDNUM": "ID", "MEDICALRECORD": "ID", "BIOID": "ID", "HEALTHPLAN": "ID", "ACCOUNT": "ID",
    "LICENSE": "ID", "DEVICE": "ID", "VEHICLE": "ID", "CODE": "ID", "SSN": "ID",
    # contact
    "PHONE": "PHONE", "FAX": "PHONE", "EMAIL": "EMAIL", "URL": "URL",
    "AGE": "AGE",
}


@functools.lru_cache(maxsize=4096)
def pii_category(label: str) -> str:
    """The PII category of a raw label (case-insensitive; ``"PERSON/DIRECT"`` uses ``"PERSON"``)."""
    key = label.split("/", 1)[0].strip().upper()
    return _LABEL_TO_CATEGORY.get(key, "OTHER")
