"""An answer's text read as the checker reads it, for the tests of its layers: the tree of the
one item it holds (``tree``), that item's value (``value``) and its statement (``statement``)."""

from __future__ import annotations

from reward_server.checker import tree as t
from reward_server.checker.extract import answer_text
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
