"""The answer policy: an answer commits to one value (or to the one set or tuple that the
reference is), and the only text it may hold is wrapping, a unit, or an assignment.

A policy learns whatever the checker lets through. Words that hedge (``7 or more``), negate
(``9 is wrong``) or change the value (``5 thousand`` against 5, ``9 squared``), a unit other
than the reference's (``5 cm`` against ``5 m``) and an equation whose sides differ
(``13 = 12``) each earn 0 with a named reason, decided here in bounded time, before any
equivalence check. ``docs/reward-server.md`` states the policy; ``tests/reward_server/
exploit_corpus.py`` holds completions that try each class.
"""

from __future__ import annotations

import itertools
import re

from reward_server.protocol import Reason

_HEDGES_TEXT = (
    "more less fewer least most about approximately approx around roughly nearly almost either "
    "maybe perhaps probably possibly likely over under than between estimate estimated circa "
    "close some several"
)
# Words that qualify a value as less than the answer: "18 is too high", "only part of it", "a
# lower bound", "the subtotal". Wherever they stand, the value is not committed to.
_QUALIFIERS_TEXT = (
    "too partial partially part portion subtotal intermediate preliminary tentative provisional "
    "bound overestimate underestimate overestimated underestimated incomplete insufficient"
)
QUALIFIERS = frozenset(_QUALIFIERS_TEXT.split())
HEDGES = frozenset(_HEDGES_TEXT.split()) | QUALIFIERS
# Words that reject a value: "18 was rejected", "18 is mistaken". A negation in other words.
_REJECTIONS_TEXT = (
    "reject rejected rejects discarded excluded eliminated dismissed disqualified refuted "
    "disproved disproven invalidated mistaken erroneous inaccurate flawed impossible "
    "overcounted undercounted miscounted miscalculated"
)
_NEGATIONS_TEXT = (
    "not no wrong incorrect false isn isnt never none neither nor except but instead without "
    "untrue invalid"
)
NEGATIONS = frozenset(_NEGATIONS_TEXT.split()) | frozenset(_REJECTIONS_TEXT.split())
# Words that multiply or transform the value. The first five are read as numbers right after
# a number (``5 thousand`` is 5000, see ``normalize.parse_number``); anywhere else each one is
# a different value than the one written, so it is refused rather than dropped as a unit.
_MULTIPLIERS_TEXT = (
    "thousand thousands million millions billion billions hundred hundreds dozen dozens "
    "trillion squared cubed halves half quarters quarter tens pi times plus minus over i e "
    "factorial factorials reciprocal inverse doubled tripled quadrupled halved permille"
)
# Fraction words: "7 tenths" is 0.7, "3 fifths" 0.6. Every ordinal but "first" and "second"
# (which name a position or a unit of time) is also a denominator.
_ORDINALS_TEXT = (
    "third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth thirteenth fourteenth "
    "fifteenth sixteenth seventeenth eighteenth nineteenth twentieth thirtieth fortieth "
    "fiftieth sixtieth seventieth eightieth ninetieth hundredth thousandth millionth"
)
DENOMINATORS = frozenset(w + s for w in _ORDINALS_TEXT.split() for s in ("", "s"))
MULTIPLIERS = frozenset(_MULTIPLIERS_TEXT.split()) | DENOMINATORS
NUMERIC_MULTIPLIERS = {
    "thousand": 1000,
    "thousands": 1000,
    "million": 10**6,
    "millions": 10**6,
    "billion": 10**9,
    "billions": 10**9,
    "hundred": 100,
    "hundreds": 100,
    "dozen": 12,
    "dozens": 12,
}
_ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen"
)
NUMBER_WORDS = {w: i for i, w in enumerate(_ONES.split())} | {
    w: 10 * i
    for i, w in enumerate(
        ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"], 2
    )
}
_SCALES = {"thousand": 10**3, "million": 10**6, "billion": 10**9}


def number_word_value(text: str) -> int | None:
    """The integer a number written in words names: ``seven``, ``twenty-five``, ``one hundred
    and twelve``, ``three thousand``; None for anything else."""
    tokens = [t for t in re.split(r"[\s\-]+", text.lower().strip()) if t and t != "and"]
    if not tokens or ("and" in text.lower().split() and len(tokens) < 2):
        return None
    total = current = 0
    last = None  # the kind of the previous word: ones, tens, hundred, scale
    for t in tokens:
        if t in NUMBER_WORDS and NUMBER_WORDS[t] < 20:
            if last == "ones":
                return None
            current += NUMBER_WORDS[t]
            last = "ones"
        elif t in NUMBER_WORDS:
            if last in ("ones", "tens"):
                return None
            current += NUMBER_WORDS[t]
            last = "tens"
        elif t == "hundred" and last == "ones" and current < 10:
            current *= 100
            last = "hundred"
        elif t in _SCALES and last in ("ones", "tens", "hundred"):
            total += current * _SCALES[t]
            current, last = 0, "scale"
        else:
            return None
    return total + current


# Prose verbs and fillers: a sentence is not an answer ("12 is the total").
_PROSE_TEXT = (
    "is are was were be the answer final equals equal so then thus hence therefore which that "
    "this it we get gives result solution value because since if"
)
PROSE = frozenset(_PROSE_TEXT.split())

# A past participle written after the value ("6 cubed", "4 doubled", "9 reduced") names an
# operation on it, never a unit; "hundred" is the one number word of that shape.
_OPERATION_AFTER_VALUE = re.compile(
    r"(?:\d|\})\s*(?:\\text\{\s*)?(?!hundred)[A-Za-z]{3,}ed\s*\}?\s*$", re.IGNORECASE
)
_TEXT_ARG = re.compile(
    r"\\(?:text|textbf|textit|textrm|textnormal|textsf|mathrm|mathbf|mathit|mbox|operatorname)"
    r"\{([^{}]*)\}"
)
_BARE_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{2,}")


def words(s: str) -> list[str]:
    """Lower-cased words of a canonical answer: every word inside text commands (single letters
    too: ``\\mathrm{i}``) and every bare run of 2+ letters that is not a LaTeX command name."""
    found = [w.lower() for arg in _TEXT_ARG.findall(s) for w in re.findall(r"[A-Za-z]+", arg)]
    outside = _TEXT_ARG.sub(" ", s)
    found += [w.lower() for w in _BARE_WORD.findall(outside)]
    return found


def word_problem(answer: str, numeric: bool) -> Reason | None:
    """Why the words of ``answer`` make it no answer (``hedged_answer``, ``negated_answer``,
    ``multiplier_word``, ``prose_in_answer``), or None.

    ``numeric``: the answer reads as one number, so numeric multiplier words are part of it.
    """
    found = set(words(answer))
    if found & NEGATIONS:  # checked first: "9 is incorrect" is a negation, not just prose
        return Reason.NEGATED_ANSWER
    if found & HEDGES:
        return Reason.HEDGED_ANSWER
    if any(ch.isdigit() for ch in answer) and found & NUMBER_WORDS.keys():
        return Reason.SEVERAL_CANDIDATES  # "3 (or four)"
    multipliers = found & MULTIPLIERS
    if multipliers and not (numeric and multipliers <= NUMERIC_MULTIPLIERS.keys()):
        return Reason.MULTIPLIER_WORD
    if _OPERATION_AFTER_VALUE.search(answer):
        return Reason.MULTIPLIER_WORD  # "4 doubled", "9 raised": an operation, not a unit
    if found & PROSE:
        return Reason.PROSE_IN_ANSWER
    return None


# ------------------------------------------------------------------ units

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
    "pp": "pp percentage point percentage points",
}
# "miles per hour" and "mi/h" are one unit: compound units are keyed by their parts, and the
# key of miles per hour is its usual name.
_COMPOUND_ALIASES = {"mi/h": "mph"}
UNIT_NAMES = {name: unit for unit, names in _UNIT_SYNONYMS.items() for name in names.split()}
# Units that may be glued to a number ("7days", "5cm"); shorter names are variables ("5m").
GLUED_UNITS = frozenset(n for n in UNIT_NAMES if len(n) >= 2 and n not in ("in", "mi", "min"))

_POWER = r"(?:\^\s*\{?\s*(?P<pow>[23])\s*\}?)?"
_TRAILING_TEXT_UNIT = re.compile(
    r"(?P<sep>\s*)\\(?:text|textbf|textit|textrm|textnormal|mathrm|mbox)\{(?P<u>[^{}]*)\}"
    + _POWER
    + r"$"
)
_TRAILING_WORD = re.compile(r"(?P<sep>\s*)(?P<u>[A-Za-z]+(?:/[A-Za-z]+)?)" + _POWER + r"$")
_PER_PHRASE = re.compile(r"\s(?P<u>[A-Za-z]{2,} per [A-Za-z]{2,})$")
# The words that mean percent after a number; ``notation.percent_words`` writes them as \\%.
PERCENT_WORDS = frozenset({"percent", "per cent", "pct", "percentage"})
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
        multiplier = any(w.lower() in MULTIPLIERS for w in phrase.split())
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
    if lw in MATH_WORDS or lw in MULTIPLIERS or (glued and not value[-1].isdigit()):
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


_MATH_WORDS_TEXT = (
    "pi sqrt sin cos tan cot sec csc log ln exp lim inf infty infinity mod and or arcsin arccos "
    "arctan sinh cosh tanh det deg frac cdot times"
)
MATH_WORDS = frozenset(_MATH_WORDS_TEXT.split())


# ------------------------------------------------------------------ equations

_GREEK = r"\\(?:alpha|beta|gamma|delta|epsilon|theta|lambda|mu|phi|varphi|psi|omega|rho|sigma|tau)"
# What may stand left of "=" in an assignment: x, x_1, f(x), \theta (never \pi or \sin).
VARIABLE = re.compile(rf"(?:[A-Za-z]|{_GREEK})(?:_\{{?\w+\}}?)?|[A-Za-z]\([A-Za-z]\)")


def split_top(s: str, sep: str) -> list[str]:
    """``s`` split on ``sep`` outside any bracket, each part stripped."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(s):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(s[start:i])
            start = i + 1
    parts.append(s[start:])
    return [p.strip() for p in parts]


def equation_sides(s: str) -> list[str] | None:
    """The sides of an equation with its leading variable dropped (``x = 12`` -> [``12``],
    ``20 - 8 = 12`` -> [``20 - 8``, ``12``]); None when ``s`` has no top-level ``=``, or is a
    list (``x=1, x=2``: its items are compared one by one)."""
    split = _split_equation(s)
    return None if split is None else split[1]


_COMMAND_OR_TEXT = re.compile(r"\\(?:text|mathrm|mbox|operatorname)\{[^{}]*\}|\\[A-Za-z]+")


def checked_steps(sides: list[str]) -> list[tuple[str, str]]:
    """The steps of a calculation that must hold: consecutive sides with no unknown in them.

    A side with an unknown is a formula (``P = 2l + 2w = 2(5) + 2(3) = 16``, ``-\\frac{b}{a} =
    5``): whether it holds depends on the question, which the grader does not see. Steps
    between numbers are checked (``20 - 7 = 12`` is false), and the last side is the value."""
    values = [split_unit(side)[0] for side in sides]  # "5 + 7 = 12 apples": the step is 5+7=12
    return [(a, b) for a, b in itertools.pairwise(values) if not (_unknown(a) or _unknown(b))]


def _unknown(side: str) -> bool:
    """A letter other than the constants e and i, outside commands and text."""
    return re.search(r"[A-Za-df-hj-z]", _COMMAND_OR_TEXT.sub(" ", side)) is not None


def equation_label(s: str) -> str | None:
    """The left side that ``equation_sides`` drops as the name of the quantity (``x``,
    ``f(x)``, ``\\cos x``, ``a + b``), or None."""
    split = _split_equation(s)
    return None if split is None else split[0]


def _split_equation(s: str) -> tuple[str | None, list[str]] | None:
    if "=" not in s or any(op in s for op in ("\\le", "\\ge", "<", ">", "\\ne")):
        return None
    sides = split_top(s, "=")
    if len(sides) == 1 or len(split_top(s, ",")) > 1:
        return None
    constant = sides[0] in ("e", "i")  # "e = 3" is a false equation, not an assignment
    if not constant and (VARIABLE.fullmatch(sides[0]) or _names_a_quantity(sides[0])):
        return sides[0], sides[1:]
    return None, sides


def same_quantity(label: str | None, other: str | None) -> bool:
    """Whether two left sides name the same quantity. Plain names are labels and interchange
    (``y = 2x+1`` answers ``f(x) = 2x+1``); a left side that is an expression is part of what
    the equation says, so ``\\cos x = \\frac12`` does not answer ``\\sin x = \\frac12``."""
    if label is None or other is None:
        return label is other
    if VARIABLE.fullmatch(label) and VARIABLE.fullmatch(other):
        return True

    def key(side: str) -> str:  # "\\sin(x)" and "\\sin x" are one spelling
        return re.sub(r"\s+", "", re.sub(r"\(([A-Za-z])\)", r" \1", side))

    return key(label) == key(other)


_FUNCTIONS = r"\\(?:sin|cos|tan|cot|sec|csc|log|ln|angle|triangle|measuredangle)(?![A-Za-z])"
# Decorations that turn letters into the name of a quantity: \overline{AB}, \vec{v}, \text{Area}.
_DECORATED = (
    r"\\(?:overline|overrightarrow|vec|hat|widehat|bar|tilde|mathbf|mathrm|text|operatorname)"
    r"\s*\{[A-Za-z ]*\}"
)


def _names_a_quantity(side: str) -> bool:
    """``x + y``, ``a_1 b_1``, ``\\sin x``, ``m\\angle A``, ``\\overline{AB}``: an expression of
    variables only (no digit, no constant such as ``\\pi``, ``e`` or ``i``) names the quantity
    asked for, so ``x + y = 5`` answers 5; ``2x = 14`` is an equation to solve, not its
    solution."""
    rest = re.sub(_DECORATED + "|" + _FUNCTIONS + "|" + _GREEK + r"|_\{?\w+\}?", " v ", side)
    if any(ch.isdigit() or ch == "\\" for ch in rest) or not re.search(r"[A-Za-z]", rest):
        return False
    letters = re.findall(r"[A-Za-z]+", rest)
    return all(w not in ("e", "i") for w in letters) and bool(
        re.fullmatch(r"[A-Za-z_{}^+\-*/() |]+", rest)
    )


# ------------------------------------------------------------------ congruences

_EQUIV = re.compile(r"\\equiv(?![A-Za-z])|\u2261")
# "\pmod{5}", "\pmod 5", "(\bmod 5)", "(\text{mod } 5)", "(mod 5)", "\mod 5" at the end.
_MODULUS = re.compile(
    r"\s*(?:\\pmod\s*\{?\s*(?P<a>[^{}()\s]+)\s*\}?"
    r"|\(\s*(?:\\(?:text|mathrm|operatorname)\s*\{\s*)?\\?[bp]?mod\s*\}?\s*(?P<b>[^(){}\s]+)\s*\)"
    r"|\\[bp]?mod\s*\{?\s*(?P<c>[^{}()\s]+)\s*\}?)\s*$"
)


def congruence(s: str) -> tuple[list[str], str | None] | None:
    """(sides, modulus) of ``17 \\equiv 2 \\pmod 5`` (``[17, 2]``, ``5``), with a leading name
    dropped as in an equation (``x \\equiv 2 \\pmod 5`` -> ``[2]``); None without ``\\equiv``.

    A congruence is not an equality: its last side answers only when every step holds modulo
    the modulus and that side is the least residue (``verify.decide``); without a modulus it
    is read as an equality, so ``13 \\equiv 12`` is a false equation like ``13 = 12``."""
    if not _EQUIV.search(s):
        return None
    m = _MODULUS.search(s)
    modulus = next((g for g in m.groups() if g), None) if m else None
    body = s[: m.start()] if m else s
    sides = [side.strip() for side in _EQUIV.split(body)]
    if len(sides) > 1 and (VARIABLE.fullmatch(sides[0]) or _names_a_quantity(sides[0])):
        sides = sides[1:]
    return sides, modulus
