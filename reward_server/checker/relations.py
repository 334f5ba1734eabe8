"""Relations in an answer: equations (``x = 12``, ``20 - 8 = 12``, ``f(x) = 2x+1``) and
congruences (``17 \\equiv 2 \\pmod 5``), split into their sides once.

An assignment's left side names the quantity and is dropped; a calculation's steps must hold
(``13 = 12`` is no answer); a congruence answers its least residue.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass

from reward_server.checker.extract import TEXT_COMMAND
from reward_server.checker.numbers import parse_number
from reward_server.checker.units import split_unit
from reward_server.protocol import Reason

_GREEK = r"\\(?:alpha|beta|gamma|delta|epsilon|theta|lambda|mu|phi|varphi|psi|omega|rho|sigma|tau)"
# What may stand left of "=" in an assignment: x, x_1, f(x), \theta (never \pi or \sin).
VARIABLE = re.compile(rf"(?:[A-Za-z]|{_GREEK})(?:_\{{?\w+\}}?)?|[A-Za-z]\([A-Za-z]\)")


def split_top(s: str, sep: str) -> list[str]:
    """``s`` split on ``sep`` outside any bracket, each part stripped."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(s):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(s[start:i])
            start = i + 1
    parts.append(s[start:])
    return [p.strip() for p in parts]


_COMMAND_OR_TEXT = re.compile(TEXT_COMMAND + r"\{[^{}]*\}|\\[A-Za-z]+")


def checked_steps(sides: list[str]) -> list[tuple[str, str]]:
    """The steps of a calculation that must hold: consecutive sides with no unknown in them.

    A side with an unknown is a formula (``P = 2l + 2w = 2(5) + 2(3) = 16``, ``-\\frac{b}{a} =
    5``): whether it holds depends on the question, which the grader does not see. Steps
    between numbers are checked (``20 - 7 = 12`` is false), and the last side is the value."""
    values = [split_unit(side)[0] for side in sides]  # "5 + 7 = 12 apples": the step is 5+7=12
    return [(a, b) for a, b in itertools.pairwise(values) if not (_unknown(a) or _unknown(b))]


def _unknown(side: str) -> bool:
    """A letter other than the constants e and i, outside commands and text."""
    return re.search(r"[A-Za-df-hj-z]", _COMMAND_OR_TEXT.sub(" ", side)) is not None


def split_equation(s: str) -> tuple[str | None, list[str]] | None:
    """(label, sides) of an equation: the left side when it names the quantity (``x``,
    ``f(x)``, ``\\cos x``, ``a + b``) else None, and the sides after it; None when ``s`` has no
    top-level ``=`` or is a list (``x=1, x=2``: its items are compared one by one)."""
    if "=" not in s or any(op in s for op in ("\\le", "\\ge", "<", ">", "\\ne")):
        return None
    sides = split_top(s, "=")
    if len(sides) == 1 or len(split_top(s, ",")) > 1:
        return None
    constant = sides[0] in ("e", "i")  # "e = 3" is a false equation, not an assignment
    if not constant and (VARIABLE.fullmatch(sides[0]) or _names_a_quantity(sides[0])):
        return sides[0], sides[1:]
    return None, sides


@dataclass(frozen=True)
class Label:
    """The left side of an equation that names the quantity it gives (``split_equation``), read
    once. ``plain``: a plain name (``x``, ``x_1``, ``\\theta``, ``f(x)``), which interchanges
    with any other; ``key``: its spelling without spaces, a letter's brackets dropped
    (``\\sin(x)`` is ``\\sin x``), which an expression's must match."""

    text: str
    plain: bool
    key: str


def read_label(text: str | None) -> Label | None:
    if text is None:
        return None
    key = re.sub(r"\s+", "", re.sub(r"\(([A-Za-z])\)", r" \1", text))
    return Label(text, VARIABLE.fullmatch(text) is not None, key)


def same_quantity(label: Label | None, other: Label | None) -> bool:
    """Whether two left sides name the same quantity. Plain names are labels and interchange
    (``y = 2x+1`` answers ``f(x) = 2x+1``); a left side that is an expression is part of what
    the equation says, so ``\\cos x = \\frac12`` does not answer ``\\sin x = \\frac12``."""
    if label is None or other is None:
        return label is other
    return (label.plain and other.plain) or label.key == other.key


# A plain name where it stands alone: no letter or command before it, no letter after it.
_NAMES = [
    re.compile(rf"(?<![A-Za-z\\]){pattern}(?![A-Za-z])")
    for pattern in (
        rf"(?:[A-Za-z]|{_GREEK})",
        rf"(?:[A-Za-z]|{_GREEK})_\{{?\w+\}}?",
        r"[A-Za-z]\([A-Za-z]\)",
    )
]


def names_in(sides: tuple[str, ...]) -> frozenset[str]:
    """The plain names that occur in ``sides`` (``2x + y_1`` holds ``x``, ``y`` and ``y_1``),
    read once, so that ``relates_labels`` looks a label up."""
    return frozenset(m.group() for side in sides for names in _NAMES for m in names.finditer(side))


def relates_labels(label: Label | None, other: Label | None, names: frozenset[str]) -> bool:
    """Whether two equations relate each other's names rather than name a quantity each: one
    left side (a plain name) occurs on the other's right (``y = x`` and ``x = y``, ``y = 2x``
    and ``x = \\frac{y}{2}``; ``names``: the other's ``names_in`` its sides). Then they are
    compared as whole relations; ``y = 2x+1`` and ``f(x) = 2x+1`` name the same quantity."""
    if label is None or other is None or label.text == other.text:
        return False
    return label.plain and label.text in names


_FUNCTIONS = r"\\(?:sin|cos|tan|cot|sec|csc|log|ln|angle|triangle|measuredangle)(?![A-Za-z])"
# Decorations that turn letters into the name of a quantity: \overline{AB}, \vec{v}, \text{Area}.
_DECORATED = (
    r"\\(?:overline|overrightarrow|vec|hat|widehat|bar|tilde|mathbf|mathrm|text|operatorname)"
    r"\s*\{[A-Za-z ]*\}"
)


def _names_a_quantity(side: str) -> bool:
    """``x + y``, ``a_1 b_1``, ``\\sin x``, ``m\\angle A``, ``\\overline{AB}``: an expression of
    variables only (no digit, no constant such as ``\\pi``, ``e`` or ``i``) names the quantity
    asked for, so ``x + y = 5`` answers 5; ``2x = 14`` is an equation to solve, not its
    solution."""
    rest = re.sub(_DECORATED + "|" + _FUNCTIONS + "|" + _GREEK + r"|_\{?\w+\}?", " v ", side)
    if any(ch.isdigit() or ch == "\\" for ch in rest) or not re.search(r"[A-Za-z]", rest):
        return False
    letters = re.findall(r"[A-Za-z]+", rest)
    return all(w not in ("e", "i") for w in letters) and bool(
        re.fullmatch(r"[A-Za-z_{}^+\-*/() |]+", rest)
    )


# ------------------------------------------------------------------ congruences


_EQUIV = re.compile(r"\\equiv(?![A-Za-z])|\u2261")
# "\pmod{5}", "\pmod 5", "(\bmod 5)", "(\text{mod } 5)", "(mod 5)", "\mod 5" at the end.
_MODULUS = re.compile(
    r"\s*(?:\\pmod\s*\{?\s*(?P<a>[^{}()\s]+)\s*\}?"
    r"|\(\s*(?:\\(?:text|mathrm|operatorname)\s*\{\s*)?\\?[bp]?mod\s*\}?\s*(?P<b>[^(){}\s]+)\s*\)"
    r"|\\[bp]?mod\s*\{?\s*(?P<c>[^{}()\s]+)\s*\}?)\s*$"
)


def congruence(s: str) -> tuple[tuple[str, ...], str | None] | None:
    """(sides, modulus) of ``17 \\equiv 2 \\pmod 5`` (``(17, 2)``, ``5``), with a leading name
    dropped as in an equation (``x \\equiv 2 \\pmod 5`` -> ``[2]``); None without ``\\equiv``.

    A congruence is not an equality: its last side answers only when every step holds modulo
    the modulus and that side is the least residue (``decide.decide``); without a modulus it
    is read as an equality, so ``13 \\equiv 12`` is a false equation like ``13 = 12``."""
    if not _EQUIV.search(s):
        return None
    m = _MODULUS.search(s)
    modulus = next((g for g in m.groups() if g), None) if m else None
    body = s[: m.start()] if m else s
    sides = tuple(side.strip() for side in _EQUIV.split(body))
    if len(sides) > 1 and (VARIABLE.fullmatch(sides[0]) or _names_a_quantity(sides[0])):
        sides = sides[1:]
    return sides, modulus


def congruence_value(
    sides: tuple[str, ...], modulus: str | None, integer: Callable[[str], int | None] | None = None
) -> Reason | str | None:
    """What a congruence answers: without a modulus it is an equation (``13 \\equiv 12`` reads as
    ``13 = 12``); with one, its last side when every step holds modulo it and that side is the
    least residue (``2^{10} \\equiv 4 \\pmod 5`` answers 4; ``5 \\equiv 12 \\pmod 7`` answers
    nothing: ``false_equation``). ``integer`` reads a side (default: an exact integer, in the
    server process; the symbolic worker passes its own); None: a side is no integer to it."""
    if modulus is None:
        return " = ".join(sides)
    values = [(integer or _exact_integer)(side) for side in [*sides, modulus]]
    if any(v is None for v in values):
        return None
    *residues, n = values
    if n <= 0 or not 0 <= residues[-1] < n:  # type: ignore[operator]
        return Reason.FALSE_EQUATION
    if any((a - b) % n for a, b in itertools.pairwise(residues)):  # type: ignore[operator]
        return Reason.FALSE_EQUATION
    return str(residues[-1])


def _exact_integer(text: str) -> int | None:
    value = parse_number(text)
    if value is None or value[1] or value[0].denominator != 1:
        return None
    return int(value[0])
