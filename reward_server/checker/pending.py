"""What the exact rules leave to the symbolic check: the contract between ``decide`` (the server
process) and ``symbolic`` (the verification workers), sent to a worker as it is.

Every part is typed: values (``values.py``) and trees (``tree.py``) as the reading left them,
never text. The worker builds sympy objects from the trees (``build.py``) and parses nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from reward_server.checker import tree as t
from reward_server.checker.values import Value


@dataclass(frozen=True)
class SymbolicCheck:
    """``answer`` against ``reference``, after each of ``steps`` (the steps of a calculation,
    left side against right side) holds: a step that does not makes the answer a false
    equation. ``congruence``: the sides and modulus of an answer that is a congruence whose
    sides are no exact integers to the server process (``2^{100} \\equiv 1 \\pmod 5``): the
    worker evaluates them, and the residue takes the place of ``answer``."""

    answer: Value
    reference: Value
    steps: tuple[tuple[Value, Value], ...] = ()
    congruence: tuple[tuple[t.Node, ...], t.Node] | None = None
