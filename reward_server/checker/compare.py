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
* ``(1,2)`` and ``[1,2)`` compare element-wise and bracket-wise; ``\\{1,2\\}`` and bare lists
  ``1, 2`` compare as multisets; words compare case-insensitively (``\\text{(C)}`` == ``c``).
"""

from __future__ import annotations

from dataclasses import dataclass

from reward_server.checker.numbers import numbers_equal, numerals_equal
from reward_server.checker.values import (
    Choice,
    Group,
    Number,
    Numeral,
    Value,
    Words,
)

_MAX_DEPTH = 4  # recursion depth of nested structures decided here


@dataclass(frozen=True)
class Verdict:
    """``equal`` is True only for ``Reason.EQUIVALENT``; every other reason scores 0."""

    equal: bool
    reason: str  # a Reason value
    cached: bool = False


def same_value(a: Value, r: Value, depth: int = 0) -> bool | None:
    """``equal_values`` of two values read from answers (an item, a step's side): an empty
    one equals nothing."""
    if not a.text or not r.text:
        return False
    return equal_values(a, r, depth)


def equal_values(a: Value, r: Value, depth: int = 0) -> bool | None:
    """The comparison for the two values' types, from their fields; None when no exact rule
    applies."""
    if a.text == r.text:
        return True
    if depth > _MAX_DEPTH:
        return None
    if isinstance(a, Number) and isinstance(r, Number):
        return numbers_equal((a.value, a.percent), (r.value, r.percent))
    based = numerals_equal(_numeral(a), _numeral(r))
    if based is not None:
        return based
    if isinstance(a, Choice) or isinstance(r, Choice):
        letters = _letters(a), _letters(r)
        if None not in letters:
            return letters[0] == letters[1]
    if isinstance(a, Group) and isinstance(r, Group):
        return _equal_groups(a, r, depth)
    if isinstance(a, Group | Number) and isinstance(r, Group | Number):
        return False  # several values against one number
    words, ref_words = _words(a), _words(r)
    if words is not None and ref_words is not None:
        return words == ref_words
    if (words is not None and isinstance(r, Number)) or (
        ref_words is not None and isinstance(a, Number)
    ):
        return False  # words against a number ("five" was read as a number)
    return None


def _numeral(v: Value) -> tuple[str, int | None] | None:
    if isinstance(v, Numeral):
        return v.digits, v.base
    return (v.digits, None) if isinstance(v, Number) and v.digits is not None else None


def _letters(v: Value) -> frozenset[str] | None:
    return v.letters if isinstance(v, Choice | Words) else None


def _words(v: Value) -> str | None:
    return v.words if isinstance(v, Number | Choice | Words) else None


def _equal_groups(a: Group, r: Group, depth: int) -> bool | None:
    unordered = {"set", "list"}
    if "parts" in (a.kind, r.kind):
        # Labelled parts answer in order: against parts, a bare list or a tuple, item by item.
        if not {a.kind, r.kind} <= {"parts", "list", "()"}:
            return None
        return _equal_in_order(a.items, r.items, depth)
    if a.kind in unordered and r.kind in unordered:
        return _equal_multisets(a.items, r.items, depth)
    if a.kind in unordered or r.kind in unordered:
        return None  # "1, 2" against "(1, 2)": the symbolic check decides
    if a.kind != r.kind:
        return False  # (1,2) against [1,2]: open against closed
    return _equal_in_order(a.items, r.items, depth)


def _equal_in_order(xs: tuple[Value, ...], ys: tuple[Value, ...], depth: int) -> bool | None:
    if len(xs) != len(ys):
        return False
    verdicts = [same_value(x, y, depth + 1) for x, y in zip(xs, ys, strict=True)]
    if False in verdicts:
        return False
    return None if None in verdicts else True


def _equal_multisets(xs: tuple[Value, ...], ys: tuple[Value, ...], depth: int) -> bool | None:
    """Multiset equality under ``same_value``; None when some needed pair is undecided."""
    if len(xs) != len(ys):
        return False
    unused = list(ys)
    undecided = False
    for x in xs:
        for j, y in enumerate(unused):
            verdict = same_value(x, y, depth + 1)
            if verdict:
                del unused[j]
                break
            if verdict is None:
                undecided = True
        else:
            return None if undecided else False
    return True
