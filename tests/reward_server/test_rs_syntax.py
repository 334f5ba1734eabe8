"""The answer grammar (``reward_server.checker.syntax``, ``answer.lark``): the tree each notation
reads into, spellings that read into the same tree, and where reading stops on what is no
notation."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reward_server.checker import syntax
from reward_server.checker import tree as t
from reward_server.checker.syntax import MAX_DEPTH, Unparsable, parse


def _item(text: str) -> t.Node:
    """The one item of a parsed answer."""
    answer = parse(text)
    assert isinstance(answer, t.Answer), answer
    assert len(answer.items) == 1, answer
    return answer.items[0]


one, two, three, x = t.Num("1"), t.Num("2"), t.Num("3"), t.Name("x")

# (notation, the tree it reads into).
TREES = [
    # TeX's one-token arguments; plain-text numbers stay whole
    pytest.param("\\frac12", t.Frac(one, two), id="frac_one_token_arguments"),
    pytest.param("\\dfrac{1}{2}", t.Frac(one, two), id="dfrac"),
    pytest.param("\\frac\\pi2", t.Frac(t.Const("pi"), two), id="frac_command_argument"),
    pytest.param("\\sqrt2", t.Root(two), id="sqrt_one_token"),
    pytest.param("\\sqrt[3]{-8}", t.Root(t.Neg(t.Num("8")), three), id="cube_root"),
    pytest.param("x^23", t.Power(x, t.Num("23")), id="plain_exponent_whole"),
    pytest.param("x^\\frac13", t.Power(x, t.Frac(one, three)), id="braceless_exponent_fraction"),
    pytest.param("3^-x", t.Power(three, t.Neg(x)), id="exponent_with_unary_minus"),
    pytest.param("2**3", t.Power(two, three), id="python_power"),
    # plain-text functions, roots, logarithms and binomials
    pytest.param("sqrt(9)", t.Root(t.Num("9")), id="plain_sqrt"),
    pytest.param("\u221a2", t.Root(two), id="unicode_sqrt"),
    pytest.param("log_10(100)", t.Func("log", t.Num("100"), base=t.Num("10")), id="plain_log_base"),
    pytest.param("\\log_2 8", t.Func("log", t.Num("8"), base=two), id="latex_log_base"),
    pytest.param("\\ln x", t.Func("log", x, base=t.Const("e")), id="natural_log"),
    pytest.param("binom(5, 2)", t.Binom(t.Num("5"), two), id="plain_binomial"),
    pytest.param("\\binom{5}{2}", t.Binom(t.Num("5"), two), id="latex_binomial"),
    pytest.param("sin(x)", t.Func("sin", x), id="plain_function"),
    pytest.param("\\sin x", t.Func("sin", x), id="latex_function_bare_argument"),
    pytest.param("\\sin^2 x", t.Func("sin", x, power=two), id="function_power_before_argument"),
    pytest.param(
        "\\sin 2x",
        t.Func("sin", t.Product((two, x), ("",))),
        id="function_argument_is_the_product",
    ),
    # numbers
    pytest.param("1,000", t.Num("1,000"), id="thousands_comma"),
    pytest.param("1{,}000", t.Num("1{,}000"), id="thousands_braced_comma"),
    pytest.param("10\\,000", t.Num("10\\,000"), id="thousands_thin_space"),
    pytest.param("0.\\overline{3}", t.Num("0.\\overline{3}"), id="repeating_decimal"),
    pytest.param("1011_2", t.Based("1011", 2), id="numeral_in_base"),
    pytest.param("A3_{16}", t.Based("A3", 16), id="hex_numeral"),
    pytest.param("(1011)_{(2)}", t.Based("1011", 2), id="numeral_bracketed"),
    pytest.param("twenty-five", t.Word("twenty-five", number=True), id="number_words"),
    pytest.param("\u00bd", t.Frac(one, two), id="vulgar_fraction"),
    pytest.param("1\u200e2", t.Num("12"), id="digits_split_by_an_invisible_mark"),
    # postfix marks, degrees, currency
    pytest.param("5!!!!", t.Postfix(t.Num("5"), ("!",) * 4), id="multifactorial"),
    pytest.param("25\\%", t.Postfix(t.Num("25"), ("%",)), id="percent"),
    pytest.param("30^\\circ", t.Degrees(t.Num("30")), id="degrees_circ"),
    pytest.param("30\u00b0", t.Degrees(t.Num("30")), id="degrees_sign"),
    pytest.param("\\$12.50", t.Currency(t.Num("12.50")), id="currency_escaped"),
    pytest.param("$18", t.Currency(t.Num("18")), id="currency_unpaired_dollar"),
    # products: glued or spaced, explicit operators
    pytest.param("5 cm", t.Product((t.Num("5"), t.Word("cm")), (" ",)), id="spaced_word"),
    pytest.param("7days", t.Product((t.Num("7"), t.Word("days")), ("",)), id="glued_word"),
    pytest.param("2(5)", t.Product((two, t.Bracket("(", ")", (t.Num("5"),))), ("",)), id="2(5)"),
    pytest.param("7 \\bmod 3", t.Product((t.Num("7"), three), ("mod",)), id="binary_mod"),
    pytest.param("3:2", t.Product((three, two), (":",)), id="ratio"),
    # bars open and close by what stands before them
    pytest.param(
        "|x||y|",
        t.Product((t.Enclosed("abs", x), t.Enclosed("abs", t.Name("y"))), ("",)),
        id="two_absolute_values",
    ),
    pytest.param(
        "2|x|", t.Product((two, t.Enclosed("abs", x)), ("",)), id="absolute_value_after_number"
    ),
    # relations, sets, intervals, matrices
    pytest.param("1 \\le x < 2", t.Relation((one, x, two), ("<=", "<")), id="chain"),
    pytest.param("x \\ne 5", t.Relation((x, t.Num("5")), ("!=",)), id="not_equal"),
    pytest.param("x != 5", t.Relation((x, t.Num("5")), ("!=",)), id="plain_not_equal"),
    pytest.param(
        "5! = 120",
        t.Relation((t.Postfix(t.Num("5"), ("!",)), t.Num("120")), ("=",)),
        id="factorial_then_equals",
    ),
    pytest.param("[1, 2)", t.Bracket("[", ")", (one, two)), id="half_open_interval"),
    pytest.param("\\langle 2, 1\\rangle", t.Bracket("<", ">", (two, one)), id="angle_vector"),
    pytest.param("\\{1, 2\\}", t.SetOf((one, two)), id="set"),
    pytest.param("\\varnothing", t.SetOf(()), id="empty_set"),
    pytest.param(
        "\\begin{pmatrix}1&2\\end{pmatrix}", t.Matrix("pmatrix", ((one, two),)), id="matrix_row"
    ),
    pytest.param(
        "17 \\equiv 2 \\pmod{5}",
        t.Congruence((t.Num("17"), t.Product((two, t.Num("5")), ("mod",))), None),
        id="congruence_pmod_reads_as_mod",
    ),
    pytest.param(
        "17 \\equiv 2 (\\text{mod } 5)",
        t.Congruence((t.Num("17"), two), t.Num("5")),
        id="congruence_bracketed_modulus",
    ),
    pytest.param(
        "\\sum_{k=1}^{3} k", t.BigOp("sum", "k", one, three, t.Name("k")), id="sum_with_bounds"
    ),
    pytest.param("\\text{ cm}", t.Text("text", " cm"), id="text_command"),
]


@pytest.mark.parametrize(("text", "expected"), TREES)
def test_notation_reads_into_its_tree(text: str, expected: t.Node) -> None:
    assert _item(text) == expected


# (answer, its items and separators).
LISTS = [
    pytest.param("2 \\text{ or } 3", (two, three), ("or",), id="text_or"),
    pytest.param("1, 2, and 3", (one, two, three), (",", "and"), id="serial_comma"),
    pytest.param("x = 1; 2", (t.Relation((x, one), ("=",)), two), (";",), id="semicolon"),
    pytest.param(
        "(a) 3 (b) 5",
        (t.Labelled("a", three), t.Labelled("b", t.Num("5"))),
        (",",),
        id="parts_without_separator",
    ),
    pytest.param(
        "\\text{(i) } 1; \\text{(ii) } 2",
        (t.Labelled("i", one), t.Labelled("ii", two)),
        (";",),
        id="labels_in_text",
    ),
    pytest.param("4, 567", (t.Num("4"), t.Num("567")), (",",), id="list_not_thousands"),
]


@pytest.mark.parametrize(("text", "items", "separators"), LISTS)
def test_several_items(text: str, items: tuple, separators: tuple) -> None:
    answer = parse(text)
    assert isinstance(answer, t.Answer)
    assert (answer.items, answer.separators) == (items, separators)


# (spelling, another spelling of the same tree): size commands, spacing, delimiters, a final
# full stop, Unicode and LaTeX spellings of a token.
SAME_TREE = [
    pytest.param("\\left(1, 2\\right)", "(1,2)", id="size_commands"),
    pytest.param("\\bigl(x\\bigr)", "(x)", id="big_size_commands"),
    pytest.param("\\displaystyle\\frac{1}{2}", "\\frac{1}{2}", id="displaystyle"),
    pytest.param("18.", "18", id="final_full_stop"),
    pytest.param("$x = 2$", "x = 2", id="math_delimiters"),
    pytest.param("\u22125", "-5", id="unicode_minus"),
    pytest.param("3\u00d74", "3\\times 4", id="unicode_times"),
    pytest.param("\u03c0", "\\pi", id="unicode_pi"),
    pytest.param("\u221e", "\\infty", id="unicode_infinity"),
    pytest.param("x \u2264 2", "x \\le 2", id="unicode_le"),
    pytest.param("x <= 2", "x \\leqslant 2", id="plain_le"),
    pytest.param("\u200b42\u200b", "42", id="zero_width_marks"),
    pytest.param("\u200e42\u200f", "42", id="bidirectional_marks"),
    pytest.param("42\ufe0f", "42", id="variation_selector"),
    pytest.param("4\x002", "42", id="nul_inside_digits"),
    pytest.param("\\sin(x)", "\\sin x", id="function_bracket_argument"),
    pytest.param("\\tfrac{3}{4}", "\\frac{3}{4}", id="tfrac"),
    pytest.param("sin(x + 2pi)", "\\sin(x + 2\\pi)", id="plain_pi_and_function"),
    pytest.param("\\left.\\frac{x}{2}\\right.", "\\frac{x}{2}", id="null_delimiters"),
]


@pytest.mark.parametrize(("text", "same"), SAME_TREE)
def test_spellings_of_one_tree(text: str, same: str) -> None:
    assert parse(text) == parse(same)


# (text, where reading stops): what is no notation is Unparsable, never a guess.
UNPARSABLE = [
    pytest.param("2 +", 3, id="dangling_operator"),
    pytest.param("\\frac{1}", 8, id="missing_argument"),
    pytest.param("(1, 2", 5, id="unclosed_bracket"),
    pytest.param("x \\foo y", 2, id="unknown_command"),
    pytest.param("#", 0, id="stray_character"),
]


@pytest.mark.parametrize(("text", "position"), UNPARSABLE)
def test_reading_stops_where_the_notation_does(text: str, position: int) -> None:
    read = parse(text)
    assert isinstance(read, Unparsable)
    assert read.position == position


def test_a_tree_deeper_than_the_cap_is_not_read() -> None:
    read = parse("- " * (MAX_DEPTH + 5) + "x")
    assert isinstance(read, Unparsable) and "deeper" in read.message
    assert isinstance(parse("- " * 50 + "x"), t.Answer)


def test_equal_trees_ignore_where_they_stand() -> None:
    # the verdict cache keys on trees: a spacing difference must not split it
    assert parse("x+1") == parse("  x +  1 ")
    assert hash(parse("x+1")) == hash(parse("  x +  1 "))


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.integers(min_value=-(10**30), max_value=10**30), st.integers(0, 10**6), st.booleans())
def test_a_plain_number_reads_as_the_grammar_reads_it(whole: int, decimals: int, dot: bool) -> None:
    # plain numbers skip the parser: their tree must be the grammar's, spans included
    text = f"{whole}.{decimals}" if dot else str(whole)
    fast, full = parse(text), syntax._parsed(text)
    assert fast == full
    assert [n.span for n in t.walk(fast)] == [n.span for n in t.walk(full)]  # type: ignore[arg-type]
