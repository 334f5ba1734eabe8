"""Every tensor gtpo creates names its device.

On a GPU, a tensor made without `device=` lands on the CPU, and the first `cat`, `stack` or
`where` that mixes it with the model's tensors raises (the CPU-only test suite never sees it:
one device for everything). That crashed the TRL trainer at step 0 on every GPU. This check
reads the source: a torch factory call without a `device=` argument fails it, so each new
tensor says where it belongs (the model's device, taken from an input tensor, or `CPU` where
the code runs on the controller's CPU by design). The `*_like` and `.new_*` forms take their
input's device and are not factories here. The demo's CPU trainer is exempt: it runs on the
CPU by design.

The tensor code is also run with the model's tensors on the `meta` device (tests/trl and
tests/openrlhf, `*_devices*`), which raises at the first mix, as CUDA does.
"""

from __future__ import annotations

import ast
from pathlib import Path

PLUGIN = Path(__file__).resolve().parents[2] / "plugin" / "gtpo"
FACTORIES = {
    "tensor", "as_tensor", "zeros", "ones", "empty", "full", "arange", "linspace", "eye",
    "rand", "randn", "randint", "randperm",
}  # fmt: skip
EXEMPT = {"demo"}  # the embedded CPU trainer


def factory_calls_without_device(source: str) -> list[tuple[int, str]]:
    """(line, name) of each `torch.<factory>(...)` without a `device=` keyword."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "torch"
            and node.func.attr in FACTORIES
            and not any(k.arg == "device" for k in node.keywords)
        ):
            found.append((node.lineno, f"torch.{node.func.attr}"))
    return found


def test_every_tensor_factory_names_its_device():
    offenders = []
    for path in sorted(PLUGIN.rglob("*.py")):
        if path.relative_to(PLUGIN).parts[0] in EXEMPT:
            continue
        offenders += [
            f"{path.relative_to(PLUGIN.parent)}:{line}: {name}(...) without device="
            for line, name in factory_calls_without_device(path.read_text())
        ]
    assert not offenders, "\n".join(offenders)


def test_the_check_sees_a_missing_device():
    source = (
        "import torch\n"
        "a = torch.zeros(3)\n"
        "b = torch.zeros(3, device=x.device)\n"
        "c = torch.tensor(1.0)\n"
        "d = torch.zeros_like(b)\n"
    )
    assert factory_calls_without_device(source) == [(2, "torch.zeros"), (4, "torch.tensor")]
