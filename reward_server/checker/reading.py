"""Reading an answer once: the first step of the checker's pipeline (read → typed value →
compare). ``read_statement`` takes an answer as written (a short answer, a sentence, JSON) and
returns what it states, or why it states nothing acceptable:

* ``Refused``: a sentence that states no single value (``sentence.read``);
* ``Statement``: the answer's canonical text, the relation it is written in (``relations.py``:
  an equation's sides and the quantity it names, a congruence), the value it commits to with
  its unit (``units.split_unit``) read into a typed value (``values.read_value``), and the
  answer policy's verdict on its words (``policy.word_problem``), each read once.

``decide.decide`` then compares two statements (``compare.py`` for the values). The words of
a response around its final answer are read here too (``joins_answer``, ``refusal``,
``states_value``): the service reads a response's text only through this module.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from reward_server.checker import notation, policy, relations, sentence
from reward_server.checker.normalize import canonical
from reward_server.checker.numbers import parse_number
from reward_server.checker.units import split_unit
from reward_server.checker.values import Value, text_form, value_of
from reward_server.protocol import Reason


@dataclass(frozen=True)
class Refused:
    reason: Reason


@dataclass(frozen=True)
class Statement:
    """What an answer states, each part read once. ``text``: its canonical spelling as a whole;
    ``value`` and ``unit``: what it states without its unit (of an equation, ``decide.decide``
    takes the side that answers); ``sides`` and ``label``: the equation it is written as
    (``relations.split_equation``), if any, with the label read (``relations.Label``), each
    side read (``side_statements``), the plain names on its sides (``side_names``) and the
    steps between numbers that must hold read into values (``steps``); ``congruence``: its
    sides and modulus when it is one, and what it answers (``residue``); ``refusal``: what the
    answer policy says of its words (``policy.word_problem``), which a worded reference
    overrides; ``words``: the whole answer as words, if it is that."""

    text: str
    value: Value
    value_text: str
    unit: str | None
    sides: tuple[str, ...] | None
    label: relations.Label | None
    congruence: tuple[tuple[str, ...], str | None] | None
    refusal: Reason | None
    words: str | None  # the whole answer as words (``values.text_form``), or None
    # Read from ``sides`` and ``congruence`` with them (equal texts have equal ones):
    side_statements: tuple[Statement, ...] | None = field(default=None, compare=False)
    steps: tuple[tuple[Value, Value], ...] = field(default=(), compare=False)
    side_names: frozenset[str] = field(default=frozenset(), compare=False)
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
    text = notation.json_answer(text)
    if not as_written and sentence.is_sentence(text):
        parts = notation.prose_parts(text)
        if parts is not None:
            return _read_parts(parts, same_value, reference)
        reading = sentence.read(text, same_value)
        if reading.value is not None:
            text = reading.value
        elif not reference:
            return Refused(reading.reason or Reason.PROSE_IN_ANSWER)
    return statement(canonical(text))


def _read_parts(
    parts: list[tuple[str, str]], same_value: sentence.SameValue, reference: bool
) -> Refused | Statement:
    """A multi-part answer whose labels are named in prose (``notation.prose_parts``): each
    part read on its own (``For part (a), the answer is 3``: 3), then the parts as one group;
    a part that is refused refuses the answer."""
    read = [read_statement(text, same_value, reference=reference) for _, text in parts]
    for part in read:
        if isinstance(part, Refused):
            return part
        if part.refusal is not None and not reference:
            return Refused(part.refusal)
    texts = (f"({label}){part.text}" for (label, _), part in zip(parts, read, strict=True))
    return statement(canonical(", ".join(texts)))


def read_pair(
    answer: str, reference: str, same_value: sentence.SameValue
) -> tuple[Refused | Statement, Statement]:
    """An answer and its reference, each read once (``read_statement``). A worded reference
    ("no solution") is compared as words, so its answers are never read as sentences; nor is an
    answer spelled as the reference is."""
    reference_read = read_statement(reference, same_value, reference=True)
    assert isinstance(reference_read, Statement)  # a reference is never refused
    as_written = reference_read.words is not None or canonical(answer) == canonical(reference)
    return read_statement(answer, same_value, as_written=as_written), reference_read


@functools.lru_cache(maxsize=16384)
def statement(text: str) -> Statement:
    """The ``Statement`` of a canonical answer."""
    split = relations.split_equation(text)
    sides = tuple(split[1]) if split is not None else None
    words = text_form(text)
    # A worded answer has no unit: "no solution" is not "no" in solutions.
    value_text, unit = (text, None) if words is not None else split_unit(text)
    congruence = relations.congruence(text)
    residue = relations.congruence_value(*congruence) if congruence is not None else None
    return Statement(
        text=text,
        value=value_of(value_text),
        value_text=value_text,
        unit=unit,
        sides=sides,
        label=relations.read_label(split[0]) if split is not None else None,
        congruence=congruence,
        refusal=policy.word_problem(text, numeric=parse_number(text) is not None),
        words=words,
        side_statements=tuple(statement(side) for side in sides) if sides else None,
        side_names=relations.names_in(sides or ()),
        steps=tuple(
            (value_of(left), value_of(right))
            for left, right in relations.checked_steps(list(sides or ()))
        ),
        # a Reason is a str too: only a residue's text is read
        residue=residue if residue is None or isinstance(residue, Reason) else statement(residue),
    )


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
