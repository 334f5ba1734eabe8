"""What needs a CUDA device and can run on one with nothing to download (`make test-gpu`).

Skipped without CUDA (the `gpu` marker keeps them out of the CPU stages). On a GPU:

- GTPO's core (Eq. 5-7: λ, token entropy, δ, both forms of the loss) on CUDA tensors at the
  real model's shape (SmolLM2-135M's 49,152-token vocabulary, G = 8, 512-token completions),
  against the same call on the CPU: the same numbers, every result on the inputs' device;
- the TRL loop (`gtpo.trl.GTPOTrainer`) training on CUDA in bf16 at SmolLM2-135M's shape (its
  config with random weights: 30 layers of 576, 9 heads, tied 49k embedding) on the toy task,
  in both forms of the entropy term: the loss is finite and the weights move on the device.

The step cost of both entropy forms is measured by `benchmarks/step_cost.py --loops trl`, which
`make test-gpu` runs after these tests.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

# SmolLM2-135M-Instruct's shape (its config.json), without its weights.
REAL_SHAPE = {
    "hidden_size": 576,
    "intermediate_size": 1536,
    "num_hidden_layers": 30,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
}
REAL_VOCAB = 49152
G, L = 8, 512


def real_shaped_batch(device: str):
    torch.manual_seed(0)
    ids = torch.randint(0, REAL_VOCAB, (2 * G, L))
    ids[:, :4] = 7  # a shared opening: forward conflict tokens
    lengths = torch.randint(L // 2, L + 1, (2 * G,))
    mask = torch.arange(L)[None, :] < lengths[:, None]
    ids[torch.arange(2 * G), lengths - 1] = 3  # a shared end: backward conflict tokens
    advantages = torch.randn(2 * G)
    logits = torch.randn(2 * G, L, REAL_VOCAB) * 3
    return [t.to(device) for t in (ids, mask, advantages, logits)]


@pytest.mark.parametrize("form", ["penalty", "advantage"])
def test_core_on_cuda_equals_cpu_at_the_real_shape(form):
    import gtpo

    results = {}
    for device in ("cpu", "cuda"):
        ids, mask, advantages, logits = real_shaped_batch(device)
        logits.requires_grad_(True)
        weights = gtpo.conflict_weights(ids, mask, advantages, G)
        logprobs, entropy = gtpo.token_logprobs_and_entropy(logits, ids)
        mean_entropy = gtpo.completion_entropy(entropy, mask)
        keep = gtpo.entropy_filter(mean_entropy.detach(), h_ini=0.5)
        loss, _ = gtpo.gtpo_loss(
            logprobs, logprobs.detach(), advantages, mask, weights, keep, mean_entropy,
            gamma=0.1, entropy_form=form,
        )  # fmt: skip
        loss.backward()
        for tensor in (weights, logprobs, entropy, keep, loss, logits.grad):
            assert tensor.device.type == device
        results[device] = (weights, entropy, keep, loss, logits.grad)
    for cpu, cuda in zip(results["cpu"], results["cuda"], strict=True):
        torch.testing.assert_close(cuda.cpu(), cpu, rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("form", ["penalty", "advantage"])
def test_trl_loop_trains_on_cuda_at_the_real_shape(tmp_path, form):
    from datasets import Dataset
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    sys.path.insert(0, str(Path(__file__).parents[1] / "trl"))
    from trl_harness import G as TASK_G
    from trl_harness import make_args

    from gtpo import GTPOConfig
    from gtpo.demo.task import corpus, make_split
    from gtpo.demo.tokenizer import EOS, PAD, build_tokenizer
    from gtpo.trl import GTPOTrainer

    split = make_split(16, 0)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=build_tokenizer(corpus(split.train)), pad_token=PAD, eos_token=EOS
    )
    # Every id the 49k-vocabulary model may sample decodes.
    tokenizer.add_tokens([f"<unused{i}>" for i in range(len(tokenizer), REAL_VOCAB)])
    dataset = Dataset.from_list([{"prompt": p.prompt} for p in split.train])
    config = LlamaConfig(
        vocab_size=REAL_VOCAB, tie_word_embeddings=True, pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id, bos_token_id=tokenizer.eos_token_id, **REAL_SHAPE,
    )  # fmt: skip
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    args = make_args(tmp_path, use_cpu=False, bf16=True, max_steps=2, num_generations=TASK_G)
    trainer = GTPOTrainer(
        model, [lambda completions, **_: [float(len(c) % 3) for c in completions]], args,
        train_dataset=dataset, processing_class=tokenizer,
        gtpo_config=GTPOConfig(entropy_form=form, h_ini_prompts=2),
    )  # fmt: skip
    initial = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()
    assert next(trainer.model.parameters()).device.type == "cuda"
    losses = [row["loss"] for row in trainer.state.log_history if "loss" in row]
    assert losses and all(math.isfinite(x) for x in losses)
    moved = sum(not torch.equal(initial[n], p) for n, p in trainer.model.named_parameters())
    assert moved > len(initial) // 2
