"""bitsandbytes' 4-bit layers keep the layout a GPU keeps, in a fit() run on a CPU.

bitsandbytes 0.50 on a CPU with AVX-512 BF16 repacks a `Linear4bit`'s weight in place the first
time the layer runs in eval mode on an input that needs no gradient (`Linear4bit.forward` calls
`_convert_weight_packed_for_cpu`: nibbles reordered for its CPU kernel, the double-quantized
absmax replaced by a bf16 one). OpenRLHF's experience forward is such a call (`model.eval()`
under `torch.no_grad()`), so by the first training step every base layer of a QLoRA policy is
repacked, and from then on, on that CPU only:

- `matmul_4bit` runs the CPU kernel `gemv_4bit`, which has no autograd formula, in training
  too: the backward through every 4-bit base layer is dropped (PyTorch warns that "an autograd
  kernel was not registered"), so the layers below get only the residual's and the adapters'
  share of the gradient;
- the weight's bytes and quant state are no longer what `dequantize_4bit` reads, so a weight
  sync dequantizes garbage (a QLoRA run's synced q_proj was 148% off the checkpoint's).

A GPU never repacks (the branch needs `x.device.type == "cpu"`). Here every `Linear4bit` is built
as on a CPU without AVX-512 BF16 (`has_avx512bf16` answers False to its constructor), so it keeps
the GPU's layout and bitsandbytes' portable CPU path computes it, with autograd.

What it hides: bitsandbytes' AVX-512 BF16 inference kernel, which no GPU run uses; nothing that a
GPU run does (bitsandbytes' CUDA kernels are not exercised here either way).
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType


def _no_cpu_repacking(modules: ModuleType) -> None:
    # Linear4bit.__init__ reads the name from this module's globals.
    modules.has_avx512bf16 = lambda: False


PATCHES: dict[str, Callable[[ModuleType], None]] = {
    "bitsandbytes.nn.modules": _no_cpu_repacking,
}
