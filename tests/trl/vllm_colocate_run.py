"""GTPOTrainer with `use_vllm=True, vllm_mode="colocate"` on vLLM's CPU build, as a script:
tests/trl/test_trl_vllm.py runs it in its own process (the colocated engine sets up
torch.distributed and lives as long as its process).

`python vllm_colocate_run.py MODEL_DIR REWARD_URL OUT STEPS` trains GTPO for STEPS steps on the
real instruct model, with TRL's token-level importance-sampling correction against vLLM's own
log-probs (the kind gtpo.correction accepts), and writes OUT/result.json: after each sync, the
largest difference between every trainer weight, cast to the engine's dtype, and the colocated
engine's (vLLM's stacked qkv_proj / gate_up_proj split back), the losses, and whether the
weights moved. The CPU weight
load is tests/standins/vllm_cpu_transport.py's (installed below, before vLLM or TRL load).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(TESTS / "standins"), str(TESTS / "openrlhf"), str(TESTS)]

import cuda_on_cpu  # noqa: E402
import vllm_cpu_transport  # noqa: E402

sys.meta_path.insert(0, cuda_on_cpu.PatchAfterImport(vllm_cpu_transport.PATCHES))


def engine_vs_trainer(trainer) -> float:
    """Largest |engine − trainer| over every weight, the engine's read back under HF names."""
    from fit_harness import hf_weights

    engine = trainer.vllm_generation.llm.llm_engine
    model = engine.model_executor.driver_worker.model_runner.get_model()
    layout = vllm_cpu_transport.stacking_layout(engine.model_config, model)
    held = hf_weights({n: p.detach() for n, p in model.named_parameters()}, layout)
    trained = dict(trainer.model.named_parameters())
    assert set(held) == set(trained), set(held) ^ set(trained)
    # vLLM runs a float32 checkpoint in bf16 by default; TRL's load casts each weight to it.
    return max(
        float((held[n].float() - p.detach().to(held[n].dtype).float()).abs().max())
        for n, p in trained.items()
    )


def main(model_dir: str, reward_url: str, out: str, steps: int) -> None:
    import torch
    from datasets import Dataset
    from real_model_task import TEMPERATURE, G, conversations
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig

    from gtpo import GTPOConfig
    from gtpo.trl import GTPOTrainer, RewardServerReward

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    args = GRPOConfig(
        output_dir=out, loss_type="grpo", beta=0.0, num_generations=G,
        per_device_train_batch_size=2 * G, max_completion_length=48, max_steps=steps,
        temperature=TEMPERATURE, learning_rate=2e-5, report_to=[], use_cpu=True, bf16=False,
        logging_steps=1, save_strategy="no", seed=0, use_vllm=True, vllm_mode="colocate",
        vllm_importance_sampling_mode="token_truncate", vllm_max_model_length=512,
    )  # fmt: skip
    reward = RewardServerReward(reward_url)
    trainer = GTPOTrainer(
        model, [reward], args, train_dataset=Dataset.from_list(conversations(2 * steps)),
        processing_class=tokenizer, gtpo_config=GTPOConfig(h_ini_prompts=2),
    )  # fmt: skip
    initial = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    generation = trainer.vllm_generation
    sync_weights, differences = generation.sync_weights, []

    def checked_sync() -> None:
        sync_weights()
        differences.append(engine_vs_trainer(trainer))

    generation.sync_weights = checked_sync
    trainer.train()
    reward.close()
    moved = sum(not torch.equal(initial[n], p) for n, p in trainer.model.named_parameters())
    losses = [row["loss"] for row in trainer.state.log_history if "loss" in row]
    engine_dtype = str(generation.llm.llm_engine.model_config.dtype)
    result = {"differences": differences, "moved": moved, "losses": losses,
              "parameters": len(initial), "steps": trainer.state.global_step,
              "engine_dtype": engine_dtype}  # fmt: skip
    Path(out, "result.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
