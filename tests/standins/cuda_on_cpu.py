"""CPU meanings for the few CUDA calls OpenRLHF makes unconditionally (fit tests only).

`install()` is called at start-up by every process of an end-to-end run (the driver and each
Ray worker, through tests/openrlhf/fit_site/sitecustomize.py on their PYTHONPATH). It patches a
module only after that module has been imported for real (an import hook), and only these
names:

- torch.cuda.set_device, torch.cuda.synchronize: no-ops. Hides: stream races that a real
  synchronize orders (OpenRLHF's torch_dist_barrier_and_cuda_sync, offload/reload).
- torch.cuda.current_device(): the CPU device, where OpenRLHF uses it as a device (`.to(...)`,
  `device=`). Hides: a tensor left on the wrong device, since every tensor is on the CPU.
- torch.cuda.current_stream(): None (the gloo stand-in of PyNcclCommunicator ignores it).
- torch.distributed.device_mesh.init_device_mesh("cuda", ...): built on "cpu" (gloo instead of
  NCCL). Hides: NCCL-only failures (timeouts, communicator set-up).
- NaiveReplayBuffer's `cuda:N` target device: the CPU.

And one thing DeepSpeed does only on its CPU accelerator:

- deepspeed.comm.torch.build_shm_op: None. DeepSpeed's CPU accelerator JIT-builds its
  shared-memory all-reduce op (`deepspeed_shm_comm`, about 40 s of both cores in each fresh
  environment) when its communication backend starts, for `inference_all_reduce` alone;
  training's collectives go through torch.distributed (gloo here, NCCL on a GPU), and the CUDA
  accelerator has no such op. Hides: nothing a GPU run builds or calls.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from collections.abc import Callable
from types import ModuleType


def _patch_torch_cuda(torch_cuda: ModuleType) -> None:
    import torch

    torch_cuda.set_device = lambda device: None
    torch_cuda.synchronize = lambda device=None: None
    torch_cuda.current_device = lambda: torch.device("cpu")
    torch_cuda.current_stream = lambda device=None: None


def _patch_device_mesh(device_mesh: ModuleType) -> None:
    original = device_mesh.init_device_mesh

    def init_device_mesh(device_type, *args, **kwargs):
        return original("cpu" if device_type == "cuda" else device_type, *args, **kwargs)

    device_mesh.init_device_mesh = init_device_mesh


def _patch_replay_buffer(replay_buffer: ModuleType) -> None:
    import torch

    buffer_cls = replay_buffer.NaiveReplayBuffer
    original = buffer_cls.__init__

    def __init__(self, *args, **kwargs):
        # OpenRLHF formats torch.device(f"cuda:{torch.cuda.current_device()}") here.
        current_device = torch.cuda.current_device
        torch.cuda.current_device = lambda: 0
        try:
            original(self, *args, **kwargs)
        finally:
            torch.cuda.current_device = current_device
        self.target_device = torch.device("cpu")

    buffer_cls.__init__ = __init__


def _patch_deepspeed_comm(comm_torch: ModuleType) -> None:
    comm_torch.build_shm_op = lambda: None


CUDA_PATCHES: dict[str, Callable[[ModuleType], None]] = {
    "torch.cuda": _patch_torch_cuda,
    "deepspeed.comm.torch": _patch_deepspeed_comm,
    "torch.distributed.device_mesh": _patch_device_mesh,
    "openrlhf.trainer.ppo_utils.replay_buffer": _patch_replay_buffer,
}


class PatchAfterImport(importlib.abc.MetaPathFinder):
    """Lets the normal finders load each module named in `patches`, then patches it."""

    def __init__(self, patches: dict[str, Callable[[ModuleType], None]]) -> None:
        self.patches = patches

    def find_spec(self, name, path, target=None):
        if name not in self.patches:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_patch(module: ModuleType) -> None:
            exec_module(module)
            self.patches[name](module)

        spec.loader.exec_module = exec_and_patch
        return spec


def install(extra: dict[str, Callable[[ModuleType], None]] | None = None) -> None:
    """Patch the CUDA calls above (and `extra`) in this process as their modules are imported."""
    already = [name for name in {**CUDA_PATCHES, **(extra or {})} if name in sys.modules]
    if already:
        raise RuntimeError(f"install() must run before these are imported: {already}")
    sys.meta_path.insert(0, PatchAfterImport({**CUDA_PATCHES, **(extra or {})}))
