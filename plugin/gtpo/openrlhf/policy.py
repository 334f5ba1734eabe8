"""The policy ranks (DeepSpeed, one Ray actor per GPU): GTPO's experience-time forward, training
step and weight sync.

- `GTPOPolicyModelActor`: OpenRLHF's policy actor. `forward_with_entropy` is its experience-time
  forward that also returns each completion's mean entropy ⟨H⟩_i, from the same logits (no
  second forward, one pass over them: `fused.py`); OpenRLHF builds GTPO's actor trainer in it.
- `GTPOActorPPOTrainer`: makes OpenRLHF's entropy term Eq. 7's per-completion mean
  (`step.entropy_row_weights`), with the log-probs and entropies of one chunked pass over the
  logits (`fused.FusedActorForward`); its weight sync gives the rollout engines LoRA's merged
  weights (`lora.py`).
"""

from __future__ import annotations

from typing import Any

import torch

from gtpo.openrlhf import compat, seam
from gtpo.openrlhf.fused import FusedActorForward
from gtpo.openrlhf.lora import is_peft, merged_view, rollout_parameter_count, rollout_parameters
from gtpo.openrlhf.step import ActorForward, completion_entropies, entropy_row_weights


def _device() -> torch.device:
    # OpenRLHF calls torch.cuda.current_device() unconditionally; CPU fallback for tests.
    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


class GTPOActorPPOTrainer(seam.ActorPPOTrainer):
    """OpenRLHF's actor trainer with Eq. 7's per-completion entropy penalty, and a weight sync
    that gives the rollout engines LoRA's merged weights.

    OpenRLHF computes `loss -= aggregate_loss(entropy) * entropy_coef` with entropy_coef = −γ
    and a global token mean; during the step the actor's forward takes its log-probs and
    entropies from one chunked pass (`fused.FusedActorForward`, no fp32 softmax copies of the
    logits) and reweights the entropy rows, so the same line computes −γ · (1/N) Σ_i ⟨H⟩_i.
    No OpenRLHF file is changed and the policy loss is untouched.
    """

    def training_step(self, experience, kl_ctl, step, loss_batch_info=None):
        if not compat.ENTROPY_COEF.get(self.args):
            return super().training_step(experience, kl_ctl, step, loss_batch_info)
        if loss_batch_info is None:  # dynamic batching: OpenRLHF would compute it the same way
            loss_batch_info = seam.get_loss_batch_info(
                self.strategy,
                experience.action_mask,
                replay_buffer=self.replay_buffer,
                step=step,
                dynamic_batch=compat.DYNAMIC_BATCH.get(self.args),
            )
        weights = entropy_row_weights(
            experience.action_mask,
            loss_batch_info[compat.BATCH_NUM_TOKENS],
            loss_batch_info[compat.GLOBAL_BATCH_SIZE],
        )
        with FusedActorForward(self.actor, row_scale=weights):
            return super().training_step(experience, kl_ctl, step, loss_batch_info)

    def broadcast_to_vllm(self):
        """OpenRLHF's weight sync; with LoRA, of the merged weights under the base model's
        names (`lora.py`), which is what the rollout engines hold, one at a time."""
        model = self.actor.model.module
        if not is_peft(model):
            return super().broadcast_to_vllm()
        gather = compat.ZERO_STAGE.get(self.args) == 3
        if compat.TENSOR_PARALLEL_SIZE.get(self.args) > 1:
            # OpenRLHF's own loop (its tensor-parallel gathers) over the merged view: every
            # merged copy at once. DeepSpeed's AutoTP splits the layers LoRA wraps.
            with merged_view(model, gather=gather):
                return super().broadcast_to_vllm()
        # Broadcast (NCCL, gloo, Ray) or CUDA IPC (NCCL, colocated): the same loop.
        weights = rollout_parameters(model, gather)
        return seam.stream_to_engines(self, weights, rollout_parameter_count(model))


class GTPOPolicyModelActor(seam.PolicyModelActor):
    """OpenRLHF's policy actor, plus the entropy GTPO needs from the experience-time forward."""

    def init_model_from_pretrained(self, *args: Any, **kwargs: Any) -> None:
        with seam.building((compat.ACTOR_TRAINER, GTPOActorPPOTrainer)):
            super().init_model_from_pretrained(*args, **kwargs)

    def forward_with_entropy(
        self,
        sequences: torch.LongTensor,
        action_mask: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        packed_seq_lens: list[int] | None = None,
        mm_train_inputs_list: list | None = None,
    ) -> ActorForward:
        """`PolicyModelActor.forward`, also returning ⟨H⟩_i of each row (Sec. 4.2, Eq. 6)."""
        device = _device()
        mm_inputs = {}
        if mm_train_inputs_list and getattr(self.actor, "is_vlm", False):
            mm_inputs = seam.merge_mm_train_inputs(mm_train_inputs_list, device)
        mask = action_mask.to(device).bool()
        self.actor.eval()
        with torch.no_grad(), FusedActorForward(self.actor):
            # The logits are temperature-scaled: the policy the rollout sampled from. Log-probs
            # and entropies come from one pass over them (fused.py), as in the training step.
            action_log_probs, output = self.actor(
                sequences.to(device),
                action_mask.to(device),
                attention_mask.to(device),
                return_output=True,
                ring_attn_group=self.strategy.ring_attn_group,
                **mm_inputs,
            )
            mean_entropy = completion_entropies(output.entropy, mask)
            del output
        self.actor.train()
        return ActorForward(action_log_probs.to("cpu"), mean_entropy.float().to("cpu"))


# What the launcher builds in place of OpenRLHF's PolicyModelActor (compat.POLICY_ACTOR).
GTPOPolicyModelRemote = seam.remote(GTPOPolicyModelActor)
