"""Answer equivalence across GSM8K, MATH and AIME styles (in-process, no pool)."""

from __future__ import annotations

import time
from fractions import Fraction

import pytest
from readers import statement, value  # tests/reward_server/, on sys.path (conftest.py)

from reward_server.checker.compare import same_value
from reward_server.checker.decide import equivalent_inline
from reward_server.checker.reading import Statement
from reward_server.checker.values import Number


def _number(text: str) -> tuple[Fraction, bool] | None:
    """(value, written as a percent) of an answer that states one number exactly, else None."""
    read = statement(text)
    if not isinstance(read, Statement) or not isinstance(read.value, Number):
        return None
    return read.value.value, read.value.percent


# (answer, reference): must be judged equivalent.
EQUAL = [
    # GSM8K: integers with decoration
    ("72", "72"),
    ("72.0", "72"),
    ("72.00", "72"),
    ("$72", "72"),
    ("\\$72", "72"),
    ("72 dollars", "72"),
    ("\\$1,234.50", "1234.5"),
    ("1,234", "1234"),
    ("1234", "1,234"),
    ("1\\,234", "1234"),
    ("1{,}234", "1234"),
    ("1 000 000", "1000000"),
    ("\u22125", "-5"),
    ("18.", "18"),
    ("The answer is 18.", "18"),
    ("Final answer: 18", "18"),
    ("x = 18", "18"),
    ("18 apples", "18"),
    ("18\\text{ apples}", "18"),
    ("5 cm", "5"),
    ("5cm", "5"),
    ("5\\text{ m}", "5"),
    ("3\\text{ m/s}", "3"),
    ("5\\text{ cm}^2", "5"),
    ("12 km/h", "12"),
    ("90^\\circ", "90"),
    ("90^{\\circ}", "90"),
    ("90\u00b0", "90"),
    ("seven", "7"),
    # percent: GSM8K drops the sign, other sets use the fraction
    ("50\\%", "50"),
    ("50%", "50"),
    ("50 percent", "50"),
    ("25\\%", "0.25"),
    ("12.5%", "12.5\\%"),
    # scientific notation and exact decimals
    ("1.5e3", "1500"),
    ("1.5E+3", "1500"),
    ("2.5\\times 10^{3}", "2500"),
    ("3 \\cdot 10^2", "300"),
    ("0.5", "\\frac{1}{2}"),
    ("\\dfrac{1}{2}", "0.5"),
    ("\\tfrac12", "1/2"),
    (".5", "1/2"),
    ("-\\frac{3}{4}", "-0.75"),
    ("\\frac{-3}{4}", "-0.75"),
    ("0.\\overline{3}", "\\frac{1}{3}"),
    ("0.1\\overline{6}", "\\frac{1}{6}"),
    ("2\\frac{1}{2}", "\\frac{5}{2}"),  # mixed number
    # wrappers
    ("\\boxed{7}", "7"),
    ("$7$", "7"),
    ("\\(7\\)", "7"),
    ("(7)", "7"),
    # AIME: integers 0-999 written with leading zeros
    ("033", "33"),
    ("\\boxed{033}", "33"),
    # MATH: symbolic forms (math-verify)
    ("\\frac{\\sqrt{2}}{2}", "\\frac{1}{\\sqrt{2}}"),
    ("2\\sqrt{3}", "\\sqrt{12}"),
    ("(x+1)^2", "x^2+2x+1"),
    ("\\frac{\\pi}{4}", "\\frac{1}{4}\\pi"),
    ("\\sqrt[3]{8}", "2"),
    ("2^{10}", "1024"),
    ("y = 2x + 3", "2x+3"),
    ("3\\pi", "3 \\pi"),
    ("4\\sqrt{3}\\text{ cm}^2", "4\\sqrt{3}"),
    ("\\frac{x^2-1}{x-1}", "x+1"),
    ("\\sin^2 x + \\cos^2 x", "1"),
    ("x+y", "y+x"),
    ("\\log(8)", "3\\log(2)"),
    ("\\frac{1}{x}", "x^{-1}"),
    ("2^{1/2}", "\\sqrt{2}"),
    ("\\binom{5}{2}", "10"),
    ("5!", "120"),
    # intervals, tuples, sets, lists
    ("[1, 2)", "[1,2)"),
    ("x \\in [1, 2]", "[1,2]"),
    ("(-\\infty, 0) \\cup (1, \\infty)", "(-\\infty,0)\\cup(1,\\infty)"),
    ("(3, -4)", "\\left( 3, -4 \\right)"),
    ("(0.5, 2)", "(\\frac{1}{2}, 2)"),
    ("\\{1, 2, 3\\}", "3, 2, 1"),
    ("1, 2, 3", "3,1,2"),
    ("\\{-1, \\frac{1}{2}\\}", "0.5, -1"),
    # matrices
    ("\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", "\\begin{pmatrix}1\\\\2\\end{pmatrix}"),
    (
        "\\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}",
        "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}",
    ),
    ("\\begin{pmatrix} 0.5 \\\\ 2 \\end{pmatrix}", "\\begin{pmatrix}\\frac12\\\\2\\end{pmatrix}"),
    # text answers
    ("\\text{(C)}", "C"),
    ("(c)", "\\text{C}"),
    ("\\textbf{Monday}", "monday"),
    ("Even", "\\text{even}"),
]

# (answer, reference): look-alikes that must NOT be judged equivalent.
NOT_EQUAL = [
    ("0.33", "\\frac{1}{3}"),  # rounded decimal of a non-terminating value
    ("0.333333", "\\frac13"),
    ("0.3333333333", "1/3"),
    ("0.67", "\\frac{2}{3}"),
    ("72", "27"),
    ("72", "720"),
    ("7", "72"),
    ("72", "7"),
    ("1,234", "1,243"),
    ("1,234", "1.234"),
    ("-5", "5"),
    ("5%", "0.5"),
    ("50", "50.5"),
    ("1e3", "100"),
    ("5x", "5"),
    ("5 x", "5"),
    ("5m", "5"),  # an expression in m, not meters
    ("5abc", "5"),
    ("5", "5n"),
    ("5\\pi", "5"),
    ("5 pi", "5"),
    ("\\pi", "3.14159"),
    ("\\sqrt{2}", "1.414"),
    ("1.414", "\\sqrt{2}"),
    ("\\frac{\\sqrt{3}}{2}", "\\frac{\\sqrt{2}}{2}"),
    ("(x+1)^2", "x^2+1"),
    ("(x+1)^3", "x^3+3x^2+3x+2"),
    ("\\sqrt{x^2}", "x"),
    ("|x|", "x"),
    ("x+1", "y+1"),  # variables matter
    ("\\frac{37}{\\sqrt{38}}", "\\frac{\\sqrt{37}}{37}"),
    ("2x + 4", "y = 2x + 3"),
    ("[1, 2]", "(1, 2)"),  # closed vs open interval
    ("[1, 2)", "[1, 2]"),
    ("(1, 2)", "(2, 1)"),  # ordered pair
    ("\\{1, 2\\}", "\\{1, 2, 3\\}"),
    ("1, 2", "1, 2, 2"),
    ("(1, 2)", "3"),
    ("\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", "\\begin{pmatrix}2\\\\1\\end{pmatrix}"),
    (
        "\\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}",
        "\\begin{pmatrix}1&3\\\\2&4\\end{pmatrix}",
    ),
    ("x", "y"),
    ("\\text{Tuesday}", "Monday"),
    ("B", "\\text{(C)}"),
    ("odd", "7"),
    ("six", "7"),
    ("", "7"),
    ("033", "330"),
    ("72", "\\text{72 and 5}"),
]


@pytest.mark.parametrize(("answer", "reference"), EQUAL)
def test_equivalent_forms(answer: str, reference: str) -> None:
    verdict = equivalent_inline(answer, reference)
    assert verdict.equal, verdict
    assert verdict.reason == "equivalent"


@pytest.mark.parametrize(("answer", "reference"), NOT_EQUAL)
def test_look_alikes_are_not_equivalent(answer: str, reference: str) -> None:
    verdict = equivalent_inline(answer, reference)
    assert not verdict.equal, verdict


@pytest.mark.parametrize(
    ("text", "value", "percent"),
    [
        ("1,234.5", Fraction(2469, 2), False),
        ("-0.125", Fraction(-1, 8), False),
        ("0.\\overline{142857}", Fraction(1, 7), False),
        ("1.\\overline{9}", Fraction(2), False),
        ("1.5e-3", Fraction(3, 2000), False),
        ("12.5\\%", Fraction(25, 2), True),
        ("3\\frac{3}{4}", Fraction(15, 4), False),
        ("\\frac{6}{-4}", Fraction(-3, 2), False),
        ("10 000", Fraction(10000), False),
        # a calculation with numbers only is its exact value
        ("2^{10}", Fraction(1024), False),
        ("16 - 3 - 4", Fraction(9), False),
        ("9 \\times 2", Fraction(18), False),
        ("(3 + 4) \\cdot 2", Fraction(14), False),
        ("10 / 4", Fraction(5, 2), False),
        ("2^{-2}", Fraction(1, 4), False),
    ],
)
def test_exact_number_parsing(text: str, value: Fraction, percent: bool) -> None:
    assert _number(text) == (value, percent)


@pytest.mark.parametrize(
    "text",
    [
        *("5x", "x", "1,2", "2^{1000}", "\\sqrt{2}", "1/0", "\\frac{1}{0}", "1e100000", "5 pi"),
        *("12, 5", "3 -", "(2 + 3", "2 3", "5 \\div 0", "2^{x}", "(1, 2)"),
    ],
)
def test_not_a_plain_number(text: str) -> None:
    assert _number(text) is None


def test_numbers_are_decided_without_sympy() -> None:
    # The fast path must decide the common cases itself (None would mean "ask the pool").
    for answer, reference in [("1,234", "1234"), ("0.33", "1/3"), ("(1, 2)", "(1,2)")]:
        assert same_value(value(answer), value(reference)) is not None
    assert same_value(value("\\sqrt{2}"), value("\\frac{2}{\\sqrt{2}}")) is None


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("1" * 100_000, "answer_too_long"),  # 100 kB of digits
        ("\\frac{1}{" * 200 + "1" + "}" * 200, "answer_too_long"),  # 200 nested fractions
        ("\\frac{1}{" * 60 + "1" + "}" * 60, "answer_too_nested"),
        ("(" * 500, "answer_too_nested"),
    ],
)
def test_oversized_answers_are_rejected_quickly(answer: str, reason: str) -> None:
    start = time.process_time()
    verdict = equivalent_inline(answer, "1")
    assert (verdict.equal, verdict.reason) == (False, reason)
    assert time.process_time() - start < 0.1


def test_untrusted_code_is_never_evaluated(tmp_path) -> None:
    import sympy.parsing.sympy_parser as sp

    marker = tmp_path / "pwned"
    payload = f"__import__('os').system('touch {marker}')"
    # Proof that the payload is live: sympy's parse_expr (what math-verify's plain-expression
    # extraction uses) would run it.
    sp.parse_expr(payload)
    assert marker.exists()
    marker.unlink()

    for answer in (payload, f"\\boxed{{{payload}}}", f"${payload}$", f"(1, {payload})"):
        verdict = equivalent_inline(answer, "0")
        assert not verdict.equal
        assert not marker.exists(), f"{answer!r} was executed"
