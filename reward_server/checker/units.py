"""Units, in one place: the names of every unit and their one spelling (``hrs`` = ``hours`` =
``h``, ``sq cm`` = ``cm^2``), where a unit stands in an answer, and when two differ.

A unit is part of the value (``5 cm`` is not ``5 m``; ``18 cents`` is not ``\\$18``), but a bare
number is read in the reference's unit. The readers split it off here (``split_unit``,
``is_unit_suffix``); ``units_differ`` is the one rule that compares them.
"""

from __future__ import annotations

import re

from reward_server.checker.extract import TEXT_COMMAND
from reward_server.checker.lexicon import MATH_WORDS, MULTIPLIERS

_UNIT_SYNONYMS = {
    "m": "m meter meters metre metres",
    "cm": "cm centimeter centimeters centimetre centimetres",
    "mm": "mm millimeter millimeters",
    "km": "km kilometer kilometers kilometre kilometres",
    "in": "in inch inches",
    "ft": "ft foot feet",
    "yd": "yd yard yards",
    "mi": "mi mile miles",
    "s": "s sec secs second seconds",
    "min": "min mins minute minutes",
    "h": "h hr hrs hour hours",
    "day": "day days",
    "week": "week weeks wk wks",
    "month": "month months",
    "year": "year years yr yrs",
    "g": "g gram grams",
    "kg": "kg kilogram kilograms kilo kilos",
    "mg": "mg milligram milligrams",
    "lb": "lb lbs pound pounds",
    "oz": "oz ounce ounces",
    "l": "l liter liters litre litres",
    "ml": "ml milliliter milliliters millilitre millilitres",
    "dollar": "dollar dollars usd buck bucks",
    "cent": "cent cents",
    "km/h": "km/h kph km/hr kmh",
    "mph": "mph mi/h mi/hr",
    "m/s": "m/s",
    "deg": "deg degree degrees",
    "rad": "rad rads radian radians",
    "pp": "pp percentage_point percentage_points",  # "_": a space within a name
}
# "miles per hour" and "mi/h" are one unit: compound units are keyed by their parts, and the
# key of miles per hour is its usual name.
_COMPOUND_ALIASES = {"mi/h": "mph"}
UNIT_NAMES = {
    name.replace("_", " "): unit for unit, names in _UNIT_SYNONYMS.items() for name in names.split()
}
# Units that may be glued to a number ("7days", "5cm"); shorter names are variables ("5m").
GLUED_UNITS = frozenset(
    n for n in UNIT_NAMES if len(n) >= 2 and " " not in n and n not in ("in", "mi", "min")
)
# Names of functions and constants are never a unit after a value ("5 pi", "2 sin"); the
# units among them are ("5 sec", "30 deg"). Nor, at the end of an answer, is a word that
# changes the value ("9 squared"; "2 dozen eggs" is read as 24 by ``numbers.parse_number``).
_MATH_NAMES = MATH_WORDS - UNIT_NAMES.keys()
_NEVER_UNITS = _MATH_NAMES | MULTIPLIERS - UNIT_NAMES.keys()

_POWER = r"(?:\^\s*\{?\s*(?P<pow>[23])\s*\}?)?"
_TRAILING_TEXT_UNIT = re.compile(
    r"(?P<sep>\s*)" + TEXT_COMMAND + r"\{(?P<u>[^{}]*)\}" + _POWER + r"$"
)
_TRAILING_WORD = re.compile(r"(?P<sep>\s*)(?P<u>[A-Za-z]+(?:/[A-Za-z]+)?)" + _POWER + r"$")
_PER_PHRASE = re.compile(r"\s(?P<u>[A-Za-z]{2,} per [A-Za-z]{2,})$")
# The words that mean percent after a number; ``percent_words`` writes them as \\%.
PERCENT_WORDS = frozenset({"percent", "per cent", "pct", "percentage"})
# Words that belong to a unit phrase after a value ("24 square units", "5 percent").
UNIT_WORDS = (
    UNIT_NAMES.keys() | PERCENT_WORDS | frozenset({"square", "sq", "cubic", "units", "unit"})
)
_PERCENT = re.compile(r"\\%$")


def _unit_key(phrase: str, power: str | None) -> str:
    """One spelling per unit: ``\\text{ sq cm}`` = ``cm^2``, ``hrs`` = ``hours`` = ``h``."""
    tokens = [t for t in re.split(r"[\s.]+", phrase.lower()) if t]
    if tokens[:1] in (["sq"], ["square"]):
        tokens, power = tokens[1:], "2"
    elif tokens[:1] == ["cubic"]:
        tokens, power = tokens[1:], "3"
    name = " ".join(tokens)
    unit = UNIT_NAMES.get(name)
    if unit is None and ("/" in name or " per " in name):
        parts = re.split(r"\s*/\s*|\s+per\s+", name)
        keys = [_unit_key(part, None) for part in parts if part]
        unit = "/".join(keys)
        unit = _COMPOUND_ALIASES.get(unit, unit)
    if unit is None and re.search(r"(?:s|x|z|ch|sh)es$", name):
        unit = name[:-2]  # "boxes", "glasses"
    if unit is None:
        unit = name[:-1] if len(name) > 3 and name.endswith("s") else name
    return unit + (f"^{power}" if power else "")


def split_unit(s: str) -> tuple[str, str | None]:
    """(value, unit key) of a canonical answer: ``3\\sqrt{2} meters`` -> (``3\\sqrt{2}``, ``m``).

    A trailing word is a unit when written in a text command, glued to a digit and a known unit
    name (``7days``), or after a space with 3+ letters or a known name — never a math word or a
    single letter outside text (``5 x``, ``5m`` are expressions). A percent is the unit ``%``
    but stays in the value, which the exact rules read with its sign.
    """
    if _PERCENT.search(s):
        return s, "%"
    m = _TRAILING_TEXT_UNIT.search(s)
    if m is not None:
        phrase = m.group("u").strip()
        value = s[: m.start()].strip()
        multiplier = any(w.lower() in _NEVER_UNITS for w in phrase.split())
        if re.fullmatch(r"[A-Za-z][A-Za-z .]*(?:/[A-Za-z]+)?", phrase) and value and not multiplier:
            return value, _unit_key(phrase, m.group("pow"))
        return s, None
    m = _PER_PHRASE.search(s)
    if m is not None and s[: m.start()].strip():
        return s[: m.start()].strip(), _unit_key(m.group("u"), None)
    m = _TRAILING_WORD.search(s)
    if m is None:
        return s, None
    word, value = m.group("u"), s[: m.start()].strip()
    if not value or value.endswith("\\") or re.search(r"\\(?!pi$)[A-Za-z]*$", value):
        return s, None  # "\sqrt x" has no unit; "10\pi cm" has one
    lw = word.lower()
    glued = not m.group("sep")
    if lw in _NEVER_UNITS or (glued and not value[-1].isdigit()):
        return s, None
    if glued and lw not in GLUED_UNITS:
        return s, None
    if (not glued and len(lw) < 3 and lw not in UNIT_NAMES) or lw in ("in", "s", "h", "m", "l"):
        return s, None
    # "6 sq units", "5 square feet", "5 percentage points": one more word of the phrase
    before = re.search(r"(?:^|\s)(sq|square|cubic|percentage)$", value, re.IGNORECASE)
    if before is not None:
        return value[: before.start()].strip(), _unit_key(f"{before.group(1)} {lw}", None)
    return value, _unit_key(lw, m.group("pow"))


_UNIT_TOKEN = re.compile(
    r"(?P<space> ?)(?:" + TEXT_COMMAND + r"\{(?P<text>[^{}0-9\\]*)\}"
    r"|(?P<word>[A-Za-z]+)\.?)(?:\^\{?[23]\}?)?"
    r"| ?(?P<per>/)"
)
# Unit names allowed right after a number ("5cm"). Other words are units only after a space
# and with 3+ letters ("5 apples"), so "5x", "5 x" and "5ab" stay expressions.
_SHORT_UNITS_TEXT = (
    "cm mm km kg mg ms hr hrs min mins sec secs ft yd mi lb lbs oz ml sq mph kph usd eur gb mb "
    "kb am pm"
)
_SHORT_UNITS = frozenset(_SHORT_UNITS_TEXT.split())


def is_unit_suffix(rest: str) -> bool:
    """``rest`` (what follows a number) is only unit words such as ``cm``, ``\\text{ apples}``,
    ``km/h``, ``cm^2`` — never a variable (``5x``) or a math word (``5 pi``)."""
    pos, words, after_per = 0, 0, False
    while pos < len(rest):
        m = _UNIT_TOKEN.match(rest, pos)
        if not m or m.end() == pos:
            return False
        pos = m.end()
        if m.group("per"):
            after_per = True
            continue
        text, word = m.group("text"), m.group("word")
        if text is not None and set(text.lower().split()) & _MATH_NAMES:
            return False  # "5\\text{ pi}" is 5π, not 5
        if word is not None:
            lw = word.lower()
            known = lw in _SHORT_UNITS or (after_per and len(lw) <= 3)  # km/h, m/s
            spaced_word = bool(m.group("space")) and len(lw) >= 3
            if lw in _MATH_NAMES or not (known or spaced_word):
                return False
        words += 1
        after_per = False
    return words > 0


# "25 pct", "25 per cent", "25 percentage", "25\\text{ percent}": one spelling, "25\\%". Never
# "5 percentage points", which is another unit.
_WORDS = "|".join(sorted((w.replace(" ", r"\s*") for w in PERCENT_WORDS), key=len, reverse=True))
_PERCENT_WORD = re.compile(
    rf"(?<=\d)\s*(?:\\text\{{\s*(?:{_WORDS})\.?\s*\}}|(?:{_WORDS})(?![A-Za-z])\.?)(?!\s*points?\b)"
)


def percent_words(s: str) -> str:
    return _PERCENT_WORD.sub(r"\\%", s) if re.search("p(?:er|ct)", s) else s


def units_differ(unit: str | None, ref_unit: str | None) -> bool:
    """Both have a unit (``split_unit``'s key) and they differ: ``5 cm`` against ``5 km``, ``18
    cents`` against ``18 dollars`` (``normalize.canonical`` spells ``\\$18`` so); a bare number
    is read in the reference's unit."""
    return unit is not None and ref_unit is not None and unit != ref_unit
