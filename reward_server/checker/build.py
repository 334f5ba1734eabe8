"""sympy objects built from an answer's tree (``tree.py``), node by node: the symbolic worker's
only way to a sympy object. Nothing is parsed and nothing is evaluated as code: no
``sympify``, ``parse_expr`` or ``eval`` of text, ever.

Runs in the verification workers only (the server process never imports sympy).
"""

from __future__ import annotations

import math
from fractions import Fraction

import sympy
from sympy import (
    Abs,
    E,
    FiniteSet,
    I,
    Integer,
    Interval,
    Matrix,
    Rational,
    S,
    Symbol,
    Tuple,
    binomial,
    ceiling,
    factorial,
    factorial2,
    floor,
    oo,
    pi,
    real_root,
    root,
    sqrt,
)

from reward_server.checker import numbers
from reward_server.checker import tree as t


class Unbuildable(ValueError):
    """A tree with no sympy object: notation the worker does not evaluate (a derivative's
    prime, a subscript on an expression), or a shape with no value (``2 3``)."""


_FUNCTIONS = {
    "sin": sympy.sin,
    "cos": sympy.cos,
    "tan": sympy.tan,
    "cot": sympy.cot,
    "sec": sympy.sec,
    "csc": sympy.csc,
    "arcsin": sympy.asin,
    "arccos": sympy.acos,
    "arctan": sympy.atan,
    "arccot": sympy.acot,
    "arcsec": sympy.asec,
    "arccsc": sympy.acsc,
    "sinh": sympy.sinh,
    "cosh": sympy.cosh,
    "tanh": sympy.tanh,
    "coth": sympy.coth,
    "sech": sympy.sech,
    "csch": sympy.csch,
    "exp": sympy.exp,
}
# "\sin^{-1} x" is the inverse function, not a reciprocal.
_INVERSES = {"sin": "arcsin", "cos": "arccos", "tan": "arctan", "cot": "arccot"}
_SETS = {"R": S.Reals, "Z": S.Integers, "N": S.Naturals, "Q": S.Rationals, "C": S.Complexes}
_RELATIONS = {
    "=": sympy.Eq,
    "<": sympy.Lt,
    ">": sympy.Gt,
    "<=": sympy.Le,
    ">=": sympy.Ge,
    "!=": sympy.Ne,
}
_MAX_MULTIFACTORIAL = 10_000


def build(node: t.Node, as_set: bool = False) -> sympy.Basic:
    """The sympy object of ``node``. ``as_set``: a bracket pair is an interval (the operand of a
    union), not a tuple."""
    kind = type(node).__name__
    builder = _BUILDERS.get(kind)
    if builder is None:
        raise Unbuildable(f"no value for {kind}")
    return builder(node, as_set)


def _rational(value: Fraction) -> Rational:
    return Rational(value.numerator, value.denominator)


def _num(node: t.Num, as_set: bool) -> sympy.Basic:
    value = numbers.literal(node.text)
    if value is None:
        raise Unbuildable(f"no number {node.text!r}")
    return _rational(value)


def _based(node: t.Based, as_set: bool) -> sympy.Basic:
    value = numbers.numeral_value(node.digits, node.base)
    if value is None:
        raise Unbuildable(f"{node.digits} is no numeral in base {node.base}")
    return Integer(value)


def _name(node: t.Name, as_set: bool) -> sympy.Basic:
    if node.text == "e":
        return E
    if node.text == "i":
        return I  # in a final answer the letter i is the imaginary unit, almost never an index
    return Symbol(node.text)


def _word(node: t.Word, as_set: bool) -> sympy.Basic:
    if node.number:
        value = numbers.number_word_value(node.text)
        if value is None:
            raise Unbuildable(f"no number {node.text!r}")
        return Integer(value)
    if "/" in node.text:
        raise Unbuildable(f"a unit {node.text!r}")
    return sympy.Mul(*(_name(t.Name(letter), as_set) for letter in node.text))


def _text(node: t.Text, as_set: bool) -> sympy.Basic:
    content = node.content.strip()
    if content in ("e", "i"):
        return _name(t.Name(content), as_set)
    if not content:
        raise Unbuildable("empty text")
    return Symbol(content)


def _const(node: t.Const, as_set: bool) -> sympy.Basic:
    if node.name == "pi":
        return pi
    if node.name == "infty":
        return oo
    if node.name == "e":
        return E
    return _SETS[node.name]


def _sum(node: t.Sum, as_set: bool) -> sympy.Basic:
    total = S.Zero
    for sign, term in node.terms:
        if sign not in ("+", "-"):
            raise Unbuildable("\\pm left in an expression")
        value = build(term)
        total = total + value if sign == "+" else total - value
    return total


def _neg(node: t.Neg, as_set: bool) -> sympy.Basic:
    return -build(node.operand)


def _product(node: t.Product, as_set: bool) -> sympy.Basic:
    mixed = numbers.mixed_number(node)
    if mixed is not None:
        return _rational(mixed)
    factors, joins = _applied(node)
    value = factors[0]
    for join, right, factor in zip(joins, factors[1:], node.factors[1:], strict=False):
        if join == " " and isinstance(factor, t.Num) and isinstance(node.factors[0], t.Num):
            raise Unbuildable("two numerals side by side")
        if join in ("/", ":"):
            value = value / right
        elif join == "mod":
            value = sympy.Mod(value, right)
        else:
            value = value * right
    return value


# Letters that name a function when a bracket follows them: f(2) is the value of f at 2, an
# unknown function; another letter before a bracket multiplies it (x(y+1)).
_FUNCTION_LETTERS = frozenset("fgh")


def _applied(node: t.Product) -> tuple[list[sympy.Basic], list[str]]:
    """A product's factors as sympy objects and the joins between them, ``f(2)`` and
    ``g(x, y)`` (a function letter glued to a bracket) each one factor: an unknown function
    applied to its arguments."""
    factors: list[sympy.Basic] = []
    joins: list[str] = []
    i = 0
    while i < len(node.factors):
        factor = node.factors[i]
        following = node.factors[i + 1] if i + 1 < len(node.factors) else None
        glued = i + 1 < len(node.factors) and node.joins[i] == ""
        if (
            glued
            and isinstance(factor, t.Name)
            and factor.text in _FUNCTION_LETTERS
            and isinstance(following, t.Bracket)
            and (following.opening, following.closing) == ("(", ")")
        ):
            arguments = (build(item) for item in following.items)
            factors.append(sympy.Function(factor.text)(*arguments))
            step = 2
        else:
            factors.append(build(factor))
            step = 1
        if i + step < len(node.factors):
            joins.append(node.joins[i + step - 1])
        i += step
    return factors, joins


def _frac(node: t.Frac, as_set: bool) -> sympy.Basic:
    return build(node.numerator) / build(node.denominator)


def _power(node: t.Power, as_set: bool) -> sympy.Basic:
    return build(node.base) ** build(node.exponent)


def _degrees(node: t.Degrees, as_set: bool) -> sympy.Basic:
    return build(node.operand) * pi / 180


def _root(node: t.Root, as_set: bool) -> sympy.Basic:
    radicand = build(node.radicand)
    if node.index is None:
        return sqrt(radicand)
    index = build(node.index)
    odd = index.is_Integer and int(index) % 2 == 1
    if odd and radicand.is_real and radicand.is_negative:
        return real_root(radicand, index)  # the real cube root of -8 is -2
    return root(radicand, index)


def _func(node: t.Func, as_set: bool) -> sympy.Basic:
    argument = node.argument
    arguments = (
        [build(item) for item in argument.items]
        if isinstance(argument, t.Bracket) and len(argument.items) > 1
        else [build(argument)]
    )
    power = build(node.power) if node.power is not None else None
    name = node.name
    if name == "log":
        # \log without a base is the common logarithm (its use in competition mathematics);
        # \ln has the base e
        base = build(node.base) if node.base is not None else Integer(10)
        value = sympy.log(arguments[0], base)
    elif name in ("gcd", "max", "min", "det", "lcm"):
        value = _many(name, arguments)
    else:
        if power == -1 and name in _INVERSES:
            name, power = _INVERSES[name], None
        value = _FUNCTIONS[name](arguments[0])
    return value**power if power is not None else value


def _many(name: str, arguments: list[sympy.Basic]) -> sympy.Basic:
    if name == "gcd":
        return sympy.gcd(*arguments) if len(arguments) > 1 else arguments[0]
    if name == "lcm":
        return sympy.lcm(*arguments) if len(arguments) > 1 else arguments[0]
    if name == "max":
        return sympy.Max(*arguments)
    if name == "min":
        return sympy.Min(*arguments)
    return arguments[0].det() if hasattr(arguments[0], "det") else arguments[0]


def _binom(node: t.Binom, as_set: bool) -> sympy.Basic:
    return binomial(build(node.n), build(node.k))


def _postfix(node: t.Postfix, as_set: bool) -> sympy.Basic:
    value = build(node.operand)
    marks = list(node.marks)
    bangs = 0
    while marks and marks[0] == "!":
        marks.pop(0)
        bangs += 1
    if bangs:
        value = _factorial(value, bangs)
    for mark in marks:
        if mark != "%":
            raise Unbuildable(f"postfix {mark!r}")
        value = value / 100
    return value


def _factorial(value: sympy.Basic, bangs: int) -> sympy.Basic:
    """``n!``, the double factorial ``n!!`` and the multifactorials ``n!!!``…: the product
    n (n - k) (n - 2k)… for k marks."""
    if bangs == 1:
        return factorial(value)
    if bangs == 2:
        return factorial2(value)
    if not (value.is_Integer and 0 <= int(value) <= _MAX_MULTIFACTORIAL):
        raise Unbuildable("a multifactorial of no small natural number")
    return Integer(math.prod(range(int(value), 0, -bangs)))


def _enclosed(node: t.Enclosed, as_set: bool) -> sympy.Basic:
    value = build(node.operand)
    return {"abs": Abs, "floor": floor, "ceil": ceiling}[node.kind](value)


def _currency(node: t.Currency, as_set: bool) -> sympy.Basic:
    return build(node.operand)


def _decorated(node: t.Decorated, as_set: bool) -> sympy.Basic:
    if node.command in ("boxed", "fbox"):
        return build(node.operand, as_set)
    return Symbol(f"{node.command}({_written(node.operand)})")


def _angle(node: t.Angle, as_set: bool) -> sympy.Basic:
    return Symbol(f"{node.command} {node.name}")


def _written(node: t.Node) -> str:
    return node.text if isinstance(node, t.Name | t.Word) else repr(node)


def _big_operator(node: t.BigOp, as_set: bool) -> sympy.Basic:
    variable = Symbol(node.variable)
    body, bounds = build(node.body), (variable, build(node.lower), build(node.upper))
    operator = sympy.Sum if node.op == "sum" else sympy.Product
    return operator(body, bounds).doit()


def _bracket(node: t.Bracket, as_set: bool) -> sympy.Basic:
    items = node.items
    if len(items) == 1 and (node.opening, node.closing) == ("(", ")"):
        return build(items[0], as_set)
    interval = as_set or node.opening != node.closing
    if (node.opening, node.closing) == ("[", "]") and len(items) == 2:
        interval = True
    if interval and len(items) == 2 and node.opening in "([" and node.closing in ")]":
        start, end = build(items[0]), build(items[1])
        return Interval(start, end, node.opening == "(", node.closing == ")")
    return Tuple(*(build(item) for item in items))


def _set_of(node: t.SetOf, as_set: bool) -> sympy.Basic:
    return FiniteSet(*(build(item) for item in node.items))


def _set_op(node: t.SetOp, as_set: bool) -> sympy.Basic:
    value = build(node.operands[0], as_set=True)
    for op, operand in zip(node.ops, node.operands[1:], strict=True):
        right = build(operand, as_set=True)
        if op == "cup":
            value = sympy.Union(value, right)
        elif op == "cap":
            value = sympy.Intersection(value, right)
        else:
            value = sympy.Complement(value, right)
    return value


def _matrix(node: t.Matrix, as_set: bool) -> sympy.Basic:
    if node.environment == "cases":
        raise Unbuildable("a system of cases")
    rows = [[build(cell) for cell in row] for row in node.rows]
    if len({len(row) for row in rows}) != 1:
        raise Unbuildable("rows of different lengths")
    return Matrix(rows)


def _relation(node: t.Relation, as_set: bool) -> sympy.Basic:
    if len(node.sides) != 2 or node.ops[0] not in _RELATIONS:
        raise Unbuildable(f"the relation {node.ops}")
    left, right = (build(side) for side in node.sides)
    return _RELATIONS[node.ops[0]](left, right, evaluate=False)


def _labelled(node: t.Labelled, as_set: bool) -> sympy.Basic:
    if node.value is None:
        raise Unbuildable("a label alone")
    return build(node.value, as_set)


def _answer(node: t.Answer, as_set: bool) -> sympy.Basic:
    if len(node.items) == 1:
        return build(node.items[0], as_set)
    return FiniteSet(*(build(item) for item in node.items))


_BUILDERS = {
    "Num": _num,
    "Based": _based,
    "Name": _name,
    "Word": _word,
    "Text": _text,
    "Const": _const,
    "Sum": _sum,
    "Neg": _neg,
    "Product": _product,
    "Frac": _frac,
    "Power": _power,
    "Degrees": _degrees,
    "Root": _root,
    "Func": _func,
    "Binom": _binom,
    "Postfix": _postfix,
    "Enclosed": _enclosed,
    "Currency": _currency,
    "Decorated": _decorated,
    "Angle": _angle,
    "BigOp": _big_operator,
    "Bracket": _bracket,
    "SetOf": _set_of,
    "SetOp": _set_op,
    "Matrix": _matrix,
    "Relation": _relation,
    "Labelled": _labelled,
    "Answer": _answer,
}
