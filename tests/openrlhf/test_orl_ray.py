"""A real local Ray cluster on CPU: the workers OpenRLHF starts run GTPO's subclasses.

The launcher's rebinding is active while OpenRLHF's own RayActorGroup starts the policy actor
from the name train_ppo_ray reads (openrlhf.trainer.ray.ppo_actor.PolicyModelActor); the worker
process reports its class, and OpenRLHF's real experience pipeline (split → make_experience →
group_norm) driven by GTPO's experience maker gets each completion's entropy from that worker.
"""

from __future__ import annotations

import os
import sys
from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("openrlhf")
pytest.importorskip("deepspeed")
pytest.importorskip("transformers")

import tiny_llama as tiny_llama_module
from openrlhf.trainer.ppo_utils.kl_controller import FixedKLController
from openrlhf.trainer.ppo_utils.samples_generator import SamplesGenerator
from openrlhf.trainer.ray.launcher import RayActorGroup
from tiny_llama import tiny_llama

from gtpo import completion_entropy, token_entropy
from gtpo.openrlhf.__main__ import installed
from gtpo.openrlhf.flags import parse_gtpo_flags

G = 4

# The functions sent to the workers below live in this test module, which the workers cannot
# import (pytest imports it by path): ship them by value.
ray = pytest.importorskip("ray")
# Ray workers cannot import tests/ helpers by name: ship the tiny model's module by value.
ray.cloudpickle.register_pickle_by_value(tiny_llama_module)
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


def rollout(num_prompts: int = 3):
    gen = torch.Generator().manual_seed(11)
    samples = []
    for k in range(num_prompts):
        prompt = torch.randint(10, 30, (2 + k,), generator=gen).tolist()
        for j in range(G):
            body = [5, 6, *torch.randint(1, 30, (1 + (j * 3 + k) % 5,), generator=gen).tolist()]
            response = {
                "observation_tokens": [*prompt, *body],
                "action_ranges": [(len(prompt), len(prompt) + len(body))],
                "reward": float((j + k) % 3),
                "scores": 0.0,
                "rollout_log_probs": None,
                "prompt": f"p{k}",
                "label": "",
                "truncated": False,
                "extra_logs": {},
            }
            samples.append(SamplesGenerator._process_response_into_experience(None, response))
    return samples


def test_policy_workers_run_gtpo_subclass_and_return_entropy(ray_cluster, openrlhf_args):
    from openrlhf.trainer import ppo_trainer
    from openrlhf.trainer.ray import ppo_actor

    args = openrlhf_args("--rollout.micro_batch_size", "5")
    with installed(parse_gtpo_flags([])[0]):
        policy_cls = ppo_actor.PolicyModelActor  # what train_ppo_ray hands to RayActorGroup
        trainer_cls = ppo_trainer.PPOTrainer
        # OpenRLHF's own group class; no GPU on this cluster, so 0 GPUs per actor.
        group = RayActorGroup(1, 1, policy_cls, pg=None, num_gpus_per_actor=0)
    assert ppo_actor.PolicyModelActor is not policy_cls  # rebinding undone
    assert trainer_cls.__ray_actor_class__.__module__ == "gtpo.openrlhf.controller"
    assert issubclass(trainer_cls.__ray_actor_class__, ppo_trainer.PPOTrainer.__ray_actor_class__)

    handle = group._actor_handlers[0]
    mro = ray_cluster.get(
        handle.__ray_call__.remote(
            lambda self: [f"{c.__module__}.{c.__qualname__}" for c in type(self).__mro__]
        )
    )
    assert mro[0] == "gtpo.openrlhf.policy.GTPOPolicyModelActor"
    assert "openrlhf.trainer.ray.ppo_actor.PolicyModelActor" in mro

    def load_tiny_policy(self):
        # What init_model_from_pretrained would set up, minus DeepSpeed and the GPU.
        from openrlhf.models import Actor

        self.actor = Actor(tiny_llama())
        self.actor.packing_samples = False
        self.strategy = SimpleNamespace(ring_attn_group=None, is_rank_0=lambda: True)
        return True

    assert ray_cluster.get(handle.__ray_call__.remote(load_tiny_policy))

    from gtpo.openrlhf.experience import GTPOExperienceMaker

    maker = GTPOExperienceMaker(
        group,
        None,
        None,
        None,
        FixedKLController(0.0),
        SimpleNamespace(args=args),
        SimpleNamespace(pad_token_id=0),
    )
    # H_ini first (GTPOPPOTrainer.measure_h_ini does this before the first rollout): the same
    # forward on the policy workers, nothing else.
    h_ini = maker.completion_entropies(rollout())
    maker.h_ini = float(h_ini.mean())
    experiences = maker.make_experience_batch(rollout())
    assert len(experiences) == 3  # 12 samples in micro-batches of 5: groups straddle

    # The worker's log-probs are what OpenRLHF's Actor computes; its entropies the core's.
    from openrlhf.models import Actor

    local = Actor(tiny_llama())
    local.packing_samples = False
    expected = []
    for e in experiences:
        with torch.no_grad():
            log_probs, output = local(
                e.sequences, e.action_mask, e.attention_mask, return_output=True
            )
        torch.testing.assert_close(e.action_log_probs, log_probs, rtol=1e-5, atol=1e-6)
        entropy = token_entropy(output["logits"])[:, :-1][:, -e.action_mask.shape[1] :]
        expected.append(completion_entropy(entropy, e.action_mask.bool()))
    expected = torch.cat(expected)
    torch.testing.assert_close(h_ini, expected, rtol=1e-4, atol=1e-6)
    assert maker.metrics["gtpo/entropy_mean"] == pytest.approx(float(expected.mean()), rel=1e-4)
    assert maker.metrics["gtpo/h_ini"] == maker.h_ini
    assert set(maker.metrics) == {
        "gtpo/conflict_frac_pos",
        "gtpo/conflict_frac_neg",
        "gtpo/filtered_frac",
        "gtpo/entropy_mean",
        "gtpo/h_ini",
    }
    # Shared prefix [5, 6] across opposite advantages: conflicts were found and weighted.
    assert maker.metrics["gtpo/conflict_frac_pos"] > 0
    assert maker.metrics["gtpo/conflict_frac_neg"] > 0


def write_tiny_checkpoint(path):
    """A model directory OpenRLHF can load a tokenizer from: config.json and a word tokenizer."""
    import json

    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2} | {f"w{i}": i + 3 for i in range(29)}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="<pad>", eos_token="</s>", unk_token="<unk>"
    )
    tokenizer.save_pretrained(path)
    tiny_llama().config.save_pretrained(path)
    prompts = path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"input": f"w{i} w{i + 1}"}) + "\n" for i in range(8)))
    return prompts


def test_trainer_worker_runs_gtpo_trainer(ray_cluster, openrlhf_args, tmp_path):
    """The single-controller PPOTrainer worker is GTPO's, with GTPO's experience maker."""
    from openrlhf.trainer import ppo_trainer
    from openrlhf.utils import get_strategy

    prompts = write_tiny_checkpoint(tmp_path)
    args = openrlhf_args(
        "--actor.model_name_or_path", str(tmp_path), "--data.prompt_dataset", str(prompts)
    )
    with installed(parse_gtpo_flags([])[0]):
        trainer_cls = ppo_trainer.PPOTrainer  # what train_ppo_ray's train() imports
    # OpenRLHF's own train() call, minus the model groups and vLLM engines (GPU only).
    trainer = trainer_cls.remote(
        str(tmp_path), get_strategy(args), None, None, None, None, None, max_len=64
    )
    report = ray_cluster.get(
        trainer.__ray_call__.remote(
            lambda self: (
                type(self).__mro__[0].__module__ + "." + type(self).__mro__[0].__qualname__,
                type(self.experience_maker).__qualname__,
                self.experience_maker.gtpo.gamma,
                self.get_max_steps(),
            )
        )
    )
    assert report[0] == "gtpo.openrlhf.controller.GTPOPPOTrainer"
    assert report[1] == "GTPOExperienceMaker"
    assert report[2] == 0.1
    assert report[3] == 8 * 4 // 32  # OpenRLHF's own dataset set-up ran on the worker
    ray_cluster.kill(trainer)


def test_the_clusters_workers_run_at_the_tests_own_priority(ray_cluster):
    """Ray starts its workers at niceness 15 unless told otherwise: beside any other CPU-bound
    process on the machine, these tests' actors then wait for a core (tests/openrlhf/
    conftest.py, ray_cluster)."""

    @ray.remote
    def niceness() -> int:
        return os.nice(0)

    assert ray.get(niceness.remote()) == os.nice(0)
