"""A labelled corpus of (answer, reference) pairs for the correctness checker.

Every pair is written by hand for this project and carries the reason for its label, following
the label policy of ``docs/reward-server.md``: an answer is right when a careful human grader
who knows only the reference would give it full credit, *and* it commits to one value (or to
the one set or tuple that the reference is). In short:

* values compare exactly: a rounded decimal of a non-terminating value is wrong;
* a bare number is read in the reference's unit (``25`` against ``25\\%`` is right, ``0.25``
  is not); a unit must match the reference's unit, and a plain unit word is fine where the
  reference has none;
* tuples and intervals are ordered, sets, lists and multiple-choice letters are not;
* words that change the value (hedges, negations, multiplier words, a second candidate) make
  an answer wrong.

``benchmarks/checker_accuracy.py`` scores this server and math-verify on it side by side;
``test_rs_checker_corpus.py`` holds the server to every label.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Pair:
    answer: str
    reference: str
    equal: bool
    kind: str  # the class of the issue the pair belongs to
    why: str  # the reason for the label


def _group(kind: str, rows: list[tuple[str, str, bool, str]]) -> list[Pair]:
    return [Pair(a, r, eq, kind, why) for a, r, eq, why in rows]


Y, N = True, False

PAIRS: list[Pair] = [
    *_group(
        "several_boxes",
        [
            ("\\boxed{2}, \\boxed{3}", "2, 3", Y, "two boxes are the list 2, 3"),
            ("\\boxed{3} \\text{ and } \\boxed{2}", "2,3", Y, "a list in any order"),
            ("\\boxed{2}\\boxed{3}", "\\{2, 3\\}", Y, "adjacent boxes are a list too"),
            ("\\boxed{-1}, \\boxed{4}", "\\boxed{4}, \\boxed{-1}", Y, "boxed list in the ref"),
            ("\\boxed{1}, \\boxed{2}", "\\boxed{1}, \\boxed{2}, \\boxed{3}", N, "missing an item"),
            ("\\boxed{3}", "\\boxed{2}, \\boxed{3}", N, "one of two required values"),
            ("\\boxed{3} or \\boxed{4}", "4", N, "two candidates for one value"),
            ("\\boxed{B}\\boxed{C}", "C", N, "two letters for one choice"),
            ("\\boxed{5}, \\boxed{5}", "5", N, "a list of two is not one number"),
            ("\\boxed{\\frac12}, \\boxed{2}", "2, 0.5", Y, "exact values, any order"),
            ("\\boxed{x=1}, \\boxed{x=2}", "1, 2", Y, "roots written as assignments"),
            ("\\boxed{A}, \\boxed{D}", "\\text{(A), (D)}", Y, "choice letters as a list"),
            ("\\boxed{7}", "\\boxed{7}", Y, "one box each"),
            ("\\boxed{1}\\text{ or }\\boxed{-1}", "\\pm 1", Y, "pm 1 is the list 1, -1"),
        ],
    ),
    *_group(
        "units",
        [
            ("3\\sqrt{2} meters", "3\\sqrt{2}", Y, "plain unit word after a symbolic value"),
            ("3\\sqrt{2}\\text{ meters}", "3\\sqrt{2}", Y, "unit in \\text after a root"),
            ("2\\pi \\text{ cm}", "2\\pi", Y, "unit after pi multiple"),
            ("\\frac{5}{2} \\text{ inches}", "2.5", Y, "unit after a fraction"),
            ("12\\textbf{ cm}", "12", Y, "unit in \\textbf"),
            ("12\\textnormal{ cm}", "12", Y, "unit in \\textnormal"),
            ("12\\mathrm{~cm}", "12", Y, "unit in \\mathrm with a tie"),
            ("12 \\mathrm{cm}^2", "12", Y, "square unit in \\mathrm"),
            ("7days", "7", Y, "unit word glued to the number"),
            ("45minutes", "45", Y, "glued unit word"),
            ("15dollars", "15", Y, "glued currency word"),
            ("7days", "8", N, "wrong number with a glued unit"),
            ("5 cm", "5 m", N, "wrong unit: centimetres against metres"),
            ("5\\text{ m}", "5\\text{ m}", Y, "same unit"),
            ("5 meters", "5\\text{ m}", Y, "metres spelled out"),
            ("3 minutes", "3\\text{ hours}", N, "minutes against hours"),
            ("3 hours", "3\\text{ hours}", Y, "same unit"),
            ("3 hrs", "3 hours", Y, "abbreviation of the same unit"),
            ("9 cm^3", "9\\text{ cm}^2", N, "volume unit against area unit"),
            ("9\\text{ cm}^2", "9 \\text{ cm}^2", Y, "same area unit"),
            ("9", "9\\text{ cm}^2", Y, "a bare number is read in the reference's unit"),
            ("40 \\text{ km/h}", "40", Y, "speed unit where the reference has none"),
            ("40 \\text{ mph}", "40\\text{ km/h}", N, "different speed unit"),
            ("18 apples", "18", Y, "a plain unit word"),
            ("18 \\text{apples}", "17", N, "wrong count with a unit"),
            ("2\\sqrt{5}\\text{ units}", "2\\sqrt{5}", Y, "generic unit word"),
            ("6 \\text{ sq units}", "6", Y, "square units"),
            ("4\\sqrt{3} \\text{ cm}^2", "4\\sqrt{3}", Y, "area unit after a root"),
            (
                "5\\text{ kg}",
                "5000\\text{ g}",
                N,
                "policy: the answer uses the reference's unit (no conversion)",
            ),
            ("\\$12.50", "12.5", Y, "dollar sign"),
            ("12.50 dollars", "\\$12.50", Y, "dollar word against dollar sign"),
        ],
    ),
    *_group(
        "solution_sets",
        [
            ("a=1,b=4; a=3,b=2", "(1,4),(3,2)", Y, "assignments listing the same pairs"),
            ("a=3,b=2; a=1,b=4", "(1,4),(3,2)", Y, "same pairs, other order"),
            ("a=1,b=4; a=2,b=3", "(1,4),(3,2)", N, "second pair swapped"),
            ("x=2, y=5", "(2,5)", Y, "one assignment pair as a tuple"),
            ("x=5, y=2", "(2,5)", N, "values in the wrong variables"),
            ("x = 2 \\text{ or } x = 3", "2, 3", Y, "roots joined by or"),
            ("2 \\text{ or } 3", "3, 2", Y, "values joined by or"),
            ("2 and 3", "2, 3", Y, "values joined by and"),
            ("x=2 \\text{ and } x=-2", "\\pm 2", Y, "pm 2 is the two roots 2 and -2"),
            ("2 or 3", "2", N, "a second candidate"),
            ("y = 2x+1", "f(x) = 2x + 1", Y, "y = against f(x) ="),
            ("f(x) = x^2", "y = x^2", Y, "f(x) = against y ="),
            ("y = 2x-1", "f(x) = 2x + 1", N, "different function"),
            ("x = 1, 2", "1, 2", Y, "x = before a list of roots"),
            ("x=-1 \\text{ or } x=\\frac{1}{2}", "-1, \\frac12", Y, "rational roots joined by or"),
            ("-1, 1/2", "x=\\frac12, x=-1", Y, "reference written as assignments"),
            ("x=3", "x=3", Y, "identical assignments"),
            ("x = 4", "4", Y, "assignment to a variable"),
            ("k=7", "7", Y, "assignment to any letter"),
            ("n = 8", "7", N, "wrong value in an assignment"),
            ("x + y = 5", "5", Y, "the left side names the quantity asked for"),
            ("2x = 14", "7", N, "an equation to solve is not its solution"),
            ("a_1 + a_2 = 9", "9", Y, "subscripted variables name the quantity"),
            ("e = 3", "3", N, "e is a constant, not a variable"),
            ("\\sin x = \\frac12", "0.5", Y, "names the quantity, exact value"),
        ],
    ),
    *_group(
        "complex",
        [
            ("3i(1+i)", "-3+3i", Y, "i is the imaginary unit in a product"),
            ("-3+3i", "3i(1+i)", Y, "the same, other direction"),
            ("(2-i)^2", "3-4i", Y, "square of a complex number"),
            ("(2-i)^2", "3+4i", N, "sign of the imaginary part"),
            ("\\sqrt{-4}", "2i", Y, "square root of a negative"),
            ("2i", "\\sqrt{-4}", Y, "the same, other direction"),
            ("\\sqrt{-9}", "3", N, "3i is not 3"),
            ("i^2", "-1", Y, "i squared"),
            ("(1+i)(1-i)", "2", Y, "product of conjugates"),
            ("\\frac{1}{i}", "-i", Y, "reciprocal of i"),
            ("1+2i", "1+2i", Y, "identical"),
            ("1+2i", "2+i", N, "parts swapped"),
            ("\\frac{3+4i}{5}", "\\frac35+\\frac45 i", Y, "split fraction"),
            ("i^3", "i", N, "i cubed is -i"),
            ("2+\\sqrt{-1}", "2+i", Y, "sqrt of -1"),
        ],
    ),
    *_group(
        "trig_exponents",
        [
            ("-\\cos x", "\\cos(180^\\circ - x)", Y, "degrees inside a trig function"),
            ("\\cos(180^\\circ - x)", "-\\cos x", Y, "the same, other direction"),
            ("\\cos x", "\\cos(180^\\circ - x)", N, "missing sign"),
            ("\\sin 30^\\circ", "\\frac12", Y, "sine of degrees"),
            ("\\frac{1}{2}", "\\cos 60^{\\circ}", Y, "cosine of degrees in the reference"),
            ("\\tan 45^\\circ", "1", Y, "tangent of degrees"),
            ("\\sin 30^\\circ", "\\frac{\\sqrt3}{2}", N, "that is sin 60"),
            ("\\sin(90^\\circ + x)", "\\cos x", Y, "shift by a right angle"),
            ("x^{0.5}", "\\sqrt{x}", Y, "decimal exponent"),
            ("\\sqrt{x}", "x^{0.5}", Y, "the same, other direction"),
            ("x^{1.5}", "x\\sqrt{x}", Y, "decimal exponent 1.5"),
            ("2^{0.5}", "\\sqrt{2}", Y, "numeric base"),
            ("x^{0.25}", "\\sqrt{x}", N, "fourth root"),
            ("a^{2.5}b", "a^{5/2}b", Y, "fractional against decimal exponent"),
            ("x^{0.33}", "x^{1/3}", N, "a rounded exponent"),
            ("e^{0.5x}", "e^{x/2}", Y, "decimal coefficient in an exponent"),
            ("30^\\circ", "30", Y, "degrees sign on a bare angle"),
            ("\\frac{\\pi}{6}", "30^\\circ", N, "radians against a degree reference"),
        ],
    ),
    *_group(
        "intervals",
        [
            ("x \\in [1, 2)", "[1,2)", Y, "membership notation"),
            ("[1,2)", "x \\in [1, 2)", Y, "the same, other direction"),
            ("1 \\le x < 2", "[1, 2)", Y, "double inequality"),
            ("[1, 2)", "1 \\le x < 2", Y, "the same, other direction"),
            ("1 \\leq x \\leq 2", "[1,2]", Y, "closed double inequality"),
            ("1 < x \\le 2", "[1,2]", N, "left end open"),
            ("x \\ge 0", "[0, \\infty)", Y, "one-sided inequality"),
            ("[0,\\infty)", "x \\geq 0", Y, "the same, other direction"),
            ("x > 0", "[0,\\infty)", N, "strict against closed"),
            ("x < 3", "(-\\infty, 3)", Y, "upper bound"),
            ("x \\leq -1", "(-\\infty,-1]", Y, "upper bound, closed"),
            ("x > 5", "(5, \\infty)", Y, "strict lower bound"),
            ("x \\in (2, 5]", "(2,5]", Y, "membership, half-open"),
            ("x \\in (2, 5]", "(2,5)", N, "different right end"),
            ("-2 < x < 3", "(-2, 3)", Y, "open double inequality"),
            ("3 > x > -2", "(-2,3)", Y, "inequality written downward"),
            ("0 \\le x", "[0, \\infty)", Y, "variable on the right"),
            ("(-\\infty, 0) \\cup (1, \\infty)", "(-\\infty,0)\\cup(1,\\infty)", Y, "union"),
            ("(1,2)", "[1,2]", N, "open against closed"),
            ("[2, 7]", "2 \\le x \\le 7", Y, "closed interval against inequality"),
        ],
    ),
    *_group(
        "text_forms",
        [
            ("1 1/2", "\\frac32", Y, "plain-text mixed number"),
            ("2 3/4", "2.75", Y, "plain-text mixed number"),
            ("1 1/2", "\\frac{1}{2}", N, "mixed number is not its fraction part"),
            ("3 1/3", "\\frac{10}{3}", Y, "mixed number with a non-terminating value"),
            ("∞", "\\infty", Y, "Unicode infinity"),
            ("−7", "-7", Y, "Unicode minus"),
            ("3×4", "12", Y, "Unicode times"),
            ("√2", "\\sqrt{2}", Y, "Unicode square root"),
            ("2√3", "\\sqrt{12}", Y, "Unicode root with a coefficient"),
            ("√2", "2", N, "root of two is not two"),
            ("5\u200b", "5", Y, "zero-width space"),
            ("1\u00a0000", "1000", Y, "NBSP as a thousands separator"),
            ("\u200b42\u200b", "42", Y, "zero-width spaces around"),
            ("\u00a012", "12", Y, "leading NBSP"),
            ("**42**", "42", Y, "markdown bold"),
            ("*42*", "42", Y, "markdown italics"),
            ("__42__", "42", Y, "markdown underline-bold"),
            ("**41**", "42", N, "wrong value in bold"),
            ("12=y", "12", Y, "equation written backwards"),
            ("12 = x", "x = 12", Y, "backwards against forwards"),
            ("\\frac{1}{2}=x", "0.5", Y, "backwards with a fraction"),
            ("13 = y", "12", N, "backwards with the wrong value"),
            ("π", "\\pi", Y, "Unicode pi"),
            ("‒5", "-5", Y, "figure dash as a minus"),
            ("2π", "2\\pi", Y, "Unicode pi with a coefficient"),
            ("½", "0.5", Y, "Unicode vulgar fraction"),
            ("5 ≤ x", "[5,\\infty)", Y, "Unicode inequality"),
        ],
    ),
    *_group(
        "other_notations",
        [
            ("1011_2", "1011_{2}", Y, "base subscript with and without braces"),
            ("1011", "1011_2", Y, "digits read in the reference's base"),
            ("11", "1011_2", N, "decimal value is not the base-2 numeral"),
            ("1011_{(2)}", "1011_2", Y, "parenthesised base"),
            ("(1011)_2", "1011_2", Y, "parenthesised digits"),
            ("1101_2", "1011_2", N, "different digits"),
            ("212_3", "212_{3}", Y, "base 3"),
            ("212_4", "212_3", N, "same digits, different base"),
            ("A3_{16}", "A3_{16}", Y, "hex digits"),
            ("\\text{1011}_2", "1011_2", Y, "digits in text"),
            ("B, D", "\\text{(D), (B)}", Y, "choice letters, other order and wrapping"),
            ("(B), (D)", "D, B", Y, "parenthesised letters"),
            ("\\text{B and D}", "B, D", Y, "letters joined by and"),
            ("BD", "\\text{(B), (D)}", Y, "letters run together"),
            ("B, C", "B, D", N, "one letter wrong"),
            ("B", "B, D", N, "one of two letters"),
            ("\\textbf{(E)}", "E", Y, "bold parenthesised letter"),
            ("(E)", "\\text{(E)}", Y, "parenthesised letter"),
            ("A, C, E", "\\text{(A), (C), (E)}", Y, "three letters"),
            ("E", "\\text{(D)}", N, "different choice"),
            ("(1, 2, 3)", "\\begin{pmatrix}1\\\\2\\\\3\\end{pmatrix}", Y, "tuple against column"),
            ("\\begin{pmatrix}1\\\\2\\end{pmatrix}", "(1,2)", Y, "column against tuple"),
            ("(2, 1)", "\\begin{pmatrix}1\\\\2\\end{pmatrix}", N, "order of components"),
            ("\\begin{pmatrix}-1\\\\ \\frac12\\end{pmatrix}", "(-1, 0.5)", Y, "exact components"),
            ("(1,2,3)", "\\begin{pmatrix}1\\\\2\\end{pmatrix}", N, "different dimension"),
            ("\\begin{cases}x=1\\\\y=2\\end{cases}", "(1,2)", Y, "a system solved in cases"),
            ("\\begin{cases} x = 1 \\\\ y = 2 \\end{cases}", "x=1, y=2", Y, "cases vs assignments"),
            ("\\begin{cases}x=2\\\\y=1\\end{cases}", "(1,2)", N, "values swapped"),
            ("\\begin{bmatrix}3\\\\4\\end{bmatrix}", "(3,4)", Y, "bmatrix column"),
            ("\\begin{pmatrix}3 & 4\\end{pmatrix}", "(3,4)", Y, "row vector"),
            ("\\left\\langle 2, -1 \\right\\rangle", "(2,-1)", Y, "angle-bracket vector"),
            ("\\langle 1, 2 \\rangle", "(2,1)", N, "vector components swapped"),
        ],
    ),
    *_group(
        "thousands_separator",
        [
            ("4,567", "4567", Y, "groups of three after the comma"),
            ("4567", "4,567", Y, "the same, other direction"),
            ("1,234,567", "1234567", Y, "two groups"),
            ("45, 678", "45678", N, "a space after the comma: a two-item list"),
            ("4, 567", "4567", N, "a list of 4 and 567"),
            ("45,67", "4567", N, "a group of two digits is not a separator"),
            ("4,5678", "45678", N, "a group of four digits"),
            ("1,2", "12", N, "a list of two numbers"),
            ("12,345.5", "12345.5", Y, "separator with decimals"),
            ("4567", "4, 567", N, "the reference is a list"),
            ("4, 567", "4, 567", Y, "identical lists"),
            ("567, 4", "4, 567", Y, "a list in another order"),
            ("1{,}000", "1000", Y, "braced comma separator"),
            ("1\\,000", "1000", Y, "thin-space separator"),
            ("10 000", "10000", Y, "space separator"),
            ("1,000", "1", N, "not a decimal comma"),
            ("2, 3", "23", N, "two numbers"),
        ],
    ),
    *_group(
        "percent",
        [
            ("0.25", "25\\%", N, "a bare number is read in the reference's unit: 0.25%"),
            ("25", "25\\%", Y, "bare number in the reference's unit"),
            ("25\\%", "25\\%", Y, "same percent"),
            ("25\\%", "25", Y, "percent sign where the reference dropped it"),
            ("25\\%", "0.25", Y, "percent against its fraction"),
            ("\\frac14", "25\\%", N, "a fraction against a percent reference"),
            ("25 percent", "25\\%", Y, "the word percent"),
            ("2.5\\%", "25\\%", N, "a tenth of it"),
            ("12.5", "12.5\\%", Y, "decimal percent value"),
            ("50%", "50\\%", Y, "plain percent sign"),
            ("5\\%", "0.5", N, "5% is 0.05"),
            ("50\\%", "0.5", Y, "50% is one half"),
            ("40\\%", "\\frac{2}{5}", Y, "percent against a fraction"),
            ("\\frac{2}{5}", "40\\%", N, "fraction read as 2/5 percent"),
        ],
    ),
    *_group(
        "hedges_and_words",
        [
            ("7\\text{ or more}", "7", N, "a hedge"),
            ("3 \\text{ (or four)}", "3", N, "a second candidate in brackets"),
            ("at least 5", "5", N, "a bound is not a value"),
            ("about 12", "12", N, "an approximation"),
            ("9\\text{ is wrong}", "9", N, "the answer negates the value"),
            ("9\\text{ is incorrect}", "9", N, "negated value"),
            ("\\text{not } 9", "9", N, "negated value"),
            ("5 thousand", "5", N, "multiplier word changes the value"),
            ("5 thousand", "5000", Y, "thousand multiplies the value: 5000"),
            ("12 dozen", "12", N, "multiplier word"),
            ("9 squared", "9", N, "squared changes the value"),
            ("3 halves", "3", N, "halves changes the value"),
            ("7 tenths", "7", N, "tenths changes the value"),
            ("4\\text{ pi}", "4", N, "pi as a word changes the value"),
            ("3\\mathrm{i}", "3", N, "i changes the value"),
            ("5 million", "5", N, "multiplier word"),
            ("13 = 12", "12", N, "a false equation"),
            ("\\text{not } 12 = 12", "12", N, "negated equation"),
            ("x = 12", "12", Y, "an assignment is fine"),
            ("12 = 12", "12", Y, "a true equation of the value"),
            ("20 - 8 = 12", "12", Y, "a true calculation ending in the value"),
            ("20 - 7 = 12", "12", N, "a false calculation"),
            ("approximately 3.14", "\\pi", N, "an approximation of pi"),
            ("12 or 13", "12", N, "two candidates"),
            ("either 4 or 5", "4", N, "a hedge"),
            ("maybe 6", "6", N, "a hedge"),
            ("6 (probably)", "6", N, "a hedge"),
            ("6 \\text{ cubed}", "6", N, "cubed changes the value"),
            ("The answer is 6", "6", Y, "an answer phrase is wrapping"),
            ("6 \\text{ ways}", "6", Y, "a plain unit word"),
            ("6\\text{ students}", "6", Y, "a plain unit word"),
            ("\\text{less than } 6", "6", N, "a bound"),
            ("6\\text{ or fewer}", "6", N, "a hedge"),
            ("neither", "6", N, "a word against a number"),
            ("5 hundred", "500", Y, "hundred multiplies the value: 500"),
            ("7 \\text{ (tens)}", "7", N, "tens changes the value"),
            ("\\theta = 30^\\circ", "30", Y, "assignment to a Greek letter"),
            ("\\pi = 3", "3", N, "pi is not a variable: a false equation"),
        ],
    ),
    *_group(
        "numbers",
        [
            ("72", "72", Y, "identical integers"),
            ("72.0", "72", Y, "trailing zero decimal"),
            ("72.00", "72", Y, "two trailing zeros"),
            ("\\$72", "72", Y, "escaped dollar"),
            ("$72", "72", Y, "math delimiter"),
            ("72 dollars", "72", Y, "currency word"),
            ("\\boxed{72}", "72", Y, "boxed"),
            ("072", "72", Y, "AIME leading zero"),
            ("007", "7", Y, "two leading zeros"),
            ("72", "27", N, "digits swapped"),
            ("72", "720", N, "extra zero"),
            ("7.2", "72", N, "decimal point"),
            ("-5", "5", N, "sign"),
            ("+5", "5", Y, "explicit plus sign"),
            ("0.5", "\\frac12", Y, "terminating decimal"),
            ("\\dfrac{1}{2}", "0.5", Y, "dfrac"),
            ("1/2", "\\frac{1}{2}", Y, "slash fraction"),
            ("\\frac{2}{4}", "\\frac12", Y, "unreduced fraction"),
            ("0.33", "\\frac13", N, "rounded decimal"),
            ("0.333", "\\frac{1}{3}", N, "rounded decimal"),
            ("0.\\overline{3}", "\\frac13", Y, "repeating decimal"),
            ("0.1\\overline{6}", "\\frac16", Y, "repeating block after a digit"),
            ("0.67", "\\frac23", N, "rounded decimal"),
            ("1.5e3", "1500", Y, "scientific notation"),
            ("1.5\\times 10^3", "1500", Y, "times ten to the third"),
            ("1.5\\times 10^{4}", "1500", N, "wrong exponent"),
            ("2\\frac{1}{2}", "\\frac52", Y, "LaTeX mixed number"),
            ("-\\frac{3}{4}", "-0.75", Y, "negative fraction"),
            ("\\frac{-3}{4}", "-\\frac34", Y, "sign in the numerator"),
            ("\\frac{3}{-4}", "-0.75", Y, "sign in the denominator"),
            ("seven", "7", Y, "number word"),
            ("twelve", "12", Y, "number word"),
            ("six", "7", N, "wrong number word"),
            ("18.", "18", Y, "sentence period"),
            ("1000000", "10^6", Y, "power of ten"),
            ("10^{6}", "1,000,000", Y, "power against separated digits"),
            ("2^{10}", "1024", Y, "power of two"),
            ("5!", "120", Y, "factorial"),
            ("\\binom{5}{2}", "10", Y, "binomial"),
            ("\\frac{100}{3}", "33.33", N, "rounded"),
            ("33\\frac{1}{3}", "\\frac{100}{3}", Y, "mixed number"),
            ("3.50", "3.5", Y, "trailing zero"),
            ("0", "-0", Y, "signed zero"),
            ("1e3", "100", N, "wrong power"),
            ("0.1", "\\frac{1}{9}", N, "0.1 is not 1/9"),
        ],
    ),
    *_group(
        "symbolic",
        [
            ("\\frac{\\sqrt{2}}{2}", "\\frac{1}{\\sqrt{2}}", Y, "rationalised denominator"),
            ("2\\sqrt{3}", "\\sqrt{12}", Y, "simplified root"),
            ("\\sqrt{12}", "3\\sqrt{2}", N, "different root"),
            ("(x+1)^2", "x^2+2x+1", Y, "expanded square"),
            ("(x+1)^2", "x^2+1", N, "missing middle term"),
            ("\\frac{\\pi}{4}", "\\frac14\\pi", Y, "coefficient placement"),
            ("\\sqrt[3]{8}", "2", Y, "cube root"),
            ("3\\pi", "3 \\pi", Y, "spacing"),
            ("\\pi", "3.14159", N, "rounded pi"),
            ("\\sqrt{2}", "1.414", N, "rounded root"),
            ("1.414", "\\sqrt2", N, "rounded root, other direction"),
            ("x+y", "y+x", Y, "commutativity"),
            ("x+1", "y+1", N, "different variable"),
            ("\\frac{x^2-1}{x-1}", "x+1", Y, "cancelled factor"),
            ("\\log 8", "3\\log 2", Y, "log power rule"),
            ("\\frac{1}{x}", "x^{-1}", Y, "negative exponent"),
            ("\\sin^2 x + \\cos^2 x", "1", Y, "Pythagorean identity"),
            ("2\\sin x\\cos x", "\\sin 2x", Y, "double angle"),
            ("\\sqrt{x^2}", "x", N, "absolute value"),
            ("|x|", "x", N, "absolute value"),
            ("6-2\\sqrt5", "(\\sqrt5-1)^2", Y, "expanded square of a surd"),
            ("\\frac{3\\sqrt3}{2}", "\\frac{3}{2}\\sqrt3", Y, "coefficient placement"),
            ("\\frac{3\\sqrt3}{2}", "\\frac{2}{3}\\sqrt3", N, "inverted coefficient"),
            ("2^{1/2}", "\\sqrt2", Y, "fractional exponent"),
            ("e^{2}", "e^2", Y, "braced exponent"),
            ("\\ln(e^3)", "3", Y, "log of a power of e"),
            ("\\frac{\\sqrt{6}}{3}", "\\sqrt{\\frac{2}{3}}", Y, "root of a fraction"),
            ("10\\sqrt{2}", "\\sqrt{200}", Y, "root of 200"),
            ("4\\pi r^2", "4 \\pi r^{2}", Y, "formula"),
            ("\\frac{1}{2}x", "\\frac{x}{2}", Y, "coefficient"),
            ("x^2-4", "(x-2)(x+2)", Y, "factored form"),
            ("x^2-4", "(x-2)^2", N, "wrong factorisation"),
            ("\\frac{7}{\\sqrt{7}}", "\\sqrt{7}", Y, "rationalisation"),
            ("\\infty", "\\infty", Y, "infinity"),
            ("-\\infty", "\\infty", N, "sign of infinity"),
            ("\\frac{\\sqrt{3}}{3}", "\\frac{1}{\\sqrt3}", Y, "tan 30 forms"),
            ("\\frac{\\sqrt{3}}{2}", "\\frac{\\sqrt{2}}{2}", N, "different roots"),
            ("3x+2y", "2y+3x", Y, "reordered terms"),
            ("2(x+3)", "2x+6", Y, "distributed"),
            ("2(x+3)", "2x+3", N, "not distributed"),
            ("\\sum_{k=1}^{3} k", "6", Y, "the bound k=1 is not an equation"),
            ("\\sum_{k=1}^{4} k", "6", N, "the sum is 10"),
        ],
    ),
    *_group(
        "structures",
        [
            ("(3, -4)", "\\left( 3, -4 \\right)", Y, "sized brackets"),
            ("(0.5, 2)", "(\\frac12, 2)", Y, "exact components"),
            ("(1, 2)", "(2, 1)", N, "ordered pair"),
            ("\\{1, 2, 3\\}", "3, 2, 1", Y, "set against a list"),
            ("1, 2, 3", "3,1,2", Y, "list order"),
            ("\\{1, 2\\}", "\\{1, 2, 3\\}", N, "missing element"),
            ("1, 2", "1, 2, 2", N, "multiset count"),
            ("(1, 2)", "3", N, "pair against a number"),
            ("[1, 2]", "(1, 2)", N, "closed against open"),
            ("[1, 2)", "[1,2)", Y, "half-open"),
            ("\\{-1, \\frac12\\}", "0.5, -1", Y, "set against a list"),
            ("(\\sqrt2, 1)", "(\\frac{2}{\\sqrt2}, 1)", Y, "symbolic component"),
            ("(1,2,3)", "(1,2)", N, "arity"),
            ("\\emptyset", "\\varnothing", Y, "empty set spellings"),
            ("\\{\\}", "\\emptyset", Y, "empty braces"),
            (
                "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}",
                "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}",
                Y,
                "matrix",
            ),
            (
                "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}",
                "\\begin{pmatrix}1&3\\\\2&4\\end{pmatrix}",
                N,
                "transpose",
            ),
            ("(-2, 3)", "(-2,3)", Y, "spacing"),
            ("(1, -1)", "(1, 1)", N, "sign of a component"),
            ("\\{2\\}", "2", Y, "one-element set of the value"),
        ],
    ),
    *_group(
        "words",
        [
            ("\\text{(C)}", "C", Y, "wrapped letter"),
            ("(c)", "\\text{C}", Y, "lower-case letter"),
            ("\\textbf{Monday}", "monday", Y, "bold word"),
            ("Even", "\\text{even}", Y, "case"),
            ("\\text{Tuesday}", "Monday", N, "different word"),
            ("B", "\\text{(C)}", N, "different letter"),
            ("odd", "7", N, "word against a number"),
            ("yes", "\\text{Yes}", Y, "case"),
            ("no", "\\text{yes}", N, "opposite word"),
            ("\\text{no solution}", "\\text{No solution}", Y, "phrase"),
            ("no solution", "\\text{No solution}", Y, "the same words without a text command"),
            ("18", "Janet makes $18 every day.", Y, "a sentence as the reference (maj@k votes)"),
            ("20", "Janet makes $18 every day.", N, "another value than the sentence states"),
        ],
    ),
]

# --------------------------------------------------------------- classes of held-out misses
# Spellings and forms that peer graders' suites use and that this checker once missed or
# misjudged: other relation spellings, ",\!" separators, lists of boxes, chains of
# equalities, units after pi, left sides naming different functions, values closer than 1e-6,
# and the exploit classes (units of the same quantity, percent bases, operations in words,
# Euler's e, congruences).
PAIRS += [
    *_group(
        "relations",
        [
            ("x \\lt 3", "(-\\infty, 3)", Y, "\\lt is <"),
            ("x <= 2", "(-\\infty,2]", Y, "ASCII <="),
            ("x >= -1", "[-1,\\infty)", Y, "ASCII >="),
            ("x \\gt 3", "(3, \\infty)", Y, "\\gt is >"),
            ("x \\leqslant 4", "x \\le 4", Y, "another package's spelling"),
            ("x != 5", "(-\\infty,5)\\cup(5,\\infty)", Y, "!= is the set without 5"),
            ("x \\neq 5", "x \\ne 5", Y, "two spellings of not-equal"),
            ("x != 5", "5", N, "not-equal is not the value"),
            ("-x > -1", "x < 1", Y, "divided by -1, the relation flips"),
            ("-x > -1", "x > 1", N, "the flip is required"),
            ("2x + 1 \\le 7", "x \\le 3", Y, "a linear inequality solved"),
            ("3 - x > 1", "(-\\infty, 2)", Y, "solved for x"),
            ("-2x \\ge 4", "(-\\infty, -2]", Y, "negative coefficient"),
            ("-2x \\ge 4", "[-2, \\infty)", N, "the wrong direction"),
            ("-1 < 2x + 1 < 5", "(-1, 2)", Y, "a double inequality solved"),
            ("-1 < 2x + 1 < 5", "(-1, 3)", N, "wrong end"),
            ("x \\lt 3", "x \\le 3", N, "strict against closed"),
            ("x < -2 \\text{ or } x > 2", "(-\\infty,-2)\\cup(2,\\infty)", Y, "a union"),
            ("x \\le -1 \\text{ or } x \\ge 3", "(-\\infty,-1)\\cup(3,\\infty)", N, "closed ends"),
        ],
    ),
    *_group(
        "separators",
        [
            ("\\$1,\\!000", "1000", Y, "escaped dollar and ,\\! separator"),
            ("1,\\!234,\\!567", "1234567", Y, "two ,\\! separators"),
            ("\\$12,\\!345.67", "12345.67", Y, "separator and cents"),
            ("1,\\!000", "100", N, "a thousand is not a hundred"),
            ("\\$1,\\!250", "\\$1,250", Y, "both with dollars"),
        ],
    ),
    *_group(
        "lists",
        [
            ("\\boxed{1}, \\boxed{2}, and \\boxed{3}", "1, 2, 3", Y, "boxes with a serial comma"),
            ("1, 2, and 3", "3, 2, 1", Y, "a serial comma"),
            ("1, 2 and 3", "\\{1, 2, 3\\}", Y, "and before the last item"),
            ("2 and 5", "\\{2, 5\\}", Y, "two values joined by and"),
            ("\\boxed 3, \\boxed 4", "3, 4", Y, "boxes without braces"),
            ("\\boxed 3 or \\boxed 4", "4", N, "a hedge between two unbraced boxes"),
            ("\\boxed3 \\text{ or } \\boxed4", "3", N, "the same without spaces"),
            ("1, 2, and 3", "1, 2", N, "one item too many"),
        ],
    ),
    *_group(
        "chains",
        [
            ("x = 2 + 3 = 5", "5", Y, "a chain ending in the value"),
            ("P = 2(7) + 2(4) = 22", "22", Y, "formula, substitution, value"),
            ("A = \\pi r^2 = \\pi (3)^2 = 9\\pi", "9\\pi", Y, "a formula is not checked"),
            ("16 - 3 - 4 = 9", "9", Y, "arithmetic that holds"),
            ("16 - 3 - 4 = 8", "8", N, "arithmetic that does not"),
            ("x = 2 + 3 = 6", "6", N, "a false step"),
            ("5! = 120", "120", Y, "a factorial, not !="),
            ("\\binom{6}{2} = 15", "15", Y, "a binomial"),
            ("5 + 7 = 12 \\text{ apples}", "12", Y, "a unit on the last side"),
            ("5 + 7 = 13 \\text{ apples}", "13", N, "a false step with a unit"),
            ("2(5)", "10", Y, "a number before a bracket multiplies"),
            ("2(5)", "7", N, "never a sum"),
        ],
    ),
    *_group(
        "pi_units",
        [
            ("4\\pi \\text{ cm}^2", "4\\pi", Y, "a unit after pi"),
            ("10\\pi cm", "10\\pi", Y, "a plain unit word after pi"),
            ("10\\pi \\text{ inches}", "10\\pi\\text{ in}", Y, "inches and in"),
            ("\\frac{9\\pi}{2} \\text{ units}^2", "\\frac{9\\pi}{2}", Y, "a fraction of pi"),
            ("10\\pi cm", "10\\pi \\text{ m}", N, "centimetres against metres"),
            ("10 cm", "10\\pi", N, "pi dropped"),
        ],
    ),
    *_group(
        "named_functions",
        [
            ("\\cos x = \\frac12", "\\sin x = \\frac12", N, "a different function on the left"),
            ("\\tan x = 1", "\\cot x = 1", N, "a different function on the left"),
            ("\\log x = 2", "\\ln x = 2", N, "a different logarithm"),
            ("\\sin(x) = \\frac12", "\\sin x = \\frac12", Y, "brackets around the argument"),
            ("g(x) = x^2", "f(x) = x^2", Y, "function names are labels"),
            ("x + y = 5", "y + x = 5", Y, "the same sum"),
            ("x - y = 5", "y - x = 5", N, "a different difference"),
        ],
    ),
    *_group(
        "near_misses",
        [
            ("\\frac{\\pi}{10^{20}}", "\\frac{2\\pi}{10^{20}}", N, "tiny but different"),
            ("(1, \\frac{\\pi}{10^{20}})", "(1, \\frac{2\\pi}{10^{20}})", N, "in a tuple"),
            ("\\{1, \\frac{\\pi}{10^{20}}\\}", "\\{1, \\frac{3\\pi}{10^{20}}\\}", N, "in a set"),
            ("\\frac{\\pi}{10^{12}}", "0", N, "tiny is not zero"),
            ("10^{-10}", "10^{-11}", N, "exact values compare exactly"),
            ("1.0000001", "1", N, "a near miss"),
            ("\\sqrt{10^{12}+1}-10^6", "\\frac{1}{\\sqrt{10^{12}+1}+10^6}", Y, "equal, and tiny"),
            ("\\frac{\\pi}{10^{20}}", "\\frac{3\\pi}{3 \\cdot 10^{20}}", Y, "equal tiny values"),
        ],
    ),
    *_group(
        "congruences",
        [
            ("x \\equiv 2 \\pmod 5", "2", Y, "the residue"),
            ("17 \\equiv 2 \\pmod{5}", "2", Y, "a true congruence ending in the residue"),
            ("2^{10} \\equiv 4 \\pmod 5", "4", Y, "a power"),
            ("n \\equiv 3 \\ (\\text{mod } 7)", "3", Y, "(mod 7) spelled in text"),
            ("13 \\equiv 12", "12", N, "without a modulus it is an equality, and false"),
            ("5 \\equiv 12 \\pmod 7", "12", N, "12 is not the least residue"),
            ("13 \\equiv 12 \\pmod 1", "12", N, "everything is congruent modulo 1"),
            ("x \\equiv 2 \\pmod 5", "7", N, "a residue class is not 7"),
            ("2^{10} \\equiv 3 \\pmod 5", "3", N, "a false congruence"),
        ],
    ),
    *_group(
        "changed_units",
        [
            ("30 \\text{ radians}", "30^\\circ", N, "radians against degrees"),
            ("30 rad", "30^\\circ", N, "radians against degrees"),
            ("30", "30^\\circ", Y, "a bare number in the reference's unit"),
            ("30 degrees", "30^\\circ", Y, "degrees spelled out"),
            ("18 cents", "\\$18", N, "cents against dollars"),
            ("18", "\\$18", Y, "a bare number in the reference's unit"),
            ("18 dollars", "\\$18", Y, "dollars spelled out"),
            ("5 percentage points", "5\\%", N, "points against percent"),
            ("0.25\\%", "0.25", N, "a percent of the wrong base"),
            ("25\\%", "\\frac{1}{4}", Y, "the percent of the fraction"),
            ("50\\%", "50", Y, "the sign dropped by the dataset"),
            ("2000\\%", "20", N, "a percent of the wrong base: 20 reads as 20%"),
            ("4 to the power of 2", "4", N, "an operation in words"),
        ],
    ),
    *_group(
        "operations",
        [
            ("4 factorial", "4", N, "an operation in words"),
            ("4\\text{ factorial}", "24", N, "words are not evaluated"),
            ("6 doubled", "6", N, "an operation in words"),
            ("3 sevenths", "3", N, "a fraction word"),
            ("5\\mathrm{e}", "5", N, "Euler's e glued to a number"),
            ("5\\text{e}", "5", N, "Euler's e in text"),
            ("4!", "24", Y, "the factorial sign is evaluated"),
            ("7 thousand", "7000", Y, "a number word that scales"),
        ],
    ),
    *_group(
        "sentences",
        [
            ("Janet makes $18 every day at the farmers' market.", "18", Y, "one value stated"),
            ("In 18 days, Janet collects 25 eggs.", "18", N, "18 is context"),
            ("Janet makes about $18 every day.", "18", N, "a hedge"),
            ("Janet does not make $18 every day.", "18", N, "a negation"),
            ("Janet makes $18 or $20 every day.", "18", N, "two candidates"),
            ("The value of $x$ is $\\frac{3}{4}$.", "0.75", Y, "one value stated"),
        ],
    ),
]

# --------------------------------------------------------------- generated families
# Hand-chosen values across the common GSM8K and MATH answer shapes: each family states once
# why its label holds, and every member is a distinct pair.


def _family(kind: str, why: str, rows: list[tuple[str, str, bool]]) -> list[Pair]:
    return [Pair(a, r, eq, kind, why) for a, r, eq in rows]


_VALUES = ["3", "17", "42", "105", "999", "2024", "0", "-8"]
PAIRS += _family(
    "numbers",
    "an integer with a trailing unit word is the integer",
    [(f"{v} \\text{{ marbles}}", v, Y) for v in _VALUES],
)
PAIRS += _family(
    "numbers",
    "an integer off by one is wrong, with or without a unit",
    [(f"{int(v) + 1} \\text{{ marbles}}", v, N) for v in _VALUES],
)
PAIRS += _family(
    "thousands_separator",
    "a comma followed by a space separates list items, never thousands",
    [(f"{a}, {b}", f"{a}{b}", N) for a, b in [("12", "500"), ("7", "250"), ("98", "765")]]
    + [(f"{a},{b}", f"{a}{b}", Y) for a, b in [("12", "500"), ("7", "250"), ("98", "765")]],
)
PAIRS += _family(
    "percent",
    "a bare fraction of one against a percent reference is read as that many percent",
    [(f"0.{p}", f"{p}\\%", N) for p in ("10", "35", "60", "75", "90")]
    + [(p, f"{p}\\%", Y) for p in ("10", "35", "60", "75", "90")],
)
PAIRS += _family(
    "several_boxes",
    "two boxes against one value are a second candidate",
    [(f"\\boxed{{{v}}} \\text{{ or }} \\boxed{{{int(v) + 2}}}", v, N) for v in _VALUES[:6]],
)
PAIRS += _family(
    "units",
    "a time unit differs from the reference's time unit",
    [
        (f"{n} {u}", f"{n}\\text{{ {ref}}}", N)
        for n, u, ref in [
            ("4", "seconds", "minutes"),
            ("2", "days", "weeks"),
            ("6", "months", "years"),
            ("8", "minutes", "seconds"),
        ]
    ],
)
PAIRS += _family(
    "units",
    "a length unit differs from the reference's length unit",
    [
        (f"{n} {u}", f"{n}\\text{{ {ref}}}", N)
        for n, u, ref in [("3", "km", "m"), ("10", "mm", "cm"), ("7", "feet", "inches")]
    ],
)
PAIRS += _family(
    "hedges_and_words",
    "a multiplier word changes the value",
    [(f"{n} {w}", n, N) for n, w in [("2", "thousand"), ("6", "dozen"), ("4", "billion")]],
)
PAIRS += _family(
    "complex",
    "i is the imaginary unit: a product or power of complex numbers",
    [
        ("(1+i)^2", "2i", Y),
        ("(1+i)^2", "2", N),
        ("i(2+i)", "-1+2i", Y),
        ("(3+2i)(3-2i)", "13", Y),
        ("(3+2i)(3-2i)", "5", N),
    ],
)
PAIRS += _family(
    "intervals",
    "an inequality is the interval it describes, in both directions",
    [
        ("x \\ge 2", "[2,\\infty)", Y),
        ("[2,\\infty)", "x\\ge2", Y),
        ("x\\ge2", "(2,\\infty)", N),
        ("-1 \\le x \\le 1", "[-1,1]", Y),
        ("[-1,1]", "-1\\le x\\le 1", Y),
        ("-1 < x \\le 1", "[-1,1]", N),
    ],
)
# The classes an evaluation set outside these corpora found, each with answers the grader accepts
# beside the ones it refuses.
PAIRS += [
    *_group(
        "tolerance",
        [
            ("2^{-60}", "2^{-60}+2^{-120}", N, "tiny values that differ by 2^{-120}"),
            ("\\frac{1}{100!}+\\frac{1}{\\pi}", "\\frac{1}{101!}+\\frac{1}{\\pi}", N, "1/100!"),
            ("\\sqrt{10^{40}+1}", "10^{20}", N, "huge values that differ by 5e-21"),
            ("\\ln(10^{30}+1)", "30\\ln 10", N, "a logarithm that differs by 1e-30"),
            ("2^{100}x", "(2^{100}+1)x", N, "powers that differ by one"),
            ("3^{200}\\pi", "(3^{200}+1)\\pi", N, "powers that differ by one"),
            (
                "\\begin{pmatrix}e^{-100}&1\\\\0&1\\end{pmatrix}",
                "\\begin{pmatrix}e^{-101}&1\\\\0&1\\end{pmatrix}",
                N,
                "a matrix entry that differs",
            ),
            ("\\frac{2}{100!}", "\\frac{1}{50\\cdot 99!}", Y, "the same tiny value"),
            ("2^{100}x+x", "(2^{100}+1)x", Y, "the same huge coefficient"),
            ("e^{-100}\\cdot e^{-1}", "e^{-101}", Y, "the same tiny value"),
            ("\\sqrt{10^{40}}", "10^{20}", Y, "the same huge value"),
        ],
    ),
    *_group(
        "qualifying_words",
        [
            ("18 \\text{ was rejected}", "18", N, "the value is rejected"),
            ("18 \\text{ is too high}", "18", N, "the value is called too high"),
            ("18 \\text{ is only part of it}", "18", N, "the value is a part"),
            ("18 is a lower bound.", "18", N, "the value is a bound"),
            ("18, which is too high", "18", N, "the value is called too high"),
            ("18 \\text{ (subtotal)}", "18", N, "the value is a subtotal"),
            ("18 was discarded.", "18", N, "the value is discarded"),
            ("18 \\text{ is the final answer}", "18", Y, "the value is affirmed"),
            ("18 is correct.", "18", Y, "the value is affirmed"),
            ("$18 is her daily profit.", "18", Y, "the value is named"),
        ],
    ),
    *_group(
        "false_restatement",
        [
            ("13 \\text{ (that is, 12)}", "12", N, "a wrong value with the right one claimed"),
            ("13, i.e., 12", "12", N, "a wrong value with the right one claimed"),
            ("13 (in other words, 12)", "12", N, "a wrong value with the right one claimed"),
            ("13 (namely 12)", "12", N, "a wrong value with the right one claimed"),
            ("12 \\text{ (that is, 13)}", "12", N, "the right value, then a wrong one"),
            ("$\\frac{1}{2}$ (that is, 0.5)", "0.5", Y, "one value twice"),
            ("12, i.e. twelve", "12", Y, "one value twice"),
            ("0.75 \\text{ (that is, } \\frac{3}{4})", "\\frac34", Y, "one value twice"),
        ],
    ),
    *_group(
        "of_noun_phrase",
        [
            ("The company made a profit of \\$5,000.", "5000", Y, "the profit's value"),
            ("She bought a total of 12 eggs.", "12", Y, "the total's value"),
            ("The train has an average speed of 60 mph.", "60", Y, "the speed's value"),
            ("The tank has a capacity of 240 liters.", "240", Y, "the capacity's value"),
            ("It leaves a remainder of 3.", "3", Y, "the remainder's value"),
            ("It is a third of 36.", "36", N, "36 is an operand"),
            ("x is a multiple of 6.", "6", N, "6 is an operand"),
            ("The answer is the reciprocal of 42.", "42", N, "42 is an operand"),
            ("The company made a profit of \\$5,000.", "500", N, "another value"),
        ],
    ),
    *_group(
        "infinitive_object",
        [
            ("She needs to pay \\$64 for 16 cups.", "64", Y, "the object of the infinitive"),
            ("They need to buy 12 chairs for the 4 tables.", "12", Y, "the infinitive's object"),
            ("She wants to save \\$300 in 6 months.", "300", Y, "the infinitive's object"),
            ("She needs to pay \\$64 for 16 cups.", "16", N, "16 locates the value"),
            ("They need to buy 12 chairs for the 4 tables.", "4", N, "4 locates the value"),
            ("She wants to save \\$300 in 6 months.", "6", N, "6 locates the value"),
        ],
    ),
    *_group(
        "json",
        [
            ('{"answer": 42}', "42", Y, "one JSON member holds the answer"),
            ('{"final_answer": "\\\\frac{1}{2}"}', "0.5", Y, "a JSON string holds LaTeX"),
            ('```json\n{"answer": 18}\n```', "18", Y, "JSON in a code fence"),
            ('{"answer": [2, 3]}', "2, 3", Y, "a JSON list of roots"),
            ('{"answer": 40}', "42", N, "another value"),
            ('{"answer": 42, "alternative": 40}', "42", N, "a second candidate"),
            ('{"answers": [40, 42]}', "42", N, "two candidates"),
        ],
    ),
    *_group(
        "math_thousands",
        [
            ("10,\\! 000", "10000", Y, "MATH's separator, a space after it"),
            ("(1,\\!000, 2)", "(1000, 2)", Y, "a separator inside a tuple"),
            ("1,\\!000,\\!000", "10^6", Y, "two separators"),
            ("\\{1{,}000, 5\\}", "\\{5, 1000\\}", Y, "the {,} separator inside a set"),
            ("(1,\\!000, 2)", "(1, 0, 2)", N, "one number, not two"),
            ("2,\\!500", "25", N, "another value"),
        ],
    ),
    *_group(
        "percent_words",
        [
            ("25 pct", "25\\%", Y, "pct is percent"),
            ("25 pct.", "25\\%", Y, "pct. is percent"),
            ("25 per cent", "25\\%", Y, "per cent is percent"),
            ("25 percentage", "25\\%", Y, "percentage is percent"),
            ("25\\text{ pct}", "0.25", Y, "25 percent is a quarter"),
            ("5 pct points", "5\\%", N, "points are another unit"),
            ("25 pct", "2.5\\%", N, "another value"),
            ("0.25 pct", "0.25", N, "a percent of the wrong base"),
        ],
    ),
    *_group(
        "spaced_boxes",
        [
            ("\\boxed{2}\\quad\\boxed{3}", "2, 3", Y, "boxes separated by \\quad"),
            ("\\boxed{2} \\\\ \\boxed{3}", "\\{2,3\\}", Y, "boxes on two lines"),
            ("\\boxed{2}\\text{, }\\boxed{3}", "2, 3", Y, "a comma in text between boxes"),
            ("\\boxed{2}\\,\\boxed{3}", "2,3", Y, "a thin space between boxes"),
            ("$\\boxed{2}$ \\qquad $\\boxed{3}$", "2, 3", Y, "\\qquad between boxes"),
            ("\\boxed{3}\\quad\\boxed{4}", "4", N, "two candidates for one value"),
            ("\\boxed{2}\\quad\\boxed{3}", "2, 3, 5", N, "a missing item"),
        ],
    ),
    *_group(
        "trig_identities",
        [
            ("\\cot^2 x", "\\csc^2 x - 1", Y, "a Pythagorean identity"),
            ("\\tan x + \\cot x", "2\\csc 2x", Y, "a double-angle identity"),
            ("\\sec^2(x)", "1+\\tan^2(x)", Y, "a power of a function applied to a bracket"),
            ("\\tan\\frac{x}{2}", "\\frac{1-\\cos x}{\\sin x}", Y, "a half-angle identity"),
            ("\\log_2(8)", "3", Y, "a function with a base applied to a bracket"),
            ("\\cot^2 x", "\\csc^2 x", N, "off by one"),
            ("\\sec^2(x)", "\\tan^2(x)", N, "off by one"),
            ("\\tan x + \\cot x", "\\csc 2x", N, "off by a factor of two"),
        ],
    ),
    *_group(
        "doubled_backslash",
        [
            ("\\\\boxed{5}", "5", Y, "a doubled backslash before boxed"),
            ("The answer is \\\\boxed{18}.", "18", Y, "a doubled backslash in a sentence"),
            ("$\\\\boxed{\\\\frac{1}{2}}$", "\\frac12", Y, "doubled before two commands"),
            ("\\\\boxed{5}", "6", N, "another value"),
            ("\\\\boxed{3} or \\\\boxed{4}", "4", N, "two candidates"),
        ],
    ),
]

# --------------------------------------------------------------- classes other graders' suites show
# Each class is decided by one rule of the pipeline (the rule named in ``why``), right and wrong.
PAIRS += [
    *_group(
        "percent_word_after_math",
        [
            ("$28$ percent", "28\\%", Y, "normalize: percent words read after $…$ is gone"),
            ("\\boxed{28} pct", "28\\%", Y, "normalize: percent words after a box"),
            ("$28$ per cent", "0.28", Y, "numbers: a percent against a fraction of one"),
            ("$28$ percent", "0.028", N, "numbers: 28% is not 0.028"),
            ("$2.8$ percent", "28\\%", N, "numbers: another percent"),
        ],
    ),
    *_group(
        "several_boxes",
        [
            ("\\{1, -2\\}", "\\boxed{1} and \\boxed{-2}", Y, "extract: boxes joined by and"),
            ("\\boxed{1}, \\boxed{-2}", "\\{-2, 1\\}", Y, "compare: a list against a set"),
            ("\\{1, 2\\}", "\\boxed{1} and \\boxed{-2}", N, "compare: another item"),
            ("\\boxed{1}, \\boxed{-2}", "\\{1\\}", N, "compare: one item too many"),
        ],
    ),
    *_group(
        "labelled_parts",
        [
            ("(a) 3, (b) 5", "3, 5", Y, "notation.labelled_parts: parts in order"),
            ("\\text{(a) } 3, \\text{ (b) } 5", "3, 5", Y, "notation.labelled_parts: in text"),
            ("(a) 3; (b) 5", "(a) 3, (b) 5", Y, "notation.labelled_parts: ; between parts"),
            ("(i) 2 (ii) 7", "(2, 7)", Y, "notation.labelled_parts: roman labels"),
            ("(a) 5, (b) 3", "(a) 3, (b) 5", N, "compare: parts answer in order"),
            ("(a) 5 (b) 3", "3, 5", N, "compare: parts against a list, in order"),
            ("(a) 3 (b) 5", "8", N, "compare: two parts against one value"),
            ("(b) 5, (a) 3", "(a) 3, (b) 5", Y, "notation.labelled_parts: written out of order"),
            ("(b) 5; (a) 3", "3, 5", Y, "notation.labelled_parts: in label order, not places"),
            ("(b) 3, (a) 5", "(a) 3, (b) 5", N, "notation.labelled_parts: labels say the part"),
            ("(b) 3, (a) 5", "3, 5", N, "notation.labelled_parts: labels, not places"),
            ("(a) 3, (c) 5", "(a) 3, (b) 5", N, "values: labels with a gap are no parts"),
        ],
    ),
    *_group(
        "matrix_line_break",
        [
            (
                "\\boxed{\n\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}\n}",
                "\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}",
                Y,
                "notation.environments: a line break after the box",
            ),
            (
                "\\begin{pmatrix}\n1 & 2 \\\\\n3 & 4\n\\end{pmatrix}",
                "\\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}",
                Y,
                "notation.environments: line breaks between rows",
            ),
            (
                "\\boxed{\n\\begin{pmatrix} 2 \\\\ 1 \\end{pmatrix}\n}",
                "\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}",
                N,
                "symbolic: entries swapped",
            ),
        ],
    ),
    *_group(
        "named_equations",
        [
            ("y_1 = 2x + 1, y_2 = -x", "y_1 = 2x+1, y_2 = -x", Y, "compare: equal lists"),
            ("y_2 = -x, y_1 = 2x + 1", "y_1 = 2x+1, y_2 = -x", Y, "compare: a list of equations"),
            ("y_1 = -x, y_2 = 2x + 1", "y_1 = 2x+1, y_2 = -x", N, "symbolic: names swapped"),
        ],
    ),
    *_group(
        "solution_separators",
        [
            ("x = 1; x = -2", "1, -2", Y, "notation.assignment_groups: ; between roots"),
            ("1;\\ -2", "\\{-2, 1\\}", Y, "notation.assignment_groups: ; between values"),
            ("x = 1 \\quad\\text{and}\\quad x = -2", "1, -2", Y, "notation.joined_values"),
            ("x = 1; x = 2", "1, -2", N, "compare: another root"),
            ("x = 1 \\quad\\text{and}\\quad x = 2", "1, -2", N, "compare: another root"),
        ],
    ),
    *_group(
        "decimal_exponents",
        [
            ("5^{0.5}", "\\sqrt{5}", Y, "symbolic: a decimal exponent is exact"),
            ("(x+1)^{0.5}", "\\sqrt{x+1}", Y, "symbolic: of a bracket"),
            ("x^{2.5}", "x^2\\sqrt{x}", Y, "symbolic: five halves"),
            ("x^{0.33}", "\\sqrt[3]{x}", N, "symbolic: a rounded exponent is another power"),
            ("3^{0.5}", "\\sqrt{2}", N, "symbolic: another base"),
        ],
    ),
]

# --------------------------------------------------------------- found by the modules' tests
PAIRS += [
    *_group(
        "module_rules",
        [
            ("x \\equiv 3 (mod 7)", "3", Y, "normalize: (mod 7) is a modulus, not a product"),
            ("(a) (1,2) (b) 5", "(1,2), 5", Y, "normalize: a part label before a bracket"),
            ("(b, a)", "(a, b)", N, "values: a tuple of letters is ordered, not choices"),
            ("The answer is one hundred and twelve.", "112", Y, "sentence: one compound number"),
            ("5 percentage points", "5 pp", Y, "units: a two-word unit name"),
            ("5 sec", "5", Y, "units: a unit that is also a function's name"),
            ("seventy-twelve", "82", N, "numbers: no number in words"),
            ("18 give or take", "18", N, "policy: a bound after 'or'"),
        ],
    ),
]

# ------------------------------------------------- notations from other graders' test suites
# One kind per rule of the checker that decides the class (the ``why`` names the module).
PAIRS += [
    *_group(
        "plain_text_notation",
        [
            ("3^-x", "(1/3)^x", Y, "notation.plain_math: an exponent with a unary minus"),
            ("2^-1", "\\frac{1}{2}", Y, "notation.plain_math: a number's negative exponent"),
            ("3^-x", "3^x", N, "notation.plain_math: the minus is kept"),
            ("csc(x)", "1/sin(x)", Y, "notation.plain_math: a function named without \\"),
            ("csc(x)", "1/cos(x)", N, "notation.plain_math: another reciprocal"),
            ("arccsc(x)", "arcsin(1/x)", Y, "symbolic: an inverse function's reciprocal form"),
            ("csch(x)", "1/sinh(x)", Y, "notation.plain_math: a hyperbolic reciprocal"),
            ("\\csch(x)", "\\csc(h(x))", N, "notation.plain_math: csch is no csc of h"),
            ("coth(x)", "cosh(x)/sinh(x)", Y, "notation.plain_math: the hyperbolic cotangent"),
            ("sin(x + 2pi)", "sin(x)", Y, "notation.plain_math: pi spelled out in a function"),
            ("sin(x + pi)", "sin(x)", N, "notation.plain_math: half a period changes the sign"),
            ("sin^2(x)+cos^2(x)", "1", Y, "notation.plain_math: a function's power"),
            ("sin^2(x)+cos^2(x)", "2", N, "notation.plain_math: the identity's value is 1"),
            ("2*pi*r", "2\\pi r", Y, "notation.plain_math: pi next to a product sign"),
            ("x*e^(2*x)+x", "x(e^{2x}+1)", Y, "symbolic: products with * and e^(...)"),
        ],
    ),
    *_group(
        "symbolic_identities",
        [
            ("0", "\\sin(7\\pi)", Y, "symbolic: the parser's unevaluated sine is evaluated"),
            ("1", "\\sin(7\\pi)", N, "symbolic: its value is 0"),
            ("x", "x(y^2+1)/(y^2+1)", Y, "symbolic: a common factor cancels"),
            ("x", "x(y^2+1)/(y^2+2)", N, "symbolic: no common factor"),
            ("\\sin(\\arcsin x)", "x", Y, "symbolic: an inverse undone"),
            ("\\sin(\\arcsin x)", "2x", N, "symbolic: the inverse undone is x"),
            ("0", "\\cos\\frac{\\pi}{2}", Y, "symbolic: a value near 0 in floats is 0 exactly"),
        ],
    ),
    *_group(
        "relations",
        [
            ("y=x", "x=y", Y, "symbolic: the sides of an equation swapped"),
            ("y=x", "x=2y", N, "symbolic: another line"),
            ("y<x", "x>y", Y, "symbolic: an inequality read the other way"),
            ("y<x", "x<y", N, "symbolic: the reversed inequality"),
            ("y<x", "y \\le x", N, "symbolic: strict is not loose"),
            ("y=2x-5", "(y+5)/2=x", Y, "symbolic: a linear equation rearranged"),
            ("y=2x-5", "(y+5)/2=2x", N, "symbolic: another line"),
            ("2x-y=5", "y=2x-5", Y, "symbolic: the same line, another form"),
            ("x \\le 2y", "2y \\ge x", Y, "symbolic: a loose inequality read the other way"),
        ],
    ),
    *_group(
        "degrees_in_trig",
        [
            ("\\sin(90°)", "1", Y, "notation.trig_degrees: the degree sign inside a sine"),
            ("\\cos(60°)", "\\frac{1}{2}", Y, "notation.trig_degrees: of a cosine"),
            ("\\sin(90°)", "\\sin(90)", N, "notation.trig_degrees: 90 radians differ"),
        ],
    ),
    *_group(
        "answer_block_text",
        [
            ("Step 1: 2+2=4. \\boxed{4}", "4", Y, "extract: working before a final box"),
            ("Step 1: 2+2=4. \\boxed{5}", "4", N, "extract: the final box is the answer"),
            ("the answer is 10, not \\boxed{9}", "9", N, "extract: a box inside a sentence"),
            ("7 \\bmod 3", "1", Y, "notation.plain_math: \\bmod is \\mod"),
            ("7 \\bmod 3", "2", N, "notation.plain_math: 7 mod 3 is 1"),
        ],
    ),
    *_group(
        "remarks",
        [
            ("3 (which is 4)", "4", N, "sentence: a remark claims a value the answer is not"),
            ("3 (the answer is 4)", "4", N, "sentence: so does this one"),
            ("4 (which is 2^2)", "4", Y, "sentence: a remark that restates the value"),
        ],
    ),
]
