"""The cost guard: a static look at an answer that refuses, before any parsing, what would hold a
verification worker for its whole timeout.

sympy evaluates what it parses: ``10^{10^{10}}``, ``(10^6)!``, ``\\sum_{k=1}^{10^9} k`` or
``\\int x^{10^7} dx`` each keep a worker busy until it is killed, and a policy that learns to
write them (or a dozen clients sending them at once) would starve every honest answer. The
guard bounds the size of the numbers such an answer would build from the digits it contains
(an upper bound of log10 of each value, towers included) and answers 0 with a named reason at
once, in the server process, in time linear in the answer's length.
"""

from __future__ import annotations

import math
import re

# Limits on what an answer may ask sympy to build (log10 of the value): beyond them no dataset
# answer goes, and sympy's time grows with them.
MAX_EXPONENT_LOG10 = 5.0  # x^e with e up to 100,000
MAX_FACTORIAL_LOG10 = 4.0  # n! with n up to 10,000
MAX_BOUND_LOG10 = 4.0  # \sum / \prod bounds up to 10,000
MAX_BINOMIAL_LOG10 = 5.0  # \binom{n}{k} with n up to 100,000
MAX_CALCULUS_EXPONENT_LOG10 = 2.0  # exponents up to 100 inside integrals, limits, derivatives
MAX_NUMBER_LOG10 = 100_000.0  # no number built may exceed 100,000 digits


def complexity_violation(text: str, max_chars: int, max_nesting: int) -> str | None:
    """Why ``text`` must not be parsed at all (``too_long``, ``too_nested``), or None."""
    if len(text) > max_chars:
        return "too_long"
    depth = deepest = 0
    for ch in text:
        if ch in "({[":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in ")}]":
            depth -= 1
    return "too_nested" if deepest > max_nesting else None


def _group(text: str, i: int) -> tuple[str, int]:
    """The argument starting at ``text[i]``: a balanced ``{…}``/``(…)`` group, a command such as
    ``\\infty``, a run of digits, or one character; returns (argument, index after it)."""
    while i < len(text) and text[i] == " ":
        i += 1
    if i >= len(text):
        return "", i
    opener = text[i]
    if opener in "{(":
        closer = "}" if opener == "{" else ")"
        depth = 0
        for j in range(i, len(text)):
            if text[j] == opener:
                depth += 1
            elif text[j] == closer:
                depth -= 1
                if depth == 0:
                    return text[i + 1 : j], j + 1
        return text[i + 1 :], len(text)
    m = re.compile(r"\\[A-Za-z]+|\d+(?:\.\d+)?|.").match(text, i)
    assert m is not None
    return m.group(), m.end()


_LITERAL = re.compile(r"\d+(?:\.\d*)?")
_FACTORIAL_ARG = re.compile(r"(\d+|[})])\s*!")
_GAMMA = re.compile(r"\\Gamma(?![A-Za-z])\s*")


def magnitude(text: str, depth: int = 0) -> float:
    """An upper bound of log10 |value| of a numeric expression: the product of its literals,
    powers as towers (``b^e`` -> ``log10(b) * 10^log10(e)``), factorials by Stirling. Each
    symbol counts as 10; ``inf`` when unbounded. Carets are walked left to right, so the
    recursion only follows the nesting of exponents."""
    if depth > 50:
        return math.inf
    total, pos = 0.0, 0
    while (caret := _top_level(text, "^", pos)) >= 0:
        base_start = _base_start(text, pos, caret)
        total += _flat(text[pos:base_start])
        base = magnitude(text[base_start:caret].strip("{}()"), depth + 1)
        exponent, pos = _group(text, caret + 1)
        exp_mag = magnitude(exponent, depth + 1)
        if exp_mag > 300:
            return math.inf
        total += base * 10**exp_mag
    return total + _flat(text[pos:])


def _flat(text: str) -> float:
    """log10 bound of a caret-free piece: its literals multiplied, its factorials expanded."""
    total = float(len(re.findall(r"(?<!\\)\b[A-Za-z]\b", text)))  # symbols: 10 each
    for m in _LITERAL.finditer(text):
        digits = m.group().split(".")[0].lstrip("0")
        total += len(digits) if len(digits) > 15 else math.log10(max(int(digits or 0), 1))
    for m in _FACTORIAL_ARG.finditer(text):
        n_mag = _factorial_arg(text, m)
        if n_mag > MAX_FACTORIAL_LOG10:
            return math.inf
        n = 10**n_mag
        total += n * max(math.log10(n), 1.0)
    return total


def _base_start(text: str, start: int, caret: int) -> int:
    """Where the base of the power at ``caret`` begins: the group, digits or letter before it."""
    i = caret - 1
    if i < start:
        return caret
    if text[i] in "})":
        opener = "{" if text[i] == "}" else "("
        depth = 0
        for j in range(i, start - 1, -1):
            if text[j] == text[i]:
                depth += 1
            elif text[j] == opener:
                depth -= 1
                if depth == 0:
                    return j
        return start
    while i > start and (text[i - 1].isdigit() or text[i - 1] == ".") and text[i].isdigit():
        i -= 1
    return i


def _factorial_arg(text: str, m: re.Match[str]) -> float:
    """log10 of the argument of the factorial ``m`` (a number or the group closing before it)."""
    closer = m.group(1)
    if closer not in "})":
        return math.log10(int(closer)) if len(closer) < 16 else len(closer)
    opener = "{" if closer == "}" else "("
    close = m.start(1)
    depth = 0
    for j in range(close, -1, -1):
        if text[j] == closer:
            depth += 1
        elif text[j] == opener:
            depth -= 1
            if depth == 0:
                return magnitude(text[j + 1 : close], 1)
    return math.inf


def _top_level(text: str, ch: str, start: int = 0) -> int:
    """Index of the first ``ch`` at or after ``start`` outside any bracket, or -1."""
    depth = 0
    for i in range(start, len(text)):
        c = text[i]
        if c in "{([":
            depth += 1
        elif c in "})]":
            depth -= 1
        elif c == ch and depth == 0:
            return i
    return -1


_CALCULUS = re.compile(r"\\(?:int|iint|iiint|oint|lim|sum|prod)(?![A-Za-z])|\\frac\{d\^|\\partial")
_BOUNDS = re.compile(r"\\(?:sum|prod|int)(?![A-Za-z])\s*")
_BINOM = re.compile(r"\\[dt]?binom(?![A-Za-z])")


def bomb(text: str) -> str | None:
    """Why ``text`` would hold a worker for its whole timeout (``huge_exponent``,
    ``huge_factorial``, ``huge_sum_bound``, ``huge_binomial``, ``huge_calculus_exponent``,
    ``huge_number``), or None. Linear in ``len(text)`` per construct."""
    bounds: set[int] = set()  # carets of \sum/\prod/\int bounds: checked as bounds, not powers
    for m in _BOUNDS.finditer(text):
        pos = m.end()
        for _ in range(2):  # the _{lower} and ^{upper}, in either order
            if pos < len(text) and text[pos] in "_^":
                if text[pos] == "^":
                    bounds.add(pos)
                bound, pos = _group(text, pos + 1)
                integral = m.group().startswith("\\int")
                value = bound.split("=")[-1]
                if not integral and "\\infty" not in bound and magnitude(value) > MAX_BOUND_LOG10:
                    return "huge_sum_bound"
    calculus = _CALCULUS.search(text) is not None
    limit = MAX_CALCULUS_EXPONENT_LOG10 if calculus else MAX_EXPONENT_LOG10
    for i, c in enumerate(text):
        if c == "^" and i not in bounds:
            exponent, _ = _group(text, i + 1)
            if exponent.strip() in ("\\infty", "\\circ", "{\\circ}"):
                continue
            if magnitude(exponent) > limit:
                return "huge_calculus_exponent" if calculus else "huge_exponent"
    for m in _FACTORIAL_ARG.finditer(text):
        if _factorial_arg(text, m) > MAX_FACTORIAL_LOG10:
            return "huge_factorial"
    for m in _GAMMA.finditer(text):
        argument, _ = _group(text, m.end())
        if magnitude(argument) > MAX_FACTORIAL_LOG10:
            return "huge_factorial"
    for m in _BINOM.finditer(text):
        top, _ = _group(text, m.end())
        if magnitude(top) > MAX_BINOMIAL_LOG10:
            return "huge_binomial"
    if magnitude(text) > MAX_NUMBER_LOG10:
        return "huge_number"
    return None
