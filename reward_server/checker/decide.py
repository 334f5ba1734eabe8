"""Deciding: two answers read once (``reading``) compared by the exact rules (``compare``,
``relations``, ``units``) in the calling process; what they leave is a typed check for the
symbolic worker (``pending.SymbolicCheck``, decided by ``symbolic``, which the service runs in
its verification workers).
"""

from __future__ import annotations

from reward_server.checker import relations
from reward_server.checker.compare import Verdict, equal_values, same_value
from reward_server.checker.extract import answer_text
from reward_server.checker.guard import bomb, complexity_violation
from reward_server.checker.pending import SymbolicCheck
from reward_server.checker.reading import Refused, Statement, read_pair
from reward_server.checker.units import units_differ
from reward_server.checker.values import Expression
from reward_server.protocol import Reason


def symbolic_equivalent(check: SymbolicCheck) -> tuple[bool, str]:
    """``symbolic.symbolic_equivalent``, imported on first use so that a process that only
    reads and decides (the server process) never loads sympy (the service's workers have it
    preloaded by their forkserver)."""
    from reward_server.checker import symbolic

    return symbolic.symbolic_equivalent(check)


def precheck(
    answer: str, reference: str, *, max_chars: int = 1000, max_nesting: int = 40
) -> Verdict | SymbolicCheck:
    """The verdict when no symbolic check is needed (too big, refused by the answer policy,
    or decided exactly), else the check the pool must decide."""
    for text, who in ((answer, "answer"), (reference, "reference")):
        problem = complexity_violation(text, max_chars, max_nesting)
        if problem is not None:
            return Verdict(False, Reason(f"{who}_{problem}"))
    if answer_text(answer) == answer_text(reference):
        return Verdict(True, Reason.EQUIVALENT)  # the reference as it is written
    answer_read, reference_read = read_pair(answer, reference, same_value)
    if isinstance(reference_read, Refused):
        return Verdict(False, Reason.UNPARSABLE_REFERENCE)
    if isinstance(answer_read, Refused):
        return Verdict(False, answer_read.reason)
    for read, who in ((answer_read, "answer"), (reference_read, "reference")):
        problem = bomb(read.tree)  # the cost guard: no worker for a number bomb
        if problem is not None:
            return Verdict(False, Reason(f"{who}_{problem}"))
    return decide(answer_read, reference_read)


def decide(answer: Statement, reference: Statement) -> Verdict | SymbolicCheck:
    """The verdict on two read answers, or the check left for the symbolic worker.

    In order: the answer policy (a worded reference is compared as words instead); a
    congruence's residue; an equation against an equation (the sides, when both name the same
    quantity) or against a value (every step of a calculation holds, the last side is the
    value); the units; the typed values (``compare.equal_values``)."""
    if answer.tree == reference.tree:
        return Verdict(True, Reason.EQUIVALENT)
    if reference.words is None:
        if answer.refusal is not None:
            return Verdict(False, answer.refusal)
    elif answer.words is not None:
        return _verdict(answer.words == reference.words)
    if answer.congruence is not None:
        if answer.residue is None:
            return SymbolicCheck(answer.value, reference.value, congruence=answer.congruence)
        if isinstance(answer.residue, Reason):
            return Verdict(False, answer.residue)  # false_equation
        answer = answer.residue
    if answer.side_statements is not None and reference.side_statements is not None:
        if len(answer.side_statements) == len(reference.side_statements) == 1:
            if not relations.same_quantity(answer.label, reference.label) or any(
                relations.relates_labels(x.label, y.label, y.side_names)
                for x, y in ((answer, reference), (reference, answer))
            ):
                # "\\cos x = ..." against "\\sin x = ...", "y = x" against "x = y": relations
                return SymbolicCheck(Expression(answer.tree), Expression(reference.tree))
            answer, reference = answer.side_statements[0], reference.side_statements[0]
        else:  # "2x - y = 5" against "y = 2x - 5": the same line, as relations
            return SymbolicCheck(Expression(answer.tree), Expression(reference.tree))
    elif answer.side_statements is not None:
        if any(same_value(left, right) is False for left, right in answer.steps):
            return Verdict(False, Reason.FALSE_EQUATION)  # "13 = 12": not an answer
        last = answer.side_statements[-1]
        if units_differ(last.unit, reference.unit):
            return Verdict(False, Reason.UNIT_MISMATCH)
        if not all(same_value(left, right) for left, right in answer.steps):
            # "\\sqrt{9+16} = 5 cm": the pool checks every step, the last side without its unit
            return SymbolicCheck(last.value, reference.value, steps=answer.steps)
        answer = last
    if units_differ(answer.unit, reference.unit):
        return Verdict(False, Reason.UNIT_MISMATCH)
    decided = equal_values(answer.value, reference.value)
    if decided is None:
        return SymbolicCheck(answer.value, reference.value)
    return _verdict(decided)


def _verdict(equal: bool) -> Verdict:
    return Verdict(equal, Reason.EQUIVALENT if equal else Reason.NOT_EQUIVALENT)


def equivalent_inline(
    answer: str, reference: str, *, max_chars: int = 1000, max_nesting: int = 40
) -> Verdict:
    """The same decision as ``Verifier.check`` in this process, without the pool's timeout.

    Only for trusted inputs (tests, offline tools): an adversarial answer can run for minutes.
    """
    pair = precheck(answer, reference, max_chars=max_chars, max_nesting=max_nesting)
    if isinstance(pair, Verdict):
        return pair
    equal, reason = symbolic_equivalent(pair)
    return Verdict(equal, reason)
