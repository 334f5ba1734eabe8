"""The GTPOConfig every process of a run reads from OpenRLHF's hierarchized args.

The launcher (`flags`) puts the `--gtpo.*` flags into `args.gtpo`; they travel to every Ray
actor inside `strategy.args`. The actors read them here, never through `flags`: that module is
the launcher's parser and start-up checks, and importing it pulled `checks`, `plan` and `memory`
into every actor.
"""

from __future__ import annotations

from typing import Any

from gtpo.config import GTPOConfig, GTPOConfigError


def gtpo_config(args: Any) -> GTPOConfig:
    """The GTPOConfig of hierarchized OpenRLHF args (`args.gtpo`, also inside every Ray actor's
    `strategy.args`). Raises GTPOConfigError naming each bad `--gtpo.*` value."""
    return GTPOConfig.from_mapping(vars(gtpo_namespace(args)))


def gtpo_namespace(args: Any) -> Any:
    """`args.gtpo`; GTPOConfigError naming the launcher when the run was not started by it."""
    ns = getattr(args, "gtpo", None)
    if ns is None:
        raise GTPOConfigError(
            "args.gtpo is missing: start training with `gtpo-openrlhf` (or `python -m "
            "gtpo.openrlhf`), not with `python -m openrlhf.cli.train_ppo_ray`"
        )
    return ns
