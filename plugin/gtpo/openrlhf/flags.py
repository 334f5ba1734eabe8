"""The `--gtpo.*` flags, and the OpenRLHF settings that contradict GTPO.

OpenRLHF's `train_ppo_ray` builds its parser inline under `__main__` and parses strictly, so the
launcher takes the `--gtpo.*` flags out of argv first (`split_argv`), and adds them back to the
namespace right before OpenRLHF's `hierarchize` turns `gtpo.gamma` into `args.gtpo.gamma`. From
there they travel to every Ray actor inside `strategy.args`.
"""

from __future__ import annotations

import argparse
import logging
import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)

PREFIX = "--gtpo."


class GTPOConfigError(ValueError):
    """A command line that GTPO cannot run; the message says which flags to change."""


def build_parser() -> argparse.ArgumentParser:
    """Parser of the `--gtpo.*` flags only (OpenRLHF parses the rest)."""
    parser = argparse.ArgumentParser(
        prog="gtpo-openrlhf",
        description="GTPO flags; every other flag is OpenRLHF's train_ppo_ray flag, unchanged.",
        allow_abbrev=False,
        add_help=False,
    )
    parser.add_argument(
        "--gtpo.algo",
        choices=["gtpo", "grpo"],
        default="gtpo",
        help="gtpo (default) or grpo: the GRPO baseline through the same launcher for an A/B "
        "(λ ≡ 1, δ ≡ 1, γ = 0, KL allowed); entropy is still measured and logged",
    )
    parser.add_argument(
        "--gtpo.gamma",
        metavar="GAMMA",
        type=float,
        default=0.1,
        help="entropy penalty γ of Eq. 7 (paper: 0.1); OpenRLHF's entropy coef is set to −γ",
    )
    parser.add_argument(
        "--gtpo.conflict_weight",
        metavar="WEIGHT",
        type=float,
        default=2.0,
        help="λ on conflict tokens of completions with A > 0 (Eq. 5, paper: 2)",
    )
    parser.add_argument(
        "--gtpo.no_conflict",
        action="store_true",
        default=False,
        help="ablation: λ ≡ 1 (no conflict-token weighting)",
    )
    parser.add_argument(
        "--gtpo.entropy_filter",
        choices=["auto", "on", "off"],
        default="auto",
        help="δ of Eq. 6: auto filters completions with ⟨H⟩ > ln 2 only when H_ini < ln 2; "
        "on filters them whatever H_ini; off keeps every completion (ablation)",
    )
    parser.add_argument(
        "--gtpo.h_ini",
        metavar="NATS",
        type=float,
        default=None,
        help="H_ini in nats instead of measuring it (see --gtpo.h_ini_prompts)",
    )
    parser.add_argument(
        "--gtpo.h_ini_prompts",
        metavar="N",
        type=int,
        default=100,
        help="measure H_ini (Eq. 6) before the first update on the first N training prompts, "
        "G completions each (paper: 100); costs N×G extra generations and reward calls once",
    )
    parser.add_argument(
        "--gtpo.reward_timeout",
        metavar="SECONDS",
        type=float,
        default=300.0,
        help="keep retrying an unreachable reward server (connection errors, 5xx, 429) with "
        "backoff for this long, then stop the run with an error naming the URL",
    )
    parser.add_argument(
        "--gtpo.collapse_patience",
        metavar="STEPS",
        type=int,
        default=5,
        help="warn when the mean completion entropy stays above ln 2 for this many steps",
    )
    return parser


def _takes_value(parser: argparse.ArgumentParser, option: str) -> bool:
    for action in parser._actions:
        if option in action.option_strings:
            return action.nargs != 0
    return True  # unknown --gtpo.* flag: keep its value next to it so argparse names the flag


def split_argv(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Split argv into (`--gtpo.*` tokens, OpenRLHF tokens), keeping each side's order.

    Accepts `--gtpo.x VALUE`, `--gtpo.x=VALUE` and switches. OpenRLHF's tokens are not touched.
    """
    parser = build_parser()
    gtpo: list[str] = []
    rest: list[str] = []
    tokens = list(argv)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.startswith(PREFIX):
            gtpo.append(token)
            if "=" not in token and _takes_value(parser, token) and i + 1 < len(tokens):
                gtpo.append(tokens[i + 1])
                i += 1
        else:
            rest.append(token)
        i += 1
    return gtpo, rest


def given_flags(argv: Sequence[str]) -> set[str]:
    """The `--flag` names on a command line (`--flag value` and `--flag=value` alike)."""
    return {token.split("=", 1)[0] for token in argv if token.startswith("--")}


def parse_gtpo_flags(tokens: Sequence[str]) -> argparse.Namespace:
    """Parse the `--gtpo.*` tokens strictly (an unknown `--gtpo.` flag exits with usage)."""
    return build_parser().parse_args(list(tokens))


@dataclass(frozen=True)
class GTPOSettings:
    """The `--gtpo.*` flags as they reach the Ray actors (`strategy.args.gtpo`)."""

    algo: str = "gtpo"
    gamma: float = 0.1
    conflict_weight: float = 2.0
    no_conflict: bool = False
    entropy_filter: str = "auto"
    h_ini: float | None = None
    h_ini_prompts: int = 100
    reward_timeout: float = 300.0
    collapse_patience: int = 5

    @classmethod
    def from_args(cls, args: Any) -> GTPOSettings:
        ns = getattr(args, "gtpo", None)
        if ns is None:
            raise GTPOConfigError(
                "args.gtpo is missing: start training with `gtpo-openrlhf` (or `python -m "
                "gtpo.openrlhf`), not with `python -m openrlhf.cli.train_ppo_ray`"
            )
        return cls(**{name: getattr(ns, name) for name in cls.__dataclass_fields__})

    @property
    def is_gtpo(self) -> bool:
        return self.algo == "gtpo"

    @property
    def applies_conflict(self) -> bool:
        """λ of Eq. 5 is applied (GTPO without the --gtpo.no_conflict ablation)."""
        return self.is_gtpo and not self.no_conflict

    @property
    def filter_mode(self) -> str:
        """δ of Eq. 6: auto | on | off (always off for the GRPO baseline)."""
        return self.entropy_filter if self.is_gtpo else "off"


def _refusals(args: Any, settings: GTPOSettings) -> list[str]:
    problems: list[str] = []
    estimator = args.algo.advantage.estimator
    if estimator != "group_norm":
        problems.append(
            f"--algo.advantage.estimator is {estimator!r}; GTPO and its GRPO baseline work on "
            "group-normalised advantages (R_i − mean) / std (paper Eq. 1). "
            "Pass --algo.advantage.estimator group_norm."
        )
    group = args.rollout.n_samples_per_prompt
    if group < 2:
        problems.append(
            f"--rollout.n_samples_per_prompt is {group}; GTPO compares the G completions of each "
            "prompt (conflict tokens, Sec. 5.1) and needs G >= 2 (the paper uses 8 or 12). "
            "Pass --rollout.n_samples_per_prompt 8."
        )
    if args.train.async_enable:
        problems.append(
            "--train.async_enable trains on rollouts of older weights in PPOTrainerAsync, while "
            "GTPO's advantage hook and H_ini live in the synchronous PPOTrainer and assume one "
            "policy iteration per batch (ratio = 1). Drop --train.async_enable (and "
            "--train.partial_rollout_enable)."
        )
    if settings.is_gtpo:
        if args.algo.kl.init_coef > 0:
            problems.append(
                f"--algo.kl.init_coef is {args.algo.kl.init_coef} (OpenRLHF's default is 0.01); "
                "GTPO has no KL term and no reference model (Eq. 7). Pass --algo.kl.init_coef 0, "
                "or run the GRPO baseline with --gtpo.algo grpo."
            )
        if args.algo.kl.use_loss:
            problems.append(
                "--algo.kl.use_loss adds a KL loss against a reference model; GTPO has none "
                "(Eq. 7). Drop --algo.kl.use_loss, or run the GRPO baseline with --gtpo.algo grpo."
            )
        if args.actor.policy_loss_type != "ppo":
            problems.append(
                f"--actor.policy_loss_type is {args.actor.policy_loss_type!r}; its ratio is per "
                "sequence, so every token of a completion gets the completion's mean λ and the "
                "protected tokens of negative completions (λ = 0, Eq. 5) are still pushed down. "
                "Drop --actor.policy_loss_type (GTPO needs the per-token ppo loss)."
            )
        if args.train.agent_func_path:
            problems.append(
                f"--train.agent_func_path is {args.train.agent_func_path!r}; a multi-turn agent "
                "puts the action tokens of several turns on one position axis, so conflict "
                "positions (Sec. 5.1) mean nothing there. Drop --train.agent_func_path, or run "
                "the GRPO baseline with --gtpo.algo grpo."
            )
        coef = args.actor.entropy_coef
        if coef is not None and not math.isclose(coef, -settings.gamma):
            problems.append(
                f"--actor.entropy_coef is {coef}; GTPO sets it to −γ itself (OpenRLHF does "
                "loss -= entropy × coef and Eq. 7 subtracts γ⟨H⟩_i from the objective). Remove "
                "--actor.entropy_coef and set the penalty with --gtpo.gamma."
            )
    if not (math.isfinite(settings.gamma) and settings.gamma >= 0):
        problems.append(
            f"--gtpo.gamma is {settings.gamma}; γ is an entropy *penalty* (Eq. 7) and must be "
            "a finite number >= 0 (paper: 0.1)."
        )
    if not (math.isfinite(settings.conflict_weight) and settings.conflict_weight >= 0):
        problems.append(
            f"--gtpo.conflict_weight is {settings.conflict_weight}; λ on protected tokens must be "
            "a finite number >= 0 (Eq. 5, paper: 2)."
        )
    if settings.h_ini is not None and not (math.isfinite(settings.h_ini) and settings.h_ini >= 0):
        problems.append(
            f"--gtpo.h_ini is {settings.h_ini}; an entropy in nats is finite and >= 0. Pass a "
            "measured value or leave the flag out to measure it on the first rollout."
        )
    if settings.h_ini_prompts < 1:
        problems.append(
            f"--gtpo.h_ini_prompts is {settings.h_ini_prompts}; H_ini is measured on at least "
            "one prompt (paper: 100). Pass --gtpo.h_ini to skip the measurement instead."
        )
    if not (math.isfinite(settings.reward_timeout) and settings.reward_timeout > 0):
        problems.append(
            f"--gtpo.reward_timeout is {settings.reward_timeout}; pass a number of seconds > 0 "
            "(default 300)."
        )
    if settings.collapse_patience < 1:
        problems.append(
            f"--gtpo.collapse_patience is {settings.collapse_patience}; pass 1 or more."
        )
    return problems


def _warnings(args: Any, settings: GTPOSettings) -> None:
    rollout = args.rollout.batch_size * args.rollout.n_samples_per_prompt
    if args.train.batch_size != rollout:
        logger.warning(
            "--train.batch_size %d != --rollout.batch_size × --rollout.n_samples_per_prompt = "
            "%d: each rollout is split into several optimizer steps and all but the first are "
            "off-policy (ratio ≠ 1), unlike the paper's one iteration per batch. Set "
            "--train.batch_size %d to match.",
            args.train.batch_size,
            rollout,
            rollout,
        )
    if args.train.max_epochs > 1:
        logger.warning(
            "--train.max_epochs %d reuses each rollout, so later epochs are off-policy (ratio ≠ "
            "1); the paper uses one iteration per batch. Pass --train.max_epochs 1 to match.",
            args.train.max_epochs,
        )
    if settings.is_gtpo and args.actor.loss_agg_mode == "token-mean":
        # Only reached when the user asked for token-mean: configure() sets the paper's mode
        # when the flag is absent.
        logger.warning(
            "--actor.loss_agg_mode token-mean averages the surrogate over "
            "all tokens of the batch; Eq. 7 averages it per completion (1/|o_i|) first. Pass "
            "--actor.loss_agg_mode seq-mean-token-mean to match the paper. (The entropy penalty "
            "is a per-completion mean either way.)"
        )
    if not settings.is_gtpo:
        logger.info(
            "--gtpo.algo grpo: GRPO baseline (λ ≡ 1, δ ≡ 1, γ = 0); --gtpo.gamma, "
            "--gtpo.conflict_weight, --gtpo.no_conflict and --gtpo.entropy_filter are ignored, "
            "entropy is still measured and logged as gtpo/entropy_mean"
        )


LOSS_AGG_FLAG = "--actor.loss_agg_mode"


def configure(args: Any, given_flags: Collection[str] = ()) -> GTPOSettings:
    """Check hierarchized OpenRLHF args against GTPO and set what GTPO owns, in place.

    Raises GTPOConfigError listing every refused setting. In GTPO mode sets
    `args.actor.entropy_coef = −γ` (None when γ = 0, which also skips OpenRLHF's extra entropy
    pass) and, unless `--actor.loss_agg_mode` is among `given_flags` (the OpenRLHF flags on the
    command line), `args.actor.loss_agg_mode = "seq-mean-token-mean"`: Eq. 7 averages each
    completion's tokens (1/|o_i|) before averaging completions. Logs a warning for settings that
    make training off-policy.
    """
    settings = GTPOSettings.from_args(args)
    problems = _refusals(args, settings)
    if problems:
        raise GTPOConfigError(
            "gtpo-openrlhf refuses this command line:\n" + "\n".join(f"  - {p}" for p in problems)
        )
    if settings.is_gtpo:
        args.actor.entropy_coef = -settings.gamma if settings.gamma > 0 else None
        if LOSS_AGG_FLAG not in given_flags:
            args.actor.loss_agg_mode = "seq-mean-token-mean"
    _warnings(args, settings)
    logger.info("GTPO settings: %s", settings)
    return settings
