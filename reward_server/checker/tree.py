"""The typed tree of an answer: what ``syntax.parse`` reads an answer's text into, once.

Every node is a frozen dataclass of its children, hashable and picklable: the verdict cache and
single-flight key on trees, and the symbolic worker receives them as they are and builds sympy
objects from them (``build.py``). A node says what was written, not what it means: ``5 cm`` is a
``Product`` of a ``Num`` and a ``Word``; the rules over the tree (``values``, ``relations``,
``units``) decide that ``cm`` is a unit. ``span`` is where the node stands in the text it was
read from; equality and hashing ignore it, so equal notations are equal trees whatever their
spacing.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass(frozen=True)
class _Spanned:
    span: tuple[int, int] = field(default=(0, 0), compare=False, repr=False, kw_only=True)


# ------------------------------------------------------------------ leaves


@dataclass(frozen=True)
class Num(_Spanned):
    """Digits as written: ``12``, ``1,000``, ``10\\,000``, ``12.50``, ``1.5e3``,
    ``0.\\overline{3}``."""

    text: str


@dataclass(frozen=True)
class Based(_Spanned):
    """A numeral with a base subscript: ``1011_2`` is ``Based("1011", 2)``; digits upper-cased."""

    digits: str
    base: int


@dataclass(frozen=True)
class Name(_Spanned):
    """One letter, a Greek letter (``theta``) or either with a subscript (``x_1``, ``a_{n}``)."""

    text: str


@dataclass(frozen=True)
class Word(_Spanned):
    """A run of two or more letters (``cm``, ``apples``, ``xy``, ``BD``) or number words
    (``twenty-five``, ``number=True``)."""

    text: str
    number: bool = False


@dataclass(frozen=True)
class Text(_Spanned):
    """A text command and its content: ``\\text{ cm}`` is ``Text("text", " cm")``."""

    command: str
    content: str


@dataclass(frozen=True)
class Const(_Spanned):
    """``pi``, ``infty``, ``emptyset``, or a number set ``R``, ``Z``, ``N``, ``Q``, ``C``."""

    name: str


# ------------------------------------------------------------------ arithmetic


@dataclass(frozen=True)
class Sum(_Spanned):
    """Terms with their signs, ``"+"``, ``"-"`` or ``"pm"`` (``\\pm``, ``\\mp``); a first term
    written without a sign has ``"+"``."""

    terms: tuple[tuple[str, Node], ...]


@dataclass(frozen=True)
class Neg(_Spanned):
    operand: Node


@dataclass(frozen=True)
class Product(_Spanned):
    """Factors left to right and how each joins the one before it: ``"*"``, ``"/"``, ``":"``,
    ``"mod"``, or juxtaposed, ``""`` (glued: ``2x``, ``7days``) or ``" "`` (with spacing
    between: ``5 cm``). ``joins[i]`` joins ``factors[i + 1]``."""

    factors: tuple[Node, ...]
    joins: tuple[str, ...]


@dataclass(frozen=True)
class Frac(_Spanned):
    numerator: Node
    denominator: Node


@dataclass(frozen=True)
class Power(_Spanned):
    base: Node
    exponent: Node


@dataclass(frozen=True)
class Degrees(_Spanned):
    """An angle in degrees: ``30^\\circ``, ``30°``, ``30\\degree``."""

    operand: Node


@dataclass(frozen=True)
class Root(_Spanned):
    """``\\sqrt{x}``, ``sqrt(x)``, ``√x``; ``index`` 3 for ``\\sqrt[3]{x}``."""

    radicand: Node
    index: Node | None = None


@dataclass(frozen=True)
class Func(_Spanned):
    """A named function applied: ``\\sin^2 x`` is ``Func("sin", x, power=2)``; a logarithm's
    base in ``base`` (``\\ln`` has base ``Const("e")``, ``\\log`` none)."""

    name: str
    argument: Node
    power: Node | None = None
    base: Node | None = None


@dataclass(frozen=True)
class Binom(_Spanned):
    n: Node
    k: Node


@dataclass(frozen=True)
class Postfix(_Spanned):
    """Postfix marks in order: ``5!`` (``"!"``), ``n!!``, ``25\\%`` (``"%"``), ``f'`` (``"'"``)."""

    operand: Node
    marks: tuple[str, ...]


@dataclass(frozen=True)
class Subscript(_Spanned):
    """A subscript on anything but a plain name (``Name`` carries its own)."""

    base: Node
    index: Node


@dataclass(frozen=True)
class Enclosed(_Spanned):
    """``|x|`` (``abs``), ``\\lfloor x \\rfloor`` (``floor``), ``\\lceil x \\rceil`` (``ceil``)."""

    kind: str
    operand: Node


@dataclass(frozen=True)
class Currency(_Spanned):
    """``\\$12.50``."""

    operand: Node


@dataclass(frozen=True)
class Decorated(_Spanned):
    """``\\overline{AB}``, ``\\vec v``, ``\\hat x``, ``\\boxed{5}``: a command and its
    argument."""

    command: str
    operand: Node


@dataclass(frozen=True)
class Angle(_Spanned):
    """``\\angle ABC``, ``\\triangle ABC``."""

    command: str
    name: str


@dataclass(frozen=True)
class BigOp(_Spanned):
    """``\\sum_{k=1}^{n} body`` and ``\\prod``."""

    op: str
    variable: str
    lower: Node
    upper: Node
    body: Node


# ------------------------------------------------------------------ structures


@dataclass(frozen=True)
class Bracket(_Spanned):
    """Items between brackets: ``(1, 2)``, ``[1, 2)``, ``\\langle 2, -1 \\rangle`` (``"<"``,
    ``">"``). One item between round brackets is a parenthesised expression."""

    opening: str
    closing: str
    items: tuple[Node, ...]


@dataclass(frozen=True)
class SetOf(_Spanned):
    """``\\{1, 2\\}``; ``\\{\\}`` has no items."""

    items: tuple[Node, ...]


@dataclass(frozen=True)
class SetOp(_Spanned):
    """``A \\cup B \\cap C``: operands and the operators between them (``cup``, ``cap``,
    ``setminus``)."""

    operands: tuple[Node, ...]
    ops: tuple[str, ...]


@dataclass(frozen=True)
class Matrix(_Spanned):
    """A matrix environment's rows of cells; ``environment`` is ``pmatrix``, ``cases``, …"""

    environment: str
    rows: tuple[tuple[Node, ...], ...]


@dataclass(frozen=True)
class Relation(_Spanned):
    """A chain of sides and the relations between them: ``1 \\le x < 2`` is sides ``(1, x, 2)``
    and ops ``("<=", "<")``. Ops: ``=``, ``<``, ``>``, ``<=``, ``>=``, ``!=``, ``~``
    (approximately), ``in``, ``notin``, ``subset``, ``to``."""

    sides: tuple[Node, ...]
    ops: tuple[str, ...]


@dataclass(frozen=True)
class Congruence(_Spanned):
    """``17 \\equiv 2 \\pmod 5``: the sides and the modulus (None when none is written)."""

    sides: tuple[Node, ...]
    modulus: Node | None


@dataclass(frozen=True)
class Labelled(_Spanned):
    """One part of a multi-part answer: ``(a) 3`` (``value`` None for a label alone, ``(c)``)."""

    label: str
    value: Node | None


@dataclass(frozen=True)
class Answer(_Spanned):
    """The whole answer: its items and the separators between them (``","``, ``";"``, ``"or"``,
    ``"and"``); one item has none."""

    items: tuple[Node, ...]
    separators: tuple[str, ...]


Node = (
    Num | Based | Name | Word | Text | Const | Sum | Neg | Product | Frac | Power | Degrees
    | Root | Func | Binom | Postfix | Subscript | Enclosed | Currency | Decorated | Angle | BigOp
    | Bracket | SetOf | SetOp | Matrix | Relation | Congruence | Labelled | Answer
)  # fmt: skip


def walk(node: Node) -> Iterator[Node]:
    """Every node of a tree, the node first (iterative: a tree may be deep)."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(children(current)))


def children(node: Node) -> list[Node]:
    """The nodes right below ``node``, in the order written (a sum's terms without their signs,
    a matrix's cells row by row)."""
    found: list[Node] = []
    for name, value in vars(node).items():
        if name == "span":
            continue
        if isinstance(value, tuple):
            for item in value:
                if isinstance(item, tuple):
                    found.extend(x for x in item if isinstance(x, Node))
                elif isinstance(item, Node):
                    found.append(item)
        elif isinstance(value, Node):
            found.append(value)
    return found
