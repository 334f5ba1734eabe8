"""Numbers, read exactly: digits (``-1,234.5``, ``1.5e3``, ``0.\\overline{3}``), fractions,
mixed numbers, percents, number words (``twenty-five``, ``5 thousand``), calculations with
numbers only (``16-3-4``) and numerals in a base (``1011_2``), as ``fractions.Fraction``.

No sympy and no ``eval``: a small recursive-descent parser over exact rationals, bounded by the
length of the text (the cost guard has bounded that already).
"""

from __future__ import annotations

import re
from fractions import Fraction

from reward_server.checker.lexicon import NUMBER_WORDS, NUMERIC_MULTIPLIERS, SCALES
from reward_server.checker.units import is_unit_suffix

# 10**1000 is still instant with Fraction; larger exponents are left to the (killable) pool.
_MAX_EXPONENT = 1000


def number_word_value(text: str) -> int | None:
    """The integer a number written in words names: ``seven``, ``twenty-five``, ``one hundred
    and twelve``, ``three thousand``; None for anything else."""
    tokens = [t for t in re.split(r"[\s\-]+", text.lower().strip()) if t and t != "and"]
    if not tokens or ("and" in text.lower().split() and len(tokens) < 2):
        return None
    total = current = 0
    last = None  # the kind of the previous word: ones, tens, hundred, scale
    scale = None  # the last scale word's value: scales only decrease ("three thousand two")
    for t in tokens:
        if t in NUMBER_WORDS and NUMBER_WORDS[t] < 20:
            if last == "ones" or (last == "tens" and not 0 < NUMBER_WORDS[t] < 10):
                return None  # "seventy-twelve", "twenty-zero"
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
        elif t in SCALES and last in ("ones", "tens", "hundred"):
            if scale is not None and SCALES[t] >= scale:
                return None
            total += current * SCALES[t]
            current, last, scale = 0, "scale", SCALES[t]
        else:
            return None
    return total + current


_NUMBER = re.compile(
    r"(?P<sign>[+-]?)"
    r"(?P<int>\d{1,3}(?:,\d{3})+(?!\d)|\d{1,3}(?: \d{3})+(?!\d)|\d+)?"
    r"(?:\.(?P<frac>\d*)(?:\\overline\{(?P<rep>\d+)\})?)?"
    r"(?:[eE](?P<exp1>[+-]?\d+)"
    r"|(?:\\times|\\cdot|\*) ?10\^(?:\{(?P<exp2>[+-]?\d+)\}|(?P<exp3>\d)))?"
)


def _decimal_value(m: re.Match[str]) -> Fraction | None:
    int_part, frac, rep = m.group("int"), m.group("frac"), m.group("rep")
    if not int_part and not frac and not rep:
        return None
    value = Fraction(int((int_part or "0").replace(",", "").replace(" ", "")))
    if frac:
        value += Fraction(int(frac), 10 ** len(frac))
    if rep:
        # 0.1\overline{6}: the repeating block r after k decimals adds r / (10^k (10^len(r) - 1)).
        value += Fraction(int(rep), 10 ** len(frac or "") * (10 ** len(rep) - 1))
    exp = m.group("exp1") or m.group("exp2") or m.group("exp3")
    if exp is not None:
        e = int(exp)
        if abs(e) > _MAX_EXPONENT:
            return None
        value *= Fraction(10) ** e
    return -value if m.group("sign") == "-" else value


def _plain_number(s: str) -> Fraction | None:
    """A number with nothing around it (no units): ``-1,234.5``, ``1.5e3``, ``0.\\overline{3}``."""
    m = _NUMBER.fullmatch(s.strip())
    return _decimal_value(m) if m else None


_FRAC = re.compile(
    r"(?P<sign>[+-]?)\\frac(?:\{(?P<a>[^{}]*)\}\{(?P<b>[^{}]*)\}|(?P<c>\d)(?P<d>\d))"
)
_MIXED = re.compile(r"(?P<sign>[+-]?)(?P<w>\d+) ?\\frac\{(?P<a>\d+)\}\{(?P<b>\d+)\}")
_ASSIGN = re.compile(r"(?:[A-Za-z]|\\text\{[A-Za-z ]+\}) ?= ?(?P<rhs>.+)")
_PLAIN_MIXED = re.compile(r"(?P<sign>[+-]?)(?P<w>\d+) (?P<a>\d+)/(?P<b>\d+)")  # "1 1/2"


def parse_number(s: str) -> tuple[Fraction, bool] | None:
    """(exact value, written as a percent) of a canonical answer that is one number, else None."""
    m = _ASSIGN.fullmatch(s)
    if m and "=" not in m.group("rhs"):
        s = m.group("rhs")
    percent = False
    if s.endswith("\\%"):  # every percent word is "\\%" in a canonical answer
        s, percent = s[:-2].rstrip(), True
    worded = number_word_value(s) if s[:1].isalpha() else None
    if worded is not None:
        return Fraction(worded), percent

    m = _MIXED.fullmatch(s) or _PLAIN_MIXED.fullmatch(s)
    if m and int(m.group("a")) < int(m.group("b")):
        value = int(m.group("w")) + Fraction(int(m.group("a")), int(m.group("b")))
        return (-value if m.group("sign") == "-" else value), percent
    m = _FRAC.fullmatch(s)
    if m:
        num = _plain_number(m.group("a") if m.group("a") is not None else m.group("c"))
        den = _plain_number(m.group("b") if m.group("b") is not None else m.group("d"))
        if num is None or not den:
            return None
        return (-num / den if m.group("sign") == "-" else num / den), percent
    if s.count("/") == 1:
        a, b = s.split("/")
        num, den = _plain_number(a), _plain_number(b)
        if num is not None and den:
            return num / den, percent

    m = _NUMBER.match(s)
    if not m or m.end() == 0:
        calculated = arithmetic(s) if s.startswith("(") else None  # "(3+4)\\cdot 2"
        return None if calculated is None else (calculated, percent)
    value = _decimal_value(m)
    if value is None:
        return None
    rest = s[m.end() :]
    if rest[:1] in _OPERATOR_START or rest.startswith(("\\times", "\\cdot", "\\div")):
        calculated = arithmetic(s)  # "16-3-4", "9\\times2": a calculation with numbers only
        return None if calculated is None else (calculated, percent)
    if rest.endswith("\\%"):
        rest, percent = rest[:-2].rstrip(), True
    word = re.sub(r"^\\text\{\s*([A-Za-z]+)\s*\}$", r"\1", rest.strip()).lower()
    if word in NUMERIC_MULTIPLIERS:  # "5 thousand" is 5000, not 5 with a unit
        return value * NUMERIC_MULTIPLIERS[word], percent
    if rest and not is_unit_suffix(rest):
        return None
    return value, percent


# ---------------------------------------------------------------- arithmetic

_OPERATOR_START = frozenset("+-*/^×÷")
_ARITH_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+(?:\.\d+)?)|(?P<op>\\times|\\cdot|\\div|[-+*/^×÷()]|\{|\}))"
)
_MAX_POWER = 100  # exponents of a calculation in an answer; the cost guard bounds the rest
_MAX_DIGITS = 1000


def arithmetic(s: str) -> Fraction | None:
    """The exact value of a calculation with numbers only (``16-3-4``, ``9\\times2``,
    ``(3+4)\\cdot 2``, ``2^{10}``), or None for anything else. A small recursive-descent
    parser over exact rationals: never ``eval``, bounded by the length of ``s``."""
    tokens: list[str] = []
    pos = 0
    while pos < len(s):
        m = _ARITH_TOKEN.match(s, pos)
        if m is None:
            if s[pos:].strip() == "":
                break
            return None
        tokens.append(m.group("num") or m.group("op"))
        pos = m.end()
    if not tokens or len(tokens) > 200:
        return None
    try:
        value, rest = _sum(tokens, 0)
    except (ArithmeticError, ValueError, IndexError, RecursionError):
        return None
    return value if rest == len(tokens) else None


def _sum(t: list[str], i: int) -> tuple[Fraction, int]:
    value, i = _product(t, i)
    while i < len(t) and t[i] in ("+", "-"):
        right, j = _product(t, i + 1)
        value, i = (value + right if t[i] == "+" else value - right), j
    return value, i


def _product(t: list[str], i: int) -> tuple[Fraction, int]:
    value, i = _power(t, i)
    while i < len(t) and t[i] in ("*", "/", "\\times", "\\cdot", "\\div", "×", "÷"):
        right, j = _power(t, i + 1)
        value, i = (value / right if t[i] in ("/", "\\div", "÷") else value * right), j
    return value, i


def _power(t: list[str], i: int) -> tuple[Fraction, int]:
    base, i = _atom(t, i)
    if i < len(t) and t[i] == "^":
        exponent, i = _atom(t, i + 1)
        if exponent.denominator != 1 or abs(exponent) > _MAX_POWER:
            raise ValueError("exponent out of range")
        base = base ** int(exponent)
        if len(str(base.numerator)) + len(str(base.denominator)) > _MAX_DIGITS:
            raise ValueError("too large")
    return base, i


def _atom(t: list[str], i: int) -> tuple[Fraction, int]:
    if t[i] == "-":
        value, i = _atom(t, i + 1)
        return -value, i
    if t[i] in ("(", "{"):
        closer = ")" if t[i] == "(" else "}"
        value, j = _sum(t, i + 1)
        if j >= len(t) or t[j] != closer:
            raise ValueError("unbalanced")
        return value, j + 1
    if t[i][0].isdigit():
        return Fraction(t[i]), i + 1
    raise ValueError(f"unexpected {t[i]}")


def numbers_equal(answer: tuple[Fraction, bool], reference: tuple[Fraction, bool]) -> bool:
    """Exact equality. A bare number is read in the reference's unit: against ``25\\%`` the
    answer 25 is right and 0.25 is not (it would be 0.25%). An answer p% against a bare
    reference v equals p when v is above 1 (datasets drop the sign) and p/100 when it is not
    (the reference is a fraction)."""
    (va, pa), (vb, pb) = answer, reference
    if pa == pb or pb:
        return va == vb
    # A bare reference above 1 is a percent whose sign the dataset dropped (25 for 25%); one of
    # at most 1 is a fraction (0.25 for 25%). Either way one reading, so a percent of the
    # wrong base ("2000%" for 20, "0.25%" for 0.25) is not the reference.
    return vb == va if abs(vb) > 1 else vb == va / 100


# ---------------------------------------------------------------- numerals in a base

_BASE = re.compile(r"\(?(?:\\text\{)?(?P<d>[0-9A-Za-z]+)\}?\)?_\{?\(?(?P<b>\d{1,2})\)?\}?")
_DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def base_numeral(s: str) -> tuple[str, int | None] | None:
    """(digits, base) of ``1011_2``, ``1011_{(2)}``, ``(1011)_2``, ``\\text{1011}_2``; (digits,
    None) for bare digits; None for anything else or digits invalid in their base."""
    m = _BASE.fullmatch(s)
    digits, base = (m.group("d").upper(), int(m.group("b"))) if m else (s.upper(), None)
    if not digits.isalnum() or not digits.isascii():
        return None
    if base is not None and not (2 <= base <= 36 and all(_DIGITS.index(c) < base for c in digits)):
        return None
    return (digits, base) if base is not None or digits.isdigit() else None


def numerals_equal(
    a: tuple[str, int | None] | None, r: tuple[str, int | None] | None
) -> bool | None:
    """Numerals with a base subscript compare by digits and base; bare digits are read in the
    other side's base (``1011`` against ``1011_2``), so 11 is not ``1011_2``. None unless one
    side has a base and the other is a numeral (``base_numeral``'s (digits, base))."""
    if a is None or r is None or (a[1] is None and r[1] is None):
        return None
    digits_equal = a[0].lstrip("0") == r[0].lstrip("0")
    if a[1] is None or r[1] is None:
        base = a[1] or r[1]
        bare = a[0] if a[1] is None else r[0]
        return digits_equal and all(_DIGITS.index(c) < base for c in bare)
    return digits_equal and a[1] == r[1]
