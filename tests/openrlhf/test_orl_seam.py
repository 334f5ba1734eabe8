"""seam.py: OpenRLHF builds GTPO's classes while GTPO's constructors run its own and never after,
names are put back however a block ends, and a private step GTPO overrides under a public name
is the one OpenRLHF's own code calls."""

from __future__ import annotations

import types

import pytest

pytest.importorskip("openrlhf")
pytest.importorskip("deepspeed")

from openrlhf.trainer.ppo_utils import samples_generator
from openrlhf.trainer.ray import ppo_actor

from gtpo.openrlhf import compat, seam


def test_openrlhf_builds_gtpos_class_only_inside_the_block():
    original = ppo_actor.ActorPPOTrainer

    class Mine(seam.ActorPPOTrainer):
        pass

    with pytest.raises(RuntimeError), seam.building((compat.ACTOR_TRAINER, Mine)):
        assert ppo_actor.ActorPPOTrainer is Mine  # what init_model_from_pretrained builds
        raise RuntimeError("a constructor that fails")
    assert ppo_actor.ActorPPOTrainer is original


def test_an_objects_own_attribute_is_removed_again():
    model = types.SimpleNamespace()
    type_method = types.SimpleNamespace.__repr__
    with seam.replaced((model, "named_parameters", lambda: "merged")):
        assert model.named_parameters() == "merged"
    assert "named_parameters" not in vars(model)
    assert types.SimpleNamespace.__repr__ is type_method


def test_a_private_step_overridden_under_its_public_name_is_what_openrlhf_calls(monkeypatch):
    """OpenRLHF's generate_samples calls self._generate_vllm; GTPO's override of the public
    `generate_vllm` receives that call, and its super() reaches OpenRLHF's step, even one
    wrapped on OpenRLHF's class after the seam was imported (the fit tests record it so)."""
    calls = []
    monkeypatch.setattr(
        samples_generator.SamplesGenerator,
        "_generate_vllm",
        lambda self, *args, **kwargs: calls.append(("openrlhf", args, kwargs)) or "made",
    )

    class Mine(seam.SamplesGenerator):
        def __init__(self) -> None:  # no engines: only the dispatch is under test
            pass

        def generate_vllm(self, *args, **kwargs):
            calls.append(("gtpo", args, kwargs))
            return super().generate_vllm(*args, **kwargs)

    assert Mine()._generate_vllm("loader", num_prompts=2) == "made"
    assert calls == [("gtpo", ("loader",), {"num_prompts": 2}),
                     ("openrlhf", ("loader",), {"num_prompts": 2})]  # fmt: skip


def test_a_gtpo_actor_keeps_the_resources_openrlhf_declared():
    from gtpo.openrlhf.policy import GTPOPolicyModelRemote

    declared = dict(ppo_actor.PolicyModelActor._default_options or {})
    assert GTPOPolicyModelRemote._default_options == declared
    assert GTPOPolicyModelRemote.__ray_actor_class__.__name__ == "GTPOPolicyModelActor"
