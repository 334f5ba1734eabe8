"""Relations in an answer's tree: equations (``x = 12``, ``20 - 8 = 12``, ``f(x) = 2x+1``),
inequalities as the sets they describe (``1 \\le x < 2`` is ``[1, 2)``), ``\\pm`` as its two
values, and congruences (``17 \\equiv 2 \\pmod 5``).

An equation's left side names the quantity (a label, dropped) when it is a name or an
expression of names; a calculation's steps between numbers must hold (``13 = 12`` is no
answer); a congruence answers its least residue.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from fractions import Fraction

from reward_server.checker import numbers
from reward_server.checker import tree as t
from reward_server.checker.units import split_unit
from reward_server.protocol import Reason

# Letters that are constants, never the name of a quantity ("e = 3" is a false equation).
CONSTANT_LETTERS = frozenset({"e", "i"})
# The letters that name unknowns in an inequality; another letter is a parameter ("x < a").
UNKNOWNS = frozenset({"x", "y", "z"})
_INFINITY = t.Const("infty")


# ------------------------------------------------------------------ names


def is_plain_name(node: t.Node) -> bool:
    """``x``, ``x_1``, ``\\theta``, ``f(x)``: a name that interchanges with any other."""
    if isinstance(node, t.Name):
        return True
    return _function_of_name(node)


def _function_of_name(node: t.Node) -> bool:
    """``f(x)``: a letter applied to a letter."""
    if not (isinstance(node, t.Product) and len(node.factors) == 2 and node.joins == ("",)):
        return False
    f, argument = node.factors
    return (
        isinstance(f, t.Name)
        and len(f.text) == 1
        and isinstance(argument, t.Bracket)
        and argument.opening == "("
        and len(argument.items) == 1
        and isinstance(argument.items[0], t.Name)
    )


def _function_at_value(node: t.Node) -> bool:
    """``h(2)``, ``f(-1)``: a function's value at a point names that value."""
    if not (isinstance(node, t.Product) and len(node.factors) == 2 and node.joins == ("",)):
        return False
    f, argument = node.factors
    return (
        isinstance(f, t.Name)
        and len(f.text) == 1
        and f.text not in CONSTANT_LETTERS
        and isinstance(argument, t.Bracket)
        and argument.opening == "("
        and len(argument.items) == 1
        and numbers.exact(argument.items[0]) is not None
    )


def _names_a_quantity(node: t.Node) -> bool:
    """``x + y``, ``a_1 b_1``, ``\\sin x``, ``m\\angle A``, ``\\overline{AB}``, ``h(2)``: an
    expression of names only (no number, no constant such as ``\\pi``, ``e`` or ``i``) names the
    quantity asked for, so ``x + y = 5`` answers 5; ``2x = 14`` is an equation to solve."""
    if _function_at_value(node):
        return True
    for part in t.walk(node):
        if isinstance(part, t.Num | t.Const | t.Based | t.Currency | t.Postfix | t.Degrees):
            return False
        if isinstance(part, t.Name) and part.text in CONSTANT_LETTERS:
            return False
        if isinstance(part, t.Word) and part.number:
            return False
        if isinstance(part, t.Product) and any(j in ("mod", ":") for j in part.joins):
            return False
        if isinstance(part, t.Power | t.Frac | t.Root | t.Binom | t.SetOf | t.Matrix):
            return False
        if isinstance(part, t.Relation | t.Congruence | t.SetOp | t.Answer | t.Labelled):
            return False
    return True


@dataclass(frozen=True)
class Label:
    """The left side of an equation that names the quantity it gives, read once. ``plain``: a
    plain name (``x``, ``x_1``, ``\\theta``, ``f(x)``), which interchanges with any other."""

    tree: t.Node
    plain: bool


def read_label(side: t.Node) -> Label | None:
    """The label an equation's left side is, or None when it says something itself."""
    if isinstance(side, t.Name) and side.text in CONSTANT_LETTERS:
        return None
    if is_plain_name(side):
        return Label(side, True)
    if _names_a_quantity(side):
        return Label(side, False)
    return None


def same_quantity(label: Label | None, other: Label | None) -> bool:
    """Whether two left sides name the same quantity. Plain names are labels and interchange
    (``y = 2x+1`` answers ``f(x) = 2x+1``); a left side that is an expression is part of what
    the equation says, so ``\\cos x = \\frac12`` does not answer ``\\sin x = \\frac12``, nor
    ``f(4) = 5`` ``f(5) = 5``."""
    if label is None or other is None:
        return label is other
    return (label.plain and other.plain) or label.tree == other.tree


def names_in(nodes: tuple[t.Node, ...]) -> frozenset[t.Node]:
    """The plain names that occur in ``nodes`` (``2x + y_1`` holds ``x`` and ``y_1``)."""
    return frozenset(
        part
        for node in nodes
        for part in t.walk(node)
        if isinstance(part, t.Name) or _function_of_name(part)
    )


def relates_labels(label: Label | None, other: Label | None, names: frozenset[t.Node]) -> bool:
    """Whether two equations relate each other's names rather than name a quantity each: one
    left side (a plain name) occurs on the other's right (``y = x`` and ``x = y``). Then they
    are compared as whole relations; ``y = 2x+1`` and ``f(x) = 2x+1`` name one quantity."""
    if label is None or other is None or label.tree == other.tree:
        return False
    return label.plain and label.tree in names


# ------------------------------------------------------------------ equations


def equation(node: t.Node) -> tuple[Label | None, tuple[t.Node, ...]] | None:
    """(label, sides) of an equation: the left side when it names the quantity, else None, and
    the sides after it (all of them without a label); None when ``node`` is no equation.
    ``12 = y`` is ``y = 12`` written backwards."""
    if not isinstance(node, t.Relation) or set(node.ops) != {"="}:
        return None
    sides = node.sides
    label = read_label(sides[0])
    if label is not None:
        return label, sides[1:]
    if len(sides) == 2 and is_plain_name(sides[1]) and sides[1] not in _constants():
        return Label(sides[1], True), sides[:1]
    return None, sides


def _constants() -> tuple[t.Node, ...]:
    return tuple(t.Name(letter) for letter in CONSTANT_LETTERS)


def has_unknown(node: t.Node) -> bool:
    """A name other than the constants e and i, outside text."""
    return any(
        isinstance(part, t.Name) and part.text not in CONSTANT_LETTERS for part in t.walk(node)
    )


def checked_steps(sides: tuple[t.Node, ...]) -> list[tuple[t.Node, t.Node]]:
    """The steps of a calculation that must hold: consecutive sides with no unknown in them.

    A side with an unknown is a formula (``P = 2l + 2w = 2(5) + 2(3) = 16``): whether it holds
    depends on the question, which the grader does not see. Steps between numbers are checked
    (``20 - 7 = 12`` is false), each side without its unit, and the last side is the value."""
    values = [split_unit(side)[0] for side in sides]  # "5 + 7 = 12 apples": the step is 5+7=12
    return [(a, b) for a, b in itertools.pairwise(values) if not (has_unknown(a) or has_unknown(b))]


# ------------------------------------------------------------------ congruences


def congruence(node: t.Node) -> tuple[tuple[t.Node, ...], t.Node | None] | None:
    """(sides, modulus) of ``17 \\equiv 2 \\pmod 5`` (``(17, 2)``, ``5``), with a leading name
    dropped as in an equation (``x \\equiv 2 \\pmod 5``: ``(2,)``); None for no congruence.
    ``\\bmod`` and ``\\mod`` after the last side are its modulus."""
    if not isinstance(node, t.Congruence):
        return None
    sides, modulus = node.sides, node.modulus
    last = sides[-1]
    if modulus is None and isinstance(last, t.Product) and last.joins[-1] == "mod":
        body = (
            last.factors[0]
            if len(last.factors) == 2
            else t.Product(last.factors[:-1], last.joins[:-1])
        )
        sides, modulus = (*sides[:-1], body), last.factors[-1]
    if len(sides) > 1 and read_label(sides[0]) is not None:
        sides = sides[1:]
    return sides, modulus


def congruence_value(residues: list[int], modulus: int) -> int | Reason:
    """What a congruence whose sides and modulus are the integers given answers: its last side,
    when every step holds modulo the modulus and that side is the least residue
    (``2^{10} \\equiv 4 \\pmod 5`` answers 4); ``false_equation`` otherwise."""
    if modulus <= 0 or not 0 <= residues[-1] < modulus:
        return Reason.FALSE_EQUATION
    if any((a - b) % modulus for a, b in itertools.pairwise(residues)):
        return Reason.FALSE_EQUATION
    return residues[-1]


def exact_integer(node: t.Node) -> int | None:
    value = numbers.exact(node)
    return int(value) if value is not None and value.denominator == 1 else None


# ------------------------------------------------------------------ plus-minus


def plus_minus(node: t.Node) -> tuple[t.Node, t.Node] | None:
    """The two values of an expression with one ``\\pm`` (or ``\\mp``): ``1 \\pm \\sqrt{2}``,
    ``\\frac{-1 \\pm \\sqrt5}{2}``, ``\\pm 2``; None without exactly one."""
    signs = [
        i
        for part in t.walk(node)
        if isinstance(part, t.Sum)
        for i, (sign, _) in enumerate(part.terms)
        if sign in ("pm", "mp")
    ]
    if len(signs) != 1:
        return None
    return _signed(node, "+"), _signed(node, "-")


def _signed(node: t.Node, sign: str) -> t.Node:
    """``node`` with its ``\\pm`` taken as ``sign`` (``\\mp`` as the other)."""
    if isinstance(node, t.Sum):
        terms = []
        for s, term in node.terms:
            if s == "pm":
                s = sign
            elif s == "mp":
                s = "-" if sign == "+" else "+"
            terms.append((s, _signed(term, sign)))
        if len(terms) == 1 and terms[0][0] == "-":
            return t.Neg(terms[0][1], span=node.span)
        if len(terms) == 1:
            return terms[0][1]
        return t.Sum(tuple(terms), span=node.span)
    fields = {}
    for name, value in vars(node).items():
        if name == "span":
            continue
        if isinstance(value, tuple):
            fields[name] = tuple(_signed_item(item, sign) for item in value)
        elif isinstance(value, t.Node):
            fields[name] = _signed(value, sign)
        else:
            fields[name] = value
    return type(node)(**fields, span=node.span)


def _signed_item(item: object, sign: str) -> object:
    if isinstance(item, tuple):
        return tuple(_signed_item(x, sign) for x in item)
    if isinstance(item, t.Node):
        return _signed(item, sign)
    return item


# ------------------------------------------------------------------ inequalities

_FLIP = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}


def as_set(node: t.Node) -> t.Node | None:
    """The set a one-variable inequality describes, as a tree: ``1 \\le x < 2`` is ``[1, 2)``,
    ``x \\ge 0`` is ``[0, \\infty)``, ``x \\in [a, b)`` is ``[a, b)``, ``x \\ne 5`` is
    ``(-\\infty, 5) \\cup (5, \\infty)``, ``-x > -1`` is ``(-\\infty, 1)`` (a linear inequality
    solved for its variable). None for anything else, and for an inequality between two
    unknowns (``y < x``: a relation, compared as one)."""
    if not isinstance(node, t.Relation) or not set(node.ops) <= {*_FLIP, "!=", "in"}:
        return None
    if node.ops == ("in",) and is_plain_name(node.sides[0]):
        return node.sides[1]
    if "in" in node.ops:
        return None
    names = {p.text for side in node.sides for p in t.walk(side) if isinstance(p, t.Name)}
    if len(names & UNKNOWNS) > 1:
        return None
    solved = _solved(node)
    if solved is not None:
        node = solved
    sides, ops = node.sides, node.ops
    if ops == ("!=",):
        if is_plain_name(sides[0]) or is_plain_name(sides[1]):
            bound = sides[1] if is_plain_name(sides[0]) else sides[0]
            return t.SetOp(
                (
                    t.Bracket("(", ")", (t.Neg(_INFINITY), bound)),
                    t.Bracket("(", ")", (bound, _INFINITY)),
                ),
                ("cup",),
            )
        return None
    if "!=" in ops:
        return None
    if len(sides) == 3 and is_plain_name(sides[1]):
        (lt1, st1), (lt2, st2) = _kind(ops[0]), _kind(ops[1])
        if lt1 != lt2:
            return None
        lo, hi = (sides[0], sides[2]) if lt1 else (sides[2], sides[0])
        lo_open, hi_open = (st1, st2) if lt1 else (st2, st1)
        return t.Bracket("(" if lo_open else "[", ")" if hi_open else "]", (lo, hi))
    if len(sides) != 2:
        return None
    left, right = sides
    order = [(left, right, True), (right, left, False)]
    if is_plain_name(right) and _letter(right) in UNKNOWNS:
        order.reverse()  # "a > x": x is the variable, a its bound (a parameter)
    for variable, bound, variable_left in order:
        if is_plain_name(variable) and not (is_plain_name(bound) and _letter(bound) in UNKNOWNS):
            less, strict = _kind(ops[0])
            if less == variable_left:  # "x < b" and "b > x" bound x from above
                return t.Bracket("(", ")" if strict else "]", (t.Neg(_INFINITY), bound))
            return t.Bracket("(" if strict else "[", ")", (bound, _INFINITY))
    return None


def _letter(node: t.Node) -> str | None:
    return node.text if isinstance(node, t.Name) else None


def _kind(op: str) -> tuple[bool, bool]:
    """(less-than, strict) of a relation."""
    return op.startswith("<"), op in ("<", ">")


def _solved(node: t.Relation) -> t.Relation | None:
    """``-x > -1`` as ``x < 1``, ``2x + 1 \\le 7`` as ``x \\le 3``, ``-1 < 2x+1 < 5`` as
    ``-1 < x < 2``, ``2(1+x) < 5`` as ``x < 3/2``: a linear inequality in one variable solved
    for it (dividing by a negative coefficient flips the relation). None when it is not one."""
    forms = [_linear(side) for side in node.sides]
    if any(f is None for f in forms):
        return None
    names = {f[2] for f in forms if f is not None and f[2] is not None}
    if len(names) != 1:
        return None
    (name,) = names
    variable = t.Name(name)
    if len(forms) == 2:
        (a1, b1, _), (a2, b2, _) = forms  # type: ignore[misc]
        c, k = a1 - a2, b2 - b1
        if c == 0:
            return None
        op = node.ops[0] if c > 0 or node.ops[0] == "!=" else _FLIP[node.ops[0]]
        return t.Relation((variable, _number(k / c)), (op,))
    if len(forms) == 3 and "!=" not in node.ops:
        (a0, b0, _), (a1, b1, _), (a2, b2, _) = forms  # type: ignore[misc]
        if a0 != 0 or a2 != 0 or a1 == 0:
            return None
        lo, hi = (b0 - b1) / a1, (b2 - b1) / a1
        ops = node.ops if a1 > 0 else tuple(_FLIP[op] for op in node.ops)
        return t.Relation((_number(lo), variable, _number(hi)), ops)
    return None


def _number(value: Fraction) -> t.Node:
    magnitude = abs(value)
    node: t.Node = t.Num(str(magnitude.numerator))
    if magnitude.denominator != 1:
        node = t.Frac(node, t.Num(str(magnitude.denominator)))
    return t.Neg(node) if value < 0 else node


def _linear(node: t.Node) -> tuple[Fraction, Fraction, str | None] | None:
    """(a, b, x) when ``node`` is the linear expression a·x + b with exact coefficients in one
    name x, or a number (x None)."""
    value = numbers.exact(node)
    if value is not None:
        return Fraction(0), value, None
    if isinstance(node, t.Name):
        return Fraction(1), Fraction(0), node.text
    if isinstance(node, t.Neg):
        inner = _linear(node.operand)
        return None if inner is None else (-inner[0], -inner[1], inner[2])
    if (
        isinstance(node, t.Bracket)
        and (node.opening, node.closing) == ("(", ")")
        and len(node.items) == 1
    ):
        return _linear(node.items[0])
    if isinstance(node, t.Sum):
        a, b, name = Fraction(0), Fraction(0), None
        for sign, term in node.terms:
            form = _linear(term)
            if form is None or sign not in ("+", "-") or (name and form[2] and form[2] != name):
                return None
            name = name or form[2]
            factor = 1 if sign == "+" else -1
            a, b = a + factor * form[0], b + factor * form[1]
        return a, b, name
    if isinstance(node, t.Product):
        a, b, name = Fraction(0), Fraction(1), None  # a product: the coefficient of one factor
        forms = [_linear(f) for f in node.factors]
        if any(f is None for f in forms):
            return None
        linear = [f for f in forms if f is not None and f[2] is not None]
        if len(linear) > 1:
            return None
        scale = Fraction(1)
        for join, form in zip(("*", *node.joins), forms, strict=True):
            if form is None or join not in ("*", "/", "", " "):
                return None
            if form[2] is None:
                if join == "/":
                    if form[1] == 0:
                        return None
                    scale /= form[1]
                else:
                    scale *= form[1]
            elif join == "/":
                return None
        if not linear:
            return None
        a, b, name = linear[0]
        return a * scale, b * scale, name
    if isinstance(node, t.Frac):
        top, bottom = _linear(node.numerator), numbers.exact(node.denominator)
        if top is None or not bottom:
            return None
        return top[0] / bottom, top[1] / bottom, top[2]
    return None
