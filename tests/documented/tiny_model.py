"""The model the docs runner gives a documented command in place of a hub model.

SmolLM2-135M-Instruct's tokenizer and chat template (the real model's, prepared offline by
`gtpo model prepare`) on a 2-layer Llama of width 128 with random weights: any text a dataset
holds tokenizes, `--data.apply_chat_template` renders, and vLLM's CPU attention takes its head
size (64). It learns nothing in a step; the documented runs show that a command runs as written,
and the suites of tests/openrlhf check what a step does on the real model.
"""

from __future__ import annotations

from pathlib import Path

SHAPE = {
    "num_hidden_layers": 2,
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 64,
}


def build(real_model: Path, out: Path) -> Path:
    """The tiny model in `out` (made once; an existing one is kept)."""
    if (out / "config.json").exists():
        return out
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    config = AutoConfig.from_pretrained(real_model)
    for name, value in SHAPE.items():
        setattr(config, name, value)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(real_model).save_pretrained(out)
    generation = real_model / "generation_config.json"
    if generation.exists():
        (out / "generation_config.json").write_text(generation.read_text())
    return out
