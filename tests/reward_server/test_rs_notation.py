"""Canonical spellings (``reward_server.checker.notation``): each rewrite of an equivalent notation
into one spelling, and the inputs it must leave alone."""

from __future__ import annotations

import pytest

from reward_server.checker import notation

# (text, plain LaTeX).
PLAIN_TEXT = [
    pytest.param("\u22125", "-5", id="unicode_minus:−5"),
    pytest.param("a \u2212 b", "a - b", id="unicode_minus:a − b"),
    pytest.param("3\u00d74", "3\\times 4", id="unicode_times:3×4"),
    pytest.param("\u03c0", "\\pi", id="unicode_pi:π"),
    pytest.param("\u221e", "\\infty", id="unicode_infinity:∞"),
    pytest.param("\u2205", "\\emptyset", id="unicode_empty_set:∅"),
    pytest.param("\u00bd", "\\frac{1}{2}", id="unicode_fraction:½"),
    pytest.param("\u221a2", "\\sqrt{2}", id="unicode_root:√2"),
    pytest.param("2\u221a3", "2\\sqrt{3}", id="unicode_root:2√3"),
    pytest.param("\u221a(x+1)", "\\sqrt{x+1}", id="unicode_root_bracketed:√(x+1)"),
    pytest.param("1\u200b2", "12", id="invisible_dropped:zero-width space"),
    pytest.param("1\u00a0000", "1 000", id="nbsp_is_space:1 000"),
    pytest.param("  18  ", "18", id="stripped:  18  "),
    pytest.param("**18**", "18", id="markdown_bold:**18**"),
    pytest.param("__18__", "18", id="markdown_bold:__18__"),
    pytest.param("*18*", "18", id="markdown_emphasis:*18*"),
    pytest.param("_18_", "18", id="markdown_emphasis:_18_"),
    pytest.param("`18`", "18", id="markdown_code:`18`"),
    pytest.param("***18***", "18", id="markdown_nested:***18***"),
    pytest.param("**Answer:** 18", "Answer: 18", id="bold_anywhere:**Answer:** 18"),
    pytest.param("2**3", "2**3", id="not_bold_between_digits:2**3"),
    pytest.param("1,\\!000", "1000", id="thousands_separator:1,\\!000"),
    pytest.param("1{,}000", "1000", id="thousands_separator:1{,}000"),
    pytest.param("(1,\\!000, 2)", "(1000, 2)", id="thousands_in_tuple:(1,\\!000, 2)"),
    pytest.param("1,\\!00", "1,\\!00", id="not_three_digits:1,\\!00"),
    pytest.param("\\\\frac{1}{2}", "\\frac{1}{2}", id="doubled_backslash:\\\\frac"),
]


@pytest.mark.parametrize(("text", "expected"), PLAIN_TEXT)
def test_plain_text(text: str, expected: str) -> None:
    assert notation.plain_text(text) == expected


# (completion's answer, the value of a one-member JSON object, else the text as it is).
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
    assert notation.json_answer(text) == expected


# (text, with its one-row or one-column matrices as tuples and cases as a list).
ENVIRONMENTS = [
    pytest.param("\\begin{pmatrix}1\\\\2\\end{pmatrix}", "(1, 2)", id="one_column:pmatrix"),
    pytest.param("\\begin{bmatrix}1\\\\2\\\\3\\end{bmatrix}", "(1, 2, 3)", id="one_column:bmatrix"),
    pytest.param("\\begin{pmatrix}1 & 2\\end{pmatrix}", "(1, 2)", id="one_row:pmatrix"),
    pytest.param("\\begin{matrix}1&2\\end{matrix}", "(1, 2)", id="one_row:matrix"),
    pytest.param("\\begin{array}{c}1\\\\2\\end{array}", "(1, 2)", id="one_column:array"),
    pytest.param("\\begin{cases}x=1\\\\y=2\\end{cases}", "x=1, y=2", id="cases_list:x=1, y=2"),
    pytest.param("\\begin{cases}x&=1\\\\y&=2\\end{cases}", "x=1, y=2", id="cases_aligned:x&=1"),
    pytest.param(
        "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}",
        "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}",
        id="matrix_kept:2x2",
    ),
    pytest.param(
        "\\begin{pmatrix}1\\\\2\\end{bmatrix}",
        "\\begin{pmatrix}1\\\\2\\end{bmatrix}",
        id="mismatched_end_kept",
    ),
    pytest.param("(1, 2)", "(1, 2)", id="no_environment:(1, 2)"),
]


@pytest.mark.parametrize(("text", "expected"), ENVIRONMENTS)
def test_environments(text: str, expected: str) -> None:
    assert notation.environments(text) == expected


# (text, its two values when it has one \pm).
PLUS_MINUS = [
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
    pytest.param("\\pm 2 \\pm 3", "\\pm 2 \\pm 3", id="two_pm_kept:\\pm 2 \\pm 3"),
    pytest.param("\\pmod 5", "\\pmod 5", id="pmod_not_pm:\\pmod 5"),
    pytest.param("a, \\pm 2", "a, \\pm 2", id="pm_in_list_kept:a, \\pm 2"),
    pytest.param("y = 2 \\pm 1 = 3", "y = 2 \\pm 1 = 3", id="pm_in_equation_chain_kept"),
    pytest.param("2", "2", id="no_pm:2"),
]


@pytest.mark.parametrize(("text", "expected"), PLUS_MINUS)
def test_plus_minus(text: str, expected: str) -> None:
    assert notation.plus_minus(text) == expected


# (relation, its one spelling).
RELATION_SPELLINGS = [
    pytest.param("x \\lt 3", "x < 3", id="lt:x \\lt 3"),
    pytest.param("x \\gt 1", "x > 1", id="gt:x \\gt 1"),
    pytest.param("x <= 2", "x \\le  2", id="le:x <= 2"),
    pytest.param("x =< 2", "x \\le  2", id="le:x =< 2"),
    pytest.param("x \\leq 2", "x \\le  2", id="le:x \\leq 2"),
    pytest.param("x \\leqslant 2", "x \\le  2", id="le:x \\leqslant 2"),
    pytest.param("x \u2a7d 2", "x \\le  2", id="le:x ⩽ 2"),
    pytest.param("x >= 2", "x \\ge  2", id="ge:x >= 2"),
    pytest.param("x \\geq 2", "x \\ge  2", id="ge:x \\geq 2"),
    pytest.param("x \u2a7e 2", "x \\ge  2", id="ge:x ⩾ 2"),
    pytest.param("x != 5", "x \\ne  5", id="ne:x != 5"),
    pytest.param("x \\neq 5", "x \\ne  5", id="ne:x \\neq 5"),
    pytest.param("5! = 120", "5! = 120", id="factorial_not_ne:5! = 120"),
    pytest.param("(5)!= 120", "(5)!= 120", id="factorial_not_ne:(5)!= 120"),
    pytest.param("x < 3", "x < 3", id="already_one_spelling:x < 3"),
]


@pytest.mark.parametrize(("text", "expected"), RELATION_SPELLINGS)
def test_relation_spellings(text: str, expected: str) -> None:
    assert notation.relation_spellings(text) == expected


# (one-variable inequality, the interval it describes; anything else as it is).
INEQUALITY_INTERVAL = [
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
    pytest.param("x^2 < 4", "x^2 < 4", id="not_linear_kept:x^2 < 4"),
    pytest.param("0x < 3", "0x < 3", id="no_variable_coefficient_kept:0x < 3"),
    pytest.param("2 < 3", "2 < 3", id="no_variable_kept:2 < 3"),
    pytest.param("x = 3", "x = 3", id="equation_kept:x = 3"),
]


@pytest.mark.parametrize(("text", "expected"), INEQUALITY_INTERVAL)
def test_inequality_interval(text: str, expected: str) -> None:
    assert notation.inequality_interval(text) == expected


# (inequalities joined by "or", the union of their intervals; anything else as it is).
INEQUALITY_UNION = [
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
    pytest.param(
        "x < -2 \\text{ and } x > 2",
        "x < -2 \\text{ and } x > 2",
        id="and_kept:x < -2 \\text{ and } x > 2",
    ),
    pytest.param("x < 1 or y > 2", "x < 1 or y > 2", id="two_variables_kept:x < 1 or y > 2"),
    pytest.param("x < 1 or x = 3", "x < 1 or x = 3", id="not_all_inequalities_kept"),
    pytest.param("x < 1", "x < 1", id="no_or_kept:x < 1"),
    pytest.param("2 or 3", "2 or 3", id="no_relation_kept:2 or 3"),
]


@pytest.mark.parametrize(("text", "expected"), INEQUALITY_UNION)
def test_inequality_union(text: str, expected: str) -> None:
    assert notation.inequality_union(text) == expected


# (text, with degrees inside a trigonometric function as radians).
TRIG_DEGREES = [
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
    pytest.param("90^\\circ", "90^\\circ", id="no_trig_kept:90°"),
    pytest.param("\\sinh 30^\\circ", "\\sinh 30^\\circ", id="not_trig_kept:\\sinh 30°"),
    pytest.param("\\sin x", "\\sin x", id="no_degrees_kept:\\sin x"),
]


@pytest.mark.parametrize(("text", "expected"), TRIG_DEGREES)
def test_trig_degrees(text: str, expected: str) -> None:
    assert notation.trig_degrees(text) == expected


# (equation, written as an assignment when a value is equated to a variable).
BACKWARDS_EQUATION = [
    pytest.param("12 = y", "y=12", id="backwards:12 = y"),
    pytest.param("12 = f(x)", "f(x)=12", id="backwards_function:12 = f(x)"),
    pytest.param("12 = \\theta", "\\theta=12", id="backwards_greek:12 = \\theta"),
    pytest.param("2x + 1 = y", "y=2x + 1", id="backwards_expression:2x + 1 = y"),
    pytest.param("y = 12", "y = 12", id="forwards_kept:y = 12"),
    pytest.param("a = b", "a = b", id="both_variables_kept:a = b"),
    pytest.param("1 = 2", "1 = 2", id="no_variable_kept:1 = 2"),
    pytest.param("12 = xy", "12 = xy", id="product_not_variable_kept:12 = xy"),
    pytest.param("12 = \\pi", "12 = \\pi", id="constant_not_variable_kept:12 = \\pi"),
    pytest.param("12 = y = 3", "12 = y = 3", id="two_equals_kept:12 = y = 3"),
    pytest.param("= y", "= y", id="empty_left_kept:= y"),
]


@pytest.mark.parametrize(("text", "expected"), BACKWARDS_EQUATION)
def test_backwards_equation(text: str, expected: str) -> None:
    assert notation.backwards_equation(text) == expected


# (values joined by "or"/"and", as a list).
JOINED_VALUES = [
    pytest.param("2 or 3", "2, 3", id="or:2 or 3"),
    pytest.param("1, 2 and 3", "1, 2, 3", id="and:1, 2 and 3"),
    pytest.param("1, 2, and 3", "1, 2, 3", id="serial_comma:1, 2, and 3"),
    pytest.param("2, or 3", "2, 3", id="serial_comma:2, or 3"),
    pytest.param("2\\text{ and }3", "2, 3", id="text_joiner:2\\text{ and }3"),
    pytest.param("2 \\text{ or } 3", "2, 3", id="text_joiner:2 \\text{ or } 3"),
    pytest.param("x = 2 or x = 3", "x = 2, x = 3", id="or_between_roots:x = 2 or x = 3"),
    pytest.param("floor", "floor", id="inside_word_kept:floor"),
    pytest.param("random", "random", id="inside_word_kept:random"),
    pytest.param("\\text{Oregon}", "\\text{Oregon}", id="inside_word_kept:\\text{Oregon}"),
    pytest.param("\\cos x", "\\cos x", id="no_joiner:\\cos x"),
]


@pytest.mark.parametrize(("text", "expected"), JOINED_VALUES)
def test_joined_values(text: str, expected: str) -> None:
    assert notation.joined_values(text) == expected


# (solutions separated by ";": tuples of a system's values, a list of one unknown's roots).
ASSIGNMENT_GROUPS = [
    pytest.param("a=1,b=4; a=3,b=2", "(1, 4), (3, 2)", id="system_solutions:a=1,b=4; a=3,b=2"),
    pytest.param(
        "x = 1, y = 2; x = 3, y = 4", "(1, 2), (3, 4)", id="system_solutions_spaced:x = 1, y = 2"
    ),
    pytest.param(
        "a=1,b=(1,2); a=3,b=4", "(1, (1,2)), (3, 4)", id="bracketed_value:a=1,b=(1,2); a=3,b=4"
    ),
    pytest.param("a=1,b=4;", "(1, 4)", id="one_solution:a=1,b=4;"),
    pytest.param("x = 1; x = -2", "x = 1, x = -2", id="one_unknown_roots:x = 1; x = -2"),
    pytest.param("a=1, b=4", "a=1, b=4", id="no_semicolon_kept:a=1, b=4"),
    pytest.param("x=1, x=2", "x=1, x=2", id="no_semicolon_kept:x=1, x=2"),
    pytest.param("a=1,b=4; a=3", "a=1,b=4; a=3", id="short_group_kept:a=1,b=4; a=3"),
    pytest.param("a=1,b=4; a=3,a=2", "a=1,b=4; a=3,a=2", id="repeated_name_kept:a=1,b=4; a=3,a=2"),
    pytest.param(
        "ab=1,b=2; a=3,b=4", "ab=1,b=2; a=3,b=4", id="name_not_one_letter_kept:ab=1,b=2; ..."
    ),
    pytest.param("a=1,b=2=3; a=3,b=4", "a=1,b=2=3; a=3,b=4", id="two_equals_kept:a=1,b=2=3; ..."),
    pytest.param("1, 2", "1, 2", id="no_assignment:1, 2"),
]


@pytest.mark.parametrize(("text", "expected"), ASSIGNMENT_GROUPS)
def test_assignment_groups(text: str, expected: str) -> None:
    assert notation.assignment_groups(text) == expected


# (parts of a multi-part answer labelled from (a) or (i) on, in one spelling, in label order).
LABELLED_PARTS = [
    pytest.param("(a) 3, (b) 5", "(a)3, (b)5", id="letters:(a) 3, (b) 5"),
    pytest.param(
        "\\text{(a) } 3; \\text{(b) } 5", "(a)3, (b)5", id="text_labels:\\text{(a) } 3; ..."
    ),
    pytest.param("(i) 3, (ii) 5", "(i)3, (ii)5", id="roman:(i) 3, (ii) 5"),
    pytest.param("(a) 3", "(a) 3", id="one_part_kept:(a) 3"),
    pytest.param("(b) 3, (c) 5", "(b) 3, (c) 5", id="not_from_a_kept:(b) 3, (c) 5"),
    pytest.param("(a) 3, (c) 5", "(a) 3, (c) 5", id="gap_kept:(a) 3, (c) 5"),
    pytest.param("(a) 3, (a) 5", "(a) 3, (a) 5", id="label_twice_kept:(a) 3, (a) 5"),
    pytest.param("(b) 5, (a) 3", "(a)3, (b)5", id="written_out_of_order:(b) 5, (a) 3"),
    pytest.param("(ii) 7; (i) 2", "(i)2, (ii)7", id="roman_out_of_order:(ii) 7; (i) 2"),
    pytest.param("(a) , (b) 5", "(a) , (b) 5", id="empty_part_kept:(a) , (b) 5"),
    pytest.param("x (a) 3, (b) 5", "x (a) 3, (b) 5", id="not_at_start_kept:x (a) 3, (b) 5"),
]


@pytest.mark.parametrize(("text", "expected"), LABELLED_PARTS)
def test_labelled_parts(text: str, expected: str) -> None:
    assert notation.labelled_parts(text) == expected


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
    assert notation.prose_parts(text) == expected
