"""GTPO's weights written straight from the paper's definitions, in plain Python loops.

The brute-force reference the vectorised core (`gtpo.conflict_weights`, `gtpo.entropy_filter`)
and the OpenRLHF adapter are checked against: one definition at a time, no tensors, no
vectorisation. Shared by tests/gtpo and tests/openrlhf (tests/conftest.py puts tests/ on
sys.path).
"""

from __future__ import annotations

import math
from typing import Any

LN2 = math.log(2)


def reference_weights(
    completions: list[list[int]], advantages: list[float], conflict_weight: float = 2.0
) -> list[list[float]]:
    """λ for ONE group, from the paper's definitions (lists of real tokens, no padding)."""
    positive = [i for i, a in enumerate(advantages) if a > 0]
    negative = [i for i, a in enumerate(advantages) if a < 0]

    def is_forward_conflict(token: int, p: int) -> bool:
        in_pos = any(p < len(completions[i]) and completions[i][p] == token for i in positive)
        in_neg = any(p < len(completions[j]) and completions[j][p] == token for j in negative)
        return in_pos and in_neg

    def is_backward_conflict(token: int, r: int) -> bool:
        def at_offset(k: int) -> int | None:
            o = completions[k]
            return o[len(o) - 1 - r] if r < len(o) else None

        in_pos = any(at_offset(i) == token for i in positive)
        in_neg = any(at_offset(j) == token for j in negative)
        return in_pos and in_neg

    weights = []
    for i, o in enumerate(completions):
        forward = [False] * len(o)
        for p in range(len(o)):  # first contiguous run from the start
            if not is_forward_conflict(o[p], p):
                break
            forward[p] = True
        backward = [False] * len(o)
        for r in range(len(o)):  # first contiguous run from the end
            t = len(o) - 1 - r
            if not is_backward_conflict(o[t], r):
                break
            backward[t] = True
        row = []
        for t in range(len(o)):
            masked = forward[t] or backward[t]
            if not masked or advantages[i] == 0:
                row.append(1.0)
            elif advantages[i] < 0:
                row.append(0.0)
            else:
                row.append(conflict_weight)
        weights.append(row)
    return weights


def reference_delta(completion_entropy: float, h_ini: float) -> float:
    """δ_i of Eq. 6: 0 when the model started below ln 2 and ⟨H⟩_i exceeds ln 2, else 1."""
    return 0.0 if h_ini < LN2 and completion_entropy > LN2 else 1.0


def reference_objective(
    logprobs: list[list[Any]],
    old_logprobs: list[list[float]],
    advantages: list[float],
    weights: list[list[float]],
    keep: list[float],
    entropies: list[Any],
    gamma: float,
    entropy_form: str,
    clip_eps: float = 0.2,
) -> Any:
    """J of Eq. 7 (to maximise), one completion and one token at a time, in either form.

    Rows are lists of the real tokens only (no padding). `logprobs` and `entropies` may hold
    torch scalars so autograd can differentiate this loop; `detach` is then used for the
    advantage form's ⟨H⟩_i, which is a number there.

        J = (1/N) Σ_i [ (1/|o_i|) Σ_t min(r_{i,t} a_{i,t}, clip(r_{i,t}, 1±ε) a_{i,t}) − P_i ]
        penalty:   a_{i,t} = λ_{i,t} δ_i A_i,              P_i = γ ⟨H⟩_i
        advantage: a_{i,t} = λ_{i,t} δ_i (A_i − γ ⟨H⟩_i),  P_i = 0, ⟨H⟩_i detached
    """
    total = 0.0
    for i in range(len(advantages)):
        if entropy_form == "penalty":
            advantage, penalty = advantages[i], gamma * entropies[i]
        elif entropy_form == "advantage":
            h = entropies[i]
            h = h.detach() if hasattr(h, "detach") else h
            advantage, penalty = advantages[i] - gamma * h, 0.0
        else:
            raise ValueError(entropy_form)
        inner = 0.0
        for t in range(len(logprobs[i])):
            ratio = (logprobs[i][t] - old_logprobs[i][t]).exp()
            a = weights[i][t] * keep[i] * advantage
            clipped = ratio.clamp(1 - clip_eps, 1 + clip_eps)
            inner = inner + torch_min(ratio * a, clipped * a)
        total = total + inner / len(logprobs[i]) - penalty
    return total / len(advantages)


def torch_min(x: Any, y: Any) -> Any:
    """min of two (torch) scalars, keeping the gradient of the smaller one."""
    return x if bool(x <= y) else y
