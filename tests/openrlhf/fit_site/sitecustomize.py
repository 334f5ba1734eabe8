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


extra = {}
if os.environ.get("GTPO_TEST_CAPTURE_DIR"):
    extra["openrlhf.trainer.ppo_utils.experience_maker"] = _record_experiences
    extra["openrlhf.trainer.ppo_utils.samples_generator"] = _record_generated_prompts
cuda_on_cpu.install(extra)
