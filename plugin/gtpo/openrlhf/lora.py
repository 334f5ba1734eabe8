"""LoRA (`--ds.lora.rank > 0`): the rollout engines get the merged weights, under their own names.

OpenRLHF 0.11.2 sends the policy's parameters to vLLM as `model.named_parameters()` gives them.
With LoRA that is the PEFT model: `base_model.model.…q_proj.base_layer.weight` and the adapters'
`lora_A` / `lora_B`, names vLLM's model does not have (its weight loading fails at the first
sync, after H_ini's generations were paid for; OpenRLHF issues #1081, #546). `rollout_parameters`
is what the sync should send instead: each base weight with its adapters' update added
(W + B·A·α/r, peft's own `get_delta_weight`), under the base model's name, and no adapter
tensors. The trained model is not modified (no merge and unmerge of the live weights, whose
bf16 round trip would drift).

The sync streams them (`seam.stream_to_engines`): each merged copy is sent and dropped before
the next is made, so a rank holds one extra layer, not a merged copy of every adapted layer
(OpenRLHF lists every parameter before it sends the first). `benchmarks/lora_sync_memory.py`
measures the difference.

QLoRA (`--ds.load_in_4bit`): bitsandbytes holds each 4-bit base weight as packed NF4 bytes
(`Params4bit`, uint8, shape [n·m/2, 1]) with a quant state (block absmax, itself quantized:
double quant). The sync dequantizes it (`bitsandbytes.functional.dequantize_4bit`) before adding
the adapters' update, and sends the result in the dtype the base was quantized from, the
engine's (bf16); a 4-bit layer LoRA does not target is sent dequantized too. The engine gets
dequant(W_nf4) + B·A·α/r: the model the trainer's forward computes, bf16 rounding aside.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any

import torch

# How PEFT renames a wrapped model's parameters.
PEFT_PREFIX = "base_model.model."
BASE_LAYER = ".base_layer"
ADAPTER_MARKERS = ("lora_A", "lora_B", "lora_embedding_A", "lora_embedding_B", "lora_magnitude")


def is_peft(model: Any) -> bool:
    return hasattr(model, "peft_config") and hasattr(model, "base_model")


def base_name(peft_name: str) -> str:
    """`base_model.model.model.layers.0.self_attn.q_proj.base_layer.weight` →
    `model.layers.0.self_attn.q_proj.weight`: the name the rollout engine's model has."""
    return peft_name.removeprefix(PEFT_PREFIX).replace(BASE_LAYER + ".", ".")


def rollout_parameters(model: Any, gather: bool) -> Iterator[tuple[str, torch.Tensor]]:
    """(name, tensor) of every weight the rollout engine holds, LoRA merged in, in the PEFT
    model's parameter order.

    `gather` (ZeRO-3): the base weight and its adapters are gathered together for the merge; the
    merged copy is a plain full tensor (given `ds_shape`, which OpenRLHF's sync reads under
    ZeRO-3), so the sync's own gather is a no-op on it. Every rank must iterate this together:
    the gathers are collectives.
    """
    import deepspeed

    # The class's method: inside merged_view the instance's own is this generator.
    for name, param in type(model).named_parameters(model):
        if any(marker in name for marker in ADAPTER_MARKERS):
            continue
        layer = _lora_layer(model, name)
        if layer is None and not is_4bit(param):
            yield base_name(name), param
            continue
        adapters = [a for a in layer.active_adapters if a in layer.lora_A] if layer else []
        parts = [param] + [p for a in adapters for p in _adapter_parameters(layer, a)]
        with deepspeed.zero.GatheredParameters(parts, enabled=gather):
            merged = _float_copy(param)
            if not getattr(layer, "merged", False):
                for adapter in adapters:
                    merged += layer.get_delta_weight(adapter).float()
            merged = merged.to(rollout_dtype(param))
        merged.ds_shape = merged.shape
        # Marked trainable: OpenRLHF's VLM sync sends only those, and the adapters moved it.
        merged.requires_grad_(True)
        yield base_name(name), merged
        del merged  # not held while the next one is made


def is_4bit(param: torch.Tensor) -> bool:
    """A bitsandbytes 4-bit weight (`Params4bit`): packed bytes and the quant state that reads
    them. Checked by attribute, so that bitsandbytes is imported only when a model has one."""
    return getattr(param, "quant_state", None) is not None


def rollout_dtype(param: torch.Tensor) -> torch.dtype:
    """The dtype the engine receives `param` in: a 4-bit weight's original dtype (the
    model's, bf16; vLLM's weight loading asserts it is the engine's), else the param's own."""
    return param.quant_state.dtype if is_4bit(param) else param.dtype


def _float_copy(param: torch.Tensor) -> torch.Tensor:
    """The weight's values in a new float32 tensor: a 4-bit weight dequantized (NF4 code × the
    block's absmax, the absmax itself dequantized first under double quant)."""
    if is_4bit(param):
        from bitsandbytes.functional import dequantize_4bit

        if getattr(param.quant_state, "packing_format_for_cpu", False):
            raise RuntimeError(CPU_REPACKED)
        return dequantize_4bit(param.data, param.quant_state).float()
    return param.data.float().clone()


# bitsandbytes 0.50 on a CPU with AVX-512 BF16 repacks a 4-bit weight in place at its first
# no-grad eval forward (OpenRLHF's experience forward is one); never on a GPU.
CPU_REPACKED = (
    "bitsandbytes repacked a 4-bit weight for its CPU inference kernel (AVX-512 BF16): "
    "dequantize_4bit does not read that layout, and the kernel has no backward, so the base "
    "layers pass no gradient. QLoRA (--ds.load_in_4bit) trains on a GPU; on this CPU drop "
    "--ds.load_in_4bit."
)


def rollout_parameter_count(model: Any) -> int:
    """How many weights `rollout_parameters` yields (no merge made)."""
    names = (name for name, _ in type(model).named_parameters(model))
    return sum(not any(marker in name for marker in ADAPTER_MARKERS) for name in names)


def _lora_layer(model: Any, name: str) -> Any:
    """The LoRA layer whose base layer holds parameter `name`, or None."""
    if BASE_LAYER + "." not in name or not name.endswith(".weight"):
        return None
    layer = model.get_submodule(name.rsplit(BASE_LAYER + ".", 1)[0])
    return layer if hasattr(layer, "get_delta_weight") else None


def _adapter_parameters(layer: Any, adapter: str) -> list[torch.Tensor]:
    if adapter in getattr(layer, "lora_embedding_A", {}):
        return [layer.lora_embedding_A[adapter], layer.lora_embedding_B[adapter]]
    return [layer.lora_A[adapter].weight, layer.lora_B[adapter].weight]


def merged_view(model: Any, gather: bool) -> AbstractContextManager[None]:
    """Inside the block, the PEFT model's `named_parameters` yields `rollout_parameters`: what
    OpenRLHF's own `broadcast_to_vllm` iterates, unchanged otherwise. An attribute of this one
    model shadows the class's method for the block only (`seam.replaced`)."""
    from gtpo.openrlhf import seam

    view = lambda *_, **__: rollout_parameters(model, gather)  # noqa: E731 (the method's stand-in)
    return seam.replaced((model, "named_parameters", view))
