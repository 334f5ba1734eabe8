"""Symbolic equivalence: runs in the verification worker processes only.

A check arrives typed (``pending.SymbolicCheck``): the two values the exact rules left, their
trees as the reading left them. sympy objects are built from the trees node by node
(``build.py``); untrusted text is never parsed or given to ``eval``/``exec``/``sympify``/
``parse_expr``. The comparison is ``compare.equal_values`` again, with the pairs no exact rule
decides compared here: expressions as exact identities, at probe points and by ``simplify``;
equations and inequalities as relations; sets as sets; tuples and matrices item by item.

The server process never imports this module (sympy costs ~1 s and ~100 MB); the forkserver
imports and warms it once (``forkserver_init.py``) and every worker inherits it.
"""

from __future__ import annotations

import logging
from fractions import Fraction

from sympy import (
    Basic,
    Expr,
    FiniteSet,
    Integer,
    MatrixBase,
    Pow,
    Rational,
    Set,
    Symbol,
    Tuple,
    asin,
    cancel,
    cos,
    exp,
    simplify,
)
from sympy.core.evalf import PrecisionExhausted
from sympy.core.relational import Equality, Relational
from sympy.functions.elementary.trigonometric import (
    InverseTrigonometricFunction,
    TrigonometricFunction,
)

from reward_server.checker import syntax
from reward_server.checker import tree as t
from reward_server.checker.build import Unbuildable, build
from reward_server.checker.compare import equal_values
from reward_server.checker.pending import SymbolicCheck
from reward_server.checker.relations import congruence_value
from reward_server.checker.values import Choice, Group, Number, Numeral, Value, Words, value_of
from reward_server.protocol import Reason

log = logging.getLogger(__name__)

# Points at which expressions are compared numerically: symbols get these values by name, two
# points to avoid a lucky root. Exact rationals, so that a difference evaluated at them is
# exact too.
_PROBES = tuple(
    tuple(Rational(v) for v in probe)
    for probe in (
        ("0.6180339887", "1.4142135623", "2.7182818284"),
        ("-1.3247179572", "0.5772156649", "3.1415926535"),
    )
)
_MAX_EXPAND_EXPONENT = 30
# Two values that differ relatively by more than this differ (double precision suffices).
_RELATIVE_TOLERANCE = 1e-12
# Below this, a double-precision difference may be rounding (values near 0): the exact
# difference decides (``_nonzero``).
_ROUNDING = 1e-20
_DIGITS = 30


class _Unreadable(Exception):
    """A value with no sympy object: the check's verdict is that side's reason."""

    def __init__(self, reason: Reason) -> None:
        super().__init__(reason)
        self.reason = reason


def _plain_exprs(gold: Basic, pred: Basic) -> bool:
    """Two scalar expressions, not both bare symbols: plain mathematical equality decides them.
    Two bare symbols are two names (``A`` against ``a``), different unless equal; one against an
    expression (``x`` against ``\\frac{x(y^2+1)}{y^2+1}``) is an expression like any other."""
    exprs = all(isinstance(e, Expr) for e in (gold, pred))
    return exprs and not (isinstance(gold, Symbol) and isinstance(pred, Symbol))


def _evaluated(e: Basic) -> Basic:
    """What the parser left unevaluated, evaluated: ``\\sin(7\\pi)`` is 0 and
    ``\\sin(\\arcsin x)`` is x (exact identities only; the worker's CPU budget bounds it)."""
    try:
        return e.doit()
    except (TypeError, ValueError, ArithmeticError, AttributeError, RecursionError):
        return e


def _nonzero(difference: Expr) -> bool:
    """Whether an exact number is provably not 0: evaluated to 30 significant digits of its
    own, however small it is next to the values it is the difference of (``1/100! + 1/\\pi``
    against ``1/101! + 1/\\pi`` differ by 10^{-158}). sympy raises ``PrecisionExhausted`` when
    it cannot tell the number from 0: then it proves nothing."""
    try:
        value = difference.evalf(_DIGITS, strict=True)
    except (PrecisionExhausted, TypeError, ValueError, ArithmeticError):
        return False
    return bool(value.is_number and value != 0 and value.is_finite)


def _quick_verdict(gold: Basic, pred: Basic) -> bool | None:
    """Decide two plain expressions cheaply, else None (then ``simplify`` decides).

    * ``expand(gold - pred) == 0`` is an exact identity: equal (``(x+1)^2`` vs ``x^2+2x+1``).
    * Two expressions equal as functions agree at every point where both are defined, so a
      difference at one point proves them different. A clear one in double precision is found
      cheaply; below it, the exact difference at the point is evaluated on its own: never a
      tolerance, so tiny or huge values that differ are different (``2^{-60}`` against
      ``2^{-60} + 2^{-120}``, ``2^{100}x`` against ``(2^{100}+1)x``). This skips sympy's
      ``simplify`` — the slowest step — for most wrong answers.
    * Expressions with trigonometric functions that agree at the points are compared by
      ``simplify`` after rewriting them in cosines and in exponentials (``\\cot^2 x`` and
      ``\\csc^2 x - 1``, ``\\tan x + \\cot x`` and ``2\\csc 2x``): identities that a plain
      ``simplify`` misses.
    """
    if not _plain_exprs(gold, pred):
        return None
    small_powers = all(
        not (p.exp.is_Integer and abs(int(p.exp)) > _MAX_EXPAND_EXPONENT)
        for e in (gold, pred)
        for p in e.atoms(Pow)
    )
    if small_powers:
        gold, pred = _evaluated(gold), _evaluated(pred)
        difference = gold - pred
        if difference.expand() == 0:
            return True
        if difference.is_rational_function() and cancel(difference) == 0:
            return True  # a common factor cancels: x against x(y^2+1)/(y^2+1)
    names = sorted({s.name for s in (gold.free_symbols | pred.free_symbols)})
    if len(names) > len(_PROBES[0]):
        return None
    for probe in _PROBES:
        values = dict(zip(names, probe, strict=False))
        try:
            at_gold = gold.subs({s: values[s.name] for s in gold.free_symbols})
            at_pred = pred.subs({s: values[s.name] for s in pred.free_symbols})
            a, b = complex(at_gold.evalf(_DIGITS)), complex(at_pred.evalf(_DIGITS))
        except (TypeError, ValueError, ArithmeticError):
            return None  # not a number at this point (undefined, unevaluated...): no shortcut
        if any(v != v or abs(v) == float("inf") for v in (a.real, a.imag, b.real, b.imag)):
            return None
        # A clear difference in double precision, not the rounding of two values near 0
        # (\\cos\\frac{\\pi}{2} evaluates to about 1e-31, not 0).
        clear = abs(a - b) > max(_RELATIVE_TOLERANCE * max(abs(a), abs(b)), _ROUNDING)
        if clear or _nonzero(at_gold - at_pred):
            return False
    difference = gold - pred
    if difference.has(TrigonometricFunction):
        for kind in (cos, exp):
            if simplify(difference.rewrite(kind)) == 0:
                return True
    if difference.has(InverseTrigonometricFunction) and simplify(difference.rewrite(asin)) == 0:
        return True  # \\operatorname{arccsc} x against \\arcsin\\frac{1}{x}
    return None


def _zero_form(relation: Relational) -> tuple[Expr, str] | None:
    """``a op b`` as ``d op' 0`` with op' one of ``=``, ``<``, ``<=`` (``a > b`` is ``b - a <
    0``), or None for another relation (``\\ne``)."""
    lhs, rhs = relation.lhs, relation.rhs
    if not (isinstance(lhs, Expr) and isinstance(rhs, Expr)):
        return None
    if isinstance(relation, Equality):
        return lhs - rhs, "="
    op = relation.rel_op
    if op in ("<", "<="):
        return lhs - rhs, op
    if op in (">", ">="):
        return rhs - lhs, "<" if op == ">" else "<="
    return None


def _relation_verdict(gold: Basic, pred: Basic) -> bool | None:
    """Two equations or inequalities as relations, whichever side a variable is on and whichever
    way the sign points: ``y = x`` is ``x = y``, ``y < x`` is ``x > y``, ``y = 2x - 5`` is
    ``\\frac{y+5}{2} = x``. Each is written ``d = 0`` or ``d < 0``; the two are the same
    relation when one ``d`` is a constant multiple of the other (positive for an inequality).
    True only then; False when the relations are of different kinds or one is the other
    reversed; None when the rule does not decide (the multiple is not a constant): two such
    relations are not shown to be one, and are not equivalent."""
    if not (isinstance(gold, Relational) and isinstance(pred, Relational)):
        return None
    g, p = _zero_form(gold), _zero_form(pred)
    if g is None or p is None:
        return None
    if g[1] != p[1]:
        return False if "=" in (g[1], p[1]) else None
    if not (g[0].is_rational_function() and p[0].is_rational_function()) or p[0] == 0:
        return None
    ratio = cancel(g[0] / p[0])
    if ratio.free_symbols or not ratio.is_number or ratio == 0:
        return None
    if g[1] == "=" or ratio.is_positive:
        return True
    return False if ratio.is_negative else None  # a negative multiple: the reversed inequality


def _sympy(value: Value, side: Reason, as_set: bool = False) -> Basic | None:
    """The sympy object of a value; None for one no expression stands for (words, letters);
    ``side``'s reason raised when its tree has none."""
    if isinstance(value, Number):
        number = Rational(value.value.numerator, value.value.denominator)
        return number / 100 if value.percent else number
    if isinstance(value, Numeral):
        return Integer(value.value) if value.value is not None else None
    if isinstance(value, Words):
        # a single name ("x") is an expression too; other words are none
        name = t.walk(value.tree)
        tree = next(name, None)
        return _built(tree, side, as_set) if isinstance(tree, t.Name) else None
    if isinstance(value, Choice):
        return None
    if isinstance(value, Group):
        tree = value.tree
        if isinstance(tree, t.Bracket):
            return _built(tree, side, as_set)
        return None
    return _built(value.tree, side, as_set)


def _built(tree: t.Node, side: Reason, as_set: bool) -> Basic:
    try:
        return build(tree, as_set)
    except (Unbuildable, TypeError, ValueError, ArithmeticError) as exc:
        log.debug("no sympy object for %r: %s", tree, exc)
        raise _Unreadable(side) from exc


def _compare(answer: Value, reference: Value) -> bool | None:
    """The pairs of values no exact rule decides (``compare.equal_values``'s ``undecided``)."""
    sets = isinstance(answer.tree, t.SetOp) or isinstance(reference.tree, t.SetOp)
    gold = _sympy(reference, Reason.UNPARSABLE_REFERENCE, as_set=sets)
    pred = _sympy(answer, Reason.UNPARSABLE_ANSWER, as_set=sets)
    if gold is None or pred is None:
        return False
    return _equal(gold, pred)


def _equal(gold: Basic, pred: Basic) -> bool:
    relation = _relation_verdict(gold, pred)
    if relation is not None:
        return relation
    if isinstance(gold, Relational) or isinstance(pred, Relational):
        return False
    if isinstance(gold, Set) and isinstance(pred, Set):
        return _equal_sets(gold, pred)
    if isinstance(gold, Tuple) and isinstance(pred, Tuple):
        return len(gold) == len(pred) and all(_equal(g, p) for g, p in zip(gold, pred, strict=True))
    if isinstance(gold, MatrixBase) and isinstance(pred, MatrixBase):
        return gold.shape == pred.shape and all(
            _equal(g, p) for g, p in zip(gold, pred, strict=True)
        )
    if not (isinstance(gold, Expr) and isinstance(pred, Expr)):
        return False
    quick = _quick_verdict(gold, pred)
    if quick is not None:
        return quick
    return _proved_zero(gold - pred)


def _equal_sets(gold: Set, pred: Set) -> bool:
    """Two sets are equal when neither has an element the other lacks; finite sets element by
    element, so that every element is compared exactly."""
    if isinstance(gold, FiniteSet) and isinstance(pred, FiniteSet):
        if len(gold) != len(pred):
            return False
        unused = list(pred.args)
        for g in gold.args:
            match = next((p for p in unused if _equal(g, p)), None)
            if match is None:
                return False
            unused.remove(match)
        return True
    if gold == pred:
        return True
    try:
        difference = gold.symmetric_difference(pred)
    except (TypeError, ValueError, NotImplementedError):
        return False
    return bool(difference.is_empty)


def _proved_zero(difference: Expr) -> bool:
    """Whether ``simplify`` proves the difference 0 (the slowest step: last)."""
    try:
        return bool(simplify(difference) == 0)
    except (TypeError, ValueError, ArithmeticError, RecursionError, PrecisionExhausted):
        return False


def symbolic_equivalent(check: SymbolicCheck) -> tuple[bool, str]:
    """The verdict on a check the exact rules left (``decide.decide``). Runs inside a pool
    worker.

    An answer written as a calculation (``20 - 8 = 12``) counts only when every step holds and
    its value is the reference's: a false equation is no answer. A congruence answers its least
    residue when every step holds modulo its modulus (``relations.congruence_value``, with the
    sides evaluated here)."""
    try:
        answer = check.answer
        if check.congruence is not None:
            residue = _residue(*check.congruence)
            if isinstance(residue, Reason):
                return False, residue
            answer = Number(t.Num(str(residue)), Fraction(residue), False)
        for left, right in check.steps:
            if not equal_values(left, right, undecided=_compare):
                return False, Reason.FALSE_EQUATION
        equal = bool(equal_values(answer, check.reference, undecided=_compare))
    except _Unreadable as unreadable:
        return False, unreadable.reason
    return equal, Reason.EQUIVALENT if equal else Reason.NOT_EQUIVALENT


def _residue(sides: tuple[t.Node, ...], modulus: t.Node) -> int | Reason:
    values = [_built(side, Reason.UNPARSABLE_ANSWER, False) for side in (*sides, modulus)]
    if not all(getattr(v, "is_Integer", False) for v in values):
        return Reason.FALSE_EQUATION
    *residues, n = (int(v) for v in values)
    found = congruence_value(residues, n)
    return found


_WARM_UP = (
    ("\\frac{\\sqrt{2}}{2}", "\\frac{1}{\\sqrt{2}}"),
    ("(x+1)^2", "x^2+2x+1"),
    ("y=x", "x=y"),
    ("(-\\infty,0)\\cup(1,\\infty)", "(-\\infty,0)\\cup(2,\\infty)"),
    ("\\sin^2 x", "1 - \\cos^2 x"),
)


def warm_up() -> None:
    """Run representative checks once: sympy is slow on first use."""
    for answer, reference in _WARM_UP:
        try:
            read = [value_of(syntax.parse(text)) for text in (answer, reference)]  # type: ignore
            symbolic_equivalent(SymbolicCheck(*read))
        except Exception:
            log.debug("warm-up check failed", exc_info=True)
