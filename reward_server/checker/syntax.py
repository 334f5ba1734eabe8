"""Reading an answer's text into its tree (``tree.py``), once, with one grammar
(``answer.lark``): plain text and LaTeX, by Lark's LALR(1) parser, linear in the length of the
text and pure Python.

``parse(text)`` returns the ``tree.Answer`` or an ``Unparsable`` that says where reading
stopped. Nothing here rewrites text: the lexer reads every spelling of a token (``\\le``,
``<=``, ``≤``) as that token, and the transformer below builds the nodes.

The grammar's shift/reduce conflicts, each resolved as a shift, and what that reads:

* ``POW``, ``SUB``, ``BANG``, ``PERCENT``, ``PRIME``, ``DEGREE`` after a function's simple
  argument bind to the argument's last factor (``\\sin x^2`` is ``\\sin(x^2)``);
* a factor after a function's simple argument joins the argument (``\\sin 2x`` is ``\\sin(2x)``,
  ``\\sin x y`` is ``\\sin(xy)``);
* ``|`` after an expression between bars closes the bars (``|x|y`` is ``|x|·y``).
"""

from __future__ import annotations

import functools
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lark import Lark, Token
from lark.exceptions import LarkError, UnexpectedInput
from lark.visitors import Transformer

from reward_server.checker import tree as t

_GRAMMAR = Path(__file__).with_name("answer.lark")
# The text each thread is parsing (the reading threads of the service parse concurrently).
_reading = threading.local()
# Trees deeper than this are not read (``- - - … x``): every rule over a tree, and its hash,
# may then recurse without reaching the interpreter's limit.
MAX_DEPTH = 120


@dataclass(frozen=True)
class Unparsable:
    """Where reading stopped (an index into the text) and why."""

    position: int
    message: str


_RELATIONS = {
    "=": "=",
    "<": "<",
    ">": ">",
    "\u2264": "<=",
    "\u2265": ">=",
    "\u2260": "!=",
    "\u2248": "~",
    "\u2a7d": "<=",
    "\u2a7e": ">=",
    "\u2208": "in",
    "<=": "<=",
    "=<": "<=",
    ">=": ">=",
    "!=": "!=",
}
_RELATION_COMMANDS = {
    "lt": "<",
    "gt": ">",
    "ne": "!=",
    "neq": "!=",
    "approx": "~",
    "sim": "~",
    "in": "in",
    "notin": "notin",
    "subset": "subset",
    "subseteq": "subset",
    "to": "to",
    "rightarrow": "to",
}
_VULGAR = {
    "\u00bd": ("1", "2"),
    "\u2153": ("1", "3"),
    "\u2154": ("2", "3"),
    "\u00bc": ("1", "4"),
    "\u00be": ("3", "4"),
    "\u215b": ("1", "8"),
}
_FUNCTION_NAME = re.compile(r"[a-z]+")


def _relation(token: str) -> str:
    if token in _RELATIONS:
        return _RELATIONS[token]
    name = token.lstrip("\\")
    if name.startswith(("le", "ge")):
        return "<=" if name.startswith("le") else ">="
    return _RELATION_COMMANDS[name]


def _cover(children: list[Any]) -> tuple[int, int]:
    """Where a rule stands in the text: from its first child's start to its last child's end
    (tokens carry their positions, nodes their spans, a tuple its parts)."""
    starts, ends = [], []
    stack = list(children)
    while stack:
        item = stack.pop()
        if isinstance(item, Token):
            if item.start_pos is not None:
                starts.append(item.start_pos)
                ends.append(item.end_pos or item.start_pos)
        elif isinstance(item, tuple):
            stack.extend(item)
        elif hasattr(item, "span") and item.span != (0, 0):
            starts.append(item.span[0])
            ends.append(item.span[1])
    return (min(starts), max(ends)) if starts else (0, 0)


def _token_span(token: Token) -> tuple[int, int]:
    return (token.start_pos or 0, token.end_pos or 0)


def _brace_content(text: str) -> str:
    return text[text.index("{") + 1 : text.rindex("}")]


class _Build(Transformer):
    """Lark's rules into ``tree`` nodes, applied by the parser as it reduces each rule (no parse
    tree is built, and nothing recurses). The text being parsed, whose gaps between factors a
    product reads, is the calling thread's (``_reading``)."""

    @property
    def text(self) -> str:
        return _reading.text

    # ---------------------------------------------------------------- tokens

    def _leaf(self, token: Token) -> t.Node:
        kind, value, span = token.type, str(token), _token_span(token)
        if kind in ("NUMBER", "DIGIT"):
            return t.Num(value, span=span)
        if kind == "VULGAR":
            numerator, denominator = _VULGAR[value]
            return t.Frac(t.Num(numerator), t.Num(denominator), span=span)
        if kind == "REPEATING":
            return t.Num(re.sub(r"\s+", "", value.replace("\\bar", "\\overline")), span=span)
        if kind == "BASED":
            digits, base = value.rsplit("_", 1)
            digits = re.sub(r"\\text\s*\{|[\s(){}]", "", digits)
            return t.Based(digits.upper(), int(re.sub(r"\D", "", base)), span=span)
        if kind == "LETTER":
            return t.Name(value, span=span)
        if kind == "GREEK":
            return t.Name(value[1:], span=span)
        if kind in ("LETTERS", "UNIT_RATE"):
            return t.Word(re.sub(r"\s+", "", value), span=span)
        if kind == "NUMWORDS":
            return t.Word(value, number=True, span=span)
        if kind == "PI":
            return t.Const("pi", span=span)
        if kind == "INF":
            return t.Const("infty", span=span)
        if kind == "EMPTYSET":
            return t.SetOf((), span=span)
        if kind == "REALS":
            return t.Const(re.sub(r"[^RZNQC]", "", value.replace("mathbb", "")), span=span)
        if kind == "TEXT":
            command = value[1 : value.index("{")].strip()
            return t.Text(command, _brace_content(value), span=span)
        raise ValueError(f"no leaf for {kind}")

    def _node(self, item: Any) -> t.Node:
        return self._leaf(item) if isinstance(item, Token) else item

    def _nodes(self, items: list[Any]) -> list[t.Node]:
        return [self._node(i) for i in items if not isinstance(i, Token) or i.type not in _PUNCT]

    # ---------------------------------------------------------------- answer

    def start(self, children: list[Any]) -> t.Node:
        return children[0]

    def answer(self, children: list[Any]) -> t.Answer:
        items, separators = [], []
        pending: list[str] = []
        for child in children:
            if isinstance(child, Token) and child.type == "END_DOT":
                continue
            if isinstance(child, tuple):  # a separator
                pending.append(child[0])
                continue
            child = self._node(child)
            if items:
                # ", and" is "and"; a comma next to a word joins nothing more
                words = [s for s in pending if s not in (",", ";")]
                separators.append(words[-1] if words else (";" if ";" in pending else ","))
            pending = []
            items.append(child)
        return t.Answer(tuple(items), tuple(separators), span=_cover(children))

    def sep(self, children: list[Token]) -> tuple[str]:
        token = children[0]
        if token.type == "JOIN":
            word = re.sub(r"\\text\s*\{|\}|\s", "", str(token)).lstrip("\\")
            return ({"lor": "or", "vee": "or", "": ","}.get(word, word),)
        return (str(token),)

    def item(self, children: list[Any]) -> t.Node:
        if len(children) == 2:
            return t.Labelled(_label(children[0]), self._node(children[1]), span=_cover(children))
        return self._node(children[0])

    def label_alone(self, children: list[Token]) -> t.Labelled:
        return t.Labelled(_label(children[0]), None, span=_cover(children))

    # ---------------------------------------------------------------- relations

    def relation(self, children: list[Any]) -> t.Relation:
        sides = tuple(self._node(c) for c in children[0::2])
        ops = tuple(_relation(str(c)) for c in children[1::2])
        return t.Relation(sides, ops, span=_cover(children))

    def congruence(self, children: list[Any]) -> t.Congruence:
        modulus = None
        if children and isinstance(children[-1], tuple):
            modulus = children.pop()[0]
        sides = tuple(self._node(c) for c in children if not _is(c, "EQUIV"))
        return t.Congruence(sides, modulus, span=_cover(children))

    def modulus(self, children: list[Any]) -> tuple[t.Node]:
        return (self._nodes(children)[0],)

    def setop(self, children: list[Any]) -> t.SetOp:
        operands = tuple(self._node(c) for c in children[0::2])
        ops = tuple(_set_op(str(c)) for c in children[1::2])
        return t.SetOp(operands, ops, span=_cover(children))

    # ---------------------------------------------------------------- arithmetic

    def add(self, children: list[Any]) -> t.Sum:
        terms = [("+", self._node(children[0]))]
        for op, term in zip(children[1::2], children[2::2], strict=True):
            terms.append((op, self._node(term)))
        return t.Sum(tuple(terms), span=_cover(children))

    def addop(self, children: list[Token]) -> str:
        token = children[0]
        if token.type == "PM":
            return "mp" if "mp" in str(token) else "pm"
        return "+" if token.type == "PLUS" else "-"

    def neg(self, children: list[Any]) -> t.Neg:
        return t.Neg(self._node(children[-1]), span=_cover(children))

    def pos(self, children: list[Any]) -> t.Node:
        return self._node(children[-1])

    def pm(self, children: list[Any]) -> t.Sum:
        sign = "mp" if "mp" in str(children[0]) else "pm"
        return t.Sum(((sign, self._node(children[-1])),), span=_cover(children))

    def currency(self, children: list[Any]) -> t.Currency:
        return t.Currency(self._node(children[-1]), span=_cover(children))

    def product(self, children: list[Any]) -> t.Node:
        factors = [self._node(children[0])]
        joins = []
        for join, factor in children[1:]:
            node = self._node(factor)
            if join is None:  # juxtaposed: glued, or with spacing between
                gap = self.text[factors[-1].span[1] : node.span[0]]
                if isinstance(node, t.Num) and isinstance(factors[-1], t.Num) and _joins(gap):
                    # digits an invisible mark splits are one number ("1\u200e2")
                    span = (factors[-1].span[0], node.span[1])
                    factors[-1] = t.Num(factors[-1].text + node.text, span=span)
                    continue
                join = "" if _SIZE_ONLY.fullmatch(gap) else " "  # "f\\left(0\\right)" is glued
            factors.append(node)
            joins.append(join)
        if len(factors) == 1:
            return factors[0]
        return t.Product(tuple(factors), tuple(joins), span=_cover(children))

    def explicit(self, children: list[Any]) -> tuple[str, Any]:
        op = str(children[0])
        if "mod" in op:
            return "mod", children[1]
        return ("/" if op in ("/", "\\div", "\u00f7") else ":" if op == ":" else "*"), children[1]

    def implicit(self, children: list[Any]) -> tuple[None, Any]:
        return None, children[0]

    def pow(self, children: list[Any]) -> t.Power:
        base, exponent = self._node(children[0]), self._node(children[-1])
        return t.Power(base, exponent, span=_cover(children))

    def pow_postfix(self, children: list[Any]) -> t.Postfix:
        """``10^{8}!``: marks after a power mark the power."""
        marks = [c for c in children if isinstance(c, str) and not isinstance(c, Token)]
        power = self.pow([c for c in children if c not in marks])
        return t.Postfix(power, tuple(marks), span=_cover(children))

    def degrees(self, children: list[Any]) -> t.Degrees:
        return t.Degrees(self._node(children[0]), span=_cover(children))

    def postfix(self, children: list[Any]) -> t.Postfix:
        marks = tuple(children[1:])
        return t.Postfix(self._node(children[0]), marks, span=_cover(children))

    def postop(self, children: list[Token]) -> str:
        kind = children[0].type
        return {"BANG": "!", "PERCENT": "%", "PRIME": "'"}[kind]

    def sub(self, children: list[Any]) -> t.Node:
        base, index = self._node(children[0]), self._node(children[-1])
        if isinstance(base, t.Name) and "_" not in base.text:
            written = _written(index)
            if written is not None:
                return t.Name(f"{base.text}_{written}", span=_cover(children))
        return t.Subscript(base, index, span=_cover(children))

    # ---------------------------------------------------------------- atoms

    def bracket(self, children: list[Any]) -> t.Bracket:
        opening, items, closing = children
        pair = {"\\langle": "<", "\\rangle": ">"}
        return t.Bracket(
            pair.get(str(opening), str(opening)),
            pair.get(str(closing), str(closing)),
            items,
            span=_cover(children),
        )

    def items_in(self, children: list[Any]) -> tuple[t.Node, ...]:
        return tuple(self._nodes(children))

    def brace(self, children: list[Any]) -> t.Node:
        return self._nodes(children)[0]

    def set(self, children: list[Any]) -> t.SetOf:
        return t.SetOf(children[1], span=_cover(children))

    def empty_set(self, children: list[Any]) -> t.SetOf:
        return t.SetOf((), span=_cover(children))

    def _enclosed(self, kind: str, children: list[Any]) -> t.Enclosed:
        return t.Enclosed(kind, self._nodes(children)[0], span=_cover(children))

    def abs(self, children: list[Any]) -> t.Enclosed:
        return self._enclosed("abs", children)

    def floor(self, children: list[Any]) -> t.Enclosed:
        return self._enclosed("floor", children)

    def ceil(self, children: list[Any]) -> t.Enclosed:
        return self._enclosed("ceil", children)

    def targ(self, children: list[Any]) -> t.Node:
        return self._nodes(children)[0]

    targ_first = targ
    log_base = targ
    exponent = targ
    farg = targ
    uarg = targ

    def paren(self, children: list[Any]) -> t.Bracket:
        return t.Bracket("(", ")", tuple(self._nodes(children)), span=_cover(children))

    def frac(self, children: list[Any]) -> t.Frac:
        numerator, denominator = self._nodes(children[1:])
        return t.Frac(numerator, denominator, span=_cover(children))

    def sqrt(self, children: list[Any]) -> t.Root:
        nodes = self._nodes(children[1:])
        index = nodes[0] if len(nodes) == 2 else None
        return t.Root(nodes[-1], index, span=_cover(children))

    def binom(self, children: list[Any]) -> t.Binom:
        n, k = self._nodes(children[1:])
        return t.Binom(n, k, span=_cover(children))

    def func(self, children: list[Any]) -> t.Func:
        name = _FUNCTION_NAME.search(str(children[0]).replace("operatorname", "")).group()
        rest = self._nodes(children[1:])
        power = rest[0] if len(rest) == 2 else None
        return t.Func(name, _argument(rest[-1]), power=power, span=_cover(children))

    def log(self, children: list[Any]) -> t.Func:
        name = str(children[0]).lstrip("\\")
        base: t.Node | None = t.Const("e") if name == "ln" else None
        if name == "lg":
            base = t.Num("10")
        power = None
        rest = children[1:]
        while len(rest) > 1:
            marker, value, rest = rest[0], self._node(rest[1]), rest[2:]
            if marker.type == "SUB":
                base = value
            else:
                power = value
        argument = _argument(self._node(rest[0]))
        return t.Func("log", argument, power=power, base=base, span=_cover(children))

    def simple_product(self, children: list[Any]) -> t.Node:
        if len(children) == 1:
            return self._node(children[0])
        return self.product([children[0], *((None, c) for c in children[1:])])

    def matrix(self, children: list[Any]) -> t.Matrix:
        environment = re.search(r"\{(\w+)\}", str(children[0])).group(1)
        return t.Matrix(environment, children[1], span=_cover(children))

    def rows(self, children: list[Any]) -> tuple[tuple[t.Node, ...], ...]:
        return tuple(c for c in children if isinstance(c, tuple))

    def row(self, children: list[Any]) -> tuple[t.Node, ...]:
        return tuple(self._nodes(children))

    def aligned_row(self, children: list[Any]) -> tuple[t.Node, ...]:
        """``x &= 1``: a relation aligned at its sign, one cell."""
        left, _, op, right = children
        sides = (self._node(left), self._node(right))
        return (t.Relation(sides, (_relation(str(op)),), span=_cover(children)),)

    def decorated(self, children: list[Any]) -> t.Decorated:
        command = str(children[0]).lstrip("\\")
        return t.Decorated(command, self._nodes(children[1:])[0], span=_cover(children))

    def angle(self, children: list[Any]) -> t.Angle:
        return t.Angle(str(children[0]).lstrip("\\"), str(children[1]), span=_cover(children))

    def bigop(self, children: list[Any]) -> t.BigOp:
        op = str(children[0]).lstrip("\\")
        variable = str(children[3])
        lower, upper, body = (self._node(c) for c in (children[5], children[8], children[9]))
        return t.BigOp(op, variable, lower, upper, body, span=_cover(children))


# Tokens that only delimit: never a node of their own.
_PUNCT = frozenset(
    [
        "LPAR",
        "RPAR",
        "LSQB",
        "RSQB",
        "LBRACE",
        "RBRACE",
        "LSET",
        "RSET",
        "LBAR",
        "RBAR",
        "LFLOOR",
        "RFLOOR",
        "LCEIL",
        "RCEIL",
        "AMP",
        "ROWSEP",
        "COMMA",
        "POW",
        "SUB",
        "FRAC",
        "SQRT",
        "PLAIN_SQRT",
        "USQRT",
        "BINOM",
        "PLAIN_BINOM",
        "DECOR",
        "MOD_OPEN",
        "EQUIV",
        "CIRC",
    ]
)


def _is(item: Any, kind: str) -> bool:
    return isinstance(item, Token) and item.type == kind


def _label(token: Token) -> str:
    return re.search(r"\(?\s*([a-h]|[iv]+)\s*\)", str(token).replace("\\text", "")).group(1)


def _set_op(token: str) -> str:
    return {"\u222a": "cup", "\u2229": "cap"}.get(token, token.lstrip("\\"))


_JOINING = re.compile(
    r"(?:\\!|[\u200b-\u200f\u2060-\u2064\ufeff\u00ad\u061c\u202a-\u202e\u2066-\u2069\ufe0e\ufe0f\x00])+"
)


# A gap of size commands only: what it stands between is written side by side.
_SIZE_ONLY = re.compile(r"(?:\\(?:left|right|[Bb]igg?[lr]?)(?![A-Za-z]))*")


def _joins(gap: str) -> bool:
    """A gap that joins the digits around it: invisible marks, TeX's negative thin space."""
    return _JOINING.fullmatch(gap) is not None


# A comma between digit groups that is no explicit thousands separator (",\\!", "{,}").
_PLAIN_THOUSANDS = re.compile(r"\d,\d")


def _argument(node: t.Node) -> t.Node:
    """A function's argument: ``\\sin(x)`` and ``\\sin x`` apply the function to x alike."""
    if (
        isinstance(node, t.Bracket)
        and (node.opening, node.closing) == ("(", ")")
        and len(node.items) == 1
    ):
        return node.items[0]
    return node


def _written(index: t.Node) -> str | None:
    """The spelling of a subscript that makes part of a name (``x_1``, ``a_{n}``, ``x_{12}``)."""
    if isinstance(index, t.Num) and index.text.isdigit():
        return index.text
    if isinstance(index, t.Name | t.Word):
        return index.text
    return None


class _Tokens:
    """What the lexer cannot tell from one token, told from the tokens before it (Lark's
    post-lexer): each bar of ``|x|`` as opening or closing (a bar closes when one is open and
    what stands before it ends an operand: ``|x - 1|``, ``2|x|``, ``|x||y|``), and a plain comma
    between digit groups inside brackets as a separator (``(1,200)`` is a pair, ``\\{1,200\\}``
    a set of two; at the top level "1,200" is one number, and ``,\\!`` and ``{,}`` always
    are)."""

    always_accept = ("BAR",)

    def process(self, stream: Any) -> Any:
        open_bars = depth = 0
        previous: Token | None = None
        for token in stream:
            if token.type in _OPENINGS:
                depth += 1
            elif token.type in _CLOSINGS:
                depth = max(depth - 1, 0)
            if token.type == "BAR":
                written = str(token)
                ends_operand = previous is not None and previous.type not in _OPERATORS
                closes = "rvert" in written or (
                    "lvert" not in written and open_bars > 0 and ends_operand
                )
                open_bars += -1 if closes else 1
                token = Token.new_borrow_pos("RBAR" if closes else "LBAR", written, token)
            if token.type == "NUMBER" and depth and _PLAIN_THOUSANDS.search(token):
                yield from _separated(token)
                previous = token
                continue
            previous = token
            yield token


def _separated(token: Token) -> Any:
    """``1,200`` between brackets: the numbers 1 and 200 and the comma between them."""
    start = token.start_pos or 0
    for i, part in enumerate(str(token).split(",")):
        if i:
            yield _token("COMMA", ",", start - 1, token)
        yield _token("NUMBER", part, start, token)
        start += len(part) + 1


def _token(kind: str, value: str, start: int, near: Token) -> Token:
    return Token(
        kind,
        value,
        start,
        near.line,
        near.column,
        near.end_line,
        near.end_column,
        start + len(value),
    )


_OPENINGS = frozenset({"LPAR", "LSQB", "LSET", "LANGLE", "MOD_OPEN"})
_CLOSINGS = frozenset({"RPAR", "RSQB", "RSET", "RANGLE"})


# Tokens after which a bar opens: operators, relations, openings, separators.
_OPERATORS = frozenset(
    [
        "LBAR",
        "LPAR",
        "LSQB",
        "LBRACE",
        "LSET",
        "LANGLE",
        "COMMA",
        "SEMI",
        "JOIN",
        "RELOP",
        "EQUIV",
        "SETOP",
        "PLUS",
        "MINUS",
        "PM",
        "MULOP",
        "MOD",
        "POW",
        "SUB",
        "CURRENCY",
        "AMP",
        "ROWSEP",
        "FRAC",
        "SQRT",
        "FUNC",
        "LOG",
        "LABEL",
    ]
)


def _cache_file() -> str | bool:
    """Where Lark keeps the parse table between processes: a file in a directory only this user
    can write (Lark reads it with pickle, so never from a shared one such as /tmp), or no cache
    when there is none (the table is then built at start, about 1 s)."""
    import hashlib
    import os
    import stat
    import sys

    import lark

    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    folder = Path(root) / "gtpo"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = folder.stat()
    except OSError:
        return False
    private = info.st_uid == os.getuid() and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    if not private:
        return False
    key = f"{_GRAMMAR.read_text(encoding='utf-8')}{lark.__version__}{sys.version_info[:2]}"
    return str(folder / f"answer-grammar-{hashlib.sha256(key.encode()).hexdigest()[:16]}.lark")


@functools.cache
def _parser() -> Lark:
    return Lark(
        _GRAMMAR.read_text(encoding="utf-8"),
        parser="lalr",
        lexer="contextual",
        maybe_placeholders=False,
        cache=_cache_file(),  # the parse table: built in about 1 s, loaded in 20 ms
        postlex=_Tokens(),
        transformer=_Build(),
    )


@functools.lru_cache(maxsize=16384)
def parse(text: str) -> t.Answer | Unparsable:
    """The tree of ``text``, or where and why reading it stopped. Cached: a group's
    completions repeat their answers."""
    if not text.strip():
        return Unparsable(0, "empty")
    plain = _PLAIN_NUMBER.fullmatch(text)
    if plain is not None:  # most answers: the tree the grammar gives them, without the parser
        return _plain_number(plain)
    return _parsed(text)


def _parsed(text: str) -> t.Answer | Unparsable:
    """``parse`` by the grammar."""
    try:
        _reading.text = text
        node = _parser().parse(text)
    except UnexpectedInput as exc:
        token = getattr(exc, "token", None)
        if token is not None and token.type == "$END":
            return Unparsable(len(text), "unexpected end")
        return Unparsable(exc.pos_in_stream or 0, _message(exc, text))
    except LarkError as exc:  # a transformer's error: a shape the tree cannot hold
        cause = exc.__context__ or exc
        return Unparsable(0, f"{type(cause).__name__}: {cause}"[:200])
    if _depth(node) > MAX_DEPTH:
        return Unparsable(0, f"nested deeper than {MAX_DEPTH}")
    return node


# An integer or a decimal alone, with a sign: read directly into the grammar's tree for it.
_PLAIN_NUMBER = re.compile(r"(?P<sign>[-\u2212]?)(?P<digits>\d{1,40}(?:\.\d{1,40})?)")


def _plain_number(m: re.Match[str]) -> t.Answer:
    start, end = m.span("digits")
    node: t.Node = t.Num(m.group("digits"), span=(start, end))
    if m.group("sign"):
        node = t.Neg(node, span=(0, end))
    return t.Answer((node,), (), span=(0, end))


def _depth(node: t.Node) -> int:
    """The depth of a tree, counted without recursion."""
    deepest = 0
    stack = [(node, 1)]
    while stack:
        current, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in t.children(current))
    return deepest


def _message(exc: UnexpectedInput, text: str) -> str:
    position = exc.pos_in_stream or 0
    return f"unexpected {text[position : position + 20]!r}"
