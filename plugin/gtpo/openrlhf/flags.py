"""The `--gtpo.*` flags on OpenRLHF's command line, and the OpenRLHF settings that contradict GTPO.

The flags themselves (names, defaults, help, valid ranges) are GTPOConfig's (`gtpo.config`);
the OpenRLHF settings checked here are named in `compat`.

OpenRLHF's `train_ppo_ray` builds its parser inline under `__main__` and parses strictly, so the
launcher takes the `--gtpo.*` flags out of argv first (`parse_gtpo_flags`), and adds them back to
the namespace right before OpenRLHF's `hierarchize` turns `gtpo.gamma` into `args.gtpo.gamma`. From
there they travel to every Ray actor inside `strategy.args`.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Collection, Sequence
from typing import Any

from gtpo.config import FLAG_PREFIX, GTPOConfig, GTPOConfigError, add_arguments, flag
from gtpo.openrlhf import checks, compat, plan
from gtpo.openrlhf.run_args import gtpo_namespace

logger = logging.getLogger(__name__)

__all__ = ["GTPOConfigError", "build_parser", "configure", "parse_gtpo_flags"]


def build_parser() -> argparse.ArgumentParser:
    """Parser of the `--gtpo.*` flags only (OpenRLHF parses the rest), one per GTPOConfig field."""
    parser = argparse.ArgumentParser(
        prog="gtpo-openrlhf",
        description="GTPO flags; every other flag is OpenRLHF's train_ppo_ray flag, unchanged.",
        allow_abbrev=False,
        add_help=False,
    )
    add_arguments(parser)
    return parser


def parse_gtpo_flags(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    """(the `--gtpo.*` flags parsed, OpenRLHF's tokens in their order, untouched). An unknown
    or malformed `--gtpo.` flag exits with the usage, as OpenRLHF's own parser does."""
    parser = build_parser()
    gtpo_flags, rest = parser.parse_known_args(list(argv))
    unknown = [token for token in rest if token.startswith(FLAG_PREFIX)]
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    return gtpo_flags, rest


def given_flags(argv: Sequence[str]) -> set[str]:
    """The `--flag` names on a command line (`--flag value` and `--flag=value` alike)."""
    return {token.split("=", 1)[0] for token in argv if token.startswith("--")}


def _checked_config(args: Any) -> tuple[GTPOConfig, list[str]]:
    """`args.gtpo` as a GTPOConfig, and one line per refused `--gtpo.*` value.

    With refused values, the config holds the valid ones (defaults for the rest), so the
    OpenRLHF refusals that depend on the method are still judged and reported with them.
    """
    values = vars(gtpo_namespace(args))
    try:
        return GTPOConfig.from_mapping(values), []
    except GTPOConfigError as exc:
        problems = exc.problems
    valid = {}
    for name, value in values.items():
        try:
            GTPOConfig.from_mapping({name: value})
        except GTPOConfigError:
            continue
        valid[name] = value
    return GTPOConfig.from_mapping(valid), problems


class Secret(str):
    """A string whose repr is '***'. train(args) prints the whole args into the driver's log
    (which Ray keeps with the job), the W&B key included, which this launcher may have set from
    WANDB_API_KEY; as a Secret the key prints hidden and W&B still reads it."""

    __slots__ = ()  # a plain value: no attributes of its own

    def __repr__(self) -> str:
        return "'***'"


def _log_method(config: GTPOConfig, args: Any) -> None:
    if config.is_gtpo:
        logger.info(
            "%s %s: %s",
            flag("entropy_form"),
            config.entropy_form,
            f"γ⟨H⟩_i is folded into the advantages, {compat.ENTROPY_COEF.flag} stays unset"
            if config.advantage_entropy_coef
            else f"{compat.ENTROPY_COEF.flag} = {compat.ENTROPY_COEF.get(args)} (Eq. 7's penalty)",
        )
    else:
        logger.info(
            "%s grpo: GRPO baseline (λ ≡ 1, δ ≡ 1, γ = 0); %s, %s, %s and %s are ignored, "
            "entropy is still measured and logged as gtpo/entropy_mean",
            flag("algo"),
            flag("gamma"),
            flag("conflict_weight"),
            flag("no_conflict"),
            flag("entropy_filter"),
        )


def _wandb_key_from_environment(args: Any, given_flags: Collection[str]) -> None:
    """OpenRLHF starts W&B only when --logger.wandb.key is set; a command that names a W&B run
    without it takes the key from WANDB_API_KEY (`checks.wandb_key` refuses it otherwise)."""
    asked = any(a.flag in given_flags for a in compat.WANDB_SETTINGS)
    if asked and not compat.WANDB_KEY.get(args) and plan.wandb_key_from_environment():
        compat.WANDB_KEY.set(args, plan.wandb_key_from_environment())


def _unclip_centred_rewards(args: Any, given_flags: Collection[str]) -> None:
    """dr_grpo's advantages are R_i − group mean, on the reward's own scale (±20 on this
    project's 0..20 scale), and OpenRLHF clamps them to `--reward.clip_range` (default ±10) after
    centring, which would cut every large advantage. The paper's objective has no such clamp,
    so with dr_grpo it is switched off unless the flag is given. (group_norm's
    advantages stay within (G−1)/√G, 2.5 for G = 8, so the default never acts on them.)"""
    if compat.ADVANTAGE_ESTIMATOR.get(args) != compat.DR_GRPO:
        return
    if compat.REWARD_CLIP_RANGE.flag in given_flags:
        return
    compat.REWARD_CLIP_RANGE.set(args, None)
    logger.info(
        "%s dr_grpo: centred rewards are not clipped (%s not given)",
        compat.ADVANTAGE_ESTIMATOR.flag,
        compat.REWARD_CLIP_RANGE.flag,
    )


def _lora_target_modules_as_peft_reads_them(args: Any) -> None:
    """`--ds.lora.target_modules all-linear` on a command line reaches OpenRLHF as the list
    `['all-linear']` (its flag has nargs="*"; only the default is the string), and peft expands
    only the string: with the list it looks for a module named `all-linear` and fails at model
    load ("Target modules {'all-linear'} not found in the base model"), inside each policy
    actor after Ray and the engines have started. The one-item list becomes the string."""
    modules = compat.LORA_TARGET_MODULES.get(args)
    if isinstance(modules, list) and modules == [compat.ALL_LINEAR]:
        compat.LORA_TARGET_MODULES.set(args, compat.ALL_LINEAR)


def configure(args: Any, given_flags: Collection[str] = ()) -> GTPOConfig:
    """Check hierarchized OpenRLHF args against GTPO and set what GTPO owns, in place.

    Raises GTPOConfigError listing every refused setting: the `--gtpo.*` values GTPOConfig
    refuses and every rule of `checks.RULES` the command breaks. A W&B run named without a key
    takes it from WANDB_API_KEY when set (and the key prints as *** in OpenRLHF's log of the
    args). In GTPO mode sets `--actor.entropy_coef` to −γ in the penalty form (None when γ = 0
    and in the advantage form, whose γ⟨H⟩_i goes into the advantages; None also skips
    OpenRLHF's extra entropy pass) and, unless `--actor.loss_agg_mode` is among `given_flags`
    (the OpenRLHF flags on the command line), `--actor.loss_agg_mode seq-mean-token-mean`:
    Eq. 7 averages each completion's tokens (1/|o_i|) before averaging completions. With
    dr_grpo (GTPO or the GRPO baseline) and no `--reward.clip_range` given, OpenRLHF's clamp of
    the centred rewards is switched off (`_unclip_centred_rewards`). `--ds.lora.target_modules
    all-linear` is handed to peft as the string it expands. Logs `checks.WARNINGS` first.
    """
    config, config_problems = _checked_config(args)
    _wandb_key_from_environment(args, given_flags)
    command = checks.Command(args, config, frozenset(given_flags))
    checks.warn(command)  # a refused command is told its warnings too: both need changing
    problems = checks.refusals(command) + config_problems
    if problems:
        raise GTPOConfigError(
            "gtpo-openrlhf refuses this command line:\n" + "\n".join(f"  - {p}" for p in problems),
            problems,
        )
    if config.is_gtpo:
        # The penalty form's −γ; the advantage form puts γ⟨H⟩_i into the advantages instead.
        penalty = config.entropy_coef
        compat.ENTROPY_COEF.set(args, -penalty if penalty > 0 else None)
        if compat.LOSS_AGG_MODE.flag not in given_flags:
            compat.LOSS_AGG_MODE.set(args, compat.COMPLETION_MEAN)
    if compat.WANDB_KEY.get(args):
        compat.WANDB_KEY.set(args, Secret(compat.WANDB_KEY.get(args)))
    _unclip_centred_rewards(args, given_flags)
    _lora_target_modules_as_peft_reads_them(args)
    _log_method(config, args)
    logger.info("GTPO settings: %s", config)
    return config
