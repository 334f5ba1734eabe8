"""Every rule a `gtpo-openrlhf` command line must pass, in one table (`RULES`), and the settings
it is warned about (`WARNINGS`): read by a run and `--dry-run` alike, inside OpenRLHF's
hierarchize (`flags.configure`), before anything starts.

A rule takes the `Command` (the hierarchized OpenRLHF args, the GTPO config, the flags given)
and returns what it refuses, each message naming the flag to change: the OpenRLHF settings that
contradict GTPO (estimator, G, KL, the policy loss, agents, importance-sampling corrections, the
entropy coefficient), the async settings whose staleness GTPO does not measure, splits that
leave ranks waiting in a collective, 4-bit weights it cannot train, and OpenRLHF's, DeepSpeed's
and vLLM's own rules that they check only after Ray has started (placement, batch sizes, the
model's heads, the dataset's keys, the memory of a GPU). The settings are named in `compat`;
what can be read without the hub (a local model config, a local dataset) comes from `plan`.
"""

from __future__ import annotations

import ipaddress
import logging
import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from gtpo import correction
from gtpo.config import GTPOConfig, flag
from gtpo.openrlhf import compat, memory, plan
from gtpo.openrlhf.plan import first_row, local_files, model_config, unchecked

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Command:
    """What a rule reads: the hierarchized OpenRLHF args, the GTPO config (its valid values),
    and the OpenRLHF flags the command line gave."""

    args: Any
    config: GTPOConfig
    given: Collection[str] = ()


@dataclass(frozen=True)
class Rule:
    """One rule: `check` returns the refusals (a message, several, or None). `gtpo_only`:
    the GRPO baseline (`--gtpo.algo grpo`) may do what it refuses."""

    check: Callable[[Command], str | list[str] | None]
    gtpo_only: bool = False


def refusals(command: Command) -> list[str]:
    """Every refusal of `RULES` for the command, in the table's order."""
    out: list[str] = []
    for rule in RULES:
        if rule.gtpo_only and not command.config.is_gtpo:
            continue
        found = rule.check(command)
        out += [found] if isinstance(found, str) else list(found or ())
    return out


def warn(command: Command) -> None:
    """Log every warning of `WARNINGS` (settings that run, but not as the paper does)."""
    for check in WARNINGS:
        for message in check(command):
            logger.warning("%s", message)


# --- what neither GTPO nor the GRPO baseline trains with ------------------------------------


def group_estimator(c: Command) -> str | None:
    estimator = compat.ADVANTAGE_ESTIMATOR.get(c.args)
    if estimator in compat.GROUP_ESTIMATORS:
        return None
    return (
        f"{compat.ADVANTAGE_ESTIMATOR.flag} is {estimator!r}; GTPO and its GRPO baseline "
        "work on advantages relative to each prompt's group: (R_i − mean) / std (paper "
        f"Eq. 1, {compat.GROUP_NORM}) or R_i − mean (the authors' code, "
        f"{compat.DR_GRPO}). Pass {compat.ADVANTAGE_ESTIMATOR.flag} {compat.GROUP_NORM} or "
        f"{compat.DR_GRPO}."
    )


def group_size(c: Command) -> str | None:
    group = compat.GROUP_SIZE.get(c.args)
    if group >= 2:
        return None
    return (
        f"{compat.GROUP_SIZE.flag} is {group}; GTPO compares the G completions of each "
        "prompt (conflict tokens, Sec. 5.1) and needs G >= 2 (the paper uses 8 or 12). "
        f"Pass {compat.GROUP_SIZE.flag} 8."
    )


def async_settings(c: Command) -> list[str]:
    """Async settings whose staleness GTPO does not measure (`async_training.py` tags every
    rollout with the one policy version that generated it, at most one step old)."""
    args = c.args
    if not compat.ASYNC.get(args):
        return []
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


def training_split(c: Command) -> str | None:
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
    args = c.args
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


def four_bit(c: Command) -> list[str]:
    """QLoRA (`--ds.load_in_4bit` with LoRA, the authors' setting) trains, and the weight sync
    sends the dequantized base with the adapters merged (`lora.py`). What it cannot train."""
    args = c.args
    if not compat.LOAD_IN_4BIT.get(args):
        return []
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


# --- what contradicts GTPO (the GRPO baseline may) -------------------------------------------


def kl_coefficient(c: Command) -> str | None:
    kl_coef = compat.KL_COEF.get(c.args)
    if kl_coef <= 0:
        return None
    return (
        f"{compat.KL_COEF.flag} is {kl_coef} (OpenRLHF's default is "
        f"{compat.DEFAULT_KL_COEF}); GTPO has no KL term and no reference model (Eq. 7). "
        f"Pass {compat.KL_COEF.flag} 0, or run the GRPO baseline with {flag('algo')} grpo."
    )


def kl_loss(c: Command) -> str | None:
    if not compat.KL_LOSS.get(c.args):
        return None
    return (
        f"{compat.KL_LOSS.flag} adds a KL loss against a reference model; GTPO has none "
        f"(Eq. 7). Drop {compat.KL_LOSS.flag}, or run the GRPO baseline with "
        f"{flag('algo')} grpo."
    )


def policy_loss(c: Command) -> str | None:
    loss_type = compat.POLICY_LOSS_TYPE.get(c.args)
    if loss_type == compat.PER_TOKEN_POLICY_LOSS:
        return None
    return (
        f"{compat.POLICY_LOSS_TYPE.flag} is {loss_type!r}; its ratio is per "
        "sequence, so every token of a completion gets the completion's mean λ and the "
        "protected tokens of negative completions (λ = 0, Eq. 5) are still pushed down. "
        f"Drop {compat.POLICY_LOSS_TYPE.flag} (GTPO needs the per-token "
        f"{compat.PER_TOKEN_POLICY_LOSS} loss)."
    )


def agent(c: Command) -> str | None:
    agent = compat.AGENT_FUNC.get(c.args)
    if not agent:
        return None
    return (
        f"{compat.AGENT_FUNC.flag} is {agent!r}; a multi-turn agent "
        "puts the action tokens of several turns on one position axis, so conflict "
        f"positions (Sec. 5.1) mean nothing there. Drop {compat.AGENT_FUNC.flag}, or run "
        f"the GRPO baseline with {flag('algo')} grpo."
    )


def importance_correction(c: Command) -> str | None:
    level, mode = compat.IS_CORRECTION_LEVEL.get(c.args), compat.IS_CORRECTION_MODE.get(c.args)
    kind = correction.openrlhf_kind(level, mode)
    reason = kind and correction.refusal_reason(kind)
    if not reason:
        return None
    return (
        f"{compat.IS_CORRECTION_LEVEL.flag} {level} with {compat.IS_CORRECTION_MODE.flag} "
        f"{mode}: {reason}. Pass {compat.IS_CORRECTION_LEVEL.flag} token "
        f"{compat.IS_CORRECTION_MODE.flag} clip (each token's ratio to vLLM's sampler, "
        f"clipped: Eq. 7's per-token terms, each corrected), or "
        f"{compat.IS_CORRECTION_LEVEL.flag} off."
    )


def entropy_coefficient(c: Command) -> str | None:
    coef = compat.ENTROPY_COEF.get(c.args)
    if coef is None or math.isclose(coef, -c.config.entropy_coef):
        return None
    return (
        f"{compat.ENTROPY_COEF.flag} is {coef}; GTPO sets it itself: −γ in the penalty form "
        "(OpenRLHF does loss -= entropy × coef and Eq. 7 subtracts γ⟨H⟩_i from the "
        "objective), unset in the advantage form. Remove "
        f"{compat.ENTROPY_COEF.flag} and set γ with {flag('gamma')} and its form with "
        f"{flag('entropy_form')}."
    )


# --- OpenRLHF's, DeepSpeed's and vLLM's own rules, before Ray ----------------------------------


def reference_placement(c: Command) -> str | None:
    """A reference model (a KL term) colocated with the policy must span the policy's GPUs:
    OpenRLHF asserts it in train(), after Ray has started."""
    args = c.args
    nodes, gpus = compat.ACTOR_NODES.get(args), compat.ACTOR_GPUS_PER_NODE.get(args)
    ref = (compat.REF_NODES.get(args), compat.REF_GPUS_PER_NODE.get(args))
    if not (compat.KL_COEF.get(args) > 0 and plan.colocated(args) and ref != (nodes, gpus)):
        return None
    colocate = compat.COLOCATE_ALL if compat.COLOCATE_ALL.get(args) else compat.COLOCATE_ACTOR_REF
    return (
        f"{compat.KL_COEF.flag} {compat.KL_COEF.get(args)} starts a reference model, and "
        f"{colocate.flag} puts it on the policy's GPUs: OpenRLHF asserts, after Ray has "
        f"started, that it spans the policy's {nodes} node(s) × {gpus} GPUs, but it spans "
        f"{ref[0]} × {ref[1]} ({compat.REF_NODES.flag}, {compat.REF_GPUS_PER_NODE.flag}; "
        f"OpenRLHF's defaults are 1 × 8). Pass {compat.REF_NODES.flag} {nodes} "
        f"{compat.REF_GPUS_PER_NODE.flag} {gpus}."
    )


def engines_placement(c: Command) -> str | None:
    """Engines on the policy's GPUs (synchronous --train.colocate_all) take one GPU each of
    them: OpenRLHF asserts it in train(), after Ray has started."""
    args = c.args
    nodes, gpus = compat.ACTOR_NODES.get(args), compat.ACTOR_GPUS_PER_NODE.get(args)
    engines = compat.VLLM_ENGINES.get(args) or 0
    tp = compat.VLLM_TENSOR_PARALLEL_SIZE.get(args)
    if not (engines > 0 and plan.engines_share_policy_gpus(args) and engines * tp != nodes * gpus):
        return None
    fix = (
        f"Pass {compat.VLLM_ENGINES.flag} {nodes * gpus // tp}"
        if nodes * gpus % tp == 0
        else f"Make {compat.VLLM_TENSOR_PARALLEL_SIZE.flag} divide the {nodes * gpus} GPUs"
    )
    return (
        f"{compat.VLLM_ENGINES.flag} {engines} × {compat.VLLM_TENSOR_PARALLEL_SIZE.flag} {tp} "
        f"= {engines * tp} GPUs, but {compat.COLOCATE_ALL.flag} puts the engines on the "
        f"policy's {nodes} × {gpus} = {nodes * gpus} GPUs, one engine GPU on each: OpenRLHF "
        f"asserts it after Ray has started. {fix}."
    )


def reward_reach(c: Command) -> str | None:
    """A reward server on this machine's loopback is not reached from a second node."""
    args = c.args
    nodes = compat.ACTOR_NODES.get(args)
    loopback = [url for url in plan.reward_urls(args) if _this_machine(urlsplit(url).hostname)]
    if nodes <= 1 or not loopback:
        return None
    return (
        f"{compat.REMOTE_URL.flag} {','.join(loopback)} is this machine's loopback, but the "
        f"policy spans {nodes} nodes and the rollout actors post rewards from the node "
        "each runs on: on the others that address is their own, where no reward server "
        f"listens. Pass {compat.REMOTE_URL.flag} with an address every node reaches, e.g. "
        "the head node's, with the server bound to it or to 0.0.0.0."
    )


def _this_machine(host: str | None) -> bool:
    """An address that means the machine it is used on (loopback, or 0.0.0.0 as a target)."""
    if host is None:
        return False  # not a URL with a host (OpenRLHF's "agent"): nothing to judge
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False  # a host name: whatever it resolves to on each node
    return address.is_loopback or address.is_unspecified


def deepspeed_batch(c: Command) -> list[str]:
    """DeepSpeed's own rule: train_batch_size == micro_batch × accumulation × data-parallel
    ranks, with accumulation >= 1 (deepspeed/runtime/config.py `_batch_assertion`, run in each
    policy rank's deepspeed.initialize). With dynamic batching OpenRLHF sets micro-batch and
    accumulation to 1 itself and the rule does not apply."""
    args = c.args
    if compat.DYNAMIC_BATCH.get(args):
        return []
    batch = compat.TRAIN_BATCH_SIZE.get(args)
    micro = compat.TRAIN_MICRO_BATCH_SIZE.get(args)
    ranks = compat.data_parallel_size(args)
    unit = micro * ranks
    if batch >= unit and batch % unit == 0:
        return []
    below, above = max(unit, batch // unit * unit), max(unit, -(-batch // unit) * unit)
    suggestion = str(below) if below == above else f"{below} or {above}"
    return [
        f"{compat.TRAIN_BATCH_SIZE.flag} {batch} is not a positive multiple of "
        f"{compat.TRAIN_MICRO_BATCH_SIZE.flag} {micro} × the {ranks} data-parallel ranks = "
        f"{unit}: DeepSpeed asserts train_batch_size == micro-batch × accumulation steps × "
        f"ranks when each policy rank starts, after Ray has started. Pass "
        f"{compat.TRAIN_BATCH_SIZE.flag} {suggestion} (the rollout's samples, "
        f"{compat.ROLLOUT_BATCH_SIZE.flag} × {compat.GROUP_SIZE.flag}, for one optimizer step "
        "per rollout), or change the micro-batch."
    ]


def model_heads(c: Command) -> str | None:
    """vLLM's tensor parallelism must divide the model's attention heads (it refuses when each
    engine starts), judged from a config already on this machine."""
    args = c.args
    config = model_config(compat.MODEL.get(args)) or {}
    engines = compat.VLLM_ENGINES.get(args) or 0
    tp = compat.VLLM_TENSOR_PARALLEL_SIZE.get(args)
    heads = config.get("num_attention_heads")
    if not (engines > 0 and heads and heads % tp):
        return None
    return (
        f"{compat.VLLM_TENSOR_PARALLEL_SIZE.flag} {tp} does not divide the model's {heads} "
        "attention heads: vLLM refuses it when each engine starts. Pass a divisor of "
        f"{heads}."
    )


def dataset_keys(c: Command) -> list[str]:
    """Keys OpenRLHF's PromptDataset reads from every row, checked on each local file's first
    row (OpenRLHF would raise a KeyError in the controller, after Ray has started)."""
    args = c.args
    files = local_files(compat.PROMPT_DATASET.get(args)) or []
    problems = []
    for file in files:
        row = first_row(file) or {}
        for key_arg in (compat.INPUT_KEY, compat.LABEL_KEY):
            key = key_arg.get(args)
            if key is not None and key not in row:
                problems.append(
                    f"{key_arg.flag} {key!r}: the first row of {file} has no such field (it has "
                    f"{sorted(row)}). Pass {key_arg.flag} with one of them."
                )
    return problems


def gpu_memory(c: Command) -> list[str]:
    """Each phase's memory on a policy GPU, estimated (`memory.py`), against the GPU's."""
    estimate, size, source = plan.memory_estimate(c.args, c.config)
    return memory.refusals(c.args, estimate, size, source) if estimate else []


def wandb_key(c: Command) -> str | None:
    """OpenRLHF starts W&B only when --logger.wandb.key is set; a command that names a W&B run
    without it would log to TensorBoard alone. The key then comes from WANDB_API_KEY (set in
    place), or the command is refused."""
    args = c.args
    given_flags = c.given
    asked = [a.flag for a in compat.WANDB_SETTINGS if a.flag in given_flags]
    if compat.WANDB_KEY.get(args) or not asked:
        return None
    return (
        f"{', '.join(asked)} names a W&B run, but OpenRLHF starts W&B only with "
        f"{compat.WANDB_KEY.flag} (its trainer: `WandbLogger(args) if args.logger.wandb.key`), "
        "so the run would log to TensorBoard alone. Export WANDB_API_KEY where gtpo-openrlhf "
        f"runs (the launcher passes it as {compat.WANDB_KEY.flag}), pass "
        f"{compat.WANDB_KEY.flag}, or drop {', '.join(asked)}."
    )


# --- settings that run, but not as the paper does (warned) --------------------------------------


def off_policy(c: Command) -> list[str]:
    """Optimizer steps on one rollout after its first are off-policy (ratio ≠ 1)."""
    args, out = c.args, []
    rollout = compat.ROLLOUT_BATCH_SIZE.get(args) * compat.GROUP_SIZE.get(args)
    train_batch = compat.TRAIN_BATCH_SIZE.get(args)
    if train_batch != rollout:
        out.append(
            f"{compat.TRAIN_BATCH_SIZE.flag} {train_batch} != {compat.ROLLOUT_BATCH_SIZE.flag} × "
            f"{compat.GROUP_SIZE.flag} = {rollout}: each rollout is split into several optimizer "
            "steps and all but the first are off-policy (ratio ≠ 1), unlike the paper's one "
            f"iteration per batch. Set {compat.TRAIN_BATCH_SIZE.flag} {rollout} to match."
        )
    epochs = compat.MAX_EPOCHS.get(args)
    if epochs > 1:
        out.append(
            f"{compat.MAX_EPOCHS.flag} {epochs} reuses each rollout, so later epochs are "
            "off-policy (ratio ≠ 1); the paper uses one iteration per batch. Pass "
            f"{compat.MAX_EPOCHS.flag} 1 to match."
        )
    return out


def dropped_samples(c: Command) -> list[str]:
    """Samples OpenRLHF's DataLoader drops (drop_last) on every step."""
    args = c.args
    if compat.DYNAMIC_BATCH.get(args):
        return []
    micro = compat.TRAIN_MICRO_BATCH_SIZE.get(args)
    dropped = sum(r % micro for r in compat.training_rows_per_rank(args))
    if not dropped:
        return []
    rollout = compat.ROLLOUT_BATCH_SIZE.get(args) * compat.GROUP_SIZE.get(args)
    return [
        f"{dropped} of the {rollout} samples of each step are never trained on: each "
        f"data-parallel rank reads its share in micro-batches of {micro} "
        f"({compat.TRAIN_MICRO_BATCH_SIZE.flag}) and drops the remainder (OpenRLHF's DataLoader "
        f"has drop_last). Make each rank's share a multiple of "
        f"{compat.TRAIN_MICRO_BATCH_SIZE.flag}."
    ]


def dynamic_filtering_range(c: Command) -> list[str]:
    """OpenRLHF keeps a group when the mean of its `scores` lies strictly inside the range. The
    reward server's `scores` are the accuracy as 1 or 0, so a group of G with k right answers
    has mean k/G, and the groups that teach anything (GRPO's and GTPO's advantages are 0 in the
    others) are those with 0 < k < G. Warned when the range keeps none of them, or keeps groups
    that are all right or all wrong."""
    args = c.args
    if not compat.DYNAMIC_FILTERING.get(args):
        return []
    low, high = compat.DYNAMIC_FILTERING_RANGE.get(args)
    group = compat.GROUP_SIZE.get(args)
    flag_ = compat.DYNAMIC_FILTERING_RANGE.flag
    if not any(low < k / group < high for k in range(1, group)):
        return [
            f"{flag_} {low:g} {high:g} keeps no group that has right and wrong answers: the "
            "reward server's scores are the accuracy as 1 or 0, so a group of "
            f"{group} with k right answers has mean k/{group}, and OpenRLHF keeps it only when "
            f"{low:g} < k/{group} < {high:g}. Every prompt would be dropped and replaced. Pass "
            f"{flag_} 0 1 (OpenRLHF's default: drop the all-right and all-wrong groups)."
        ]
    if low < 0 or high > 1:
        kind, mean = ("right", "1") if high > 1 else ("wrong", "0")
        return [
            f"{flag_} {low:g} {high:g} also keeps groups whose answers are all {kind} (mean "
            f"{mean}), whose advantages are all 0: the reward server's scores are the accuracy "
            f"as 1 or 0, not the reward. Pass {flag_} 0 1 to drop them."
        ]
    return []


def token_mean(c: Command) -> list[str]:
    """Only when the command asks for token-mean: `flags.configure` sets the paper's
    per-completion mean when the flag is absent."""
    asked = compat.LOSS_AGG_MODE.flag in c.given
    if not (c.config.is_gtpo and asked and compat.LOSS_AGG_MODE.get(c.args) == compat.TOKEN_MEAN):
        return []
    return [
        f"{compat.LOSS_AGG_MODE.flag} {compat.TOKEN_MEAN} averages the surrogate over all "
        "tokens of the batch; Eq. 7 averages it per completion (1/|o_i|) first. Pass "
        f"{compat.LOSS_AGG_MODE.flag} {compat.COMPLETION_MEAN} to match the paper. (The "
        "entropy penalty is a per-completion mean either way.)"
    ]


def model_positions(c: Command) -> list[str]:
    """Warned, not refused: vLLM derives its length limit from more than this one field."""
    args = c.args
    config = model_config(compat.MODEL.get(args)) or {}
    positions = config.get("max_position_embeddings")
    max_len = compat.MAX_LEN.get(args)
    engines = compat.VLLM_ENGINES.get(args) or 0
    if not (engines > 0 and positions and max_len > positions and not config.get("rope_scaling")):
        return []
    return [
        f"{compat.MAX_LEN.flag} {max_len} exceeds the model's {positions} positions "
        "(max_position_embeddings): vLLM refuses that max_model_len when each engine starts "
        f"unless the model's rope scaling extends it. Pass {compat.MAX_LEN.flag} {positions} or "
        "less."
    ]


RULES: tuple[Rule, ...] = (
    Rule(group_estimator),
    Rule(group_size),
    Rule(async_settings),
    Rule(training_split),
    Rule(four_bit),
    Rule(kl_coefficient, gtpo_only=True),
    Rule(kl_loss, gtpo_only=True),
    Rule(policy_loss, gtpo_only=True),
    Rule(agent, gtpo_only=True),
    Rule(importance_correction, gtpo_only=True),
    Rule(entropy_coefficient, gtpo_only=True),
    Rule(reference_placement),
    Rule(engines_placement),
    Rule(reward_reach),
    Rule(deepspeed_batch),
    Rule(model_heads),
    Rule(dataset_keys),
    Rule(gpu_memory),
    Rule(wandb_key),
)


NOT_CHECKED = "not checked before the run: "


def not_checked(c: Command) -> list[str]:
    """What no rule could judge (`plan.unchecked`): said before a run as it is in the plan."""
    return [NOT_CHECKED + what for what in unchecked(c.args, c.config)]


WARNINGS: tuple[Callable[[Command], list[str]], ...] = (
    off_policy, dropped_samples, dynamic_filtering_range, token_mean, model_positions,
    not_checked,
)  # fmt: skip
