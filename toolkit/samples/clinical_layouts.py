"""Layouts of the synthetic clinical notes (three discharge summaries, three progress / clinic notes), the extra
paragraphs that lengthen a note to ``words_per_note``, and :func:`write_note`, which picks a layout for a patient's
k-th note. Every layout writes through :class:`~toolkit.samples.clinical_note.Note`, so PHI spans are recorded as the
text is written."""

from __future__ import annotations

import random
from datetime import timedelta

from toolkit.samples.clinical_note import Note
from toolkit.samples.clinical_people import Doctor, Patient
from toolkit.samples.clinical_templates import (CARE_COORDINATION, CHRONIC_PLAN, CONSULT, CONTACT, DISCUSSED,
                                                ED_FINDING, EDUCATION, FAMILY_CONDITIONS, FAMILY_HISTORY, FOLLOW_UP,
                                                IMAGING, IMAGING_OPTIONS, INSTRUCTIONS, INTERVAL, LABS, NURSING,
                                                NUTRITION, ONSET, PLAN, PROCEDURES, ROS, ROS_OPTIONS, SUBJECTIVE)
from toolkit.samples.text import Slot

# -- layouts: discharge summaries --------------------------------------------------------------------------------


def _discharge_classic(n: Note) -> None:
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


def _discharge_narrative(n: Note) -> None:
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


def _discharge_brief(n: Note) -> None:
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


def _progress_soap(n: Note) -> None:
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


def _progress_narrative(n: Note) -> None:
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


def _progress_clinic(n: Note) -> None:
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


def _extra_paragraph(n: Note, kind: int) -> None:
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


def write_note(patient: Patient, index: int, n_notes: int, rng: random.Random, doctors: list[Doctor],
               words_per_note: int | None) -> tuple[str, list[tuple[int, int, str]]]:
    """Text and spans of the patient's ``index``-th note (0-based)."""
    if index > 0 and rng.random() < 0.25:  # a clinic visit weeks after the admission
        note_date = patient.admit + timedelta(days=rng.randint(14, 120))
        layout = _progress_clinic
    else:
        note_date = patient.admit + timedelta(days=index * rng.randint(1, 3))
        discharge = rng.random() < (0.6 if index == 0 else 0.35)
        layout = rng.choice(DISCHARGE_LAYOUTS if discharge else INPATIENT_PROGRESS_LAYOUTS)
    n = Note(patient, note_date, rng, doctors, n_notes)
    layout(n)
    if words_per_note:
        kinds: list[int] = []
        while n.b.word_count() < words_per_note:
            if not kinds:  # every kind once, in random order, before any repeats
                kinds = rng.sample(range(N_EXTRA_KINDS), N_EXTRA_KINDS)
            _extra_paragraph(n, kinds.pop())
    return n.b.text().rstrip("\n") + "\n", n.b.spans
