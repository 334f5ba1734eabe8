"""The cost guard: what would hold a verification worker for its whole timeout, refused in the
server process with a named reason.

Before parsing, an answer longer than the length cap or nested deeper than the nesting cap is
not read at all (``complexity_violation``). After parsing, ``bomb`` bounds the size of the
numbers the tree would build: sympy evaluates what it is given, and ``10^{10^{10}}``,
``(10^6)!``, ``\\sum_{k=1}^{10^9} k`` each keep a worker busy until it is killed; a policy that
learns to write them (or a dozen clients sending them at once) would starve every honest
answer. The bound is an upper bound of log10 of each value, read from the tree in time linear
in its size, and exact where the tree has exact numbers (``\\binom{100001}{2}`` is ten digits,
not a hundred thousand).
"""

from __future__ import annotations

import math

from reward_server.checker import numbers
from reward_server.checker import tree as t

# Limits on what an answer may ask sympy to build (log10 of the value): beyond them no dataset
# answer goes, and sympy's time grows with them.
MAX_EXPONENT_LOG10 = 5.0  # x^e with e up to 100,000
MAX_FACTORIAL_LOG10 = 4.0  # n! (and n!!, n!!!…) with n up to 10,000
MAX_BOUND_LOG10 = 4.0  # \sum / \prod over up to 10,000 terms
MAX_BINOMIAL_LOG10 = 4.0  # \binom{x}{k} with a symbolic x: k up to 10,000
MAX_NUMBER_LOG10 = 100_000.0  # no number built may exceed 100,000 digits
# What a name counts as (log10): a symbol stands for a value of about 10.
_NAME_LOG10 = 1.0


class _Bomb(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


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


def bomb(node: t.Node) -> str | None:
    """Why the tree would hold a worker for its whole timeout (``huge_exponent``,
    ``huge_factorial``, ``huge_sum_bound``, ``huge_binomial``, ``huge_number``), or None."""
    if not any(_grows(part) for part in t.walk(node)):
        return None  # sums and products of literals under the length cap stay small
    try:
        if magnitude(node) > MAX_NUMBER_LOG10:
            return "huge_number"
    except _Bomb as found:
        return found.reason
    return None


def _grows(node: t.Node) -> bool:
    """A construct whose value can outgrow the digits written: a power, a factorial, a
    binomial, a sum or product over a range, an exponential."""
    if isinstance(node, t.Postfix):
        return "!" in node.marks
    if isinstance(node, t.Func):
        return node.name == "exp"
    return isinstance(node, t.Power | t.Binom | t.BigOp)


def magnitude(node: t.Node, depth: int = 0) -> float:
    """An upper bound of log10 |value| of the tree (each name counts as 10); raises ``_Bomb``
    for a construct beyond its limit. The tree's depth is bounded by the parser."""
    if isinstance(node, t.Num):
        value = numbers.literal(node.text)
        return _log10(value) if value is not None else float(len(node.text))
    if isinstance(node, t.Based):
        return len(node.digits) * math.log10(max(node.base, 2))
    if isinstance(node, t.Name | t.Word | t.Text | t.Const | t.Angle):
        return _NAME_LOG10
    if isinstance(node, t.Power):
        return _power(node, depth)
    if isinstance(node, t.Postfix):
        return _postfix(node, depth)
    if isinstance(node, t.Binom):
        return _binomial(node, depth)
    if isinstance(node, t.BigOp):
        return _big_operator(node, depth)
    if isinstance(node, t.Func) and node.name == "exp":
        exponent = magnitude(node.argument, depth + 1)
        if exponent > MAX_EXPONENT_LOG10:
            raise _Bomb("huge_exponent")
        return 0.44 * 10**exponent
    parts = [magnitude(child, depth + 1) for child in _children(node)]
    if isinstance(node, t.Sum):
        return max(parts, default=0.0) + math.log10(len(parts))
    if isinstance(node, t.Bracket | t.SetOf | t.Matrix | t.Answer | t.SetOp):
        return max(parts, default=0.0)
    if isinstance(node, t.Root):
        return parts[0]
    return sum(parts)


def _power(node: t.Power, depth: int) -> float:
    exponent = magnitude(node.exponent, depth + 1)
    if exponent > MAX_EXPONENT_LOG10:
        raise _Bomb("huge_exponent")
    base = max(magnitude(node.base, depth + 1), _NAME_LOG10 / 10)
    return base * 10**exponent


def _postfix(node: t.Postfix, depth: int) -> float:
    """``n!`` and its multifactorials ``n!!``, ``n!!!``: about n/k·log10(n) digits."""
    operand = magnitude(node.operand, depth + 1)
    bangs = node.marks.count("!")
    if not bangs:
        return operand
    if operand > MAX_FACTORIAL_LOG10:
        raise _Bomb("huge_factorial")
    n = 10**operand
    return n / bangs * max(operand, 1.0)


def _binomial(node: t.Binom, depth: int) -> float:
    """``\\binom{n}{k}`` has at most min(k, n - k)·log10(n) digits: exact numbers are bounded
    by that, not by n."""
    n, k = numbers.exact(node.n), numbers.exact(node.k)
    if n is not None and k is not None:
        smaller = min(abs(k), abs(n - k))
        size = float(smaller) * _log10(n)
        if size > MAX_NUMBER_LOG10:
            raise _Bomb("huge_binomial")
        return size
    # a symbolic n (or k): sympy expands \binom{x}{k} into k factors
    size = max(magnitude(node.n, depth + 1), magnitude(node.k, depth + 1))
    if size > MAX_BINOMIAL_LOG10:
        raise _Bomb("huge_binomial")
    return 10**size * max(size, 1.0)


def _big_operator(node: t.BigOp, depth: int) -> float:
    lower, upper = magnitude(node.lower, depth + 1), magnitude(node.upper, depth + 1)
    if max(lower, upper) > MAX_BOUND_LOG10:
        raise _Bomb("huge_sum_bound")
    terms = 10 ** max(lower, upper)
    body = magnitude(node.body, depth + 1)
    return terms * body if node.op == "prod" else body + math.log10(terms + 1)


def _log10(value: object) -> float:
    try:
        number = abs(value)  # type: ignore[arg-type]
        if number == 0:
            return 0.0
        return max(math.log10(number.numerator) - math.log10(number.denominator), 0.0)
    except (AttributeError, ValueError, OverflowError):
        return float(len(str(value)))


def _children(node: t.Node) -> list[t.Node]:
    return list(t.children(node))
