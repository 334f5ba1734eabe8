"""The canonical spelling of an answer (``canonical``): wrappers, spacing, size commands and
spelling variants removed, equivalent notations rewritten to one (``notation.py``), currency
and degree signs written as units, percent words as ``\\%``. Every reader starts from it, and
it is the verdict cache's key. Plain string handling in bounded time: no sympy, no ``eval``.
"""

from __future__ import annotations

import functools
import re

from reward_server.checker import notation
from reward_server.checker.extract import TEXT_COMMAND, unwrap_math
from reward_server.checker.units import percent_words

# "The final answer is", "Answer:", and the "####" of GSM8K or a markdown heading before it.
_ANSWER_PREFIX = re.compile(
    r"^\s*(?:#{1,6}\s*)?(?:(?:the\s+)?(?:final\s+)?answer\b(?:\s+is)?\s*[:=]?\s*)?",
    re.IGNORECASE,
)
_SIZE_CMDS = re.compile(r"\\(?:left|right|bigl|bigr|Bigl|Bigr|biggl|biggr|big|Big)(?![A-Za-z])")
_SPACING = re.compile(r"\\(?:displaystyle|textstyle|quad|qquad)(?![A-Za-z])|(?<!\\)\\[,;: ]|~")
# A negative thin space joins what it stands between: "1,\\!000" is the number 1,000.
_NEGATIVE_SPACE = re.compile(r"(?<!\\)\\!")
_DEGREES = re.compile(r"\^\s*\{?\s*\\circ\s*\}?|°|\\degrees?(?![A-Za-z])")
# The currency sign and the degree sign of a number are its unit: kept as a word, so that
# "18 cents" is not "\\$18" and "30 radians" is not "30^\\circ" (a bare 18 or 30 still is).
_DEGREES_OF_NUMBER = re.compile(r"(?<=\d)\s*(?:" + _DEGREES.pattern + r")")
_CURRENCY = re.compile(r"^(?P<sign>-?)\s*\\?\$\s*(?P<number>-?(?:\d[\d,]*(?:\.\d+)?|\.\d+))$")
# "\text{5 apples}": a number written inside a text command is still the number.
_NUMBER_IN_TEXT = re.compile(TEXT_COMMAND + r"\{\s*(-?\d[\d,.]*(?:\s+[A-Za-z ]+)?)\}")
_EMPTY_TEXT = re.compile(TEXT_COMMAND + r"\{\s*\}")


def _squeeze_spaces(s: str) -> str:
    """Collapse whitespace; keep a space only where it separates two words, two digit groups or
    a number from a word (``\\pi r``, ``1 000``, ``5 cm``) — elsewhere LaTeX ignores it."""
    s = re.sub(r"\s+", " ", s).strip()

    def keep(m: re.Match[str]) -> str:
        prev, nxt = s[m.start() - 1], s[m.end()]
        words = prev.isalpha() and nxt.isalpha()
        digits = prev.isdigit() and nxt.isdigit()
        # "5 apples" (a unit) is not "5apples"; nor is "3\\sqrt{2} meters" "3\\sqrt{2}meters"
        unit = (prev.isdigit() or prev == "}") and nxt.isalpha()
        # "45, 678" is a list of two numbers, "45,678" one number: the space is the difference.
        comma = prev == ","
        return " " if words or digits or unit or comma else ""

    return re.sub(r"(?<=.) (?=.)", keep, s)


# "\frac12", "\frac\pi2", "\frac1{x}": TeX's one-token arguments, braced for the parser.
_FRAC_ARG = r"(\\[A-Za-z]+|[0-9A-Za-z]|\{[^{}]*\})"
_BRACELESS_FRAC = re.compile(r"\\frac\s*" + _FRAC_ARG + r"\s*" + _FRAC_ARG)


def _braced_frac(m: re.Match[str]) -> str:
    a, b = (g[1:-1] if g.startswith("{") else g for g in m.groups())
    return f"\\frac{{{a}}}{{{b}}}"


# "2(5)" is 2·5. The LaTeX parser reads a number before a bracket as a sum (2(5) -> 7), so the
# product is written out: "2(5)", "(2)(5)" and "3(x+1)" become products.
_JUXTAPOSED = re.compile(
    r"(?:(?<=[\d)])|(?<=\\pi))\s*\((?!\s*[,)]|\s*(?:\\[a-z]+\{)?\s*\\?[bp]?mod(?![A-Za-z]))"
)  # never "3 (\text{mod } 7)", "3 (mod 7)" (also once squeezed to "(mod7)")
# A digit that is a function's exponent or base applies the function to the bracket after it:
# "\tan^2(x)" is (tan x)^2 and "\log_2(8)" is 3, never products.
_FUNCTION_INDEX = re.compile(
    r"\\(?:sin|cos|tan|cot|sec|csc|sinh|cosh|tanh|arcsin|arccos|arctan|log|ln|exp)\s*"
    r"(?:\^|_)\s*\{?\s*-?\d+\s*\}?\s*$"
)


# A part label before a bracket labels it: "(a)(1,2), (b)5" (``notation.labelled_parts``).
_PART_LABEL_BEFORE = re.compile(r"(?:^|, )" + notation.CANONICAL_PART_LABEL + "$")


def _times_bracket(m: re.Match[str]) -> str:
    before = m.string[max(0, m.start() - 40) : m.start()]
    if _FUNCTION_INDEX.search(before) or _PART_LABEL_BEFORE.search(m.string[: m.start()]):
        return m.group()
    return "\\cdot("


_EMPTY_SET = re.compile(r"\\(?:varnothing|emptyset)(?![A-Za-z])|\\\{\s*\\\}")


# canonical() is pure and runs several times per check (the answer, the reference, then each
# side or item again in the exact rules); a group's G completions repeat the same strings.
@functools.lru_cache(maxsize=16384)
def canonical(text: str) -> str:
    """A canonical spelling of an answer: wrappers, spacing, size commands and spelling variants
    removed, equivalent notations rewritten to one (``notation.py``). Used for the cache key and
    as input of every comparison."""
    # Runs of whitespace are one space from the start: LaTeX reads them so, and the rewrites'
    # patterns that allow spacing in several places then never meet a long run (a part label's
    # pattern took 4.7 s on "sin", 990 spaces and "x", below the cost guard's length cap).
    s = " ".join(notation.plain_text(text).split())
    s = _ANSWER_PREFIX.sub("", s)
    s = unwrap_math(s)
    s = _ANSWER_PREFIX.sub("", s)
    s = re.sub(r"\\[dt]frac(?![A-Za-z])", r"\\frac", s)
    if "\\frac" in s:
        s = _BRACELESS_FRAC.sub(_braced_frac, s)
    s = re.sub(r"\\(?:left|right)\s*\.", "", s)
    s = _SIZE_CMDS.sub("", s)
    s = _SPACING.sub(" ", _NEGATIVE_SPACE.sub("", s))
    s = s.replace("\\langle", "(").replace("\\rangle", ")")  # a vector <2, -1> is a tuple
    s = notation.environments(s)
    s = notation.plain_math(s)
    s = notation.trig_degrees(s)
    s = _DEGREES.sub("", _DEGREES_OF_NUMBER.sub(" degrees", s))
    s = _EMPTY_TEXT.sub("", s)
    s = _NUMBER_IN_TEXT.sub(r"\1", s)
    s = _EMPTY_SET.sub(r"\\emptyset", s)
    s = s.replace("{,}", ",")
    s = _CURRENCY.sub(r"\g<sign>\g<number> dollars", s.strip())
    # Percent words after the math delimiters are gone: "$28$ percent" is "28\\%" too.
    s = percent_words(s.replace("\\$", "").replace("$", ""))
    s = notation.labelled_parts(s)  # before "3 (b)" could read as a product
    s = re.sub(r"(?<!\\)%", r"\\%", s)
    s = _squeeze_spaces(s)
    s = _JUXTAPOSED.sub(_times_bracket, s)
    while s.endswith("."):
        s = s[:-1].rstrip()  # "18." ends a sentence; no answer ends in a decimal point
    s = notation.joined_values(notation.inequality_union(s))
    s = notation.inequality_interval(s)
    s = notation.plus_minus(s)
    s = notation.backwards_equation(s)
    return notation.assignment_groups(s)
