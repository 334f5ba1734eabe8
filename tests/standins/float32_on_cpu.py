"""float32 instead of bf16 in an OpenRLHF fit() run, on a CPU without bf16 units.

OpenRLHF accepts only bf16 and fp16 (`--ds.param_dtype`) and starts every vLLM engine in bf16
(`create_vllm_engines`). On a CPU with bf16 units (AVX-512 BF16, AMX) that is fast enough; on one
without (AVX2 only), a bf16 matrix product runs about 70 times slower than a float32 one, and a
real-model step took 461 s of training where float32 takes seconds. So on such a CPU the test
environment (fit_harness.py sets GTPO_TEST_FLOAT32=1; fit_site installs these) trains and samples
in float32, the choice the demo makes on CPUs:

- `convert_to_torch_dtype("bf16")`, which builds the policy and reference models, gives float32;
- the DeepSpeed strategy's dtype is neither bf16 nor fp16, so its config enables neither;
- every rollout engine starts in float32, the dtype the trainer's weights arrive in.

What it hides: bf16 numerics (rounding of the weights, the log-probs and the entropies), which a
GPU run and a test run on a CPU with bf16 units show.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from types import ModuleType

BF16_UNITS = ("avx512_bf16", "amx_bf16")


def cpu_has_bf16_units() -> bool:
    """Whether this CPU multiplies bf16 in hardware (Linux: a flag of /proc/cpuinfo)."""
    try:
        with open("/proc/cpuinfo") as fh:
            flags = next(
                (line.split(":", 1)[1].split() for line in fh if line.startswith("flags")), []
            )
    except OSError:
        return False
    return any(unit in flags for unit in BF16_UNITS)


def wanted() -> bool:
    """GTPO_TEST_FLOAT32=1 forces it, =0 forbids it; unset, it follows the CPU."""
    forced = os.environ.get("GTPO_TEST_FLOAT32")
    return forced == "1" if forced in ("0", "1") else not cpu_has_bf16_units()


def _patch_dtypes(utils: ModuleType) -> None:
    import torch

    convert = utils.convert_to_torch_dtype

    def convert_to_float32(param_dtype: str) -> torch.dtype:
        return torch.float32 if param_dtype in ("bf16", "fp32") else convert(param_dtype)

    utils.convert_to_torch_dtype = convert_to_float32


def _patch_strategy(deepspeed_module: ModuleType) -> None:
    strategy = deepspeed_module.DeepspeedStrategy
    init = strategy.__init__

    def __init__(self, *args, **kwargs) -> None:
        init(self, *args, **kwargs)
        self.param_dtype = "fp32"  # get_*_ds_config enables bf16 / fp16 only for their names

    strategy.__init__ = __init__


def _patch_engines(vllm_engine: ModuleType) -> None:
    actor = vllm_engine.RolloutRayActor.__ray_actor_class__
    init = actor.__init__

    async def __init__(self, *args, **kwargs) -> None:
        kwargs["dtype"] = "float32"  # create_vllm_engines passes "bfloat16"
        await init(self, *args, **kwargs)

    actor.__init__ = __init__


PATCHES: dict[str, Callable[[ModuleType], None]] = {
    "openrlhf.utils.utils": _patch_dtypes,
    "openrlhf.utils.deepspeed.deepspeed": _patch_strategy,
    "openrlhf.trainer.ray.vllm_engine": _patch_engines,
}
