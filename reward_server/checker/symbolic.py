"""Symbolic equivalence with math-verify: runs in the verification worker processes only.

Safety: untrusted text is never given to ``eval``/``exec``/``sympify``/``parse_expr``.
math-verify's ``ExprExtractionConfig`` path calls sympy's ``parse_expr`` (which evaluates Python
code), so only its LaTeX path is used here: ``LatexExtractionConfig`` parses with
latex2sympy2's ANTLR grammar, which builds sympy objects without evaluating text as code.

The server process never imports this module (sympy and the grammar cost ~1 s and ~100 MB); the
forkserver imports and warms it once (``forkserver_init.py``) and every worker inherits it.
"""

from __future__ import annotations

import functools
import logging

from latex2sympy2_extended.latex2sympy2 import NormalizationConfig
from math_verify import LatexExtractionConfig, parse, verify
from sympy import (
    Basic,
    Expr,
    FiniteSet,
    Float,
    I,
    Interval,
    MatrixBase,
    Pow,
    Rational,
    Symbol,
    Tuple,
    UnevaluatedExpr,
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

from reward_server.checker.pending import SymbolicCheck
from reward_server.checker.relations import congruence_value
from reward_server.protocol import Reason

log = logging.getLogger(__name__)

# Quiet the per-call "timeout is disabled" warning of math-verify: the pool enforces timeouts.
logging.getLogger("math_verify").setLevel(logging.ERROR)

# math-verify's default also strips bare "units" such as m, h, c, t, ab, bc from the end
# ("5m" -> 5); too eager for a reward. Units are handled by our own rules (units.py).
_LATEX_CONFIG = LatexExtractionConfig(
    boxed_match_priority=0,
    normalization_config=NormalizationConfig(
        basic_latex=True,
        units=False,
        malformed_operators=True,
        nits=True,
        boxed="all",
        equations=False,
    ),
)


def _exact(expr: Basic) -> Basic:
    """Replace parsed decimals by exact rationals (``Float('0.333333')`` -> ``333333/10**6``).

    math-verify compares floats after rounding to 6 places, which would accept 0.333333 for 1/3;
    the service treats a rounded decimal of a non-terminating value as a different number.
    """
    try:
        floats = expr.atoms(Float)
    except AttributeError:
        return expr
    if not floats:
        return expr
    return expr.xreplace({f: Rational(str(f)) for f in floats})


@functools.lru_cache(maxsize=4096)
def _parse_latex(text: str) -> tuple[Basic, ...]:
    """Parse one answer with math-verify's LaTeX extraction only (no ``parse_expr``).

    Cached per worker: a reference is checked against each distinct answer of its group.
    """
    parsed = parse(
        f"${text}$",
        extraction_config=[_LATEX_CONFIG],
        fallback_mode="no_fallback",
        parsing_timeout=None,  # the pool's hard timeout bounds us; signal.alarm is per-second
    )
    return tuple(_imaginary(_exact(p)) for p in parsed)


def _imaginary(expr: Basic) -> Basic:
    """The letter i is the imaginary unit (``3i(1+i)`` = ``-3+3i``): in a final answer it is
    almost never an index, and the parser reads it as a plain symbol."""
    try:
        symbols = [s for s in expr.free_symbols if s.name == "i"]
    except AttributeError:
        return expr
    return expr.xreplace({s: I for s in symbols}) if symbols else expr


# Points at which expressions are compared numerically: symbols get these values by name (so
# x(real) and x(complex) from the two parses agree), two points to avoid a lucky root. Exact
# rationals, so that a difference evaluated at them is exact too.
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


def _plain_exprs(gold: Basic, pred: Basic) -> bool:
    """Two scalar expressions, not both bare symbols: the case where math-verify's comparison is
    plain mathematical equality (no relation, set, matrix, percentage or text handling). Two
    bare symbols are names or letters (``A`` against ``a``: math-verify's rules); one against an
    expression (``x`` against ``\\frac{x(y^2+1)}{y^2+1}``) is an expression like any other."""
    exprs = all(isinstance(e, Expr) and not e.has(UnevaluatedExpr) for e in (gold, pred))
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
    """Decide two plain expressions cheaply, else None (then math-verify runs in full).

    * ``expand(gold - pred) == 0`` is an exact identity: equal (``(x+1)^2`` vs ``x^2+2x+1``).
    * Two expressions equal as functions agree at every point where both are defined, so a
      difference at one point proves them different. A clear one in double precision is found
      cheaply; below it, the exact difference at the point is evaluated on its own: never a
      tolerance, so tiny or huge values that differ are different (``2^{-60}`` against
      ``2^{-60} + 2^{-120}``, ``2^{100}x`` against ``(2^{100}+1)x``). This skips sympy's
      ``simplify`` — the slowest step — for most wrong answers.
    * Expressions with trigonometric functions that agree at the points are compared by
      ``simplify`` after rewriting them in cosines and in exponentials (``\\cot^2 x`` and
      ``\\csc^2 x - 1``, ``\\tan x + \\cot x`` and ``2\\csc 2x``): identities that
      math-verify's own ``simplify`` misses.
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
    reversed; None when the rule does not decide (the multiple is not a constant: math-verify's
    rules apply)."""
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


def _elements_differ(gold: Basic, pred: Basic) -> bool:
    """Whether two tuples, intervals, matrices or finite sets provably differ in one element.

    math-verify compares elements numerically after ``chop`` (differences below ~1e-15 vanish,
    whatever the size of the values), so ``(\\frac{\\pi}{10^{20}}, 1)`` would equal
    ``(\\frac{2\\pi}{10^{20}}, 1)``; elements are compared here first, relatively."""
    if isinstance(gold, Tuple) and isinstance(pred, Tuple) and len(gold) == len(pred):
        return any(_quick_verdict(g, p) is False for g, p in zip(gold, pred, strict=True))
    if isinstance(gold, Interval) and isinstance(pred, Interval):
        ends = ((gold.start, pred.start), (gold.end, pred.end))
        return any(_quick_verdict(g, p) is False for g, p in ends)
    if isinstance(gold, MatrixBase) and isinstance(pred, MatrixBase) and gold.shape == pred.shape:
        return any(_quick_verdict(g, p) is False for g, p in zip(gold, pred, strict=True))
    if isinstance(gold, FiniteSet) and isinstance(pred, FiniteSet) and len(gold) == len(pred):
        # An element of one that differs from every element of the other.
        return any(all(_quick_verdict(g, p) is False for g in gold.args) for p in pred.args)
    return False


def symbolic_equivalent(check: SymbolicCheck) -> tuple[bool, str]:
    """math-verify's verdict on a check the exact rules left (``decide.decide``). Runs inside a
    pool worker.

    An answer written as a calculation (``20 - 8 = 12``) counts only when every step holds and
    its value is the reference's: a false equation is no answer. A congruence answers its least
    residue when every step holds modulo its modulus (``relations.congruence_value``, with the
    sides evaluated here)."""
    answer, reference = check.answer, check.reference
    if check.congruence is not None:
        residue = congruence_value(*check.congruence, integer=_integer)
        if residue is None or residue == Reason.FALSE_EQUATION:
            return False, Reason.FALSE_EQUATION
        answer = residue
    for left, right in check.steps:
        equal, reason = _one_symbolic(left, right)
        if not equal:
            return False, Reason.FALSE_EQUATION if reason == Reason.NOT_EQUIVALENT else reason
    return _one_symbolic(answer, reference)


def _integer(text: str) -> int | None:
    """The integer a side of a congruence evaluates to (``2^{10}``), or None."""
    parsed = _parse_latex(text)
    value = parsed[0].doit() if len(parsed) == 1 and isinstance(parsed[0], Expr) else None
    return int(value) if value is not None and value.is_Integer else None


def _one_symbolic(answer: str, reference: str) -> tuple[bool, str]:
    gold = _parse_latex(reference)
    if not gold:
        return False, Reason.UNPARSABLE_REFERENCE
    pred = _parse_latex(answer)
    if not pred:
        return False, Reason.UNPARSABLE_ANSWER
    if len(gold) == 1 and len(pred) == 1:
        relation = _relation_verdict(gold[0], pred[0])
        if relation is not None:
            return relation, Reason.EQUIVALENT if relation else Reason.NOT_EQUIVALENT
    # Percentages get special rules in math-verify (9% == 9): leave those to it.
    if len(gold) == 1 and len(pred) == 1 and "%" not in answer + reference:
        quick = _quick_verdict(gold[0], pred[0])
        if quick is not None:
            return quick, Reason.EQUIVALENT if quick else Reason.NOT_EQUIVALENT
        if _elements_differ(gold[0], pred[0]):
            return False, Reason.NOT_EQUIVALENT
    equal = verify(list(gold), list(pred), timeout_seconds=None)
    return bool(equal), Reason.EQUIVALENT if equal else Reason.NOT_EQUIVALENT


_WARM_UP = (
    ("\\frac{\\sqrt{2}}{2}", "\\frac{1}{\\sqrt{2}}"),
    ("(x+1)^2", "x^2+2x+1"),
    ("y=x", "x=y"),
    ("(-\\infty,0)\\cup(1,\\infty)", "(-\\infty,0)\\cup(1,\\infty)"),
    ("\\begin{pmatrix}1\\\\2\\end{pmatrix}", "\\begin{pmatrix}1\\\\2\\end{pmatrix}"),
    ("\\{1,2\\}", "1,2"),
    ("3\\pi", "\\frac{6\\pi}{2}"),
    ("\\sqrt{2}", "1.414"),
)


def warm_up() -> None:
    """Run representative checks once: sympy and the ANTLR parser are slow on first use."""
    for answer, reference in _WARM_UP:
        try:
            symbolic_equivalent(SymbolicCheck(answer, reference))
        except Exception:
            log.debug("warm-up check failed", exc_info=True)
