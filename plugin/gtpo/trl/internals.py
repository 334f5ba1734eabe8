"""TRL's internals `GTPOTrainer` extends or reads, declared once and checked when it is built.

GTPO's TRL trainer overrides four private methods of `trl.GRPOTrainer` (generation and scoring,
the log-prob forward, the loss, the checkpoint save), calls three more, and reads attributes
TRL sets on the trainer in its `__init__`. A TRL release that renamed one would not fail: an
override TRL no longer calls is silently never called, and GTPO's λ, δ or entropy penalty is
off while training goes on as GRPO. So the trainer checks, before it builds anything, that the
installed TRL is in the range it was tested with and still has each name, and refuses to start
otherwise, naming what is missing and the range to install.
"""

from __future__ import annotations

import functools
import re
from importlib import metadata

from gtpo.config import GTPOConfigError
from gtpo.sources import assigned_on_self, source_of

# The releases tested: MINIMUM <= version < BELOW (pyproject.toml's trl extra pins the same
# range; a test checks that they agree).
MINIMUM = (1, 16)
BELOW = (1, 17)
PIN = "trl>=1.16,<1.17"

# GRPOTrainer's methods GTPOTrainer overrides (first four) or calls.
METHODS = (
    "_generate_and_score_completions",
    "_get_per_token_logps_and_entropies",
    "_compute_loss",
    "_save_checkpoint",
    "_get_train_sampler",
    "_generate_single_turn",
    "_tokenize_prompts",
)
# What it reads on the trainer that TRL (or transformers' Trainer) sets in a method.
INSTANCE = (
    "_is_vlm", "_metrics", "_tokenizer", "num_generations", "num_generations_eval",
    "chat_template", "chat_template_kwargs", "shuffle_dataset", "reward_funcs",
    "current_gradient_accumulation_steps",
)  # fmt: skip


def release(version: str) -> tuple[int, ...]:
    """(major, minor) of a version string: "1.16.0" -> (1, 16)."""
    return tuple(int(part) for part in re.findall(r"\d+", version)[:2])


@functools.cache  # each trainer built checks: transformers' Trainer is 5,000 lines to parse
def _assigned_in(klass: type) -> frozenset[str]:
    return frozenset(assigned_on_self(source_of(klass)))


def _assigned(cls: type, name: str) -> bool:
    return any(name in _assigned_in(klass) for klass in cls.__mro__ if klass is not object)


def missing(trainer: type) -> list[str]:
    """Every declared method and attribute `trainer` (TRL's GRPOTrainer) lacks."""
    gone = [f"GRPOTrainer.{name}" for name in METHODS if not callable(getattr(trainer, name, None))]
    return gone + [f"GRPOTrainer().{name}" for name in INSTANCE if not _assigned(trainer, name)]


def check_trl(version: str | None = None) -> str:
    """Raise GTPOConfigError unless a tested TRL with every declared internal is installed.
    Returns the version."""
    from trl import GRPOTrainer

    version = version or metadata.version("trl")
    range_ = f">={'.'.join(map(str, MINIMUM))},<{'.'.join(map(str, BELOW))}"
    if not MINIMUM <= release(version) < BELOW:
        raise GTPOConfigError(
            f"GTPOTrainer is tested with TRL {range_}, found {version}: it overrides "
            f"GRPOTrainer's private methods. Install `pip install '{PIN}'` (or 'gtpo[trl]')."
        )
    gone = missing(GRPOTrainer)
    if gone:
        raise GTPOConfigError(
            f"TRL {version} lacks what GTPOTrainer overrides or reads: {', '.join(gone)}. "
            f"Install `pip install '{PIN}'`."
        )
    return version
