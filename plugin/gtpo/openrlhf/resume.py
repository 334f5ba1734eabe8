"""Resuming an OpenRLHF run: every process must read the same checkpoint (no OpenRLHF import).

OpenRLHF's controller resumes at the step of the checkpoint it finds under --ckpt.path, and each
policy rank loads the weights it finds there itself. When the path is not on storage every node
reads (a node's local disk), the controller can restart at step 0 while the ranks hold trained
weights: GTPO would then measure H_ini again, on the trained policy, with the rollout engines
still serving the base weights. Or the ranks disagree among themselves. `GTPOPPOTrainer` checks
this before anything else runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


class CheckpointNotShared(RuntimeError):
    """--ckpt.path is not the same checkpoint for the controller and every policy rank."""


def check_checkpoint_shared(
    controller_states: Mapping[str, Any], rank_states: Sequence[Mapping[str, Any]], path: str
) -> None:
    """Raise CheckpointNotShared unless the controller's resumed step and the step of the
    checkpoint each policy rank loaded (`get_checkpoint_states`; empty: none) all agree."""

    def step(states: Mapping[str, Any]) -> int:
        return int((states or {}).get("global_step", 0))

    steps = [step(s) for s in rank_states]
    if len(set(steps)) <= 1 and (not steps or steps[0] == step(controller_states)):
        return
    ranks = ", ".join(f"rank {r}: step {s}" for r, s in enumerate(steps))
    raise CheckpointNotShared(
        f"--ckpt.load_enable: the controller resumes at step {step(controller_states)} but the "
        f"policy ranks loaded {ranks} from --ckpt.path {path}. The processes do not see the "
        "same checkpoint: put --ckpt.path on storage that every node (the controller's "
        "included) reads, or start without --ckpt.load_enable."
    )
