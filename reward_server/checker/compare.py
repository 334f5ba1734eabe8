"""Comparing two typed values (``values.py``): the exact half of the checker's comparison, in
the server process. ``symbolic.py`` decides what is left, in the worker pool.

One comparison per type: numbers as exact rationals (a bare number read in the reference's
unit, ``numbers.numbers_equal``), numerals in a base, choice letters as sets, tuples and
intervals item by item and bracket by bracket, sets and bare lists as multisets, words as
words. An expression, or a pair no exact rule decides, is None: the symbolic check decides.

Rules worth knowing (they are the service's documented semantics):

* numbers compare exactly: ``0.5 == 1/2 == \\frac{1}{2}``, ``0.\\overline{3} == 1/3``, but
  ``0.33 != 1/3`` and ``0.333333 != 1/3`` (a rounded decimal of a non-terminating value);
* thousands separators (``1,000``, ``1\\,000``, ``1{,}000``), ``$``/``\\$``, trailing units
  (``5 cm``, ``5\\text{ apples}``, ``12 km/h``), degrees and a trailing period are ignored;
* ``50\\%`` equals ``50`` and ``0.5`` (GSM8K drops the sign, other datasets use the fraction);
* ``1.5e3``, ``1.5\\times 10^{3}`` are scientific notation; ``2\\frac{1}{2}`` is a mixed number;
* a numeral in a base against a bare reference is its value (``100_2`` is 4); a bare answer
  against a numeral in a base is digits in that base (``1011`` answers ``1011_2``);
* ``(1,2)`` and ``[1,2)`` compare element-wise and bracket-wise; ``\\{1,2\\}`` and bare lists
  ``1, 2`` compare as multisets; words compare case-insensitively (``\\text{(C)}`` == ``c``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from reward_server.checker.numbers import numbers_equal, numeral_value
from reward_server.checker.values import Choice, Group, Number, Numeral, Value, Words

_MAX_DEPTH = 4  # recursion depth of nested structures decided here

# How two values that no exact rule decides compare: None in the server process (the symbolic
# check decides), the symbolic comparison in a verification worker (``symbolic.py``).
Undecided = Callable[[Value, Value], bool | None]


@dataclass(frozen=True)
class Verdict:
    """``equal`` is True only for ``Reason.EQUIVALENT``; every other reason scores 0."""

    equal: bool
    reason: str  # a Reason value
    cached: bool = False


def same_value(
    a: Value, r: Value, depth: int = 0, undecided: Undecided | None = None
) -> bool | None:
    """``equal_values``: the name the readers use for it (a sentence's restatements, a step of
    a calculation)."""
    return equal_values(a, r, depth, undecided)


def equal_values(
    a: Value, r: Value, depth: int = 0, undecided: Undecided | None = None
) -> bool | None:
    """The comparison for the two values' types, from their fields; when no exact rule
    applies, ``undecided``'s verdict (None without one)."""
    if a == r:
        return True
    if depth > _MAX_DEPTH:
        return undecided(a, r) if undecided else None
    if isinstance(a, Number) and isinstance(r, Number):
        return numbers_equal((a.value, a.percent), (r.value, r.percent))
    if isinstance(a, Numeral) or isinstance(r, Numeral):
        based = _numerals(a, r)
        if based is not None:
            return based
    if isinstance(a, Choice) or isinstance(r, Choice):
        letters = _letters(a), _letters(r)
        if None not in letters:
            return letters[0] == letters[1]
    if isinstance(a, Group) and isinstance(r, Group):
        return _equal_groups(a, r, depth, undecided)
    if isinstance(a, Group | Number | Numeral) and isinstance(r, Group | Number | Numeral):
        return False  # several values against one number
    words, ref_words = _words(a), _words(r)
    if words is not None and ref_words is not None:
        return words == ref_words
    if (words is not None and isinstance(r, Number)) or (
        ref_words is not None and isinstance(a, Number)
    ):
        return False  # words against a number ("five" was read as a number)
    return undecided(a, r) if undecided else None


def _numerals(a: Value, r: Value) -> bool | None:
    """Numerals in a base: against one another by digits and base (``1011_2`` is ``1011_{(2)}``,
    never ``13_8``); a numeral answer against a bare number by its value (``100_2`` is 4); a
    bare answer against a numeral reference as digits in its base (``1011`` answers
    ``1011_2``, 11 does not). A numeral whose digits are not its base's is no value."""
    if (isinstance(a, Numeral) and a.value is None) or (isinstance(r, Numeral) and r.value is None):
        return False
    if isinstance(a, Numeral) and isinstance(r, Numeral):
        return a.digits.lstrip("0") == r.digits.lstrip("0") and a.base == r.base
    if isinstance(a, Numeral) and isinstance(r, Number):
        return not r.percent and r.value == a.value
    if isinstance(r, Numeral) and isinstance(a, Number):
        if a.digits is None:
            return False
        return numeral_value(a.digits, r.base) == r.value
    return None


def _letters(v: Value) -> frozenset[str] | None:
    return v.letters if isinstance(v, Choice | Words) else None


def _words(v: Value) -> str | None:
    return v.words if isinstance(v, Words) else None


def _equal_groups(a: Group, r: Group, depth: int, undecided: Undecided | None) -> bool | None:
    unordered = {"set", "list"}
    kinds = {a.kind, r.kind}
    if "labelled" in kinds:
        if a.kind != r.kind or a.names != r.names:
            return False
        return _equal_in_order(a.items, r.items, depth, undecided)
    if "named" in kinds:
        if a.kind == r.kind == "named":
            if set(a.names) != set(r.names):
                return False
            ordered = dict(zip(r.names, r.items, strict=True))
            return _equal_in_order(a.items, tuple(ordered[n] for n in a.names), depth, undecided)
        if not kinds <= {"named", "list", "()"}:
            return None if undecided is None else False
        return _equal_in_order(a.items, r.items, depth, undecided)
    if "parts" in kinds:
        # Labelled parts answer in order: against parts, a bare list or a tuple, item by item.
        if not kinds <= {"parts", "list", "()"}:
            return None if undecided is None else False
        return _equal_in_order(a.items, r.items, depth, undecided)
    if a.kind in unordered and r.kind in unordered:
        return _equal_multisets(a.items, r.items, depth, undecided)
    if kinds == {"list", "()"}:
        # "The ordered pair is (4, 7)" read as its values: a list in order answers a tuple
        return _equal_in_order(a.items, r.items, depth, undecided)
    if a.kind in unordered or r.kind in unordered:
        return False  # "1, 2" against "[1, 2]" or a set against a tuple
    if a.kind != r.kind:
        return False  # (1,2) against [1,2]: open against closed
    return _equal_in_order(a.items, r.items, depth, undecided)


def _equal_in_order(
    xs: tuple[Value, ...], ys: tuple[Value, ...], depth: int, undecided: Undecided | None
) -> bool | None:
    if len(xs) != len(ys):
        return False
    verdicts = [equal_values(x, y, depth + 1, undecided) for x, y in zip(xs, ys, strict=True)]
    if False in verdicts:
        return False
    return None if None in verdicts else True


def _equal_multisets(
    xs: tuple[Value, ...], ys: tuple[Value, ...], depth: int, undecided: Undecided | None
) -> bool | None:
    """Multiset equality; None when some needed pair is undecided."""
    if len(xs) != len(ys):
        return False
    unused = list(ys)
    open_pairs = False
    for x in xs:
        for j, y in enumerate(unused):
            verdict = equal_values(x, y, depth + 1, undecided)
            if verdict:
                del unused[j]
                break
            if verdict is None:
                open_pairs = True
        else:
            return None if open_pairs else False
    return True
