"""Numbers, exactly: the value of a tree of numbers only as a ``fractions.Fraction``.

Digits as written (``-1,234.5``, ``10\\,000``, ``1.5e3``, ``0.\\overline{3}``), fractions,
mixed numbers (``2\\frac{1}{2}``, ``1 1/2``), number words (``twenty-five``) and calculations
with numbers only (``16-3-4``, ``2^{10}``, ``5!``, ``\\binom{5}{2}``) have an exact value;
anything with a name, a root or a function has none here (the symbolic check decides it).

No sympy and no ``eval``: a walk over the tree, bounded by its size and by the sizes below.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from reward_server.checker import tree as t
from reward_server.checker.lexicon import NUMBER_WORDS, SCALES

# A power of ten up to this exponent is instant with Fraction; a calculation's other powers
# stay below these sizes (larger ones are left to the symbolic check, which the guard bounds).
_MAX_TEN_EXPONENT = 1000
_MAX_POWER = 100
_MAX_DIGITS = 1000
_MAX_FACTORIAL = 1000


def number_word_value(text: str) -> int | None:
    """The integer a number written in words names: ``seven``, ``twenty-five``, ``one hundred
    and twelve``, ``three thousand``; None for anything else."""
    tokens = [w for w in re.split(r"[\s\-]+", text.lower().strip()) if w and w != "and"]
    if not tokens or ("and" in text.lower().split() and len(tokens) < 2):
        return None
    total = current = 0
    last = None  # the kind of the previous word: ones, tens, hundred, scale
    scale = None  # the last scale word's value: scales only decrease ("three thousand two")
    for word in tokens:
        if word in NUMBER_WORDS and NUMBER_WORDS[word] < 20:
            if last == "ones" or (last == "tens" and not 0 < NUMBER_WORDS[word] < 10):
                return None  # "seventy-twelve", "twenty-zero"
            current += NUMBER_WORDS[word]
            last = "ones"
        elif word in NUMBER_WORDS:
            if last in ("ones", "tens"):
                return None
            current += NUMBER_WORDS[word]
            last = "tens"
        elif word == "hundred" and last == "ones" and current < 10:
            current *= 100
            last = "hundred"
        elif word in SCALES and last in ("ones", "tens", "hundred"):
            if scale is not None and SCALES[word] >= scale:
                return None
            total += current * SCALES[word]
            current, last, scale = 0, "scale", SCALES[word]
        else:
            return None
    return total + current


_SEPARATORS = re.compile(r",\\!|\{,\}|\\,|[,\s]")


def literal(text: str) -> Fraction | None:
    """The value of digits as the lexer read them (``tree.Num``): thousands separators of
    every spelling, decimals, an exponent, a repeating block."""
    m = re.fullmatch(
        r"(?P<int>[\d,\s\\!{}]*?)(?:\.(?P<frac>\d*))?(?:\\overline\{(?P<rep>\d+)\})?"
        r"(?:[eE](?P<exp>[-+]?\d+))?",
        text,
    )
    if m is None:
        return None
    int_part = _SEPARATORS.sub("", m.group("int") or "")
    frac, rep = m.group("frac") or "", m.group("rep")
    if not (int_part or frac or rep) or not (int_part or "0").isdigit():
        return None
    value = Fraction(int(int_part or "0"))
    if frac:
        value += Fraction(int(frac), 10 ** len(frac))
    if rep:
        # 0.1\overline{6}: the repeating block r after k decimals adds r / (10^k (10^len(r) - 1))
        value += Fraction(int(rep), 10 ** len(frac) * (10 ** len(rep) - 1))
    if m.group("exp") is not None:
        exponent = int(m.group("exp"))
        if abs(exponent) > _MAX_TEN_EXPONENT:
            return None
        value *= Fraction(10) ** exponent
    return value


def integer_digits(node: t.Node) -> str | None:
    """The digits of a plain integer literal written without separators (``1011``, ``033``),
    read in another numeral's base by ``compare``; None for anything else."""
    return node.text if isinstance(node, t.Num) and node.text.isdigit() else None


def mixed_number(node: t.Node) -> Fraction | None:
    """``2\\frac{1}{2}`` and ``1 1/2``: a whole number and a proper fraction written side by side
    (a product would need a sign: ``2 \\cdot \\frac12``)."""
    shape = _mixed_shape(node)
    if shape is None or shape[1] >= shape[2]:
        return None
    whole, numerator, denominator = shape
    return whole + Fraction(numerator, denominator)


def _mixed_shape(node: t.Node) -> tuple[int, int, int] | None:
    """(whole, numerator, denominator) of a whole number written beside a fraction of whole
    numbers; the denominator is not 0."""
    if not isinstance(node, t.Product):
        return None
    factors, joins = node.factors, node.joins
    whole = _natural(factors[0])
    if whole is None:
        return None
    if len(factors) == 2 and joins[0] in ("", " ") and isinstance(factors[1], t.Frac):
        numerator, denominator = _natural(factors[1].numerator), _natural(factors[1].denominator)
    elif len(factors) == 3 and joins == (" ", "/"):
        numerator, denominator = _natural(factors[1]), _natural(factors[2])
    else:
        return None
    if numerator is None or not denominator:
        return None
    return whole, numerator, denominator


def _natural(node: t.Node) -> int | None:
    return int(node.text) if isinstance(node, t.Num) and node.text.isdigit() else None


def exact(node: t.Node) -> Fraction | None:
    """The exact value of a calculation with numbers only, or None for anything else."""
    try:
        return _exact(node, 0)
    except (ArithmeticError, ValueError, RecursionError):
        return None


def _exact(node: t.Node, depth: int) -> Fraction | None:
    if depth > 60:
        return None
    depth += 1
    if isinstance(node, t.Num):
        return literal(node.text)
    if isinstance(node, t.Word) and node.number:
        value = number_word_value(node.text)
        return None if value is None else Fraction(value)
    if isinstance(node, t.Currency):  # "9 \\times \\$2": the sign is a unit's, the value 2
        return _exact(node.operand, depth)
    if isinstance(node, t.Neg):
        inner = _exact(node.operand, depth)
        return None if inner is None else -inner
    if isinstance(node, t.Sum):
        total = Fraction(0)
        for sign, term in node.terms:
            value = _exact(term, depth)
            if value is None or sign not in ("+", "-"):
                return None
            total += value if sign == "+" else -value
        return total
    if isinstance(node, t.Product):
        return _product(node, depth)
    if isinstance(node, t.Frac):
        numerator, denominator = _exact(node.numerator, depth), _exact(node.denominator, depth)
        if numerator is None or not denominator:
            return None
        return numerator / denominator
    if isinstance(node, t.Power):
        return _power(node, depth)
    if (
        isinstance(node, t.Bracket)
        and (node.opening, node.closing) == ("(", ")")
        and len(node.items) == 1
    ):
        return _exact(node.items[0], depth)
    if isinstance(node, t.Postfix) and set(node.marks) == {"!"} and len(node.marks) == 1:
        n = _exact(node.operand, depth)
        if n is None or n.denominator != 1 or not 0 <= n <= _MAX_FACTORIAL:
            return None
        return Fraction(math.factorial(int(n)))
    if isinstance(node, t.Binom):
        n, k = _exact(node.n, depth), _exact(node.k, depth)
        if n is None or k is None or n.denominator != 1 or k.denominator != 1 or n < 0:
            return None
        if min(k, n - k) > _MAX_FACTORIAL:
            return None
        return Fraction(math.comb(int(n), int(k)) if k >= 0 else 0)
    return None


def _product(node: t.Product, depth: int) -> Fraction | None:
    if _mixed_shape(node) is not None:
        return mixed_number(node)  # "2\\frac{3}{2}" is no mixed number, nor a product: None
    value = _exact(node.factors[0], depth)
    if value is None:
        return None
    for join, factor in zip(node.joins, node.factors[1:], strict=True):
        if join == " " and isinstance(factor, t.Num):
            return None  # "2 3": two numerals side by side are no product
        right = _exact(factor, depth)
        if right is None or join == "mod":
            return None
        if join in ("/", ":"):
            if not right:
                return None
            value /= right
        else:
            value *= right
    return value


def _power(node: t.Power, depth: int) -> Fraction | None:
    base, exponent = _exact(node.base, depth), _exact(node.exponent, depth)
    if base is None or exponent is None or exponent.denominator != 1:
        return None
    e = int(exponent)
    if base == 10 and abs(e) <= _MAX_TEN_EXPONENT:
        return Fraction(10) ** e
    if abs(e) > _MAX_POWER or (base == 0 and e < 0):
        return None
    size = abs(e) * (math.log10(max(abs(base.numerator), 1)) + math.log10(base.denominator))
    if size > _MAX_DIGITS:
        return None
    return base**e


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

_BASE_DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def numeral_value(digits: str, base: int) -> int | None:
    """The value of ``digits`` in ``base``; None when a digit is not one of the base's."""
    valid = 2 <= base <= 36 and digits and all(0 <= _BASE_DIGITS.find(c) < base for c in digits)
    if not valid:
        return None
    return int(digits, base)
