"""Philter's rule engine (Norgeot et al., "Protected Health Information filter (Philter)", npj Digital Medicine
2020; the UCSF PHI filter, BSD), on character masks, with part-of-speech tags supplied by the caller.

Philter runs an ordered list of filters over a note (its published configuration ``philter_delta``, shipped in
``toolkit/data/philter/`` with its licence). Each filter either **excludes** (marks PHI) or **includes** (marks
safe) the text it matches; an earlier decision wins:

* ``regex`` — an exclude match is PHI unless it touches text already marked safe; an include match is safe unless it
  touches text already marked PHI ("touches": Philter's closed-interval overlap test, ``[a, b] ∩ [s, e] ≠ ∅``);
* ``set`` — each word (Philter's tokens: runs of ``[A-Za-z0-9]``) whose lower-case form is in the set and whose
  POS tag is one of the filter's (any tag when it lists none), with the same precedence;
* ``pos_matcher`` — each word with one of the filter's POS tags (Philter: numbers, ``CD``, are safe here);
* ``regex_context`` — a match whose left (or right, or either) neighbour is already PHI (or a word of a named
  earlier filter): its words become PHI (or safe) whatever was decided before.

Then Philter's catch-all: **every word not marked safe is PHI** (:meth:`PhilterRules.phi_mask`), so a word no list
knows (a name, a misspelling) is removed — recall first, precision second. Each PHI word gets the type of the
first exclude filter that marked it (:data:`KEYWORD_LABELS`), ``PHI`` when only the catch-all did.

The port follows philter-lite's ``detect_phi`` (GitHub ``SironaMedical/philter-lite``, ``philter_lite/philter.py``)
step by step; where Philter tags with NLTK's perceptron tagger (its data cannot be downloaded here), the caller
supplies Penn Treebank tags (spaCy's ``tag_``).
"""

from __future__ import annotations

import functools
import gzip
import re
import tomllib
from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np

from toolkit.errors import ToolkitError

#: Philter's word tokens: runs of ASCII letters and digits (``[^a-zA-Z0-9]`` separates them).
WORD = re.compile(r"[A-Za-z0-9]+")
_PUNCTUATION = re.compile(r"[^a-zA-Z0-9*]")

#: The toolkit label of a PHI word by the keyword prefix of the exclude filter that marked it.
KEYWORD_LABELS = {"addresses": "LOCATION", "organizations": "HOSPITAL", "dates": "DATE", "mrn_id": "ID",
                  "contact.url": "URL", "contact.email": "EMAIL", "contact": "PHONE", "age": "AGE",
                  "salutations": "NAME", "ucsf_regex": "LOCATION", "regex_context": "NAME", "firstnames": "NAME",
                  "lastnames": "NAME"}

_SUBSTITUTIONS = {  # philter-lite's _interpolate_regex, in its order (philter_lite/filters/__init__.py)
    "month_name": ("(J|j)an(uary)?|JAN(UARY)?|(F|f)eb(ruary)?|FEB(RUARY)?|(M|m)ar(ch)?|MAR(CH)?|(A|a)pr(il)?|APR(IL)?|Ma"
        "y|MAY|(J|j)un(e)?|JUN(E)?|(J|j)ul(y)?|JUL(Y)?|(A|a)ug(ust)?|AUG(UST)?|(S|s)ep(tember)?|SEP(TEMBER)?|"
        "SEPT|Sept|(O|o)ct(ober)?|OCT(OBER)?|(N|n)ov(ember)?|NOV(EMBER)?|(D|d)ec(ember)?|DEC(EMBER)?"),
    "day_numbering": ("1st|2nd|3rd|4th|5th|6th|7th|8th|9th|10th|11th|12th|13th|14th|15th|16th|17th|18th|19th|20th|21st|22nd"
        "|23rd|24th|25th|26th|27th|28th|29th|30th|31st|32nd|33rd|34th|35th|36th|37th|38th|39th|40th|41st|42nd"
        "|43rd|44th|45th|46th|47th|48th|49th|50th"),
    "day_name": ("(S|s)un(day)?(s)?|SUN(DAY)?(S)?|(M|m)on(day)?(s)?|MON(DAY)?(S)?|(T|t)ues(day)?(s)?|Tue|TUES(DAY)?(S)"
        "?|(W|w)ed(nesday)?(s)?|WED(NESDAY)?(S)?|(T|t)hurs(day)?(s)?|Thu|THURS(DAY)?(S)?|(F|f)ri(day)?(s)?|FR"
        "I(DAY)?(S)?|(S|s)at(urday)?(s)?|SAT(URDAY)?(S)?"),
    "seasons": ("(S|s)pring|SPRING|(F|f)all|FALL|(A|a)utumn|AUTUMN|(W|w)inter|WINTER|(S|s)ummer|SUMMER|(C|c)hristmas|"
        "(N|n)ew (Y|y)ear's (E|e)ve"),
    "address_indicator": ("alley|alley|ally|aly|anex|annex|annx|anx|apartment|apt|avenue|ave|aven|avenu|avenue|avn|avnue|bayou|"
        "bayou|beach|beach|bnd|bluff|bluf|bluff|bluffs|boulevard|boul|boulevard|blvd|boulv|box|branch|brnch|b"
        "ranch|bridge|brg|bridge|brook|brook|brooks|burg|burgs|byps|canyon|canyon|cnyn|cape|cpe|causeway|caus"
        "wa|cswy|cent|centr|centre|cnter|cntr|ctr|circle|circ|circl|circle|crcl|crcle|circles|cliff|cliff|cli"
        "ffs|cliffs|club|club|commons|corner|corner|corners|cors|crse|court|ct|courts|cts|cove|cv|coves|creek"
        "|crk|crescent|cres|crsent|crsnt|crest|crossing|crssng|xing|crossroad|crossroads|dale|dl|dam|divide|d"
        "ivide|dv|dvd|drive|driv|dr|drv|drives|east|estate|estate|estates|ests|expressway|expr|express|expres"
        "sway|expw|expy|extn|extnsn|fls|ferry|frry|fry|flat|flt|flats|flts|ford|frd|fords|forest|forests|frst"
        "|forge|forge|frg|forges|fork|frk|forks|frks|fort|frt|ft|freeway|freewy|frway|frwy|fwy|garden|gardn|g"
        "rden|grdn|gardens|gdns|grdns|gateway|gatewy|gatway|gtway|gtwy|glen|gln|glens|green|grn|greens|grove|"
        "grove|grv|groves|harbor|harbor|harbr|hbr|hrbor|harbors|haven|hvn|heights|hts|highway|highwy|hiway|hi"
        "wy|hway|hwy|hill|hl|hills|hls|hollow|hollow|hollows|holw|holws|iss|isle|isles|knoll|knol|knoll|knoll"
        "s|knolls|lake|lake|lakes|lakes|land|landing|lndg|lndng|lane|ln|loaf|loaf|lock|lock|locks|locks|ldge|"
        "lodg|lodge|loop|loops|mall|manor|manor|manors|mnrs|meadow|meadows|mdws|meadows|medows|mews|mill|mill"
        "s|mission|mssn|motorway|north|orchard|orchard|orchrd|oval|ovl|overpass|park|prk|parks|parkway|parkwy"
        "|pkway|pkwy|pky|parkways|pkwys|pass|passage|pike|pikes|pine|pines|pnes|place|plain|pln|plains|plns|p"
        "laza|plz|plza|port|prt|ports|prts|prairie|prairie|prr|ramp|ranch|ranches|rnch|rnchs|rapids|rpds|rst|"
        "ridge|rdge|ridge|ridges|ridges|river|river|rvr|rivr|road|road|rd|roads|rds|route|row|run|shoal|shoal"
        "|shoals|shoals|shore|shore|shr|shores|shores|shrs|skyway|south|spring|spng|spring|sprng|springs|spng"
        "s|springs|sprngs|spur|spurs|square|sqr|sqre|squ|square|squares|squares|station|station|statn|stn|str"
        "avenue|strav|straven|stravenue|stravn|strvn|strvnue|stream|streme|strm|street|strt|st|str|streets|su"
        "ite|summit|sumit|sumitt|summit|terrace|terr|terrace|throughway|trce|track|tracks|trak|trk|trks|traff"
        "icway|trail|trails|trl|trls|trailer|trlr|trlrs|tunnel|tunl|tunls|tunnel|tunnels|tunnl|turnpike|turnp"
        "ike|turnpk|underpass|union|union|unions|valley|vally|vlly|vly|valleys|vlys|viaduct|viadct|viaduct|vi"
        "llage|villag|village|villg|villiage|vlg|villages|vlgs|ville|vl|vista|vist|vista|vst|vsta|way|way|way"
        "s|west|wls"),
    "state_name": ("(A|a)rizona|AZ|(V|v)irginia|VA|(M|m)innesota|MN|(A|a)laska|AK|(N|n)ew "
        "(Y|y)ork|NY|(T|t)exas|TX|(V|v)ermont|VT|(U|u)tah|UT|(N|n)ew (J|j)ersey|NJ|(N|n)orth "
        "(D|d)akota|ND|(S|s)outh (D|d)akota|SD|(M|m)issouri|MO|(W|w)ashington "
        "(D|d).(C|c).|(G|g)eorgia|GA|(M|m)assachusetts|MA|(P|p)uerto "
        "(R|r)ico|(M|m)ichigan|MI|(I|i)owa|IA|(N|n)orth (C|c)arolina|NC|(S|s)outh "
        "(C|c)arolina|SC|(N|n)evada|NV|(C|c)olorado|CO|(O|o)hio|OH|(H|h)awaii|HI|(N|n)ebraska|NE|(N|n)ew (H|h"
        ")ampshire|NH|(W|w)ashington|WA|(T|t)ennessee|TN|(A|a)rkansas|AR|(L|l)ouisiana|LA|(M|m)ississippi|MS|"
        "(O|o)regon|OR|(A|a)labama|AL|(W|w)yoming|WY|(W|w)isconsin|WI|(O|o)klahoma|OK|(F|f)lorida|FL|(R|r)hod"
        "e (I|i)sland|RI|(I|i)ndiana|IN|(C|c)alifornia|CA|(K|k)ansas|KS|(D|d)elaware|DE|(M|m)aryland|(I|i)dah"
        "o|ID|(P|p)ennsylvania|PA|(K|k)entucky|KY|(C|c)onnecticut|CT|(M|m)ontana|MT|(I|i)llinois|IL|(M|m)aine"
        "|ME"),
    "full_numbering": ("First|Second|Third|Fourth|Fifth|Sixth|Seventh|Eighth|Ninth|Tenth|Eleventh|Twelfth|Thirteenth|Fourtee"
        "nth|Fifteenth|Sixteenth|Seventeenth|Eighteenth|Nineteenth|Twentieth"),
}
_SET_FILES = {"firstnames": "firstnames.txt.gz", "lastnames": "lastnames.txt.gz", "nonames": "whitelist.txt.gz"}


@dataclass(frozen=True)
class Rule:
    """One filter of the configuration: ``kind`` regex / set / pos_matcher / regex_context."""

    title: str
    kind: str
    exclude: bool
    label: str
    regex: re.Pattern[str] | None = None
    words: frozenset[str] = frozenset()
    pos: frozenset[str] = frozenset()
    context: str = ""
    context_filter: str = ""


def _data_text(name: str) -> bytes:
    try:
        return resources.files("toolkit").joinpath("data", "philter", name).read_bytes()
    except (FileNotFoundError, OSError) as exc:
        raise ToolkitError(f"the clinical detector's rule file toolkit/data/philter/{name} is missing (reinstall the "
                           f"toolkit: pip install -e .)") from exc


def _nested(db: dict, keyword: str) -> Any:
    for k in keyword.split("."):
        db = db[k]
    return db


def _interpolate(regex: str) -> str:
    for name, value in _SUBSTITUTIONS.items():
        regex = regex.replace(f'"""+{name}+r"""', value)
    return regex


def _label(keyword: str, phi_type: str) -> str:
    if phi_type and phi_type != "OTHER":
        return phi_type
    for prefix in sorted(KEYWORD_LABELS, key=len, reverse=True):
        if keyword == prefix or keyword.startswith(prefix + ".") or keyword.startswith(prefix):
            return KEYWORD_LABELS[prefix]
    return "PHI"


@functools.lru_cache(maxsize=2)
def _word_set(name: str) -> frozenset[str]:
    return frozenset(gzip.decompress(_data_text(_SET_FILES[name])).decode().split("\n")) - {""}


@functools.lru_cache(maxsize=1)
def load_rules() -> tuple[Rule, ...]:
    """The filters of ``philter_delta`` in order, their regexes compiled and word sets loaded."""
    config = tomllib.loads(_data_text("philter_delta.toml").decode())
    regex_db = tomllib.loads(_data_text("regex.toml").decode())
    context_db = tomllib.loads(_data_text("regex_context.toml").decode())
    rules = []
    for f in config["filters"]:
        kind, keyword = f["type"], f.get("keyword", "")
        common = {"title": f["title"], "kind": kind, "exclude": bool(f["exclude"]),
                  "label": _label(keyword, f.get("phi_type", ""))}
        if kind == "regex":
            rules.append(Rule(**common, regex=re.compile(_interpolate(_nested(regex_db, keyword)))))
        elif kind == "regex_context":
            rules.append(Rule(**common, regex=re.compile(_nested(context_db, keyword)), context=f["context"],
                              context_filter=f["context_filter"]))
        elif kind == "set":
            rules.append(Rule(**common, words=_word_set(keyword), pos=frozenset(f.get("pos", ()))))
        elif kind == "pos_matcher":
            rules.append(Rule(**common, pos=frozenset(f.get("pos", ()))))
        else:
            raise ToolkitError(f"toolkit/data/philter/philter_delta.toml: filter {f['title']!r} has the unknown "
                               f"type {kind!r}")
    return tuple(rules)


def _touches(mask: np.ndarray, start: int, end: int) -> bool:
    """Philter's ``does_overlap``: a marked character in ``[start - 1, end]`` (closed intervals that meet)."""
    return bool(mask[max(start - 1, 0):end + 1].any())


class PhilterRules:
    """Philter's filters applied to one text (see the module docstring).

    ``words``: the text's Philter tokens as ``(start, end)``; ``tags``: one Penn Treebank tag per token.
    """

    def __init__(self, rules: tuple[Rule, ...] | None = None):
        self.rules = load_rules() if rules is None else rules

    def run(self, text: str, words: list[tuple[int, int]], tags: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """``(safe, phi_label)``: per character, whether a filter marked it safe, and the index + 1 in
        :attr:`labels` of the exclude filter that marked it PHI (0: none)."""
        n = len(text)
        include = np.zeros(n + 1, dtype=bool)
        exclude = np.zeros(n + 1, dtype=bool)
        label = np.zeros(n + 1, dtype=np.int16)
        self.labels = sorted({r.label for r in self.rules} | {"PHI"})
        index = {lab: i + 1 for i, lab in enumerate(self.labels)}
        by_title: dict[str, list[tuple[int, int]]] = {}
        lower = [text[s:e].lower() for s, e in words]
        for rule in self.rules:
            if rule.kind == "regex":
                hits = [m.span() for m in rule.regex.finditer(text) if m.end() > m.start()]
            elif rule.kind == "set":
                hits = [w for w, low, tag in zip(words, lower, tags)
                        if low in rule.words and (not rule.pos or tag in rule.pos)]
            elif rule.kind == "pos_matcher":
                hits = [w for w, tag in zip(words, tags) if tag in rule.pos]
            else:
                hits = self._context_hits(text, rule, include, by_title)
                for s, e in hits:
                    if rule.exclude:
                        exclude[s:e], include[s:e], label[s:e] = True, False, index[rule.label]
                    else:
                        include[s:e], exclude[s:e] = True, False
                by_title[rule.title] = hits
                continue
            by_title[rule.title] = hits
            for s, e in hits:
                if rule.exclude and not _touches(include, s, e):
                    exclude[s:e] = True
                    fresh = label[s:e] == 0
                    label[s:e][fresh] = index[rule.label]
                elif not rule.exclude and not _touches(exclude, s, e):
                    include[s:e] = True
        return include[:n], label[:n]

    @staticmethod
    def _context_hits(text: str, rule: Rule, include: np.ndarray,
                      by_title: dict[str, list[tuple[int, int]]]) -> list[tuple[int, int]]:
        """Words of the matches whose neighbour is PHI: with ``context_filter == "all"``, a run of characters
        neither safe nor punctuation (Philter's complement of the safe map); else a hit of the named filter."""
        if rule.context_filter == "all":
            phi = ~include[:len(text)] & np.array([not _PUNCTUATION.match(c) for c in text], dtype=bool)
            edges = np.flatnonzero(np.diff(np.concatenate(([0], phi.astype(np.int8), [0]))))
            starts, ends = set(edges[0::2].tolist()), set(edges[1::2].tolist())
        else:
            found = by_title.get(rule.context_filter, [])
            starts, ends = {s for s, _ in found}, {e for _, e in found}
        out = []
        for m in rule.regex.finditer(text):
            left, right = m.start() in ends, m.end() in starts
            ok = {"left": left, "right": right, "left_or_right": left or right,
                  "left_and_right": left and right}.get(rule.context, False)
            if ok:
                out.extend((m.start() + w.start(), m.start() + w.end()) for w in WORD.finditer(m.group()))
        return out

    def phi_spans(self, text: str, words: list[tuple[int, int]], tags: list[str]) -> list[tuple[int, int, str]]:
        """Philter's output as word spans ``(start, end, label)``: every word not marked safe (the catch-all),
        labelled by the exclude filter that marked its first character (``PHI`` for the catch-all)."""
        include, label = self.run(text, words, tags)
        out = []
        for s, e in words:
            if not include[s:e].all():
                lab = int(label[s:e].max())
                out.append((s, e, self.labels[lab - 1] if lab else "PHI"))
        return out


def words_of(text: str) -> list[tuple[int, int]]:
    """Philter's word tokens of ``text`` as ``(start, end)``."""
    return [m.span() for m in WORD.finditer(text)]


__all__ = ["KEYWORD_LABELS", "PhilterRules", "Rule", "WORD", "load_rules", "words_of"]
