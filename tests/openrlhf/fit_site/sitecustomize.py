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


extra = {}
if os.environ.get("GTPO_TEST_CAPTURE_DIR"):
    extra["openrlhf.trainer.ppo_utils.experience_maker"] = _record_experiences
cuda_on_cpu.install(extra)
