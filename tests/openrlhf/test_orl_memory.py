"""The memory of a policy GPU in each phase (gtpo/openrlhf/memory.py), and the dry run's check.

The training state is checked against DeepSpeed's own estimators, the parameter counts against
the models transformers and peft build (on the meta device: no weights), and the refusals
against the commands the docs showed before they set a vLLM share that fits.
"""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("deepspeed")
pytest.importorskip("openrlhf")

import torch
from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs
from deepspeed.runtime.zero.stage_1_and_2 import (
    estimate_zero2_model_states_mem_needs,
)

from gtpo.openrlhf import memory
from gtpo.openrlhf.__main__ import main

HUB_CONFIGS = Path(__file__).resolve().parents[1] / "documented" / "hub-configs"
QWEN_3B = "Qwen/Qwen2.5-3B-Instruct"

# README's 8-GPU command as it stood, before it set --vllm.gpu_memory_utilization.
README_COMMAND = [
    "--actor.model_name_or_path", QWEN_3B, "--reward.remote_url", "http://127.0.0.1:8000/get_reward",
    "--algo.advantage.estimator", "group_norm", "--algo.kl.init_coef", "0",
    "--rollout.n_samples_per_prompt", "8", "--rollout.batch_size", "16",
    "--train.batch_size", "128", "--rollout.micro_batch_size", "8", "--train.micro_batch_size", "4",
    "--actor.num_gpus_per_node", "8", "--vllm.num_engines", "8", "--train.colocate_all",
    "--vllm.enable_sleep", "--ds.enable_sleep", "--ds.param_dtype", "bf16", "--gtpo.gamma", "0.1",
    "--gtpo.gpu_memory_gib", "80",
]  # fmt: skip


@pytest.mark.parametrize("params", [10**6, 3_085_938_688, 8_030_261_248])
@pytest.mark.parametrize("gpus", [1, 2, 8, 16])
@pytest.mark.parametrize("adam_offload", [False, True])
def test_the_training_state_is_deepspeeds_own_estimate(params, gpus, adam_offload):
    nodes, per_node = (2, gpus // 2) if gpus >= 16 else (1, gpus)
    _, zero2 = estimate_zero2_model_states_mem_needs(
        params, per_node, nodes, cpu_offload=adam_offload
    )
    assert memory.deepspeed_model_states(params, 2, gpus, 0, adam_offload) == zero2
    largest = params // 10
    _, zero3, _ = estimate_zero3_model_states_mem_needs(
        params, largest, per_node, nodes, cpu_offload=adam_offload, cpu_offload_params=False
    )
    assert memory.deepspeed_model_states(params, 3, gpus, largest, adam_offload) == zero3


def _meta_model(config_path: Path):
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(config_path)
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(config), config


@pytest.mark.parametrize(
    "repo",
    [QWEN_3B, "meta-llama/Llama-3.1-8B-Instruct", "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B"],
)
def test_parameter_counts_are_the_built_models(repo):
    folder = next((HUB_CONFIGS / f"models--{repo.replace('/', '--')}" / "snapshots").iterdir())
    model, config = _meta_model(folder)
    shape = memory.ModelShape.from_config(config.to_dict())
    unique = {
        p.data_ptr() if p.device.type != "meta" else id(p): p.numel() for p in model.parameters()
    }
    assert shape.parameters == sum(unique.values())
    linear = sum(
        m.weight.numel()
        for name, m in model.named_modules()
        if isinstance(m, torch.nn.Linear) and "lm_head" not in name
    )
    assert shape.linear_parameters == linear


def test_lora_parameters_are_peft_trainable_count(real_model):
    peft = pytest.importorskip("peft")
    model, config = _meta_model(real_model.path)
    shape = memory.ModelShape.from_config(config.to_dict())
    for targets in ("all-linear", ["q_proj", "v_proj"]):
        lora = peft.get_peft_model(model, peft.LoraConfig(r=8, target_modules=targets))
        trainable = sum(p.numel() for p in lora.parameters() if p.requires_grad)
        assert shape.lora_parameters(8, targets) == trainable, targets
        model = lora.unload()


def _dry_run(argv, monkeypatch, capsys, caplog) -> tuple[int, str]:
    import huggingface_hub.constants

    # Read at import time by huggingface_hub: the constant, not only the variable.
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(HUB_CONFIGS))
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="gtpo"):
        try:
            main(["--dry-run", *argv])
            code = 0
        except SystemExit as exc:
            code = exc.code
    return code, capsys.readouterr().out + caplog.text


def test_vllm_s_default_share_beside_the_resident_weights_is_refused(monkeypatch, capsys, caplog):
    code, text = _dry_run(README_COMMAND, monkeypatch, capsys, caplog)
    assert code == 2
    assert "the generation phase needs" in text and "vLLM 76.0 GiB" in text
    assert "policy weights 5.7 GiB" in text  # 3.09B bf16 parameters stay through sleep mode
    assert "Lower --vllm.gpu_memory_utilization to at most 0.87" in text
    code, text = _dry_run(
        [*README_COMMAND, "--vllm.gpu_memory_utilization", "0.6"], monkeypatch, capsys, caplog
    )
    assert code == 0, text
    assert "generation  54.7 GiB = vLLM 48.0 GiB + policy weights 5.7 GiB" in text


def test_a_reference_model_stays_resident_in_both_phases(monkeypatch, capsys, caplog):
    kl = [*README_COMMAND, "--gtpo.algo", "grpo", "--algo.kl.init_coef", "0.001",
          "--vllm.gpu_memory_utilization", "0.85"]  # fmt: skip
    code, text = _dry_run(kl, monkeypatch, capsys, caplog)
    assert code == 2
    assert "reference 5.7 GiB" in text and "at most 0.79" in text


def test_a_micro_batch_too_large_to_train_is_refused(monkeypatch, capsys, caplog):
    big = [*README_COMMAND, "--vllm.gpu_memory_utilization", "0.6", "--data.max_len", "8192",
           "--train.micro_batch_size", "16"]  # fmt: skip
    code, text = _dry_run(big, monkeypatch, capsys, caplog)
    assert code == 2
    assert "the training phase needs" in text
    assert "--train.micro_batch_size" in text and "--actor.gradient_checkpointing_enable" in text


def test_the_local_gpu_wins_over_the_flag(monkeypatch, capsys, caplog):
    class Device:
        name = "NVIDIA A100-SXM4-40GB"
        total_memory = 40 * memory.GIB

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: Device())
    code, text = _dry_run(
        [*README_COMMAND, "--vllm.gpu_memory_utilization", "0.6"], monkeypatch, capsys, caplog
    )
    assert code == 2 and "of its 40.0 GiB (the local NVIDIA A100-SXM4-40GB)" in text


def test_without_a_config_or_a_gpu_size_nothing_is_estimated(monkeypatch, capsys, caplog):
    argv = [a for a in README_COMMAND if a not in ("--gtpo.gpu_memory_gib", "80")]
    code, text = _dry_run(argv, monkeypatch, capsys, caplog)
    assert code == 0 and "memory        not estimated (one GPU's size is unknown" in text
    argv = [*README_COMMAND]
    argv[argv.index(QWEN_3B)] = "org/not-cached"
    code, text = _dry_run(argv, monkeypatch, capsys, caplog)
    assert code == 0 and "not estimated (the model's config was not read)" in text


def _row(text: str, label: str) -> str:
    (row,) = [line for line in text.splitlines() if line.startswith(f"  {label}")]
    return row


def test_the_weight_sync_holds_vllms_weights_the_policys_and_one_tensor(
    monkeypatch, capsys, caplog
):
    """OpenRLHF 0.11.2 wakes only vLLM's weights for the sync (their KV cache stays asleep)
    while the policy sleeps, and sends one tensor at a time: at most the embedding, in bf16."""
    folder = next((HUB_CONFIGS / f"models--{QWEN_3B.replace('/', '--')}" / "snapshots").iterdir())
    model, config = _meta_model(folder)
    shape = memory.ModelShape.from_config(config.to_dict())
    largest = max(p.numel() for p in model.parameters())
    assert shape.largest_layer == largest
    fits = [*README_COMMAND, "--vllm.gpu_memory_utilization", "0.6"]
    code, text = _dry_run(fits, monkeypatch, capsys, caplog)
    assert code == 0, text
    weights = memory.gib(2 * shape.parameters)
    assert _row(text, "weight sync") == (
        f"  weight sync {memory.gib(2 * 2 * shape.parameters + 2 * largest + memory.GIB)} = "
        f"vLLM weights {weights} + policy weights {weights} + tensor sent "
        f"{memory.gib(2 * largest)} + CUDA contexts 1.0 GiB"
    )
    awake = [a for a in README_COMMAND if a != "--vllm.enable_sleep"]
    code, text = _dry_run([*awake, "--vllm.gpu_memory_utilization", "0.3"], monkeypatch, capsys,
                          caplog)  # fmt: skip
    assert code == 0, text
    assert "vLLM awake (--vllm.enable_sleep off) 24.0 GiB" in _row(text, "weight sync")
    # Engines on GPUs of their own: nothing of theirs on a policy GPU, no sync row.
    apart = [a for a in fits if a not in ("--train.colocate_all", "--vllm.enable_sleep")]
    code, text = _dry_run(apart, monkeypatch, capsys, caplog)
    assert "weight sync" not in text


@pytest.mark.parametrize(("temperature", "per_logit"), [("1.0", 10), ("0.7", 12)])
def test_logits_count_the_fp32_copy_and_its_gradients(
    temperature, per_logit, monkeypatch, capsys, caplog
):
    """Bytes a logit: lm_head's bf16 output, OpenRLHF's fp32 copy kept for the backward, the
    fp32 gradient written for it, and with a temperature other than 1 the in-place division's
    own gradient (benchmarks/logits_memory.py measures the core's pass at exactly these)."""
    micro, max_len, vocab, hidden, layers = 4, 1024, 151936, 2048, 36
    argv = [*README_COMMAND, "--vllm.gpu_memory_utilization", "0.6", "--data.max_len",
            str(max_len), "--actor.gradient_checkpointing_enable", "--rollout.temperature",
            temperature]  # fmt: skip
    code, text = _dry_run(argv, monkeypatch, capsys, caplog)
    assert code == 0, text
    tokens = micro * max_len
    expected = 2 * tokens * hidden * layers + 34 * tokens * hidden + per_logit * tokens * vocab
    assert f"activations {memory.gib(expected)}" in _row(text, "training")


def test_a_weight_sync_past_the_gpu_is_refused_with_what_to_change():
    gpu = 80 * memory.GIB
    small = memory.Phase("training", [("model states", memory.GIB)])
    sync = memory.Phase("sync", [("vLLM awake (--vllm.enable_sleep off)", 71 * memory.GIB),
                                 ("policy weights", 6 * memory.GIB)])  # fmt: skip
    estimate = memory.GPUMemory(None, small, sync, 0, 0, 0)
    (line,) = memory.refusals(SimpleNamespace(), estimate, gpu, "--gtpo.gpu_memory_gib")
    assert line.startswith("the weight sync after each step needs 77.0 GiB")
    assert "Pass --vllm.enable_sleep and --ds.enable_sleep" in line
    assert not memory.refusals(
        SimpleNamespace(), memory.GPUMemory(None, small, None, 0, 0, 0), gpu, ""
    )
