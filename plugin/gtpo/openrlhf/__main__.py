"""`gtpo-openrlhf` / `python -m gtpo.openrlhf`: OpenRLHF's train_ppo_ray with GTPO inside.

    gtpo-openrlhf [--dry-run] [every openrlhf.cli.train_ppo_ray flag] [--gtpo.* flags]

OpenRLHF builds its parser inline under `if __name__ == "__main__"` and parses strictly, so the
launcher (1) takes the `--gtpo.*` flags out of argv, (2) checks the installed OpenRLHF, (3) has
train_ppo_ray build GTPO's classes where it builds its own (`seam.building`, the names of
`compat.Built`): `hierarchize` (which it imports lazily) adds and checks the GTPO flags, and
`PPOTrainer`, `PPOTrainerAsync`, `PolicyModelActor` and `RolloutRayActor` become the Ray actors
of `controller.py`, `async_training.py`, `policy.py` and `rollout_actor.py` — and (4) runs
`openrlhf.cli.train_ppo_ray` as `__main__`. No OpenRLHF file is modified; the names are put
back when training returns.

`--dry-run` runs the same command line up to the first call `train(args)` makes once Ray is up
(`compat.DRY_RUN_STOP`), with Ray reported as already running so none starts: OpenRLHF's parser
and its own checks and every rule of `checks.RULES` (GTPO's refusals, OpenRLHF's layout rules) have
run by then. It prints the plan (`plan.render`) and exits 0, or exits 2 listing every refusal.
"""

from __future__ import annotations

import argparse
import copy
import logging
import runpy
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from gtpo.config import GTPOConfig, GTPOConfigError, namespace_values
from gtpo.openrlhf import compat, dry_imports, enable_logging, plan
from gtpo.openrlhf.compat import OpenRLHFIncompatibleError, check_openrlhf
from gtpo.openrlhf.flags import build_parser, configure, given_flags, parse_gtpo_flags
from gtpo.openrlhf.resume import CheckpointNotShared
from gtpo.openrlhf.rewards import reward_token, root_message
from gtpo.openrlhf.rollouts import NothingTrainedError
from gtpo.reward_client import RewardServerError, quiet_request_logs

logger = logging.getLogger(__name__)

TARGET = compat.LAUNCH_MODULE
DRY_RUN = "--dry-run"


class DryRunStop(Exception):
    """Raised where train(args) would start placing models; carries the final args."""

    def __init__(self, args: Any) -> None:
        super().__init__("dry run: stopped before train(args) placed anything")
        self.final_args = args  # not `args`: BaseException's own


@dataclass
class Checked:
    """What the wrapped hierarchize found: the GTPO config and the OpenRLHF settings it set."""

    config: GTPOConfig | None = None
    changes: dict[str, tuple[Any, Any]] = field(default_factory=dict)


def _stop(args: Any) -> None:
    raise DryRunStop(args)


@contextmanager
def installed(
    gtpo_flags: argparse.Namespace,
    openrlhf_argv: Sequence[str] = (),
    checked: Checked | None = None,
    dry_run: bool = False,
) -> Iterator[None]:
    """While the block runs, train_ppo_ray builds GTPO's classes where it builds its own.

    `gtpo_flags` is the namespace of `parse_gtpo_flags` (dests like "gtpo.gamma"); the wrapped
    hierarchize merges it into OpenRLHF's flat namespace so OpenRLHF's own hierarchize nests it
    as args.gtpo, then `flags.configure` refuses contradicting settings and sets what GTPO owns
    (−γ, and the loss aggregation unless `openrlhf_argv` names it). PPOTrainer,
    PPOTrainerAsync, PolicyModelActor and the vLLM RolloutRayActor become GTPO's Ray actors; the
    rollout actor is handed --gtpo.reward_timeout and the reward server's token from this
    process's environment (create_vllm_engines builds its arguments). With `dry_run`
    get_strategy raises DryRunStop and Ray reports itself as running (`compat.DRY_RUN_STOP`,
    `compat.DRY_RUN_NO_RAY`). `checked` receives the config and what it changed.
    """
    from gtpo.openrlhf import async_training, controller, policy, rollout_actor, seam

    original_hierarchize = seam.resolve(compat.HIERARCHIZE)
    checked = checked if checked is not None else Checked()

    def hierarchize(args: argparse.Namespace):
        clash = set(vars(args)) & set(vars(gtpo_flags))
        if clash:
            raise GTPOConfigError(f"OpenRLHF already defines {sorted(clash)}; rename the flags")
        nested = original_hierarchize(argparse.Namespace(**vars(args), **vars(gtpo_flags)))
        before = copy.deepcopy(nested)
        checked.config = configure(nested, given_flags(openrlhf_argv))
        checked.changes = plan.changed_settings(before, nested)
        compat.check_behaviour(nested)
        return nested

    # Checked with the other settings inside hierarchize; read unchecked here.
    reward_timeout = namespace_values(gtpo_flags)["reward_timeout"]
    rollout = seam.WithArguments(
        rollout_actor.GTPORolloutRemote, reward_timeout=reward_timeout, reward_token=reward_token()
    )
    builds = [
        (compat.HIERARCHIZE, hierarchize),
        (compat.TRAINER, controller.GTPOPPOTrainerRemote),
        (compat.ASYNC_TRAINER_ACTOR, async_training.GTPOPPOTrainerAsyncRemote),
        (compat.POLICY_ACTOR, policy.GTPOPolicyModelRemote),
        (compat.ROLLOUT_ACTOR, rollout),
    ]
    if dry_run:
        builds += [(compat.DRY_RUN_STOP, _stop), (compat.DRY_RUN_NO_RAY, lambda: True)]
    with seam.building(*builds):
        yield


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of `gtpo-openrlhf`; exits 2 with a message on a refused command line."""
    argv = list(sys.argv[1:] if argv is None else argv)
    dry_run = DRY_RUN in argv
    argv = [token for token in argv if token != DRY_RUN]
    enable_logging()
    quiet_request_logs(logging.getLogger("gtpo").getEffectiveLevel())
    gtpo_flags, openrlhf_argv = parse_gtpo_flags(argv)
    if "-h" in openrlhf_argv or "--help" in openrlhf_argv:
        build_parser().print_help(sys.stdout)
        sys.stdout.write(
            f"\n{DRY_RUN}: check the command line and print the plan (placement, micro-batches "
            "per rank, steps) without starting Ray or loading weights; from the hub only the "
            "model's config.json, when it is not local (never with HF_HUB_OFFLINE=1).\n"
            "\nOpenRLHF's train_ppo_ray flags follow.\n\n"
        )
    if dry_run:
        absent = dry_imports.register_missing()
        if absent:
            logger.info("gtpo-openrlhf --dry-run: %s not installed; not needed to check", absent)
    try:
        version = check_openrlhf()
    except OpenRLHFIncompatibleError as exc:
        logger.error("%s", exc)
        raise SystemExit(2) from None
    logger.info("gtpo-openrlhf: OpenRLHF %s, running %s with GTPO", version, TARGET)

    saved_argv = sys.argv
    sys.argv = ["gtpo-openrlhf", *openrlhf_argv]
    checked = Checked()
    try:
        with installed(gtpo_flags, openrlhf_argv, checked, dry_run=dry_run):
            runpy.run_module(TARGET, run_name="__main__", alter_sys=False)
    except DryRunStop as stop:
        sys.stdout.write(
            plan.render(stop.final_args, checked.config, checked.changes, version) + "\n"
        )
    except AssertionError as exc:
        if not dry_run:
            raise
        # In a dry run nothing past OpenRLHF's own command-line checks runs: this is one.
        logger.error("OpenRLHF refuses this command line: %s", exc)
        raise SystemExit(2) from None
    except (GTPOConfigError, OpenRLHFIncompatibleError) as exc:
        logger.error("%s", exc)
        raise SystemExit(2) from None
    except (RewardServerError, CheckpointNotShared, NothingTrainedError) as exc:
        # Raised in a Ray actor (a rollout actor, the controller) and re-raised through Ray,
        # whose errors keep the class of their cause; the message is the cause's, without Ray's
        # tracebacks.
        logger.error("training stopped: %s", root_message(exc))
        raise SystemExit(1) from None
    finally:
        sys.argv = saved_argv


if __name__ == "__main__":
    main()
