"""Answers written as sentences: the one value a sentence states, or why it states none.

Instruct models often write the answer block as a sentence: ``Janet makes $18 every day at the
farmers' market.`` A careful grader who sees only the reference accepts a sentence that states
one value, where the other numbers are context, and refuses hedges, several candidates and
negations of the value. This module reads a sentence the way that grader does, with rules on
words rather than on any one phrasing:

* **context**: a number after a preposition or a determiner (``in 3 days``, ``every 2 days``,
  ``the 3 friends``), after a condition (``if x = 2``), before the verb that states the value
  (``the sum of the first 10 integers is 55``) or before a conclusion (``…, so she makes $18``)
  is context, not a candidate;
* **candidates**: the remaining values. One candidate, or a list of them joined by ``and``/
  ``or``/commas, is the answer; separate candidates that differ are several answers
  (``several_candidates``); restatements of the same value are one;
* **refusals**: a negation anywhere (``negated_answer``); a hedge word anywhere, or a bound or
  an approximation of the value (``more than 18``, ``about 18``, ``18 or more``:
  ``hedged_answer``); a sentence with no value at all (``prose_in_answer``).

The value comes back as text with its unit (``$18``, ``24 square units``, ``x = 2, x = 3``); the
answer policy and the exact rules then judge it like any short answer. Everything here is a
linear scan of the text (the cost guard has bounded its length already).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from reward_server.checker import policy, relations, syntax
from reward_server.checker.extract import PART_LABEL, TEXT_COMMAND, answer_text
from reward_server.checker.lexicon import (
    ADJECTIVES,
    ANSWER_WORDS,
    APPROXIMATE,
    APPROXIMATE_PAIRS,
    CLAUSE_WORDS,
    COMPARATIVES,
    CONCLUSIONS,
    CONDITIONS,
    CONTEXT_BEFORE,
    COPULAS,
    FILLERS,
    JOINERS,
    NOT_UNITS,
    OPERATION_NOUNS,
    OPERATIONS_AFTER,
    OPERATIONS_BEFORE,
    PREPOSITIONS,
    RESTATEMENT_MARKERS,
    SENTENCE_WORDS,
    WHICH_VERBS,
)
from reward_server.checker.numbers import number_word_value
from reward_server.checker.units import UNIT_NAMES, UNIT_WORDS
from reward_server.checker.values import Value, item_value, unwrapped
from reward_server.protocol import Reason

# Whether two values an answer states, read here, are one value by the exact rules: the
# comparison the decision hands the reader (reading does not import comparing).
SameValue = Callable[[Value, Value], bool | None]


@dataclass(frozen=True)
class Reading:
    """What a sentence states: ``phrases``, the words of each value it states with its unit
    (``18 apples``; several for a list, ``alternatives`` when joined by "or"), ``negative`` when
    a word before the value negates it ("minus 5"); or ``reason`` why it states none.
    ``value`` spells the phrases as one text, for a reader to see."""

    phrases: tuple[str, ...] = ()
    reason: Reason | None = None
    alternatives: bool = False
    negative: bool = False

    @property
    def value(self) -> str | None:
        if not self.phrases:
            return None
        text = (" or " if self.alternatives else ", ").join(self.phrases)
        return f"-{text}" if self.negative else text


def _refused(reason: Reason) -> Reading:
    return Reading((), reason)


# ------------------------------------------------------------------ patterns

_VALUE_COMMANDS = re.compile(r"\\(?:pi|sqrt|d?frac|tfrac|infty|emptyset|varnothing)(?![A-Za-z])")
_OPERATORS = re.compile(r"[+\-*/^=<>|,]|\\(?:times|cdot|div|le|ge|ne|lt|gt|in|cup|pm)(?![A-Za-z])")
_WORD = re.compile(r"[A-Za-z]+(?:['’][A-Za-z]+)*(?:-[A-Za-z]+)*")
_TEXT_COMMAND = re.compile(TEXT_COMMAND + r"\s*\{([^{}]*)\}")
_MARKDOWN = re.compile(r"\*\*|__|(?<![\w*\\])\*(?=\S)|(?<=\S)\*(?![\w*])|^#+\s*|`")
# "3-5 hours": a range of two numbers is a hedge, never a subtraction.
# "…, which is": a remark on the value before it when that is no sentence of its own.
_WHICH_IS = re.compile(r",?\s*\bwhich\s+(?:is|equals|means|makes|gives)\s+", re.IGNORECASE)
# A remark in a text command at the end: "13 \\text{ (which equals 12)}".
_TRAILING_TEXT = re.compile(TEXT_COMMAND + r"\s*\{([^{}]*)\}$")
_RANGE = re.compile(r"^\$?\d+(?:\.\d+)?(?:-|\u2013|\u2014)\$?\d+(?:\.\d+)?%?$")


# ------------------------------------------------------------------ tokens


@dataclass
class _Token:
    kind: str  # "word", "math" (a chunk of a value or a name) or "num" (a number word)
    text: str
    stop: str = ""  # punctuation after it: "." "," ";" ":" or ""


# Invisible marks (zero-width, bidirectional, variation selectors) separate nothing.
_INVISIBLE = dict.fromkeys(
    [
        *range(0x200B, 0x2010),
        *range(0x2060, 0x2065),
        *range(0x202A, 0x202F),
        *range(0x2066, 0x206A),
        *(0xFEFF, 0x00AD, 0x061C, 0xFE0E, 0xFE0F, 0),
    ]
)
_DOLLAR = re.compile(r"(?<!\\)\$")
_DOUBLE_DOLLAR = re.compile(r"(?<!\\)\$\$")


def _math_segments(text: str) -> list[tuple[str, bool]]:
    """Split ``text`` into (piece, is_math) at ``$…$``, ``$$…$$``, ``\\(…\\)`` and ``\\[…\\]``.

    A ``$`` before a number is a currency sign when no closing ``$`` follows before prose
    (``$18 and $5 each``); ``\\$`` always is."""
    pieces: list[tuple[str, bool]] = []
    pos = start = 0
    while pos < len(text):
        ch = text[pos]
        if ch == "\\" and text[pos + 1 : pos + 2] in ("(", "["):
            close = "\\)" if text[pos + 1] == "(" else "\\]"
            end = text.find(close, pos + 2)
            if end >= 0:
                pieces += [(text[start:pos], False), (text[pos + 2 : end], True)]
                pos = start = end + 2
                continue
        if ch == "\\":
            pos += 2  # an escaped character ("\$", "\{") is never a delimiter
            continue
        if ch == "$":
            double = text.startswith("$$", pos)
            width = 2 if double else 1
            close = (_DOUBLE_DOLLAR if double else _DOLLAR).search(text, pos + width)
            end = close.start() if close else -1
            inner = text[pos + width : end] if end >= 0 else ""
            currency = end < 0 or (
                re.match(r"\s*-?[\d.]", inner) is not None
                and re.search(r"\s[A-Za-z]{2,}", _TEXT_COMMAND.sub("", inner)) is not None
            )
            if not currency:
                pieces += [(text[start:pos], False), (inner, True)]
                pos = start = end + width
                continue
        pos += 1
    pieces.append((text[start:], False))
    return [(p, m) for p, m in pieces if p.strip()]


def _chunks(text: str) -> list[str]:
    """Whitespace-separated chunks of prose, never splitting inside braces."""
    chunks, depth, current = [], 0, []
    for ch in text:
        if ch in "{":
            depth += 1
        elif ch == "}":
            depth = max(0, depth - 1)
        if ch.isspace() and depth == 0:
            if current:
                chunks.append("".join(current))
            current = []
        else:
            current.append(ch)
    if current:
        chunks.append("".join(current))
    return chunks


def _tokens(text: str) -> list[_Token]:
    text = _MARKDOWN.sub(" ", text.translate(_INVISIBLE))
    tokens: list[_Token] = []
    for piece, is_math in _math_segments(text):
        if is_math:
            tokens.append(_Token("math", piece.strip()))
            continue
        # Words in a text command are prose: "18\text{ dollars}" is "18 dollars".
        piece = _TEXT_COMMAND.sub(lambda m: " " + m.group(1) + " ", piece)
        for chunk in _chunks(piece):
            if tokens and chunk.strip(".,;:!?") == "":
                tokens[-1].stop = tokens[-1].stop or chunk[0]  # "$x = 2$, then"
                continue
            tokens.extend(_classify(chunk))
    return _dashes(tokens)


_DASHES = frozenset({"-", "--", "---", "\u2013", "\u2014"})


def _dashes(tokens: list[_Token]) -> list[_Token]:
    """A dash between words is punctuation ("$18 - that is her profit"); between two pieces of
    math it is a minus ("16 - 3 = 13"). An em dash is always punctuation."""
    kept: list[_Token] = []
    for i, tok in enumerate(tokens):
        minus = tok.text in ("-", "\u2013") and i + 1 < len(tokens) and tokens[i + 1].kind == "math"
        if tok.kind == "math" and tok.text in _DASHES and not (minus and kept):
            if kept:
                kept[-1].stop = kept[-1].stop or ","
            continue
        kept.append(tok)
    return kept


def _classify(chunk: str) -> list[_Token]:
    """One chunk of prose as tokens: a word, a number word or a piece of math, with the
    punctuation after it."""
    stop = ""
    while chunk and chunk[-1] in ".,;:!?\"'’”" and not chunk.endswith("\\" + chunk[-1]):
        if chunk[-1] in ".,;:!?" and not stop:
            stop = chunk[-1]
        chunk = chunk[:-1]
    # A bracket that opens before the chunk or closes after it: "(that is, 0.5)".
    while chunk.endswith(")") and chunk.count(")") > chunk.count("("):
        chunk = chunk[:-1]
    while chunk.startswith("(") and chunk.count("(") > chunk.count(")"):
        chunk = chunk[1:]
    if chunk.lower().rstrip(".") in ("i.e", "e.g"):  # "i.e." and "e.g." are words, not math
        return [_Token("word", chunk.replace(".", ""), stop)]
    bare = chunk.strip("\"“‘'")
    if _WORD.fullmatch(bare) and (len(bare) > 1 or bare in ("a", "A", "I")):
        kind = "num" if number_word_value(bare) is not None else "word"
        return [_Token(kind, bare, stop)]
    return [_Token("math", chunk, stop)] if chunk else []


# ------------------------------------------------------------------ runs


@dataclass(frozen=True)
class _Run:
    """Consecutive pieces of math (``16 - 3 - 4 = 9``), or one number word, and its role in the
    sentence (``_roles``: context, a hedged value, a weak context)."""

    text: str
    first: int  # token index of its first piece
    last: int  # token index of its last piece
    value: bool  # states a value (a number, an expression); False: a name such as x or f(x)
    context: bool = False
    hedged: bool = False
    weak: bool = False  # context only by the preposition or determiner before it
    infinitive: bool = False  # weak as the object of an infinitive ("needs to pay $64")


def _runs(tokens: list[_Token]) -> list[_Run]:
    runs: list[_Run] = []
    depth = 0
    for i, tok in enumerate(tokens):
        joined = (
            runs
            and tok.kind == "math"
            and runs[-1].last == i - 1
            and tokens[i - 1].kind == "math"
            and (not tokens[i - 1].stop or (tokens[i - 1].stop == "," and depth > 0))
        )
        previous = tokens[i - 1] if i else None
        in_number = (
            runs
            and runs[-1].last == i - 1
            and tokens[runs[-1].first].kind == "num"
            and previous is not None
            and not previous.stop
        )
        if in_number and tok.kind != "math":
            # "twenty five", "one hundred and twelve", "three thousand": one number
            following = (
                tokens[i + 1].text if tok.text.lower() == "and" and i + 1 < len(tokens) else ""
            )
            extended = f"{runs[-1].text} {tok.text} {following}".strip()
            if number_word_value(extended) is not None:
                runs[-1] = replace(runs[-1], text=f"{runs[-1].text} {tok.text}", last=i)
                continue
        if tok.kind == "num":
            runs.append(_Run(tok.text, i, i, True))
            depth = 0
            continue
        if tok.kind != "math":
            depth = 0
            continue
        if joined:
            sep = ", " if tokens[i - 1].stop == "," else " "
            runs[-1] = replace(runs[-1], text=runs[-1].text + sep + tok.text, last=i)
        else:
            runs.append(_Run(tok.text, i, i, False))
            depth = 0
        depth += tok.text.count("(") + tok.text.count("[") - tok.text.count(")")
        depth -= tok.text.count("]")
    return [run if tokens[run.first].kind == "num" else _valued(run) for run in runs]


def _valued(run: _Run) -> _Run:
    """A run of math states a value when it holds a digit, a value command or an operation."""
    text = run.text
    value = (
        any(ch.isdigit() for ch in text)
        or _VALUE_COMMANDS.search(text) is not None
        or (_OPERATORS.search(text) is not None and re.search(r"[A-Za-z0-9]", text) is not None)
    )
    return replace(run, value=value)


def _word(tokens: list[_Token], i: int) -> str | None:
    """The lower-cased word at token ``i`` (None for math, a number word or out of range)."""
    if 0 <= i < len(tokens) and tokens[i].kind == "word":
        return tokens[i].text.lower().replace("’", "'")
    return None


# ------------------------------------------------------------------ reading


_PROSE_WORD = re.compile(
    r"(?<![\\A-Za-z])[A-Za-z]{2,}|(?<![\\A-Za-z])[aAI](?![A-Za-z])|(?<![A-Za-z])(?:i\.e|e\.g)\."
)
_ENVIRONMENT = re.compile(r"\\begin\{(\w+\*?)\}.*?\\end\{\1\}", re.DOTALL)
_CONTRACTION = re.compile(r"['’](?:s|re|ll|d|ve|m)$")


def is_sentence(text: str) -> bool:
    """Whether ``text`` holds prose beyond a short answer's words: two or more words that are
    not units, number words, multipliers or list joiners, or one word that only a sentence
    has (a verb, a preposition, a pronoun, a label with a colon). ``5 square feet``, ``7 or
    more`` and ``3 (or four)`` are short answers; ``Janet makes $18 every day``, ``When x = 2,
    y = 7`` and ``Total: $45`` are sentences."""
    if _PROSE_WORD.search(text) is None:  # no word outside commands: most answers
        return False
    text = _ENVIRONMENT.sub(" ", text)  # "\text{if } x > 0" in a cases block is no prose
    count = 0
    for tok in _tokens(text):
        w = _CONTRACTION.sub("", tok.text.lower())  # "it's", "that's": "it", "that"
        if tok.kind != "word" or w in JOINERS or w in UNIT_WORDS:
            continue
        if w in SENTENCE_WORDS or tok.stop == ":":  # "Total: $45" is a label and its value
            return True
        count += 1
    return count >= 2


def states_value(text: str) -> bool:
    """Whether ``text`` holds any value at all: a number, a number word or math."""
    return _states_value(_tokens(text))


def refusal(text: str) -> Reason | None:
    """Why the words around a boxed value refuse it: before it (``Perhaps the answer is
    \\boxed{18}``, ``It is not \\boxed{18}``, ``at least \\boxed{18}``) or after it (``\\boxed{7}
    or more``, ``\\boxed{9}, but that is wrong``); None when they do not (``policy.refusal``)."""
    return _refusal(_tokens(text))


def states_or_refuses(text: str) -> bool:
    """``states_value(text) or refusal(text) is not None``, tokenised once."""
    tokens = _tokens(text)
    return _states_value(tokens) or _refusal(tokens) is not None


def _states_value(tokens: list[_Token]) -> bool:
    return any(run.value for run in _runs(tokens))


def _refusal(tokens: list[_Token]) -> Reason | None:
    return policy.refusal([_word(tokens, i) for i in range(len(tokens))], bound_at_end=True)


def _remarked_value(text: str, same_value: SameValue) -> Reading | None:
    """A value with a remark in brackets after it ("3 (which is 4)", "4 (that's 2^2)") states
    that value; a remark that states another value makes two candidates ("3 (which is 4)"
    claims the 4 it never wrote as its answer). None when ``text`` is no such value and remark.
    Linear (string searches, no pattern)."""
    body = text.strip().rstrip(".!").rstrip()
    wrapped = _TRAILING_TEXT.search(body)
    which = _WHICH_IS.search(body) if "(" not in body else None
    if which is not None and not is_sentence(body[: which.start()]):
        # "13, which is 12": a value and a remark on it, not working and its conclusion
        value, remark = body[: which.start()].strip(), body[which.end() :].strip()
        if not value or not states_value(remark):
            return None
        if not _restatements([value, remark], same_value):
            return _refused(Reason.SEVERAL_CANDIDATES)
        return Reading((value,))
    if wrapped is not None and wrapped.group(1).strip().startswith("("):
        # "13 \\text{ (which equals 12)}": the remark in a text command
        value, remark = body[: wrapped.start()].strip(), wrapped.group(1).strip()
        if not remark.endswith(")"):
            return None
        remark = remark[1:-1]
    else:
        opening = body.rfind("(")
        if not body.endswith(")") or opening < 1:
            return None
        value, remark = body[:opening].strip(), body[opening + 1 : -1]
    if not value or any(c in value or c in remark for c in "()"):
        return None
    if any(part.count("{") != part.count("}") for part in (value, remark)):
        return None  # "0.75 \\text{ (that is, } \\frac{3}{4})": brackets across braces
    if is_sentence(value) or not is_sentence(remark):
        return None
    reading = read(remark, same_value)
    if reading.value is None:
        return None
    if not _restatements([value, reading.value], same_value):
        return _refused(Reason.SEVERAL_CANDIDATES)
    return Reading((value,))


def read(text: str, same_value: SameValue) -> Reading:
    """The one value ``text`` states (with its unit), or the reason it states none.
    ``same_value``: whether two values it states are one value by the exact rules (the
    decision passes ``compare.same_value``): a restatement (``3/4, or 0.75``) is one
    candidate, and a step of the working between numbers that is not equal is false."""
    remarked = _remarked_value(text, same_value)
    if remarked is not None:
        return remarked
    tokens = _tokens(text)
    words = [_word(tokens, i) for i in range(len(tokens))]
    refused = policy.refusal(words)
    if refused is not None:
        return _refused(refused)

    runs, answered = _roles(_runs(tokens), tokens, words)

    if not _markers_restate(runs, tokens, words, same_value):
        return _refused(Reason.SEVERAL_CANDIDATES)  # "13 (that is, 12)"
    if any(_false_step(r.text, same_value) for r in runs if r.context):
        return _refused(Reason.FALSE_EQUATION)  # "16 - 3 = 12, so ...": false working
    candidates = [r for r in runs if not r.context and (r.value or _after_copula(r, words))]
    for prev, run in itertools.pairwise(runs):  # "(B) and (D)": names listed after a copula
        listed = all(g in JOINERS or g == "," for g in _between(prev, run, tokens, words))
        if prev in candidates and run not in candidates and not run.context and listed:
            candidates.append(run)
    weak = [r for r in runs if r.value and r.weak and not r.hedged]
    # Never a number after "of": "the reciprocal of 42", "half of 36" name another value.
    alone = len(weak) == 1 and words[weak[0].first - 1] != "of"
    objects = [r for r in weak if r.infinitive]
    if not candidates and not any(r.hedged for r in runs):
        if alone:
            # The only number the sentence states, after a preposition: "the car travels at 60
            # mph", "…, leaving him with 5 apples", "she needs to buy 3 more bags".
            candidates = weak
        elif len(objects) == 1:
            # The object of the sentence's one infinitive, whatever prepositions follow it:
            # "she needs to pay $64 for 16 cups" states 64; 16 locates it.
            candidates = objects
    differences = [r for r in candidates if _comparative(r, tokens, words)]
    if differences and len(differences) < len(candidates):
        # "Zoe ran 26 laps, 4 laps more than Tim": the difference is a comparison, not a
        # second answer; alone ("5 more apples than Tom") it is the value.
        candidates = [r for r in candidates if r not in differences]
    if any(r.hedged for r in candidates):
        return _refused(Reason.HEDGED_ANSWER)
    if any(run.first > 0 and words[run.first - 1] in OPERATIONS_BEFORE for run in candidates):
        return _refused(Reason.MULTIPLIER_WORD)
    if any(_operation_after(run, tokens, words) for run in candidates):
        return _refused(Reason.MULTIPLIER_WORD)  # "4 to the power of 2" is 16
    if not candidates:
        hedged = any(r.hedged for r in runs)
        return _refused(Reason.HEDGED_ANSWER if hedged else Reason.PROSE_IN_ANSWER)

    groups = _groups(candidates, tokens, words)
    values = [", ".join(_with_unit(r, tokens, words) for r in g) for g in groups]
    if len(set(values)) > 1 and not _restatements(values, same_value):
        return _refused(Reason.SEVERAL_CANDIDATES)
    last = groups[-1]
    items = [_with_unit(r, tokens, words) for r in last]
    alternatives = _joined_by(last, tokens, words, "or")
    if alternatives and _restatements(items, same_value):
        items = items[:1]  # "3/4, or 0.75": one value spelled twice
    negative = words[last[0].first - 1 : last[0].first] in (["negative"], ["minus"])
    reading = Reading(tuple(items), alternatives=alternatives, negative=negative)
    restated = [reading.value or "", *(_with_unit(r, tokens, words) for r in answered)]
    if answered and not _restatements(restated, same_value):
        return _refused(Reason.SEVERAL_CANDIDATES)  # "the answer is 20, so 18"
    return reading


def _roles(
    runs: list[_Run], tokens: list[_Token], words: list[str | None]
) -> tuple[list[_Run], list[_Run]]:
    """Each run with its role in the sentence, in passes whose order matters (each reads the
    roles the ones before it gave): the words right before it (``_own_role``); the upper end
    of a range ("between 18 and 20"); a clause a condition opens (``_in_conditions``); the
    subject of the first copula (``_in_subject``); the working before a conclusion
    (``_before_conclusion``, which also returns the values that working stated as an answer)."""
    runs = [_own_role(run, tokens, words) for run in runs]
    for k in range(1, len(runs)):  # "between 18 and 20": both ends are bounds
        prev, run = runs[k - 1], runs[k]
        if prev.hedged and _between(prev, run, tokens, words) == ["and"]:
            runs[k] = replace(run, hedged=True, context=True)
    runs = _in_conditions(runs, tokens, words)
    runs = _in_subject(runs, tokens, words)
    return _before_conclusion(runs, tokens, words)


def _as_context(run: _Run) -> _Run:
    """Context that is no weak context: a number of the working, never the answer."""
    return replace(run, context=True, weak=False)


def _own_role(run: _Run, tokens: list[_Token], words: list[str | None]) -> _Run:
    """A hedged value (a range, ``\\approx``), or context or a bound from the words right
    before the run."""
    if _RANGE.match(run.text) or run.text.startswith(("\\approx", "\\sim", "~", "\u2248")):
        run = replace(run, hedged=True)
    w1 = words[run.first - 1] if run.first >= 1 else None
    w2 = words[run.first - 2] if run.first >= 2 else None
    if w1 in APPROXIMATE or (w2, w1) in APPROXIMATE_PAIRS:
        return replace(run, hedged=True, context=True)
    if w1 == "of" and _names_the_value(words, run.first - 2):
        return run  # "a profit of $5,000", "a total of 12 eggs": the value of the noun
    # "by selling 9", "after spending $12" (never across punctuation, never "making $18")
    gerund = (
        w1 is not None
        and w1.endswith("ing")
        and w1 not in CONCLUSIONS
        and w2 in PREPOSITIONS
        and not tokens[run.first - 2].stop
    )
    # "ways to choose 3 books", "to drive 100 miles": the object of an infinitive
    infinitive = w2 == "to" and w1 is not None and w1 not in NOT_UNITS
    if (
        w1 in CONTEXT_BEFORE
        or ((w1 in ADJECTIVES or gerund) and w2 in CONTEXT_BEFORE)
        or infinitive
    ):
        run = replace(run, context=True, weak=w1 not in CONDITIONS, infinitive=infinitive)
    # "one of them", "one another": a pronoun, not the number 1
    after = words[run.last + 1] if run.last + 1 < len(tokens) else None
    if tokens[run.first].kind == "num" and run.text.lower() == "one" and after in ("of", "another"):
        return _as_context(run)
    return run


def _markers_restate(
    runs: list[_Run], tokens: list[_Token], words: list[str | None], same_value: SameValue
) -> bool:
    """Whether every restatement marker stands between two statements of one value: the value
    right before it (a unit word between allowed) and the first value after it."""
    for i in range(len(words)):
        marker = next((m for m in RESTATEMENT_MARKERS if tuple(words[i : i + len(m)]) == m), None)
        if marker is None:
            continue
        before = [r for r in runs if r.value and i - 2 <= r.last < i]
        after = [r for r in runs if r.value and r.first >= i + len(marker)]
        if before and after:
            values = [_with_unit(before[-1], tokens, words), _with_unit(after[0], tokens, words)]
            if not _restatements(values, same_value):
                return False
    return True


def _names_the_value(words: list[str | None], i: int) -> bool:
    """Whether the words ending at ``i`` are "a/an [adjectives] noun", a noun that the value
    after "of" is the value of ("a profit of", "a total of", "an average speed of"), or the
    noun "total" ("the total of"); never an operation noun ("a third of", "a multiple of")."""
    if i < 0 or words[i] is None or words[i] in OPERATION_NOUNS:
        return False
    if words[i] == "total":
        return True
    for j in range(i - 1, max(i - 4, -1), -1):
        w = words[j]
        if w in ("a", "an"):
            return True
        if w is None or w in NOT_UNITS or w in OPERATION_NOUNS:
            return False
    return False


def _after_copula(run: _Run, words: list[str | None]) -> bool:
    """A name is a candidate only right after a copula ("the answer is $ab$")."""
    i = run.first - 1
    while i >= 0 and words[i] in FILLERS:
        i -= 1
    return i >= 0 and words[i] in COPULAS


def _operation_after(run: _Run, tokens: list[_Token], words: list[str | None]) -> bool:
    """An operation in words right after the value (``4 to the power of 2``, ``6 times 3``,
    ``9 divided by 3``): the sentence names another value."""
    for i in range(run.last + 1, min(run.last + 5, len(tokens))):
        if words[i] in OPERATIONS_AFTER:
            return True
        if tokens[i].stop or words[i] is None:
            return False
    return False


def _comparative(run: _Run, tokens: list[_Token], words: list[str | None]) -> bool:
    """``4 laps more than Tim``: the run is a difference, a comparative and "than" follow it."""
    ahead = words[run.last + 1 : run.last + 6]
    for i, w in enumerate(ahead):
        if w in COMPARATIVES:
            return "than" in ahead[i + 1 : i + 3]
        if w is None or tokens[run.last + 1 + i].stop:
            return False
    return False


def _in_conditions(runs: list[_Run], tokens: list[_Token], words: list[str | None]) -> list[_Run]:
    """A clause that a condition opens ("if each of the 5 workers paints 4 walls, …", "…
    when her brother turns 12") is context up to its punctuation or the end."""
    starts = {run.first for run in runs if run.value}
    clauses: list[tuple[int, int]] = []
    start = None
    for i, tok in enumerate(tokens):
        if words[i] in CONDITIONS and start is None:
            start = i
            continue
        # The clause also ends at the main verb: "the remainder when N is divided by 7 is 2".
        j = i + 1
        while j < len(tokens) and words[j] in FILLERS:
            j += 1
        main_verb = words[i] in COPULAS and j in starts
        if start is not None and (tok.stop or i == len(tokens) - 1 or main_verb):
            clauses.append((start, i - 1 if main_verb else i))
            start = None
    return [
        _as_context(run) if any(a < run.first and run.last <= b for a, b in clauses) else run
        for run in runs
    ]


def _in_subject(runs: list[_Run], tokens: list[_Token], words: list[str | None]) -> list[_Run]:
    """Numbers in the subject of the first copula that a value follows are context: from the
    start of that clause (after the last punctuation or "and"/"but") to the copula."""
    for run in runs:
        if not run.value or run.context:
            continue
        i = run.first - 1
        while i >= 0 and words[i] in FILLERS:
            i -= 1
        colon = i >= 0 and tokens[i].kind == "word" and tokens[i].stop == ":"
        if i >= 0 and (words[i] in COPULAS or colon):
            start = i - 1
            while start >= 0 and not tokens[start].stop and words[start] not in CLAUSE_WORDS:
                start -= 1
            return [
                _as_context(other) if start < other.first and other.last < i else other
                for other in runs
            ]
    return runs


def _before_conclusion(
    runs: list[_Run], tokens: list[_Token], words: list[str | None]
) -> tuple[list[_Run], list[_Run]]:
    """Numbers before the last conclusion word that a value follows are the working. Returns
    the runs, and the values that working already stated as an answer ("the answer is 20, so
    18"): the conclusion must restate them, or they are a second candidate."""
    cut = None
    for i, w in enumerate(words):
        following = words[i + 1] if i + 1 < len(words) else None
        # "…, which is 120 plants" and "…, for a total of 72" conclude as well
        previous = words[i - 1] if i else None  # "5 of which are red" concludes nothing
        concluding = (
            (w == "which" and following in WHICH_VERBS and previous != "of")
            or (w == "total" and following == "of")
            or (w in ANSWER_WORDS and (tokens[i].stop == ":" or following in COPULAS))
        )
        if (w in CONCLUSIONS or concluding) and any(
            r.first > i and r.value and (r.weak or not r.context) for r in runs
        ):
            cut = i
    if cut is None:
        return runs, []
    answered = []
    if any(w in ANSWER_WORDS for w in words[:cut]):
        answered = [r for r in runs if r.value and r.last < cut and not r.context]
    return [_as_context(run) if run.last < cut else run for run in runs], answered


def _between(a: _Run, b: _Run, tokens: list[_Token], words: list[str | None]) -> list[str]:
    """The words between two runs (units of the first one excluded), with "," for commas."""
    gap = []
    if tokens[a.last].stop:
        gap.append(tokens[a.last].stop)
    for i in range(a.last + 1, b.first):
        w = words[i]
        if w is None:
            gap.append("#")  # a value in between: never a plain list
        elif not (gap == [] and w not in NOT_UNITS):
            gap.append(w)
        if tokens[i].stop:
            gap.append(tokens[i].stop)
    return gap


def _groups(runs: list[_Run], tokens: list[_Token], words: list[str | None]) -> list[list[_Run]]:
    """Candidates joined only by commas, "and" or "or" (units aside) form one list."""
    groups = [[runs[0]]]
    for prev, run in itertools.pairwise(runs):
        gap = _between(prev, run, tokens, words)
        if gap and all(g in JOINERS or g == "," for g in gap):
            groups[-1].append(run)
        else:
            groups.append([run])
    return groups


def _joined_by(group: list[_Run], tokens: list[_Token], words: list[str | None], w: str) -> bool:
    return any(w in _between(a, b, tokens, words) for a, b in itertools.pairwise(group))


def _with_unit(run: _Run, tokens: list[_Token], words: list[str | None]) -> str:
    """The run and the unit words right after it: ``18 apples``, ``24 square units``, ``60
    miles per hour``; at most two words, never a function word."""
    text, i, taken = run.text, run.last + 1, 0
    if tokens[run.last].stop:
        return text
    while i < len(tokens) and taken < 2:
        w = words[i]
        if w is None or (w in NOT_UNITS and w != "per"):
            break
        if w == "per":  # "miles per hour": a compound unit, not the context "per day"
            nxt = words[i + 1] if i + 1 < len(tokens) else None
            if taken == 0 or nxt is None or nxt not in UNIT_NAMES:
                break
            text += f" per {tokens[i + 1].text}"
            break
        text += " " + tokens[i].text
        taken += 1
        if tokens[i].stop:
            break
        i += 1
    return text


def _false_step(text: str, same_value: SameValue) -> bool:
    """A calculation in the working with a step between numbers that does not hold."""
    if "=" not in text:
        return False
    node = syntax.parse(answer_text(text))
    split = None if isinstance(node, syntax.Unparsable) else relations.equation(unwrapped(node))
    return split is not None and any(
        same_value(item_value(a), item_value(b)) is False
        for a, b in relations.checked_steps(split[1])
    )


def _restatements(values: list[str], same_value: SameValue) -> bool:
    """Whether every candidate states the first one's value, by the exact rules (``18``,
    ``$18``, ``18 dollars``; ``\\frac{3}{4}`` and ``0.75``; ``0.25`` and ``25%``)."""
    read = [_value(v) for v in values]
    if any(v is None for v in read):
        return False
    first = read[0]
    return all(same_value(v, first) for v in read[1:])  # type: ignore[arg-type]


def _value(text: str) -> Value | None:
    """The value a candidate's text states, its unit taken off; None when it is no notation."""
    node = syntax.parse(answer_text(text))
    if isinstance(node, syntax.Unparsable):
        return None
    split = relations.equation(unwrapped(node))
    if split is not None and split[0] is not None and split[0].plain and len(split[1]) == 1:
        return item_value(split[1][0])  # "x = 7" states 7
    return item_value(node)


# ------------------------------------------------------------------ parts named in prose

_SEQUENCES = ("abcdefgh", ("i", "ii", "iii", "iv", "v", "vi", "vii", "viii"))


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
