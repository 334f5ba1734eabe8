"""GTPO's tensor code in OpenRLHF's actor with the model's tensors on another device than the
CPU: PyTorch's `meta` device, which follows CUDA's device rules where they matter here (a CPU
tensor mixed into `cat`/`stack`/`where`/arithmetic with them raises; a CPU 0-dim scalar in an
elementwise op does not).

The transformer body cannot run on `meta` (transformers reads the attention mask's values to
build its causal mask), so the actor wraps a stand-in language model: an embedding that returns
[B, T, V] logits on the model's device. Everything after it is real: OpenRLHF's Actor.forward
(fp32 cast, temperature, its own log-probs), GTPO's fused log-prob and entropy pass and its row
scaling, OpenRLHF's ActorPPOTrainer.training_step with its PolicyLoss and entropy term.
What this cannot show: CUDA streams, NCCL, a real GPU's memory (see docs/training-openrlhf.md,
"Running on a cluster").
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("openrlhf")
pytest.importorskip("deepspeed")

from openrlhf.models import Actor
from openrlhf.trainer.ppo_utils.experience import Experience
from tiny_llama import bare_actor_trainer
from transformers.modeling_outputs import CausalLMOutput

from gtpo import completion_entropy
from gtpo.openrlhf.fused import FusedActorForward, fused_logprobs_and_entropy
from gtpo.openrlhf.step import entropy_row_weights

META = torch.device("meta")
VOCAB = 32


class DeviceLM(torch.nn.Module):
    """Stand-in for the transformer body (it cannot run on `meta`): logits from an embedding,
    on the device of its weights."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, VOCAB, device=META)

    def forward(self, sequences, attention_mask=None, position_ids=None, **_):
        return CausalLMOutput(logits=self.embed(sequences))


def actor_on_meta() -> Actor:
    actor = Actor(DeviceLM(), temperature=0.7)
    actor.packing_samples = False
    return actor


def batch_on_meta(rows: int = 3, length: int = 10):
    sequences = torch.zeros(rows, length, dtype=torch.long, device=META)
    attention_mask = torch.ones(rows, length, dtype=torch.long, device=META)
    action_mask = torch.ones(rows, length - 1, dtype=torch.bool, device=META)
    return sequences, attention_mask, action_mask


def test_fused_pass_stays_on_the_models_device():
    logits = torch.empty(3, 10, VOCAB, device=META)
    sequences, attention_mask, _ = batch_on_meta()
    logprobs, entropy = fused_logprobs_and_entropy(logits, sequences, attention_mask, False)
    assert logprobs.device == entropy.device == META and logprobs.shape == (3, 10)


def test_experience_forward_entropy_stays_on_the_models_device():
    """The experience-time forward's log-probs and ⟨H⟩_i (forward_with_entropy's tensor code)."""
    actor = actor_on_meta()
    sequences, attention_mask, action_mask = batch_on_meta()
    with torch.no_grad(), FusedActorForward(actor):
        log_probs, output = actor(sequences, action_mask, attention_mask, return_output=True)
    mean_entropy = completion_entropy(output.entropy[:, -action_mask.shape[1] :], action_mask)
    assert log_probs.device == mean_entropy.device == META
    assert log_probs.shape == action_mask.shape and mean_entropy.shape == (3,)


def test_training_step_entropy_penalty_stays_on_the_models_device(openrlhf_args):
    """OpenRLHF's real training step with GTPO's penalty: the per-completion row scale, the
    fused pass, the policy loss and the entropy term, all on the model's device."""
    losses: list[torch.Tensor] = []
    args = openrlhf_args("--gtpo.gamma", "0.1")
    trainer = bare_actor_trainer(args, actor_on_meta(), losses.append)
    sequences, attention_mask, action_mask = batch_on_meta()
    experience = Experience(
        sequences=sequences,
        attention_mask=attention_mask,
        action_mask=action_mask,
        action_log_probs=torch.empty(action_mask.shape, device=META),
        advantages=torch.empty(action_mask.shape, device=META),
        info={},
    )
    # OpenRLHF's get_loss_batch_info gives the global counts as tensors on the model's device.
    info = {
        "dp_size": 1,
        "batch_num_tokens": torch.full((), 27.0, device=META),
        "global_batch_size": torch.full((), 3.0, device=META),
    }
    # The step runs to its backward; then OpenRLHF reads the action-token count as a number
    # for its status, which a meta tensor does not have.
    with pytest.raises(RuntimeError, match="item\\(\\) cannot be called on meta tensors"):
        trainer.training_step(experience, 0.0, 0, info)
    (loss,) = losses
    assert loss.device == META and loss.requires_grad


@pytest.mark.parametrize("counts_on", ["meta", "cpu", "python"])
def test_per_completion_scale_follows_the_action_mask(counts_on):
    _, _, action_mask = batch_on_meta()
    tokens, samples = 27.0, 3.0
    if counts_on != "python":
        tokens, samples = torch.tensor(tokens, device=counts_on), torch.tensor(samples)
    scale = entropy_row_weights(action_mask, tokens, samples)
    assert scale.device == META and scale.shape == (3,)
