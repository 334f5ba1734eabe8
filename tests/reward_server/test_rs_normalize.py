"""The canonical spelling of an answer (``reward_server.checker.normalize.canonical``): each rewrite
its code documents, with the exact string it produces."""

from __future__ import annotations

import pytest

from reward_server.checker.normalize import canonical

# (answer as written, its canonical spelling).
CANONICAL = [
    # answer prefixes: "The final answer is", "Answer:", GSM8K's "####", a markdown heading
    pytest.param("The final answer is 18", "18", id="answer_prefix:The final answer is 18"),
    pytest.param("the answer is 5", "5", id="answer_prefix:the answer is 5"),
    pytest.param("The answer is: 18", "18", id="answer_prefix_colon:The answer is: 18"),
    pytest.param("Answer: 18", "18", id="answer_prefix:Answer: 18"),
    pytest.param("answer = 18", "18", id="answer_prefix_equals:answer = 18"),
    pytest.param("#### 18", "18", id="answer_prefix_gsm8k:#### 18"),
    pytest.param("## Final Answer: 42", "42", id="answer_prefix_heading:## Final Answer: 42"),
    pytest.param(
        "The final answer is $\\boxed{18}$.",
        "18",
        id="answer_prefix_around_box:The final answer is $\\boxed{18}$.",
    ),
    pytest.param(
        "Final answer: \\boxed{18}", "18", id="answer_prefix_around_box:Final answer: \\boxed{18}"
    ),
    # wrappers: boxes and math delimiters
    pytest.param("\\boxed{18}", "18", id="boxed:\\boxed{18}"),
    pytest.param("$18$", "18", id="math_delimiters:$18$"),
    # \dfrac and \tfrac are \frac
    pytest.param("\\dfrac{1}{2}", "\\frac{1}{2}", id="dfrac:\\dfrac{1}{2}"),
    pytest.param("\\tfrac{3}{4}", "\\frac{3}{4}", id="tfrac:\\tfrac{3}{4}"),
    # TeX's one-token arguments are braced
    pytest.param("\\frac12", "\\frac{1}{2}", id="braceless_frac:\\frac12"),
    pytest.param("\\frac\\pi2", "\\frac{\\pi}{2}", id="braceless_frac_command:\\frac\\pi2"),
    pytest.param("\\frac1{x}", "\\frac{1}{x}", id="braceless_frac_one_braced:\\frac1{x}"),
    pytest.param("\\dfrac12", "\\frac{1}{2}", id="braceless_dfrac:\\dfrac12"),
    # size commands dropped, "\left." and "\right." with them
    pytest.param("\\left(1, 2\\right)", "(1, 2)", id="left_right:\\left(1, 2\\right)"),
    pytest.param("\\left[0, 1\\right)", "[0, 1)", id="left_right:\\left[0, 1\\right)"),
    pytest.param(
        "\\left\\{1, 2\\right\\}", "\\{1, 2\\}", id="left_right_set:\\left\\{1, 2\\right\\}"
    ),
    pytest.param(
        "\\left.\\frac{x}{2}\\right|",
        "\\frac{x}{2}|",
        id="left_dot:\\left.\\frac{x}{2}\\right|",
    ),
    pytest.param("\\bigl(x\\bigr)", "(x)", id="size_command:\\bigl(x\\bigr)"),
    pytest.param("\\Big(1\\Big)", "(1)", id="size_command:\\Big(1\\Big)"),
    # spacing commands are spaces, kept only where they separate words, digits or a unit
    pytest.param("\\displaystyle\\frac{1}{2}", "\\frac{1}{2}", id="displaystyle:\\displaystyle"),
    pytest.param("x\\quad y", "x y", id="spacing_quad:x\\quad y"),
    pytest.param("5\\ cm", "5 cm", id="spacing_backslash_space:5\\ cm"),
    pytest.param("a~b", "a b", id="spacing_tilde:a~b"),
    pytest.param("1\\;2", "1 2", id="spacing_between_digits_kept:1\\;2"),
    pytest.param("3\\,\\text{cm}", "3\\text{cm}", id="spacing_thin:3\\,\\text{cm}"),
    pytest.param("x + y", "x+y", id="squeeze_operators:x + y"),
    pytest.param("\\pi  r", "\\pi r", id="squeeze_between_words:\\pi  r"),
    pytest.param("45, 678", "45, 678", id="squeeze_keeps_list_comma:45, 678"),
    pytest.param("45,678", "45,678", id="squeeze_keeps_thousands:45,678"),
    pytest.param("5 cm", "5 cm", id="squeeze_keeps_unit:5 cm"),
    pytest.param(
        "3\\sqrt{2} meters", "3\\sqrt{2} meters", id="squeeze_keeps_unit_after_brace:3\\sqrt{2}"
    ),
    # a negative thin space joins what it stands between
    pytest.param("1,\\!000", "1000", id="negative_space_thousands:1,\\!000"),
    pytest.param("1\\!000", "1000", id="negative_space:1\\!000"),
    # a vector written with angle brackets is a tuple
    pytest.param("\\langle 2, -1\\rangle", "(2, -1)", id="langle:\\langle 2, -1\\rangle"),
    # the degree sign of a number is its unit; elsewhere it is dropped
    pytest.param("90^\\circ", "90 degrees", id="degrees:90^\\circ"),
    pytest.param("90^{\\circ}", "90 degrees", id="degrees_braced:90^{\\circ}"),
    pytest.param("90\u00b0", "90 degrees", id="degrees_sign:90°"),
    pytest.param("30\\degree", "30 degrees", id="degrees_command:30\\degree"),
    pytest.param("x^\\circ", "x", id="degrees_not_of_number:x^\\circ"),
    pytest.param(
        "\\sin 30^\\circ", "\\sin(\\frac{30\\pi}{180})", id="degrees_in_trig:\\sin 30^\\circ"
    ),
    # the currency sign of a number is the unit "dollars"
    pytest.param("\\$18", "18 dollars", id="currency:\\$18"),
    pytest.param("$18", "18 dollars", id="currency_bare_sign:$18"),
    pytest.param("\\$ 18", "18 dollars", id="currency_spaced:\\$ 18"),
    pytest.param("$18.50", "18.50 dollars", id="currency_decimal:$18.50"),
    pytest.param("\\$1,000", "1,000 dollars", id="currency_thousands:\\$1,000"),
    pytest.param("-\\$5", "-5 dollars", id="currency_sign_before:-\\$5"),
    pytest.param("\\$-5", "-5 dollars", id="currency_sign_after:\\$-5"),
    pytest.param("18 cents", "18 cents", id="currency_other_unit_kept:18 cents"),
    # percent words and signs are \%
    pytest.param("28 percent", "28\\%", id="percent_word:28 percent"),
    pytest.param("$28$ percent", "28\\%", id="percent_word_after_math:$28$ percent"),
    pytest.param("25 per cent", "25\\%", id="percent_word:25 per cent"),
    pytest.param("50%", "50\\%", id="percent_sign:50%"),
    pytest.param("50\\%", "50\\%", id="percent_sign_escaped:50\\%"),
    # a number inside a text command is the number; an empty text command is nothing
    pytest.param("\\text{5 apples}", "5 apples", id="number_in_text:\\text{5 apples}"),
    pytest.param("\\mbox{5}", "5", id="number_in_text:\\mbox{5}"),
    pytest.param("\\text{ }5", "5", id="empty_text:\\text{ }5"),
    # one spelling of the empty set
    pytest.param("\\varnothing", "\\emptyset", id="empty_set:\\varnothing"),
    pytest.param("\\{ \\}", "\\emptyset", id="empty_set:\\{ \\}"),
    # "{,}" is a comma (between digit groups, a thousands separator)
    pytest.param("(1{,}2)", "(1,2)", id="braced_comma:(1{,}2)"),
    pytest.param("1{,}234{,}567", "1234567", id="braced_comma_thousands:1{,}234{,}567"),
    # a trailing period ends a sentence
    pytest.param("18.", "18", id="trailing_period:18."),
    pytest.param("18..", "18", id="trailing_periods:18.."),
    pytest.param("3.5.", "3.5", id="trailing_period_after_decimal:3.5."),
    pytest.param("3.14", "3.14", id="decimal_point_kept:3.14"),
    # a number or a bracket before a bracket is a product
    pytest.param("2(5)", "2\\cdot(5)", id="juxtaposed_product:2(5)"),
    pytest.param("2 (3)", "2\\cdot(3)", id="juxtaposed_product_spaced:2 (3)"),
    pytest.param("(2)(5)", "(2)\\cdot(5)", id="juxtaposed_product:(2)(5)"),
    pytest.param("(1)(2)(3)", "(1)\\cdot(2)\\cdot(3)", id="juxtaposed_product:(1)(2)(3)"),
    pytest.param("3(x+1)", "3\\cdot(x+1)", id="juxtaposed_product:3(x+1)"),
    pytest.param("\\pi(2)", "\\pi\\cdot(2)", id="juxtaposed_product_pi:\\pi(2)"),
    # ... never a function's index or exponent, a modulus, a function call or an empty bracket
    pytest.param("\\log_2(8)", "\\log_2(8)", id="never_function_base:\\log_2(8)"),
    pytest.param("\\log_{2}(8)", "\\log_{2}(8)", id="never_function_base:\\log_{2}(8)"),
    pytest.param("\\tan^2(x)", "\\tan^2(x)", id="never_function_power:\\tan^2(x)"),
    pytest.param("\\sin^2(x)", "\\sin^2(x)", id="never_function_power:\\sin^2(x)"),
    pytest.param("3 (\\text{mod } 7)", "3(\\text{mod}7)", id="never_modulus:3 (\\text{mod } 7)"),
    pytest.param("f(x)", "f(x)", id="never_function_call:f(x)"),
    pytest.param("x(3)", "x(3)", id="never_after_letter:x(3)"),
    pytest.param("2()", "2()", id="never_empty_bracket:2()"),
    # labelled parts in one spelling, in order from (a) or (i)
    pytest.param("(a) 3 (b) 5", "(a)3, (b)5", id="labelled_parts:(a) 3 (b) 5"),
    pytest.param("(a) 3, (b) 5", "(a)3, (b)5", id="labelled_parts:(a) 3, (b) 5"),
    pytest.param(
        "\\text{(a) } 3; \\text{(b) } 5",
        "(a)3, (b)5",
        id="labelled_parts_text:\\text{(a) } 3; \\text{(b) } 5",
    ),
    pytest.param("(a) 3 (b) 5 (c) 7", "(a)3, (b)5, (c)7", id="labelled_parts:three parts"),
    pytest.param("(i) 2 (ii) 4", "(i)2, (ii)4", id="labelled_parts_roman:(i) 2 (ii) 4"),
    pytest.param("(a) x = 2 (b) y = 3", "(a)x=2, (b)y=3", id="labelled_parts_equations"),
    # ";" between roots is a list; between assignments of a system, tuples
    pytest.param("x = 1; x = -2", "x=1, x=-2", id="semicolon_roots:x = 1; x = -2"),
    pytest.param("1; 2", "1, 2", id="semicolon_values:1; 2"),
    pytest.param("a=1,b=4; a=3,b=2", "(1, 4), (3, 2)", id="semicolon_system:a=1,b=4; a=3,b=2"),
    # the notation rewrites run last (notation.py)
    pytest.param("2 or 3", "2, 3", id="joined_values:2 or 3"),
    pytest.param("1, 2, and 3", "1, 2, 3", id="joined_values_serial_comma:1, 2, and 3"),
    pytest.param(
        "x < -2 \\text{ or } x > 2",
        "(-\\infty, -2)\\cup(2, \\infty)",
        id="inequality_union:x < -2 or x > 2",
    ),
    pytest.param("1 \\le x < 2", "[1, 2)", id="inequality_interval:1 \\le x < 2"),
    pytest.param("x \\ge 0", "[0, \\infty)", id="inequality_interval:x \\ge 0"),
    pytest.param("\\pm 2", "2, -2", id="plus_minus:\\pm 2"),
    pytest.param("1 \\pm \\sqrt{2}", "1+\\sqrt{2}, 1-\\sqrt{2}", id="plus_minus:1 \\pm \\sqrt{2}"),
    pytest.param("12 = y", "y=12", id="backwards_equation:12 = y"),
    pytest.param(
        "\\begin{pmatrix}1\\\\2\\end{pmatrix}", "(1, 2)", id="environment_column_vector:pmatrix"
    ),
    pytest.param("\\begin{cases}x=1\\\\y=2\\end{cases}", "x=1, y=2", id="environment_system:cases"),
    # "(mod 7)" after a value is a modulus, also once its space is squeezed out
    pytest.param("x \\equiv 3 (mod 7)", "x\\equiv3(mod7)", id="no_product_before_mod:(mod 7)"),
    pytest.param("x \\equiv 3 (\\bmod 7)", "x\\equiv3(\\mod7)", id="no_product_before_mod:bmod"),
    # a part label before a bracket labels it
    pytest.param("(a) (1,2) (b) 5", "(a)(1,2), (b)5", id="labelled_parts_bracket:(a) (1,2)"),
]


@pytest.mark.parametrize(("text", "expected"), CANONICAL)
def test_canonical(text: str, expected: str) -> None:
    assert canonical(text) == expected


# A canonical spelling is its own canonical spelling: each reader canonicalises again.
IDEMPOTENT = [
    pytest.param("(a) 3 (b) 5", id="idempotent:labelled parts"),
    pytest.param("2(5)", id="idempotent:juxtaposed product"),
    pytest.param("\\$18", id="idempotent:currency"),
    pytest.param("90^\\circ", id="idempotent:degrees"),
    pytest.param("x = 1; x = -2", id="idempotent:semicolon roots"),
    pytest.param("28 percent", id="idempotent:percent word"),
    pytest.param("12 = y", id="idempotent:backwards equation"),
]


@pytest.mark.parametrize("text", IDEMPOTENT)
def test_canonical_is_idempotent(text: str) -> None:
    once = canonical(text)
    assert canonical(once) == once
