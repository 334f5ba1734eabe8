"""The single controller: OpenRLHF's synchronous PPOTrainer with GTPO (`GTPOController`, shared
with the async trainer), and the rollouts' generator it builds.

- `GTPOController`: OpenRLHF builds GTPO's experience maker (`experience.py`) in it; it
  measures H_ini before the first update (or restores it from the checkpoint), logs the gtpo/*
  metrics and watches the entropy.
- `GTPOSamplesGenerator`: OpenRLHF's rollout generator, each rollout cut to what every rank
  trains on alike (`rollouts.py`), and the rollout H_ini is measured on.
- `GTPOPPOTrainer`: the synchronous trainer; a run that trained on nothing ends with an error.
"""

from __future__ import annotations

import time
from typing import Any

import ray
import torch

from gtpo import state
from gtpo.openrlhf import compat, enable_logging, seam
from gtpo.openrlhf.experience import GTPOExperienceMaker
from gtpo.openrlhf.resume import check_checkpoint_shared
from gtpo.openrlhf.rollouts import RolloutTally
from gtpo.openrlhf.run_args import gtpo_config

logger = seam.init_logger(__name__)


class GTPOSamplesGenerator(seam.SamplesGenerator):
    """OpenRLHF's rollout generator: each rollout comes back cut to what every rank trains on
    alike (`rollouts.RolloutTally`, `tally`), and H_ini's rollout (`h_ini_rollout`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tally = RolloutTally()

    def generate_samples(self, **generate_kwargs: Any) -> tuple[list[Any], Any, int, bool]:
        samples, pass_rate, consumed, exhausted = super().generate_samples(**generate_kwargs)
        return self.tally.trim(self.args, samples, consumed), pass_rate, consumed, exhausted

    def h_ini_rollout(self, prompts: int, **generate_kwargs: Any) -> tuple[list[Any], int]:
        """(samples, prompts drawn) of G completions for each of the first `prompts` prompts of
        a fresh pass of the training prompts, through the rollout engines and the reward path
        like any rollout (no dynamic filtering), leaving the loader to draw the same order
        again.

        A new iterator over the shuffled prompts draws its order from the sampler's generator
        (torchdata's RandomSampler; torch's global RNG for others). Putting both back lets
        training's own first iterator draw the same order: H_ini is measured on exactly the
        first training prompts, and training runs as it would without the measurement.
        """
        dataloader = self.prompts_dataloader
        sleep = compat.VLLM_SLEEP.get(self.args)
        rng = torch.random.get_rng_state()
        generator = getattr(getattr(dataloader, "sampler", None), "generator", None)
        generator_state = generator.get_state() if generator is not None else None
        if sleep:
            seam.batch_vllm_engine_call(self.vllm_engines, "wake_up")
        try:
            samples, drawn, _ = self.generate_vllm(
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
                seam.batch_vllm_engine_call(self.vllm_engines, "sleep")
        return samples, drawn


class GTPOController:
    """What GTPO adds to OpenRLHF's single controller, the synchronous PPOTrainer and the async
    TrainingActor (`async_training.py`) alike: the GTPO experience maker (OpenRLHF builds it),
    H_ini (measured once before the first update, or restored from the checkpoint), the gtpo/*
    metrics and the entropy monitor. Mixed in before the OpenRLHF class."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        with seam.building((compat.EXPERIENCE_MAKER, GTPOExperienceMaker)):
            super().__init__(*args, **kwargs)
        enable_logging()
        self.gtpo = gtpo_config(self.args)
        self.entropy_monitor = state.EntropyMonitor(self.gtpo.collapse_patience)
        self.trained_steps = 0
        self.resumed_at = 0

    def h_ini_rollout(self, prompts: int) -> tuple[list[Any], int]:
        """H_ini's rollout: G completions of each of the first `prompts` training prompts."""
        return self.samples_generator.h_ini_rollout(prompts, **self.generate_kwargs)

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
        measure = h_ini is None and self.gtpo.filter_mode == "auto"
        if self.engines_behind_trainer(measure):
            self.broadcast_to_vllm()
        if measure:
            h_ini = self.measure_h_ini()
        self.experience_maker.h_ini = h_ini
        return states

    def engines_behind_trainer(self, measure: bool) -> bool:
        """Whether the rollout engines must be synced before anything is generated.

        They load the checkpoint's own weights, and OpenRLHF's fit() syncs them only when it
        resumes, after this call. So they sample another model than the trainer's when the run
        resumes and H_ini is measured first, and, in every fresh run, with a 4-bit base
        (QLoRA): the trainer computes with dequant(NF4) + B·A·α/r, the engines with the bf16
        weights NF4 was made from. Without this sync H_ini's generations and the first rollout
        came from that other model."""
        if self.resumed_at > 0:
            return measure
        return bool(compat.LOAD_IN_4BIT.get(self.args))

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


class GTPOPPOTrainer(GTPOController, seam.PPOTrainer):
    """OpenRLHF's synchronous PPOTrainer with GTPO (`GTPOController`), its rollouts trimmed to
    what every rank trains on alike (`GTPOSamplesGenerator`, which OpenRLHF builds)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        with seam.building((compat.SAMPLES_GENERATOR, GTPOSamplesGenerator)):
            super().__init__(*args, **kwargs)

    def fit(self, *args: Any, **kwargs: Any) -> Any:
        """OpenRLHF's fit(); a run that trained on nothing ends with an error saying why (it
        used to exit 0 with the model unchanged)."""
        result = super().fit(*args, **kwargs)
        if self.trained_steps == 0 and self.resumed_at == 0:
            raise self.samples_generator.tally.nothing_trained(self.args)
        return result


# What the launcher builds in place of OpenRLHF's PPOTrainer (compat.TRAINER).
GTPOPPOTrainerRemote = seam.remote(GTPOPPOTrainer)
