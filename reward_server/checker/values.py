"""Typed values: what an answer's tree states once read (``reading.py`` reads an answer into a
``Statement`` whose value is one of these; ``compare.py`` compares them type by type, from
their fields only).

* ``Number``: an exact ``Fraction`` and whether it was written as a percent (``numbers.py``);
* ``Numeral``: digits with a base subscript (``1011_2``), with their value when the digits are
  the base's;
* ``Choice``: multiple-choice letters (``B, D``);
* ``Group``: a tuple, an interval, a set, a bare list, the labelled parts of a multi-part
  answer (``(a) 3, (b) 5``) or the values of named unknowns (``x = 2, y = 5``), its items read
  into values the same way;
* ``Words``: a worded answer (``no solution``, ``\\text{(C)}``);
* ``Expression``: anything else, which only the symbolic check (``symbolic.py``) decides.

Every value keeps its tree (``tree``: equal trees are equal values, whatever the spacing).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction

from reward_server.checker import numbers, syntax
from reward_server.checker import tree as t
from reward_server.checker.lexicon import NUMERIC_MULTIPLIERS
from reward_server.checker.units import split_unit


@dataclass(frozen=True)
class Number:
    tree: t.Node
    value: Fraction
    percent: bool
    # bare decimal digits (``1011``), read in another numeral's base: follows from the tree
    digits: str | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Numeral:
    tree: t.Node
    digits: str
    base: int
    value: int | None  # None: a digit is not one of the base's (``4_2``)


@dataclass(frozen=True)
class Choice:
    tree: t.Node
    letters: frozenset[str]


@dataclass(frozen=True)
class Group:
    """``kind``: the bracket pair (``()``, ``[)``, …), ``set``, ``list`` (a bare ``a, b``),
    ``parts`` (labelled parts, in order), ``labelled`` (items with labels that are no sequence
    of parts, ``names`` their labels) or ``named`` (values of named unknowns, ``names`` in the
    order written)."""

    tree: t.Node
    kind: str
    items: tuple[Value, ...]
    names: tuple[str, ...] = ()


@dataclass(frozen=True)
class Words:
    tree: t.Node
    words: str  # lower-cased (``\\text{(C)}`` -> ``c``)
    letters: frozenset[str] | None = field(default=None, compare=False)  # one choice letter


@dataclass(frozen=True)
class Expression:
    tree: t.Node


Value = Number | Numeral | Choice | Group | Words | Expression

_CHOICES = frozenset("ABCDE")
_LABEL_ORDERS = ("abcdefgh", ("i", "ii", "iii", "iv", "v", "vi", "vii", "viii"))


def value_of(node: t.Node) -> Value:
    """The typed value of a tree without its unit (``units.split_unit`` takes it off)."""
    node = unwrapped(node)
    if isinstance(node, t.Answer):
        return _items_value(node, list(node.items))
    number = number_of(node)
    if number is not None:
        return number
    if isinstance(node, t.Based):
        return Numeral(node, node.digits, node.base, numbers.numeral_value(node.digits, node.base))
    if isinstance(node, t.Labelled):
        if node.value is None:
            return Words(node, node.label, letters=_letters(node.label))
        return value_of(node.value)
    letters = choice_letters(node)
    if letters is not None and len(letters) > 1:
        return Choice(node, letters)
    if isinstance(node, t.Text):
        return _text_value(node)
    if isinstance(node, t.Bracket):
        kind = ("(" if node.opening == "<" else node.opening) + (
            ")" if node.closing == ">" else node.closing
        )
        return Group(node, kind, tuple(item_value(i) for i in node.items))
    if isinstance(node, t.SetOf):
        if len(node.items) == 1:
            return item_value(node.items[0])
        return Group(node, "set", tuple(item_value(i) for i in node.items))
    if isinstance(node, t.Matrix):
        cells = _vector(node)
        if cells is not None:
            kind = "list" if node.environment == "cases" else "()"
            return Group(node, kind, tuple(item_value(c) for c in cells))
    words = words_of(node)
    if words is not None:
        return Words(node, words, letters=_letters(words))
    return Expression(node)


def item_value(node: t.Node) -> Value:
    """An item of a group, a side, a step: its value, its unit taken off."""
    return value_of(split_unit(unwrapped(node))[0])


def unwrapped(node: t.Node) -> t.Node:
    """The node a box, a parenthesis around one item or an answer of one item stands for."""
    while True:
        if isinstance(node, t.Decorated) and node.command in ("boxed", "fbox"):
            node = node.operand
        elif isinstance(node, t.Bracket) and (node.opening, node.closing) == ("(", ")"):
            if len(node.items) != 1:
                return node
            node = node.items[0]
        elif isinstance(node, t.Answer) and len(node.items) == 1:
            node = node.items[0]
        else:
            return node


def number_of(node: t.Node, percent: bool = False) -> Number | None:
    """A ``Number`` when the tree is a number exactly (``numbers.exact``), a percent of one
    (``25\\%``), or one times a numeric multiplier word (``5 thousand``, ``2 dozen``)."""
    if isinstance(node, t.Postfix) and node.marks == ("%",):
        node, percent = node.operand, True
    value = numbers.exact(node)
    if value is None and isinstance(node, t.Product):
        last = node.factors[-1]
        word = last.text.lower() if isinstance(last, t.Word) else None
        if isinstance(last, t.Text):
            word = last.content.strip().lower()
        if word in NUMERIC_MULTIPLIERS and node.joins[-1] in ("", " "):
            rest = node.factors[0] if len(node.factors) == 2 else None
            base = numbers.exact(rest) if rest is not None else None
            if base is not None:
                value = base * NUMERIC_MULTIPLIERS[word]
    if value is None:
        return None
    return Number(node, value, percent, digits=numbers.integer_digits(node))


def _items_value(node: t.Node, items: list[t.Node]) -> Value:
    """The value of several items: labelled parts in their labels' order, the values of named
    unknowns, choice letters, or a bare list."""
    labels = [i.label for i in items if isinstance(i, t.Labelled) and i.value is not None]
    if labels and len(labels) < len(items):
        # some items labelled, others not ("3, (a) 4, (b) 5"): no parts of the question's
        names = tuple(i.label if isinstance(i, t.Labelled) else "" for i in items)
        return Group(node, "labelled", tuple(item_value(i) for i in items), names)
    if len(labels) == len(items) > 1:
        order = next((seq for seq in _LABEL_ORDERS if set(labels) <= set(seq)), None)
        in_order = sorted(labels, key=order.index) if order is not None else None
        if order is None or list(order[: len(labels)]) != in_order:
            # labels out of any sequence, or with a gap ("(a) 3, (c) 5"): no parts of the
            # question's, whose order could be taken from their places
            return Group(node, "labelled", tuple(item_value(i) for i in items), tuple(labels))
        parts = sorted(items, key=lambda i: order.index(i.label))  # type: ignore[union-attr]
        return Group(node, "parts", tuple(item_value(p) for p in parts))
    letters = choice_letters(node)
    if letters is not None and len(letters) > 1:
        return Choice(node, letters)
    return Group(node, "list", tuple(item_value(i) for i in items))


def _vector(node: t.Matrix) -> tuple[t.Node, ...] | None:
    """The cells of a one-row or one-column matrix, or the rows of ``cases`` (a solved system:
    ``x=1 \\\\ y=2``); None for another matrix."""
    rows = node.rows
    if node.environment == "cases":
        return tuple(row[0] for row in rows if row)
    if len(rows) == 1:
        return rows[0]
    if all(len(row) == 1 for row in rows):
        return tuple(row[0] for row in rows)
    return None


_WORDS_TEXT = re.compile(r"[a-z]+(?:[ '\u2019\-][a-z]+)*")


def words_of(node: t.Node) -> str | None:
    """The lower-cased words of a worded answer (``no solution``, ``\\text{Even}``, ``(c)``),
    or None when the tree is not only words."""
    if isinstance(node, t.Word) and not node.number:
        return node.text.lower()
    if isinstance(node, t.Labelled) and node.value is None:
        return node.label  # "(c)" alone: a choice's letter, not a part's label
    if isinstance(node, t.Name) and "_" not in node.text and len(node.text) == 1:
        return node.text.lower()
    if isinstance(node, t.Text):
        content = node.content.strip().lower().rstrip(".").strip()
        m = re.fullmatch(r"\(([a-z])\)", content)
        content = m.group(1) if m else content
        return content if _WORDS_TEXT.fullmatch(content) else None
    if (
        isinstance(node, t.Bracket)
        and (node.opening, node.closing) == ("(", ")")
        and len(node.items) == 1
    ):
        inner = node.items[0]
        return words_of(inner) if isinstance(inner, t.Name) else None
    if isinstance(node, t.Product) and all(j in ("", " ") for j in node.joins):
        if any(isinstance(f, t.Bracket | t.Labelled) for f in node.factors):
            return None  # "f(x)g(x)": letters applied to brackets are no words
        parts = [words_of(f) for f in node.factors]
        if any(p is None for p in parts):
            return None
        text = parts[0] or ""
        for join, part in zip(node.joins, parts[1:], strict=True):
            text += (join or "") + (part or "")
        return text
    return None


def _text_value(node: t.Text) -> Value:
    """A text command's content: words, or an answer written in text (``\\text{5 apples}``,
    ``\\text{(D), (B)}``), read as the answer it is."""
    words = words_of(node)
    if words is not None:
        return Words(node, words, letters=_letters(words))
    inner = syntax.parse(node.content)
    if isinstance(inner, syntax.Unparsable):
        return Expression(node)
    return item_value(inner)


def _letters(words: str) -> frozenset[str] | None:
    return frozenset(words.upper()) if len(words) == 1 and words.upper() in _CHOICES else None


def choice_letters(node: t.Node) -> frozenset[str] | None:
    """The multiple-choice letters of ``B, D``, ``(B) and (D)``, ``\\text{(D), (B)}`` or ``BD``
    (A–E, any order and wrapping, each once), else None."""
    if isinstance(node, t.Word) and not node.number and re.fullmatch(r"[A-E]{2,5}", node.text):
        letters = frozenset(node.text)
        return letters if len(letters) == len(node.text) else None
    if isinstance(node, t.Text):
        inner = syntax.parse(node.content)
        return None if isinstance(inner, syntax.Unparsable) else choice_letters(inner)
    items = node.items if isinstance(node, t.Answer) else (node,)
    if isinstance(node, t.Product) and set(node.joins) == {" "}:
        items = node.factors  # "B D": letters side by side
    found = []
    for item in items:
        item = unwrapped(item)
        if isinstance(item, t.Labelled) and item.value is None:
            letter = item.label
        elif isinstance(item, t.Name) and len(item.text) == 1:
            letter = item.text
        elif isinstance(item, t.Text):
            letter = words_of(item) or ""
        else:
            return None
        if letter.upper() not in _CHOICES or len(letter) != 1:
            return None
        found.append(letter.upper())
    if not found or len(set(found)) != len(found):
        return None
    return frozenset(found)
