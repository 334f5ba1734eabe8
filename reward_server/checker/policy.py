"""The answer policy, in one place: an answer commits to one value (or to the one set or tuple
that the reference is), and the only text it may hold is wrapping, a unit, or an assignment.

A policy learns whatever the checker lets through. Words that hedge (``7 or more``), negate
(``9 is wrong``) or change the value (``5 thousand`` against 5, ``9 squared``) each earn 0 with
a named reason, decided here in bounded time, before any equivalence check: ``word_problem``
for a short answer's tree, ``refusal`` for the words of a sentence or around a box. The other two
refusals are rules of their own modules: a unit other than the reference's
(``units.units_differ``) and a calculation whose steps differ (``relations.checked_steps``).
``docs/reward-server.md`` states the policy; ``tests/reward_server/exploit_corpus.py`` holds
completions that try each class.
"""

from __future__ import annotations

import itertools
import re

from reward_server.checker import tree as t
from reward_server.checker.lexicon import (
    APPROXIMATE,
    APPROXIMATE_PAIRS,
    HEDGES,
    MODAL_HEDGES,
    MULTIPLIERS,
    NEGATIONS,
    NUMBER_WORDS,
    NUMERIC_MULTIPLIERS,
    OR_BOUNDS,
    PROSE,
    SHORT_ANSWER_HEDGES,
)
from reward_server.protocol import Reason

# A past participle written after the value ("6 cubed", "4 doubled", "9 reduced") names an
# operation on it, never a unit; "hundred" is the one number word of that shape.
_OPERATION_AFTER_VALUE = re.compile(r"(?!hundred)[a-z]{3,}ed")


def tree_words(node: t.Node) -> list[str]:
    """Lower-cased words of an answer's tree, in order: every word of a text command (single
    letters too: ``\\mathrm{i}``), every run of letters, every number word, and the words that
    join its items ("7 or more")."""
    found: list[str] = []
    stack: list[t.Node | str] = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, str):
            found.append(current)
            continue
        if isinstance(current, t.Word):
            found += re.findall(r"[a-z]+", current.text.lower())
        elif isinstance(current, t.Text):
            found += re.findall(r"[a-z]+", current.content.lower())
        below: list[t.Node | str] = list(t.children(current))
        if isinstance(current, t.Answer):
            joined: list[t.Node | str] = [below[0]]
            for separator, item in zip(current.separators, below[1:], strict=True):
                joined += [separator, item] if separator in ("or", "and") else [item]
            below = joined
        stack.extend(reversed(below))
    return found


def word_problem(node: t.Node, numeric: bool) -> Reason | None:
    """Why the words of an answer's tree make it no answer (``hedged_answer``,
    ``negated_answer``, ``several_candidates``, ``multiplier_word``, ``prose_in_answer``), or
    None. ``numeric``: the answer reads as one number, so numeric multiplier words are part of
    it (``5 thousand``)."""
    ordered = tree_words(node)
    found = set(ordered)
    if not found:
        return None
    if found & NEGATIONS:  # checked first: "9 is incorrect" is a negation, not just prose
        return Reason.NEGATED_ANSWER
    if found & SHORT_ANSWER_HEDGES:
        return Reason.HEDGED_ANSWER
    if any(a == "or" and b in OR_BOUNDS for a, b in itertools.pairwise(ordered)):
        return Reason.HEDGED_ANSWER  # "18 or so", "18 give or take"
    digits = any(isinstance(part, t.Num) for part in t.walk(node))
    if digits and found & NUMBER_WORDS.keys():
        return Reason.SEVERAL_CANDIDATES  # "3 (or four)"
    multipliers = found & MULTIPLIERS
    if multipliers and not (numeric and multipliers <= NUMERIC_MULTIPLIERS.keys()):
        return Reason.MULTIPLIER_WORD
    if _operation_after_value(node):
        return Reason.MULTIPLIER_WORD  # "4 doubled", "9 raised": an operation, not a unit
    if found & PROSE:
        return Reason.PROSE_IN_ANSWER
    return None


def _operation_after_value(node: t.Node) -> bool:
    if not isinstance(node, t.Product) or isinstance(node.factors[-2], t.Word | t.Text):
        return False  # "250 people signed": the word after a unit is no operation on the value
    last = node.factors[-1]
    text = (
        last.text if isinstance(last, t.Word) else last.content if isinstance(last, t.Text) else ""
    )
    return _OPERATION_AFTER_VALUE.fullmatch(text.strip().lower()) is not None


def refusal(words: list[str | None], *, bound_at_end: bool = False) -> Reason | None:
    """Why the words of a sentence refuse its value: a negation or a rejection anywhere
    (``negated_answer``); a hedge or a qualifier anywhere, a modal ("could be") or a bound after
    "or" (``hedged_answer``). ``bound_at_end``: the words stand before a boxed value, so a bound
    or an approximation last ("at least \\boxed{18}") hedges it too. ``None`` stands for a
    value between the words."""
    present = {w for w in words if w}
    if present & NEGATIONS:
        return Reason.NEGATED_ANSWER
    if present & HEDGES:
        return Reason.HEDGED_ANSWER
    for a, b in itertools.pairwise(words):
        if (a, b) in MODAL_HEDGES or (a == "or" and b in OR_BOUNDS):
            return Reason.HEDGED_ANSWER
    last = tuple(words[-2:])
    if bound_at_end and last[-1:] and (last[-1] in APPROXIMATE or last in APPROXIMATE_PAIRS):
        return Reason.HEDGED_ANSWER
    return None
