"""An answer's text read as the checker reads it, for the tests of its layers: the tree of the
one item it holds (``tree``), that item's value (``value``) and its statement (``statement``)."""

from __future__ import annotations

from reward_server.checker import tree as t
from reward_server.checker.extract import answer_text
from reward_server.checker.pending import SymbolicCheck
from reward_server.checker.reading import Refused, Statement, read_text
from reward_server.checker.syntax import Unparsable, parse
from reward_server.checker.values import Value, item_value, unwrapped


def tree(text: str) -> t.Node:
    """The tree of an answer as written (extraction and parse), a lone item unwrapped."""
    read = parse(answer_text(text))
    if isinstance(read, Unparsable):
        raise AssertionError(f"{text!r} does not parse: {read}")
    return unwrapped(read)


def value(text: str) -> Value:
    """The value an answer states, its unit taken off."""
    return item_value(tree(text))


def statement(text: str) -> Refused | Statement:
    """The statement of an answer that is no sentence."""
    return read_text(answer_text(text))


def check(
    answer: str,
    reference: str,
    steps: tuple[tuple[str, str], ...] = (),
    congruence: tuple[tuple[str, ...], str] | None = None,
) -> SymbolicCheck:
    """A symbolic check built from the texts of its parts, as ``decide`` builds it from their
    reading: values, steps of values, a congruence's side and modulus trees."""
    typed = None
    if congruence is not None:
        sides, modulus = congruence
        typed = (tuple(tree(side) for side in sides), tree(modulus))
    return SymbolicCheck(
        value(answer),
        value(reference),
        tuple((value(left), value(right)) for left, right in steps),
        typed,
    )
