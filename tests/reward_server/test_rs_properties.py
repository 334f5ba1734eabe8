"""Verdicts held by properties, not only by rows (hypothesis): for generated values of every class
the grammar reads (integers, decimals, fractions, radicals, multiples of π; intervals, sets,
tuples, matrices; equations, inequalities, a function's value at a point; values with units),

* every spelling of a value is equivalent to it (plain text or LaTeX, spacing, wrappers, sides
  swapped, a relation flipped, a redundant ``*``);
* a value with any one of its numbers changed is not: never a false positive;
* a remark that states another value (in brackets, in ``\\text{…}``, after "which is", "that
  is", "i.e.") is refused, and one that restates the value is not.

Each property runs a fixed number of generated values (``EXAMPLES``, derandomized: the same
cases on every run), each value checked in every spelling; the counts are in
``docs/reward-server.md``. When a property fails, its shrunk example becomes a named row of
``checker_corpus.py`` (kind ``properties``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from reward_server.checker.decide import equivalent_inline

EXAMPLES = 150  # generated values per class and property


@dataclass(frozen=True)
class Case:
    """A value of one class: its reference spelling, other spellings of it, and spellings of
    values that differ from it in exactly one number."""

    reference: str
    spellings: tuple[str, ...]
    changed: tuple[str, ...]


def _frac(value: Fraction) -> str:
    sign = "-" if value < 0 else ""
    value = abs(value)
    if value.denominator == 1:
        return f"{sign}{value.numerator}"
    return f"{sign}\\frac{{{value.numerator}}}{{{value.denominator}}}"


small = st.integers(min_value=-999, max_value=999)
positive = st.integers(min_value=1, max_value=99)
nonzero_shift = st.integers(min_value=1, max_value=9).flatmap(lambda d: st.sampled_from([d, -d]))


@st.composite
def integers(draw: st.DrawFn) -> Case:
    n = draw(st.integers(min_value=-(10**7), max_value=10**7))
    d = draw(nonzero_shift)
    spellings = [f"{n}", f"{{{n}}}", f"${n}$", f"\\boxed{{{n}}}", f"{n}.0", f" {n} ", f"({n})"]
    spellings += [f"{n}.", f"\\({n}\\)", f"**{n}**", f"The final answer is {n}"]
    if abs(n) >= 1000:
        spellings += [f"{n:,}", f"{n:,}".replace(",", "{,}"), f"{n:,}".replace(",", "\\,")]
    changed = [f"{n + d}", f"{n + d:,}" if abs(n) >= 1000 else f"{n + d}.0"]
    return Case(str(n), tuple(spellings), tuple(changed))


@st.composite
def decimals(draw: st.DrawFn) -> Case:
    digits = draw(st.integers(min_value=1, max_value=4))
    whole = draw(st.integers(min_value=0, max_value=999))
    part = draw(st.integers(min_value=1, max_value=10**digits - 1))
    value = whole + Fraction(part, 10**digits)
    text = f"{whole}.{part:0{digits}d}"
    d = draw(st.integers(min_value=1, max_value=9))
    spellings = [text, _frac(value), f"{value.numerator}/{value.denominator}", f"{text}0"]
    spellings += [f"\\dfrac{{{value.numerator}}}{{{value.denominator}}}", f"\\boxed{{{text}}}"]
    if whole == 0:
        spellings.append(text[1:])  # ".25"
    changed = [_frac(value + Fraction(d, 10**digits)), f"{whole + d}.{part:0{digits}d}"]
    return Case(text, tuple(spellings), tuple(changed))


@st.composite
def fractions(draw: st.DrawFn) -> Case:
    p, q = draw(small.filter(bool)), draw(st.integers(min_value=2, max_value=199))
    value = Fraction(p, q)
    k = draw(st.integers(min_value=2, max_value=9))
    a, b = abs(value.numerator), value.denominator
    sign = "-" if value < 0 else ""
    spellings = [
        _frac(value),
        f"{sign}{a}/{b}",
        f"{sign}\\frac{{{a * k}}}{{{b * k}}}",
        f"\\frac{{{sign}{a}}}{{{b}}}",
        f"{sign}\\tfrac{{{a}}}{{{b}}}",
        f"{sign}\\dfrac {a} {{{b}}}" if a < 10 else f"{sign}\\dfrac{{{a}}}{{{b}}}",
    ]
    changed = [_frac(value + Fraction(1, b)), f"{sign}\\frac{{{a}}}{{{b + 1}}}"]
    return Case(_frac(value), tuple(spellings), tuple(changed))


def _squarefree(n: int) -> bool:
    return all(n % (k * k) for k in range(2, math.isqrt(n) + 1))


@st.composite
def radicals(draw: st.DrawFn) -> Case:
    a = draw(st.integers(min_value=2, max_value=12))
    b = draw(st.integers(min_value=2, max_value=50).filter(_squarefree))
    spellings = [
        f"{a}\\sqrt{{{b}}}",
        f"{a} \\sqrt {b}" if b < 10 else f"{a} \\sqrt{{{b}}}",
        f"{a}*sqrt({b})",
        f"\\sqrt{{{a * a * b}}}",
        f"sqrt({a * a * b})",
        f"{a}\u221a{b}",
        f"\\sqrt{{{b}}} \\cdot {a}",
    ]
    other = next(c for c in range(b + 1, b + 20) if _squarefree(c))
    changed = [f"{a + 1}\\sqrt{{{b}}}", f"{a}\\sqrt{{{other}}}", f"\\sqrt{{{a * a * b + 1}}}"]
    return Case(f"{a}\\sqrt{{{b}}}", tuple(spellings), tuple(changed))


@st.composite
def multiples_of_pi(draw: st.DrawFn) -> Case:
    k, m = draw(positive), draw(st.integers(min_value=2, max_value=12))
    value = Fraction(k, m)
    k, m = value.numerator, value.denominator
    if m == 1:
        return Case(
            f"{k}\\pi",
            (f"{k}\\pi", f"{k}pi", f"{k} \\cdot \\pi", f"\\pi \\cdot {k}"),
            (f"{k + 1}\\pi",),
        )
    spellings = [
        f"\\frac{{{k}\\pi}}{{{m}}}",
        f"\\frac{{{k}}}{{{m}}}\\pi",
        f"{k}\\pi/{m}",
        f"{k}pi/{m}",
        f"\\frac{{{k} \\pi}}{{{m}}}",
        f"{k}\u03c0/{m}",
    ]
    changed = [f"\\frac{{{k + 1}\\pi}}{{{m}}}", f"\\frac{{{k}\\pi}}{{{m + 1}}}"]
    return Case(spellings[0], tuple(spellings), tuple(changed))


@st.composite
def intervals(draw: st.DrawFn) -> Case:
    lo = draw(st.integers(min_value=-50, max_value=50))
    hi = lo + draw(st.integers(min_value=1, max_value=50))
    left, right = draw(st.sampled_from("[(")), draw(st.sampled_from("])"))
    le = "\\le" if left == "[" else "<"
    re_ = "\\le" if right == "]" else "<"
    ge_right = "\\ge" if right == "]" else ">"
    ge_left = "\\ge" if left == "[" else ">"
    reference = f"{left}{lo}, {hi}{right}"
    spellings = [
        reference,
        f"\\left{left}{lo},{hi}\\right{right}",
        f"x \\in {reference}",
        f"{lo} {le} x {re_} {hi}",
        f"{hi} {ge_right} x {ge_left} {lo}",
    ]
    changed = [f"{left}{lo - 1}, {hi}{right}", f"{left}{lo}, {hi + 1}{right}"]
    return Case(reference, tuple(spellings), tuple(changed))


@st.composite
def sets(draw: st.DrawFn) -> Case:
    items = draw(st.lists(small, min_size=2, max_size=5, unique=True))
    order = draw(st.permutations(items))
    d = draw(nonzero_shift)
    bumped = items[0] + d
    reference = "\\{" + ", ".join(map(str, items)) + "\\}"
    spellings = [
        reference,
        "\\{" + ",".join(map(str, order)) + "\\}",
        "\\left\\{" + ", ".join(map(str, order)) + "\\right\\}",
        ", ".join(map(str, order)),
    ]
    changed = []
    if bumped not in items:
        changed.append("\\{" + ", ".join(map(str, [bumped, *items[1:]])) + "\\}")
    changed.append("\\{" + ", ".join(map(str, items[1:])) + "\\}")
    return Case(reference, tuple(spellings), tuple(changed))


@st.composite
def tuples(draw: st.DrawFn) -> Case:
    items = draw(st.lists(small, min_size=2, max_size=4))
    i = draw(st.integers(min_value=0, max_value=len(items) - 1))
    d = draw(nonzero_shift)
    joined = ", ".join(map(str, items))
    spellings = [
        f"({joined})",
        f"\\left({joined}\\right)",
        f"\\langle {joined} \\rangle",
        "\\begin{pmatrix}" + " \\\\ ".join(map(str, items)) + "\\end{pmatrix}",
        "(" + ",".join(map(str, items)) + ")",
    ]
    bumped = [*items[:i], items[i] + d, *items[i + 1 :]]
    changed = ["(" + ", ".join(map(str, bumped)) + ")"]
    if items[::-1] != items:
        changed.append("(" + ", ".join(map(str, items[::-1])) + ")")
    return Case(f"({joined})", tuple(spellings), tuple(changed))


@st.composite
def matrices(draw: st.DrawFn) -> Case:
    cells = draw(st.lists(small, min_size=4, max_size=4))
    i = draw(st.integers(min_value=0, max_value=3))
    d = draw(nonzero_shift)

    def matrix(c: list[int], env: str = "pmatrix", sep: str = " & ") -> str:
        return f"\\begin{{{env}}}{c[0]}{sep}{c[1]} \\\\ {c[2]}{sep}{c[3]}\\end{{{env}}}"

    spellings = [matrix(cells), matrix(cells, "bmatrix", "&"), matrix(cells, "matrix")]
    changed = [matrix([*cells[:i], cells[i] + d, *cells[i + 1 :]])]
    return Case(matrix(cells), tuple(spellings), tuple(changed))


@st.composite
def equations(draw: st.DrawFn) -> Case:
    a, b = draw(small.filter(bool)), draw(small.filter(bool))
    sign = "+" if b > 0 else "-"
    line = f"{a}x {sign} {abs(b)}"
    spellings = [
        f"y = {line}",
        f"y={a}x{sign}{abs(b)}",
        f"{line} = y",
        f"f(x) = {line}",
        f"y = {b} + {a}x" if b > 0 else f"y = {b} + {a} x",
        f"y = {a}*x {sign} {abs(b)}",
    ]
    changed = [f"y = {a + 1}x {sign} {abs(b)}", f"y = {a}x {sign} {abs(b) + 1}"]
    return Case(f"y = {line}", tuple(spellings), tuple(changed))


@st.composite
def inequalities(draw: st.DrawFn) -> Case:
    c = draw(small)
    a = draw(st.integers(min_value=2, max_value=9))
    strict = draw(st.booleans())
    op, flipped = (">", "<") if strict else ("\\ge", "\\le")
    bracket = "(" if strict else "["
    spellings = [
        f"x {op} {c}",
        f"{c} {flipped} x",
        f"{bracket}{c}, \\infty)",
        f"{a}x {op} {a * c}",
        f"-x {flipped} {-c}",
        f"x \\in {bracket}{c},\\infty)",
    ]
    changed = [f"x {op} {c + 1}", f"{a}x {op} {a * c + 1}"]
    return Case(f"x {op} {c}", tuple(spellings), tuple(changed))


@st.composite
def function_values(draw: st.DrawFn) -> Case:
    name = draw(st.sampled_from("fgh"))
    at, value = draw(small), draw(small)
    reference = f"{name}({at}) = {value}"
    spellings = [reference, f"{name}({at})={value}", f"{name}\\left({at}\\right) = {value}"]
    changed = [f"{name}({at}) = {value + 1}", f"{name}({at + 1}) = {value}"]
    return Case(reference, tuple(spellings), tuple(changed))


@st.composite
def with_units(draw: st.DrawFn) -> Case:
    n = draw(st.integers(min_value=1, max_value=10**5))
    unit, spelled = draw(
        st.sampled_from(
            [
                ("cm", ("cm", "\\text{ cm}", "centimeters", "\\,\\mathrm{cm}")),
                ("kg", ("kg", "\\text{ kg}", "kilograms", "\\text{kilograms}")),
                ("hours", ("hours", "hrs", "\\text{ h}", "hour")),
                (
                    "\\text{ m}^2",
                    ("\\text{ m}^2", "\\text{ sq m}", "\\mathrm{m}^2", "square meters"),
                ),
            ]
        )
    )
    reference = f"{n}\\text{{ {unit}}}" if unit.isalpha() else f"{n}{unit}"
    spellings = (*(f"{n} {s}" if s[0].isalpha() else f"{n}{s}" for s in spelled), f"{n}")
    other = "\\text{ km}" if unit != "km" else "\\text{ m}"
    changed = (f"{n + 1} {spelled[0]}", f"{n}{other}")
    return Case(reference, spellings, changed)


CLASSES: dict[str, Callable[[], st.SearchStrategy[Case]]] = {
    "integers": integers,
    "decimals": decimals,
    "fractions": fractions,
    "radicals": radicals,
    "multiples_of_pi": multiples_of_pi,
    "intervals": intervals,
    "sets": sets,
    "tuples": tuples,
    "matrices": matrices,
    "equations": equations,
    "inequalities": inequalities,
    "function_values": function_values,
    "with_units": with_units,
}
any_case = st.one_of(*(strategy() for strategy in CLASSES.values()))


@settings(max_examples=EXAMPLES * len(CLASSES), deadline=None, derandomize=True)
@given(any_case)
def test_every_spelling_of_a_value_is_equivalent_to_it(case: Case) -> None:
    for spelling in case.spellings:
        verdict = equivalent_inline(spelling, case.reference)
        assert verdict.equal, (spelling, case.reference, verdict.reason)


@settings(max_examples=EXAMPLES * len(CLASSES), deadline=None, derandomize=True)
@given(any_case)
def test_changing_one_number_is_never_equivalent(case: Case) -> None:
    for changed in case.changed:
        verdict = equivalent_inline(changed, case.reference)
        assert not verdict.equal, (changed, case.reference)
        spelled = equivalent_inline(case.reference, changed)
        assert not spelled.equal, (case.reference, changed)


REMARKS = (
    "{value} (which is {other})",
    "{value} \\text{{ (which equals {other})}}",
    "{value}, which is {other}",
    "{value}, that is, {other}",
    "{value} (that is, {other})",
    "{value}, i.e. {other}",
    "{value} (i.e. {other})",
    "{value} \\text{{ (that is {other})}}",
)


@settings(max_examples=EXAMPLES * 4, deadline=None, derandomize=True)
@given(
    st.integers(min_value=-(10**6), max_value=10**6),
    nonzero_shift,
    st.sampled_from(REMARKS),
)
def test_a_remark_that_states_another_value_is_refused(n: int, d: int, remark: str) -> None:
    stated = remark.format(value=n, other=n + d)
    assert not equivalent_inline(stated, str(n)).equal, stated
    assert not equivalent_inline(stated, str(n + d)).equal, stated
    restated = remark.format(value=n, other=f"{n}.0")
    assert equivalent_inline(restated, str(n)).equal, restated
