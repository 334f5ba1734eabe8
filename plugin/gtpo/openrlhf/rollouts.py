"""Rollouts of a size the launcher could not check: trimmed so every rank trains alike, and a
run that trained on nothing ends with an error.

The launcher refuses settings whose full rollout splits unevenly over the data-parallel ranks
(`checks.training_split`). Two rollouts have another size at run time:

- the last one, when the prompt count is not a multiple of --rollout.batch_size (OpenRLHF's
  prompt loader has batch size 1 and keeps the remainder);
- any one with --algo.dynamic_filtering_enable, which drops every prompt group whose mean score
  lies outside --algo.dynamic_filtering_range and replaces it only while prompts remain.

Such a rollout can leave the ranks with different numbers of training micro-batches (a hang in
`ppo_train`'s collectives, and the final save never happens) or none (OpenRLHF raises). It is cut
to its longest prefix of whole groups that every rank trains on alike (`compat.trainable_samples`),
or skipped, with a warning. Imports no OpenRLHF.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from gtpo.openrlhf import compat

logger = logging.getLogger(__name__)


class NothingTrainedError(RuntimeError):
    """The run ended without one training step; the message says what removed the samples."""


@dataclass
class RolloutTally:
    """What the run's rollouts held, for the warnings and the final check."""

    prompts: int = 0  # prompts taken from the dataset (dynamic filtering's replacements too)
    groups: int = 0  # prompt groups the rollouts returned (after dynamic filtering)
    trimmed: int = 0  # samples cut so that the ranks train alike
    produced: int = 0  # rollouts handed to training

    def trim(self, args: Any, samples: list[Any], consumed: int) -> list[Any]:
        """`samples` cut to what every rank can train on alike (all of them, usually)."""
        group = compat.GROUP_SIZE.get(args)
        self.prompts += consumed
        self.groups += len(samples) // group
        kept = compat.trainable_samples(args, len(samples)) if samples else 0
        if kept < len(samples):
            self.trimmed += len(samples) - kept
            rows = compat.training_rows_per_rank(args, len(samples))
            logger.warning(
                "GTPO: a rollout of %d samples reaches the %d data-parallel ranks as %s rows, %s "
                "training micro-batches of %d (%s): ranks with fewer would wait for the others "
                "in a collective. %s",
                len(samples),
                len(rows),
                ", ".join(map(str, rows)),
                ", ".join(str(r // compat.TRAIN_MICRO_BATCH_SIZE.get(args)) for r in rows),
                compat.TRAIN_MICRO_BATCH_SIZE.get(args),
                compat.TRAIN_MICRO_BATCH_SIZE.flag,
                f"Training on its first {kept} samples ({kept // group} prompts)."
                if kept
                else "Skipping it.",
            )
        self.produced += kept > 0
        return samples[:kept]

    def nothing_trained(self, args: Any) -> NothingTrainedError:
        """The error of a run that ended without a training step, naming what took the samples."""
        group = compat.GROUP_SIZE.get(args)
        parts = [f"the run ended without a training step: {self.prompts} prompts were drawn"]
        if compat.DYNAMIC_FILTERING.get(args):
            low, high = compat.DYNAMIC_FILTERING_RANGE.get(args)
            dropped = self.prompts - self.groups
            parts.append(
                f"{compat.DYNAMIC_FILTERING.flag} dropped {dropped} of their {self.prompts} "
                f"groups of {group}: it keeps a group only when its mean score (the accuracy, 1 "
                f"or 0 per completion) lies strictly between {low:g} and {high:g} "
                f"({compat.DYNAMIC_FILTERING_RANGE.flag}), so every dropped group was all right "
                "or all wrong"
            )
        if self.trimmed:
            parts.append(
                f"{self.trimmed} samples were left out because the ranks could not train on "
                "them alike"
            )
        advice = (
            "Use prompts the model gets right sometimes, widen "
            f"{compat.DYNAMIC_FILTERING_RANGE.flag}, or drop {compat.DYNAMIC_FILTERING.flag}"
            if compat.DYNAMIC_FILTERING.get(args)
            else f"Use more prompts, or a smaller {compat.TRAIN_MICRO_BATCH_SIZE.flag}"
        )
        return NothingTrainedError("; ".join(parts) + f". {advice}.")
