"""The report's glossary: the words of the verdicts, figures and tables in plain language, and the colour key of
the strategies (one colour per strategy in every figure, :func:`toolkit.plots.audit.strategy_color`)."""

from __future__ import annotations

from collections.abc import Iterable

from toolkit.plots.attacks import ATTACK_GLOSSARY, ATTACK_NAMES
from toolkit.plots.audit import strategy_color

TERMS = [
    ("members / non-members", "people whose notes the model was fine-tuned on / people of the same corpus it never "
                              "saw (held out so that an attack can be scored)"),
    ("AUC", "the chance that an attack scores a random member above a random non-member: 0.5 is a coin toss, 1.0 "
            "always right; given with its 95% confidence interval [low, high]"),
    ("TPR at FPR", "the share of members an attack finds (true-positive rate) when it may wrongly accuse a given "
                   "share of non-members (false-positive rate: 0.1%, 1%, 10%)"),
    ("n/r", "not resolvable: with n non-members a false-positive rate below 1/n cannot be measured"),
    ("smallest detectable AUC", "with this many members and non-members, an AUC below this value cannot be told "
                                "apart from chance; a green verdict says nothing about leakage smaller than that"),
    ("privacy / utility", "privacy: share of the identifier types of the training notes the model never predicts "
                          "when every word is probed; utility: how often it predicts ordinary words right"),
    ("held-out utility", "utility measured on notes of people outside training (the non-members): what fine-tuning "
                         "taught about notes in general, where utility on the training notes also counts what the "
                         "model memorised of them"),
    ("surrogates (…_surrogate)", "each direct identifier replaced before training by a made-up one of the same kind, "
                                 "the same for one person throughout: the model never reads the real identifier, "
                                 "so the rest of a note cannot point back to it"),
    ("novel-identifier privacy", "privacy counted only on identifiers the base model could not have seen before "
                                 "fine-tuning"),
    ("regurgitation", "the model writing out identifiers of its training notes (predicted in place, or when it "
                      "continues a note freely)"),
    ("PP strategies (ppmlm, ppclm …)", "identifiers stay in the text the model reads but are never prediction "
                                       "targets, so the model is not trained to write them. They protect the "
                                       "identifiers as outputs; they do not hide membership: the model still learns "
                                       "the rest of each note, and the context around identifiers"),
    ("pseudonymised (…_pseudo)", "PII spans replaced by X before training: the model never sees the direct "
                                 "identifiers, but still the indirect ones (rare words) and the rest of each note"),
    ("DP-SGD (…_dp)", "training with differential privacy: each person's influence on the model is bounded (ε)"),
    ("verdict", "red / incomplete (grey) / amber / green from fixed rules (listed under the verdicts); incomplete: "
                "membership or PII inference could not be measured or judged (e.g. too few people); green never "
                "means that the model "
                "holds no personal data, only that these attacks found none at this sample size"),
]


def glossary() -> list[tuple[str, str]]:
    """``(term, explanation)``: the general terms, then every attack by its plain name."""
    attacks = [(ATTACK_NAMES.get(k, k.replace("_", " ")), v) for k, v in ATTACK_GLOSSARY.items()]
    return TERMS + attacks


def colour_key(names: Iterable[str]) -> list[tuple[str, str]]:
    """``(strategy, colour)`` of the strategies drawn in the report, in the given order without repeats."""
    return [(s, strategy_color(s)) for s in dict.fromkeys(names)]


__all__ = ["TERMS", "colour_key", "glossary"]
