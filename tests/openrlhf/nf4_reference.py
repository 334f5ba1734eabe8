"""NF4 dequantization and the LoRA merge in plain torch, from the raw state bitsandbytes keeps:
the tests' reference for what a QLoRA weight sync must send, written from the format (QLoRA,
Dettmers et al. 2023, Sec. 3: 4-bit NormalFloat, double quantization), not from bitsandbytes'
`dequantize_4bit`, which the sync calls.

A 4-bit weight of shape [n, m] is n·m 4-bit indices into the 16-value NF4 code (`quant_map`),
two per byte (the first in the high nibble), and one absmax per block of `blocksize` (64)
consecutive values: w = code[index] × absmax[block]. Under double quantization the absmax values
are themselves 8-bit indices into a 256-value code (`nested_quant_map`), one float32 scale per
block of `nested_blocksize` (256) of them, plus a shared offset: absmax = code2[q] × scale + offset.
"""

from __future__ import annotations

import torch


def dequantize_nf4(packed: torch.Tensor, quant_state: dict) -> torch.Tensor:
    """float32 [n, m] of a 4-bit weight: `packed` its bytes, `quant_state` bitsandbytes'
    `QuantState.as_dict()` (absmax, quant_map, blocksize, shape, and nested_* under double
    quantization)."""
    bytes_ = packed.flatten().to(torch.int64)
    indices = torch.stack([bytes_ >> 4, bytes_ & 0xF], dim=1).flatten()
    absmax = quant_state["absmax"]
    if "nested_absmax" in quant_state:
        scales = quant_state["nested_absmax"].float()
        scales = scales.repeat_interleave(quant_state["nested_blocksize"])[: absmax.numel()]
        codes = quant_state["nested_quant_map"].float()[absmax.to(torch.int64)]
        absmax = codes * scales + float(quant_state["nested_offset"])
    shape = tuple(quant_state["shape"])
    count = shape[0] * shape[1]
    per_value = absmax.float().repeat_interleave(quant_state["blocksize"])[:count]
    return (quant_state["quant_map"].float()[indices[:count]] * per_value).reshape(shape)


def lora_layers(raw: dict, scaling: float) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Base-model name → (dequantized base, LoRA update B·A·scaling), float32, of every 4-bit
    layer in `raw` (the fit_site recording `trainer_raw_*`: PEFT name → adapter tensor, or →
    {"packed", "quant_state"}); scaling = α/r. A 4-bit layer without adapters has update 0."""
    out = {}
    for name, value in raw.items():
        if not isinstance(value, dict):
            continue
        base = dequantize_nf4(value["packed"], value["quant_state"])
        layer = name.removesuffix(".base_layer.weight")
        update = torch.zeros_like(base)
        if layer != name:  # a LoRA layer's base: its adapters sit beside it
            a = raw[f"{layer}.lora_A.default.weight"].float()
            b = raw[f"{layer}.lora_B.default.weight"].float()
            update = (b @ a) * scaling
            name = f"{layer}.weight"
        out[name.removeprefix("base_model.model.")] = (base, update)
    return out


def merged_weights(raw: dict, scaling: float) -> dict[str, torch.Tensor]:
    """Base-model name → dequant(W) + B·A·α/r (float32) of every 4-bit layer in `raw`."""
    return {name: base + update for name, (base, update) in lora_layers(raw, scaling).items()}


def bf16_rounding_ratio(sent: torch.Tensor, base: torch.Tensor, update: torch.Tensor) -> float:
    """The largest |sent − (base + update)| over the bound the sync's bf16 roundings allow, per
    element: the base dequantized to bf16, the update B·A·α/r formed in bf16 (peft), and their
    sum sent in bf16 each round once, by less than 2⁻⁸ of the value (8 significant bits), plus
    float32's own rounding (2⁻²⁰ is generous). At most 1 when the sync sent base + update; the
    float32 arguments are the exact values. (Two roundings near their worst reach 0.99.)"""
    bound = (base.abs() + update.abs() + (base + update).abs()) * (2**-8 + 2**-20) + 1e-9
    return float(((sent.detach().float() - (base + update)).abs() / bound).max())
