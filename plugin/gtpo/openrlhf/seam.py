"""The one seam between GTPO and OpenRLHF's internals (importing this module imports OpenRLHF).

Every class GTPO extends, every function it calls and every name it rebinds is taken from here;
`compat` declares each of them (with the instance attributes the adapter reads) and checks them
at start-up against the installed release. The rest of the adapter reads like plain subclasses
of the classes below, and never imports OpenRLHF itself.

- The classes, as GTPO extends them: a Ray actor's own class (`__ray_actor_class__`), and
  OpenRLHF's private steps that GTPO overrides or calls under public names (`with_public_steps`).
- `building`: OpenRLHF builds its helpers by their module-level names (`ActorPPOTrainer(...)`,
  `SamplesGenerator(...)`, ...); while one of GTPO's constructors runs OpenRLHF's, the name is
  GTPO's subclass (`compat.Built`), so OpenRLHF builds GTPO's object where it built its own. No
  object changes class afterwards and no method is patched on an instance.
- `replaced`: names rebound for a block and put back after it (the launcher's, a model's view).
- `remote`: a GTPO actor class as a Ray actor, with the resources OpenRLHF declared on its own
  and each method it inherits from OpenRLHF reached through GTPO's class, so that the actor's
  process runs OpenRLHF's real method, not a pickled copy;
  `WithArguments`: such a class built by OpenRLHF with keyword arguments of GTPO's added.
- `stream_to_engines`: OpenRLHF's weight-sync loop, one weight at a time (LoRA's merged copies),
  over either of its transports (`send_by_broadcast`, `send_by_cuda_ipc`).
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import ray
import torch
from openrlhf.models.ring_attn_utils import gather_and_pad_tensor, unpad_and_slice_tensor
from openrlhf.trainer import ppo_trainer, ppo_trainer_async
from openrlhf.trainer.ppo_utils.experience_maker import RemoteExperienceMaker
from openrlhf.trainer.ppo_utils.samples_generator import SamplesGenerator as _SamplesGenerator
from openrlhf.trainer.ray import ppo_actor, vllm_engine
from openrlhf.trainer.ray.utils import get_physical_gpu_id as physical_gpu_id
from openrlhf.trainer.ray.vllm_engine import batch_vllm_engine_call
from openrlhf.utils import distributed_util
from openrlhf.utils.agent import SingleTurnAgentExecutor
from openrlhf.utils.logging_utils import init_logger
from openrlhf.utils.loss_utils import get_loss_batch_info

from gtpo.openrlhf import compat

__all__ = [
    "ActorPPOTrainer", "BasePPOTrainer", "ExperienceMaker", "GenerateSamplesActor",
    "PPOTrainer", "PPOTrainerAsync", "PolicyModelActor", "RewardExecutor", "RolloutRayActor",
    "SamplesGenerator", "TrainingActor", "WithArguments", "batch_vllm_engine_call", "building",
    "gather_and_pad_tensor", "get_loss_batch_info", "init_logger", "merge_mm_train_inputs",
    "physical_gpu_id", "remote", "replaced", "resolve", "send_by_broadcast", "send_by_cuda_ipc",
    "stream_to_engines", "unpad_and_slice_tensor",
]  # fmt: skip


def with_public_steps(base: type, name: str, **steps: str) -> type:
    """`base` with each of its private methods `steps[public]` reachable as `public`: a subclass
    overrides `public` and calls `super().public(...)` for OpenRLHF's own step, and OpenRLHF's
    code, which calls the private name, reaches the override."""

    def forwarding(public: str) -> Any:  # OpenRLHF's call of the private name
        return lambda self, *args, **kwargs: getattr(self, public)(*args, **kwargs)

    def openrlhfs(private: str) -> Any:  # looked up when called: a wrapper set later counts
        return lambda self, *args, **kwargs: getattr(base, private)(self, *args, **kwargs)

    namespace: dict[str, Any] = {"__module__": __name__, "__qualname__": name}
    namespace["public_steps"] = steps  # public name -> OpenRLHF's private one
    for public, private in steps.items():
        namespace[public] = openrlhfs(private)
        namespace[private] = forwarding(public)
    return type(name, (base,), namespace)


# --- the classes GTPO extends -----------------------------------------------------------------

PolicyModelActor = ppo_actor.PolicyModelActor.__ray_actor_class__
ActorPPOTrainer = ppo_actor.ActorPPOTrainer
merge_mm_train_inputs = ppo_actor.merge_mm_train_inputs
BasePPOTrainer = ppo_trainer.BasePPOTrainer
PPOTrainer = ppo_trainer.PPOTrainer.__ray_actor_class__
PPOTrainerAsync = ppo_trainer_async.PPOTrainerAsync.__ray_actor_class__
TrainingActor = ppo_trainer_async.TrainingActor.__ray_actor_class__
GenerateSamplesActor = ppo_trainer_async.GenerateSamplesActor.__ray_actor_class__
RolloutRayActor = vllm_engine.RolloutRayActor.__ray_actor_class__
ExperienceMaker = with_public_steps(
    RemoteExperienceMaker, "ExperienceMaker",
    dispatch_forward="_dispatch_forward", flatten_results="_flatten_results",
)  # fmt: skip
SamplesGenerator = with_public_steps(
    _SamplesGenerator, "SamplesGenerator", generate_vllm="_generate_vllm"
)
RewardExecutor = with_public_steps(
    SingleTurnAgentExecutor, "RewardExecutor", fetch_rewards_via_http="_fetch_rewards_via_http"
)

# OpenRLHF's Ray actor classes (their resource options) behind the classes above.
_REMOTE = {
    PolicyModelActor: ppo_actor.PolicyModelActor,
    PPOTrainer: ppo_trainer.PPOTrainer,
    PPOTrainerAsync: ppo_trainer_async.PPOTrainerAsync,
    TrainingActor: ppo_trainer_async.TrainingActor,
    GenerateSamplesActor: ppo_trainer_async.GenerateSamplesActor,
    RolloutRayActor: vllm_engine.RolloutRayActor,
}


def remote(cls: type) -> Any:
    """ray.remote(cls) with the resource options OpenRLHF declared on the actor class `cls`
    extends; the actor runs `cls` with each method it inherits from OpenRLHF reached through
    `cls` (`_with_inherited_methods_by_name`)."""
    original = next(_REMOTE[base] for base in cls.__mro__ if base in _REMOTE)
    options = dict(getattr(original, "_default_options", None) or {})
    actor = _with_inherited_methods_by_name(cls)
    return ray.remote(**options)(actor) if options else ray.remote(actor)


def _importable(function: Any) -> bool:
    """Whether pickle finds `function` by its module and qualified name (cloudpickle then sends
    the name, not the code)."""
    found: Any = sys.modules.get(function.__module__)
    for part in function.__qualname__.split("."):
        found = getattr(found, part, None)
    return found is function


def _with_inherited_methods_by_name(cls: type) -> type:
    """`cls`, under its own name, with a method of its own for each method `cls` inherits that
    pickle cannot find by name: one that calls the inherited method through `super(cls, self)`.

    Why: Ray wraps every method of an actor class, inherited ones too, and pickles the wrappers
    with the methods they wrap. An OpenRLHF actor's methods cannot be found by name (its module
    holds Ray's ActorClass under the class's name), so each travels by value, with a copy of its
    class and of the module names it reads. In the actor's process, such a copy's zero-argument
    super() refuses the real object (TrainingActor.broadcast_to_vllm: "super(type, obj): obj
    must be an instance or subtype of type"), and it would not see a name `building` rebinds.
    Each method made here travels with `cls` by name, so the actor runs OpenRLHF's own."""
    inherited = {}
    for name, method in inspect.getmembers(cls, inspect.isfunction):
        owner = next(base for base in cls.__mro__ if name in vars(base))
        wrapped_by_ray = not (
            isinstance(vars(owner)[name], (staticmethod, classmethod))
            or inspect.isgeneratorfunction(method)
            or inspect.isasyncgenfunction(method)
            or name == "__del__"
        )
        if owner is not cls and wrapped_by_ray and not _importable(method):
            inherited[name] = _through_super(cls, name, method)
    names = {"__module__": cls.__module__, "__qualname__": cls.__qualname__, "__doc__": cls.__doc__}
    return type(cls.__name__, (cls,), {**names, **inherited})


def _through_super(cls: type, name: str, method: Any) -> Any:
    """`method`, inherited by `cls`, called through `super(cls, self)`; Ray reads its signature
    and its ray.method options."""

    def inherited(self: Any, *args: Any, **kwargs: Any) -> Any:
        return getattr(super(cls, self), name)(*args, **kwargs)

    if inspect.iscoroutinefunction(method):

        async def inherited(self: Any, *args: Any, **kwargs: Any) -> Any:
            return await getattr(super(cls, self), name)(*args, **kwargs)

    inherited.__dict__.update(vars(method))
    inherited.__signature__ = inspect.signature(method)  # type: ignore[attr-defined]
    inherited.__name__, inherited.__doc__ = name, method.__doc__
    return inherited


class WithArguments:
    """A remote actor class whose `.remote(...)` (and `.options(...).remote(...)`) also passes
    `extra` keyword arguments: what GTPO builds in place of an OpenRLHF actor class that
    OpenRLHF constructs itself, with arguments it builds itself (create_vllm_engines'
    RolloutRayActor gets --gtpo.reward_timeout; the async trainer's actors their handles)."""

    def __init__(self, remote_class: Any, **extra: Any) -> None:
        self.remote_class = remote_class
        self.extra = extra

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        return self.remote_class.remote(*args, **self.extra, **kwargs)

    def options(self, **options: Any) -> WithArguments:
        return WithArguments(self.remote_class.options(**options), **self.extra)


# --- rebinding ------------------------------------------------------------------------------

_ABSENT = object()


@contextmanager
def replaced(*bindings: tuple[Any, str, Any]) -> Iterator[None]:
    """Each (target, name, value) set for the block, then put back: a module's global as it
    was, an object's own attribute removed again (the class's shows through as before)."""
    saved = [(target, name, vars(target).get(name, _ABSENT)) for target, name, _ in bindings]
    for target, name, value in bindings:
        setattr(target, name, value)
    try:
        yield
    finally:
        for target, name, value in reversed(saved):
            if value is _ABSENT:
                delattr(target, name)
            else:
                setattr(target, name, value)


def resolve(built: compat.Built) -> Any:
    """What OpenRLHF's module holds under a `compat.Built` name now."""
    return getattr(importlib.import_module(built.module), built.name)


def building(*builds: tuple[compat.Built, Any]) -> AbstractContextManager[None]:
    """While the block runs, each `compat.Built` name is GTPO's class (or factory, or function):
    OpenRLHF builds (or calls) GTPO's where it would its own."""
    return replaced(*((importlib.import_module(b.module), b.name, cls) for b, cls in builds))


# --- the weight sync ---------------------------------------------------------------------------


def stream_to_engines(trainer: Any, weights: Any, count: int) -> None:
    """OpenRLHF 0.11.2's `ActorPPOTrainer.broadcast_to_vllm`, fed `count` (name, tensor) pairs
    one at a time: each is sent, and dropped before the next is made. OpenRLHF first lists
    every parameter, which for LoRA's merged copies (`lora.rollout_parameters`) holds a copy of
    every adapted layer at once.

    The loop is the same for both of OpenRLHF's transports; only the call that hands one weight
    to the engines differs (`send_by_broadcast`, `send_by_cuda_ipc`), chosen as OpenRLHF chooses
    it (`use_cuda_ipc`: NCCL with every model colocated). Every rank iterates `weights`
    together (under ZeRO-3 each pair is a gather). The last weight is marked `empty_cache`, as
    OpenRLHF marks it, and the prefix caches are reset around the sync as OpenRLHF resets them.
    """
    import deepspeed

    send = send_by_cuda_ipc if trainer.use_cuda_ipc else send_by_broadcast
    rank0 = torch.distributed.get_rank() == 0
    resets = []
    if rank0 and compat.PREFIX_CACHING.get(trainer.strategy.args):
        resets = [engine.reset_prefix_cache.remote() for engine in trainer.vllm_engines]
    torch.cuda.empty_cache()
    sent = 0
    for name, weight in weights:
        sent += 1
        partitioned = hasattr(weight, "ds_id")  # a ZeRO-3 parameter left as it is
        with deepspeed.zero.GatheredParameters([weight], enabled=partitioned):
            send(trainer, name, weight, last=sent == count)
        del weight
    if sent != count:
        raise RuntimeError(f"the weight sync sent {sent} weights, {count} expected")
    ray.get(resets)
    torch.cuda.empty_cache()
    distributed_util.torch_dist_barrier_and_cuda_sync()


def _shape(weight: torch.Tensor) -> torch.Size:
    # A ZeRO-3 parameter's own shape is its empty partition's; OpenRLHF sends `ds_shape`.
    return weight.ds_shape if hasattr(weight, "ds_shape") else weight.shape


def send_by_broadcast(trainer: Any, name: str, weight: torch.Tensor, last: bool) -> None:
    """One weight to every engine by a collective from rank 0 (NCCL, gloo or Ray's), as
    OpenRLHF's `_broadcast_param`: rank 0 announces it to each engine and broadcasts it."""
    if torch.distributed.get_rank() != 0:
        return
    shape = _shape(weight)
    updates = [
        engine.update_weight.remote(name, dtype=weight.dtype, shape=shape, empty_cache=last)
        for engine in trainer.vllm_engines
    ]
    if compat.SYNC_WITH_RAY.get(trainer.strategy.args):
        import ray.util.collective as collective

        collective.broadcast(weight.data, 0, group_name=trainer._model_update_group)
    else:
        trainer._model_update_group.broadcast(
            weight.data, src=0, stream=torch.cuda.current_stream()
        )
    ray.get(updates)


def send_by_cuda_ipc(trainer: Any, name: str, weight: torch.Tensor, last: bool) -> None:
    """One weight to the colocated engines by CUDA IPC, as OpenRLHF's `_handle_cuda_ipc`:
    every rank shares its own GPU's copy as a handle, rank 0 gives each engine the handles of
    every GPU, and each engine's worker maps the one of its GPU and loads from it.

    A parameter is copied first, as OpenRLHF copies it (a handle shares the whole storage, and
    DeepSpeed's parameters live in flat buffers); a merged LoRA copy is already a tensor of
    its own, so it is shared as it is: one merged weight on the GPU at a time.
    """
    from torch.multiprocessing.reductions import reduce_tensor

    own = weight.data.clone() if isinstance(weight, torch.nn.Parameter) else weight.data
    handles: list[Any] = [None] * torch.distributed.get_world_size()
    torch.distributed.all_gather_object(handles, {physical_gpu_id(): reduce_tensor(own)})
    if torch.distributed.get_rank() == 0:
        by_gpu = {gpu: handle for each in handles for gpu, handle in each.items()}
        shape = _shape(weight)
        loads = [
            engine.update_weight_cuda_ipc.remote(
                name, dtype=weight.dtype, shape=shape, ipc_handles=by_gpu, empty_cache=last
            )
            for engine in trainer.vllm_engines
        ]
        ray.get(loads)
    # The engines have loaded from `own` before any rank drops it.
    distributed_util.torch_dist_barrier_and_cuda_sync()
    del own
