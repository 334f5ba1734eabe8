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
import math
from collections.abc import Collection, Sequence
from typing import Any

from gtpo import correction
from gtpo.config import FLAG_PREFIX, GTPOConfig, GTPOConfigError, add_arguments, flag
from gtpo.openrlhf import compat, plan

logger = logging.getLogger(__name__)

__all__ = ["GTPOConfigError", "build_parser", "configure", "gtpo_config", "parse_gtpo_flags"]


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


def gtpo_config(args: Any) -> GTPOConfig:
    """The GTPOConfig of hierarchized OpenRLHF args (`args.gtpo`, also inside every Ray actor's
    `strategy.args`). Raises GTPOConfigError naming each bad `--gtpo.*` value."""
    return GTPOConfig.from_mapping(vars(_gtpo_namespace(args)))


def _gtpo_namespace(args: Any) -> Any:
    ns = getattr(args, "gtpo", None)
    if ns is None:
        raise GTPOConfigError(
            "args.gtpo is missing: start training with `gtpo-openrlhf` (or `python -m "
            "gtpo.openrlhf`), not with `python -m openrlhf.cli.train_ppo_ray`"
        )
    return ns


def _checked_config(args: Any) -> tuple[GTPOConfig, list[str]]:
    """`args.gtpo` as a GTPOConfig, and one line per refused `--gtpo.*` value.

    With refused values, the config holds the valid ones (defaults for the rest), so the
    OpenRLHF refusals that depend on the method are still judged and reported with them.
    """
    values = vars(_gtpo_namespace(args))
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


def _refusals(args: Any) -> list[str]:
    """OpenRLHF settings that neither GTPO nor its GRPO baseline can train with."""
    problems: list[str] = []
    estimator = compat.ADVANTAGE_ESTIMATOR.get(args)
    if estimator not in compat.GROUP_ESTIMATORS:
        problems.append(
            f"{compat.ADVANTAGE_ESTIMATOR.flag} is {estimator!r}; GTPO and its GRPO baseline "
            "work on advantages relative to each prompt's group: (R_i − mean) / std (paper "
            f"Eq. 1, {compat.GROUP_NORM}) or R_i − mean (the authors' code, "
            f"{compat.DR_GRPO}). Pass {compat.ADVANTAGE_ESTIMATOR.flag} {compat.GROUP_NORM} or "
            f"{compat.DR_GRPO}."
        )
    group = compat.GROUP_SIZE.get(args)
    if group < 2:
        problems.append(
            f"{compat.GROUP_SIZE.flag} is {group}; GTPO compares the G completions of each "
            "prompt (conflict tokens, Sec. 5.1) and needs G >= 2 (the paper uses 8 or 12). "
            f"Pass {compat.GROUP_SIZE.flag} 8."
        )
    if compat.ASYNC.get(args):
        problems += _async_refusals(args)
    split = _training_split(args)
    if split:
        problems.append(split)
    if compat.LOAD_IN_4BIT.get(args):
        problems += _4bit_refusals(args)
    return problems


def _4bit_refusals(args: Any) -> list[str]:
    """QLoRA (`--ds.load_in_4bit` with LoRA, the authors' setting) trains, and the weight sync
    sends the dequantized base with the adapters merged (`lora.py`). What it cannot train."""
    problems = []
    if not compat.LORA_RANK.get(args):
        problems.append(
            f"{compat.LOAD_IN_4BIT.flag} without {compat.LORA_RANK.flag}: bitsandbytes' 4-bit "
            "weights are packed bytes that no optimizer can update, so only the embeddings and "
            "norms would train, and OpenRLHF's weight sync would send the packed bytes to vLLM "
            f"as weights. Pass {compat.LORA_RANK.flag} (QLoRA: the authors used 128 with "
            f"--ds.lora.alpha 128), or drop {compat.LOAD_IN_4BIT.flag}."
        )
    if compat.ZERO_STAGE.get(args) == 3:
        problems.append(
            f"{compat.LOAD_IN_4BIT.flag} with {compat.ZERO_STAGE.flag} 3: training runs, but "
            "OpenRLHF's save of the final model fails after the whole run (its ZeRO-3 state "
            "dict lacks bitsandbytes' quant-state entries: 'AssertionError: mismatch keys'), "
            "and the trained adapters are not written. A 4-bit base is a quarter of bf16's "
            f"size and only the adapters have optimizer state: pass {compat.ZERO_STAGE.flag} 2."
        )
    dtype = compat.PARAM_DTYPE.get(args)
    if dtype != compat.BF16:
        problems.append(
            f"{compat.LOAD_IN_4BIT.flag} with {compat.PARAM_DTYPE.flag} {dtype}: OpenRLHF "
            "computes the 4-bit layers in bf16 only (its Actor asserts it while loading the "
            f"model, after Ray has started). Pass {compat.PARAM_DTYPE.flag} {compat.BF16}."
        )
    return problems


def _wandb_refusal(args: Any, given_flags: Collection[str]) -> str | None:
    """OpenRLHF starts W&B only when --logger.wandb.key is set; a command that names a W&B run
    without it would log to TensorBoard alone. The key then comes from WANDB_API_KEY (set in
    place), or the command is refused."""
    asked = [a.flag for a in compat.WANDB_SETTINGS if a.flag in given_flags]
    if compat.WANDB_KEY.get(args) or not asked:
        return None
    key = plan.wandb_key_from_environment()
    if key:
        compat.WANDB_KEY.set(args, key)
        return None
    return (
        f"{', '.join(asked)} names a W&B run, but OpenRLHF starts W&B only with "
        f"{compat.WANDB_KEY.flag} (its trainer: `WandbLogger(args) if args.logger.wandb.key`), "
        "so the run would log to TensorBoard alone. Export WANDB_API_KEY where gtpo-openrlhf "
        f"runs (the launcher passes it as {compat.WANDB_KEY.flag}), pass "
        f"{compat.WANDB_KEY.flag}, or drop {', '.join(asked)}."
    )


def _async_refusals(args: Any) -> list[str]:
    """Async settings whose staleness GTPO does not measure (`async_training.py` tags every
    rollout with the one policy version that generated it, at most one step old)."""
    problems = []
    if compat.PARTIAL_ROLLOUT.get(args):
        problems.append(
            f"{compat.PARTIAL_ROLLOUT.flag} lets a weight sync land in the middle of a "
            "generation, so one completion's tokens come from two policies and has no single "
            "policy version (gtpo/staleness_*). GTPO runs async without it: drop "
            f"{compat.PARTIAL_ROLLOUT.flag}."
        )
    queue = compat.ASYNC_QUEUE_SIZE.get(args)
    if queue != 1:
        problems.append(
            f"{compat.ASYNC_QUEUE_SIZE.flag} is {queue}: rollouts would be up to {queue} updates "
            "old, and δ's entropy, taken under the trainer's weights, that far from the policy "
            f"that sampled them. GTPO is checked with 1 (at most one step stale): pass "
            f"{compat.ASYNC_QUEUE_SIZE.flag} 1."
        )
    generate = compat.GENERATE_BATCH_SIZE.get(args)
    if generate and generate != compat.ROLLOUT_BATCH_SIZE.get(args):
        problems.append(
            f"{compat.GENERATE_BATCH_SIZE.flag} {generate} != {compat.ROLLOUT_BATCH_SIZE.flag} "
            f"{compat.ROLLOUT_BATCH_SIZE.get(args)}: over-sampling keeps the extra rollouts for "
            "later steps, so they are older than the queue allows for. Leave "
            f"{compat.GENERATE_BATCH_SIZE.flag} unset."
        )
    return problems


def _training_split(args: Any) -> str | None:
    """A refusal when a step would train on nothing, or when data-parallel ranks would train on
    different numbers of micro-batches.

    Each rank's `ppo_train` reads its rows in micro-batches of --train.micro_batch_size with
    `drop_last`: a share smaller than one micro-batch trains nothing (a run that ends, exit 0,
    with unchanged weights). Each training micro-batch is a collective on every rank (the
    gradient reduction, the metrics' all-reduce), so a rank with fewer waits for the others in a
    collective they never join: a hang until the NCCL timeout, on the first step, with GRPO as
    with GTPO. OpenRLHF 0.11.2 checks only that there are at least as many rollout micro-batches
    as ranks. With --train.dynamic_batch_enable OpenRLHF balances the micro-batches itself.
    """
    if compat.DYNAMIC_BATCH.get(args):
        return None
    rows = compat.training_rows_per_rank(args)
    micro = compat.TRAIN_MICRO_BATCH_SIZE.get(args)
    steps = [r // micro for r in rows]
    samples = compat.ROLLOUT_BATCH_SIZE.get(args) * compat.GROUP_SIZE.get(args)
    ranks = len(rows)
    if not any(steps):
        return (
            f"the {samples} samples of a step ({compat.ROLLOUT_BATCH_SIZE.flag} × "
            f"{compat.GROUP_SIZE.flag}) reach {'each of the ' if ranks > 1 else 'the '}"
            f"{ranks} data-parallel rank{'s' if ranks > 1 else ''} as {_counts(rows)} rows, "
            f"fewer than one training micro-batch of {micro} "
            f"({compat.TRAIN_MICRO_BATCH_SIZE.flag}): OpenRLHF drops the remainder, so no step "
            f"would train on anything. Lower {compat.TRAIN_MICRO_BATCH_SIZE.flag} to at most "
            f"{min(rows)}, or raise {compat.ROLLOUT_BATCH_SIZE.flag}."
        )
    if len(set(steps)) == 1:
        return None
    return (
        f"the {samples} samples of a step ({compat.ROLLOUT_BATCH_SIZE.flag} × "
        f"{compat.GROUP_SIZE.flag}) in micro-batches of {compat.ROLLOUT_MICRO_BATCH_SIZE.get(args)}"
        f" ({compat.ROLLOUT_MICRO_BATCH_SIZE.flag}) reach the {ranks} data-parallel ranks as "
        f"{_counts(rows)} rows, so they would train on {_counts(steps)} micro-batches of "
        f"{micro} ({compat.TRAIN_MICRO_BATCH_SIZE.flag}): each one is a collective, and the "
        "ranks with fewer would wait for the others until the collective timeout (OpenRLHF "
        "gives each rank a ceil-sized share of the micro-batches). Make the samples a multiple "
        f"of {compat.ROLLOUT_MICRO_BATCH_SIZE.flag} × {ranks}, or pass "
        f"{compat.DYNAMIC_BATCH.flag}."
    )


def _counts(values: Sequence[int]) -> str:
    """`[8, 8, 6]` → "8, 8 and 6"; a long list keeps its distinct values: "7 (×14), 2 and 0"."""
    if len(values) == 1:
        return str(values[0])
    if len(values) <= 4:
        return ", ".join(map(str, values[:-1])) + f" and {values[-1]}"
    distinct = sorted(set(values), reverse=True)
    parts = [f"{v} (×{values.count(v)})" if values.count(v) > 1 else str(v) for v in distinct]
    return ", ".join(parts[:-1]) + f" and {parts[-1]}"


def _gtpo_refusals(args: Any, config: GTPOConfig) -> list[str]:
    """OpenRLHF settings that contradict GTPO (allowed with the GRPO baseline)."""
    problems: list[str] = []
    kl_coef = compat.KL_COEF.get(args)
    if kl_coef > 0:
        problems.append(
            f"{compat.KL_COEF.flag} is {kl_coef} (OpenRLHF's default is "
            f"{compat.DEFAULT_KL_COEF}); GTPO has no KL term and no reference model (Eq. 7). "
            f"Pass {compat.KL_COEF.flag} 0, or run the GRPO baseline with {flag('algo')} grpo."
        )
    if compat.KL_LOSS.get(args):
        problems.append(
            f"{compat.KL_LOSS.flag} adds a KL loss against a reference model; GTPO has none "
            f"(Eq. 7). Drop {compat.KL_LOSS.flag}, or run the GRPO baseline with "
            f"{flag('algo')} grpo."
        )
    loss_type = compat.POLICY_LOSS_TYPE.get(args)
    if loss_type != compat.PER_TOKEN_POLICY_LOSS:
        problems.append(
            f"{compat.POLICY_LOSS_TYPE.flag} is {loss_type!r}; its ratio is per "
            "sequence, so every token of a completion gets the completion's mean λ and the "
            "protected tokens of negative completions (λ = 0, Eq. 5) are still pushed down. "
            f"Drop {compat.POLICY_LOSS_TYPE.flag} (GTPO needs the per-token "
            f"{compat.PER_TOKEN_POLICY_LOSS} loss)."
        )
    agent = compat.AGENT_FUNC.get(args)
    if agent:
        problems.append(
            f"{compat.AGENT_FUNC.flag} is {agent!r}; a multi-turn agent "
            "puts the action tokens of several turns on one position axis, so conflict "
            f"positions (Sec. 5.1) mean nothing there. Drop {compat.AGENT_FUNC.flag}, or run "
            f"the GRPO baseline with {flag('algo')} grpo."
        )
    level, mode = compat.IS_CORRECTION_LEVEL.get(args), compat.IS_CORRECTION_MODE.get(args)
    kind = correction.openrlhf_kind(level, mode)
    reason = kind and correction.refusal_reason(kind)
    if reason:
        problems.append(
            f"{compat.IS_CORRECTION_LEVEL.flag} {level} with {compat.IS_CORRECTION_MODE.flag} "
            f"{mode}: {reason}. Pass {compat.IS_CORRECTION_LEVEL.flag} token "
            f"{compat.IS_CORRECTION_MODE.flag} clip (each token's ratio to vLLM's sampler, "
            f"clipped: Eq. 7's per-token terms, each corrected), or "
            f"{compat.IS_CORRECTION_LEVEL.flag} off."
        )
    coef = compat.ENTROPY_COEF.get(args)
    if coef is not None and not math.isclose(coef, -config.entropy_coef):
        problems.append(
            f"{compat.ENTROPY_COEF.flag} is {coef}; GTPO sets it itself: −γ in the penalty form "
            "(OpenRLHF does loss -= entropy × coef and Eq. 7 subtracts γ⟨H⟩_i from the "
            "objective), unset in the advantage form. Remove "
            f"{compat.ENTROPY_COEF.flag} and set γ with {flag('gamma')} and its form with "
            f"{flag('entropy_form')}."
        )
    return problems


def _warnings(args: Any, config: GTPOConfig) -> None:
    rollout = compat.ROLLOUT_BATCH_SIZE.get(args) * compat.GROUP_SIZE.get(args)
    train_batch = compat.TRAIN_BATCH_SIZE.get(args)
    if train_batch != rollout:
        logger.warning(
            "%s %d != %s × %s = %d: each rollout is split into several optimizer steps and all "
            "but the first are off-policy (ratio ≠ 1), unlike the paper's one iteration per "
            "batch. Set %s %d to match.",
            compat.TRAIN_BATCH_SIZE.flag,
            train_batch,
            compat.ROLLOUT_BATCH_SIZE.flag,
            compat.GROUP_SIZE.flag,
            rollout,
            compat.TRAIN_BATCH_SIZE.flag,
            rollout,
        )
    if not compat.DYNAMIC_BATCH.get(args):
        micro = compat.TRAIN_MICRO_BATCH_SIZE.get(args)
        dropped = sum(r % micro for r in compat.training_rows_per_rank(args))
        if dropped:
            logger.warning(
                "%d of the %d samples of each step are never trained on: each data-parallel "
                "rank reads its share in micro-batches of %d (%s) and drops the remainder "
                "(OpenRLHF's DataLoader has drop_last). Make each rank's share a multiple of %s.",
                dropped,
                rollout,
                micro,
                compat.TRAIN_MICRO_BATCH_SIZE.flag,
                compat.TRAIN_MICRO_BATCH_SIZE.flag,
            )
    if compat.DYNAMIC_FILTERING.get(args):
        _dynamic_filtering_warning(args)
    epochs = compat.MAX_EPOCHS.get(args)
    if epochs > 1:
        logger.warning(
            "%s %d reuses each rollout, so later epochs are off-policy (ratio ≠ 1); the paper "
            "uses one iteration per batch. Pass %s 1 to match.",
            compat.MAX_EPOCHS.flag,
            epochs,
            compat.MAX_EPOCHS.flag,
        )
    if config.is_gtpo and compat.LOSS_AGG_MODE.get(args) == compat.TOKEN_MEAN:
        # Only reached when the user asked for token-mean: configure() sets the paper's mode
        # when the flag is absent.
        logger.warning(
            "%s %s averages the surrogate over all tokens of the batch; Eq. 7 averages it per "
            "completion (1/|o_i|) first. Pass %s %s to match the paper. (The entropy penalty "
            "is a per-completion mean either way.)",
            compat.LOSS_AGG_MODE.flag,
            compat.TOKEN_MEAN,
            compat.LOSS_AGG_MODE.flag,
            compat.COMPLETION_MEAN,
        )
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


def _dynamic_filtering_warning(args: Any) -> None:
    """OpenRLHF keeps a group when the mean of its `scores` lies strictly inside the range. The
    reward server's `scores` are the accuracy as 1 or 0, so a group of G with k right answers
    has mean k/G, and the groups that teach anything (GRPO's and GTPO's advantages are 0 in the
    others) are those with 0 < k < G. Warn when the range keeps none of them, or keeps groups
    that are all right or all wrong."""
    low, high = compat.DYNAMIC_FILTERING_RANGE.get(args)
    group = compat.GROUP_SIZE.get(args)
    flag_ = compat.DYNAMIC_FILTERING_RANGE.flag
    if not any(low < k / group < high for k in range(1, group)):
        logger.warning(
            "%s %g %g keeps no group that has right and wrong answers: the reward server's "
            "scores are the accuracy as 1 or 0, so a group of %d with k right answers has mean "
            "k/%d, and OpenRLHF keeps it only when %g < k/%d < %g. Every prompt would be "
            "dropped and replaced. Pass %s 0 1 (OpenRLHF's default: drop the all-right and "
            "all-wrong groups).",
            flag_, low, high, group, group, low, group, high, flag_,
        )  # fmt: skip
    elif low < 0 or high > 1:
        logger.warning(
            "%s %g %g also keeps groups whose answers are all %s (mean %s), whose advantages "
            "are all 0: the reward server's scores are the accuracy as 1 or 0, not the reward. "
            "Pass %s 0 1 to drop them.",
            flag_, low, high, "right" if high > 1 else "wrong", "1" if high > 1 else "0", flag_,
        )  # fmt: skip


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

    Raises GTPOConfigError listing every refused setting: OpenRLHF's that contradict GTPO, the
    `--gtpo.*` values GTPOConfig refuses, OpenRLHF's layout rules that it checks only after Ray
    has started (`plan.layout_refusals`), 4-bit weights without LoRA or bf16 or under ZeRO-3,
    and a W&B run named without a key (the key is taken from WANDB_API_KEY when set). In GTPO
    mode sets `--actor.entropy_coef` to −γ in the penalty form (None when γ = 0 and in the advantage
    form, whose γ⟨H⟩_i goes into the advantages; None also skips OpenRLHF's extra entropy
    pass) and, unless `--actor.loss_agg_mode` is among `given_flags` (the OpenRLHF flags on the
    command line), `--actor.loss_agg_mode seq-mean-token-mean`: Eq. 7 averages each
    completion's tokens (1/|o_i|) before averaging completions. With dr_grpo (GTPO or the GRPO
    baseline) and no `--reward.clip_range` given, OpenRLHF's clamp of the centred rewards is
    switched off (`_unclip_centred_rewards`). `--ds.lora.target_modules all-linear` is handed to
    peft as the string it expands. Logs a warning for settings that make training off-policy.
    """
    config, config_problems = _checked_config(args)
    problems = _refusals(args) + (_gtpo_refusals(args, config) if config.is_gtpo else [])
    problems += config_problems + plan.layout_refusals(args) + plan.memory_refusals(args, config)
    wandb = _wandb_refusal(args, given_flags)
    if wandb:
        problems.append(wandb)
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
    _unclip_centred_rewards(args, given_flags)
    _lora_target_modules_as_peft_reads_them(args)
    _warnings(args, config)
    logger.info("GTPO settings: %s", config)
    return config
