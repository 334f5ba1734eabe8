"""The cluster layout of a `gtpo-openrlhf` command: OpenRLHF's own placement rules, checked
before Ray starts, and the plan `gtpo-openrlhf --dry-run` prints.

OpenRLHF 0.11.2 checks part of a command line only inside `train(args)`, after `ray.init` and
the placement groups (train_ppo_ray.py: the reference model's nodes under colocation, the vLLM
engines' GPUs under `--train.colocate_all`), and DeepSpeed checks the batch sizes when each
policy rank starts. `layout_refusals` judges the same rules from the parsed arguments alone,
so a cluster command is refused on a laptop, naming the flag, instead of after its GPUs were
allocated. Nothing here starts Ray, loads weights or reaches the hub: a model's config is read
only from a local directory or the local Hugging Face cache, a dataset only from a local file.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from gtpo.config import GTPOConfig, flag
from gtpo.openrlhf import compat, memory

logger = logging.getLogger(__name__)


# --- what can be read without the hub -------------------------------------------------------


def local_model_config(name: str | None) -> dict[str, Any] | None:
    """The model's config.json from a local directory or the local HF cache; None otherwise.

    `try_to_load_from_cache` only looks in the cache, so a hub id that was never downloaded
    is not fetched (a dry run on a laptop stays offline)."""
    if not name:
        return None
    path = Path(name).expanduser()
    if path.is_dir():
        file = path / "config.json"
        return json.loads(file.read_text()) if file.is_file() else None
    if name.count("/") > 1 or name.startswith((".", "/", "~")):
        return None  # a path that does not exist, not a hub id
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    try:
        cached = try_to_load_from_cache(name, "config.json")
    except Exception:  # an id the hub's own validator refuses: nothing cached under it
        return None
    if not isinstance(cached, str):
        return None
    config = json.loads(Path(cached).read_text())
    return config.get("text_config", config)  # vision-language models nest the LM's


def _local_files(spec: str | None) -> list[Path] | None:
    """The local JSONL files of --data.prompt_dataset (comma-separated, `name@dir` as
    OpenRLHF's blending_datasets reads it); None when any part is not one."""
    if not spec:
        return None
    files = []
    for part in spec.split(","):
        path = Path(part.split("@")[0].strip()).expanduser()
        if path.suffix != ".jsonl" or not path.is_file():
            return None
        files.append(path)
    return files


def dataset_prompts(args: Any) -> int | None:
    """How many prompts OpenRLHF's prepare_datasets keeps (each file up to --data.max_samples,
    then the first --data.max_samples of them all), when every dataset is a local JSONL file
    and they are concatenated (no --data.prompt_probs); None otherwise."""
    files = _local_files(compat.PROMPT_DATASET.get(args))
    if files is None or compat.PROMPT_PROBS.get(args):
        return None
    cap = compat.MAX_SAMPLES.get(args)
    total = 0
    for file in files:
        with file.open("rb") as handle:
            total += min(cap, sum(1 for line in handle if line.strip()))
    return min(cap, total)


def _first_row(file: Path) -> dict[str, Any] | None:
    with file.open() as handle:
        for line in handle:
            if line.strip():
                row = json.loads(line)
                return row if isinstance(row, dict) else None
    return None


# --- OpenRLHF's rules, before Ray -----------------------------------------------------------


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


def _policy_gpus(args: Any) -> tuple[int, int]:
    return compat.ACTOR_NODES.get(args), compat.ACTOR_GPUS_PER_NODE.get(args)


def _colocated(args: Any) -> bool:
    return bool(compat.COLOCATE_ALL.get(args) or compat.COLOCATE_ACTOR_REF.get(args))


def _engines_share_policy_gpus(args: Any) -> bool:
    # train() hands the engines the policy's placement group only when synchronous.
    return bool(compat.COLOCATE_ALL.get(args) and not compat.ASYNC.get(args))


def layout_refusals(args: Any) -> list[str]:
    """One line per OpenRLHF layout rule the command breaks that OpenRLHF itself would only
    report after Ray has started (or that fails later still), each naming the flag to change."""
    problems: list[str] = []
    nodes, gpus = _policy_gpus(args)
    ref = (compat.REF_NODES.get(args), compat.REF_GPUS_PER_NODE.get(args))
    if compat.KL_COEF.get(args) > 0 and _colocated(args) and ref != (nodes, gpus):
        colocate = (
            compat.COLOCATE_ALL if compat.COLOCATE_ALL.get(args) else compat.COLOCATE_ACTOR_REF
        )
        problems.append(
            f"{compat.KL_COEF.flag} {compat.KL_COEF.get(args)} starts a reference model, and "
            f"{colocate.flag} puts it on the policy's GPUs: OpenRLHF asserts, after Ray has "
            f"started, that it spans the policy's {nodes} node(s) × {gpus} GPUs, but it spans "
            f"{ref[0]} × {ref[1]} ({compat.REF_NODES.flag}, {compat.REF_GPUS_PER_NODE.flag}; "
            f"OpenRLHF's defaults are 1 × 8). Pass {compat.REF_NODES.flag} {nodes} "
            f"{compat.REF_GPUS_PER_NODE.flag} {gpus}."
        )
    engines = compat.VLLM_ENGINES.get(args) or 0
    tp = compat.VLLM_TENSOR_PARALLEL_SIZE.get(args)
    if engines > 0 and _engines_share_policy_gpus(args) and engines * tp != nodes * gpus:
        fix = (
            f"Pass {compat.VLLM_ENGINES.flag} {nodes * gpus // tp}"
            if nodes * gpus % tp == 0
            else f"Make {compat.VLLM_TENSOR_PARALLEL_SIZE.flag} divide the {nodes * gpus} GPUs"
        )
        problems.append(
            f"{compat.VLLM_ENGINES.flag} {engines} × {compat.VLLM_TENSOR_PARALLEL_SIZE.flag} {tp} "
            f"= {engines * tp} GPUs, but {compat.COLOCATE_ALL.flag} puts the engines on the "
            f"policy's {nodes} × {gpus} = {nodes * gpus} GPUs, one engine GPU on each: OpenRLHF "
            f"asserts it after Ray has started. {fix}."
        )
    loopback = [url for url in _reward_urls(args) if _this_machine(urlsplit(url).hostname)]
    if nodes > 1 and loopback:
        problems.append(
            f"{compat.REMOTE_URL.flag} {','.join(loopback)} is this machine's loopback, but the "
            f"policy spans {nodes} nodes and the rollout actors post rewards from the node "
            "each runs on: on the others that address is their own, where no reward server "
            f"listens. Pass {compat.REMOTE_URL.flag} with an address every node reaches, e.g. "
            "the head node's, with the server bound to it or to 0.0.0.0."
        )
    problems += _batch_refusals(args)
    problems += _model_refusals(args, engines, tp)
    problems += _dataset_refusals(args)
    return problems


def _batch_refusals(args: Any) -> list[str]:
    """DeepSpeed's own rule: train_batch_size == micro_batch × accumulation × data-parallel
    ranks, with accumulation >= 1 (deepspeed/runtime/config.py `_batch_assertion`, run in each
    policy rank's deepspeed.initialize). With dynamic batching OpenRLHF sets micro-batch and
    accumulation to 1 itself and the rule does not apply."""
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


def _model_refusals(args: Any, engines: int, tp: int) -> list[str]:
    """Rules vLLM checks when the engines start, judged from a config already on this machine
    (refused), and one it may not apply (warned)."""
    config = local_model_config(compat.MODEL.get(args))
    if config is None:
        return []
    problems = []
    heads = config.get("num_attention_heads")
    if engines > 0 and heads and heads % tp:
        problems.append(
            f"{compat.VLLM_TENSOR_PARALLEL_SIZE.flag} {tp} does not divide the model's {heads} "
            "attention heads: vLLM refuses it when each engine starts. Pass a divisor of "
            f"{heads}."
        )
    positions = config.get("max_position_embeddings")
    max_len = compat.MAX_LEN.get(args)
    if engines > 0 and positions and max_len > positions and not config.get("rope_scaling"):
        # A warning, not a refusal: vLLM derives the limit from more than this one field.
        logger.warning(
            "%s %d exceeds the model's %d positions (max_position_embeddings): vLLM refuses "
            "that max_model_len when each engine starts unless the model's rope scaling "
            "extends it. Pass %s %d or less.",
            compat.MAX_LEN.flag, max_len, positions, compat.MAX_LEN.flag, positions,
        )  # fmt: skip
    return problems


def _dataset_refusals(args: Any) -> list[str]:
    """Keys OpenRLHF's PromptDataset reads from every row, checked on each local file's first
    row (OpenRLHF would raise a KeyError in the controller, after Ray has started)."""
    files = _local_files(compat.PROMPT_DATASET.get(args)) or []
    problems = []
    for file in files:
        row = _first_row(file) or {}
        for key_arg in (compat.INPUT_KEY, compat.LABEL_KEY):
            key = key_arg.get(args)
            if key is not None and key not in row:
                problems.append(
                    f"{key_arg.flag} {key!r}: the first row of {file} has no such field (it has "
                    f"{sorted(row)}). Pass {key_arg.flag} with one of them."
                )
    return problems


# --- memory per GPU (memory.py) -------------------------------------------------------------


def gpu_memory(config: GTPOConfig) -> tuple[int | None, str]:
    """One GPU's bytes and where that number comes from: the GPU of the machine the launcher
    runs on (the head node of a cluster), else --gtpo.gpu_memory_gib (a dry run on a laptop),
    else unknown."""
    try:
        import torch

        if torch.cuda.is_available():
            device = torch.cuda.get_device_properties(0)
            return int(device.total_memory), f"the local {device.name}"
    except Exception:  # no usable CUDA here: fall back to the flag
        pass
    if config.gpu_memory_gib is not None:
        return int(config.gpu_memory_gib * memory.GIB), flag("gpu_memory_gib")
    return None, ""


def memory_estimate(args: Any, config: GTPOConfig) -> tuple[memory.GPUMemory | None, int, str]:
    """Each phase's memory on a policy GPU, the GPU's bytes and their source; no estimate
    without the model's config or a GPU size."""
    size, source = gpu_memory(config)
    shape = memory.ModelShape.from_config(local_model_config(compat.MODEL.get(args)) or {})
    if shape is None or size is None:
        return None, size or 0, source
    return memory.estimate(args, shape, size), size, source


def memory_refusals(args: Any, config: GTPOConfig) -> list[str]:
    estimate, size, source = memory_estimate(args, config)
    return memory.refusals(args, estimate, size, source) if estimate else []


def _memory_rows(args: Any, config: GTPOConfig) -> list[str]:
    estimate, size, source = memory_estimate(args, config)
    if estimate is None:
        why = (
            "the model's config was not read"
            if size
            else f"one GPU's size is unknown: pass {flag('gpu_memory_gib')}"
        )
        return [_row("memory", f"not estimated ({why})")]
    rows = [_row("memory", f"per policy GPU of {memory.gib(size)} ({source}), estimates:")]
    if estimate.generation is not None:
        rows.append(_row("  generation", estimate.generation.describe()))
    rows.append(_row("  training", estimate.training.describe()))
    rows.append(
        _row(
            "  vLLM",
            f"{compat.VLLM_MEMORY.flag} {compat.VLLM_MEMORY.get(args)}: "
            f"{memory.gib(estimate.engine_share)}, its KV cache holds "
            f"{estimate.kv_sequences} sequences of {compat.MAX_LEN.get(args)} tokens",
        )
    )
    return rows


# --- the plan -------------------------------------------------------------------------------


def _flatten(ns: Any, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in vars(ns).items():
        if hasattr(value, "__dict__") and not isinstance(value, type):
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def changed_settings(before: Any, after: Any) -> dict[str, tuple[Any, Any]]:
    """`--flag` -> (before, after) for every OpenRLHF setting that differs (not `--gtpo.*`)."""
    old, new = _flatten(before), _flatten(after)
    return {
        "--" + key: (old.get(key), value)
        for key, value in new.items()
        if not key.startswith("gtpo.") and old.get(key) != value
    }


def _shown(flag_: str, value: Any) -> str:
    return "***" if value and flag_ == compat.WANDB_KEY.flag else str(value)


def _counts(values: Sequence[int]) -> str:
    distinct = sorted(set(values), reverse=True)
    return ", ".join(
        f"{v} (×{values.count(v)})" if values.count(v) > 1 else str(v) for v in distinct
    )


def _reward_urls(args: Any) -> list[str]:
    """--reward.remote_url as a list (OpenRLHF splits the comma-separated flag after parsing)."""
    urls = compat.REMOTE_URL.get(args) or []
    return urls.split(",") if isinstance(urls, str) else list(urls)


def _reward_lines(args: Any) -> list[str]:
    lines = []
    for url in _reward_urls(args):
        query = parse_qs(urlsplit(url).query)
        response_format = query.get("format", ["the server's default (GTPO_RS_RESPONSE_FORMAT)"])[0]
        shown = url.split("?")[0] + ("?…token hidden" if "token" in query else "")
        lines.append(f"{shown}  response format: {response_format}")
    return lines or ["none (--reward.remote_url not set: OpenRLHF would start a reward model)"]


def _row(label: str, text: str) -> str:
    return f"{label:<13} {text}"


def _placement_rows(args: Any) -> list[str]:
    """Where the policy, the reference model and the engines go, and the GPUs they need."""
    nodes, gpus = _policy_gpus(args)
    ring, ds_tp = compat.RING_ATTN_SIZE.get(args), compat.TENSOR_PARALLEL_SIZE.get(args)
    lora = compat.LORA_RANK.get(args)
    total = nodes * gpus
    rows = [
        _row("cluster", f"{nodes} node(s) × {gpus} GPUs for the policy"),
        _row(
            "policy",
            f"{nodes * gpus} ranks: {compat.data_parallel_size(args)} data-parallel × ring "
            f"attention {ring} × tensor parallel {ds_tp}; ZeRO-{compat.ZERO_STAGE.get(args)}; "
            + (f"LoRA rank {lora}" if lora else "full weights"),
        ),
    ]
    if compat.KL_COEF.get(args) > 0:
        ref_nodes, ref_gpus = compat.REF_NODES.get(args), compat.REF_GPUS_PER_NODE.get(args)
        where = "on the policy's GPUs" if _colocated(args) else "on GPUs of its own"
        total += 0 if _colocated(args) else ref_nodes * ref_gpus
        text = f"{ref_nodes} node(s) × {ref_gpus} GPUs, {where} (KL {compat.KL_COEF.get(args)})"
        rows.append(_row("reference", text))
    else:
        rows.append(_row("reference", "none (no KL term)"))
    engines = compat.VLLM_ENGINES.get(args) or 0
    if engines:
        tp = compat.VLLM_TENSOR_PARALLEL_SIZE.get(args)
        if _engines_share_policy_gpus(args):
            asleep = ", asleep while it trains" if compat.VLLM_SLEEP.get(args) else ""
            where = f"on the policy's GPUs{asleep}"
        else:
            where = "on GPUs of their own"
            total += engines * tp
        rows.append(_row("engines", f"{engines} vLLM engine(s) × tensor parallel {tp}, {where}"))
    rows.append(_row("GPUs in all", f"{total} (Ray must offer them, or its placement waits)"))
    return rows


def _model_row(args: Any) -> str:
    model = compat.MODEL.get(args)
    config = local_model_config(model)
    if config is None:
        text = "config not read (not a local directory, not in the HF cache; nothing fetched)"
    else:
        text = (
            f"{config.get('num_hidden_layers')} layers, {config.get('num_attention_heads')} "
            f"attention heads, vocabulary {config.get('vocab_size')}, "
            f"{config.get('max_position_embeddings')} positions"
        )
    return _row("model", f"{model}: {text}")


def _batch_rows(args: Any) -> list[str]:
    """A step's samples: rollout micro-batches per rank, training micro-batches, optimizer steps
    (the split `compat.training_rows_per_rank` models), and steps per episode."""
    group, prompts = compat.GROUP_SIZE.get(args), compat.ROLLOUT_BATCH_SIZE.get(args)
    samples = prompts * group
    ranks = compat.data_parallel_size(args)
    rollout_micro = compat.ROLLOUT_MICRO_BATCH_SIZE.get(args)
    micro_batches = -(-samples // rollout_micro)
    share = -(-micro_batches // ranks)
    per_rank = [max(0, min(share, micro_batches - r * share)) for r in range(ranks)]
    rows = [
        _row(
            "rollout",
            f"{prompts} prompts × G {group} = {samples} samples a step; "
            f"{_new_tokens(compat.MAX_NEW_TOKENS.get(args))}, prompt + response cut at "
            f"{compat.MAX_LEN.get(args)} ({compat.MAX_LEN.flag})",
        ),
        _row(
            "experience",
            f"{micro_batches} rollout micro-batch(es) of up to {rollout_micro}; per rank: "
            f"{_counts(per_rank)}",
        ),
    ]
    if compat.DYNAMIC_BATCH.get(args):
        rows.append(_row("training", "dynamic batching: OpenRLHF balances tokens over the ranks"))
    else:
        split = compat.training_rows_per_rank(args)
        micro = compat.TRAIN_MICRO_BATCH_SIZE.get(args)
        accumulation = compat.accumulation_steps(args)
        epochs = compat.MAX_EPOCHS.get(args)
        rows.append(
            _row(
                "training",
                f"rows per rank: {_counts(split)} → {_counts([r // micro for r in split])} "
                f"micro-batch(es) of {micro}, {accumulation} per optimizer step → "
                f"{split[0] // micro // accumulation} optimizer step(s) per rollout"
                + (f" × {epochs} epochs" if epochs > 1 else ""),
            )
        )
    count = dataset_prompts(args)
    if count is None:
        rows.append(_row("steps", "dataset not read (not local JSONL files): steps unknown"))
    else:
        episodes, epochs = compat.NUM_EPISODES.get(args), compat.MAX_EPOCHS.get(args)
        rollouts = -(-count // prompts)
        last = count - (rollouts - 1) * prompts
        schedule = count * group // compat.TRAIN_BATCH_SIZE.get(args) * episodes * epochs
        rows.append(
            _row(
                "steps",
                f"{count} prompts → {rollouts} rollouts per episode"
                + (f" (the last of {last} prompts)" if last != prompts else "")
                + f" × {episodes} episode(s); OpenRLHF's max_steps (learning-rate schedule) "
                f"{schedule}",
            )
        )
    return rows


def _method_rows(args: Any, config: GTPOConfig, changes: dict[str, tuple[Any, Any]]) -> list[str]:
    group = compat.GROUP_SIZE.get(args)
    if config.h_ini is not None:
        h_ini = f"given: {config.h_ini} nats ({flag('h_ini')})"
    elif config.filter_mode == "auto":
        h_ini = (
            f"measured before the first update on the first {config.h_ini_prompts} prompts × "
            f"G {group} = {config.h_ini_prompts * group} generations"
        )
    else:
        h_ini = f"not needed (entropy filter {config.filter_mode})"
    if config.is_gtpo:
        conflict = "off" if config.no_conflict else f"{config.conflict_weight:g}"
        cut = f"{config.entropy_threshold:.4g} nats"
        delta = {
            "auto": f"δ drops ⟨H⟩ above {cut} when H_ini is below it",
            "on": f"δ drops ⟨H⟩ above {cut} on every step",
            "off": "δ off",
        }[config.filter_mode]
        method = (
            f"GTPO: advantages × λ·δ (Eq. 5-6; λ on conflict tokens of positive completions: "
            f"{conflict}; {delta}), γ = {config.gamma:g} in the {config.entropy_form} form "
            "(Eq. 7)"
        )
    else:
        method = "the GRPO baseline: λ ≡ 1, δ ≡ 1, γ = 0 (entropy measured and logged)"
    rows = [_row("H_ini", h_ini), _row("method", method)]
    shown = [f"{k} {_shown(k, a)} → {_shown(k, b)}" for k, (a, b) in sorted(changes.items())]
    if shown:
        rows.append(_row("GTPO sets", "; ".join(shown)))
    run = compat.WANDB_SETTINGS[0].get(args)
    wandb = f"on, run {run!r}" if compat.WANDB_KEY.get(args) else "off"
    tensorboard = compat.TENSORBOARD_DIR.get(args) or "off"
    rows.append(_row("W&B", f"{wandb}; TensorBoard: {tensorboard}"))
    return rows


def render(args: Any, config: GTPOConfig, changes: dict[str, tuple[Any, Any]], version: str) -> str:
    """The plan of a checked command line (`gtpo-openrlhf --dry-run`): where every model goes,
    how a step's samples are split, how long an episode is, the reward URLs, and what GTPO
    changes. `changes` is `changed_settings` of the args before and after `flags.configure`."""
    reward = _reward_lines(args)
    return "\n".join(
        [
            f"gtpo-openrlhf --dry-run: OpenRLHF {version}; every check passed; nothing started.",
            *_placement_rows(args),
            _model_row(args),
            *_batch_rows(args),
            *_memory_rows(args, config),
            _row("rewards", reward[0]),
            *(_row("", line) for line in reward[1:]),
            *_method_rows(args, config, changes),
        ]
    )


def wandb_key_from_environment() -> str | None:
    """The W&B key the launcher passes when the command asks for W&B without one."""
    return os.environ.get("WANDB_API_KEY") or None


def _new_tokens(limit: int | None) -> str:
    # OpenRLHF 0.11.2 passes an unset --rollout.max_new_tokens to vLLM as max_tokens=None.
    if limit is None:
        return f"new tokens up to the context window ({compat.MAX_NEW_TOKENS.flag} not set)"
    return f"up to {limit} new tokens"
