"""GTPO's subclasses of OpenRLHF's Ray actors (importing this module imports OpenRLHF).

A monkeypatch made in the driver does not reach Ray workers: each worker imports OpenRLHF
afresh. So GTPO lives in subclasses defined here at module level; Ray pickles them by reference
and every worker imports this module. The launcher rebinds OpenRLHF's names to the remote
classes at the bottom of this file before `train_ppo_ray` reads them.

- `GTPOPolicyModelActor` (DeepSpeed policy, one per GPU): `forward_with_entropy` is OpenRLHF's
  experience-time forward that also returns each completion's mean entropy ⟨H⟩_i, from the same
  logits (no second forward).
- `GTPOExperienceMaker` (inside the trainer): asks the policy actors for that forward, measures
  H_ini on the first rollout, and after OpenRLHF's group_norm advantages applies λ·δ
  (`hook.apply_gtpo`).
- `GTPOPPOTrainer` (the single controller): uses that experience maker, logs the gtpo/* metrics,
  keeps H_ini in checkpoints and watches the entropy.
- `GTPOActorPPOTrainer`: makes OpenRLHF's entropy term Eq. 7's per-completion mean.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import ray
import torch
import torch.distributed as dist
from openrlhf.models.ring_attn_utils import gather_and_pad_tensor
from openrlhf.trainer import ppo_trainer as _ppo_trainer
from openrlhf.trainer.ppo_utils import experience_maker as _experience_maker
from openrlhf.trainer.ray import ppo_actor as _ppo_actor
from openrlhf.utils.logging_utils import init_logger
from openrlhf.utils.loss_utils import get_loss_batch_info

from gtpo import completion_entropy, token_entropy
from gtpo.openrlhf import enable_logging, state
from gtpo.openrlhf.flags import GTPOSettings
from gtpo.openrlhf.hook import apply_gtpo

logger = init_logger(__name__)


class ActorForward(NamedTuple):
    """What `forward_with_entropy` returns for one micro-batch."""

    action_log_probs: torch.Tensor  # [B, A], exactly what PolicyModelActor.forward returns
    completion_entropy: torch.Tensor  # [B], ⟨H⟩_i over each row's action tokens


def _device() -> torch.device:
    # OpenRLHF calls torch.cuda.current_device() unconditionally; CPU fallback for tests.
    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def padded_token_entropy(
    logits: torch.Tensor,
    attention_mask: torch.Tensor,
    packed: bool,
    ring_attn_group: Any = None,
) -> torch.Tensor:
    """Entropy of every position of the actor's logits in the padded [B, T] layout.

    `gtpo.token_entropy` works a chunk of positions at a time (OpenRLHF's compute_entropy makes
    two more fp32 copies of [B, T, V]). With --ds.packing_samples the logits are [1, tokens, V]
    (this rank's slice under ring attention); they are scattered back the way
    openrlhf.models.Actor scatters its log-probs.
    """
    entropy = token_entropy(logits)
    if not packed:
        return entropy
    batch, seqlen = attention_mask.shape
    indices = torch.nonzero(attention_mask.flatten(), as_tuple=False).flatten()
    pad_len = 0
    if ring_attn_group is not None:
        size = dist.get_world_size(group=ring_attn_group)
        pad_len = (size - indices.numel() % size) % size
    return gather_and_pad_tensor(entropy, ring_attn_group, pad_len, indices, batch, seqlen)


class GTPOPolicyModelActor(_ppo_actor.PolicyModelActor.__ray_actor_class__):
    """OpenRLHF's policy actor, plus the entropy GTPO needs from the experience-time forward."""

    def init_model_from_pretrained(self, strategy, pretrain, max_steps=None, vllm_engines=None):
        super().init_model_from_pretrained(strategy, pretrain, max_steps, vllm_engines)
        settings = GTPOSettings.from_args(strategy.args)
        if settings.is_gtpo and strategy.args.actor.entropy_coef:
            # ActorPPOTrainer's constructor opens the vLLM weight-sync group and hits a barrier,
            # so it cannot be built a second time; the subclass adds one method and no state.
            self.trainer.__class__ = GTPOActorPPOTrainer

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
            mm_inputs = _ppo_actor.merge_mm_train_inputs(mm_train_inputs_list, device)
        mask = action_mask.to(device).bool()
        attention_mask = attention_mask.to(device)
        self.actor.eval()
        with torch.no_grad():
            action_log_probs, output = self.actor(
                sequences.to(device),
                action_mask.to(device),
                attention_mask,
                return_output=True,
                ring_attn_group=self.strategy.ring_attn_group,
                **mm_inputs,
            )
            # The logits are already temperature-scaled: the policy the rollout sampled from.
            entropy = padded_token_entropy(
                output["logits"],
                attention_mask,
                getattr(self.actor, "packing_samples", False),
                self.strategy.ring_attn_group,
            )
            del output
            # Position t predicts token t+1: the same [:, :-1][:, -A:] slicing as the log-probs.
            entropy = entropy[:, :-1][:, -mask.shape[1] :]
            mean_entropy = completion_entropy(entropy, mask)
        self.actor.train()
        return ActorForward(action_log_probs.to("cpu"), mean_entropy.float().to("cpu"))


def per_completion_entropy_scale(
    action_mask: torch.Tensor, batch_num_tokens: Any, global_batch_size: Any
) -> torch.Tensor:
    """Row weights w_i that turn OpenRLHF's token-mean entropy into Eq. 7's completion mean. [B].

    OpenRLHF's entropy term is aggregate_loss(H) = Σ_{i,t} H_{i,t} / n_tokens · dp (a global
    token mean). Eq. 7 penalises (1/N) Σ_i ⟨H⟩_i with ⟨H⟩_i = Σ_t H_{i,t} / |o_i|. With
    w_i = n_tokens / (N · |o_i|), Σ_{i,t} w_i H_{i,t} / n_tokens = Σ_i ⟨H⟩_i / N, where N and
    n_tokens are the global sample and token counts OpenRLHF normalises the loss with.
    """
    tokens = action_mask.sum(dim=-1).clamp(min=1).float()
    batch_num_tokens = torch.as_tensor(batch_num_tokens, dtype=torch.float32, device=tokens.device)
    global_batch_size = torch.as_tensor(
        global_batch_size, dtype=torch.float32, device=tokens.device
    )
    return batch_num_tokens / (global_batch_size * tokens)


def entropy_rescaler(scale: torch.Tensor) -> Callable[..., None]:
    """Forward hook for openrlhf.models.Actor: multiplies row i of `output.entropy` by scale_i."""

    def hook(module: torch.nn.Module, inputs: Any, result: Any) -> None:
        if not (isinstance(result, tuple) and len(result) == 2):
            return
        output = result[1]
        entropy = getattr(output, "entropy", None)
        if entropy is not None:
            output.entropy = entropy * scale.to(entropy.device, entropy.dtype)[:, None]

    return hook


class GTPOActorPPOTrainer(_ppo_actor.ActorPPOTrainer):
    """OpenRLHF's actor trainer with Eq. 7's per-completion entropy penalty.

    OpenRLHF computes `loss -= aggregate_loss(entropy) * entropy_coef` with entropy_coef = −γ
    and a global token mean; the forward hook reweights the rows so the same line computes
    −γ · (1/N) Σ_i ⟨H⟩_i. No OpenRLHF file is changed and the policy loss is untouched.
    """

    def training_step(self, experience, kl_ctl, step, loss_batch_info=None):
        if not self.args.actor.entropy_coef:
            return super().training_step(experience, kl_ctl, step, loss_batch_info)
        if loss_batch_info is None:  # dynamic batching: OpenRLHF would compute it the same way
            loss_batch_info = get_loss_batch_info(
                self.strategy,
                experience.action_mask,
                replay_buffer=self.replay_buffer,
                step=step,
                dynamic_batch=self.args.train.dynamic_batch_enable,
            )
        scale = per_completion_entropy_scale(
            experience.action_mask,
            loss_batch_info["batch_num_tokens"],
            loss_batch_info["global_batch_size"],
        )
        handle = self.actor.register_forward_hook(entropy_rescaler(scale))
        try:
            return super().training_step(experience, kl_ctl, step, loss_batch_info)
        finally:
            handle.remove()


class GTPOExperienceMaker(_experience_maker.RemoteExperienceMaker):
    """OpenRLHF's experience maker, with the GTPO advantage hook after group_norm."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.gtpo = GTPOSettings.from_args(self.args)
        self.h_ini: float | None = self.gtpo.h_ini
        self.metrics: dict[str, float] = {}
        self._forward_entropy: list[torch.Tensor] | None = None
        self._rollout_entropy: list[torch.Tensor] | None = None

    def _dispatch_forward(self, group, sync_condition, **kwargs):
        if group is not self.actor_model_group:
            return super()._dispatch_forward(group, sync_condition, **kwargs)
        # OpenRLHF's _dispatch_forward with the policy's forward_with_entropy instead of forward.
        ref = group.async_run_method_batch(method_name="forward_with_entropy", **kwargs)
        if sync_condition:
            ray.get(ref)
            ray.get(group.async_run_method(method_name="empty_cache"))
        return ref

    def _flatten_results(self, refs, duplicate_factor):
        results = super()._flatten_results(refs, duplicate_factor)
        if results and isinstance(results[0], ActorForward):
            self._forward_entropy = [r.completion_entropy for r in results]
            return [r.action_log_probs for r in results]
        return results

    def make_experience(self, samples_list):
        self._forward_entropy = None
        experiences = super().make_experience(samples_list)
        if self._forward_entropy is None or len(self._forward_entropy) != len(experiences):
            raise RuntimeError(
                "the policy actors did not return completion entropies; the actor group must be "
                "built from gtpo.openrlhf.actors (start training with gtpo-openrlhf)"
            )
        self._rollout_entropy, self._forward_entropy = self._forward_entropy, None
        return experiences

    def compute_advantages_and_returns(self, experiences):
        experiences = super().compute_advantages_and_returns(experiences)
        entropies, self._rollout_entropy = self._rollout_entropy, None
        if entropies is None:
            raise RuntimeError("compute_advantages_and_returns called without make_experience")
        if self.h_ini is None:
            # The first rollout's forward runs before any update: the paper's "before training".
            self.h_ini = float(torch.cat(entropies).float().mean())
            logger.info(
                "GTPO: H_ini = %.4f nats on the first rollout (%d completions, ln 2 = 0.6931): %s",
                self.h_ini,
                sum(e.numel() for e in entropies),
                "below ln 2, Eq. 6 filters completions with ⟨H⟩ > ln 2"
                if self.h_ini < 0.6931471805599453
                else "at or above ln 2, Eq. 6 keeps every completion",
            )
        metrics = apply_gtpo(
            experiences,
            entropies,
            self.args.rollout.n_samples_per_prompt,
            self.h_ini,
            conflict=self.gtpo.applies_conflict,
            conflict_weight=self.gtpo.conflict_weight,
            filter_mode=self.gtpo.filter_mode,
        )
        self.metrics = state.prefixed(metrics, self.h_ini)
        return experiences


class GTPOPPOTrainer(_ppo_trainer.PPOTrainer.__ray_actor_class__):
    """OpenRLHF's synchronous PPOTrainer with the GTPO experience maker, metrics and H_ini."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        enable_logging()
        base = self.experience_maker
        # Built from the parent's own arguments (plain attribute assignments, no side effects).
        self.experience_maker = GTPOExperienceMaker(
            base.actor_model_group,
            base.critic_model_group,
            base.reward_model_group,
            base.initial_model_group,
            base.kl_ctl,
            base.strategy,
            base.tokenizer,
        )
        self.gtpo = GTPOSettings.from_args(self.args)
        self.entropy_monitor = state.EntropyMonitor(self.gtpo.collapse_patience)

    def init_checkpoint_states(self):
        states = super().init_checkpoint_states()
        self.experience_maker.h_ini = state.restore_h_ini(states, self.gtpo.h_ini)
        return states

    def train_step(self, rollout_samples, global_step):
        status, global_step = super().train_step(rollout_samples, global_step)
        metrics = self.experience_maker.metrics
        status.update(metrics)
        self.entropy_monitor.update(
            metrics["gtpo/entropy_mean"], self.experience_maker.h_ini, global_step
        )
        return status, global_step

    def save_logs_and_checkpoints(self, global_step, logs_dict=None, client_states=None):
        client_states = {} if client_states is None else client_states
        state.save_h_ini(client_states, self.experience_maker.h_ini)
        return super().save_logs_and_checkpoints(global_step, logs_dict, client_states)

    def save_best_checkpoint(self, eval_metrics, global_step, client_states=None):
        client_states = {} if client_states is None else client_states
        state.save_h_ini(client_states, self.experience_maker.h_ini)
        return super().save_best_checkpoint(eval_metrics, global_step, client_states)


def _remote_like(original: Any, cls: type) -> Any:
    """ray.remote(cls) with the resource options OpenRLHF declared on `original`."""
    options = dict(getattr(original, "_default_options", None) or {})
    return ray.remote(**options)(cls) if options else ray.remote(cls)


# What the launcher puts in place of openrlhf.trainer.ppo_trainer.PPOTrainer and
# openrlhf.trainer.ray.ppo_actor.PolicyModelActor.
GTPOPPOTrainerActor = _remote_like(_ppo_trainer.PPOTrainer, GTPOPPOTrainer)
GTPOPolicyModelRayActor = _remote_like(_ppo_actor.PolicyModelActor, GTPOPolicyModelActor)
