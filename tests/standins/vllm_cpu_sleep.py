"""vLLM's sleep mode on its CPU build, strict about order: for `--vllm.enable_sleep` on CPU.

vLLM 0.29's CPU platform refuses `enable_sleep_mode` ("Sleep mode is not supported on current
platform"), and its CPU worker's `sleep` and `wake_up` are no-ops, so a colocated command as
the docs write it (`--train.colocate_all --vllm.enable_sleep`) would not start here. Installed in
every process of a CPU run (tests/openrlhf/fit_site/sitecustomize.py), this lets the platform
accept sleep mode and makes the CPU worker keep the state a GPU worker has: `sleep()` puts its
weights and its KV cache to sleep, `wake_up(tags)` wakes the tags named (all when None), and
running the model or loading weights while the part it needs sleeps raises, as it would fail or
read freed memory on a GPU. Everything around it is vLLM's own: the engine core pauses its
scheduler while asleep and resumes it once all is awake, and OpenRLHF's sleep, wake-up and
weight-sync calls are its own.

Could hide: the memory sleep frees (nothing is freed or offloaded here, so a plan that fits
only because sleep mode frees memory is not checked here; `gtpo-openrlhf --dry-run` prints the
memory of each phase instead), the time a wake-up takes, and level 2 (the weights discarded,
not kept).
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

PARTS = ("weights", "kv_cache")


class AsleepError(RuntimeError):
    pass


def _allow_sleep_mode(module: ModuleType) -> None:
    module.CpuPlatform.is_sleep_mode_available = lambda self: True


def _strict_worker(module: ModuleType) -> None:
    worker = module.CPUWorker
    execute_model = worker.execute_model

    def sleep(self, level: int = 1) -> None:
        self._gtpo_asleep = set(PARTS)

    def wake_up(self, tags: list[str] | None = None) -> None:
        asleep = getattr(self, "_gtpo_asleep", set())
        self._gtpo_asleep = asleep - set(tags if tags is not None else PARTS)

    def checked_execute_model(self, *args, **kwargs):
        asleep = getattr(self, "_gtpo_asleep", set())
        if asleep:
            raise AsleepError(f"the model ran while its {' and '.join(sorted(asleep))} slept")
        return execute_model(self, *args, **kwargs)

    worker.sleep = sleep
    worker.wake_up = wake_up
    worker.execute_model = checked_execute_model


def check_weights_awake(worker) -> None:
    """Called by the weight sync (vllm_cpu_transport.update_weight) before it loads weights."""
    if "weights" in getattr(worker, "_gtpo_asleep", set()):
        raise AsleepError("weights were loaded into an engine whose weights sleep")


PATCHES: dict[str, Callable[[ModuleType], None]] = {
    "vllm.platforms.cpu": _allow_sleep_mode,
    "vllm.v1.worker.cpu_worker": _strict_worker,
}
