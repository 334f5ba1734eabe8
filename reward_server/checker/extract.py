"""Text extraction: the answer from the response, the reference from the dataset label (the
response in the query is ``response.py``'s).

Every function here is linear in its input: they run in the event loop.
"""

from __future__ import annotations

import functools
import json
import re

from reward_server.protocol import ANSWER_CLOSE, ANSWER_OPEN


def answer_block(
    response: str, open_tag: str = ANSWER_OPEN, close_tag: str = ANSWER_CLOSE
) -> str | None:
    """Content of the last answer block (``<answer>…</answer>`` unless other tags are given),
    or None when there is none.

    Found with ``rfind`` rather than a lazy regex, which is quadratic on thousands of unclosed
    opening tags.
    """
    close = response.rfind(close_tag)
    if close < 0:
        return None
    start = response.rfind(open_tag, 0, close)
    return None if start < 0 else response[start + len(open_tag) : close]


def last_braced(text: str, command: str) -> str | None:
    """Content of the last ``\\command{…}`` in ``text`` with balanced braces, else None.

    Also accepts the brace-less ``\\boxed 5`` form (one token after a space).
    """
    start = text.rfind(command)
    while start >= 0:
        i = start + len(command)
        if i < len(text) and text[i] == "{":
            depth = 0
            for j in range(i, len(text)):
                ch = text[j]
                if ch == "{":
                    depth += 1
                elif ch == "}":
                    depth -= 1
                    if depth == 0:
                        return text[i + 1 : j]
            # Unbalanced: try an earlier occurrence.
        elif i < len(text) and text[i] == " ":
            token = text[i + 1 :].split(None, 1)
            if token:
                return token[0].rstrip("$.")
        start = text.rfind(command, 0, start)
    return None


_MATH_DELIMS = (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))
_UNESCAPED_DOLLAR = re.compile(r"(?<!\\)\$")
# The LaTeX commands whose argument is text (every reader of the checker uses this one list).
TEXT_COMMAND = r"\\(?:text(?:bf|it|rm|normal|sf)?|math(?:rm|bf|it)|mbox|operatorname|emph)"

# What may stand between two boxes of one list of answers: "\boxed{2}, \boxed{3}",
# "$\boxed{2}$ and $\boxed{3}$", "\boxed{3} \text{ or } \boxed{4}", and LaTeX's spacing and line
# breaks: "\boxed{2} \quad \boxed{3}", "\boxed{2} \\ \boxed{3}", "\boxed{2}\text{, }\boxed{3}".
# Matched by `_box_gap` a run at a time, never as one pattern of two fillers around an optional
# word: two quantifiers that can both take a space backtrack in quadratic time on a gap of
# spaces that is no gap (12,000 spaces before an "x" took 3 s).
_GAP_FILLER = re.compile(r"(?:[\s$,;&~]|\\(?:quad|qquad|[,;:! ])|\\\\|\\text\{\s*(?:[,;]\s*)?\})+")
# A part label of a multi-part answer: "(a)", "(ii)", "\text{(b) }", "b)". Between boxes it
# labels the next part ("(a) \boxed{3} (b) \boxed{5}" answers 3 and 5).
PART_LABEL = r"(?:\\text\{)?\s*(?:\(\s*)?(?P<label>[a-h]|i{1,3}|iv|vi{0,3})\s*\)\s*\}?"
_GAP_WORD = re.compile(r"(?:\\text\{\s*)?(?:and|or)(?:\s*\})?|" + PART_LABEL)
# What may surround the boxes of an answer without changing it: math delimiters, punctuation
# (`_WRAPPING_MARKS`, stripped from both ends first) and an answer phrase ("The final answer is
# \boxed{5}.").
_WRAPPING_MARKS = "$.,;:"  # and whitespace
_LEADING_MARKS = re.compile(rf"[\s{re.escape(_WRAPPING_MARKS)}]*")
_ANSWER_PHRASE = re.compile(
    r"(?:(?:so|thus|therefore|hence)?,?\s*(?:the\s+)?(?:final\s+)?(?:answer|result)(?:\s+is)?"
    r"\s*[:=]?)?",
    re.IGNORECASE,
)


# The name a worked solution assigns its next boxed value ("$x=\boxed{1}$ or $x=\boxed{2}$").
_GAP_NAME = re.compile(r"[A-Za-z](?:_\{?\w+\}?)?\s*=")


def _box_gap(text: str, start: int, end: int, named: bool = False) -> bool:
    """Whether ``text[start:end]`` only separates two boxes of one list: filler, at most one
    joining word or part label, filler; with ``named`` (a dataset's worked solution), then the
    name the next box is assigned to and filler. Linear in the gap's length."""
    i = _skip(_GAP_FILLER, text, start, end)
    word = _GAP_WORD.match(text, i, end) if i < end else None
    if word is not None:
        i = _skip(_GAP_FILLER, text, word.end(), end)
    name = _GAP_NAME.match(text, i, end) if named and i < end else None
    if name is not None:
        i = _skip(_GAP_FILLER, text, name.end(), end)
    return i == end


def _skip(pattern: re.Pattern[str], text: str, i: int, end: int) -> int:
    """Where the run of ``pattern`` that starts at ``text[i]`` ends (``i`` when there is none)."""
    m = pattern.match(text, i, end)
    return m.end() if m else i


def _only_wrapping(outside: str) -> bool:
    """Whether the text around an answer's boxes only wraps them (delimiters, punctuation, an
    answer phrase). The marks are stripped from both ends first, in linear time: one pattern
    with marks on both sides of an optional phrase took 4 s on 12,000 spaces before an "x"."""
    start = _skip(_LEADING_MARKS, outside, 0, len(outside))
    end = len(outside)
    while end > start and (outside[end - 1].isspace() or outside[end - 1] in _WRAPPING_MARKS):
        end -= 1
    return _ANSWER_PHRASE.fullmatch(outside, start, end) is not None


def _braced_at(text: str, i: int) -> int | None:
    """Index just past the group opened by ``text[i] == '{'``, or None if it never closes."""
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return j + 1
    return None


_BOX_OPEN = re.compile(r"\\(?:boxed|fbox)\{")
# Boxes inside boxes unwrapped at most this deep ("\\boxed{\\boxed{7}}" is two). Deeper ones stay
# as written, for the cost guard to refuse (too long or too nested): unwrapping them by recursion
# raised RecursionError at 400 levels, in an answer or a label, and failed the whole batch.
MAX_BOX_DEPTH = 8


def boxes(text: str) -> list[tuple[int, int, str]]:
    """Every balanced ``\\boxed{…}``/``\\fbox{…}`` as (start, end, content), left to right.

    Linear in ``text`` apart from the brace walks, which never overlap: a box's content is
    skipped, so a box nested in a box is part of its content.
    """
    found: list[tuple[int, int, str]] = []
    pos = 0
    while (hit := _BOX_OPEN.search(text, pos)) is not None:
        start, brace = hit.start(), hit.end() - 1
        end = _braced_at(text, brace)
        if end is None:
            return found
        found.append((start, end, text[brace + 1 : end - 1]))
        pos = end
    return found


def box_groups(
    found: list[tuple[int, int, str]], text: str, *, named: bool = False
) -> list[list[tuple[int, int, str]]]:
    """``boxes(text)`` (or a subset, left to right) joined into lists: boxes separated only by
    commas, "and", "or" or spacing are one list of answers, never two candidates. ``named``: in
    a dataset's worked solution, also boxes assigned to a name each (``x=\\boxed{1}`` or
    ``x=\\boxed{2}``: the roots 1 and 2)."""
    groups: list[list[tuple[int, int, str]]] = []
    for box in found:
        if groups and _box_gap(text, groups[-1][-1][1], box[0], named):
            groups[-1].append(box)
        else:
            groups.append([box])
    return groups


def _unwrap_delims(text: str) -> str:
    """Drop math delimiters around the whole text, never around two formulas: in ``$9$ eggs,
    so $18$`` the dollar signs at both ends belong to different formulas. Each layer moves two
    indices inwards (no copy per layer: linear however many layers ``\\(\\(\\(…`` nests)."""
    start, end = 0, len(text)
    changed = True
    while changed:
        changed = False
        for left, right in _MATH_DELIMS:
            long_enough = end - start >= len(left) + len(right)
            if long_enough and text.startswith(left, start) and text.endswith(right, start, end):
                inner, inner_end = start + len(left), end - len(right)
                if left.startswith("$") and _UNESCAPED_DOLLAR.search(text, inner, inner_end):
                    continue
                while inner < inner_end and text[inner].isspace():
                    inner += 1
                while inner_end > inner and text[inner_end - 1].isspace():
                    inner_end -= 1
                start, end = inner, inner_end
                changed = True
    return text[start:end]


# "\\boxed 5", "\\boxed {5}", "\\boxed5": the braces TeX lets a writer leave out. They are put back
# first, so that one rule finds every box: two brace-less boxes are a list like two braced ones
# ("\\boxed 3 or \\boxed 4" is two candidates, never the last one alone).
_BRACELESS_BOX = re.compile(
    r"\\(?P<cmd>boxed|fbox)(?![A-Za-z])(?:\s*\{|\s+(?P<token>[^\s{}$,;\\]+)|(?P<digits>\d+))"
)


# "\\boxed{5}": a doubled backslash before a command (text escaped once too often, as in JSON
# or a Python string) is that command. A doubled backslash before anything else is LaTeX's line
# break and stays ("1 \\ 2" in a matrix), as does one that a third backslash precedes.
_DOUBLED_BACKSLASH = re.compile(
    r"(?<!\\)\\\\(?=(?:boxed|fbox|d?frac|tfrac|sqrt|text|pi|cdot|times|infty|circ|left|right)"
    r"(?![A-Za-z]))"
)


def single_backslashes(text: str) -> str:
    """``text`` with every doubled backslash before a command made single."""
    return _DOUBLED_BACKSLASH.sub(r"\\", text) if "\\\\" in text else text


def normalize_boxes(text: str) -> str:
    """Boxes written so that ``boxes`` finds them: doubled backslashes made single, and the
    braces TeX lets a writer leave out put back (``\\boxed 5`` -> ``\\boxed{5}``)."""
    text = single_backslashes(text)
    return _brace_boxes(text) if "\\boxed" in text or "\\fbox" in text else text


def _brace_boxes(text: str) -> str:
    def braced(m: re.Match[str]) -> str:
        token = m.group("token") or m.group("digits")
        if token is None:
            return f"\\{m.group('cmd')}{{"
        stripped = token.rstrip(".")  # "\\boxed 5." ends a sentence
        return f"\\{m.group('cmd')}{{{stripped}}}{token[len(stripped) :]}"

    return _BRACELESS_BOX.sub(braced, text)


def unwrap_math(text: str, *, prose: bool = False, _depth: int = 0) -> str:
    """Remove ``\\boxed{}``/``\\fbox{}`` and math delimiters.

    Several boxes separated only by commas, "and" or "or" are one list of answers
    (``\\boxed{2}, \\boxed{3}`` -> ``2, 3``), so a second boxed candidate is never dropped. With
    ``prose`` (a dataset's worked solution) only the last such list counts. Otherwise (an answer
    or a bare reference) text outside the boxes is kept, boxes replaced by their content, unless
    it is only wrapping: "\\boxed{9} is wrong, the answer is 10" must not read as 9.
    """
    text = normalize_boxes(text.strip())
    found = boxes(text)
    if not found:
        return _unwrap_delims(text)
    group = box_groups(found, text, named=prose)[-1]
    outside = text[: group[0][0]] + " " + text[group[-1][1] :]
    alone = len(group) == len(found)
    if prose or (alone and (_only_wrapping(outside) or _after_working(text, group))):
        if _depth == MAX_BOX_DEPTH:
            return text  # boxes in boxes this deep are no answer: left for the cost guard
        # A box inside a box ("\\boxed{\\boxed{7}}") is unwrapped too; each level is shorter.
        return ", ".join(unwrap_math(c, prose=prose, _depth=_depth + 1) for _, _, c in group)
    pieces, pos = [], 0
    for start, end, content in found:
        pieces += [text[pos:start], content]
        pos = end
    return _unwrap_delims("".join([*pieces, text[pos:]]).strip())


def _after_working(text: str, group: list[tuple[int, int, str]]) -> bool:
    """Whether the boxes end the text after working written before them, in sentences of their
    own ("Step 1: 2+2=4. \\boxed{4}"): the text before the first box ends with a full stop or a
    colon, or a line break, before spacing and ``$``. A box inside a sentence ("the answer is
    10, not \\boxed{9}") or followed by text is not. Linear (string strips, no pattern)."""
    after = text[group[-1][1] :]
    if after.strip().strip(_WRAPPING_MARKS).strip():
        return False
    before = text[: group[0][0]]
    working = before.rstrip().rstrip("$").rstrip()
    return working.endswith((".", ":")) or "\n" in before[len(working) :]


def extract_answer(response: str) -> str | None:
    """The answer written in the response's last ``<answer>`` block, unwrapped; None if absent."""
    block = answer_block(response)
    if block is None:
        return None
    return unwrap_math(block)


_GSM8K = re.compile(r"####\s*(.+)")


def extract_reference(label: object) -> str | None:
    """The reference answer in a dataset label, detected automatically.

    GSM8K solutions end with ``#### 72``; MATH solutions put the answer in the last
    ``\\boxed{…}``; anything else is taken as the bare answer (``72``, ``\\frac{1}{2}``, ``(1,2)``).
    """
    if label is None or isinstance(label, bool):
        return None
    if isinstance(label, int | float):
        text = repr(label) if isinstance(label, float) else str(label)
    elif isinstance(label, str):
        text = label
    else:
        return None
    if "####" in text:
        hits = _GSM8K.findall(text)
        text = hits[-1] if hits else ""
    elif "\\boxed" in text or "\\fbox" in text:
        return unwrap_math(text, prose=True) or None
    text = unwrap_math(text)
    return text or None


# "The final answer is", "Answer:", "**Answer:**", and the "####" of GSM8K or a markdown heading
# before it: an announcement of the answer, never part of it.
_ANSWER_PREFIX = re.compile(
    r"\s*(?:#{1,6}\s*)?(?:(?:\*\*|__)?(?:the\s+)?(?:final\s+)?answer\b(?:\s+is)?\s*[:=]?\s*"
    r"(?:\*\*|__)?\s*)?",
    re.IGNORECASE,
)
# Markdown emphasis around the whole answer: "**18**", "*18*", "`18`".
_EMPHASIS = re.compile(r"(\*\*|__|\*|_|`)(?=\S)(.+?)(?<=\S)\1", re.DOTALL)


@functools.lru_cache(maxsize=16384)
def answer_text(text: str) -> str:
    """The answer an answer block or a label holds, for the grammar to read: its announcement
    ("The final answer is"), markdown emphasis around it, its boxes and math delimiters taken
    off (``unwrap_math``). Only what surrounds the answer goes; nothing inside it changes."""
    text = _unannounced(text.strip())
    text = unwrap_math(text)
    return _unannounced(text).strip()


def _unannounced(text: str) -> str:
    while (m := _EMPHASIS.fullmatch(text)) is not None:
        text = m.group(2).strip()
    m = _ANSWER_PREFIX.match(text)
    if m is not None and m.end() > 0:
        text = text[m.end() :]
    while (m := _EMPHASIS.fullmatch(text)) is not None:
        text = m.group(2).strip()
    return text


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
