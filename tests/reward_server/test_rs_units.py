"""Units (``reward_server.checker.units``): where a unit stands after a value, its one spelling,
percent words, the text unit the symbolic parser drops, and when two units differ."""

from __future__ import annotations

import pytest
from readers import tree  # tests/reward_server/, on sys.path (conftest.py)

from reward_server.checker import units
from reward_server.checker.lexicon import MULTIPLIERS

# (answer, (its value, unit key)): the unit taken off the answer's tree.
SPLIT_UNIT = [
    # a unit in a text command: any letters, single ones too
    pytest.param("5\\text{ m}", ("5", "m"), id="text_unit:5\\text{ m}"),
    pytest.param("5\\text{ s}", ("5", "s"), id="text_unit_single_letter:5\\text{ s}"),
    pytest.param("5\\text{cm}", ("5", "cm"), id="text_unit_no_space:5\\text{cm}"),
    pytest.param("5\\mathrm{cm}", ("5", "cm"), id="text_unit_mathrm:5\\mathrm{cm}"),
    pytest.param("5\\text{ dollars}", ("5", "dollar"), id="text_unit_synonym:5\\text{ dollars}"),
    pytest.param("5\\text{ in}", ("5", "in"), id="text_unit_inch:5\\text{ in}"),
    pytest.param("5\\text{ cm}^2", ("5", "cm^2"), id="text_unit_power:5\\text{ cm}^2"),
    pytest.param("5\\text{ cm}^{3}", ("5", "cm^3"), id="text_unit_power_braced:5\\text{ cm}^{3}"),
    pytest.param("5\\text{ sq cm}", ("5", "cm^2"), id="text_unit_square:5\\text{ sq cm}"),
    pytest.param("5\\text{ sq. cm}", ("5", "cm^2"), id="text_unit_square:5\\text{ sq. cm}"),
    pytest.param("5\\text{ cubic cm}", ("5", "cm^3"), id="text_unit_cubic:5\\text{ cubic cm}"),
    pytest.param(
        "5\\text{ meters per second}", ("5", "m/s"), id="text_unit_per:5\\text{ meters per second}"
    ),
    pytest.param(
        "5\\text{ thousand}", ("5\\text{ thousand}", None), id="text_multiplier:5\\text{ thousand}"
    ),
    pytest.param(
        "5\\text{ times}", ("5\\text{ times}", None), id="text_multiplier:5\\text{ times}"
    ),
    pytest.param(
        "5\\text{ 3 apples}", ("5\\text{ 3 apples}", None), id="text_with_digit:5\\text{ 3 apples}"
    ),
    pytest.param("\\text{ cm}", ("\\text{ cm}", None), id="text_without_value:\\text{ cm}"),
    # glued to a digit: a known unit name of 2+ letters only
    pytest.param("7days", ("7", "day"), id="glued_unit:7days"),
    pytest.param("5cm", ("5", "cm"), id="glued_unit:5cm"),
    pytest.param("5seconds", ("5", "s"), id="glued_unit:5seconds"),
    pytest.param("5mins", ("5", "min"), id="glued_unit:5mins"),
    pytest.param("5m", ("5m", None), id="glued_single_letter_is_variable:5m"),
    pytest.param("5x", ("5x", None), id="glued_variable:5x"),
    pytest.param("5ab", ("5ab", None), id="glued_unknown_word:5ab"),
    pytest.param("5min", ("5min", None), id="glued_excluded_name:5min"),
    pytest.param("5mi", ("5mi", None), id="glued_excluded_name:5mi"),
    pytest.param("5in", ("5in", None), id="glued_excluded_name:5in"),
    pytest.param("x^2", ("x^2", None), id="glued_after_non_digit:x^2"),
    # after a space: 3+ letters or a known name, never a single letter
    pytest.param("5 apples", ("5", "apple"), id="spaced_word:5 apples"),
    pytest.param("5 apple", ("5", "apple"), id="spaced_word_singular:5 apple"),
    pytest.param("5 bus", ("5", "bus"), id="plural_kept_short_name:5 bus"),
    pytest.param("5 kg", ("5", "kg"), id="spaced_known_name:5 kg"),
    pytest.param("5 mi", ("5", "mi"), id="spaced_known_name:5 mi"),
    pytest.param("5 ab", ("5 ab", None), id="spaced_short_unknown:5 ab"),
    pytest.param("5 x", ("5 x", None), id="spaced_single_letter:5 x"),
    pytest.param("5 m", ("5 m", None), id="spaced_single_letter_name:5 m"),
    pytest.param("5 h", ("5 h", None), id="spaced_single_letter_name:5 h"),
    pytest.param("5 s", ("5 s", None), id="spaced_single_letter_name:5 s"),
    pytest.param("5 l", ("5 l", None), id="spaced_single_letter_name:5 l"),
    pytest.param("5 in", ("5 in", None), id="spaced_preposition:5 in"),
    pytest.param("5 pi", ("5 pi", None), id="math_word:5 pi"),
    pytest.param("5 thousand", ("5 thousand", None), id="multiplier:5 thousand"),
    pytest.param("5 cubed", ("5 cubed", None), id="multiplier:5 cubed"),
    pytest.param("\\sqrt x", ("\\sqrt x", None), id="command_argument:\\sqrt x"),
    pytest.param("12", ("12", None), id="no_unit:12"),
    # the value may be any expression
    pytest.param("3\\sqrt{2} meters", ("3\\sqrt{2}", "m"), id="expression_value:3\\sqrt{2} meters"),
    pytest.param("10\\pi cm", ("10\\pi", "cm"), id="pi_value:10\\pi cm"),
    # one spelling per unit
    pytest.param("5 hrs", ("5", "h"), id="synonym:5 hrs"),
    pytest.param("5 hours", ("5", "h"), id="synonym:5 hours"),
    pytest.param("5 feet", ("5", "ft"), id="synonym:5 feet"),
    pytest.param("5 foot", ("5", "ft"), id="synonym:5 foot"),
    pytest.param("5 litres", ("5", "l"), id="synonym:5 litres"),
    pytest.param("5 usd", ("5", "dollar"), id="synonym:5 usd"),
    pytest.param("5 radians", ("5", "rad"), id="synonym:5 radians"),
    pytest.param("5 degree", ("5", "deg"), id="synonym:5 degree"),
    # compound units are keyed by their parts; miles per hour by its usual name
    pytest.param("5 km/h", ("5", "km/h"), id="compound:5 km/h"),
    pytest.param("5 kph", ("5", "km/h"), id="compound_synonym:5 kph"),
    pytest.param("5 m/s", ("5", "m/s"), id="compound:5 m/s"),
    pytest.param("5 meters/second", ("5", "m/s"), id="compound_parts:5 meters/second"),
    pytest.param("5 mph", ("5", "mph"), id="compound_alias:5 mph"),
    pytest.param("5 mi/h", ("5", "mph"), id="compound_alias:5 mi/h"),
    pytest.param("5 miles per hour", ("5", "mph"), id="per_phrase:5 miles per hour"),
    # powers and square/cubic phrases
    pytest.param("5 cm^2", ("5", "cm^2"), id="power:5 cm^2"),
    pytest.param("5 cm^{2}", ("5", "cm^2"), id="power_braced:5 cm^{2}"),
    pytest.param("5 square feet", ("5", "ft^2"), id="square_phrase:5 square feet"),
    pytest.param("6 sq units", ("6", "unit^2"), id="square_phrase:6 sq units"),
    pytest.param("5 cubic meters", ("5", "m^3"), id="cubic_phrase:5 cubic meters"),
    # a percent stays in the value
    pytest.param("25\\%", ("25\\%", "%"), id="percent:25\\%"),
    # a unit phrase of two words, a unit that is also a function's name, an "-es" plural
    pytest.param("5 percentage points", ("5", "pp"), id="unit_phrase:5 percentage points"),
    pytest.param("5\\text{ percentage points}", ("5", "pp"), id="unit_phrase:5\\text{ pp}"),
    pytest.param("5 sec", ("5", "s"), id="unit_also_math_word:5 sec"),
    pytest.param("30 deg", ("30", "deg"), id="unit_also_math_word:30 deg"),
    pytest.param("5 boxes", ("5", "box"), id="plural_es:5 boxes"),
    pytest.param("5 glasses", ("5", "glass"), id="plural_es:5 glasses"),
]


@pytest.mark.parametrize(("text", "expected"), SPLIT_UNIT)
def test_split_unit(text: str, expected: tuple[str, str | None]) -> None:
    value, unit = expected
    assert units.split_unit(tree(text)) == (tree(value), unit)


# (what follows a number, whether it is only unit words: the number's unit).
IS_UNIT_SUFFIX = [
    pytest.param("cm", True, id="glued_short_unit:cm"),
    pytest.param("kg", True, id="glued_short_unit:kg"),
    pytest.param(" cm", True, id="spaced_short_unit: cm"),
    pytest.param(" cm.", True, id="abbreviation_period: cm."),
    pytest.param(" apples", True, id="spaced_word: apples"),
    pytest.param("\\text{ apples}", True, id="text_unit:\\text{ apples}"),
    pytest.param(" \\text{ cm}^2", True, id="text_unit_power: \\text{ cm}^2"),
    pytest.param("km/h", True, id="per_unit:km/h"),
    pytest.param(" km/hr", True, id="per_unit: km/hr"),
    pytest.param(" cm/s", True, id="per_short_name: cm/s"),
    pytest.param(" apples/day", True, id="per_short_name: apples/day"),
    pytest.param(" apples/pies", False, id="per_long_unknown: apples/pies"),
    pytest.param(" miles per hour", True, id="per_phrase: miles per hour"),
    pytest.param(" sq cm", True, id="square_phrase: sq cm"),
    pytest.param("x", False, id="variable:x"),
    pytest.param(" x", False, id="spaced_variable: x"),
    pytest.param("ab", False, id="glued_letters:ab"),
    pytest.param(" ab", False, id="spaced_short_word: ab"),
    pytest.param(" m", False, id="spaced_single_letter: m"),
    pytest.param(" pi", False, id="math_word: pi"),
    pytest.param(" sin", False, id="math_word: sin"),
    pytest.param(" 3", False, id="number: 3"),
    pytest.param(" \\text{3 cm}", False, id="digit_in_text: \\text{3 cm}"),
    pytest.param(" cm x", False, id="trailing_variable: cm x"),
    pytest.param("", False, id="empty"),
    pytest.param(" sec", True, id="unit_also_math_word: sec"),
    pytest.param(" \\text{ pi}", False, id="math_word_in_text: \\text{ pi}"),
]


@pytest.mark.parametrize(("rest", "expected"), IS_UNIT_SUFFIX)
def test_unit_after_a_number(rest: str, expected: bool) -> None:
    value, unit = units.split_unit(tree(f"5{rest}"))
    assert (unit is not None and value == tree("5")) is expected


# (text, whether its unit is the percent: words that mean percent after a number).
PERCENT_WORDS = [
    pytest.param("25 pct", "25\\%", id="percent_word:25 pct"),
    pytest.param("25 pct.", "25\\%", id="percent_word_period:25 pct."),
    pytest.param("25 per cent", "25\\%", id="percent_word:25 per cent"),
    pytest.param("25 percent", "25\\%", id="percent_word:25 percent"),
    pytest.param("25percent", "25\\%", id="percent_word_glued:25percent"),
    pytest.param("25 percentage", "25\\%", id="percent_word:25 percentage"),
    pytest.param("12.5 percent", "12.5\\%", id="percent_word_decimal:12.5 percent"),
    pytest.param("25\\text{ percent}", "25\\%", id="percent_text:25\\text{ percent}"),
    pytest.param("25\\text{percent}", "25\\%", id="percent_text:25\\text{percent}"),
    pytest.param("25 percent of 4", "25 percent of 4", id="percent_of_a_number:25 percent of 4"),
    pytest.param(
        "5 percentage points", "5 percentage points", id="percentage_points_kept:5 percentage"
    ),
    pytest.param("5 percent points", "5 percent points", id="percent_points_kept:5 percent"),
    pytest.param("25 percentile", "25 percentile", id="not_percent_word:25 percentile"),
    pytest.param("the percent", "the percent", id="no_number:the percent"),
    pytest.param("x percent", "x percent", id="no_number:x percent"),
    pytest.param("25 apples", "25 apples", id="no_percent_word:25 apples"),
]


@pytest.mark.parametrize(("text", "expected"), PERCENT_WORDS)
def test_percent_words(text: str, expected: str) -> None:
    assert (units.split_unit(tree(text))[1] == "%") is ("\\%" in expected)


# (answer, reference, whether both have a unit and they differ).
UNITS_DIFFER = [
    pytest.param("5 cm", "5\\text{ m}", True, id="different_units:5 cm|5 m"),
    pytest.param("18 cents", "18 dollars", True, id="cents_vs_dollars:18 cents|18 dollars"),
    pytest.param("5 kg", "5 g", True, id="different_units:5 kg|5 g"),
    pytest.param("5 cm", "5 cm^2", True, id="different_power:5 cm|5 cm^2"),
    pytest.param("5 apples", "5 oranges", True, id="different_words:5 apples|5 oranges"),
    pytest.param("25\\%", "25 cm", True, id="percent_vs_unit:25\\%|25 cm"),
    pytest.param("5", "5 cm", False, id="bare_answer:5|5 cm"),
    pytest.param("5 cm", "5", False, id="bare_reference:5 cm|5"),
    pytest.param("5 cm", "5 centimeters", False, id="synonym:5 cm|5 centimeters"),
    pytest.param("5 hrs", "5 hours", False, id="synonym:5 hrs|5 hours"),
    pytest.param("5 kph", "5 km/h", False, id="synonym:5 kph|5 km/h"),
    pytest.param("5\\text{ sq cm}", "5 cm^2", False, id="square_spelling:sq cm|cm^2"),
    pytest.param("5 mi/h", "5 miles per hour", False, id="compound_alias:mi/h|miles per hour"),
    pytest.param("25\\%", "25\\%", False, id="same_percent:25\\%|25\\%"),
    pytest.param("5 percentage points", "5 pp", False, id="unit_phrase_synonym:pp"),
    pytest.param("5 boxes", "5 box", False, id="plural_es:boxes against box"),
]


@pytest.mark.parametrize(("answer", "reference", "expected"), UNITS_DIFFER)
def test_units_differ(answer: str, reference: str, expected: bool) -> None:
    unit, ref_unit = units.split_unit(tree(answer))[1], units.split_unit(tree(reference))[1]
    assert units.units_differ(unit, ref_unit) is expected


# (name, whether it may be glued to a number): 2+ letters, except in, mi and min.
GLUED_UNITS = [
    pytest.param("cm", True, id="glued_unit_name:cm"),
    pytest.param("days", True, id="glued_unit_name:days"),
    pytest.param("km/h", True, id="glued_unit_name:km/h"),
    pytest.param("m", False, id="single_letter_name:m"),
    pytest.param("s", False, id="single_letter_name:s"),
    pytest.param("in", False, id="excluded_name:in"),
    pytest.param("mi", False, id="excluded_name:mi"),
    pytest.param("min", False, id="excluded_name:min"),
]


@pytest.mark.parametrize(("name", "glued"), GLUED_UNITS)
def test_glued_unit_names(name: str, glued: bool) -> None:
    assert name in units.UNIT_NAMES
    assert (name in units.GLUED_UNITS) is glued


def test_no_unit_name_is_a_multiplier() -> None:
    # split_unit refuses a multiplier word as a unit, so no unit name may be one
    assert units.UNIT_NAMES.keys() & MULTIPLIERS == set()


def test_percent_words_are_unit_words() -> None:
    assert units.PERCENT_WORDS <= units.UNIT_WORDS
