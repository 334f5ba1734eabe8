"""What the reward server and its clients share: the reward scale, the response formats (each
declared once, as a profile) and the verdict reasons.

Standard library only: the training side (``gtpo``) imports this module without the server's
dependencies (FastAPI, pydantic, Lark, sympy) installed.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

# The environment variable holding the server's API token: the server's setting, and where
# gtpo-openrlhf takes the token its rollout actors send as ``Authorization: Bearer``.
API_TOKEN_ENV = "GTPO_RS_API_TOKEN"

# The paper's reward scale: format 0..10, accuracy 0 or 10, total 0..20.
FORMAT_MAX = 10.0
ACCURACY_CORRECT = 10.0
TOTAL_MAX = FORMAT_MAX + ACCURACY_CORRECT

# The paper's completion format: <reasoning>…</reasoning><answer>…</answer>.
REASONING_OPEN = "<reasoning>"
REASONING_CLOSE = "</reasoning>"
ANSWER_OPEN = "<answer>"
ANSWER_CLOSE = "</answer>"
# Reasoning models' block (DeepSeek-R1 distills, Qwen3 in thinking mode, QwQ).
THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"


@dataclass(frozen=True)
class ResponseFormat:
    """One response format: where a completion's reasoning and its final answer are.

    Declared once here and read by the format reward and the answer extraction
    (``reward_server.checker.format``), the scorer and its reasons, the routes' ``?format=``, the
    client, ``gtpo eval`` and the demo.

    reasoning: the tags of the reasoning block, or None when the format has none.
    answer: the tags of the answer block, or None when the format has none.
    boxed: without an answer block, the final ``\\boxed{}`` is the answer.
    prefill: the reasoning block's opening tag may end the prompt instead of the response (a
        chat template that writes ``<think>`` after the assistant header).
    """

    name: str
    summary: str
    reasoning: tuple[str, str] | None
    answer: tuple[str, str] | None
    boxed: bool
    prefill: bool

    def formatted(self, reasoning: str, answer: str) -> str:
        """A completion in this format's full shape, with ``answer`` as its final answer."""
        if not self.boxed:
            r_open, r_close = self.reasoning or ("", "")
            a_open, a_close = self.answer or ("", "")
            return f"{r_open}{reasoning}{r_close}{a_open}{answer}{a_close}"
        final = f"The final answer is $\\boxed{{{answer}}}$."
        if self.reasoning is None:
            return f"{reasoning}\n\n{final}"
        r_open, r_close = self.reasoning
        return f"{r_open}\n{reasoning}\n{r_close}\n\n{final}"


PAPER = ResponseFormat(
    "paper",
    "<reasoning>…</reasoning><answer>…</answer> (the paper's format; the opening <reasoning> "
    "may end the prompt)",
    reasoning=(REASONING_OPEN, REASONING_CLOSE),
    answer=(ANSWER_OPEN, ANSWER_CLOSE),
    boxed=False,
    prefill=True,
)
THINK = ResponseFormat(
    "think",
    "<think>…</think>, then the final answer: an <answer> block, else the last \\boxed{} "
    "(the opening <think> may end the prompt)",
    reasoning=(THINK_OPEN, THINK_CLOSE),
    answer=(ANSWER_OPEN, ANSWER_CLOSE),
    boxed=True,
    prefill=True,
)
BOXED = ResponseFormat(
    "boxed",
    "a solution that ends with its final answer in \\boxed{} (no tags)",
    reasoning=None,
    answer=None,
    boxed=True,
    prefill=False,
)
RESPONSE_FORMATS: dict[str, ResponseFormat] = {f.name: f for f in (PAPER, THINK, BOXED)}
DEFAULT_FORMAT = PAPER.name


def response_format(name: str) -> ResponseFormat:
    """The profile called ``name``; a ValueError naming the valid ones otherwise."""
    try:
        return RESPONSE_FORMATS[name]
    except (KeyError, TypeError):
        valid = ", ".join(RESPONSE_FORMATS)
        raise ValueError(f"unknown response format {name!r}: use one of {valid}") from None


def formatted(reasoning: str, answer: str) -> str:
    """A completion in the paper's full format: the reasoning block, then the answer block."""
    return PAPER.formatted(reasoning, answer)


def is_correct(accuracy_reward: float) -> bool:
    """Whether an item's accuracy reward says its answer was judged equivalent to the reference.

    The server answers accuracy ``ACCURACY_CORRECT`` for an equivalent answer and 0 for every
    other verdict, so "correct" is exactly the full accuracy reward.
    """
    return accuracy_reward == ACCURACY_CORRECT


def accuracy_score(accuracy_reward: float) -> float:
    """``scores`` of ``/get_reward``: the accuracy as 1 or 0. OpenRLHF's dynamic filtering keeps
    a prompt's group when the mean of these lies strictly inside its range (default 0 1):
    DAPO's rule of dropping the groups that are all right or all wrong."""
    return 1.0 if is_correct(accuracy_reward) else 0.0


class Reason(str, Enum):
    """Why an item scored the accuracy it did (``reason`` of ``/v1/score`` and
    ``/v1/equivalent``). Only ``EQUIVALENT`` earns accuracy. The values are what the JSON
    carries."""

    # The answer was compared with the reference.
    EQUIVALENT = "equivalent"
    NOT_EQUIVALENT = "not_equivalent"
    FALSE_EQUATION = "false_equation"  # "13 = 12": a calculation whose steps do not hold
    UNIT_MISMATCH = "unit_mismatch"
    UNPARSABLE_ANSWER = "unparsable_answer"
    UNPARSABLE_REFERENCE = "unparsable_reference"
    # Nothing to compare: the completion or the label holds no answer.
    RESPONSE_NOT_FOUND = "response_not_found"  # its prompt was given and is not in its query
    NO_ANSWER_BLOCK = "no_answer_block"
    EMPTY_ANSWER = "empty_answer"
    NO_REFERENCE = "no_reference"
    # The format forbids accuracy (a second answer block, text after it, or the format gate).
    SEVERAL_ANSWER_BLOCKS = "several_answer_blocks"
    SEVERAL_ANSWERS = "several_answers"  # think, boxed: final answers that state other values
    ANSWER_NOT_LAST = "answer_not_last"
    FORMAT_NOT_MET = "format_not_met"
    # The answer policy: words that make the answer no answer.
    NEGATED_ANSWER = "negated_answer"
    HEDGED_ANSWER = "hedged_answer"
    SEVERAL_CANDIDATES = "several_candidates"
    MULTIPLIER_WORD = "multiplier_word"
    PROSE_IN_ANSWER = "prose_in_answer"
    # The cost guard, for the answer or the reference: refused before any parsing.
    ANSWER_TOO_LONG = "answer_too_long"
    ANSWER_TOO_NESTED = "answer_too_nested"
    ANSWER_HUGE_NUMBER = "answer_huge_number"
    ANSWER_HUGE_EXPONENT = "answer_huge_exponent"
    ANSWER_HUGE_CALCULUS_EXPONENT = "answer_huge_calculus_exponent"
    ANSWER_HUGE_FACTORIAL = "answer_huge_factorial"
    ANSWER_HUGE_BINOMIAL = "answer_huge_binomial"
    ANSWER_HUGE_SUM_BOUND = "answer_huge_sum_bound"
    REFERENCE_TOO_LONG = "reference_too_long"
    REFERENCE_TOO_NESTED = "reference_too_nested"
    REFERENCE_HUGE_NUMBER = "reference_huge_number"
    REFERENCE_HUGE_EXPONENT = "reference_huge_exponent"
    REFERENCE_HUGE_CALCULUS_EXPONENT = "reference_huge_calculus_exponent"
    REFERENCE_HUGE_FACTORIAL = "reference_huge_factorial"
    REFERENCE_HUGE_BINOMIAL = "reference_huge_binomial"
    REFERENCE_HUGE_SUM_BOUND = "reference_huge_sum_bound"
    # The check used its whole CPU budget: the answer's own cost, the same on any machine.
    TIMEOUT = "timeout"
    # Reading or checking this item raised (a defect the item exposed): it scores 0, and only it;
    # the cause is counted in gtpo_rs_item_errors_total{stage,error}.
    ANSWER_ERROR = "answer_error"
    REFERENCE_ERROR = "reference_error"
    CHECK_ERROR = "check_error"
    # The check could not finish: the machine's state, not the answer's (``NOT_COMPUTED``).
    WALL_TIMEOUT = "wall_timeout"  # the wall-clock net passed while the check ran
    QUEUE_TIMEOUT = "queue_timeout"  # the net passed before a worker was free
    WORKER_ERROR = "worker_error"  # its worker was lost, every run, within the net
    NO_VERIFIER = "no_verifier"  # the verification pool is not running

    def __str__(self) -> str:  # the value, in logs, metrics labels and f-strings alike
        return self.value


# Reasons that are no verdict: the check could not finish in time (the machine's load, a lost
# worker, a pool that is not running). The server never answers them as a reward: a request
# holding one gets HTTP 503 with Retry-After, which every client retries.
NOT_COMPUTED = frozenset(
    {Reason.WALL_TIMEOUT, Reason.QUEUE_TIMEOUT, Reason.WORKER_ERROR, Reason.NO_VERIFIER}
)

# Reasons after which an answer does not vote in maj@k: the server never judged it (no answer
# block, an empty one, or the format gate refused it before any comparison).
NON_VOTING = frozenset(
    {
        Reason.RESPONSE_NOT_FOUND,
        Reason.NO_ANSWER_BLOCK,
        Reason.EMPTY_ANSWER,
        Reason.FORMAT_NOT_MET,
    }
)
