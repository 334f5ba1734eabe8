"""Every spelling of a value reads into that value: the notations the grammar and the rules over
its tree read alike (``syntax``, ``relations``, ``values``, ``units``), each row an answer and
another spelling of it, judged by the whole decision (``decide.equivalent_inline``); look-alikes
that must not read alike; JSON answers and parts named in prose.

The rows were the cases of the text rewrites this reading replaced (``normalize.canonical`` and
``notation.*``): each spelling that a rewrite turned into another is now held to read into the
same value as that other spelling."""

from __future__ import annotations

import pytest

from reward_server.checker import sentence
from reward_server.checker.decide import equivalent_inline
from reward_server.checker.extract import json_answer

# (answer, another spelling of its value).
SAME_VALUE = [
    # announcements, wrappers, spacing, delimiters, currency and percent, products written
    # side by side, parts, systems
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
    pytest.param("\\boxed{18}", "18", id="boxed:\\boxed{18}"),
    pytest.param("$18$", "18", id="math_delimiters:$18$"),
    pytest.param("\\dfrac{1}{2}", "\\frac{1}{2}", id="dfrac:\\dfrac{1}{2}"),
    pytest.param("\\tfrac{3}{4}", "\\frac{3}{4}", id="tfrac:\\tfrac{3}{4}"),
    pytest.param("\\frac12", "\\frac{1}{2}", id="braceless_frac:\\frac12"),
    pytest.param("\\frac\\pi2", "\\frac{\\pi}{2}", id="braceless_frac_command:\\frac\\pi2"),
    pytest.param("\\frac1{x}", "\\frac{1}{x}", id="braceless_frac_one_braced:\\frac1{x}"),
    pytest.param("\\dfrac12", "\\frac{1}{2}", id="braceless_dfrac:\\dfrac12"),
    pytest.param("\\left(1, 2\\right)", "(1, 2)", id="left_right:\\left(1, 2\\right)"),
    pytest.param("\\left[0, 1\\right)", "[0, 1)", id="left_right:\\left[0, 1\\right)"),
    pytest.param(
        "\\left\\{1, 2\\right\\}", "\\{1, 2\\}", id="left_right_set:\\left\\{1, 2\\right\\}"
    ),
    pytest.param("\\bigl(x\\bigr)", "(x)", id="size_command:\\bigl(x\\bigr)"),
    pytest.param("\\Big(1\\Big)", "(1)", id="size_command:\\Big(1\\Big)"),
    pytest.param("\\displaystyle\\frac{1}{2}", "\\frac{1}{2}", id="displaystyle:\\displaystyle"),
    pytest.param("x\\quad y", "x y", id="spacing_quad:x\\quad y"),
    pytest.param("5\\ cm", "5 cm", id="spacing_backslash_space:5\\ cm"),
    pytest.param("a~b", "a b", id="spacing_tilde:a~b"),
    pytest.param("1\\;2", "1 2", id="spacing_between_digits_kept:1\\;2"),
    pytest.param("3\\,\\text{cm}", "3\\text{cm}", id="spacing_thin:3\\,\\text{cm}"),
    pytest.param("x + y", "x+y", id="squeeze_operators:x + y"),
    pytest.param("\\pi  r", "\\pi r", id="squeeze_between_words:\\pi  r"),
    pytest.param("1,\\!000", "1000", id="negative_space_thousands:1,\\!000"),
    pytest.param("1\\!000", "1000", id="negative_space:1\\!000"),
    pytest.param("\\langle 2, -1\\rangle", "(2, -1)", id="langle:\\langle 2, -1\\rangle"),
    pytest.param("90^\\circ", "90 degrees", id="degrees:90^\\circ"),
    pytest.param("90^{\\circ}", "90 degrees", id="degrees_braced:90^{\\circ}"),
    pytest.param("90°", "90 degrees", id="degrees_sign:90°"),
    pytest.param("30\\degree", "30 degrees", id="degrees_command:30\\degree"),
    pytest.param("x^\\circ", "x", id="degrees_not_of_number:x^\\circ"),
    pytest.param(
        "\\sin 30^\\circ", "\\sin(\\frac{30\\pi}{180})", id="degrees_in_trig:\\sin 30^\\circ"
    ),
    pytest.param("\\$18", "18 dollars", id="currency:\\$18"),
    pytest.param("$18", "18 dollars", id="currency_bare_sign:$18"),
    pytest.param("\\$ 18", "18 dollars", id="currency_spaced:\\$ 18"),
    pytest.param("$18.50", "18.50 dollars", id="currency_decimal:$18.50"),
    pytest.param("\\$1,000", "1,000 dollars", id="currency_thousands:\\$1,000"),
    pytest.param("-\\$5", "-5 dollars", id="currency_sign_before:-\\$5"),
    pytest.param("\\$-5", "-5 dollars", id="currency_sign_after:\\$-5"),
    pytest.param("28 percent", "28\\%", id="percent_word:28 percent"),
    pytest.param("$28$ percent", "28\\%", id="percent_word_after_math:$28$ percent"),
    pytest.param("25 per cent", "25\\%", id="percent_word:25 per cent"),
    pytest.param("50%", "50\\%", id="percent_sign:50%"),
    pytest.param("\\text{5 apples}", "5 apples", id="number_in_text:\\text{5 apples}"),
    pytest.param("\\mbox{5}", "5", id="number_in_text:\\mbox{5}"),
    pytest.param("\\text{ }5", "5", id="empty_text:\\text{ }5"),
    pytest.param("\\varnothing", "\\emptyset", id="empty_set:\\varnothing"),
    pytest.param("\\{ \\}", "\\emptyset", id="empty_set:\\{ \\}"),
    pytest.param("(1{,}2)", "(1,2)", id="braced_comma:(1{,}2)"),
    pytest.param("1{,}234{,}567", "1234567", id="braced_comma_thousands:1{,}234{,}567"),
    pytest.param("18.", "18", id="trailing_period:18."),
    pytest.param("18..", "18", id="trailing_periods:18.."),
    pytest.param("3.5.", "3.5", id="trailing_period_after_decimal:3.5."),
    pytest.param("2(5)", "2\\cdot(5)", id="juxtaposed_product:2(5)"),
    pytest.param("2 (3)", "2\\cdot(3)", id="juxtaposed_product_spaced:2 (3)"),
    pytest.param("(2)(5)", "(2)\\cdot(5)", id="juxtaposed_product:(2)(5)"),
    pytest.param("(1)(2)(3)", "(1)\\cdot(2)\\cdot(3)", id="juxtaposed_product:(1)(2)(3)"),
    pytest.param("3(x+1)", "3\\cdot(x+1)", id="juxtaposed_product:3(x+1)"),
    pytest.param("\\pi(2)", "\\pi\\cdot(2)", id="juxtaposed_product_pi:\\pi(2)"),
    pytest.param("3 (\\text{mod } 7)", "3(\\text{mod}7)", id="never_modulus:3 (\\text{mod } 7)"),
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
    pytest.param("x = 1; x = -2", "x=1, x=-2", id="semicolon_roots:x = 1; x = -2"),
    pytest.param("1; 2", "1, 2", id="semicolon_values:1; 2"),
    pytest.param("a=1,b=4; a=3,b=2", "(1, 4), (3, 2)", id="semicolon_system:a=1,b=4; a=3,b=2"),
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
    pytest.param("x \\equiv 3 (mod 7)", "x\\equiv3(mod7)", id="no_product_before_mod:(mod 7)"),
    pytest.param("x \\equiv 3 (\\bmod 7)", "x\\equiv3(\\mod7)", id="no_product_before_mod:bmod"),
    pytest.param("(a) (1,2) (b) 5", "(a)(1,2), (b)5", id="labelled_parts_bracket:(a) (1,2)"),
    # Unicode, invisible marks, markdown, thousands separators, doubled backslashes
    pytest.param("−5", "-5", id="unicode_minus:−5"),
    pytest.param("a − b", "a - b", id="unicode_minus:a − b"),
    pytest.param("3×4", "3\\times 4", id="unicode_times:3×4"),
    pytest.param("π", "\\pi", id="unicode_pi:π"),
    pytest.param("∞", "\\infty", id="unicode_infinity:∞"),
    pytest.param("∅", "\\emptyset", id="unicode_empty_set:∅"),
    pytest.param("½", "\\frac{1}{2}", id="unicode_fraction:½"),
    pytest.param("√2", "\\sqrt{2}", id="unicode_root:√2"),
    pytest.param("2√3", "2\\sqrt{3}", id="unicode_root:2√3"),
    pytest.param("√(x+1)", "\\sqrt{x+1}", id="unicode_root_bracketed:√(x+1)"),
    pytest.param("1\u200b2", "12", id="invisible_dropped:zero-width space"),
    pytest.param("1\xa0000", "1 000", id="nbsp_is_space:1 000"),
    pytest.param("  18  ", "18", id="stripped:  18  "),
    pytest.param("**18**", "18", id="markdown_bold:**18**"),
    pytest.param("__18__", "18", id="markdown_bold:__18__"),
    pytest.param("*18*", "18", id="markdown_emphasis:*18*"),
    pytest.param("_18_", "18", id="markdown_emphasis:_18_"),
    pytest.param("`18`", "18", id="markdown_code:`18`"),
    pytest.param("***18***", "18", id="markdown_nested:***18***"),
    pytest.param("**Answer:** 18", "Answer: 18", id="bold_anywhere:**Answer:** 18"),
    pytest.param("1,\\!000", "1000", id="thousands_separator:1,\\!000"),
    pytest.param("1{,}000", "1000", id="thousands_separator:1{,}000"),
    pytest.param("(1,\\!000, 2)", "(1000, 2)", id="thousands_in_tuple:(1,\\!000, 2)"),
    pytest.param("\\\\frac{1}{2}", "\\frac{1}{2}", id="doubled_backslash:\\\\frac"),
    # vectors and systems written as matrices and cases
    pytest.param("\\begin{pmatrix}1\\\\2\\end{pmatrix}", "(1, 2)", id="one_column:pmatrix"),
    pytest.param("\\begin{bmatrix}1\\\\2\\\\3\\end{bmatrix}", "(1, 2, 3)", id="one_column:bmatrix"),
    pytest.param("\\begin{pmatrix}1 & 2\\end{pmatrix}", "(1, 2)", id="one_row:pmatrix"),
    pytest.param("\\begin{matrix}1&2\\end{matrix}", "(1, 2)", id="one_row:matrix"),
    pytest.param("\\begin{array}{c}1\\\\2\\end{array}", "(1, 2)", id="one_column:array"),
    pytest.param("\\begin{cases}x=1\\\\y=2\\end{cases}", "x=1, y=2", id="cases_list:x=1, y=2"),
    pytest.param("\\begin{cases}x&=1\\\\y&=2\\end{cases}", "x=1, y=2", id="cases_aligned:x&=1"),
    # \pm as its two values
    pytest.param("\\pm 2", "2, -2", id="leading_pm:\\pm 2"),
    pytest.param("1 \\pm \\sqrt{2}", "1+\\sqrt{2}, 1-\\sqrt{2}", id="binary_pm:1 \\pm \\sqrt{2}"),
    pytest.param("1\\pm2", "1+2, 1-2", id="binary_pm:1\\pm2"),
    pytest.param(
        "\\frac{-1 \\pm \\sqrt{5}}{2}",
        "\\frac{-1 + \\sqrt{5}}{2}, \\frac{-1 - \\sqrt{5}}{2}",
        id="pm_in_fraction:\\frac{-1 \\pm \\sqrt{5}}{2}",
    ),
    pytest.param(
        "\\sqrt{4 \\pm 1}", "\\sqrt{4 + 1}, \\sqrt{4 - 1}", id="pm_in_root:\\sqrt{4 \\pm 1}"
    ),
    pytest.param(
        "x = 1 \\pm \\sqrt{2}",
        "x = 1+\\sqrt{2}, x = 1-\\sqrt{2}",
        id="assignment_pm:x = 1 \\pm \\sqrt{2}",
    ),
    pytest.param("x = \\pm 3", "x = 3, x = -3", id="assignment_pm:x = \\pm 3"),
    pytest.param(
        "x = \\frac{1 \\pm \\sqrt{5}}{2}",
        "x = \\frac{1 + \\sqrt{5}}{2}, x = \\frac{1 - \\sqrt{5}}{2}",
        id="assignment_pm_in_fraction:x = \\frac{1 \\pm \\sqrt{5}}{2}",
    ),
    # every spelling of a relation
    pytest.param("x \\lt 3", "x < 3", id="lt:x \\lt 3"),
    pytest.param("x \\gt 1", "x > 1", id="gt:x \\gt 1"),
    pytest.param("x <= 2", "x \\le  2", id="le:x <= 2"),
    pytest.param("x =< 2", "x \\le  2", id="le:x =< 2"),
    pytest.param("x \\leq 2", "x \\le  2", id="le:x \\leq 2"),
    pytest.param("x \\leqslant 2", "x \\le  2", id="le:x \\leqslant 2"),
    pytest.param("x ⩽ 2", "x \\le  2", id="le:x ⩽ 2"),
    pytest.param("x >= 2", "x \\ge  2", id="ge:x >= 2"),
    pytest.param("x \\geq 2", "x \\ge  2", id="ge:x \\geq 2"),
    pytest.param("x ⩾ 2", "x \\ge  2", id="ge:x ⩾ 2"),
    pytest.param("x != 5", "x \\ne  5", id="ne:x != 5"),
    pytest.param("x \\neq 5", "x \\ne  5", id="ne:x \\neq 5"),
    # one-variable inequalities as the sets they describe, linear ones solved
    pytest.param("x > 0", "(0, \\infty)", id="lower_bound_strict:x > 0"),
    pytest.param("x \\ge 0", "[0, \\infty)", id="lower_bound:x \\ge 0"),
    pytest.param("x < 3", "(-\\infty, 3)", id="upper_bound_strict:x < 3"),
    pytest.param("x \\le 3", "(-\\infty, 3]", id="upper_bound:x \\le 3"),
    pytest.param("3 > x", "(-\\infty, 3)", id="variable_right:3 > x"),
    pytest.param("3 \\ge x", "(-\\infty, 3]", id="variable_right:3 \\ge x"),
    pytest.param("0 < x", "(0, \\infty)", id="variable_right:0 < x"),
    pytest.param("1 \\le x < 2", "[1, 2)", id="chain:1 \\le x < 2"),
    pytest.param("5 < x \\le 7", "(5, 7]", id="chain:5 < x \\le 7"),
    pytest.param("3 > x > 1", "(1, 3)", id="chain_descending:3 > x > 1"),
    pytest.param("x \\lt 3", "(-\\infty, 3)", id="other_spelling:x \\lt 3"),
    pytest.param("x <= 2", "(-\\infty, 2]", id="other_spelling:x <= 2"),
    pytest.param("x \\geqslant 2", "[2, \\infty)", id="other_spelling:x \\geqslant 2"),
    pytest.param("x < \\frac{1}{2}", "(-\\infty, \\frac{1}{2})", id="fraction_bound"),
    pytest.param("x \\le \\sqrt{2}", "(-\\infty, \\sqrt{2}]", id="root_bound"),
    pytest.param("x \\in [a, b)", "[a, b)", id="membership:x \\in [a, b)"),
    pytest.param("x \\in (0, 1)", "(0, 1)", id="membership:x \\in (0, 1)"),
    pytest.param("x \\ne 5", "(-\\infty, 5)\\cup(5, \\infty)", id="not_equal:x \\ne 5"),
    pytest.param("x != 5", "(-\\infty, 5)\\cup(5, \\infty)", id="not_equal:x != 5"),
    pytest.param("5 \\ne x", "(-\\infty, 5)\\cup(5, \\infty)", id="not_equal:5 \\ne x"),
    pytest.param("-x > -1", "(-\\infty, 1)", id="linear_negative_flips:-x > -1"),
    pytest.param("-2x \\ge 4", "(-\\infty, -2]", id="linear_negative_flips:-2x \\ge 4"),
    pytest.param("2x + 1 \\le 7", "(-\\infty, 3]", id="linear_solved:2x + 1 \\le 7"),
    pytest.param("x/2 < 3", "(-\\infty, 6)", id="linear_solved:x/2 < 3"),
    pytest.param("-1 < 2x+1 < 5", "(-1, 2)", id="linear_chain_solved:-1 < 2x+1 < 5"),
    # inequalities joined by "or" as the union of their sets
    pytest.param(
        "x < -2 \\text{ or } x > 2",
        "(-\\infty, -2)\\cup(2, \\infty)",
        id="or_text:x < -2 \\text{ or } x > 2",
    ),
    pytest.param(
        "x < -2 or x > 2", "(-\\infty, -2)\\cup(2, \\infty)", id="or_word:x < -2 or x > 2"
    ),
    pytest.param("x < -2 \\lor x > 2", "(-\\infty, -2)\\cup(2, \\infty)", id="or_symbol:\\lor"),
    pytest.param("x \\le 0 \\vee x \\ge 1", "(-\\infty, 0]\\cup[1, \\infty)", id="or_symbol:\\vee"),
    pytest.param("x < -1 \\text{ or } 1 < x < 2", "(-\\infty, -1)\\cup(1, 2)", id="or_with_chain"),
    # degrees inside a trigonometric function
    pytest.param("\\sin 30^\\circ", "\\sin (\\frac{30\\pi}{180})", id="degrees_in_trig:\\sin 30°"),
    pytest.param(
        "\\sin(30^{\\circ})", "\\sin((\\frac{30\\pi}{180}))", id="degrees_in_trig:\\sin(30^{°})"
    ),
    pytest.param(
        "\\sec 22.5^\\circ", "\\sec (\\frac{22.5\\pi}{180})", id="decimal_degrees:\\sec 22.5°"
    ),
    pytest.param(
        "\\cos 45^\\circ + \\tan 60 ^ \\circ",
        "\\cos (\\frac{45\\pi}{180})+ \\tan (\\frac{60\\pi}{180})",
        id="every_degree_value:\\cos 45° + \\tan 60°",
    ),
    # equations written backwards
    pytest.param("12 = y", "y=12", id="backwards:12 = y"),
    pytest.param("12 = f(x)", "f(x)=12", id="backwards_function:12 = f(x)"),
    pytest.param("12 = \\theta", "\\theta=12", id="backwards_greek:12 = \\theta"),
    pytest.param("2x + 1 = y", "y=2x + 1", id="backwards_expression:2x + 1 = y"),
    # values joined by "or" and "and"
    pytest.param("2 or 3", "2, 3", id="or:2 or 3"),
    pytest.param("1, 2 and 3", "1, 2, 3", id="and:1, 2 and 3"),
    pytest.param("1, 2, and 3", "1, 2, 3", id="serial_comma:1, 2, and 3"),
    pytest.param("2, or 3", "2, 3", id="serial_comma:2, or 3"),
    pytest.param("2\\text{ and }3", "2, 3", id="text_joiner:2\\text{ and }3"),
    pytest.param("2 \\text{ or } 3", "2, 3", id="text_joiner:2 \\text{ or } 3"),
    pytest.param("x = 2 or x = 3", "x = 2, x = 3", id="or_between_roots:x = 2 or x = 3"),
    # solutions separated by ";"
    pytest.param("a=1,b=4; a=3,b=2", "(1, 4), (3, 2)", id="system_solutions:a=1,b=4; a=3,b=2"),
    pytest.param(
        "x = 1, y = 2; x = 3, y = 4", "(1, 2), (3, 4)", id="system_solutions_spaced:x = 1, y = 2"
    ),
    pytest.param(
        "a=1,b=(1,2); a=3,b=4", "(1, (1,2)), (3, 4)", id="bracketed_value:a=1,b=(1,2); a=3,b=4"
    ),
    pytest.param("a=1,b=4;", "(1, 4)", id="one_solution:a=1,b=4;"),
    pytest.param("x = 1; x = -2", "x = 1, x = -2", id="one_unknown_roots:x = 1; x = -2"),
    # labelled parts, in their labels' order
    pytest.param("(a) 3, (b) 5", "(a)3, (b)5", id="letters:(a) 3, (b) 5"),
    pytest.param(
        "\\text{(a) } 3; \\text{(b) } 5", "(a)3, (b)5", id="text_labels:\\text{(a) } 3; ..."
    ),
    pytest.param("(i) 3, (ii) 5", "(i)3, (ii)5", id="roman:(i) 3, (ii) 5"),
    pytest.param("(b) 5, (a) 3", "(a)3, (b)5", id="written_out_of_order:(b) 5, (a) 3"),
    pytest.param("(ii) 7; (i) 2", "(i)2, (ii)7", id="roman_out_of_order:(ii) 7; (i) 2"),
]


@pytest.mark.parametrize(("text", "same"), SAME_VALUE)
def test_spellings_read_alike(text: str, same: str) -> None:
    verdict = equivalent_inline(text, same)
    assert verdict.equal, verdict


# (answer, a reference it must not answer): where a rule's class ends.
NOT_THE_SAME = [
    pytest.param("(b) 3, (c) 5", "3, 5", id="parts_not_from_a"),
    pytest.param("(a) 3, (c) 5", "3, 5", id="parts_with_a_gap"),
    pytest.param("(a) 3, (a) 5", "3, 5", id="part_label_twice"),
    pytest.param("3, (a) 4, (b) 5", "3, 4, 5", id="parts_not_from_the_start"),
    pytest.param(
        "x < -2 \\text{ and } x > 2", "(-\\infty, -2)\\cup(2, \\infty)", id="and_no_union"
    ),
    pytest.param("x < 1 or y > 2", "(-\\infty, 1)\\cup(2, \\infty)", id="union_of_two_unknowns"),
    pytest.param("\\pm 2 \\pm 3", "2, -2", id="two_pm_no_values"),
    pytest.param("2 or 3", "2", id="second_candidate"),
    pytest.param("12 = xy", "12", id="product_is_no_name"),
    pytest.param("y < x", "(-\\infty, x)", id="two_unknowns_no_interval"),
    pytest.param("x > 0", "[0, \\infty)", id="strict_bound"),
    pytest.param("2\\frac{3}{2}", "2.5", id="improper_mixed_number"),
    pytest.param("2 3", "23", id="numerals_side_by_side"),
    pytest.param("1,\\!00", "100", id="separator_before_two_digits"),
    pytest.param("\\sin 30", "\\frac12", id="radians_without_degrees"),
    pytest.param("90^\\circ", "\\frac{\\pi}{2}", id="degrees_unit_against_radians"),
]


@pytest.mark.parametrize(("text", "other"), NOT_THE_SAME)
def test_look_alikes_do_not_read_alike(text: str, other: str) -> None:
    assert not equivalent_inline(text, other).equal


JSON_ANSWER = [
    pytest.param('{"answer": 42}', "42", id="one_member_number:42"),
    pytest.param('{"answer": 4.5}', "4.5", id="one_member_number:4.5"),
    pytest.param('{"answer": "x+1"}', "x+1", id="one_member_string:x+1"),
    pytest.param('{"answer": [1, 2]}', "1, 2", id="one_member_list:[1, 2]"),
    pytest.param('  {"answer": 42}  ', "42", id="surrounding_space"),
    pytest.param('```json\n{"answer": 42}\n```', "42", id="code_fence:json"),
    pytest.param('```\n{"a": 1}\n```', "1", id="code_fence:plain"),
    pytest.param(
        '{"answer": 42, "reason": "x"}', '{"answer": 42, "reason": "x"}', id="two_members"
    ),
    pytest.param('{"answer": true}', '{"answer": true}', id="boolean_value"),
    pytest.param('{"answer": null}', '{"answer": null}', id="null_value"),
    pytest.param('{"answer": {"a": 1}}', '{"answer": {"a": 1}}', id="object_value"),
    pytest.param('{"answer": []}', '{"answer": []}', id="empty_list_value"),
    pytest.param('{"answer": [1, true]}', '{"answer": [1, true]}', id="list_with_boolean"),
    pytest.param("{bad json}", "{bad json}", id="invalid_json"),
    pytest.param("[42]", "[42]", id="not_an_object:[42]"),
    pytest.param("42", "42", id="not_an_object:42"),
]


@pytest.mark.parametrize(("text", "expected"), JSON_ANSWER)
def test_json_answer(text: str, expected: str) -> None:
    assert json_answer(text) == expected


# (labels named in prose: each part's text, in label order, or None).
PROSE_PARTS = [
    pytest.param(
        "Part (a) is 3 and part (b) is 5", [("a", "3"), ("b", "5")], id="part_word:is ... and"
    ),
    pytest.param(
        "For part (a), the answer is 3. For part (b), the answer is 5.",
        [("a", "the answer is 3"), ("b", "the answer is 5")],
        id="for_part:sentences",
    ),
    pytest.param("(i) = 2; (ii): 7.", [("i", "2"), ("ii", "7")], id="roman:= and :"),
    pytest.param(
        "Part (b) is 5 and part (a) is 3", [("a", "3"), ("b", "5")], id="out_of_order:by label"
    ),
    pytest.param("Part (a) is 3", None, id="one_part:none"),
    pytest.param("Part (a) is 3 and part (c) is 5", None, id="gap:none"),
    pytest.param("Part (a) is and part (b) is 5", None, id="empty_part:none"),
    pytest.param("The answer to (a) is 3 and (b) is 5", None, id="not_at_start:none"),
]


@pytest.mark.parametrize(("text", "expected"), PROSE_PARTS)
def test_prose_parts(text: str, expected: list[tuple[str, str]] | None) -> None:
    assert sentence.prose_parts(text) == expected
