"""Synthetic clinical notes with gold PHI spans (i2b2 categories) for the sample data and the benchmarks.

What the generator guarantees (tests/test_samples.py checks it):

* Individuals are patients, split by individual into ``public`` / ``train`` / ``heldout`` / ``test`` (25% each by
  default); each patient has 1–4 notes (35/35/20/10%), discharge summaries and progress notes in several layouts.
* Surrogate PHI comes from Faker (``en_US``) and is written through :class:`TextBuilder`, which records every span
  as it writes: labels are exactly ``PATIENT, DOCTOR, HOSPITAL, DATE, ID, PHONE, AGE, LOCATION``.
* Direct identifiers that repeat: ~12 doctors and ~5 hospitals shared by every split (public included), and 8 staff
  surnames written in lower case in a sloppy style (``seen by nurse okafor``, ``d/w dr. lindqvist``), labelled DOCTOR.
* Indirect identifiers: each patient has 2–4 rare single-word terms (drug, condition, cancer, occupation, hobby,
  instrument, pet) mentioned in every one of the patient's notes, about 75% unique to the patient and the rest shared
  by 2–3 patients of the same side (public patients never share a term with the other splits).
* A smoking status (the five i2b2 classes) per patient, in ``labels["smoking"]`` and supported by the text.

Randomness: one :class:`random.Random` seeded with ``seed`` and one Faker instance seeded with ``seed``; nothing
depends on the clock or on hash randomisation. Faker is only called per patient/doctor/hospital, never per word.
"""

from __future__ import annotations

import json
import random
import re
from collections import ChainMap
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple, Union

from toolkit.io import atomic_write
from toolkit.samples import wordlists as W

# =================================================================================================================
# Text building with gold spans (also used by the e-mail generator)
# =================================================================================================================

_PLACEHOLDER = re.compile(r"\{(\w+)\}")
_WORD = re.compile(r"[^\W_]+")


class Phi(NamedTuple):
    """A PII value to be written with a gold span: the surface text and its label."""

    text: str
    label: str


#: What a template slot may hold: plain text, a PII value, or a callable giving either (called at each use).
Slot = Union[str, Phi, Callable[[], Union[str, Phi]]]


@lru_cache(maxsize=None)
def parse_template(template: str) -> tuple[tuple[str, str | None], ...]:
    """Split ``"a {x} b"`` into ``(("a ", "x"), (" b", None))``: literal text, then the slot that follows it."""
    out: list[tuple[str, str | None]] = []
    pos = 0
    for m in _PLACEHOLDER.finditer(template):
        out.append((template[pos:m.start()], m.group(1)))
        pos = m.end()
    out.append((template[pos:], None))
    return tuple(out)


def words_of(text: str) -> list[str]:
    """Words as the samples' statistics count them: runs of letters/digits, lower-cased."""
    return _WORD.findall(text.lower())


class TextBuilder:
    """Append text piece by piece and record a span for every PII piece.

    >>> b = TextBuilder(); b.add("Seen by Dr. "); b.phi("Lee", "DOCTOR"); b.add(".")
    >>> b.text(), b.spans
    ('Seen by Dr. Lee.', [(12, 15, 'DOCTOR')])
    """

    __slots__ = ("parts", "spans", "pos")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.spans: list[tuple[int, int, str]] = []
        self.pos = 0

    def add(self, s: str) -> None:
        """Append plain text (no PII)."""
        if s:
            self.parts.append(s)
            self.pos += len(s)

    def phi(self, s: str, label: str) -> None:
        """Append a PII value and record its span."""
        if not s:
            raise ValueError(f"empty {label} value")
        self.spans.append((self.pos, self.pos + len(s), label))
        self.parts.append(s)
        self.pos += len(s)

    def put(self, value: Slot) -> None:
        """Append a slot value: text, a :class:`Phi`, or the result of calling it."""
        if callable(value):
            value = value()
        if isinstance(value, Phi):
            self.phi(value.text, value.label)
        else:
            self.add(value)

    def fill(self, template: str, slots: Mapping[str, Slot]) -> None:
        """Append ``template`` with each ``{name}`` replaced by ``slots[name]`` (a missing slot is a KeyError)."""
        for literal, name in parse_template(template):
            self.add(literal)
            if name is not None:
                self.put(slots[name])

    def text(self) -> str:
        return "".join(self.parts)

    def word_count(self) -> int:
        """Whitespace-separated tokens written so far (a cheap length measure)."""
        return len(self.text().split())


def make_record(doc_id: str, person_id: str, text: str, spans: Iterable[tuple[int, int, str]], split: str | None,
                labels: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A document dict in the native JSONL field order (``split``/``labels`` omitted when empty, as ``write_jsonl``)."""
    out: dict[str, Any] = {"doc_id": doc_id, "person_id": person_id, "text": text,
                           "spans": [{"start": s, "end": e, "label": lab} for s, e, lab in spans]}
    if split is not None:
        out["split"] = split
    if labels:
        out["labels"] = dict(labels)
    return out


def write_records(records: Iterable[Mapping[str, Any]], path: Path) -> Path:
    """Write one JSON object per line (UTF-8, no ASCII escaping, ``\\n`` line ends) atomically."""
    return atomic_write(path, lambda fh: fh.writelines(json.dumps(rec, ensure_ascii=False) + "\n" for rec in records))


def article(word: str) -> str:
    """``a`` or ``an`` before a word, by its first sound (good enough for the curated lists)."""
    w = word.lower()
    if w.startswith(("uni", "use", "uro", "uke", "eu", "one")):
        return "a"
    if w.startswith(("hour", "honest", "herb")):
        return "an"
    return "an" if w[:1] in "aeiou" else "a"


def weighted_choice(rng: random.Random, items: Sequence[Any], weights: Sequence[float]) -> Any:
    """One item drawn with the given weights (a thin wrapper to keep call sites short)."""
    return rng.choices(items, weights=weights, k=1)[0]


# =================================================================================================================
# Constants
# =================================================================================================================

LABELS: tuple[str, ...] = ("PATIENT", "DOCTOR", "HOSPITAL", "DATE", "ID", "PHONE", "AGE", "LOCATION")
SMOKING_CLASSES: tuple[str, ...] = ("CURRENT SMOKER", "PAST SMOKER", "NON-SMOKER", "SMOKER", "UNKNOWN")
#: Class weights: UNKNOWN and NON-SMOKER most frequent, as in i2b2 2006 (a little less skewed, so a classifier
#: has examples of every class in a 200-patient split).
SMOKING_WEIGHTS: tuple[float, ...] = (0.14, 0.15, 0.25, 0.06, 0.40)
DEFAULT_SPLITS: tuple[tuple[str, float], ...] = (("public", 0.25), ("train", 0.25), ("heldout", 0.25), ("test", 0.25))
#: Weights of 1, 2, 3, 4 notes per patient (mean 2.05).
NOTE_COUNT_WEIGHTS: tuple[float, ...] = (0.35, 0.35, 0.20, 0.10)
#: Weights of 2, 3, 4 rare terms per patient.
TERM_COUNT_WEIGHTS: tuple[float, ...] = (0.45, 0.40, 0.15)
#: How many terms of one category a patient may hold (two rare drugs or two rare conditions are plausible).
MAX_PER_CATEGORY: dict[str, int] = {"drug": 2, "condition": 2}
#: Share of the made-up drug reserve counted in the drug category's weight (keeps small curated categories from
#: running out at the default size while most drug terms stay real names).
RESERVE_WEIGHT = 0.28
SHARED_TERM_SHARE = 0.25
N_DOCTORS = 12
N_HOSPITALS = 5
LONG_WORDS_PER_NOTE = 500

_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")
_AREA_CODES = ("617", "508", "781", "978", "413", "401", "603", "207", "860", "203", "212", "718", "215", "412",
               "312", "773", "216", "313", "404", "305", "713", "214", "602", "303", "206", "503", "415", "619")

# =================================================================================================================
# Sentence templates. Slots: see _note_slots(). Rare terms never appear in literal text (checked at import).
# =================================================================================================================

ONSET = (
    "Symptoms began {ndays} days prior to admission.",
    "{Pron} was in {poss} usual state of health until {ndays} days ago.",
    "{Pron} reports {ndays} days of gradually worsening symptoms at home.",
    "The family noted a decline over the past {ndays} days.",
)
ED_FINDING = (
    "In the emergency department {pron} was febrile to 101.4 and tachycardic.",
    "In the emergency department {pron} was hemodynamically stable.",
    "On arrival {pron} was hypoxic to 88 percent on room air and was placed on oxygen.",
    "Initial vital signs were notable for a blood pressure of {bp} and a heart rate of {hr}.",
    "Emergency department workup included a chest film, basic labs and an electrocardiogram.",
)
CONSULT = (
    "{service} was consulted and Dr. {consult} recommended continued medical management.",
    "Dr. {consult} from {service} saw the patient and suggested outpatient follow-up.",
    "{service} input from Dr. {consult} was appreciated.",
    "Case was reviewed with Dr. {consult} of {service}, who agreed with the plan.",
)
SERVICES = ("Cardiology", "Nephrology", "Infectious disease", "Gastroenterology", "Pulmonology", "Endocrinology",
            "Neurology", "Geriatrics")
SUBJECTIVE = (
    "{Pron} reports feeling better this morning.",
    "No acute events overnight.",
    "Slept poorly because of cough.",
    "Tolerating a regular diet without nausea.",
    "Denies chest pain, shortness of breath, nausea or vomiting.",
    "Ambulated in the hallway with physical therapy.",
    "Pain is controlled on the current regimen.",
    "Complains of mild constipation.",
    "Feels weak but is eager to go home.",
    "Appetite is improving.",
    "Reports some dizziness when standing up quickly.",
)
EXAM = (
    ("Alert and oriented, in no acute distress.", "Awake, pleasant and conversant.",
     "Resting comfortably in bed.", "Appears fatigued but nontoxic."),
    ("Mucous membranes moist, oropharynx clear.", "Sclera anicteric, no jugular venous distension.",
     "Jugular venous pressure elevated to 10 cm."),
    ("Lungs clear to auscultation bilaterally.", "Crackles at the right base.", "Scattered expiratory wheezes.",
     "Decreased breath sounds at the left base."),
    ("Regular rate and rhythm, no murmurs.", "Irregularly irregular rhythm.",
     "Soft systolic murmur at the left sternal border."),
    ("Abdomen soft, nontender, nondistended, normal bowel sounds.", "Mild epigastric tenderness without rebound.",
     "Obese abdomen, soft and nontender."),
    ("No peripheral edema.", "Trace pitting edema to the mid shins.", "Warm and well perfused, distal pulses intact.",
     "Erythema of the shin, receding from the marked borders."),
    ("Nonfocal neurological examination.", "Strength full throughout, sensation intact.", "Mild asterixis noted."),
)
LABS = (
    "Labs: Na {na}, K {k}, Cr {cr}, WBC {wbc}, Hgb {hgb}, Plt {plt}.",
    "Morning labs notable for a creatinine of {cr} and hemoglobin of {hgb}.",
    "Basic metabolic panel unremarkable apart from potassium {k}.",
    "Labs stable compared with yesterday, white count {wbc}.",
    "CBC: WBC {wbc}, Hgb {hgb}, platelets {plt}. Chemistry: sodium {na}, creatinine {cr}.",
)
PLAN = (
    "Continue current management.",
    "Advance diet as tolerated.",
    "Physical therapy and occupational therapy to evaluate.",
    "Anticipate discharge home in one to two days.",
    "DVT prophylaxis with subcutaneous heparin.",
    "Code status: full code.",
    "Monitor electrolytes and replete as needed.",
    "Case management involved for discharge planning.",
    "Transition to oral antibiotics if afebrile for 24 hours.",
    "Will repeat labs in the morning.",
    "Encourage incentive spirometry and early mobilization.",
    "Hold antihypertensives if systolic pressure below 100.",
)
INSTRUCTIONS = (
    "Return to the emergency department for fever, chest pain or worsening shortness of breath.",
    "Low sodium diet and daily weights.",
    "Activity as tolerated.",
    "No driving while taking opioid pain medication.",
    "Take all medications as prescribed and bring the list to every appointment.",
    "Call the clinic for any new or worsening symptoms.",
)
FOLLOW_UP = (
    "Follow up with Dr. {pcp} in one to two weeks.",
    "Follow-up appointment with Dr. {pcp_last} on {fu_date}.",
    "Primary care follow-up with Dr. {pcp} at {hosp} clinic on {fu_date}.",
    "Labs to be checked at the follow-up visit with Dr. {pcp_last}.",
)
DISCUSSED = (
    "Plan discussed with {title} {last}, who agrees.",
    "{title} {last} was seen and examined at the bedside.",
    "Discussed the plan with {title} {last} and {poss} family.",
    "{title} {last} verbalized understanding of the plan.",
    "Questions from {title} {last} were answered.",
)
CONTACT = (
    "Contact number on file: {phone}.",
    "{Poss} daughter can be reached at {phone}.",
    "Best phone: {phone}.",
    "Home phone {phone} confirmed with the patient.",
)
STAFF = (
    "seen by nurse {staff}.",
    "d/w dr. {staff} re: dispo.",
    "per {staff} rn pt slept well overnight.",
    "vitals checked by nurse {staff}.",
    "plan d/w dr. {staff}, pt agrees.",
    "{staff} rn aware of plan.",
    "pt seen and examined with dr. {staff}.",
    "meds reconciled w/ nurse {staff}.",
    "wound care per {staff} rn.",
)
HOUSEHOLD = (
    "Lives alone in {city}, {state}.",
    "Lives in {city} with {poss} {spouse}.",
    "Lives with {poss} daughter in {city}.",
    "Resides at {street}, {city}, {state} {zip}.",
    "Lives in an assisted living facility in {city}.",
    "Recently moved to {city} to be closer to family.",
)
ALCOHOL = ("Drinks alcohol socially.", "Occasional alcohol use.", "Denies alcohol or illicit drug use.",
           "Two glasses of wine per week.", "No alcohol use.")
SMOKING = {
    "CURRENT SMOKER": ("Current smoker, {ppd}.", "Smokes {ppd}, {pack_years} pack-year history.",
                       "Active smoker; counseled on cessation.", "Tobacco: current, {ppd}.",
                       "Continues to smoke cigarettes, {ppd}."),
    "PAST SMOKER": ("Former smoker, quit in {quit_year}.", "Quit smoking in {quit_year} after a {pack_years} "
                    "pack-year history.", "Ex-smoker, quit in {quit_year}.", "Tobacco: former, quit {quit_year}."),
    "NON-SMOKER": ("Denies tobacco use.", "Never smoker.", "No history of tobacco use.", "Nonsmoker.",
                   "Tobacco: never."),
    "SMOKER": ("Tobacco use: yes, amount unknown.", "Positive history of tobacco use, details not documented.",
               "Reports tobacco use; amount and timing not recorded.", "Smoking history present, unclear if current."),
    "UNKNOWN": (),
}
PPD = ("1 ppd", "half a pack per day", "2 ppd", "about ten cigarettes a day", "one pack daily")

#: First mention of each rare-term category (social history, past history, medication list).
TERM_FIRST = {
    "occupation": ("Works as {a_occupation}.", "Occupation: {occupation}.", "Retired {occupation}.",
                   "{Pron} is {a_occupation} by trade.", "Employed as {a_occupation}."),
    "hobby": ("Hobbies include {hobby}.", "Enjoys {hobby}.", "Active in {hobby} on weekends.",
              "Spends free time on {hobby}."),
    "instrument": ("Plays the {instrument}.", "Plays the {instrument} in a community ensemble.",
                   "Practices the {instrument} most days."),
    "pet": ("Has {a_pet} at home.", "Lives with {a_pet}.", "Owns {a_pet}."),
    "condition": ("History of {condition}, followed by a specialist.", "Known {condition}, stable.",
                  "Prior workup for {condition} documented in the chart."),
    "cancer": ("History of {cancer}, status post resection.", "Followed by oncology for {cancer}.",
               "Remote {cancer}, no evidence of recurrence."),
    "drug": ("Takes {drug} prescribed by an outside specialist.", "Home medications include {drug}.",
             "Continues {drug} as directed."),
}
#: Second mention (plan, course, education).
TERM_SECOND = {
    "occupation": ("Discussed return to work as {a_occupation} in about two weeks.",
                   "Work note provided for {poss} job as {a_occupation}.",
                   "Given {poss} work as {a_occupation}, lifting restrictions were reviewed."),
    "hobby": ("Encouraged to resume {hobby} gradually.",
              "Asked about returning to {hobby}; advised to wait until follow-up."),
    "instrument": ("Asked whether {pron} may resume playing the {instrument}.",
                   "Hopes to be back playing the {instrument} soon."),
    "pet": ("A neighbor will look after {poss} {pet} until discharge.", "Worried about {poss} {pet} at home."),
    "condition": ("{Poss} {condition} was stable during this admission.",
                  "Outpatient follow-up for {condition} as previously arranged.",
                  "No changes were made to the management of {poss} {condition}."),
    "cancer": ("Oncology aware of admission given history of {cancer}.",
               "Surveillance imaging for {cancer} is due in the coming months."),
    "drug": ("Continue {drug} at the home dose.", "{Poss} outpatient {drug} was held and resumed at discharge.",
             "Pharmacy reviewed interactions with {drug}."),
}
_SOCIAL_CATEGORIES = ("occupation", "hobby", "instrument", "pet")
_HISTORY_CATEGORIES = ("condition", "cancer")

# Extra paragraphs for long notes (words_per_note): review of systems, imaging, education, family history ...
ROS = (
    "Constitutional: {ros1}. Cardiovascular: {ros2}. Respiratory: {ros3}. Gastrointestinal: {ros4}. "
    "Genitourinary: negative. Musculoskeletal: {ros5}. Skin: no new rashes. Neurological: {ros6}. "
    "Psychiatric: mood stable. All other systems reviewed and negative.",
)
ROS_OPTIONS = (
    ("positive for fatigue", "denies fevers or night sweats", "reports a five pound weight loss"),
    ("denies chest pain", "positive for palpitations", "reports orthopnea"),
    ("positive for cough", "denies hemoptysis", "reports dyspnea on exertion"),
    ("denies abdominal pain", "positive for constipation", "reports decreased appetite"),
    ("positive for knee pain", "denies joint swelling", "chronic back stiffness"),
    ("denies focal weakness", "positive for mild headache", "denies numbness or tingling"),
)
IMAGING = (
    "Chest radiograph on {img_date} showed {cxr}.",
    "CT of the abdomen and pelvis on {img_date} demonstrated {ct}.",
    "Transthoracic echocardiogram on {img_date}: {echo}.",
    "Renal ultrasound obtained {img_date} showed normal sized kidneys without hydronephrosis.",
    "Electrocardiogram on {img_date} showed {ekg}.",
)
IMAGING_OPTIONS = {
    "cxr": ("no acute cardiopulmonary process", "a small left pleural effusion", "mild pulmonary vascular congestion",
            "a right lower lobe opacity concerning for pneumonia"),
    "ct": ("no acute intra-abdominal process", "uncomplicated sigmoid diverticulitis",
           "a small hiatal hernia and colonic diverticulosis", "mild hepatic steatosis"),
    "echo": ("preserved ejection fraction with mild left ventricular hypertrophy",
             "ejection fraction of 35 percent with global hypokinesis", "normal valves and normal chamber sizes"),
    "ekg": ("normal sinus rhythm without acute changes", "atrial fibrillation with a controlled rate",
            "sinus tachycardia with nonspecific T wave changes", "first degree atrioventricular block"),
}
EDUCATION = (
    "The patient and family were educated about the warning signs that should prompt a return to the hospital. "
    "Teach-back was used and {pron} was able to repeat the plan. Written instructions were provided.",
    "We reviewed each medication, its purpose and common side effects. {Pron} was given a pill organizer and "
    "asked to keep an updated medication list at home.",
    "Diet was reviewed with the nutritionist, including limiting salt and processed foods. {Pron} was encouraged "
    "to stay active with short daily walks as tolerated.",
    "Fall precautions were discussed, including removing loose rugs and using a night light. Home safety "
    "evaluation was ordered through the visiting nurse agency.",
)
FAMILY_HISTORY = (
    "Family history: mother with {fh1}; father died of {fh2} at age {rel_age}.",
    "Family history notable for {fh1} in a sibling and {fh2} in {poss} father, who died at {rel_age}.",
    "Family history: {fh1} and {fh2} on the maternal side.",
)
FAMILY_CONDITIONS = ("hypertension", "type 2 diabetes", "breast cancer", "colon cancer", "coronary artery disease",
                     "stroke", "dementia", "lung cancer", "kidney disease", "thyroid disease")
INTERVAL = (
    "Overnight {pron} had one episode of loose stool and the stool was sent for testing. No further episodes were "
    "reported this morning.",
    "Telemetry showed a short run of nonsustained ventricular tachycardia overnight; electrolytes were repleted.",
    "Blood glucose values ranged from 110 to 220 and the sliding scale was adjusted.",
    "{Pron} was briefly confused overnight, reoriented easily, and was calm by morning.",
    "Physical therapy recommended a rolling walker and home physical therapy after discharge.",
    "Blood pressure was elevated overnight in the setting of pain and improved after analgesia.",
)
NURSING = (
    "Patient turned every two hours; skin intact over the sacrum and heels.",
    "Bed alarm on for fall risk; call light within reach.",
    "Intake and output recorded; urine output adequate.",
    "Tolerated a shower with standby assistance.",
    "IV site clean, dry and intact; flushed without difficulty.",
    "Pain reassessed one hour after medication, now two out of ten.",
    "overnight vitals per nurse {staff}, no concerns.",
)
PROCEDURES = (
    "Peripheral IV placed in the left forearm.",
    "PICC line placed by interventional radiology on {img_date} for long-term antibiotics.",
    "Foley catheter placed on admission and removed on hospital day two.",
    "Paracentesis on {img_date} removed three liters of clear fluid.",
    "Thoracentesis on {img_date} yielded a transudative effusion.",
)
NUTRITION = (
    "Tolerating a cardiac diet with good intake.",
    "Dietitian recommended oral supplements twice daily.",
    "Consistent carbohydrate diet with bedtime snack.",
    "Speech therapy cleared for thin liquids and a soft diet.",
)
CARE_COORDINATION = (
    "Social work met with the patient regarding home supports.",
    "Visiting nurse services arranged for medication teaching.",
    "Outpatient physical therapy referral placed.",
    "Advance directives reviewed; health care proxy form on file.",
    "Transportation to follow-up appointments arranged.",
)
CHRONIC_PLAN = (
    "{problem}: stable, continue the home regimen.",
    "{problem}: follow up as an outpatient with Dr. {pcp_last}.",
    "{problem}: no changes during this admission; recheck at the next visit.",
    "{problem}: medications reviewed and continued.",
)

# =================================================================================================================
# Vocabulary exclusions: rare terms and names must not collide with the common words the templates use
# =================================================================================================================


def _all_templates() -> list[str]:
    """Every template string and common phrase used in notes (for the common-vocabulary exclusion list)."""
    out: list[str] = []
    for group in (ONSET, ED_FINDING, CONSULT, DISCUSSED, SERVICES, SUBJECTIVE, LABS, PLAN, INSTRUCTIONS, FOLLOW_UP,
                  CONTACT, STAFF, HOUSEHOLD, ALCOHOL, PPD, ROS, IMAGING, EDUCATION, FAMILY_HISTORY, FAMILY_CONDITIONS,
                  INTERVAL, CHRONIC_PLAN, NURSING, PROCEDURES, NUTRITION, CARE_COORDINATION, W.COMPLAINTS,
                  W.CHRONIC_PROBLEMS, W.COMMON_MEDS, _LAYOUT_TEXT):
        out.extend(group)
    for group in EXAM + ROS_OPTIONS + tuple(IMAGING_OPTIONS.values()):
        out.extend(group)
    for mapping in (SMOKING, TERM_FIRST, TERM_SECOND):
        for group in mapping.values():
            out.extend(group)
    for dx, course in W.DIAGNOSES.items():
        out.append(dx)
        out.extend(course)
    out.extend(("wife", "husband", "partner", "son", "daughter", "Mr", "Ms", "Mrs", "man", "woman", "he", "she",
                "his", "her", "him", "M", "F"))
    return out


# Literal text of the note layouts (headers, section names), kept in one place so it is part of the vocabulary.
_LAYOUT_TEXT = (
    "DISCHARGE SUMMARY", "Patient:", "MRN:", "Admission Date:", "Discharge Date:", "Attending: Dr.",
    "HISTORY OF PRESENT ILLNESS:", "is a -year-old with a history of who presented with", "HOSPITAL COURSE:",
    "PAST MEDICAL HISTORY:", "SOCIAL HISTORY:", "DISCHARGE MEDICATIONS:", "DISCHARGE DIAGNOSIS:", "FOLLOW-UP:",
    "DISCHARGE INSTRUCTIONS:", "was admitted to on and discharged on under the care of Dr.", "Name:", "Unit No:",
    "DOB:", "Diagnoses:", "Principal diagnosis:", "Secondary:", "Brief course:", "Disposition: home with services",
    "Disposition: home", "Progress Note", "Medicine Service", "Hospital day", "S:", "O:", "A/P:", "yo",
    "with admitted for", "PMH:", "Meds:", "SH:", "Vitals: T HR BP RR SpO2 % on room air nasal cannula L",
    "Exam:", "Dispo:", "Clinic Note", "Internal Medicine", "returns to clinic for follow-up after a recent "
    "admission for", "Interval history:", "Assessment and plan:", "Medications:", "Social:", "Signed:", "MD",
    "Review of systems:", "Imaging:", "Family history:", "Education:", "Events:", "Problem list:", "Date:",
    "Electronically signed by Dr.", "Labs:", "Laboratory data:", "Nursing:", "Procedures:", "Nutrition:",
    "Care coordination:", "Discharge Summary -", "was found to have", "Past history:",
    "Social:", "Name:", "Admitted: Discharged: Service: Medicine,", "presenting with", "Disposition: home.",
    "Disposition: home with services.", "Disposition: rehabilitation facility.", "Progress Note, hospital day",
    "remains on the medicine service at for", "History:", "Clinic Note -", "Internal Medicine -",
    "Exam:", "Assessment and plan:",
)


@lru_cache(maxsize=None)
def common_vocabulary() -> frozenset[str]:
    """Lower-cased words of all template text and common phrases (slots removed)."""
    literals = " ".join(lit for t in _all_templates() for lit, _ in parse_template(t))
    return frozenset(words_of(literals))


@lru_cache(maxsize=None)
def _faker_name_words() -> frozenset[str]:
    """Lower-cased Faker en_US first and last names and street/city affixes (rare terms must avoid them)."""
    from faker.providers.address.en_US import Provider as Address
    from faker.providers.person.en_US import Provider as Person

    names: list[str] = []
    for attr in ("first_names_male", "first_names_female", "first_names_nonbinary", "last_names"):
        names.extend(getattr(Person, attr, ()))
    names.extend(Address.street_suffixes)
    names.extend(Address.city_suffixes)
    names.extend(Address.city_prefixes)
    return frozenset(w for n in names for w in words_of(n))


def rare_term_pools() -> tuple[dict[str, list[str]], list[str]]:
    """Curated rare terms per category and the made-up drug reserve, minus common words, names and staff names.

    Each word keeps the first category (in :data:`wordlists.RARE_TERMS` order) that lists it. Returned lists are in
    the word lists' order (the caller shuffles them with its seeded generator).
    """
    banned = set(common_vocabulary()) | set(_faker_name_words()) | set(W.STAFF_SURNAMES)
    seen: set[str] = set()
    pools: dict[str, list[str]] = {}
    for category, terms in W.RARE_TERMS.items():
        keep = []
        for t in terms:
            t = t.lower()
            if t.isalpha() and t not in banned and t not in seen:
                keep.append(t)
                seen.add(t)
        pools[category] = keep
    reserve = [t for t in W.synthetic_drug_names() if t not in banned and t not in seen]
    return pools, reserve


# =================================================================================================================
# People, pools and rare-term allocation
# =================================================================================================================


@dataclass(frozen=True)
class Doctor:
    first: str
    last: str

    @property
    def full(self) -> str:
        return f"{self.first} {self.last}"


@dataclass
class Patient:
    """Everything the notes say about one patient (all values fixed once per patient)."""

    pid: str
    split: str
    sex: str
    first: str
    last: str
    age: int
    dob: date
    mrn: str
    phone: str
    street: str
    city: str
    state: str
    zipcode: str
    spouse: str
    smoking: str
    ppd: str
    pack_years: int
    quit_year: int
    admit: date
    attending: Doctor
    pcp: Doctor
    hospital: str
    diagnosis: str
    complaint: str
    problems: list[str]
    meds: list[str]
    terms: list[tuple[str, str]] = field(default_factory=list)  # (category, term), categories may repeat


class TermAllocator:
    """Hands out rare terms: unique ones from per-category queues, shared ones to 2–3 patients of one group.

    Categories are drawn with weights proportional to their curated pool size (drugs also count part of the made-up
    reserve). A category whose queue is empty is skipped while others still have terms; only when everything is used
    up (benchmark scale) are terms reused at random, so terms stop being unique rather than the generator failing.
    """

    def __init__(self, rng: random.Random, pools: dict[str, list[str]], reserve: list[str]):
        self.rng = rng
        self.pools = {c: list(p) for c, p in pools.items()}
        self.queues = {c: rng.sample(p, len(p)) for c, p in pools.items()}
        self.reserve = rng.sample(reserve, len(reserve))
        self.categories = list(pools)
        self.weights = {c: float(len(p)) for c, p in pools.items()}
        self.weights["drug"] += RESERVE_WEIGHT * len(self.reserve)
        self.open_shared: dict[str, list[list[Any]]] = {}

    def _left(self, category: str) -> int:
        return len(self.queues[category]) + (len(self.reserve) if category == "drug" else 0)

    def _allowed(self, category: str, held: list[tuple[str, str]]) -> bool:
        return sum(c == category for c, _ in held) < MAX_PER_CATEGORY.get(category, 1)

    def _pick_category(self, held: list[tuple[str, str]]) -> str:
        cats = [c for c in self.categories if self._allowed(c, held)]
        fresh = [c for c in cats if self._left(c)]
        cats = fresh or cats
        return weighted_choice(self.rng, cats, [self.weights[c] for c in cats])

    def _take(self, category: str, held: list[tuple[str, str]]) -> str:
        queue = self.queues[category]
        if queue:
            return queue.pop()
        if category == "drug" and self.reserve:
            return self.reserve.pop()
        taken = {t for _, t in held}
        return self.rng.choice([t for t in self.pools[category] if t not in taken])

    def _shared(self, group: str, held: list[tuple[str, str]]) -> tuple[str, str]:
        """A shared term for a patient of ``group``: join an open one, or open a new one for 2–3 patients."""
        open_list = self.open_shared.setdefault(group, [])
        taken = {t for _, t in held}
        for entry in open_list:
            term, category, left = entry
            if self._allowed(category, held) and term not in taken:
                entry[2] -= 1
                if entry[2] == 0:
                    open_list.remove(entry)
                return category, term
        category = self._pick_category(held)
        term = self._take(category, held)
        open_list.append([term, category, self.rng.choice((1, 2))])
        return category, term

    def assign(self, group: str) -> list[tuple[str, str]]:
        """Rare terms ``(category, term)`` for one patient: 2–4 distinct terms."""
        n = weighted_choice(self.rng, (2, 3, 4), TERM_COUNT_WEIGHTS)
        held: list[tuple[str, str]] = []
        while len(held) < n:
            if self.rng.random() < SHARED_TERM_SHARE:
                category, term = self._shared(group, held)
            else:
                category = self._pick_category(held)
                term = self._take(category, held)
            held.append((category, term))
        return held


def _split_sizes(n: int, splits: Sequence[tuple[str, float]]) -> list[tuple[str, int]]:
    """Integer sizes per split (rounded; the last split takes the remainder)."""
    total = sum(f for _, f in splits)
    sizes = []
    left = n
    for i, (name, frac) in enumerate(splits):
        k = left if i == len(splits) - 1 else min(left, round(n * frac / total))
        sizes.append((name, k))
        left -= k
    return sizes


def _clean_name(draw: Callable[[], str], banned: frozenset[str], taken: set[str] | None = None,
                tries: int = 50) -> str:
    """A Faker name whose words are not common template words (and, if ``taken`` is given, not already used)."""
    for _ in range(tries):
        name = draw()
        if not set(words_of(name)) & banned and (taken is None or name not in taken):
            return name
    return name


def _make_doctors(fake: Any, banned: frozenset[str]) -> list[Doctor]:
    """The shared doctor pool: distinct surnames."""
    doctors: list[Doctor] = []
    surnames: set[str] = set()
    while len(doctors) < N_DOCTORS:
        last = _clean_name(fake.last_name, banned, surnames)
        first = _clean_name(fake.first_name, banned)
        surnames.add(last)
        doctors.append(Doctor(first, last))
    return doctors


def _make_hospitals(fake: Any, banned: frozenset[str]) -> list[str]:
    """The shared hospital pool (five distinct names)."""
    patterns = ("{last} Memorial Hospital", "Saint {first} Medical Center", "{city} General Hospital",
                "{last} Regional Medical Center", "{city} Community Hospital")
    out: list[str] = []
    for pattern in patterns[:N_HOSPITALS]:
        out.append(pattern.format(last=_clean_name(fake.last_name, banned),
                                  first=_clean_name(fake.first_name, banned),
                                  city=_clean_name(fake.city, banned)))
    return out


def _random_date(rng: random.Random, start: date, end: date) -> date:
    return date.fromordinal(rng.randint(start.toordinal(), end.toordinal()))


def _phone(rng: random.Random) -> str:
    area = rng.choice(_AREA_CODES)
    exchange = rng.randint(201, 989)
    line = rng.randint(0, 9999)
    fmt = rng.random()
    if fmt < 0.6:
        return f"({area}) {exchange}-{line:04d}"
    if fmt < 0.85:
        return f"{area}-{exchange}-{line:04d}"
    return f"{area}.{exchange}.{line:04d}"


def _problems(rng: random.Random, sex: str) -> list[str]:
    """Two or three chronic problems (prostate problems only for men)."""
    options = [p for p in W.CHRONIC_PROBLEMS if sex == "M" or "prostat" not in p]
    return rng.sample(options, rng.randint(2, 3))


def _make_patient(pid: str, split: str, rng: random.Random, fake: Any, banned: frozenset[str],
                  surnames: set[str], mrns: set[str], doctors: list[Doctor], hospitals: list[str]) -> Patient:
    """Draw one patient's fixed attributes (names and address from Faker, everything else from ``rng``)."""
    sex = "F" if rng.random() < 0.5 else "M"
    first = _clean_name(fake.first_name_female if sex == "F" else fake.first_name_male, banned)
    # Surnames mostly distinct: redraw a few times when taken, so common names still repeat now and then.
    last = _clean_name(fake.last_name, banned, surnames, tries=4)
    surnames.add(last)
    age = rng.randint(19, 94)
    admit = _random_date(rng, date(2008, 1, 1), date(2019, 12, 31))
    dob = admit - timedelta(days=age * 365 + rng.randint(1, 360))
    mrn = str(rng.randint(1_000_000, 9_999_999))
    while mrn in mrns:
        mrn = str(rng.randint(1_000_000, 9_999_999))
    mrns.add(mrn)
    street = _clean_name(fake.street_address, banned)
    city = _clean_name(fake.city, banned)
    state = fake.state_abbr(include_territories=False) if rng.random() < 0.7 else fake.state()
    smoking = weighted_choice(rng, SMOKING_CLASSES, SMOKING_WEIGHTS)
    attending, pcp = rng.sample(doctors, 2)
    diagnosis = rng.choice(sorted(W.DIAGNOSES))
    return Patient(
        pid=pid, split=split, sex=sex, first=first, last=last, age=age, dob=dob, mrn=mrn, phone=_phone(rng),
        street=street, city=city, state=state, zipcode=f"{rng.randint(1001, 99950):05d}",
        spouse=rng.choice(("wife", "partner")) if sex == "M" else rng.choice(("husband", "partner")),
        smoking=smoking, ppd=rng.choice(PPD), pack_years=rng.randint(5, 60),
        quit_year=rng.randint(max(1975, admit.year - 40), admit.year - 1), admit=admit, attending=attending,
        pcp=pcp, hospital=rng.choice(hospitals), diagnosis=diagnosis, complaint=rng.choice(W.COMPLAINTS),
        problems=_problems(rng, sex), meds=rng.sample(W.COMMON_MEDS, rng.randint(2, 3)),
    )


# =================================================================================================================
# Notes
# =================================================================================================================


def _fmt_date(d: date, style: int) -> str:
    if style == 0:
        return f"{d.month:02d}/{d.day:02d}/{d.year}"
    if style == 1:
        return d.isoformat()
    if style == 2:
        return f"{_MONTHS[d.month - 1]} {d.day}, {d.year}"
    return f"{d.month}/{d.day}/{d.year % 100:02d}"


class _Note:
    """One note being written: the builder, the patient, the random generator and the slot table."""

    def __init__(self, patient: Patient, note_date: date, rng: random.Random, doctors: list[Doctor],
                 n_notes: int = 2):
        self.p = patient
        # A patient with a single note still gets each rare term at least twice most of the time.
        self.p_second = 0.9 if n_notes == 1 else 0.4
        self.rng = rng
        self.b = TextBuilder()
        self.date = note_date
        self.style = rng.randrange(4)
        self.doctors = doctors
        self.slots = self._slots()

    # -- slots ----------------------------------------------------------------------------------------------------
    def _slots(self) -> dict[str, Slot]:
        p, rng = self.p, self.rng
        he = p.sex == "M"
        d = lambda x: Phi(_fmt_date(x, self.style), "DATE")  # noqa: E731
        slots: dict[str, Slot] = {
            "title": "Mr." if he else rng.choice(("Ms.", "Mrs.")),
            "first": Phi(p.first, "PATIENT"), "last": Phi(p.last, "PATIENT"),
            "full": Phi(f"{p.first} {p.last}", "PATIENT"), "caps": Phi(f"{p.last.upper()}, {p.first}", "PATIENT"),
            "age": Phi(str(p.age), "AGE"), "a_age": self._a_age,
            "sex_word": "man" if he else "woman", "sexc": "M" if he else "F",
            "pron": "he" if he else "she", "Pron": "He" if he else "She", "poss": "his" if he else "her",
            "Poss": "His" if he else "Her", "spouse": p.spouse,
            "mrn": Phi(p.mrn, "ID"), "phone": Phi(p.phone, "PHONE"), "city": Phi(p.city, "LOCATION"),
            "state": Phi(p.state, "LOCATION"), "street": Phi(p.street, "LOCATION"), "zip": Phi(p.zipcode, "LOCATION"),
            "att": Phi(p.attending.full, "DOCTOR"), "att_last": Phi(p.attending.last, "DOCTOR"),
            "pcp": Phi(p.pcp.full, "DOCTOR"), "pcp_last": Phi(p.pcp.last, "DOCTOR"),
            "consult": lambda: Phi(rng.choice(self.doctors).last, "DOCTOR"),
            "staff": lambda: Phi(rng.choice(W.STAFF_SURNAMES), "DOCTOR"),
            "hosp": Phi(p.hospital, "HOSPITAL"), "service": lambda: rng.choice(SERVICES),
            "adm": d(p.admit), "dis": d(p.admit + timedelta(days=rng.randint(2, 9))), "date": d(self.date),
            "dob": d(p.dob), "fu_date": d(self.date + timedelta(days=rng.randint(7, 30))),
            "img_date": d(self.date - timedelta(days=rng.randint(0, 3))),
            "quit_year": Phi(str(p.quit_year), "DATE"), "ppd": p.ppd, "pack_years": str(p.pack_years),
            "rel_age": Phi(str(rng.randint(55, 92)), "AGE"),
            "ndays": lambda: str(rng.randint(2, 10)), "dx": p.diagnosis, "complaint": p.complaint,
            "temp": lambda: f"{rng.uniform(97.0, 101.2):.1f}", "hr": lambda: str(rng.randint(58, 118)),
            "bp": lambda: f"{rng.randint(98, 168)}/{rng.randint(56, 96)}", "rr": lambda: str(rng.randint(12, 24)),
            "spo2": lambda: str(rng.randint(89, 100)), "na": lambda: str(rng.randint(128, 145)),
            "k": lambda: f"{rng.uniform(3.2, 5.4):.1f}", "cr": lambda: f"{rng.uniform(0.6, 2.4):.1f}",
            "wbc": lambda: f"{rng.uniform(3.8, 16.5):.1f}", "hgb": lambda: f"{rng.uniform(7.8, 15.2):.1f}",
            "plt": lambda: str(rng.randint(110, 420)),
        }
        return slots

    def _a_age(self) -> str:
        """Write ``a 67`` / ``an 85`` (the age is a PII value, the article is not)."""
        self.b.add("an " if self.p.age in (11, 18) or str(self.p.age).startswith("8") else "a ")
        self.b.phi(str(self.p.age), "AGE")
        return ""

    # -- writing helpers --------------------------------------------------------------------------------------------
    def add(self, s: str) -> None:
        self.b.add(s)

    def say(self, template: str, end: str = " ") -> None:
        self.b.fill(template, self.slots)
        self.b.add(end)

    def one(self, options: Sequence[str], end: str = " ") -> None:
        self.say(self.rng.choice(options), end)

    def some(self, options: Sequence[str], lo: int, hi: int, end: str = " ") -> None:
        for t in self.rng.sample(list(options), self.rng.randint(lo, min(hi, len(options)))):
            self.say(t, end)

    def say_term(self, options: Sequence[str], category: str, term: str) -> None:
        """One sentence about a rare term: the template's ``{category}``/``{a_category}`` slot holds the term."""
        self.b.fill(self.rng.choice(options),
                    ChainMap({category: term, "a_" + category: f"{article(term)} {term}"}, self.slots))
        self.b.add(" ")

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    # -- sections ---------------------------------------------------------------------------------------------------
    def first_mentions(self, categories: Sequence[str]) -> None:
        """First mention of each of the patient's terms in these categories (every note mentions every term)."""
        for category, term in self.p.terms:
            if category in categories:
                self.say_term(TERM_FIRST[category], category, term)

    def second_mentions(self) -> None:
        """A second mention of each term (plan, course, education), with the note's probability."""
        for category, term in self.p.terms:
            if self.chance(self.p_second):
                self.say_term(TERM_SECOND[category], category, term)

    def smoking(self) -> None:
        if SMOKING[self.p.smoking]:
            self.one(SMOKING[self.p.smoking])

    def staff(self, p: float = 0.75) -> None:
        if self.chance(p):
            self.one(STAFF, end="\n")
            if self.chance(0.3):
                self.one(STAFF, end="\n")

    def pmh_list(self) -> None:
        self.add(", ".join(self.p.problems) + ". ")
        self.first_mentions(_HISTORY_CATEGORIES)

    def med_list(self) -> None:
        self.add("; ".join(self.rng.sample(self.p.meds, len(self.p.meds))) + ". ")
        self.first_mentions(("drug",))

    def vitals(self) -> None:
        o2 = "room air" if self.chance(0.7) else f"{self.rng.randint(1, 4)} L nasal cannula"
        self.say("T {temp} HR {hr} BP {bp} RR {rr} SpO2 {spo2}% on " + o2 + ".")

    def exam(self, k: int) -> None:
        for group in self.rng.sample(EXAM, k):
            self.one(group)

    def course(self) -> None:
        for sentence in W.DIAGNOSES[self.p.diagnosis]:
            self.say(sentence)

    def social(self) -> None:
        self.first_mentions(_SOCIAL_CATEGORIES)
        self.smoking()
        if self.chance(0.6):
            self.one(ALCOHOL)
        self.one(HOUSEHOLD)


# -- layouts: discharge summaries --------------------------------------------------------------------------------


def _discharge_classic(n: _Note) -> None:
    n.say("DISCHARGE SUMMARY", "\n")
    n.say("{hosp}", "\n")
    n.say("Patient: {caps}    MRN: {mrn}", "\n")
    n.say("Admission Date: {adm}    Discharge Date: {dis}", "\n")
    n.say("Attending: Dr. {att}", "\n\n")
    n.say("HISTORY OF PRESENT ILLNESS: {title} {last} is {a_age}-year-old {sex_word} with a history of "
          + " and ".join(n.p.problems[:2]) + " who presented with {complaint}.")
    if n.chance(0.4):
        n.one(ONSET)
    elif n.chance(0.7):
        n.one(ED_FINDING)
    n.add("\nHOSPITAL COURSE: ")
    n.course()
    if n.chance(0.3):
        n.one(CONSULT)
    n.second_mentions()
    n.add("\nPAST MEDICAL HISTORY: ")
    n.pmh_list()
    n.add("\nSOCIAL HISTORY: ")
    n.social()
    n.add("\nDISCHARGE MEDICATIONS: ")
    n.med_list()
    n.say("\nDISCHARGE DIAGNOSIS: {dx}.", "\n")
    n.add("FOLLOW-UP: ")
    n.one(FOLLOW_UP)
    if n.chance(0.5):
        n.one(CONTACT)
    n.add("\n")
    n.staff(0.6)


def _discharge_narrative(n: _Note) -> None:
    n.say("Discharge Summary - {hosp}", "\n")
    n.say("{caps} (MRN {mrn}) was admitted to {hosp} on {adm} and discharged on {dis} under the care of Dr. {att}.")
    n.say("{Pron} is {a_age}-year-old {sex_word} who presented with {complaint} and was found to have {dx}.")
    if n.chance(0.4):
        n.one(ED_FINDING)
    n.add("\n\n")
    n.course()
    if n.chance(0.4):
        n.one(CONSULT)
    n.one(DISCUSSED)
    n.second_mentions()
    n.add("\n\nPast history: ")
    n.pmh_list()
    n.add("Medications: ")
    n.med_list()
    n.add("\nSocial: ")
    n.social()
    n.add("\n\n")
    if n.chance(0.5):
        n.one(INSTRUCTIONS)
    n.one(FOLLOW_UP)
    if n.chance(0.5):
        n.one(CONTACT)
    n.add("\n")
    n.staff(0.6)
    n.say("Electronically signed by Dr. {att_last}, {date}", "\n")


def _discharge_brief(n: _Note) -> None:
    n.say("DISCHARGE SUMMARY", "\n")
    n.say("Name: {full}    Unit No: {mrn}    DOB: {dob}", "\n")
    n.say("Admitted: {adm}    Discharged: {dis}    Service: Medicine, {hosp}", "\n")
    n.say("Principal diagnosis: {dx}.", "\n")
    n.add("Secondary: " + ", ".join(n.p.problems) + ".\n")
    n.say("Brief course: {age} yo {sexc} presenting with {complaint}.")
    n.course()
    n.second_mentions()
    n.add("\nPMH: ")
    n.pmh_list()
    n.add("\nSH: ")
    n.social()
    n.add("\nMeds: ")
    n.med_list()
    n.add("\n")
    n.one(("Disposition: home.", "Disposition: home with services.", "Disposition: rehabilitation facility."), "\n")
    n.one(FOLLOW_UP)
    n.one(INSTRUCTIONS, "\n")
    n.staff(0.7)
    n.say("Signed: {att}, MD", "\n")


# -- layouts: progress notes -------------------------------------------------------------------------------------


def _progress_soap(n: _Note) -> None:
    n.say("Progress Note - {date}", "\n")
    n.say("{hosp}, Medicine Service", "\n")
    n.add("S: ")
    n.some(SUBJECTIVE, 1, 2)
    n.add("\nO: ")
    n.vitals()
    n.exam(2)
    n.one(LABS, "\n")
    n.say("A/P: {age} yo {sexc} with " + n.p.problems[0] + " admitted {adm} for {dx}.")
    n.some(PLAN, 1, 2)
    n.one(DISCUSSED)
    n.second_mentions()
    n.add("\nPMH: ")
    n.pmh_list()
    n.add("\nMeds: ")
    n.med_list()
    n.add("\nSH: ")
    n.social()
    n.add("\n")
    n.staff(0.85)
    n.say("Dr. {att_last}", "\n")


def _progress_narrative(n: _Note) -> None:
    n.say("Progress Note, hospital day " + str(n.rng.randint(2, 6)) + ", {date}", "\n")
    n.say("{title} {last} ({mrn}) remains on the medicine service at {hosp} for {dx}.")
    n.some(SUBJECTIVE, 1, 2)
    n.vitals()
    n.exam(2)
    n.one(LABS)
    n.add("\n")
    n.some(PLAN, 1, 2)
    n.one(DISCUSSED)
    n.second_mentions()
    n.add("\nHistory: ")
    n.pmh_list()
    n.med_list()
    n.social()
    n.add("\n")
    n.staff(0.85)
    n.say("{att}, MD", "\n")


def _progress_clinic(n: _Note) -> None:
    n.say("Clinic Note - {hosp} Internal Medicine - {date}", "\n")
    n.say("{full} (MRN {mrn}) is {a_age}-year-old {sex_word} who returns to clinic for follow-up after a recent "
          "admission for {dx}.")
    n.add("Interval history: ")
    n.some(SUBJECTIVE, 1, 2)
    n.add("\nProblem list: ")
    n.pmh_list()
    n.add("\nMedications: ")
    n.med_list()
    n.add("\nSocial: ")
    n.social()
    n.add("\nExam: ")
    n.vitals()
    n.exam(1)
    n.add("\nAssessment and plan: ")
    n.one(PLAN)
    n.one(DISCUSSED)
    n.second_mentions()
    n.one(FOLLOW_UP)
    n.one(CONTACT, "\n")
    n.staff(0.6)
    n.say("Dr. {pcp_last}", "\n")


DISCHARGE_LAYOUTS = (_discharge_classic, _discharge_narrative, _discharge_brief)
PROGRESS_LAYOUTS = (_progress_soap, _progress_narrative, _progress_clinic)
INPATIENT_PROGRESS_LAYOUTS = (_progress_soap, _progress_narrative)


# -- extra paragraphs for long notes -----------------------------------------------------------------------------


def _extra_paragraph(n: _Note, kind: int) -> None:
    """One more paragraph (40–90 words) of the given kind for long notes; PHI and rare terms recur as usual."""
    rng = n.rng
    slots: dict[str, Slot] = dict(n.slots)
    if kind == 0:
        n.add("\nReview of systems: ")
        for i, options in enumerate(ROS_OPTIONS, 1):
            slots[f"ros{i}"] = rng.choice(options)
        n.b.fill(ROS[0], slots)
        n.add(" ")
    elif kind == 1:
        n.add("\nImaging: ")
        for key, options in IMAGING_OPTIONS.items():
            slots[key] = rng.choice(options)
        for t in rng.sample(IMAGING, 2):
            n.b.fill(t, slots)
            n.add(" ")
    elif kind == 2:
        n.add("\nEducation: ")
        n.one(EDUCATION)
        n.one(INSTRUCTIONS)
    elif kind == 3:
        n.add("\n")
        slots["fh1"], slots["fh2"] = rng.sample(FAMILY_CONDITIONS, 2)
        n.b.fill(rng.choice(FAMILY_HISTORY), slots)
        n.add(" ")
        n.one(CARE_COORDINATION)
    elif kind == 4:
        n.add("\nEvents: ")
        n.some(INTERVAL, 2, 3)
        n.staff(0.8)
    elif kind == 5:
        n.add("\nLaboratory data: ")
        n.some(LABS, 1, 2)
        n.add("Exam: ")
        n.vitals()
        n.exam(3)
    elif kind == 6:
        n.add("\nProblem list: ")
        for problem in n.p.problems:
            slots["problem"] = problem[:1].upper() + problem[1:]
            n.b.fill(rng.choice(CHRONIC_PLAN), slots)
            n.add(" ")
        n.some(PLAN, 1, 2)
    elif kind == 7:
        n.add("\n")
        n.one(CONSULT)
        n.one(DISCUSSED)
        n.second_mentions()
        n.one(FOLLOW_UP)
    elif kind == 8:
        n.add("\nNursing: ")
        n.some(NURSING, 2, 3)
    elif kind == 9:
        n.add("\nProcedures: ")
        n.some(PROCEDURES, 1, 2)
        n.add("Nutrition: ")
        n.one(NUTRITION)
    else:
        n.add("\nCare coordination: ")
        n.some(CARE_COORDINATION, 2, 3)
        n.one(CONTACT)


N_EXTRA_KINDS = 11


def _write_note(patient: Patient, index: int, n_notes: int, rng: random.Random, doctors: list[Doctor],
                words_per_note: int | None) -> tuple[str, list[tuple[int, int, str]]]:
    """Text and spans of the patient's ``index``-th note (0-based)."""
    if index > 0 and rng.random() < 0.25:  # a clinic visit weeks after the admission
        note_date = patient.admit + timedelta(days=rng.randint(14, 120))
        layout = _progress_clinic
    else:
        note_date = patient.admit + timedelta(days=index * rng.randint(1, 3))
        discharge = rng.random() < (0.6 if index == 0 else 0.35)
        layout = rng.choice(DISCHARGE_LAYOUTS if discharge else INPATIENT_PROGRESS_LAYOUTS)
    n = _Note(patient, note_date, rng, doctors, n_notes)
    layout(n)
    if words_per_note:
        kinds: list[int] = []
        while n.b.word_count() < words_per_note:
            if not kinds:  # every kind once, in random order, before any repeats
                kinds = rng.sample(range(N_EXTRA_KINDS), N_EXTRA_KINDS)
            _extra_paragraph(n, kinds.pop())
    return n.b.text().rstrip("\n") + "\n", n.b.spans


# =================================================================================================================
# Public API
# =================================================================================================================


@dataclass
class ClinicalSample:
    """A generated clinical corpus: documents (native dicts), the rare terms used with their category, patients."""

    documents: list[dict[str, Any]]
    term_categories: list[tuple[str, str]]
    patients: list[Patient]


def build_clinical(n_individuals: int = 800, seed: int = 0,
                   splits: Sequence[tuple[str, float]] = DEFAULT_SPLITS,
                   notes_per_person: tuple[int, int] = (1, 4), words_per_note: int | None = None,
                   long: bool = False) -> ClinicalSample:
    """Generate the clinical corpus and keep the rare-term table and patient records (see :func:`generate_clinical`)."""
    from faker import Faker

    if n_individuals < 1:
        raise ValueError("n_individuals must be at least 1")
    lo, hi = notes_per_person
    if not 1 <= lo <= hi:
        raise ValueError(f"notes_per_person must be (lo, hi) with 1 <= lo <= hi, got {notes_per_person!r}")
    if long and words_per_note is None:
        words_per_note = LONG_WORDS_PER_NOTE
    note_counts = list(range(lo, hi + 1))
    note_weights = list(NOTE_COUNT_WEIGHTS) if (lo, hi) == (1, 4) else [1.0] * len(note_counts)

    rng = random.Random(seed)
    fake = Faker("en_US")
    fake.seed_instance(seed)
    banned = common_vocabulary() | frozenset(W.STAFF_SURNAMES)
    pools, reserve = rare_term_pools()
    doctors = _make_doctors(fake, banned)
    hospitals = _make_hospitals(fake, banned)

    width = max(4, len(str(n_individuals)))
    order = rng.sample(range(n_individuals), n_individuals)
    split_of: dict[int, str] = {}
    pos = 0
    for name, size in _split_sizes(n_individuals, splits):
        for i in order[pos:pos + size]:
            split_of[i] = name
        pos += size

    surnames: set[str] = set()
    mrns: set[str] = set()
    patients = [_make_patient(f"p{i + 1:0{width}d}", split_of[i], rng, fake, banned, surnames, mrns, doctors,
                              hospitals) for i in range(n_individuals)]
    allocator = TermAllocator(rng, pools, reserve)
    for i in order:  # random order, so shared terms pair patients across train / heldout / test at random
        p = patients[i]
        p.terms = allocator.assign("public" if p.split == "public" else "private")

    documents: list[dict[str, Any]] = []
    for p in patients:
        n_notes = weighted_choice(rng, note_counts, note_weights)
        for k in range(n_notes):
            text, spans = _write_note(p, k, n_notes, rng, doctors, words_per_note)
            documents.append(make_record(f"{p.pid}-n{k + 1}", p.pid, text, spans, p.split,
                                         {"smoking": p.smoking}))

    category_of: dict[str, str] = {}
    for p in patients:
        for category, term in p.terms:
            category_of[term] = category
    term_categories = sorted(category_of.items(), key=lambda tc: (tc[1], tc[0]))
    return ClinicalSample(documents, term_categories, patients)


def generate_clinical(n_individuals: int = 800, seed: int = 0,
                      splits: Sequence[tuple[str, float]] = DEFAULT_SPLITS,
                      notes_per_person: tuple[int, int] = (1, 4), words_per_note: int | None = None,
                      long: bool = False) -> list[dict[str, Any]]:
    """Synthetic clinical notes as native document dicts (``doc_id, person_id, text, spans, split, labels``).

    Parameters
    ----------
    n_individuals:
        Number of patients (the mean is about 2.05 notes per patient, so ~24,400 patients give ~50,000 notes).
    seed:
        Seeds both :class:`random.Random` and Faker; the same arguments always give the same documents.
    splits:
        ``(name, fraction)`` pairs; patients (not notes) are split.
    notes_per_person:
        Range of notes per patient; ``(1, 4)`` uses the 35/35/20/10% weights, other ranges are uniform.
    words_per_note:
        When set, extra paragraphs are appended until each note has at least this many whitespace tokens
        (default notes have ~110–190).
    long:
        Shorthand for ``words_per_note=500`` (the benchmark setting: 50,000 notes ≈ 25M words).
    """
    return build_clinical(n_individuals, seed, splits, notes_per_person, words_per_note, long).documents


def write_term_categories(rows: Iterable[tuple[str, str]], path: Path) -> Path:
    """Write ``term,category`` rows as CSV (``\\n`` line ends; terms are single lower-case words, no quoting)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        fh.write("term,category\n")
        for term, category in rows:
            fh.write(f"{term},{category}\n")
    return path


def write_clinical(out_dir: Path, seed: int = 0, n_individuals: int = 800) -> list[Path]:
    """Write ``clinical/notes.jsonl`` and ``clinical/term_categories.csv`` under ``out_dir``."""
    sample = build_clinical(n_individuals=n_individuals, seed=seed)
    folder = Path(out_dir) / "clinical"
    return [write_records(sample.documents, folder / "notes.jsonl"),
            write_term_categories(sample.term_categories, folder / "term_categories.csv")]


def word_sharing(documents: Iterable[Mapping[str, Any]],
                 splits: Sequence[str] = ("train", "heldout")) -> dict[str, Any]:
    """How words are shared across individuals in the given splits (the "60% of distinct words" statistic).

    Words are runs of letters/digits, lower-cased. Returns the number of individuals, distinct words, the share of
    distinct words used by exactly one individual and the share of word occurrences those words account for.
    """
    users: dict[str, set[str]] = {}
    occurrences: dict[str, int] = {}
    people: set[str] = set()
    for d in documents:
        if d.get("split") not in splits:
            continue
        people.add(d["person_id"])
        for w in words_of(d["text"]):
            users.setdefault(w, set()).add(d["person_id"])
            occurrences[w] = occurrences.get(w, 0) + 1
    single = [w for w, u in users.items() if len(u) == 1]
    total = sum(occurrences.values())
    return {"individuals": len(people), "distinct_words": len(users), "occurrences": total,
            "single_individual_share_distinct": len(single) / max(1, len(users)),
            "single_individual_share_occurrences": sum(occurrences[w] for w in single) / max(1, total)}
