"""Exact, bounded-time answer normalisation: the fast path of answer equivalence.

Most answers in GSM8K/MATH/AIME are numbers, short tuples or words. They are decided here, in the
server process, with exact rational arithmetic (``fractions.Fraction``) and plain string
handling — no sympy, no ``eval``. Only what this module cannot decide (``None``) goes to
math-verify in the worker pool (``verify.py``).

Rules worth knowing (they are the service's documented semantics):

* numbers compare exactly: ``0.5 == 1/2 == \\frac{1}{2}``, ``0.\\overline{3} == 1/3``, but
  ``0.33 != 1/3`` and ``0.333333 != 1/3`` (a rounded decimal of a non-terminating value);
* thousands separators (``1,000``, ``1\\,000``, ``1{,}000``), ``$``/``\\$``, trailing units
  (``5 cm``, ``5\\text{ apples}``, ``12 km/h``), degrees and a trailing period are ignored;
* ``50\\%`` equals ``50`` and ``0.5`` (GSM8K drops the sign, other datasets use the fraction);
* ``1.5e3``, ``1.5\\times 10^{3}`` are scientific notation; ``2\\frac{1}{2}`` is a mixed number;
* ``(1,2)`` and ``[1,2)`` compare element-wise and bracket-wise; ``\\{1,2\\}`` and bare lists
  ``1, 2`` compare as multisets; words compare case-insensitively (``\\text{(C)}`` == ``c``).
"""

from __future__ import annotations

import functools
import re

from reward_server import notation
from reward_server.extract import unwrap_math
from reward_server.numbers import base_equal, numbers_equal, parse_number
from reward_server.relations import split_top
from reward_server.units import percent_words

_MAX_DEPTH = 4  # recursion depth of nested structures decided here

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
_NUMBER_IN_TEXT = re.compile(r"\\(?:text|mbox|textrm|mathrm)\{\s*(-?\d[\d,.]*(?:\s+[A-Za-z ]+)?)\}")
_EMPTY_TEXT = re.compile(r"\\(?:text|mbox|mathrm)\{\s*\}")


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
    r"(?:(?<=[\d)])|(?<=\\pi))\s*\((?!\s*[,)]|\s*(?:\\[a-z]+\{)?\s*\\?[bp]?mod\b)"
)  # never "3 (\text{mod } 7)"
# A digit that is a function's exponent or base applies the function to the bracket after it:
# "\tan^2(x)" is (tan x)^2 and "\log_2(8)" is 3, never products.
_FUNCTION_INDEX = re.compile(
    r"\\(?:sin|cos|tan|cot|sec|csc|sinh|cosh|tanh|arcsin|arccos|arctan|log|ln|exp)\s*"
    r"(?:\^|_)\s*\{?\s*-?\d+\s*\}?\s*$"
)


def _times_bracket(m: re.Match[str]) -> str:
    before = m.string[max(0, m.start() - 40) : m.start()]
    return m.group() if _FUNCTION_INDEX.search(before) else "\\cdot("


_EMPTY_SET = re.compile(r"\\(?:varnothing|emptyset)(?![A-Za-z])|\\\{\s*\\\}")


# canonical() is pure and runs several times per check (the answer, the reference, then each
# side or item again in the exact rules); a group's G completions repeat the same strings.
@functools.lru_cache(maxsize=16384)
def canonical(text: str) -> str:
    """A canonical spelling of an answer: wrappers, spacing, size commands and spelling variants
    removed, equivalent notations rewritten to one (``notation.py``). Used for the cache key and
    as input of every comparison."""
    s = notation.plain_text(text)
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
    s = notation.trig_degrees(s)
    s = _DEGREES.sub("", _DEGREES_OF_NUMBER.sub(" degrees", s))
    s = _EMPTY_TEXT.sub("", s)
    s = percent_words(_NUMBER_IN_TEXT.sub(r"\1", s))
    s = _EMPTY_SET.sub(r"\\emptyset", s)
    s = s.replace("{,}", ",")
    s = _CURRENCY.sub(r"\g<sign>\g<number> dollars", s.strip())
    s = s.replace("\\$", "").replace("$", "")
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


# ---------------------------------------------------------------- structures and words


def _closes_at_end(s: str) -> bool:
    """The bracket opened at s[0] closes exactly at s[-1]."""
    depth = 0
    for i, ch in enumerate(s):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return i == len(s) - 1
    return False


def parse_structure(s: str) -> tuple[str, list[str]] | None:
    """(kind, items) for ``(a,b)``, ``[a,b)``…, ``\\{a,b\\}`` or a bare ``a, b`` list; else None.

    kind is the bracket pair (``()``, ``[)``, …), ``set`` or ``list``.
    """
    if s.startswith("\\{") and s.endswith("\\}") and _closes_at_end(s[1:]):
        return "set", split_top(s[2:-2], ",")
    if len(s) >= 2 and s[0] in "([" and s[-1] in ")]" and _closes_at_end(s):
        return s[0] + s[-1], split_top(s[1:-1], ",")
    items = split_top(s, ",")
    return ("list", items) if len(items) > 1 else None


_TEXT_CMDS = re.compile(r"\\(?:text|textbf|textit|textrm|mathrm|mathbf|mbox)\{([^{}]*)\}")
_WORDS = re.compile(r"[a-z]+(?:[ '\-][a-z]+)*")


def text_form(s: str) -> str | None:
    """Lower-cased words of a textual answer (``\\text{(C)}`` -> ``c``), or None if not text."""
    t = _TEXT_CMDS.sub(r"\1", s).strip().lower().rstrip(".").strip()
    m = re.fullmatch(r"\(([a-z])\)", t)
    if m:
        t = m.group(1)
    return t if _WORDS.fullmatch(t) else None


def _match_unordered(xs: list[str], ys: list[str], depth: int) -> bool | None:
    """Multiset equality under fast_equivalent; None when some needed pair is undecided."""
    if len(xs) != len(ys):
        return False
    unused = list(ys)
    undecided = False
    for x in xs:
        for j, y in enumerate(unused):
            verdict = fast_equivalent(x, y, depth + 1)
            if verdict:
                del unused[j]
                break
            if verdict is None:
                undecided = True
        else:
            return None if undecided else False
    return True


def _compare_structures(
    a: tuple[str, list[str]], b: tuple[str, list[str]], depth: int
) -> bool | None:
    (ka, xs), (kb, ys) = a, b
    unordered = {"set", "list"}
    if ka in unordered and kb in unordered:
        return _match_unordered(xs, ys, depth)
    if ka in unordered or kb in unordered:
        return None  # "1, 2" against "(1, 2)": let math-verify decide
    if len(xs) != len(ys) or ka != kb:
        return False  # different arity, or (1,2) vs [1,2] (open vs closed interval)
    verdicts = [fast_equivalent(x, y, depth + 1) for x, y in zip(xs, ys, strict=True)]
    if False in verdicts:
        return False
    return None if None in verdicts else True


_CHOICE = re.compile(r"\(?([A-Ea-e])\)?")


def choice_letters(s: str) -> frozenset[str] | None:
    """The multiple-choice letters of ``B, D``, ``\\text{(D), (B)}``, ``(B) and (D)`` or ``BD``
    (A–E, any order and wrapping), else None."""
    t = re.sub(r"\\text(?:bf|it|rm)?\{([^{}]*)\}", r"\1", s).strip()
    if re.fullmatch(r"[A-E]{2,5}", t):
        return frozenset(t) if len(set(t)) == len(t) else None
    tokens = [x for x in re.split(r"\s*(?:,|\band\b|\s)\s*", t) if x]
    letters = [m.group(1).upper() for x in tokens if (m := _CHOICE.fullmatch(x))]
    if not tokens or len(letters) != len(tokens) or len(set(letters)) != len(letters):
        return None
    return frozenset(letters)


def fast_equivalent(answer: str, reference: str, depth: int = 0) -> bool | None:
    """Decide equivalence without sympy when the answers are numbers, tuples, lists or words.

    Returns True/False when the decision is exact, None when math-verify must decide.
    """
    a, r = canonical(answer), canonical(reference)
    if not a or not r:
        return False
    if a == r:
        return True
    if depth > _MAX_DEPTH:
        return None
    na, nr = parse_number(a), parse_number(r)
    if na is not None and nr is not None:
        return numbers_equal(na, nr)
    based = base_equal(a, r)
    if based is not None:
        return based
    ca, cr = choice_letters(a), choice_letters(r)
    if ca is not None and cr is not None and (len(ca) > 1 or len(cr) > 1):
        return ca == cr

    sa, sr = parse_structure(a), parse_structure(r)
    # A one-item bracket is a parenthesised scalar: "(5)" or "(C)"; a one-item set is its item.
    if sa is not None and sa[0] in ("()", "set") and len(sa[1]) == 1:
        return fast_equivalent(sa[1][0], r, depth + 1)
    if sr is not None and sr[0] in ("()", "set") and len(sr[1]) == 1:
        return fast_equivalent(a, sr[1][0], depth + 1)
    if sa is not None and sr is not None:
        return _compare_structures(sa, sr, depth)
    if (sa is not None and nr is not None) or (sr is not None and na is not None):
        return False  # several values against one number

    ta, tr = text_form(a), text_form(r)
    if ta is not None and tr is not None:
        return ta == tr
    if (ta is not None and nr is not None) or (tr is not None and na is not None):
        return False  # words against a number ("five" was handled as a number)
    return None
