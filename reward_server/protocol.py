"""What the reward server and its clients share: the reward scale, the format tags and the
verdict reasons.

Standard library only: the training side (``gtpo``) imports this module without the server's
dependencies (FastAPI, pydantic, math-verify) installed.
"""

from __future__ import annotations

from enum import Enum

# The paper's reward scale: format 0..10, accuracy 0 or 10, total 0..20.
FORMAT_MAX = 10.0
ACCURACY_CORRECT = 10.0
TOTAL_MAX = FORMAT_MAX + ACCURACY_CORRECT

# The completion format the reward is for: <reasoning>…</reasoning><answer>…</answer>.
REASONING_OPEN = "<reasoning>"
REASONING_CLOSE = "</reasoning>"
ANSWER_OPEN = "<answer>"
ANSWER_CLOSE = "</answer>"


def formatted(reasoning: str, answer: str) -> str:
    """A completion in the full format: the reasoning block, then the answer block."""
    return f"{REASONING_OPEN}{reasoning}{REASONING_CLOSE}{ANSWER_OPEN}{answer}{ANSWER_CLOSE}"


def is_correct(accuracy_reward: float) -> bool:
    """Whether an item's accuracy reward says its answer was judged equivalent to the reference.

    The server answers accuracy ``ACCURACY_CORRECT`` for an equivalent answer and 0 for every
    other verdict, so "correct" is exactly the full accuracy reward.
    """
    return accuracy_reward == ACCURACY_CORRECT


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
    NO_ANSWER_BLOCK = "no_answer_block"
    EMPTY_ANSWER = "empty_answer"
    NO_REFERENCE = "no_reference"
    # The format forbids accuracy (a second answer block, text after it, or the format gate).
    SEVERAL_ANSWER_BLOCKS = "several_answer_blocks"
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
    # The check could not finish: the machine's state, not the answer's.
    TIMEOUT = "timeout"
    QUEUE_TIMEOUT = "queue_timeout"
    WORKER_ERROR = "worker_error"
    NO_VERIFIER = "no_verifier"

    def __str__(self) -> str:  # the value, in logs, metrics labels and f-strings alike
        return self.value


# Reasons after which an answer does not vote in maj@k: the server never judged it (no answer
# block, an empty one, or the format gate refused it before any comparison).
NON_VOTING = frozenset({Reason.NO_ANSWER_BLOCK, Reason.EMPTY_ANSWER, Reason.FORMAT_NOT_MET})
