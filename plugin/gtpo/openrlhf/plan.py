"""The plan `gtpo-openrlhf --dry-run` prints: the cluster layout of a command, how a step's
samples are split, the memory of a GPU, the reward URLs and what GTPO sets; and what can be read
about a command (the rules it must pass are `checks.py`'s).

Nothing here starts Ray or loads weights. A model's config is read from a local directory or
the local Hugging Face cache, else its config.json alone (a few KB) is fetched from the hub,
with the user's token (HF_TOKEN), into that cache; never with HF_HUB_OFFLINE set. A dataset is
read only from a local file. What could not be read is named in the plan's first line, with what
it leaves unchecked and how to make the check run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from gtpo.config import GTPOConfig, flag
from gtpo.openrlhf import compat, memory

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


# (model, hub endpoint, cache, token) → why its config.json could not be fetched: the plan and
# the checks ask for it several times, and a hub that cannot be reached must cost one timeout.
_NOT_FETCHED: dict[tuple[str, str, str, int], str] = {}
FETCH_TIMEOUT_S = 10.0


def model_config(name: str | None) -> dict[str, Any] | None:
    """The model's config: `local_model_config`, else fetched from the hub (`fetch_failure`
    says why not)."""
    config = local_model_config(name)
    if config is not None or not name or fetch_failure(name) is not None:
        return config
    return local_model_config(name)  # fetch_failure fetched it into the cache


def fetch_failure(name: str) -> str | None:
    """None once `name`'s config.json is in the local cache (fetched now if need be); else why
    it is not: offline, gated, not found, or the hub unreachable."""
    if local_model_config(name) is not None:
        return None
    path = Path(name).expanduser()
    if path.exists() or name.count("/") > 1 or name.startswith((".", "/", "~")):
        return f"{name} has no config.json" if path.exists() else f"{name} does not exist"
    try:
        from huggingface_hub import constants, get_token, hf_hub_download
        from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError
    except ImportError:
        return "huggingface_hub is not installed"
    key = (name, constants.ENDPOINT, str(constants.HF_HUB_CACHE), hash(get_token()))
    if key in _NOT_FETCHED:
        return _NOT_FETCHED[key]
    if constants.HF_HUB_OFFLINE:
        return "it is not in the local Hugging Face cache and HF_HUB_OFFLINE is set"
    try:
        hf_hub_download(name, "config.json", etag_timeout=FETCH_TIMEOUT_S)
        return None
    except GatedRepoError:
        why = "the hub refused its config.json: the model is gated, set HF_TOKEN to a token "
        why += "that has access"
    except RepositoryNotFoundError:
        why = "the hub has no such model (or it is private: set HF_TOKEN)"
    except Exception as exc:  # no network, a proxy, a hub error: the plan says so
        why = f"the hub could not be reached ({type(exc).__name__})"
    _NOT_FETCHED[key] = why
    return why


def local_files(spec: str | None) -> list[Path] | None:
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
    files = local_files(compat.PROMPT_DATASET.get(args))
    if files is None or compat.PROMPT_PROBS.get(args):
        return None
    cap = compat.MAX_SAMPLES.get(args)
    total = 0
    for file in files:
        with file.open("rb") as handle:
            total += min(cap, sum(1 for line in handle if line.strip()))
    return min(cap, total)


def first_row(file: Path) -> dict[str, Any] | None:
    with file.open() as handle:
        for line in handle:
            if line.strip():
                row = json.loads(line)
                return row if isinstance(row, dict) else None
    return None


# --- the layout ----------------------------------------------------------------------------


def _policy_gpus(args: Any) -> tuple[int, int]:
    return compat.ACTOR_NODES.get(args), compat.ACTOR_GPUS_PER_NODE.get(args)


def colocated(args: Any) -> bool:
    return bool(compat.COLOCATE_ALL.get(args) or compat.COLOCATE_ACTOR_REF.get(args))


def engines_share_policy_gpus(args: Any) -> bool:
    # train() hands the engines the policy's placement group only when synchronous.
    return bool(compat.COLOCATE_ALL.get(args) and not compat.ASYNC.get(args))


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
    shape = memory.ModelShape.from_config(model_config(compat.MODEL.get(args)) or {})
    if shape is None or size is None:
        return None, size or 0, source
    return memory.estimate(args, shape, size), size, source


def unchecked(args: Any, config: GTPOConfig) -> list[str]:
    """What the checks could not judge for want of the model's config or the GPU's size, each
    with why and what makes its check run. (A dataset that is not local leaves its fields
    unchecked; the plan's steps row says so.)"""
    missing = []
    model = compat.MODEL.get(args)
    if model and model_config(model) is None:
        missing.append(
            f"memory, vLLM's tensor parallelism and the model's length ({model}'s config.json "
            f"was not read: {fetch_failure(model)}; `hf download {model} config.json` makes "
            "them run)"
        )
    elif memory_estimate(args, config)[0] is None:
        if gpu_memory(config)[0] is None:
            missing.append(
                f"memory (one GPU's size is unknown: pass {flag('gpu_memory_gib')}, or run on "
                "the GPU machine)"
            )
        else:
            missing.append("memory (the model's config has no dense decoder's sizes)")
    return missing


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
    if estimate.sync is not None:
        rows.append(_row("  weight sync", estimate.sync.describe()))
    rows.append(
        _row(
            "  vLLM",
            f"{compat.VLLM_MEMORY.flag} {compat.VLLM_MEMORY.get(args)}: "
            f"{memory.gib(estimate.engine_share)}, its KV cache holds at most "
            f"{estimate.kv_sequences} sequences of {compat.MAX_LEN.get(args)} tokens (less "
            "what vLLM sets aside for its activations and CUDA graphs)",
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


def reward_urls(args: Any) -> list[str]:
    """--reward.remote_url as a list (OpenRLHF splits the comma-separated flag after parsing)."""
    urls = compat.REMOTE_URL.get(args) or []
    return urls.split(",") if isinstance(urls, str) else list(urls)


def _reward_lines(args: Any) -> list[str]:
    lines = []
    for url in reward_urls(args):
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
        where = "on the policy's GPUs" if colocated(args) else "on GPUs of its own"
        total += 0 if colocated(args) else ref_nodes * ref_gpus
        text = f"{ref_nodes} node(s) × {ref_gpus} GPUs, {where} (KL {compat.KL_COEF.get(args)})"
        rows.append(_row("reference", text))
    else:
        rows.append(_row("reference", "none (no KL term)"))
    engines = compat.VLLM_ENGINES.get(args) or 0
    if engines:
        tp = compat.VLLM_TENSOR_PARALLEL_SIZE.get(args)
        if engines_share_policy_gpus(args):
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
    config = model_config(model)
    if config is None:
        text = f"config not read ({fetch_failure(model) if model else 'no model given'})"
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
    missing = unchecked(args, config)
    verdict = (
        f"every check run passed; not checked: {'; '.join(missing)}"
        if missing
        else "every check passed"
    )
    return "\n".join(
        [
            f"gtpo-openrlhf --dry-run: OpenRLHF {version}; {verdict}; nothing started.",
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
