"""Start-up hook of every process in an end-to-end OpenRLHF run (tests/openrlhf/test_orl_fit.py).

fit_harness.py puts this folder and tests/standins on PYTHONPATH for the driver and, through
Ray's runtime_env, for every Ray worker. Python imports `sitecustomize` at start-up, so each
process (1) gives OpenRLHF's unconditional CUDA calls a CPU meaning (tests/standins/
cuda_on_cpu.py) and (2), when GTPO_TEST_CAPTURE_DIR is set, records what the experience maker
produced at every step so the test can recompute it independently:

    experiences_<pid>_<step>.pt: per micro-batch sequences, action_mask, index, prompts and
    labels, raw rewards,
    the group_norm advantages OpenRLHF computed, the advantages after GTPO's hook, the
    completion entropies; and the maker's h_ini and gtpo/* metrics.
    generated_<pid>_<n>.json: the prompts of each generation call (the first one measures H_ini).
    train_step_seconds_<pid>.json: the wall time of each PPOTrainer.train_step (the controller's
    experience making, the policy's training and the weight broadcast; not the generation), and
    train_step_end_<pid>.json the wall-clock time each one ended (benchmarks/async_throughput.py).
    actor_peak_rss_<pid>.json: each policy rank's peak resident memory (kB) during each
    ActorPPOTrainer.ppo_train call, the high-water mark reset before it (benchmarks/step_cost.py).
    train_micro_batches_<pid>.json: the training micro-batches of each ppo_train call, per rank.

The recording wraps OpenRLHF's own RemoteExperienceMaker methods (GTPO's subclass calls them
through super()), so it sees the hook's input and output without touching GTPO's code.
"""

from __future__ import annotations

import itertools
import os

import cuda_on_cpu


def _record_experiences(experience_maker) -> None:
    import torch

    capture = os.environ["GTPO_TEST_CAPTURE_DIR"]
    base = experience_maker.RemoteExperienceMaker
    compute_advantages = base.compute_advantages_and_returns
    make_batch = base.make_experience_batch
    steps = itertools.count(1)

    def compute_advantages_and_returns(self, experiences):
        out = compute_advantages(self, experiences)
        # Runs inside GTPO's override before its hook: these are OpenRLHF's own advantages.
        self._recorded = {
            "group_norm": [e.advantages.clone() for e in out],
            "entropy": [t.clone() for t in (getattr(self, "_rollout_entropy", None) or [])],
        }
        return out

    def make_experience_batch(self, rollout_samples):
        out = make_batch(self, rollout_samples)
        recorded = getattr(self, "_recorded", {})
        record = {
            "micro_batches": [
                {
                    "sequences": e.sequences.clone(),
                    "action_mask": e.action_mask.clone(),
                    "attention_mask": e.attention_mask.clone(),
                    "index": list(e.index),
                    "prompts": list(e.prompts),
                    "labels": list(e.labels),
                    "rewards": e.rewards.clone(),
                    "scores": None if e.scores is None else e.scores.clone(),
                    "policy_version": e.info.get("policy_version"),
                    "advantages": e.advantages.clone(),
                }
                for e in out
            ],
            "group_norm": recorded.get("group_norm"),
            "entropy": recorded.get("entropy"),
            "h_ini": getattr(self, "h_ini", None),
            "metrics": dict(getattr(self, "metrics", {})),
        }
        torch.save(record, os.path.join(capture, f"experiences_{os.getpid()}_{next(steps)}.pt"))
        return out

    base.compute_advantages_and_returns = compute_advantages_and_returns
    base.make_experience_batch = make_experience_batch


def _record_generated_prompts(samples_generator) -> None:
    """generated_<pid>_<n>.json: the prompts of each generation call (in completion order)."""
    import json

    capture = os.environ["GTPO_TEST_CAPTURE_DIR"]
    generate = samples_generator.SamplesGenerator._generate_vllm
    calls = itertools.count(1)

    def _generate_vllm(self, dataloader_iter, num_prompts, dynamic_filtering, **kwargs):
        experiences, consumed, exhausted = generate(
            self, dataloader_iter, num_prompts, dynamic_filtering, **kwargs
        )
        prompts = list(dict.fromkeys(p for e in experiences for p in e.prompts))
        path = os.path.join(capture, f"generated_{os.getpid()}_{next(calls)}.json")
        with open(path, "w") as fh:
            json.dump(prompts, fh)
        return experiences, consumed, exhausted

    samples_generator.SamplesGenerator._generate_vllm = _generate_vllm


def _append_json(name: str, value) -> None:
    import json

    path = os.path.join(os.environ["GTPO_TEST_CAPTURE_DIR"], f"{name}_{os.getpid()}.json")
    values = []
    if os.path.exists(path):
        with open(path) as fh:
            values = json.load(fh)
    with open(path, "w") as fh:
        json.dump([*values, value], fh)


def _record_train_step_time(ppo_trainer) -> None:
    import time

    base = ppo_trainer.BasePPOTrainer
    train_step = base.train_step

    def timed(self, rollout_samples, global_step):
        started = time.perf_counter()
        out = train_step(self, rollout_samples, global_step)
        _append_json("train_step_seconds", time.perf_counter() - started)
        _append_json("train_step_end", time.time())  # wall clock: steps a second
        return out

    base.train_step = timed


def _record_actor_training(ppo_actor) -> None:
    """Per ActorPPOTrainer.ppo_train call on each policy rank: its peak resident memory (Linux:
    writing 5 to /proc/self/clear_refs resets the peak, VmHWM, to the current RSS) and the
    number of training micro-batches it ran."""
    base = ppo_actor.ActorPPOTrainer
    ppo_train, training_step = base.ppo_train, base.training_step
    counted = {"micro_batches": 0}

    def counting(self, *args, **kwargs):
        counted["micro_batches"] += 1
        return training_step(self, *args, **kwargs)

    def measured(self, kl_ctl):
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        counted["micro_batches"] = 0
        out = ppo_train(self, kl_ctl)
        with open("/proc/self/status") as fh:
            peak = next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))
        _append_json("actor_peak_rss", peak)
        _append_json("train_micro_batches", counted["micro_batches"])
        return out

    base.ppo_train = measured
    base.training_step = counting


extra = {}
if os.environ.get("GTPO_TEST_CAPTURE_DIR"):
    extra["openrlhf.trainer.ppo_trainer"] = _record_train_step_time
    extra["openrlhf.trainer.ray.ppo_actor"] = _record_actor_training
    extra["openrlhf.trainer.ppo_utils.experience_maker"] = _record_experiences
    extra["openrlhf.trainer.ppo_utils.samples_generator"] = _record_generated_prompts
cuda_on_cpu.install(extra)
