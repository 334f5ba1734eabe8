"""Typed values: what an answer's value is once read (``reading.py`` reads an answer into a
``Statement`` whose value is one of these; ``compare.py`` compares them type by type, from
their fields only: nothing here is read again from text after ``read_value``).

* ``Number``: an exact ``Fraction`` and whether it was written as a percent (``numbers.py``);
* ``Numeral``: digits with a base subscript (``1011_2``);
* ``Choice``: multiple-choice letters (``B, D``);
* ``Group``: a tuple, an interval, a set, a bare list or the labelled parts of a multi-part
  answer (``(a) 3, (b) 5``), its items read into values the same way;
* ``Words``: a worded answer (``no solution``, ``\\text{(C)}``);
* ``Expression``: anything else, which only the symbolic check (``symbolic.py``) decides.

Every value keeps its canonical spelling (``text``: equal spellings are equal values). The
other readings of the same text that a comparison needs (a number's words and bare digits, a
worded answer's choice letter) are read with it, once; they follow from ``text``, so equality
ignores them.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from reward_server.checker.extract import TEXT_COMMAND
from reward_server.checker.normalize import canonical
from reward_server.checker.notation import CANONICAL_PART_LABEL, labels_in_order
from reward_server.checker.numbers import base_numeral, parse_number
from reward_server.checker.relations import split_top


def _derived() -> Any:
    """A field read from ``text`` with it: equal texts have equal ones."""
    return field(default=None, compare=False)


@dataclass(frozen=True)
class Number:
    text: str
    value: Fraction
    percent: bool
    words: str | None = _derived()  # written in words ("five"), lower-cased
    digits: str | None = _derived()  # bare decimal digits, read in another numeral's base


@dataclass(frozen=True)
class Numeral:
    text: str
    digits: str
    base: int


@dataclass(frozen=True)
class Choice:
    text: str
    letters: frozenset[str]
    words: str | None = _derived()  # "BD" is also the word "bd"


@dataclass(frozen=True)
class Group:
    """``kind``: the bracket pair (``()``, ``[)``, …), ``set``, ``list`` (a bare ``a, b``) or
    ``parts`` (labelled parts, in order)."""

    text: str
    kind: str
    items: tuple[Value, ...]


@dataclass(frozen=True)
class Words:
    text: str
    words: str  # lower-cased (``\\text{(C)}`` -> ``c``)
    letters: frozenset[str] | None = _derived()  # one choice letter ("(C)")


@dataclass(frozen=True)
class Expression:
    text: str


Value = Number | Numeral | Choice | Group | Words | Expression


@functools.lru_cache(maxsize=16384)
def read_value(text: str) -> Value:
    """The typed value of a canonical answer without its unit. A one-item bracket is a
    parenthesised scalar (``(5)``, ``(C)``) and a one-item set its item: both are the item."""
    number = parse_number(text)
    if number is not None:
        return Number(text, *number, words=text_form(text), digits=_bare_digits(text))
    numeral = base_numeral(text)
    if numeral is not None and numeral[1] is not None:
        return Numeral(text, numeral[0], numeral[1])
    letters = choice_letters(text)
    if letters is not None and len(letters) > 1:
        return Choice(text, letters, words=text_form(text))
    labels = _PART.findall(text)
    if len(labels) > 1 and _PART.match(text) and labels_in_order(labels):
        # "(a)3, (b)5", as notation.labelled_parts writes them; labels out of their order or
        # with a gap are no parts, whose order could be taken from their places
        items = (_PART.sub("", item) for item in split_top(text, ","))
        return Group(text, "parts", tuple(value_of(item) for item in items))
    structure = parse_structure(text)
    if structure is not None:
        kind, items = structure
        if kind in ("()", "set") and len(items) == 1:
            return value_of(items[0])
        return Group(text, kind, tuple(value_of(item) for item in items))
    words = text_form(text)
    if words is not None:
        return Words(text, words, letters=letters)
    return Expression(text)


def value_of(text: str) -> Value:
    """The value of an answer as written (a group's item, a side, a step): its canonical
    spelling read."""
    return read_value(canonical(text))


def _bare_digits(text: str) -> str | None:
    numeral = base_numeral(text)
    return numeral[0] if numeral is not None and numeral[1] is None else None


_PART = re.compile(CANONICAL_PART_LABEL + r"(?=\S)")


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
    """(kind, items) for ``(a,b)``, ``[a,b)``…, ``\\{a,b\\}`` or a bare ``a, b`` list; else None."""
    if s.startswith("\\{") and s.endswith("\\}") and _closes_at_end(s[1:]):
        return "set", split_top(s[2:-2], ",")
    if len(s) >= 2 and s[0] in "([" and s[-1] in ")]" and _closes_at_end(s):
        return s[0] + s[-1], split_top(s[1:-1], ",")
    items = split_top(s, ",")
    return ("list", items) if len(items) > 1 else None


_TEXT_CMDS = re.compile(TEXT_COMMAND + r"\{([^{}]*)\}")
_WORDS = re.compile(r"[a-z]+(?:[ '\-][a-z]+)*")


def text_form(s: str) -> str | None:
    """Lower-cased words of a textual answer (``\\text{(C)}`` -> ``c``), or None if not text."""
    t = _TEXT_CMDS.sub(r"\1", s).strip().lower().rstrip(".").strip()
    m = re.fullmatch(r"\(([a-z])\)", t)
    if m:
        t = m.group(1)
    return t if _WORDS.fullmatch(t) else None


_CHOICE = re.compile(r"\(([A-Ea-e])\)|([A-Ea-e])")  # "(B)" or "B", never "(b, a)"


def choice_letters(s: str) -> frozenset[str] | None:
    """The multiple-choice letters of ``B, D``, ``\\text{(D), (B)}``, ``(B) and (D)`` or ``BD``
    (A–E, any order and wrapping), else None."""
    t = _TEXT_CMDS.sub(r"\1", s).strip()
    if re.fullmatch(r"[A-E]{2,5}", t):
        return frozenset(t) if len(set(t)) == len(t) else None
    tokens = [x for x in re.split(r"\s*(?:,|\band\b|\s)\s*", t) if x]
    letters = [(m.group(1) or m.group(2)).upper() for x in tokens if (m := _CHOICE.fullmatch(x))]
    if not tokens or len(letters) != len(tokens) or len(set(letters)) != len(letters):
        return None
    return frozenset(letters)
