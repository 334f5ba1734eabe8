"""seam.py: OpenRLHF builds GTPO's classes while GTPO's constructors run its own and never after,
names are put back however a block ends, and a private step GTPO overrides under a public name
is the one OpenRLHF's own code calls."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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


# Run in a fresh process, as Ray's actor process: loads the actor classes this process pickled,
# names each method that arrived as a copy of the one its class has, and makes the async
# training actor's weight sync (TrainingActor.broadcast_to_vllm, whose super() refused a copy).
ACTOR_PROCESS = """
import inspect, json, sys, types
import ray

arrived = ray.cloudpickle.loads(open(sys.argv[1], "rb").read())
copies = {
    role: [
        name
        for name, method in inspect.getmembers(cls, inspect.isfunction)
        if hasattr(cls.__ray_actor_class__, name)  # not Ray's own __ray_call__, ...
        and inspect.unwrap(method) is not inspect.unwrap(getattr(cls.__ray_actor_class__, name))
    ]
    for role, cls in arrived.items()
}
actor = object.__new__(arrived["async training actor"])
calls = []
remote = lambda name: types.SimpleNamespace(remote=lambda *a: calls.append(name))
actor.vllm_lock = types.SimpleNamespace(acquire=remote("acquire"), release=remote("release"))
actor.policy_version = types.SimpleNamespace(set=remote("version"))
actor._partial_rollout, actor.resumed_at, actor.weights_step = False, 0, 3
ray.get = lambda ref: ref
from gtpo.openrlhf import seam
seam.BasePPOTrainer.broadcast_to_vllm = lambda self: calls.append("sync")
try:
    actor.broadcast_to_vllm()
except TypeError as error:
    calls.append(str(error))
print(json.dumps({"copies": copies, "sync": calls}))
"""


def test_an_actor_process_runs_openrlhfs_own_methods_not_copies(tmp_path):
    """Ray sends an actor's class (every method wrapped, inherited ones too) with cloudpickle to
    the actor's process. An OpenRLHF method pickle cannot find by name travels by value, with a
    copy of its class: there its zero-argument super() refused the real actor, and the async
    trainer's first weight sync failed ("super(type, obj): obj must be an instance or subtype of
    type"). Each method must arrive as the actor process's own function."""
    import ray

    from gtpo.openrlhf import async_training, controller, policy, rollout_actor

    remotes = {
        "policy": policy.GTPOPolicyModelRemote,
        "rollout": rollout_actor.GTPORolloutRemote,
        "trainer": controller.GTPOPPOTrainerRemote,
        "async trainer": async_training.GTPOPPOTrainerAsyncRemote,
        "async training actor": async_training.GTPOTrainingActorRemote,
        "async generator": async_training.GTPOGenerateSamplesActorRemote,
    }
    pickled = tmp_path / "classes.pkl"
    modified = {role: r.__ray_metadata__.modified_class for role, r in remotes.items()}
    pickled.write_bytes(ray.cloudpickle.dumps(modified))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run(
        [sys.executable, "-c", ACTOR_PROCESS, str(pickled)],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["copies"] == {role: [] for role in remotes}
    assert report["sync"] == ["acquire", "sync", "version", "release"]
