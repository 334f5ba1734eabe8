"""The weight sync between OpenRLHF's trainer and the real vLLM engine, on CPU.

Installed at start-up in every process of a fit() run on the real engine (the driver, each Ray
worker and vLLM's engine-core process: tests/openrlhf/fit_site/sitecustomize.py), through the
same import hook as `cuda_on_cpu`. It replaces only what has no CPU meaning:

- **gloo for NCCL.** OpenRLHF's `stateless_init_process_group` wraps vLLM's real
  `StatelessProcessGroup` (a TCPStore rendezvous) in vLLM's `PyNcclCommunicator`; here that
  class is `GlooCommunicator`, the same `broadcast(tensor, src, stream)` over a private gloo
  group on that store. The bytes really move between the trainer and each engine.
- **CPU tensors for CUDA ones.** `WorkerWrap.update_weight` allocates the received weight with
  `device="cuda"`; `update_weight` below receives it on the CPU.
- **Reloading layerwise instead of `model.load_weights` one weight at a time.** vLLM's CPU
  backend repacks every linear weight for its GEMM kernels after loading and drops the original
  (`dispatch_cpu_unquantized_gemm(layer, remove_weight=True)`), so a later `load_weights` finds
  an empty parameter. The received weights are kept until the last one of a sync (OpenRLHF
  marks it `empty_cache=True`), then handed to vLLM's `reload_weights`, which calls the model's
  own `load_weights` (the stacked `qkv_proj` / `gate_up_proj` mapping, tied embeddings) and
  repacks. `keep_linear_weights` keeps each linear layer's weight in checkpoint layout beside
  the packed copy, so that a test can read back what the engine holds (`engine_weights`).

What it hides, and only a GPU shows: NCCL itself (communicator set-up, timeouts), CUDA streams
(the stream argument is ignored, so a missing synchronize goes unnoticed), the device of the
received tensors, and vLLM loading each weight as it arrives (here one reload per sync: a sync
that ended without its last weight would leave the engine on its old weights instead of a mix).

TRL's colocate mode (`use_vllm=True, vllm_mode="colocate"`) loads the weights in its own
process, one `load_weights` call per weight: `trl_sync_weights` sends the same weights, under
the same names, through the same layerwise reload.

Everything else is real: OpenRLHF's `RolloutRayActor`, `create_vllm_engines`, `WorkerWrap`'s
process group and rank offsets, TRL's `VLLMGeneration`, the names the trainers send, vLLM's
`load_weights` mapping, its sampler, scheduler and prefix cache.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import timedelta
from types import ModuleType

# torch is imported inside the functions: this module is loaded at start-up by every process
# of a run (sitecustomize), most of which never sync weights.


class GlooCommunicator:
    """vLLM's `PyNcclCommunicator` surface (constructor and `broadcast`) over gloo."""

    def __init__(self, group, device=None) -> None:
        import torch.distributed as dist

        store = dist.PrefixStore("gtpo-test-weight-sync", group.store)
        self.rank = group.rank
        self.world_size = group.world_size
        self._pg = dist.ProcessGroupGloo(
            store, group.rank, group.world_size, timedelta(seconds=300)
        )

    def broadcast(self, tensor, src: int, stream=None) -> None:
        import torch.distributed as dist

        opts = dist.BroadcastOptions()
        opts.rootRank = src
        opts.rootTensor = 0
        self._pg.broadcast([tensor], opts).wait()


def update_weight(self, name, dtype, shape, empty_cache=False):
    """`WorkerWrap.update_weight` with the weight received on the CPU and loaded layerwise at the
    end of the sync (module docstring)."""
    import torch
    import vllm_cpu_sleep

    if dtype != self.model_config.dtype:  # WorkerWrap's own assertion
        raise AssertionError(f"mismatch dtype: src {dtype}, dst {self.model_config.dtype}")
    vllm_cpu_sleep.check_weights_awake(self)
    weight = torch.empty(shape, dtype=dtype)
    if self._model_update_with_ray:
        import ray.util.collective as collective

        collective.broadcast(weight, 0, group_name=self._model_update_group)
    else:
        self._model_update_group.broadcast(weight, src=0, stream=None)
    pending = self.__dict__.setdefault("_gtpo_pending_weights", [])
    pending.append((name, weight))
    if empty_cache:
        from vllm.config import set_current_vllm_config

        self._gtpo_pending_weights = []
        with set_current_vllm_config(self.vllm_config):
            self.model_runner.reload_weights(weights_iterator=iter(pending))
        self._gtpo_syncs = getattr(self, "_gtpo_syncs", 0) + 1
        capture = os.environ.get("GTPO_TEST_CAPTURE_DIR")
        if capture:
            path = os.path.join(capture, f"engine_weights_{os.getpid()}_{self._gtpo_syncs}.pt")
            layout = stacking_layout(self.model_config, self.model_runner.get_model())
            torch.save({"weights": engine_weights(self), "layout": layout}, path)


def engine_weights(self) -> dict:
    """The engine model's parameters under vLLM's own names (`qkv_proj`, `gate_up_proj`, …)."""
    model = self.model_runner.get_model()
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def stacking_layout(model_config, model) -> dict:
    """How vLLM stacked a Llama-style model's weights (the rows of q and of k / v in
    `qkv_proj`) and whether its lm_head is its embedding: what `fit_harness.hf_weights` needs
    to split the engine's weights back into the checkpoint's."""
    head = model_config.get_head_size()
    config = model_config.hf_config
    return {
        "q_rows": config.num_attention_heads * head,
        "kv_rows": model_config.get_total_num_kv_heads() * head,
        "tied": bool(getattr(config, "tie_word_embeddings", False)),
        "lm_head_is_embedding": _lm_head_is_embedding(model),
    }


def _lm_head_is_embedding(model) -> bool:
    lm_head = getattr(model, "lm_head", None)
    embedding = getattr(getattr(model, "model", None), "embed_tokens", None)
    if lm_head is None or embedding is None:
        return False
    return lm_head.weight.data_ptr() == embedding.weight.data_ptr()


def _patch_worker_wrap(module: ModuleType) -> None:
    module.WorkerWrap.update_weight = update_weight
    module.WorkerWrap.engine_weights = engine_weights


def _patch_pynccl(module: ModuleType) -> None:
    module.PyNcclCommunicator = GlooCommunicator


def _keep_linear_weights(module: ModuleType) -> None:
    """keep_linear_weights: `remove_weight=False` for every linear layer (module docstring)."""
    dispatch = module.dispatch_cpu_unquantized_gemm

    def dispatch_keeping_weight(layer, remove_weight: bool) -> None:
        dispatch(layer, remove_weight=False)

    module.dispatch_cpu_unquantized_gemm = dispatch_keeping_weight


def trl_sync_weights(self) -> None:
    """TRL's `VLLMGeneration.sync_weights` in colocate mode, on CPU: the weights TRL would hand
    to the model's `load_weights` one by one (`_iter_named_params`, the same names) go to vLLM's
    layerwise reload at once, which repacks them (the module docstring says why and what it
    hides). Then the prefix cache reset TRL does."""
    from vllm.config import set_current_vllm_config

    engine = self.llm.llm_engine
    runner = engine.model_executor.driver_worker.model_runner
    weights = [(name, param.detach().clone()) for name, param in self._iter_named_params()]
    with set_current_vllm_config(engine.vllm_config):
        runner.reload_weights(weights_iterator=iter(weights))
    self.llm.reset_prefix_cache()


def _patch_trl_generation(module: ModuleType) -> None:
    sync_weights = module.VLLMGeneration.sync_weights

    def sync(self) -> None:
        if self.mode != "colocate":
            return sync_weights(self)  # server mode: vLLM's own process, NCCL (GPU only)
        return trl_sync_weights(self)

    module.VLLMGeneration.sync_weights = sync


PATCHES: dict[str, Callable[[ModuleType], None]] = {
    "openrlhf.trainer.ray.vllm_worker_wrap": _patch_worker_wrap,
    "vllm.distributed.device_communicators.pynccl": _patch_pynccl,
    "vllm.model_executor.layers.utils": _keep_linear_weights,
    "trl.generation.vllm_generation": _patch_trl_generation,
}
