"""Rewrites of equivalent notations into one spelling, applied to answers and references alike.

Each rewrite is a plain string or regex transformation bounded by the input length (they run in
the server's event loop): Unicode math and invisible characters, markdown emphasis, vectors and
systems written as ``pmatrix``/``cases``, ``\\pm``, inequalities as intervals, degrees inside
trigonometric functions, equations written backwards, and "or"/"and" between values.
"""

from __future__ import annotations

import json
import re
from fractions import Fraction

from reward_server.checker.extract import PART_LABEL, single_backslashes
from reward_server.checker.relations import VARIABLE, split_top

_UNICODE = {
    "\u2212": "-",  # minus sign
    "\u2012": "-",  # figure dash
    "\u2013": "-",  # en dash (a common stand-in for minus)
    "\u00d7": "\\times ",
    "\u22c5": "\\cdot ",
    "\u00b7": "\\cdot ",
    "\u00f7": "\\div ",
    "\u221e": "\\infty ",
    "\u03c0": "\\pi ",
    "\u2264": "\\le ",
    "\u2265": "\\ge ",
    "\u2260": "\\ne ",
    "\u00bd": "\\frac{1}{2}",
    "\u2153": "\\frac{1}{3}",
    "\u2154": "\\frac{2}{3}",
    "\u00bc": "\\frac{1}{4}",
    "\u00be": "\\frac{3}{4}",
    "\u2205": "\\emptyset ",
    "\u222a": "\\cup ",
    "\u2229": "\\cap ",
    "\u2208": "\\in ",
}
# Zero-width and other invisible characters; NBSP and its relatives are spaces.
_INVISIBLE = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff\u00ad"), None)
_SPACES = dict.fromkeys(map(ord, "\u00a0\u2007\u202f\u2009\u200a\u3000"), " ")
# "√2", "2√3", "√(x+1)": the radicand is a number, a letter or a bracketed group.
_SQRT = re.compile(r"\u221a\s*(\d+(?:\.\d+)?|[A-Za-z]|\([^()]*\)|\{[^{}]*\})")
_MARKDOWN = re.compile(r"^(\*\*|__|\*|_|`)(?=\S)(.+?)(?<=\S)\1$")


# Bold anywhere ("**Answer:** 18"): a pair of markers around text, never "2**3" between digits.
_BOLD = re.compile(r"(?<![\d*])(\*\*|__)(?=\S)(.+?)(?<=\S)\1(?![\d*])")
# MATH's thousands separators, ",\!" (a comma and a negative thin space) and "{,}": the digits
# they stand between are one number, also inside a tuple or a list ("(1,\!000, 2)").
_THOUSANDS = re.compile(r"(?<=\d)(?:,\\!|\{,\})\s*(?=\d{3}(?!\d))")


def plain_text(s: str) -> str:
    """Unicode math as LaTeX, invisible characters dropped, markdown emphasis removed,
    thousands separators and doubled backslashes before commands undone."""
    s = single_backslashes(s.translate(_INVISIBLE).translate(_SPACES))
    if ",\\!" in s or "{,}" in s:
        s = _THOUSANDS.sub("", s)
    if "**" in s or "__" in s:
        s = _BOLD.sub(r"\2", s)
    s = _SQRT.sub(lambda m: "\\sqrt{" + m.group(1).strip("(){}") + "}", s)
    for char, latex in _UNICODE.items():
        if char in s:
            s = s.replace(char, latex)
    s = s.strip()
    while (m := _MARKDOWN.match(s)) is not None:
        s = m.group(2).strip()
    return s


# ------------------------------------------------------------------ plain-text notation

# Function names written without a backslash, read as LaTeX's only where a function is applied
# (a bracket or an exponent follows): "sin(x)", "sin^2(x)", "arccsc(x)"; never a word ("since",
# "sinx" is a product of letters) nor a unit ("5 sec").
_FUNCTION_NAMES = (
    "arcsin|arccos|arctan|arccsc|arcsec|arccot|sinh|cosh|tanh|csch|sech|coth|"
    "sin|cos|tan|cot|sec|csc|ln|log|exp|sqrt"
)
_PLAIN_FUNCTION = re.compile(rf"(?<![A-Za-z\\])({_FUNCTION_NAMES})(?=\s*[(^_])")
# "pi" spelled out, alone or next to a number or bracket ("2pi", "(x+pi)"), never in a word.
_PLAIN_PI = re.compile(r"(?<![A-Za-z\\])pi(?![A-Za-z])")
# An exponent with a unary minus and no braces: "3^-x", "2^-1", "e^-(x+1)", "x^-\pi".
_NEGATIVE_EXPONENT = re.compile(
    r"\^\s*-\s*(\d+(?:\.\d+)?|[A-Za-z](?![A-Za-z])|\\[A-Za-z]+|\([^()]*\)|\{[^{}]*\})"
)
# \bmod is \mod as a binary operator ("7 \bmod 3").
_BMOD = re.compile(r"\\bmod(?![A-Za-z])")
# The hyperbolic reciprocals the LaTeX parser does not know (it reads "\csch(x)" as
# csc(h(x))): each is one over its reciprocal's function, with the same argument and exponent.
_HYPERBOLIC_RECIPROCAL = re.compile(
    r"\\(csch|sech|coth)(?P<power>\s*\^\s*(?:\{[^{}]*\}|-?\d))?\s*"
    r"(?P<arg>\([^()]*\)|\{[^{}]*\}|\\[A-Za-z]+|[A-Za-z0-9])"
)
_RECIPROCAL_OF = {"csch": ("1", "\\sinh"), "sech": ("1", "\\cosh"), "coth": ("\\cosh", "\\sinh")}


def _reciprocal(m: re.Match[str]) -> str:
    numerator, function = _RECIPROCAL_OF[m.group(1)]
    power, arg = m.group("power") or "", m.group("arg")
    arg = arg if arg.startswith("(") else f"({arg.strip('{}')})"
    top = "1" if numerator == "1" else f"{numerator}{power}{arg}"
    return f"\\frac{{{top}}}{{{function}{power}{arg}}}"


def plain_math(s: str) -> str:
    """Plain-text notation as its LaTeX: ``sin(x + 2pi)`` -> ``\\sin(x + 2\\pi)``, ``3^-x`` ->
    ``3^{-x}``, ``csch(x)`` -> ``\\frac{1}{\\sinh(x)}``, ``7 \\bmod 3`` -> ``7 \\mod 3``, so that
    plain text reads into the same values as the LaTeX spelling of it."""
    if "pi" in s:
        s = _PLAIN_PI.sub(r"\\pi ", s)
    s = _PLAIN_FUNCTION.sub(r"\\\1", s)
    if "^" in s:
        s = _NEGATIVE_EXPONENT.sub(r"^{-\1}", s)
    if "\\bmod" in s:
        s = _BMOD.sub(r"\\mod", s)
    if "\\csch" in s or "\\sech" in s or "\\coth" in s:
        s = _HYPERBOLIC_RECIPROCAL.sub(_reciprocal, s)
    return s


# A JSON object with one member: what a model prompted for JSON writes as its answer.
_FENCE = re.compile(r"^```[A-Za-z]*\s*(.*?)\s*```$", re.DOTALL)


def json_answer(text: str) -> str:
    """``{"answer": 42}`` -> ``42``: a JSON object (in a code fence or not) with exactly one
    member whose value is a number, a string or a list of them is that value. Anything else,
    an object with a second member among them, is returned as it is (``json.loads`` only:
    nothing is evaluated)."""
    inner = text.strip()
    fenced = _FENCE.match(inner)
    inner = fenced.group(1) if fenced else inner
    if not (inner.startswith("{") and inner.endswith("}")):
        return text
    try:
        obj = json.loads(inner)
    except ValueError:
        return text
    if not isinstance(obj, dict) or len(obj) != 1:
        return text
    (value,) = obj.values()
    items = value if isinstance(value, list) and value else [value]
    if any(isinstance(v, bool) or not isinstance(v, int | float | str) for v in items):
        return text
    return ", ".join(str(v) for v in items)


# ------------------------------------------------------------------ vectors and systems

_ENV = re.compile(
    r"\\begin\{(?P<env>[pbBvV]?matrix|cases|array)\}(?:\{[lcr|]*\})?(?P<body>.*?)\\end\{(?P=env)\}",
    re.DOTALL,
)


def _environment(m: re.Match[str]) -> str:
    """A one-row or one-column matrix is a tuple; ``cases`` rows are a list (a solved system:
    ``x=1 \\\\ y=2`` -> ``x=1, y=2``); other matrices are left to math-verify."""
    rows = [r.strip() for r in re.split(r"\\\\", m.group("body")) if r.strip()]
    if m.group("env") == "cases":
        return ", ".join(r.replace("&", "").strip() for r in rows)
    cells = [[c.strip() for c in r.split("&")] for r in rows]
    if len(cells) == 1:
        return "(" + ", ".join(cells[0]) + ")"
    if all(len(r) == 1 for r in cells):
        return "(" + ", ".join(r[0] for r in cells) + ")"
    return m.group(0)


def environments(s: str) -> str:
    return _ENV.sub(_environment, s) if "\\begin" in s else s


# ------------------------------------------------------------------ plus-minus

_PM_CMD = re.compile(r"\\pm(?![A-Za-z])")  # not \pmod
_PM = re.compile(r"^(?P<a>[^=,]*?)\s*\\pm(?![A-Za-z])\s*(?P<b>[^=,]+)$")


def plus_minus(s: str) -> str:
    """``\\pm 2`` -> ``2, -2``; ``1 \\pm \\sqrt{2}`` -> ``1+\\sqrt{2}, 1-\\sqrt{2}``;
    ``\\frac{-1 \\pm \\sqrt{5}}{2}`` -> the two fractions; ``x = 1 \\pm \\sqrt{2}`` -> ``x =
    1+\\sqrt{2}, x = 1-\\sqrt{2}`` (one ``\\pm`` only)."""
    if len(_PM_CMD.findall(s)) != 1:
        return s
    name, eq, rest = s.partition("=")
    if eq and VARIABLE.fullmatch(name.strip()) and "=" not in rest:
        values = plus_minus(rest.strip())
        if values != rest.strip():
            return ", ".join(f"{name.strip()} = {v}" for v in values.split(", "))
    m = _PM.match(s)
    if m is None or m.group("a").count("{") != m.group("a").count("}"):
        # Inside a fraction or a root: the two values with + and with - in its place.
        if "=" in s or "," in s:
            return s
        return f"{_PM_CMD.sub('+', s)}, {_PM_CMD.sub('-', s)}"
    a, b = m.group("a").strip(), m.group("b").strip()
    if a.endswith("="):
        return s
    return f"{a}+{b}, {a}-{b}" if a else f"{b}, -{b}"


# ------------------------------------------------------------------ inequalities

# One spelling per relation: "\lt", "<=", "\leqq", "\leqslant", "⩽", "!=" and "\neq" are the
# same relations as "<", "\le" and "\ne" (ASCII and other LaTeX packages write them so).
_REL_SPELLINGS = (
    (re.compile(r"\\lt(?![A-Za-z])"), "<"),
    (re.compile(r"\\gt(?![A-Za-z])"), ">"),
    (re.compile(r"<=|=<|\\leq(?:q|slant)?(?![A-Za-z])|\\leqslant|\u2a7d"), r"\\le "),
    (re.compile(r">=|\\geq(?:q|slant)?(?![A-Za-z])|\\geqslant|\u2a7e"), r"\\ge "),
    # "x != 5"; but "5! = 120" is a factorial, also once its spaces are gone
    (re.compile(r"(?<![\d)}!])!=|\\neq(?![A-Za-z])|\\ne(?![A-Za-z])"), r"\\ne "),
)
_REL = r"(?:\\leq?slant|\\leq?|\\geq?slant|\\geq?|<|>)"
_VAR = r"[A-Za-z]"
_SIDE = r"[^<>=\\]*(?:\\(?:infty|frac|sqrt|pi|dfrac)[^<>=\\]*)*"
_CHAIN = re.compile(
    rf"^(?P<a>{_SIDE}?)\s*(?P<r1>{_REL})\s*(?P<x>{_VAR})\s*(?P<r2>{_REL})\s*(?P<b>{_SIDE})$"
)
_ONE_RIGHT = re.compile(rf"^(?P<x>{_VAR})\s*(?P<r>{_REL})\s*(?P<b>{_SIDE})$")
_ONE_LEFT = re.compile(rf"^(?P<b>{_SIDE})\s*(?P<r>{_REL})\s*(?P<x>{_VAR})$")
_IN = re.compile(rf"^{_VAR}\s*\\in\s*")
_NE = r"\s*\\ne\s*"
_NOT_EQUAL = re.compile(rf"^(?:{_VAR}{_NE}(?P<b>{_SIDE})|(?P<b2>{_SIDE}){_NE}{_VAR})$")


_OR = re.compile(r"\s*(?:\\text\{\s*or\s*\}|(?<![A-Za-z\\])or(?![A-Za-z])|\\lor|\\vee)\s*")


def inequality_union(s: str) -> str:
    """``x < -2 \\text{ or } x > 2`` -> ``(-\\infty, -2)\\cup(2, \\infty)``: one-variable
    inequalities joined by "or" are the union of their intervals ("and" would intersect them,
    and is left alone)."""
    parts = _OR.split(s)
    if len(parts) < 2 or not re.search(_REL, s):
        return s
    intervals = [inequality_interval(p) for p in parts]
    names = {
        m.group() for p in parts for m in re.finditer(r"(?<![A-Za-z\\])[A-Za-z](?![A-Za-z])", p)
    }
    if len(names) != 1 or any(
        i == p or i[:1] not in "([" for i, p in zip(intervals, parts, strict=True)
    ):
        return s
    return "\\cup".join(intervals)


_ANY_SPELLING = re.compile(
    r"<=|=<|>=|!=|\\[lg]t(?![A-Za-z])|\\[lg]eq|\\neq?(?![A-Za-z])|[\u2a7d\u2a7e]"
)


def relation_spellings(s: str) -> str:
    """``x \\lt 3`` -> ``x<3``, ``x <= 2`` -> ``x\\le 2``, ``x != 5`` -> ``x\\ne 5``."""
    if _ANY_SPELLING.search(s) is None:
        return s
    for pattern, spelling in _REL_SPELLINGS:
        s = pattern.sub(spelling, s)
    return s


def _kind(rel: str) -> tuple[bool, bool]:
    """(less-than, strict) of a relation symbol."""
    return rel.startswith(("<", "\\l")), rel in ("<", ">")


# The letters that name unknowns; another letter in an inequality is a parameter ("x < a").
_UNKNOWNS = "xyz"


def inequality_interval(s: str) -> str:
    """``1 \\le x < 2`` -> ``[1, 2)``, ``x \\ge 0`` -> ``[0, \\infty)``, ``x \\in [a, b)`` ->
    ``[a, b)``, ``x \\ne 5`` -> ``(-\\infty, 5)\\cup(5, \\infty)``, ``-x > -1`` -> ``(-\\infty,
    1)``: the set a one-variable inequality describes, so every spelling of it compares."""
    s = _IN.sub("", relation_spellings(s))
    m = _NOT_EQUAL.match(s)
    if m and (m.group("b") or m.group("b2") or "").strip():
        b = (m.group("b") or m.group("b2")).strip()
        return f"(-\\infty, {b})\\cup({b}, \\infty)"
    if not re.search(_REL, s):
        return s
    s = _solved_linear(s)
    if _two_unknowns(s):
        return s  # "y < x" relates two unknowns: compared as a relation (it is "x > y")
    m = _CHAIN.match(s)
    if m and m.group("a").strip() and m.group("b").strip():
        (lt1, st1), (lt2, st2) = _kind(m.group("r1")), _kind(m.group("r2"))
        if lt1 != lt2:
            return s
        lo, hi = (m.group("a"), m.group("b")) if lt1 else (m.group("b"), m.group("a"))
        lo_open, hi_open = (st1, st2) if lt1 else (st2, st1)
        return f"{'(' if lo_open else '['}{lo.strip()}, {hi.strip()}{')' if hi_open else ']'}"
    sides = ((_ONE_RIGHT, True), (_ONE_LEFT, False))
    left = _ONE_LEFT.match(s)
    if left is not None and left.group("x") in _UNKNOWNS:
        sides = sides[::-1]  # "a > x": x is the variable, a its bound (a parameter)
    for pattern, var_left in sides:
        m = pattern.match(s)
        if m and m.group("b").strip():
            less, strict = _kind(m.group("r"))
            upper = less == var_left  # "x < b" and "b > x" bound x from above
            b = m.group("b").strip()
            if upper:
                return f"(-\\infty, {b}{')' if strict else ']'}"
            return f"{'(' if strict else '['}{b}, \\infty)"
    return s


def _two_unknowns(s: str) -> bool:
    """Whether an inequality names two of the letters that name unknowns (x, y, z) outside
    commands (``y < x``, ``x \\le 2y``): no interval of one variable, a relation between two.
    A bound in another letter is a parameter (``x < a`` is ``(-\\infty, a)``)."""
    letters = re.findall(
        rf"(?<![A-Za-z\\])[{_UNKNOWNS}](?![A-Za-z])", re.sub(r"\\[A-Za-z]+", " ", s)
    )
    return len(set(letters)) > 1


# A term of a linear expression: "-3x", "+ \frac{1}{2}x", "x/2", "7".
_TERM = re.compile(
    r"\s*(?P<sign>[+-])?\s*(?P<coef>\d+(?:\.\d+)?|\\frac\{\d+\}\{\d+\})?\s*"
    r"(?P<var>[A-Za-z](?![A-Za-z]))?(?:\s*/\s*(?P<div>\d+))?\s*"
)
_FLIP = {"<": ">", ">": "<", "\\le": "\\ge", "\\ge": "\\le"}


def _linear(side: str) -> tuple[Fraction, Fraction, str | None] | None:
    """(a, b, x) when ``side`` is the linear expression a·x + b with exact coefficients."""
    a, b, var, pos = Fraction(0), Fraction(0), None, 0
    side = side.strip()
    while pos < len(side):
        m = _TERM.match(side, pos)
        if m is None or m.end() == pos or not (m.group("coef") or m.group("var")):
            return None
        if pos > 0 and not m.group("sign"):
            return None  # "2 3" or "2x y": not a sum of terms
        coef = m.group("coef")
        if coef is None:
            value = Fraction(1)
        elif coef.startswith("\\frac"):
            num, den = re.findall(r"\d+", coef)
            if int(den) == 0:
                return None
            value = Fraction(int(num), int(den))
        else:
            value = Fraction(coef)
        if m.group("div"):
            if int(m.group("div")) == 0:
                return None
            value /= int(m.group("div"))
        if m.group("sign") == "-":
            value = -value
        if m.group("var"):
            if var not in (None, m.group("var")):
                return None
            var, a = m.group("var"), a + value
        else:
            b += value
        pos = m.end()
    return a, b, var


def _latex_number(v: Fraction) -> str:
    if v.denominator == 1:
        return str(v.numerator)
    sign = "-" if v < 0 else ""
    return f"{sign}\\frac{{{abs(v.numerator)}}}{{{v.denominator}}}"


def _solved_linear(s: str) -> str:
    """``-x > -1`` -> ``x<1``, ``2x + 1 \\le 7`` -> ``x\\le 3``, ``-1 < 2x+1 < 5`` -> ``-1<x<2``:
    a linear inequality in one variable solved for it (dividing by a negative coefficient flips
    the relation), so it reads as the interval it describes. Anything else is returned as is."""
    parts = [p.strip() for p in re.split(rf"({_REL})", s)]
    if len(parts) not in (3, 5):
        return s
    sides = [_linear(p) for p in parts[0::2]]
    rels = [r.replace("leq", "le").replace("geq", "ge") for r in parts[1::2]]
    if any(x is None for x in sides) or any(r not in _FLIP for r in rels):
        return s
    names = {x[2] for x in sides if x is not None and x[2] is not None}
    if len(names) != 1:
        return s
    (var,) = names
    if len(parts) == 3:
        (a1, b1, _), (a2, b2, _) = sides  # type: ignore[misc]
        c, k = a1 - a2, b2 - b1
        if c == 0:
            return s
        rel = rels[0] if c > 0 else _FLIP[rels[0]]
        return f"{var}{rel} {_latex_number(k / c)}"
    (a0, b0, _), (a1, b1, _), (a2, b2, _) = sides  # type: ignore[misc]
    if a0 != 0 or a2 != 0 or a1 == 0:
        return s
    lo, hi = (b0 - b1) / a1, (b2 - b1) / a1
    r1, r2 = rels if a1 > 0 else (_FLIP[rels[0]], _FLIP[rels[1]])
    return f"{_latex_number(lo)}{r1} {var}{r2} {_latex_number(hi)}"


# ------------------------------------------------------------------ degrees in trigonometry

_TRIG = re.compile(r"\\(?:sin|cos|tan|cot|sec|csc)(?![A-Za-z])")
_DEG_VALUE = re.compile(r"(\d+(?:\.\d+)?)\s*(?:\^\s*\{?\s*\\circ\s*\}?|°|\\degrees?(?![A-Za-z]))")


def trig_degrees(s: str) -> str:
    """Inside an expression with a trigonometric function, ``30^\\circ`` (or ``30°``,
    ``30\\degree``) is ``\\pi/6``: the degree sign changes the value there (elsewhere,
    ``90^\\circ`` is just 90)."""
    if not _TRIG.search(s):
        return s
    return _DEG_VALUE.sub(lambda m: f"(\\frac{{{m.group(1)}\\pi}}{{180}})", s)


# ------------------------------------------------------------------ equations and lists


def backwards_equation(s: str) -> str:
    """``12 = y`` -> ``y = 12``: a value equated to a variable is an assignment."""
    if s.count("=") != 1:
        return s
    left, right = (p.strip() for p in s.split("="))
    if VARIABLE.fullmatch(right) and not VARIABLE.fullmatch(left) and left:
        return f"{right}={left}"  # spelt as canonical() spells "y = 12"
    return s


# "2 or 3", "1, 2, and 3" (the serial comma), "2\\text{ and }3"; never inside a word or command
_JOINER = re.compile(
    r"\s*,?\s*(?:\\text\{\s*(?:or|and)\s*\}|(?<![A-Za-z\\])(?:or|and)(?![A-Za-z]))\s*"
)


def joined_values(s: str) -> str:
    """Values joined by "or"/"and" are a list (``2 or 3`` -> ``2, 3``): against one value that is
    a second candidate, against a list of roots it is the list."""
    if "or" not in s and "and" not in s:
        return s
    return _JOINER.sub(", ", s).strip(", ")


def assignment_groups(s: str) -> str:
    """Solutions separated by ``;``: of a system written as assignments, the tuples of their
    values (``a=1,b=4; a=3,b=2`` -> ``(1, 4), (3, 2)``); of one unknown, a list (``x = 1; x =
    -2`` -> ``x = 1, x = -2``, the roots)."""
    groups = [g for g in split_top(s, ";") if g]
    if len(groups) == 1 and ("=" not in s or ";" not in s):
        return s
    if all(len(split_top(group, ",")) == 1 for group in groups):
        return ", ".join(groups)
    tuples = []
    for group in groups:
        parts = split_top(group, ",")
        if len(parts) < 2 or not all(re.fullmatch(r"[A-Za-z] ?= ?[^=]+", p) for p in parts):
            return s
        names = [p.split("=")[0].strip() for p in parts]
        if len(set(names)) != len(names):
            return s  # "x=1, x=2" is a list of roots, not a tuple
        tuples.append("(" + ", ".join(p.split("=", 1)[1].strip() for p in parts) + ")")
    return ", ".join(tuples) if len(tuples) > 1 else tuples[0]


# A label starts the text or follows spacing or a separator; the label's own pattern allows the
# spacing before it (two patterns of spacing in a row would backtrack over a run of spaces).
_PART = re.compile(rf"(?:^|(?<=[\s,;])){PART_LABEL}\s*")
# The one spelling ``labelled_parts`` writes a label in: "(a)", "(ii)", glued to its value
# (the group: the label).
CANONICAL_PART_LABEL = r"\(([a-h]|[iv]+)\)"
_SEQUENCES = ("abcdefgh", ("i", "ii", "iii", "iv", "v", "vi", "vii", "viii"))


def labelled_parts(s: str) -> str:
    """``(a) 3, (b) 5``, ``\\text{(a) } 3; \\text{(b) } 5``: the parts of a multi-part answer,
    labelled from (a) or (i) on, in one spelling and in the labels' order, whatever the order
    they were written in: ``(b) 5, (a) 3`` is ``(a)3, (b)5`` (``values.read_value`` reads them
    as an ordered group). Anything else is returned as it is."""
    if ")" not in s:
        return s  # every label closes with a bracket
    parts = _parts(" ".join(s.split()), _PART)
    if parts is None:
        return s
    return ", ".join(f"({label}){value}" for label, value in parts)


# A label named in prose: "Part (a) is 3 and part (b) is 5", "For part (a), the answer is 3."
_PROSE_PART = re.compile(rf"(?:^|(?<=[\s,;.]))(?:[Ff]or\s+)?(?:[Pp]art\s+)?{PART_LABEL}\s*")
# What joins a label to its part in prose, and a part to the next label.
_PART_LEAD = re.compile(r"^(?:[,:=]\s*)*(?:(?:is|equals)\s+)?")
_PART_TAIL = re.compile(r"(?:(?:^|\s+)and|[.,;])+$")


def prose_parts(s: str) -> list[tuple[str, str]] | None:
    """The (label, text) of each part of a multi-part answer whose labels are named in prose
    (``Part (a) is 3 and part (b) is 5``: ``[("a", "3"), ("b", "5")]``; ``For part (a), the
    answer is 3. For part (b), ...``: ``[("a", "the answer is 3"), ...]``), in the labels'
    order; None when ``s`` is no such answer. ``reading`` reads each part on its own."""
    if ")" not in s:
        return None
    parts = _parts(" ".join(s.split()), _PROSE_PART)
    if parts is None:
        return None
    cleaned = [(label, _PART_TAIL.sub("", _PART_LEAD.sub("", text))) for label, text in parts]
    return cleaned if all(text for _, text in cleaned) else None


def _parts(collapsed: str, labels_pattern: re.Pattern[str]) -> list[tuple[str, str]] | None:
    """(label, text) of each part of ``collapsed`` (one space per run: the pattern's spacing
    never backtracks), labelled from its start by ``labels_pattern`` from (a) or (i) on, each
    once, sorted into the labels' order; None when it is no such answer."""
    found = list(labels_pattern.finditer(collapsed))
    if len(found) < 2 or found[0].start() != 0:
        return None
    labels = [m.group("label") for m in found]
    sequence = next((seq for seq in _SEQUENCES if set(labels) <= set(seq)), None)
    if sequence is None or not labels_in_order(sorted(labels, key=sequence.index)):
        return None
    ends = [m.start() for m in found[1:]] + [len(collapsed)]
    values = [
        collapsed[m.end() : end].strip().strip(",;").strip()
        for m, end in zip(found, ends, strict=True)
    ]
    if not all(values):
        return None
    return sorted(zip(labels, values, strict=True), key=lambda part: sequence.index(part[0]))


def labels_in_order(labels: list[str]) -> bool:
    """Whether part labels are (a), (b), … or (i), (ii), … from the first, each once."""
    return any(list(seq[: len(labels)]) == labels for seq in _SEQUENCES)
