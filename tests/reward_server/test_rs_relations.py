"""Equations and congruences (``reward_server.checker.relations``), read from the answer's tree:
their sides, the left side that names the quantity, the steps that must hold, and the residue a
congruence answers."""

from __future__ import annotations

import pytest
from readers import tree  # tests/reward_server/, on sys.path (conftest.py)

from reward_server.checker import relations
from reward_server.checker import tree as t
from reward_server.checker.extract import answer_text
from reward_server.checker.syntax import Unparsable, parse
from reward_server.protocol import Reason


def _tree_or_none(text: str) -> t.Node | None:
    read = parse(answer_text(text))
    return None if isinstance(read, Unparsable) else tree(text)


# (text, separator, parts outside any bracket): the answer's items, or an equation's sides.
SPLIT_TOP = [
    pytest.param("1, 2, 3", ",", ["1", "2", "3"], id="top_level:1, 2, 3"),
    pytest.param("(1, 2), 3", ",", ["(1, 2)", "3"], id="inside_parentheses:(1, 2), 3"),
    pytest.param("[1,2), (3,4]", ",", ["[1,2)", "(3,4]"], id="inside_intervals:[1,2), (3,4]"),
    pytest.param(
        "f(a,b), \\{1,2\\}", ",", ["f(a,b)", "\\{1,2\\}"], id="inside_braces:f(a,b), {1,2}"
    ),
    pytest.param("a = b = c", "=", ["a", "b", "c"], id="equals:a = b = c"),
    pytest.param("x", ",", ["x"], id="no_separator:x"),
]


@pytest.mark.parametrize(("text", "sep", "expected"), SPLIT_TOP)
def test_parts_outside_brackets(text: str, sep: str, expected: list[str]) -> None:
    read = parse(text)
    assert not isinstance(read, Unparsable)
    parts = read.items if sep == "," else read.items[0].sides
    assert list(parts) == [tree(part) for part in expected]


# (text, (label, sides) or None). The label is the left side when it names the quantity.
SPLIT_EQUATION = [
    pytest.param("x = 12", ("x", ["12"]), id="assignment:x = 12"),
    pytest.param("y = 2x+1", ("y", ["2x+1"]), id="assignment:y = 2x+1"),
    pytest.param("f(x) = 2x+1", ("f(x)", ["2x+1"]), id="function_name:f(x) = 2x+1"),
    pytest.param("x_1 = 3", ("x_1", ["3"]), id="subscript_name:x_1 = 3"),
    pytest.param("x_{12} = 3", ("x_{12}", ["3"]), id="subscript_name:x_{12} = 3"),
    pytest.param("\\theta = 30", ("\\theta", ["30"]), id="greek_name:\\theta = 30"),
    pytest.param("\\sin x = \\frac12", ("\\sin x", ["\\frac12"]), id="function_of_name:\\sin x"),
    pytest.param("x + y = 5", ("x + y", ["5"]), id="expression_of_names:x + y = 5"),
    pytest.param("a_1 b_1 = 6", ("a_1 b_1", ["6"]), id="expression_of_names:a_1 b_1 = 6"),
    pytest.param("m\\angle A = 30", ("m\\angle A", ["30"]), id="angle_name:m\\angle A = 30"),
    pytest.param(
        "\\overline{AB} = 5", ("\\overline{AB}", ["5"]), id="decorated_name:\\overline{AB} = 5"
    ),
    pytest.param("\\text{Area} = 5", ("\\text{Area}", ["5"]), id="text_name:\\text{Area} = 5"),
    pytest.param(
        "P = 2l + 2w = 16", ("P", ["2l + 2w", "16"]), id="formula_after_name:P = 2l + 2w = 16"
    ),
    pytest.param("20 - 8 = 12", (None, ["20 - 8", "12"]), id="calculation:20 - 8 = 12"),
    pytest.param("5 = 5", (None, ["5", "5"]), id="calculation:5 = 5"),
    pytest.param("2x = 14", (None, ["2x", "14"]), id="coefficient_not_name:2x = 14"),
    pytest.param("x^2 = 4", (None, ["x^2", "4"]), id="digit_not_name:x^2 = 4"),
    pytest.param("x + e = 3", (None, ["x + e", "3"]), id="constant_not_name:x + e = 3"),
    pytest.param("\\pi = 3", (None, ["\\pi", "3"]), id="constant_not_name:\\pi = 3"),
    pytest.param("e = 3", (None, ["e", "3"]), id="constant_not_name:e = 3"),
    pytest.param("i = 2", (None, ["i", "2"]), id="constant_not_name:i = 2"),
    pytest.param("x=1, x=2", None, id="list:x=1, x=2"),
    pytest.param("x < 3", None, id="inequality:x < 3"),
    pytest.param("x \\le 3", None, id="inequality:x \\le 3"),
    pytest.param("x \\ne 3", None, id="inequality:x \\ne 3"),
    pytest.param("12", None, id="no_equals:12"),
    pytest.param("h(2) = 3", ("h(2)", ["3"]), id="function_at_a_value:h(2) = 3"),
    pytest.param("12 = y", ("y", ["12"]), id="written_backwards:12 = y"),
]


@pytest.mark.parametrize(("text", "expected"), SPLIT_EQUATION)
def test_equation(text: str, expected: tuple[str | None, list[str]] | None) -> None:
    split = relations.equation(tree(text))
    if expected is None:
        assert split is None
        return
    label, sides = expected
    assert split is not None
    assert (split[0].tree if split[0] else None) == (tree(label) if label else None)
    assert split[1] == tuple(tree(side) for side in sides)


# (sides, the steps that must hold): consecutive sides without an unknown.
CHECKED_STEPS = [
    pytest.param(["20 - 8", "12"], [("20 - 8", "12")], id="numeric_step:20 - 8 = 12"),
    pytest.param(["20 - 7", "12"], [("20 - 7", "12")], id="numeric_step:20 - 7 = 12"),
    pytest.param(["1", "2", "3"], [("1", "2"), ("2", "3")], id="every_step:1 = 2 = 3"),
    pytest.param(
        ["2l + 2w", "2(5) + 2(3)", "16"],
        [("2(5) + 2(3)", "16")],
        id="formula_side_skipped:2l + 2w = 2(5) + 2(3) = 16",
    ),
    pytest.param(["5 + 7", "12 apples"], [("5 + 7", "12")], id="unit_dropped:5 + 7 = 12 apples"),
    pytest.param(["e^2", "7.389"], [("e^2", "7.389")], id="constant_e:e^2 = 7.389"),
    pytest.param(["2i", "3"], [("2i", "3")], id="constant_i:2i = 3"),
    pytest.param(["\\sqrt{4}", "2"], [("\\sqrt{4}", "2")], id="command_not_unknown:\\sqrt{4} = 2"),
    pytest.param(["-\\frac{b}{a}", "5"], [], id="unknown:-\\frac{b}{a} = 5"),
    pytest.param(["\\pi r^2", "12"], [], id="unknown:\\pi r^2 = 12"),
    pytest.param(["x", "2", "y", "3"], [], id="unknown_every_step:x = 2 = y = 3"),
    pytest.param(["12"], [], id="one_side:12"),
]


@pytest.mark.parametrize(("sides", "expected"), CHECKED_STEPS)
def test_checked_steps(sides: list[str], expected: list[tuple[str, str]]) -> None:
    steps = relations.checked_steps(tuple(tree(side) for side in sides))
    assert steps == [(tree(left), tree(right)) for left, right in expected]


# (label, other label, same quantity).
SAME_QUANTITY = [
    pytest.param("x", "y", True, id="plain_names_interchange:x|y"),
    pytest.param("f(x)", "y", True, id="plain_names_interchange:f(x)|y"),
    pytest.param("\\theta", "x", True, id="plain_names_interchange:\\theta|x"),
    pytest.param("x_1", "y", True, id="plain_names_interchange:x_1|y"),
    pytest.param(None, None, True, id="no_labels:None|None"),
    pytest.param(None, "x", False, id="one_label:None|x"),
    pytest.param("x", None, False, id="one_label:x|None"),
    pytest.param("\\cos x", "\\sin x", False, id="expressions_differ:\\cos x|\\sin x"),
    pytest.param("\\sin x", "y", False, id="expression_vs_name:\\sin x|y"),
    pytest.param("a + b", "x", False, id="expression_vs_name:a + b|x"),
    pytest.param("\\sin(x)", "\\sin x", True, id="same_expression:\\sin(x)|\\sin x"),
    pytest.param("a + b", "a+b", True, id="same_expression_spaces:a + b|a+b"),
    pytest.param("f(4)", "f(5)", False, id="function_at_other_values:f(4)|f(5)"),
    pytest.param("h(2)", "h(2)", True, id="function_at_one_value:h(2)|h(2)"),
]


@pytest.mark.parametrize(("label", "other", "expected"), SAME_QUANTITY)
def test_same_quantity(label: str | None, other: str | None, expected: bool) -> None:
    def read(text: str | None) -> relations.Label | None:
        return None if text is None else relations.read_label(tree(text))

    assert relations.same_quantity(read(label), read(other)) is expected


# (label, the other equation's label and sides, whether the two relate each other's names).
RELATES_LABELS = [
    pytest.param("y", "x", ("y",), True, id="names_swapped:y = x|x = y"),
    pytest.param("y", "x", ("\\frac{y}{2}",), True, id="solved_for_the_other:y = 2x|x = y/2"),
    pytest.param("f(x)", "y", ("f(x)+1",), True, id="function_name:f(x)|y = f(x)+1"),
    pytest.param("x", "y", ("x_1+1",), False, id="subscripted_is_another_name:x|y = x_1+1"),
    pytest.param("\\theta", "y", ("2\\theta",), True, id="greek_name:theta|y = 2 theta"),
    pytest.param("y", "f(x)", ("2x+1",), False, id="same_quantity:y|f(x) = 2x+1"),
    pytest.param("x", "y", ("\\exp(2)",), False, id="letter_inside_a_command:x|y = exp(2)"),
    pytest.param("x", "y", ("max(2)",), False, id="letter_inside_a_word:x|y = max(2)"),
    pytest.param("x", "x", ("x",), False, id="same_label:x|x = x"),
    pytest.param("\\sin x", "y", ("\\sin x",), False, id="expression_label:sin x"),
    pytest.param(None, "y", ("y",), False, id="no_label"),
]


@pytest.mark.parametrize(("label", "other", "sides", "expected"), RELATES_LABELS)
def test_relates_labels(
    label: str | None, other: str, sides: tuple[str, ...], expected: bool
) -> None:
    def read(text: str | None) -> relations.Label | None:
        return None if text is None else relations.read_label(tree(text))

    names = relations.names_in(tuple(tree(side) for side in sides))
    assert relations.relates_labels(read(label), read(other), names) is expected


# (text, (sides, modulus) or None).
CONGRUENCE = [
    pytest.param("17 \\equiv 2 \\pmod 5", (("17", "2"), "5"), id="pmod:17 = 2 pmod 5"),
    pytest.param("17 \\equiv 2 \\pmod{5}", (("17", "2"), "5"), id="pmod_braced:17 = 2 pmod{5}"),
    pytest.param("17 \\equiv 2 (\\bmod 5)", (("17", "2"), "5"), id="bmod_parenthesised:(bmod 5)"),
    pytest.param(
        "17 \\equiv 2 (\\text{mod } 5)", (("17", "2"), "5"), id="text_mod:(\\text{mod } 5)"
    ),
    pytest.param(
        "17 \\equiv 2 (\\operatorname{mod} 5)",
        (("17", "2"), "5"),
        id="operatorname_mod:(\\operatorname{mod} 5)",
    ),
    pytest.param("17 \\equiv 2 (mod 5)", (("17", "2"), "5"), id="plain_mod:(mod 5)"),
    pytest.param("17 \\equiv 2 \\mod 5", (("17", "2"), "5"), id="mod_command:\\mod 5"),
    pytest.param("17 \\equiv 2 \\bmod 5", (("17", "2"), "5"), id="bmod_command:\\bmod 5"),
    pytest.param("17 \u2261 2 (mod 5)", (("17", "2"), "5"), id="unicode_equiv:17 ≡ 2 (mod 5)"),
    pytest.param("x \\equiv 2 \\pmod 5", (("2",), "5"), id="name_dropped:x = 2 pmod 5"),
    pytest.param("a + b \\equiv 3 \\pmod 7", (("3",), "7"), id="name_dropped:a + b = 3 pmod 7"),
    pytest.param("2x \\equiv 4 \\pmod 6", (("2x", "4"), "6"), id="coefficient_kept:2x = 4 pmod 6"),
    pytest.param(
        "2^{10} \\equiv 1024 \\equiv 4 \\pmod 5",
        (("2^{10}", "1024", "4"), "5"),
        id="chain:2^{10} = 1024 = 4 pmod 5",
    ),
    pytest.param("17 \\equiv 2 \\pmod n", (("17", "2"), "n"), id="symbolic_modulus:pmod n"),
    pytest.param("13 \\equiv 12", (("13", "12"), None), id="no_modulus:13 = 12"),
    pytest.param("17 = 2", None, id="no_equiv:17 = 2"),
    pytest.param("\\equivalent", None, id="longer_command:\\equivalent"),
]


@pytest.mark.parametrize(("text", "expected"), CONGRUENCE)
def test_congruence(text: str, expected: tuple[tuple[str, ...], str | None] | None) -> None:
    read = _tree_or_none(text)
    found = None if read is None else relations.congruence(read)
    if expected is None:
        assert found is None
        return
    sides, modulus = expected
    assert found == (tuple(tree(side) for side in sides), tree(modulus) if modulus else None)


# (sides, modulus, what the congruence answers): the last side when every step holds and it is
# the least residue; None when a side is no exact integer here (the symbolic check evaluates it).
CONGRUENCE_VALUE = [
    pytest.param(["2^{10}", "4"], "5", 4, id="least_residue:2^{10} = 4 mod 5"),
    pytest.param(["17", "2"], "5", 2, id="least_residue:17 = 2 mod 5"),
    pytest.param(["2^{10}", "1024", "4"], "5", 4, id="every_step_holds:2^{10} = 1024 = 4"),
    pytest.param(["\\frac{10}{2}", "0"], "5", 0, id="integer_fraction:10/2 = 0 mod 5"),
    pytest.param(["2"], "5", 2, id="one_side:2 mod 5"),
    pytest.param(["0"], "5", 0, id="zero_residue:0 mod 5"),
    pytest.param(["5", "12"], "7", Reason.FALSE_EQUATION, id="false_equation:5 = 12 mod 7"),
    pytest.param(["17", "12"], "5", Reason.FALSE_EQUATION, id="not_least_residue:17 = 12 mod 5"),
    pytest.param(["7"], "5", Reason.FALSE_EQUATION, id="not_least_residue:7 mod 5"),
    pytest.param(["5"], "5", Reason.FALSE_EQUATION, id="not_least_residue:5 mod 5"),
    pytest.param(["-3"], "5", Reason.FALSE_EQUATION, id="negative_residue:-3 mod 5"),
    pytest.param(["17", "7"], "5", Reason.FALSE_EQUATION, id="false_step:17 = 7 mod 5"),
    pytest.param(["2"], "0", Reason.FALSE_EQUATION, id="modulus_not_positive:2 mod 0"),
    pytest.param(["2"], "-5", Reason.FALSE_EQUATION, id="modulus_not_positive:2 mod -5"),
    pytest.param(["x", "2"], "5", None, id="not_an_integer:x = 2 mod 5"),
    pytest.param(["2.5"], "5", None, id="not_an_integer:2.5 mod 5"),
    pytest.param(["2"], "\\frac{1}{2}", None, id="modulus_not_an_integer:2 mod 1/2"),
    pytest.param(["17", "2"], "n", None, id="modulus_not_an_integer:17 = 2 mod n"),
]


@pytest.mark.parametrize(("sides", "modulus", "expected"), CONGRUENCE_VALUE)
def test_congruence_value(sides: list[str], modulus: str, expected: object) -> None:
    integers = [relations.exact_integer(tree(side)) for side in [*sides, modulus]]
    if expected is None:
        assert None in integers
        return
    *residues, n = integers
    value = relations.congruence_value(residues, n)  # type: ignore[arg-type]
    assert value == expected
    assert type(value) is type(expected)


@pytest.mark.parametrize(
    "text",
    ["x", "x_1", "x_{12}", "f(x)", "\\theta", "\\omega"],
    ids=lambda text: f"variable:{text}",
)
def test_variable_names(text: str) -> None:
    assert relations.is_plain_name(tree(text))


@pytest.mark.parametrize(
    "text",
    ["\\pi", "\\sin", "2x", "xy", "f(x, y)"],
    ids=lambda text: f"not_variable:{text}",
)
def test_not_variable_names(text: str) -> None:
    read = _tree_or_none(text)
    assert read is None or not relations.is_plain_name(read)
