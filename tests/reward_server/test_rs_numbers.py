"""Exact numbers (``reward_server.checker.numbers``): number words, one-number answers, calculations
with numbers only, the percent rule of ``numbers_equal`` and numerals in a base."""

from __future__ import annotations

from fractions import Fraction

import pytest
from readers import statement, tree  # tests/reward_server/, on sys.path (conftest.py)

from reward_server.checker import numbers
from reward_server.checker.compare import equal_values
from reward_server.checker.reading import Statement
from reward_server.checker.syntax import Unparsable, parse
from reward_server.checker.values import Number, item_value, unwrapped

# (text, the integer it names in words, or None).
NUMBER_WORD_VALUE = [
    pytest.param("seven", 7, id="ones:seven"),
    pytest.param("Seven", 7, id="case_insensitive:Seven"),
    pytest.param("zero", 0, id="ones:zero"),
    pytest.param("nineteen", 19, id="teens:nineteen"),
    pytest.param("forty", 40, id="tens:forty"),
    pytest.param("twenty-five", 25, id="tens_ones_hyphen:twenty-five"),
    pytest.param("sixty seven", 67, id="tens_ones_space:sixty seven"),
    pytest.param("one hundred", 100, id="hundred:one hundred"),
    pytest.param("one hundred and twelve", 112, id="hundred_and:one hundred and twelve"),
    pytest.param("three thousand", 3000, id="scale:three thousand"),
    pytest.param("five thousand and one", 5001, id="scale_and:five thousand and one"),
    pytest.param("one million one", 1_000_001, id="scale_then_ones:one million one"),
    pytest.param("one billion", 10**9, id="scale:one billion"),
    pytest.param(
        "two million three hundred thousand", 2_300_000, id="scales:two million three hundred"
    ),
    pytest.param(
        "nine hundred ninety-nine thousand nine hundred ninety-nine",
        999_999,
        id="scales:999999",
    ),
    pytest.param("five five", None, id="ones_after_ones:five five"),
    pytest.param("five twenty", None, id="tens_after_ones:five twenty"),
    pytest.param("twenty thirty", None, id="tens_after_tens:twenty thirty"),
    pytest.param("hundred", None, id="hundred_without_ones:hundred"),
    pytest.param("twelve hundred", None, id="hundred_after_teen:twelve hundred"),
    pytest.param("ninety hundred", None, id="hundred_after_tens:ninety hundred"),
    pytest.param("thousand", None, id="scale_without_number:thousand"),
    pytest.param("one thousand thousand", None, id="scale_after_scale:one thousand thousand"),
    pytest.param("a hundred", None, id="article:a hundred"),
    pytest.param("and", None, id="and_alone:and"),
    pytest.param("seven and", None, id="and_with_one_word:seven and"),
    pytest.param("", None, id="empty"),
    pytest.param("12", None, id="digits:12"),
    pytest.param("apples", None, id="not_a_number_word:apples"),
    pytest.param("seventy-twelve", None, id="tens_then_teen:seventy-twelve"),
    pytest.param("twenty-zero", None, id="tens_then_zero:twenty-zero"),
    pytest.param("three thousand two thousand", None, id="scale_not_decreasing:two thousands"),
    pytest.param("three million two thousand and twelve", 3002012, id="scales_decreasing"),
]


@pytest.mark.parametrize(("text", "expected"), NUMBER_WORD_VALUE)
def test_number_word_value(text: str, expected: int | None) -> None:
    assert numbers.number_word_value(text) == expected


# (answer, (the exact value it states, written as a percent), or None when it states no
# number).
PARSE_NUMBER = [
    pytest.param("12", (Fraction(12), False), id="integer:12"),
    pytest.param("-12", (Fraction(-12), False), id="sign:-12"),
    pytest.param("+12", (Fraction(12), False), id="sign:+12"),
    pytest.param("-1,234.5", (Fraction(-2469, 2), False), id="thousands_comma:-1,234.5"),
    pytest.param("1,234,567", (Fraction(1234567), False), id="thousands_comma:1,234,567"),
    pytest.param("1 000 000", (Fraction(10**6), False), id="thousands_space:1 000 000"),
    pytest.param(".5", (Fraction(1, 2), False), id="leading_point:.5"),
    pytest.param("18.", (Fraction(18), False), id="trailing_point:18."),
    pytest.param("0.333333", (Fraction(333333, 10**6), False), id="exact_decimal:0.333333"),
    pytest.param("1.5e3", (Fraction(1500), False), id="scientific_e:1.5e3"),
    pytest.param("1.5E-3", (Fraction(3, 2000), False), id="scientific_e:1.5E-3"),
    pytest.param("2.5\\times 10^{3}", (Fraction(2500), False), id="scientific_times:2.5x10^{3}"),
    pytest.param("2.5\\times10^{-2}", (Fraction(1, 40), False), id="scientific_times:2.5x10^{-2}"),
    pytest.param("3\\cdot 10^2", (Fraction(300), False), id="scientific_cdot:3.10^2"),
    pytest.param("0.\\overline{3}", (Fraction(1, 3), False), id="repeating:0.(3)"),
    pytest.param("0.1\\overline{6}", (Fraction(1, 6), False), id="repeating_after_digits:0.1(6)"),
    pytest.param("0.\\overline{142857}", (Fraction(1, 7), False), id="repeating_block:0.(142857)"),
    pytest.param("1.\\overline{9}", (Fraction(2), False), id="repeating_nines:1.(9)"),
    pytest.param("2\\frac{1}{2}", (Fraction(5, 2), False), id="mixed_number:2\\frac{1}{2}"),
    pytest.param("2 \\frac{1}{2}", (Fraction(5, 2), False), id="mixed_number:2 \\frac{1}{2}"),
    pytest.param("-2\\frac{1}{2}", (Fraction(-5, 2), False), id="mixed_number:-2\\frac{1}{2}"),
    pytest.param("2 1/2", (Fraction(5, 2), False), id="mixed_number:2 1/2"),
    pytest.param("-2 1/2", (Fraction(-5, 2), False), id="mixed_number:-2 1/2"),
    pytest.param("\\frac{3}{4}", (Fraction(3, 4), False), id="fraction:\\frac{3}{4}"),
    pytest.param("-\\frac{3}{4}", (Fraction(-3, 4), False), id="fraction_sign:-\\frac{3}{4}"),
    pytest.param("\\frac{-3}{4}", (Fraction(-3, 4), False), id="fraction_sign:\\frac{-3}{4}"),
    pytest.param("\\frac34", (Fraction(3, 4), False), id="fraction_braceless:\\frac34"),
    pytest.param("\\frac{1.5}{3}", (Fraction(1, 2), False), id="fraction_decimals:\\frac{1.5}{3}"),
    pytest.param("3/4", (Fraction(3, 4), False), id="slash:3/4"),
    pytest.param("25\\%", (Fraction(25), True), id="percent:25\\%"),
    pytest.param("12.5\\%", (Fraction(25, 2), True), id="percent:12.5\\%"),
    pytest.param("seven", (Fraction(7), False), id="number_word:seven"),
    pytest.param("five thousand", (Fraction(5000), False), id="number_word:five thousand"),
    pytest.param("twenty-five\\%", (Fraction(25), True), id="number_word_percent:twenty-five\\%"),
    pytest.param("x = 12", (Fraction(12), False), id="assignment:x = 12"),
    pytest.param("x=12", (Fraction(12), False), id="assignment:x=12"),
    pytest.param("\\text{total} = 12", (Fraction(12), False), id="assignment_text:total = 12"),
    pytest.param("16-3-4", (Fraction(9), False), id="calculation:16-3-4"),
    pytest.param("9\\times2", (Fraction(18), False), id="calculation:9\\times2"),
    pytest.param("(3+4)\\cdot 2", (Fraction(14), False), id="calculation:(3+4)\\cdot 2"),
    pytest.param("(3+4)", (Fraction(7), False), id="calculation:(3+4)"),
    pytest.param("2^{10}", (Fraction(1024), False), id="calculation:2^{10}"),
    pytest.param("5 thousand", (Fraction(5000), False), id="numeric_multiplier:5 thousand"),
    pytest.param("5 dozen", (Fraction(60), False), id="numeric_multiplier:5 dozen"),
    pytest.param("5 hundreds", (Fraction(500), False), id="numeric_multiplier:5 hundreds"),
    pytest.param(
        "5\\text{ thousand}", (Fraction(5000), False), id="numeric_multiplier_text:5 thousand"
    ),
    pytest.param("5 cm", (Fraction(5), False), id="unit:5 cm"),
    pytest.param("5\\text{ apples}", (Fraction(5), False), id="unit_text:5\\text{ apples}"),
    pytest.param("5 km/h", (Fraction(5), False), id="unit_per:5 km/h"),
    pytest.param("5x", None, id="variable:5x"),
    pytest.param("x", None, id="variable:x"),
    pytest.param("5 pi", None, id="math_word:5 pi"),
    pytest.param("5 m", None, id="single_letter_not_unit:5 m"),
    pytest.param("\\sqrt{2}", None, id="not_a_number:\\sqrt{2}"),
    pytest.param("1e100000", None, id="exponent_too_large:1e100000"),
    pytest.param("1,2", None, id="list:1,2"),
    pytest.param("1,23", None, id="bad_thousands:1,23"),
    pytest.param("12, 5", None, id="list:12, 5"),
    pytest.param("2 3", None, id="two_numbers:2 3"),
    pytest.param("3 -", None, id="dangling_operator:3 -"),
    pytest.param("\\frac{1}{0}", None, id="zero_denominator:\\frac{1}{0}"),
    pytest.param("1/0", None, id="zero_denominator:1/0"),
    pytest.param("2 3/2", None, id="mixed_number_improper:2 3/2"),
    pytest.param("2\\frac{3}{2}", None, id="mixed_number_improper:2\\frac{3}{2}"),
    pytest.param("x = y = 12", (Fraction(12), False), id="chained_assignment_last_side"),
    pytest.param("5 sec", (Fraction(5), False), id="unit_also_math_word:5 sec"),
    pytest.param("5\\text{ pi}", None, id="math_word_in_text:5\\text{ pi}"),
]


@pytest.mark.parametrize(("text", "expected"), PARSE_NUMBER)
def test_stated_number(text: str, expected: tuple[Fraction, bool] | None) -> None:
    read = statement(text)
    value = read.value if isinstance(read, Statement) else None
    assert ((value.value, value.percent) if isinstance(value, Number) else None) == expected


# (calculation with numbers only, its exact value, or None).
ARITHMETIC = [
    pytest.param("16-3-4", Fraction(9), id="left_associative:16-3-4"),
    pytest.param("8/2/2", Fraction(2), id="left_associative:8/2/2"),
    pytest.param("2+3*4", Fraction(14), id="precedence:2+3*4"),
    pytest.param("(2+3)*4", Fraction(20), id="brackets:(2+3)*4"),
    pytest.param("{2}^{3}", Fraction(8), id="braces:{2}^{3}"),
    pytest.param("-3+5", Fraction(2), id="unary_minus:-3+5"),
    pytest.param("10 / 4", Fraction(5, 2), id="exact_division:10 / 4"),
    pytest.param("2 \\div 4", Fraction(1, 2), id="latex_div:2 \\div 4"),
    pytest.param("3 \\cdot 4", Fraction(12), id="latex_cdot:3 \\cdot 4"),
    pytest.param("9\\times2", Fraction(18), id="latex_times:9\\times2"),
    pytest.param("3×4", Fraction(12), id="unicode_times:3×4"),
    pytest.param("7÷2", Fraction(7, 2), id="unicode_div:7÷2"),
    pytest.param("1.5+1.5", Fraction(3), id="decimals:1.5+1.5"),
    pytest.param("2^{-2}", Fraction(1, 4), id="negative_exponent:2^{-2}"),
    pytest.param("2^{100}", Fraction(2**100), id="max_exponent:2^{100}"),
    pytest.param("2^{101}", None, id="exponent_too_large:2^{101}"),
    pytest.param("99999999999^{100}", None, id="too_many_digits:99999999999^{100}"),
    pytest.param("2^{0.5}", None, id="fractional_exponent:2^{0.5}"),
    pytest.param("2^{x}", None, id="variable_exponent:2^{x}"),
    pytest.param("x+1", None, id="variable:x+1"),
    pytest.param("5 \\div 0", None, id="division_by_zero:5 \\div 0"),
    pytest.param("(2 + 3", None, id="unbalanced:(2 + 3"),
    pytest.param("3 -", None, id="dangling_operator:3 -"),
    pytest.param("2 3", None, id="juxtaposed:2 3"),
    pytest.param("", None, id="empty"),
    pytest.param("+".join(["1"] * 101), Fraction(101), id="long_sum:1+1+...(201)"),
    pytest.param("5!", Fraction(120), id="factorial:5!"),
    pytest.param("\\binom{5}{2}", Fraction(10), id="binomial:\\binom{5}{2}"),
    pytest.param("\\binom{100001}{2}", Fraction(5000050000), id="binomial_large_n"),
]


@pytest.mark.parametrize(("text", "expected"), ARITHMETIC)
def test_exact(text: str, expected: Fraction | None) -> None:
    read = parse(text)
    assert (None if isinstance(read, Unparsable) else numbers.exact(unwrapped(read))) == expected


def _n(value: str, percent: bool = False) -> tuple[Fraction, bool]:
    return Fraction(value), percent


# (answer, reference, equal): a bare number is read in the reference's unit; a percent against
# a bare reference above 1 is that number, against one of at most 1 its hundredth.
NUMBERS_EQUAL = [
    pytest.param(_n("1/2"), _n("1/2"), True, id="same_value:1/2|1/2"),
    pytest.param(_n("333333/1000000"), _n("1/3"), False, id="rounded_decimal:0.333333|1/3"),
    pytest.param(_n("25", True), _n("25", True), True, id="both_percent:25%|25%"),
    pytest.param(_n("25"), _n("25", True), True, id="bare_in_reference_unit:25|25%"),
    pytest.param(_n("1/4"), _n("25", True), False, id="bare_in_reference_unit:0.25|25%"),
    pytest.param(_n("25", True), _n("25"), True, id="percent_vs_large:25%|25"),
    pytest.param(_n("-50", True), _n("-50"), True, id="percent_vs_large:-50%|-50"),
    pytest.param(_n("25", True), _n("1/4"), True, id="percent_vs_fraction:25%|0.25"),
    pytest.param(_n("100", True), _n("1"), True, id="percent_vs_fraction:100%|1"),
    pytest.param(_n("1", True), _n("1"), False, id="percent_vs_fraction:1%|1"),
    pytest.param(_n("2000", True), _n("20"), False, id="percent_wrong_base:2000%|20"),
    pytest.param(_n("1/4", True), _n("1/4"), False, id="percent_wrong_base:0.25%|0.25"),
]


@pytest.mark.parametrize(("answer", "reference", "expected"), NUMBERS_EQUAL)
def test_numbers_equal(
    answer: tuple[Fraction, bool], reference: tuple[Fraction, bool], expected: bool
) -> None:
    assert numbers.numbers_equal(answer, reference) is expected


# (answer, reference, verdict of the exact comparison; None: undecided). A numeral in a base
# against another compares by digits and base; a numeral answer against a bare reference by its
# value (100_2 is 4); a bare answer against a numeral reference as digits in its base.
BASE_EQUAL = [
    pytest.param("1011_2", "1011_2", True, id="same_numeral:1011_2"),
    pytest.param("1011_{2}", "1011_2", True, id="braced_base:1011_{2}"),
    pytest.param("1011_{(2)}", "1011_2", True, id="parenthesised_base:1011_{(2)}"),
    pytest.param("(1011)_2", "1011_2", True, id="parenthesised_digits:(1011)_2"),
    pytest.param("\\text{1011}_2", "1011_2", True, id="text_digits:\\text{1011}_2"),
    pytest.param("01011_2", "1011_2", True, id="leading_zeros:01011_2"),
    pytest.param("1011", "1011_2", True, id="bare_in_other_base:1011|1011_2"),
    pytest.param("1011_2", "1011", False, id="numeral_answer_by_value:1011_2|1011"),
    pytest.param("1011_2", "11", True, id="numeral_answer_by_value:1011_2|11"),
    pytest.param("100_2", "4", True, id="numeral_answer_by_value:100_2|4"),
    pytest.param("100_2", "100", False, id="numeral_answer_by_value:100_2|100"),
    pytest.param("21_3", "21", False, id="numeral_answer_by_value:21_3|21"),
    pytest.param("4_2", "4", False, id="invalid_numeral_is_no_value:4_2|4"),
    pytest.param("11", "1011_2", False, id="bare_decimal_value:11|1011_2"),
    pytest.param("1012", "1011_2", False, id="bare_other_digits:1012|1011_2"),
    pytest.param("1011_2", "1011_3", False, id="other_base:1011_2|1011_3"),
    pytest.param("5_8", "5_{10}", False, id="other_base:5_8|5_{10}"),
    pytest.param("12", "12", True, id="both_bare:12|12"),
    pytest.param("1012_2", "1013_2", False, id="digit_invalid_in_base:1012_2"),
    pytest.param("A3", "A3_16", None, id="bare_letters:A3|A3_16"),
    pytest.param("a3_16", "A3_{16}", None, id="lower_case_digits_are_names:a3_16"),
    pytest.param("abc", "1_2", None, id="not_a_numeral:abc|1_2"),
]


@pytest.mark.parametrize(("answer", "reference", "expected"), BASE_EQUAL)
def test_numerals(answer: str, reference: str, expected: bool | None) -> None:
    assert equal_values(item_value(tree(answer)), item_value(tree(reference))) is expected
