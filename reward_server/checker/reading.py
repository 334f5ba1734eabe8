"""Reading an answer once: the first step of the checker's pipeline (parse → typed value →
compare). ``read_statement`` takes an answer as extracted (a short answer, a sentence, JSON),
parses it with the grammar (``syntax.parse``) and returns what it states, or why it states
nothing acceptable:

* ``Refused``: a sentence that states no single value (``sentence.read``), or text the grammar
  cannot read (``unparsable_answer``, with the position where reading stopped logged);
* ``Statement``: the answer's tree, the relation it is written in (``relations.py``: an
  equation's label and sides, a congruence, an inequality as its set), the value it commits
  to with its unit (``units.split_unit``) read into a typed value (``values.value_of``), and
  the answer policy's verdict on its words (``policy.word_problem``), each read once.

Every rule here reads the tree; no text is rewritten after extraction. ``decide.decide`` then
compares two statements.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field

from reward_server.checker import policy, relations, sentence, syntax
from reward_server.checker import tree as t
from reward_server.checker.extract import answer_text, json_answer
from reward_server.checker.units import split_unit
from reward_server.checker.values import (
    Group,
    Number,
    Value,
    item_value,
    number_of,
    unwrapped,
    value_of,
    words_of,
)
from reward_server.protocol import Reason

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Refused:
    reason: Reason


@dataclass(frozen=True)
class Statement:
    """What an answer states, each part read once. ``tree``: the answer as read; ``value`` and
    ``unit``: what it states without its unit (of an equation, ``decide.decide`` takes the
    side that answers), ``value`` read from ``value_tree``; ``label`` and ``side_statements``:
    the equation it is written as, if any (``relations.equation``), with the plain names on its
    sides (``side_names``) and the steps between numbers that must hold read into values
    (``steps``); ``congruence``: its sides and modulus when it is one, and what it answers
    (``residue``); ``refusal``: what the answer policy says of its words, which a worded
    reference overrides; ``words``: the whole answer as words, if it is that."""

    tree: t.Node
    value: Value
    value_tree: t.Node
    unit: str | None
    refusal: Reason | None = None
    words: str | None = None
    label: relations.Label | None = None
    side_statements: tuple[Statement, ...] | None = field(default=None, compare=False)
    steps: tuple[tuple[Value, Value], ...] = field(default=(), compare=False)
    side_names: frozenset[t.Node] = field(default=frozenset(), compare=False)
    congruence: tuple[tuple[t.Node, ...], t.Node] | None = field(default=None, compare=False)
    # ``relations.congruence_value``: the statement of the residue, false_equation, or None
    # when a side is no exact integer here (the symbolic check reads it)
    residue: Statement | Reason | None = field(default=None, compare=False)


def read_statement(
    text: str,
    same_value: sentence.SameValue,
    *,
    reference: bool = False,
    as_written: bool = False,
) -> Refused | Statement:
    """What ``text`` states, read once. An answer written as JSON is the value it holds, one
    written as a sentence the value the sentence states (``sentence.read``, which asks
    ``same_value`` whether two values it states are one). ``reference``: a dataset label or a
    reference answer, never refused (one that states no single value is read as written).
    ``as_written``: not read as a sentence (the other side is a worded answer, compared as
    words)."""
    text = json_answer(text)
    if not as_written and sentence.is_sentence(text):
        parts = sentence.prose_parts(text)
        if parts is not None:
            return _read_parts(parts, same_value, reference)
        reading = sentence.read(text, same_value)
        if reading.phrases:
            node = _stated(reading)
            if node is not None:
                return statement(node)
        elif not reference:
            return Refused(reading.reason or Reason.PROSE_IN_ANSWER)
    return read_text(answer_text(text), reference=reference)


def read_text(text: str, *, reference: bool = False) -> Refused | Statement:
    """The statement of an answer's text (no sentence), or ``unparsable_answer``."""
    node = syntax.parse(text)
    if isinstance(node, syntax.Unparsable):
        log.info(
            "%s unparsable at %d (%s): %.80r",
            "reference" if reference else "answer", node.position, node.message, text,
        )  # fmt: skip
        return Refused(Reason.UNPARSABLE_REFERENCE if reference else Reason.UNPARSABLE_ANSWER)
    return statement(node)


def _stated(reading: sentence.Reading) -> t.Node | None:
    """The tree of what a sentence states: its phrases read, as one answer."""
    items = []
    for phrase in reading.phrases:
        node = syntax.parse(answer_text(phrase))
        if isinstance(node, syntax.Unparsable):
            return None
        items.append(unwrapped(node))
    if reading.negative:
        items[0] = t.Neg(items[0])
    if len(items) == 1:
        return items[0]
    separator = "or" if reading.alternatives else ","
    return t.Answer(tuple(items), (separator,) * (len(items) - 1))


def _read_parts(
    parts: list[tuple[str, str]], same_value: sentence.SameValue, reference: bool
) -> Refused | Statement:
    """A multi-part answer whose labels are named in prose (``sentence.prose_parts``): each
    part read on its own (``For part (a), the answer is 3``: 3), then the parts as one group;
    a part that is refused refuses the answer."""
    read = [read_statement(text, same_value, reference=reference) for _, text in parts]
    for part in read:
        if isinstance(part, Refused):
            return part
        if part.refusal is not None and not reference:
            return Refused(part.refusal)
    labelled = tuple(
        t.Labelled(label, part.tree)  # type: ignore[union-attr]
        for (label, _), part in zip(parts, read, strict=True)
    )
    return statement(t.Answer(labelled, (",",) * (len(labelled) - 1)))


def read_pair(
    answer: str, reference: str, same_value: sentence.SameValue
) -> tuple[Refused | Statement, Refused | Statement]:
    """An answer and its reference, each read once (``read_statement``). A worded reference
    ("no solution") is compared as words, so its answers are never read as sentences; nor is an
    answer spelled as the reference is."""
    reference_read = read_statement(reference, same_value, reference=True)
    worded = isinstance(reference_read, Statement) and reference_read.words is not None
    as_written = worded or answer_text(answer) == answer_text(reference)
    return read_statement(answer, same_value, as_written=as_written), reference_read


# ------------------------------------------------------------------ the rules over the tree


@functools.lru_cache(maxsize=16384)
def statement(node: t.Node) -> Statement:
    """The ``Statement`` of an answer's tree."""
    whole = node = unwrapped(node)
    words = _words(node)
    numeric = number_of(split_unit(node)[0]) is not None
    refusal = policy.word_problem(node, numeric=numeric)
    if words is not None:
        # A worded answer has no unit: "no solution" is not "no" in solutions.
        return Statement(whole, value_of(node), node, None, refusal, words)
    if isinstance(node, t.Matrix) and node.environment == "cases":
        node = t.Answer(tuple(row[0] for row in node.rows if row), (",",) * (len(node.rows) - 1))
    if isinstance(node, t.Answer):
        return _list_statement(whole, node, refusal)
    interval = relations.as_set(node)
    if interval is not None:
        return _valued(whole, interval, refusal)
    expanded = relations.plus_minus(node)
    if expanded is not None and not isinstance(node, t.Relation):
        return _valued(whole, t.Answer(expanded, (",",)), refusal)
    congruence = relations.congruence(node)
    if congruence is not None:
        return _congruence_statement(whole, congruence, refusal)
    split = relations.equation(node)
    if split is not None:
        label, sides = split
        roots = relations.plus_minus(sides[-1]) if len(sides) == 1 and label else None
        if roots is not None and label is not None and label.plain:
            return _valued(whole, t.Answer(roots, (",",)), refusal)  # "x = \\pm 3"
        return _equation_statement(whole, split, refusal)
    return _valued(whole, node, refusal)


def _words(node: t.Node) -> str | None:
    """The whole answer as words (``no solution``), never a number word or a choice list."""
    if isinstance(node, t.Word) and node.number:
        return None
    return words_of(node)


def _valued(whole: t.Node, node: t.Node, refusal: Reason | None) -> Statement:
    """A statement of one value: the value of ``node`` without its unit."""
    value_node, unit = split_unit(node)
    value = value_of(value_node)
    if unit == "%" and isinstance(value, Number):
        value = Number(value.tree, value.value, True, value.digits)
    return Statement(whole, value, value_node, unit, refusal)


def _equation_statement(
    whole: t.Node,
    split: tuple[relations.Label | None, tuple[t.Node, ...]],
    refusal: Reason | None,
) -> Statement:
    label, sides = split
    last = _valued(whole, sides[-1], refusal)
    side_statements = tuple(_valued(side, side, None) for side in sides)
    steps = tuple(
        (item_value(left), item_value(right)) for left, right in relations.checked_steps(sides)
    )
    return Statement(
        whole,
        last.value,
        last.value_tree,
        last.unit,
        refusal,
        label=label,
        side_statements=side_statements,
        steps=steps,
        side_names=relations.names_in(sides),
    )


def _congruence_statement(
    whole: t.Node, congruence: tuple[tuple[t.Node, ...], t.Node | None], refusal: Reason | None
) -> Statement:
    sides, modulus = congruence
    if modulus is None:
        # Without a modulus a congruence is an equality: "13 \\equiv 12" is "13 = 12".
        relation = t.Relation(sides, ("=",) * (len(sides) - 1))
        split = relations.equation(relation) or (None, sides)
        return _equation_statement(whole, split, refusal)
    integers = [relations.exact_integer(side) for side in (*sides, modulus)]
    residue: Statement | Reason | None = None
    if None not in integers:
        *residues, n = integers
        found = relations.congruence_value(residues, n)  # type: ignore[arg-type]
        residue = found if isinstance(found, Reason) else _valued(sides[-1], sides[-1], None)
    last = _valued(whole, sides[-1], refusal)
    return Statement(
        whole,
        last.value,
        last.value_tree,
        None,
        refusal,
        congruence=(sides, modulus),
        residue=residue,
    )


def _list_statement(whole: t.Node, node: t.Answer, refusal: Reason | None) -> Statement:
    """Several items: ``x < -2 or x > 2`` as the union of their sets; solutions of a system
    separated by ``;`` (``a=1, b=4; a=3, b=2``) as tuples; values of named unknowns
    (``x = 2, y = 5``); roots (``x = 1, x = 2``, ``x = 1, 2``) as a list; ``\\pm`` in an item
    as its two values."""
    items = list(node.items)
    union = _union_of_sets(node)
    if union is not None:
        return _valued(whole, union, refusal)
    if ";" in node.separators:
        systems = _systems(node)
        if systems is not None:
            return Statement(whole, systems, node, None, refusal)
    assigned = [_assignment(item) for item in items]
    names = [a[0] for a in assigned if a is not None]
    if len(names) == len(items) and len(set(names)) == len(names):
        values = tuple(item_value(a[1]) for a in assigned if a is not None)
        return Statement(whole, Group(node, "named", values, tuple(names)), node, None, refusal)
    roots = assigned[0] is not None and (
        len(set(names)) == 1 and all(a is None or a[0] == names[0] for a in assigned)
    )
    if roots:
        values = [
            item_value(a[1]) if a else item_value(i) for a, i in zip(assigned, items, strict=True)
        ]
        return Statement(whole, Group(node, "list", tuple(values)), node, None, refusal)
    expanded: list[t.Node] = []
    for item in items:
        pair = relations.plus_minus(item) if not isinstance(item, t.Labelled) else None
        expanded.extend(pair or (item,))
    if len(expanded) != len(items):
        node = t.Answer(tuple(expanded), (",",) * (len(expanded) - 1))
    return Statement(whole, value_of(node), node, None, refusal)


def _assignment(item: t.Node) -> tuple[str, t.Node] | None:
    """(name, value) of an item ``x = 3`` that assigns a plain name one value."""
    split = relations.equation(unwrapped(item))
    if split is None or split[0] is None or not split[0].plain or len(split[1]) != 1:
        return None
    return _name_key(split[0].tree), split[1][0]


def _name_key(node: t.Node) -> str:
    if isinstance(node, t.Name):
        return node.text
    return repr(node)


def _union_of_sets(node: t.Answer) -> t.Node | None:
    """One-variable inequalities joined by "or": the union of their sets ("and" would
    intersect them, and is left alone)."""
    if len(node.items) < 2 or set(node.separators) != {"or"}:
        return None
    sets = [relations.as_set(unwrapped(item)) for item in node.items]
    if any(s is None for s in sets):
        return None
    names = {part for item in node.items for part in t.walk(item) if isinstance(part, t.Name)}
    if len(names) != 1:
        return None  # "x < 1 or y > 2" relates two unknowns: no set of one variable
    return t.SetOp(tuple(sets), ("cup",) * (len(sets) - 1))  # type: ignore[arg-type]


def _systems(node: t.Answer) -> Value | None:
    """``a=1, b=4; a=3, b=2``: the solutions of a system, each the tuple of its values in the
    order its names are written; ``x = 1; x = -2``: a list of roots."""
    groups: list[list[t.Node]] = [[node.items[0]]]
    for separator, item in zip(node.separators, node.items[1:], strict=True):
        if separator == ";":
            groups.append([item])
        else:
            groups[-1].append(item)
    if all(len(g) == 1 for g in groups):
        return None  # "x = 1; x = -2": roots, as a list
    solutions = []
    for group in groups:
        assigned = [_assignment(item) for item in group]
        if None in assigned or len(group) < 2:
            return None
        names = [a[0] for a in assigned if a is not None]
        if len(set(names)) != len(names):
            return None  # "x=1, x=2" is a list of roots, not a tuple
        values = tuple(item_value(a[1]) for a in assigned if a is not None)
        solutions.append(Group(t.Answer(tuple(group), ()), "()", values))
    if len(solutions) == 1:
        return solutions[0]
    return Group(node, "list", tuple(solutions))


def joins_answer(tail: str) -> bool:
    """Whether the text right after a boxed answer is part of it: it states a value or refuses
    one (``\\boxed{18} dollars``, ``\\boxed{7} or more``, ``\\boxed{9}, but that is wrong``);
    text that does neither (``I hope it is correct.``) is not."""
    return sentence.states_or_refuses(tail)


def refusal(words: str) -> Reason | None:
    """Why the words before a boxed answer refuse it (``sentence.refusal``), or None."""
    return sentence.refusal(words)


def states_value(text: str) -> bool:
    """Whether text after an answer block gives a value at all (``sentence.states_value``)."""
    return sentence.states_value(text)
