"""Units, in one place: the names of every unit and their one spelling (``hrs`` = ``hours`` =
``h``, ``sq cm`` = ``cm^2``), where a unit stands in an answer's tree, and when two differ.

A unit is part of the value (``5 cm`` is not ``5 m``; ``18 cents`` is not ``\\$18``), but a bare
number is read in the reference's unit. ``split_unit`` takes it off a value's tree;
``units_differ`` is the one rule that compares them.
"""

from __future__ import annotations

import re

from reward_server.checker import tree as t
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
# changes the value ("9 squared"; "2 dozen eggs" is read as 24 by ``values``).
_MATH_NAMES = MATH_WORDS - UNIT_NAMES.keys()
_NEVER_UNITS = _MATH_NAMES | MULTIPLIERS - UNIT_NAMES.keys()

# The words that mean percent after a number: the unit "%".
PERCENT_WORDS = frozenset({"percent", "per cent", "pct", "percentage"})
# Words that belong to a unit phrase after a value ("24 square units", "5 percent").
UNIT_WORDS = (
    UNIT_NAMES.keys() | PERCENT_WORDS | frozenset({"square", "sq", "cubic", "units", "unit"})
)
# Short names that are letters of an expression after a number ("5 m", "5 s" are products),
# units only in a text command ("5\\text{ m}").
_LETTER_NAMES = frozenset({"in", "s", "h", "m", "l"})
_UNIT_TEXT = re.compile(r"[A-Za-z][A-Za-z .~]*(?:/[A-Za-z]+)?")


def _unit_key(phrase: str, power: str | None) -> str:
    """One spelling per unit: ``\\text{ sq cm}`` = ``cm^2``, ``hrs`` = ``hours`` = ``h``."""
    tokens = [w for w in re.split(r"[\s.~]+", phrase.lower()) if w]
    if tokens[:1] in (["sq"], ["square"]):
        tokens, power = tokens[1:], "2"
    elif tokens[:1] == ["cubic"]:
        tokens, power = tokens[1:], "3"
    name = " ".join(tokens)
    if name in PERCENT_WORDS:
        return "%"
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


def _unit_part(node: t.Node) -> tuple[str, str | None, bool] | None:
    """(words, power, in a text command) of a factor that may be part of a unit: a word, a text
    command of letters, either to the power 2 or 3, a word in brackets (``(dollars)``)."""
    power = None
    if isinstance(node, t.Power) and isinstance(node.exponent, t.Num):
        if node.exponent.text not in ("2", "3"):
            return None
        node, power = node.base, node.exponent.text
    if power is None and _word_in_brackets(node):
        node = node.items[0]  # type: ignore[union-attr]
    if isinstance(node, t.Word) and not node.number:
        return node.text, power, False
    if isinstance(node, t.Name) and len(node.text) == 1:  # "5 g": a unit only if named so
        return node.text, power, False
    if isinstance(node, t.Text):
        content = node.content.strip(" ~")
        if _UNIT_TEXT.fullmatch(content):
            return content, power, True
    return None


def _word_in_brackets(node: t.Node) -> bool:
    """``(dollars)``: one word between round brackets."""
    return (
        isinstance(node, t.Bracket)
        and (node.opening, node.closing) == ("(", ")")
        and len(node.items) == 1
        and isinstance(node.items[0], t.Word | t.Text)
    )


def _per_unit(node: t.Node) -> bool:
    """What may follow "/" in a unit: a known name or a short one ("km/h", "apples/day")."""
    part = _unit_part(node)
    return part is not None and (part[0].lower() in UNIT_NAMES or len(part[0]) <= 3)


def _unit_word(node: t.Node) -> bool:
    """A factor that may end a unit phrase: a unit part, none of whose words changes the value
    ("2 dozen eggs": eggs is the unit of 2 dozen)."""
    part = _unit_part(node)
    return part is not None and not any(w.lower() in _NEVER_UNITS for w in part[0].split())


def split_unit(node: t.Node) -> tuple[t.Node, str | None]:
    """(value, unit key) of a value's tree: ``3\\sqrt{2} meters`` is (``3\\sqrt{2}``, ``m``),
    ``\\$18`` (18, ``dollar``), ``30^\\circ`` (30, ``deg``), ``25\\%`` and ``25 percent``
    (the percent's tree, ``%``).

    Words after the value are a unit when written in a text command, glued to a number and a
    known unit (``7days``), or after spacing with three letters or more or a known name
    (``5 apples``, ``5 cm``); never a name of mathematics, a word that changes the value
    (``9 squared``, ``5 thousand``) or a single letter outside text (``5 x``, ``5 m``)."""
    if isinstance(node, t.Neg):
        value, unit = split_unit(node.operand)
        return (t.Neg(value, span=node.span) if unit else node), unit
    if isinstance(node, t.Currency):
        return node.operand, "dollar"
    if isinstance(node, t.Degrees):
        return node.operand, "deg"
    if isinstance(node, t.Postfix) and node.marks == ("%",):
        return node, "%"
    if not isinstance(node, t.Product):
        return node, None
    factors, joins = node.factors, node.joins
    start = len(factors)
    while start > 1 and _unit_word(factors[start - 1]):
        join = joins[start - 2]
        if join == "/" and not _per_unit(factors[start - 1]):
            break
        if join not in ("", " ", "/"):
            break
        start -= 1
    while start < len(factors) and joins[start - 1] == "/":
        start += 1  # a unit starts with a name, never with "/"
    if start == len(factors) or all(
        _unit_part(f) or isinstance(f, t.Name) for f in factors[:start]
    ):
        return node, None  # no unit, or words alone ("the percent"): no value to carry one
    parts = [_unit_part(f) for f in factors[start:]]
    words = [w for part in parts if part for w in part[0].replace("~", " ").split()]
    per = [joins[i - 1] == "/" for i in range(start, len(factors))]
    power = next((part[1] for part in parts if part and part[1]), None)
    in_text = any(part and part[2] for part in parts)
    lowered = [w.lower() for w in words]
    if not words or any(w in _NEVER_UNITS for w in lowered):
        return node, None
    glued = joins[start - 1] == ""
    if not in_text and not _bare_unit(lowered, glued, factors[start - 1]):
        return node, None
    value = factors[0] if start == 1 else t.Product(factors[:start], joins[: start - 1])
    phrase = "".join(
        ("/" if over else " ") + part[0] for part, over in zip(parts, per, strict=True) if part
    )
    return value, _unit_key(phrase.strip(" /"), power)


def _bare_unit(words: list[str], glued: bool, before: t.Node) -> bool:
    """Whether words after a value, outside any text command, are a unit (``split_unit``)."""
    if glued:
        glued = words[0] in GLUED_UNITS or words[0] in PERCENT_WORDS
        return len(words) == 1 and glued and isinstance(before, t.Num)
    if len(words) == 1:
        word = words[0]
        if word in _LETTER_NAMES:
            return False
        return len(word) >= 3 or word in UNIT_NAMES or "/" in word
    return all(len(w) >= 2 for w in words)


def units_differ(unit: str | None, ref_unit: str | None) -> bool:
    """Both have a unit (``split_unit``'s key) and they differ: ``5 cm`` against ``5 km``, ``18
    cents`` against ``\\$18``; a bare number is read in the reference's unit."""
    return unit is not None and ref_unit is not None and unit != ref_unit
