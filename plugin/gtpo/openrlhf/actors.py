"""GTPO's subclasses of OpenRLHF's Ray actors (importing this module imports OpenRLHF).

A monkeypatch made in the driver does not reach Ray workers: each worker imports OpenRLHF
afresh. So GTPO lives in subclasses defined here at module level; Ray pickles them by reference
and every worker imports this module. The launcher rebinds OpenRLHF's names to the remote
classes at the bottom of this file before `train_ppo_ray` reads them.

- `GTPOPolicyModelActor` (DeepSpeed policy, one per GPU): `forward_with_entropy` is OpenRLHF's
  experience-time forward that also returns each completion's mean entropy ⟨H⟩_i, from the same
  logits (no second forward, one pass over them: `fused.py`).
- `GTPOExperienceMaker` (inside the trainer): asks the policy actors for that forward, and after
  OpenRLHF's group_norm or dr_grpo advantages weights them by λ·δ
  (`advantages.weight_advantages`).
- `GTPOPPOTrainer` (the single controller): uses that experience maker, logs the gtpo/* metrics,
  keeps H_ini in checkpoints and watches the entropy.
- `GTPOActorPPOTrainer`: makes OpenRLHF's entropy term Eq. 7's per-completion mean, with the
  log-probs and entropies of one chunked pass over the logits (`fused.FusedActorForward`, for
  one training step; the experience-time forward uses it too).
- `GTPORolloutActor` (the vLLM engine actor): its agent executor keeps one pooled reward client,
  rotates requests over the reward servers, retries for up to --gtpo.reward_timeout seconds and
  stops the run if the service stays down (`rewards.py`).

The OpenRLHF methods overridden here are listed in `compat.REQUIRED` (checked at start-up), the
settings read through `compat`'s `Arg`s.
"""

from __future__ import annotations

import copy
import time
from typing import Any, NamedTuple

import ray
import torch
from openrlhf.trainer import ppo_trainer as _ppo_trainer
from openrlhf.trainer.ppo_utils import experience_maker as _experience_maker
from openrlhf.trainer.ray import ppo_actor as _ppo_actor
from openrlhf.trainer.ray import vllm_engine as _vllm_engine
from openrlhf.utils.agent import SingleTurnAgentExecutor
from openrlhf.utils.logging_utils import init_logger
from openrlhf.utils.loss_utils import get_loss_batch_info

from gtpo import completion_entropy, state
from gtpo.openrlhf import compat, enable_logging
from gtpo.openrlhf.advantages import weight_advantages
from gtpo.openrlhf.flags import gtpo_config
from gtpo.openrlhf.fused import FusedActorForward
from gtpo.openrlhf.lora import PeftSync, is_peft, rollout_parameter_count, rollout_parameters
from gtpo.openrlhf.resume import check_checkpoint_shared
from gtpo.openrlhf.rewards import rollout_reward_client
from gtpo.openrlhf.rollouts import RolloutTally
from gtpo.reward_client import RewardServerError

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


class GTPOPolicyModelActor(_ppo_actor.PolicyModelActor.__ray_actor_class__):
    """OpenRLHF's policy actor, plus the entropy GTPO needs from the experience-time forward."""

    def init_model_from_pretrained(self, strategy, pretrain, max_steps=None, vllm_engines=None):
        super().init_model_from_pretrained(strategy, pretrain, max_steps, vllm_engines)
        # ActorPPOTrainer's constructor opens the vLLM weight-sync group and hits a barrier, so it
        # cannot be built a second time; the subclass adds methods and no state.
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
            entropy = output.entropy[:, -mask.shape[1] :]  # the action positions, as the loss
            del output
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


class GTPOActorPPOTrainer(_ppo_actor.ActorPPOTrainer):
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
            loss_batch_info = get_loss_batch_info(
                self.strategy,
                experience.action_mask,
                replay_buffer=self.replay_buffer,
                step=step,
                dynamic_batch=compat.DYNAMIC_BATCH.get(self.args),
            )
        scale = per_completion_entropy_scale(
            experience.action_mask,
            loss_batch_info[compat.BATCH_NUM_TOKENS],
            loss_batch_info[compat.GLOBAL_BATCH_SIZE],
        )
        with FusedActorForward(self.actor, row_scale=scale):
            return super().training_step(experience, kl_ctl, step, loss_batch_info)

    def broadcast_to_vllm(self):
        """OpenRLHF's weight sync; with LoRA, of the merged weights under the base model's
        names (`lora.py`), which is what the rollout engines hold, one at a time."""
        model = self.actor.model.module
        if not is_peft(model):
            return super().broadcast_to_vllm()
        gather = compat.ZERO_STAGE.get(self.args) == 3
        if self.use_cuda_ipc or compat.TENSOR_PARALLEL_SIZE.get(self.args) > 1:
            # OpenRLHF's own loop (CUDA IPC handles, tensor-parallel gathers) over the merged
            # view: every merged copy at once.
            with PeftSync(model, gather=gather):
                return super().broadcast_to_vllm()
        weights = rollout_parameters(model, gather)
        return compat.stream_to_engines(self, weights, rollout_parameter_count(model))


def rank_padded_samples(samples: list[Any], ranks: int) -> tuple[list[Any], int]:
    """`samples` followed by repeats of them, so that there are at least `ranks` (every rank
    needs a micro-batch of its own, and OpenRLHF's dynamic batching partitions samples into at
    least one micro-batch per rank). Returns (samples, how many were real). The repeats are
    copies: OpenRLHF numbers each sample it splits (`index`), and the real ones keep 0..N−1.
    """
    real = len(samples)
    if real == 0:
        raise RuntimeError("no samples to measure H_ini on")
    extra = [copy.copy(samples[k % real]) for k in range(max(0, ranks - real))]
    return [*samples, *extra], real


def balanced_micro_batches(micro_batches: list[Any], ranks: int) -> list[Any]:
    """`micro_batches` padded with repeats to a multiple of `ranks` micro-batches.

    `RayActorGroup.async_run_method_batch` gives rank r the micro-batches r·c … r·c+c−1 with
    c = ceil(M / ranks); with M a multiple of `ranks` every rank gets exactly M / ranks. The
    repeats are copies with their own `info` (make_experience writes its results into each
    micro-batch it is given), so the real micro-batches keep their own results.
    """
    if not micro_batches:
        raise RuntimeError("no micro-batches to run the policy's forward on")
    missing = -len(micro_batches) % ranks
    repeats = [copy.copy(micro_batches[k % len(micro_batches)]) for k in range(missing)]
    for repeat in repeats:
        repeat.info = dict(repeat.info)
    return [*micro_batches, *repeats]


class GTPOExperienceMaker(_experience_maker.RemoteExperienceMaker):
    """OpenRLHF's experience maker, with GTPO's λ·δ on its group_norm or dr_grpo advantages."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.gtpo = gtpo_config(self.args)
        self.h_ini: float | None = self.gtpo.h_ini
        self.metrics: dict[str, float] = {}
        self._forward_entropy: list[torch.Tensor] | None = None
        self._rollout_entropy: list[torch.Tensor] | None = None

    def _dispatch_forward(self, group, sync_condition, **kwargs):
        if group is not self.actor_model_group:
            return super()._dispatch_forward(group, sync_condition, **kwargs)
        # OpenRLHF's _dispatch_forward with the policy's forward_with_entropy instead of forward.
        ref = group.async_run_method_batch(method_name=compat.FORWARD_WITH_ENTROPY, **kwargs)
        if sync_condition:
            ray.get(ref)
            ray.get(group.async_run_method(method_name=compat.EMPTY_CACHE))
        return ref

    def _flatten_results(self, refs, duplicate_factor):
        results = super()._flatten_results(refs, duplicate_factor)
        if results and isinstance(results[0], ActorForward):
            self._forward_entropy = [r.completion_entropy for r in results]
            return [r.action_log_probs for r in results]
        return results

    def make_experience(self, samples_list):
        """OpenRLHF's make_experience, with every data-parallel rank running the same number of
        forwards, and the policy's completion entropies kept for δ.

        OpenRLHF gives each rank a ceil-sized share of the rollout micro-batches, so 5 of them on
        2 ranks are 3 and 2 forwards. Under ZeRO-3 every forward is a collective (the parameter
        all-gather): the rank with 2 would wait for the other's third until the collective
        timeout, in the policy's forward and the reference model's alike (OpenRLHF's own loop
        hangs the same way). The micro-batches are padded with copies to a multiple of the ranks
        (`balanced_micro_batches`, as H_ini's forward is) and the copies' results dropped; ranks
        that would have idled run them instead, so a step takes no longer. With fewer
        micro-batches than ranks (a short final rollout) the padding also avoids OpenRLHF's
        ValueError.
        """
        real = len(samples_list)
        padded = balanced_micro_batches(samples_list, compat.data_parallel_size(self.args))
        self._forward_entropy = None
        experiences = super().make_experience(padded)[:real]
        if self._forward_entropy is None or len(self._forward_entropy) != len(padded):
            raise RuntimeError(
                "the policy actors did not return completion entropies; the actor group must be "
                "built from gtpo.openrlhf.actors (start training with gtpo-openrlhf)"
            )
        self._rollout_entropy, self._forward_entropy = self._forward_entropy[:real], None
        return experiences

    def completion_entropies(self, rollout_samples: list[Any]) -> torch.Tensor:
        """⟨H⟩_i of each sample under the current policy: the policy actors' forward only. [N].

        Used for H_ini: the same forward, split and dispatch as make_experience (multimodal
        inputs included), without the reference, critic or KL work. OpenRLHF's dispatch gives
        each data-parallel rank a ceil-sized share of the micro-batches, so H_ini's count
        (--gtpo.h_ini_prompts × G, which users do not size) would leave ranks with different
        numbers of forwards: a ValueError with fewer micro-batches than ranks, and under ZeRO-3
        (a parameter all-gather in every forward) busier ranks waiting on idle ones until the
        collective timeout. `balanced_micro_batches` pads the work with uncounted repeats so
        every rank runs the same number of forwards.
        """
        args = self.strategy.args
        samples, real = rank_padded_samples(rollout_samples, compat.data_parallel_size(args))
        micro_batches = balanced_micro_batches(
            self.split_rollout_samples(samples), compat.data_parallel_size(args)
        )
        forward_kwargs = {
            "sequences": [s.sequences for s in micro_batches],
            "action_mask": [s.action_mask for s in micro_batches],
            "attention_mask": [s.attention_mask for s in micro_batches],
        }
        if any(s.mm_train_inputs for s in micro_batches):  # as make_experience passes them
            forward_kwargs["mm_train_inputs_list"] = [s.mm_train_inputs for s in micro_batches]
        self._forward_entropy = None
        ref = self._dispatch_forward(
            self.actor_model_group,
            compat.COLOCATE_ALL.get(args) or compat.COLOCATE_ACTOR_REF.get(args),
            **forward_kwargs,
        )
        self._flatten_results(
            ref, compat.RING_ATTN_SIZE.get(args) * compat.TENSOR_PARALLEL_SIZE.get(args)
        )
        entropies, self._forward_entropy = self._forward_entropy, None
        if entropies is None:
            raise RuntimeError(
                "the policy actors did not return completion entropies; the actor group must be "
                "built from gtpo.openrlhf.actors (start training with gtpo-openrlhf)"
            )
        # Rows of the real samples, in rollout order; the padding (repeats) is dropped.
        by_index = {}
        for batch, entropy in zip(micro_batches, entropies, strict=True):
            for index, value in zip(batch.index, entropy.tolist(), strict=True):
                if index < real:
                    by_index[index] = value
        return torch.tensor([by_index[i] for i in range(real)], dtype=torch.float32, device="cpu")

    def compute_advantages_and_returns(self, experiences):
        experiences = super().compute_advantages_and_returns(experiences)
        entropies, self._rollout_entropy = self._rollout_entropy, None
        if entropies is None:
            raise RuntimeError("compute_advantages_and_returns called without make_experience")
        if self.h_ini is None and self.gtpo.filter_mode == "auto":
            raise RuntimeError(
                "H_ini is unknown: GTPOPPOTrainer measures it (or restores it) before the first "
                "rollout; this experience maker was used without that trainer"
            )
        metrics = weight_advantages(
            experiences, entropies, compat.GROUP_SIZE.get(self.args), self.h_ini, self.gtpo
        )
        self.metrics = state.prefixed(metrics, self.h_ini)
        return experiences


class GTPOController:
    """What GTPO adds to OpenRLHF's single controller, the synchronous PPOTrainer and the async
    TrainingActor (`async_training.py`) alike: the GTPO experience maker, H_ini (measured once
    before the first update, or restored from the checkpoint), the gtpo/* metrics and the
    entropy monitor. Mixed in before the OpenRLHF class; `_install_gtpo` runs after its
    constructor."""

    def _install_gtpo(self) -> None:
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
        self.gtpo = gtpo_config(self.args)
        self.entropy_monitor = state.EntropyMonitor(self.gtpo.collapse_patience)
        self.trained_steps = 0
        self.resumed_at = 0

    def h_ini_rollout(self, prompts: int) -> tuple[list[Any], int]:
        """H_ini's rollout: G completions of each of the first `prompts` training prompts."""
        return h_ini_rollout(
            self.samples_generator, self.prompts_dataloader, self.generate_kwargs, prompts
        )

    def init_checkpoint_states(self):
        states = super().init_checkpoint_states()
        self.resumed_at = states.get("global_step", 0)
        if compat.CKPT_LOAD.get(self.args):
            check_checkpoint_shared(
                states,
                ray.get(self.actor_model_group.async_run_method(method_name=compat.CKPT_STATES)),
                compat.CKPT_PATH.get(self.args),
            )
        h_ini = state.restore_h_ini(states, self.gtpo.h_ini)
        # Only δ's `auto` mode reads H_ini (Eq. 6); the GRPO baseline and δ on/off skip the
        # measurement's h_ini_prompts × G generations.
        if h_ini is None and self.gtpo.filter_mode == "auto":
            if self.resumed_at > 0:
                # fit() syncs the resumed weights to the rollout engines only after this call.
                self.broadcast_to_vllm()
            h_ini = self.measure_h_ini()
        self.experience_maker.h_ini = h_ini
        return states

    def measure_h_ini(self) -> float:
        """H_ini of Eq. 6: mean ⟨H⟩ over the first --gtpo.h_ini_prompts training prompts.

        Runs before the first update, as in the paper (Sec. 4.2: the first 100 training prompts).
        The prompts come from a fresh pass of the training dataloader, G completions each
        through the rollout engines and the reward path like any rollout; the entropies come
        from the policy actors' forward.
        """
        started = time.perf_counter()
        wanted = self.gtpo.h_ini_prompts
        samples, prompts = self.h_ini_rollout(wanted)
        if not samples:
            raise RuntimeError("the prompt dataset is empty: there is nothing to measure H_ini on")
        h_ini = float(self.experience_maker.completion_entropies(samples).mean())
        state.log_measured_h_ini(
            h_ini, prompts, len(samples) // max(prompts, 1), time.perf_counter() - started,
            self.gtpo.entropy_threshold,
        )  # fmt: skip
        if prompts < wanted:
            logger.warning(
                "GTPO: the dataset has %d prompts, fewer than --gtpo.h_ini_prompts %d",
                prompts,
                wanted,
            )
        return h_ini

    def train_step(self, rollout_samples, global_step):
        status, global_step = super().train_step(rollout_samples, global_step)
        self.trained_steps += 1
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


def h_ini_rollout(
    samples_generator: Any, dataloader: Any, generate_kwargs: dict, prompts: int
) -> tuple[list[Any], int]:
    """(samples, prompts drawn) of G completions for each of the first `prompts` prompts of a
    fresh pass of `dataloader`, through the rollout engines and the reward path like any
    rollout (no dynamic filtering), leaving the loader to draw the same order again.

    A new iterator over the shuffled prompts draws its order from the sampler's generator
    (torchdata's RandomSampler; torch's global RNG for others). Putting both back lets
    training's own first iterator draw the same order: H_ini is measured on exactly the first
    training prompts, and training runs as it would without the measurement.
    """
    args = samples_generator.args
    sleep = compat.VLLM_SLEEP.get(args)
    engines = samples_generator.vllm_engines
    rng = torch.random.get_rng_state()
    generator = getattr(getattr(dataloader, "sampler", None), "generator", None)
    generator_state = generator.get_state() if generator is not None else None
    if sleep:
        _vllm_engine.batch_vllm_engine_call(engines, "wake_up")
    try:
        samples, drawn, _ = samples_generator._generate_vllm(
            dataloader_iter=iter(dataloader),
            num_prompts=prompts,
            dynamic_filtering=False,
            **generate_kwargs,
        )
    finally:
        torch.random.set_rng_state(rng)
        if generator is not None:
            generator.set_state(generator_state)
        if sleep:
            _vllm_engine.batch_vllm_engine_call(engines, "sleep")
    return samples, drawn


def trim_rollouts(samples_generator: Any, args: Any) -> RolloutTally:
    """Route `samples_generator.generate_samples` through a RolloutTally (rollouts.py): each
    rollout comes back cut to what every rank trains on alike. Returns the tally."""
    tally = RolloutTally()
    generate = samples_generator.generate_samples

    def generate_trainable_samples(**kwargs):
        samples, pass_rate, consumed, exhausted = generate(**kwargs)
        return tally.trim(args, samples, consumed), pass_rate, consumed, exhausted

    samples_generator.generate_samples = generate_trainable_samples
    return tally


class GTPOPPOTrainer(GTPOController, _ppo_trainer.PPOTrainer.__ray_actor_class__):
    """OpenRLHF's synchronous PPOTrainer with GTPO (`GTPOController`), its rollouts trimmed to
    what every rank trains on alike."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._install_gtpo()
        self.rollouts = trim_rollouts(self.samples_generator, self.args)

    def fit(self, *args: Any, **kwargs: Any) -> Any:
        """OpenRLHF's fit(); a run that trained on nothing ends with an error saying why (it
        used to exit 0 with the model unchanged)."""
        result = super().fit(*args, **kwargs)
        if self.trained_steps == 0 and self.resumed_at == 0:
            raise self.rollouts.nothing_trained(self.args)
        return result


class RetryingRewardExecutor(SingleTurnAgentExecutor):
    """OpenRLHF's single-turn executor whose HTTP reward call shares one pooled client over
    every reward server and outlasts a server restart (`rewards.py`).

    OpenRLHF's `execute` swallows any error of the reward call and returns the sample with
    reward None; here the call retries for up to `reward_timeout` seconds, and a sample that
    still has no reward stops the run with RewardServerError.
    """

    def __init__(
        self, remote_rm_url: Any, reward_timeout: float, reward_token: str | None = None
    ) -> None:
        super().__init__(remote_rm_url)
        self.last_failure: str | None = None
        self.client = None
        if self.reward_endpoints and self.reward_func is None:
            self.client = rollout_reward_client(self.reward_endpoints, reward_timeout, reward_token)

    async def _fetch_rewards_via_http(self, queries_list, prompts_list, labels_list):
        payload = {"query": queries_list, "prompts": prompts_list, "labels": labels_list}
        try:
            return [await self.client.get_reward(payload)]
        except RewardServerError as exc:
            self.last_failure = str(exc)
            raise

    async def execute(self, *args: Any, **kwargs: Any) -> dict:
        output = await super().execute(*args, **kwargs)
        if self.client is not None and output.get("reward") is None:
            raise RewardServerError(
                self.last_failure or f"no reward from {', '.join(self.reward_endpoints)}"
            )
        return output


class GTPORolloutActor(_vllm_engine.RolloutRayActor.__ray_actor_class__):
    """OpenRLHF's vLLM rollout actor with the retrying reward executor."""

    async def __init__(
        self,
        *args: Any,
        remote_rm_url: Any = None,
        agent_func_path: str | None = None,
        reward_timeout: float = 300.0,
        reward_token: str | None = None,
        **kwargs: Any,
    ) -> None:
        await super().__init__(
            *args, remote_rm_url=remote_rm_url, agent_func_path=agent_func_path, **kwargs
        )
        if remote_rm_url and not agent_func_path:
            self.executor = RetryingRewardExecutor(remote_rm_url, reward_timeout, reward_token)


def _remote_like(original: Any, cls: type) -> Any:
    """ray.remote(cls) with the resource options OpenRLHF declared on `original`."""
    options = dict(getattr(original, "_default_options", None) or {})
    return ray.remote(**options)(cls) if options else ray.remote(cls)


# What the launcher puts in place of openrlhf.trainer.ppo_trainer.PPOTrainer and
# openrlhf.trainer.ray.ppo_actor.PolicyModelActor (and, with reward_timeout, RolloutRayActor).
GTPOPPOTrainerActor = _remote_like(_ppo_trainer.PPOTrainer, GTPOPPOTrainer)
GTPOPolicyModelRayActor = _remote_like(_ppo_actor.PolicyModelActor, GTPOPolicyModelActor)
GTPORolloutRayActor = _remote_like(_vllm_engine.RolloutRayActor, GTPORolloutActor)


class WithArguments:
    """A remote actor class whose `.remote(...)` (and `.options(...).remote(...)`) also passes
    `extra` keyword arguments: what the launcher puts in place of an OpenRLHF actor class that
    OpenRLHF constructs itself, with arguments it builds itself (create_vllm_engines'
    RolloutRayActor gets `reward_timeout`; the async trainer's actors, `async_training.py`)."""

    def __init__(self, remote_class: Any, **extra: Any) -> None:
        self.remote_class = remote_class
        self.extra = extra

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        return self.remote_class.remote(*args, **self.extra, **kwargs)

    def options(self, **options: Any) -> WithArguments:
        return WithArguments(self.remote_class.options(**options), **self.extra)
