"""What the exact rules leave to the symbolic check: the contract between ``decide`` (the server
process) and ``symbolic`` (the verification workers), sent to a worker as it is.

Every text in it is one leaf of a reading (a value, a side, a relation as a whole), in
canonical LaTeX, for sympy to parse as one expression: the worker reads no structure from it
(no equation split, no congruence, no unit).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SymbolicCheck:
    """``answer`` against ``reference``, after each of ``steps`` (the steps of a calculation,
    left side against right side) holds: a step that does not makes the answer a false
    equation. ``congruence``: the sides and modulus of an answer that is a congruence whose
    sides are no exact integers to the server process (``2^{10} \\equiv 4 \\pmod 5``): the
    worker evaluates them, and what the congruence answers (``relations.congruence_value``)
    takes the place of ``answer``."""

    answer: str
    reference: str
    steps: tuple[tuple[str, str], ...] = ()
    congruence: tuple[tuple[str, ...], str] | None = None
