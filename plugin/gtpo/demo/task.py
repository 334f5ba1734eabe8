"""The synthetic task: multi-step integer arithmetic answered in the paper's format.

A prompt is an expression such as ``3+4-2+6-1=`` (5 to 7 one-digit operands by default,
``+`` and ``-``, evaluated left to right, every intermediate value >= 0); the completion,
about 40 tokens, is

    <reasoning>…</reasoning><answer>10</answer>

The reasoning comes in several *styles* that differ in wording, order and length, so that, as
with real LLM outputs, the only spans a whole group of completions shares are the formatting
tags (paper Sec. 4.1). The demonstrations of the warm start are noisy on purpose: arithmetic
slips (far more often in the shortest style, so wrong answers come with shorter reasoning, the
case where GRPO penalises the shared prefix), answers that do not follow the reasoning, and
broken formats. The policy therefore starts imperfect, with room for RL to improve.

Everything here is pure Python driven by an explicit `random.Random`, so a seed fixes the data.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from reward_server.protocol import ANSWER_CLOSE as A_CLOSE
from reward_server.protocol import ANSWER_OPEN as A_OPEN
from reward_server.protocol import REASONING_CLOSE as R_CLOSE
from reward_server.protocol import REASONING_OPEN as R_OPEN
from reward_server.protocol import formatted

TAGS = (R_OPEN, R_CLOSE, A_OPEN, A_CLOSE)

# Seed of the problem set. Fixed (not the training seed) so that every run, whatever its
# --seeds, trains on the same prompts and is evaluated on the same held-out prompts.
TASK_SEED = 1234

# 4-6 steps per problem: a completion runs to about 30-60 tokens, of which the five tokens every
# completion shares (the four tags and the end token) are a small share, as in the paper's
# regime of long completions (Sec. 4.1).
N_OPERANDS = (5, 6, 7)

STYLES = ("chain", "words", "running", "regroup", "short")
# How often each style appears in the demonstrations, and how often it holds an arithmetic
# slip: the short style is wrong half the time, so wrong answers come with shorter reasoning.
STYLE_WEIGHTS = {"chain": 0.25, "words": 0.2, "running": 0.15, "regroup": 0.15, "short": 0.25}
SLIP_RATE = {"chain": 0.12, "words": 0.12, "running": 0.1, "regroup": 0.12, "short": 0.5}
MISMATCH_RATE = 0.06  # the answer does not follow the reasoning
BROKEN_FORMAT_RATE = 0.2
BROKEN_FORMATS = (
    "no_reasoning_close",
    "no_answer_tags",
    "trailing_text",
    "no_reasoning",
    "answer_first",
)


@dataclass(frozen=True)
class Problem:
    """``operands[0] ops[0] operands[1] ops[1] …``, evaluated left to right."""

    operands: tuple[int, ...]
    ops: tuple[str, ...]

    @property
    def prompt(self) -> str:
        text = str(self.operands[0])
        for op, value in zip(self.ops, self.operands[1:], strict=True):
            text += f"{op}{value}"
        return text + "="

    @property
    def answer(self) -> int:
        return running_values(self)[-1]


def running_values(problem: Problem) -> list[int]:
    """The value after each step, starting with the first operand: ``3+4-2`` -> [3, 7, 5]."""
    values = [problem.operands[0]]
    for op, value in zip(problem.ops, problem.operands[1:], strict=True):
        values.append(values[-1] + value if op == "+" else values[-1] - value)
    return values


def random_problem(rng: random.Random, n_operands: tuple[int, ...] = N_OPERANDS) -> Problem:
    """One of `n_operands` one-digit operands (default 5 to 7); a ``-`` only where the running
    value stays >= 0."""
    n_operands = rng.choice(n_operands)
    operands = [rng.randint(1, 9)]
    ops: list[str] = []
    total = operands[0]
    for _ in range(n_operands - 1):
        value = rng.randint(1, 9)
        op = rng.choice("+-") if total - value >= 0 else "+"
        total = total + value if op == "+" else total - value
        ops.append(op)
        operands.append(value)
    return Problem(tuple(operands), tuple(ops))


@dataclass(frozen=True)
class TaskSplit:
    train: list[Problem]
    heldout: list[Problem]


def make_split(
    n_train: int, n_heldout: int, seed: int = TASK_SEED, n_operands: tuple[int, ...] = N_OPERANDS
) -> TaskSplit:
    """Distinct problems; no held-out prompt ever appears in the training list."""
    rng = random.Random(seed)
    seen: set[str] = set()
    problems: list[Problem] = []
    while len(problems) < n_train + n_heldout:
        problem = random_problem(rng, n_operands)
        if problem.prompt not in seen:
            seen.add(problem.prompt)
            problems.append(problem)
    # Held-out first: its content does not depend on how many training prompts are asked for.
    return TaskSplit(train=problems[n_heldout:], heldout=problems[:n_heldout])


def _slip(rng: random.Random, value: int) -> int:
    """A plausible arithmetic mistake: off by 1 or 2, never negative."""
    delta = rng.choice((-2, -1, 1, 2))
    return value + delta if value + delta >= 0 else value - delta


def _steps_with_slip(problem: Problem, rng: random.Random, slip: bool) -> list[int]:
    """Running values; with `slip`, one step is miscomputed and the error carries forward."""
    values = [problem.operands[0]]
    wrong_step = rng.randrange(1, len(problem.operands)) if slip else -1
    for i, (op, value) in enumerate(zip(problem.ops, problem.operands[1:], strict=True), 1):
        nxt = values[-1] + value if op == "+" else values[-1] - value
        values.append(_slip(rng, nxt) if i == wrong_step else max(nxt, 0))
    return values


def reasoning_text(problem: Problem, style: str, values: list[int]) -> str:
    """The reasoning of one style for the given running values (values[-1] is its result)."""
    a, rest = problem.operands[0], list(zip(problem.ops, problem.operands[1:], strict=True))
    if style == "chain":  # 3+4=7, 7-2=5
        parts = [f"{values[i]}{op}{b}={values[i + 1]}" for i, (op, b) in enumerate(rest)]
        return ", ".join(parts)
    if style == "words":  # 3 plus 4 is 7, minus 2 is 5
        words = {"+": "plus", "-": "minus"}
        parts = [f"{words[op]} {b} is {values[i + 1]}" for i, (op, b) in enumerate(rest)]
        return f"{a} " + ", ".join(parts)
    if style == "running":  # start 3, add 4 get 7, take 2 get 5
        words = {"+": "add", "-": "take"}
        parts = [f"{words[op]} {b} get {values[i + 1]}" for i, (op, b) in enumerate(rest)]
        return f"start {a}, " + ", ".join(parts)
    if style == "regroup":  # additions first, then subtractions: add 3+4=7, take 2, 7-2=5
        plus = [a] + [b for op, b in rest if op == "+"]
        minus = [b for op, b in rest if op == "-"]
        total = sum(plus)
        result = values[-1]
        if not minus:
            return f"add {'+'.join(map(str, plus))}={result}"
        # A slip shows up in the subtraction line, so the reasoning still ends on `result`.
        taken = "+".join(map(str, minus))
        return (
            f"add {'+'.join(map(str, plus))}={total}, take {taken}, {total}-{sum(minus)}={result}"
        )
    if style == "short":  # 3, 7, 5 so 5: running values only, no operations written
        return ", ".join(map(str, values)) + f" so {values[-1]}"
    raise ValueError(f"unknown reasoning style {style!r}; expected one of {STYLES}")


def format_completion(reasoning: str, answer: str, broken: str | None = None) -> str:
    """The paper's format, or one of `BROKEN_FORMATS` (each scores < 10 on the server)."""
    if broken is None:
        return formatted(reasoning, answer)
    if broken == "no_reasoning_close":
        return f"{R_OPEN}{reasoning}{A_OPEN}{answer}{A_CLOSE}"
    if broken == "no_answer_tags":
        return f"{R_OPEN}{reasoning}{R_CLOSE}{answer}"
    if broken == "trailing_text":
        return f"{formatted(reasoning, answer)} so {answer}"
    if broken == "no_reasoning":
        return f"{A_OPEN}{answer}{A_CLOSE}"
    if broken == "answer_first":
        return f"{A_OPEN}{answer}{A_CLOSE}{R_OPEN}{reasoning}{R_CLOSE}"
    raise ValueError(f"unknown broken format {broken!r}; expected one of {BROKEN_FORMATS}")


@dataclass(frozen=True)
class Demonstration:
    completion: str
    style: str
    correct: bool  # the answer in the completion equals the problem's answer
    well_formed: bool


def demonstration(problem: Problem, rng: random.Random) -> Demonstration:
    """One noisy demonstration: a random style, maybe a slip, a mismatch, a broken format."""
    style = rng.choices(STYLES, weights=[STYLE_WEIGHTS[s] for s in STYLES])[0]
    values = _steps_with_slip(problem, rng, slip=rng.random() < SLIP_RATE[style])
    answer = values[-1]
    if rng.random() < MISMATCH_RATE:
        answer = _slip(rng, answer)
    broken = rng.choice(BROKEN_FORMATS) if rng.random() < BROKEN_FORMAT_RATE else None
    text = format_completion(reasoning_text(problem, style, values), str(answer), broken)
    return Demonstration(text, style, answer == problem.answer, broken is None)


def clean_completion(problem: Problem, style: str) -> str:
    """A correct, well-formed completion of the given style (for tests and the tokenizer)."""
    return format_completion(
        reasoning_text(problem, style, running_values(problem)), str(problem.answer)
    )


def corpus(problems: list[Problem]) -> list[str]:
    """Text covering every token the task can produce, to train the tokenizer on."""
    texts = []
    for problem in problems:
        texts.append(problem.prompt)
        texts.extend(clean_completion(problem, style) for style in STYLES)
        texts.append(format_completion("x", str(problem.answer), "trailing_text"))
    return texts


_STYLE_PATTERNS = (
    ("short", re.compile(r"\d+, \d")),
    ("running", re.compile(r"start \d")),
    ("regroup", re.compile(r"add \d")),
    ("words", re.compile(r"\d+ (plus|minus) \d")),
    ("chain", re.compile(r"\d+[+-]\d+=")),
)


def style_of(completion: str) -> str:
    """The reasoning style a completion opens with (one of `STYLES`), else ``"other"``.

    Used to report how RL shifts the mix of styles (e.g. towards the short, error-prone one).
    """
    if not completion.startswith(R_OPEN):
        return "other"
    body = completion[len(R_OPEN) :]
    for style, pattern in _STYLE_PATTERNS:
        if pattern.match(body):
            return style
    return "other"
