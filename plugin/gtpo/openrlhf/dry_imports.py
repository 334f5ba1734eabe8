"""Import placeholders for `--dry-run` on a machine without flash-attn or vLLM (a laptop).

OpenRLHF imports both at module level (`models/ring_attn_utils.py`, `trainer/ray/vllm_engine.py`,
`trainer/ppo_utils/samples_generator.py`), and flash-attn does not install without CUDA. A dry
run calls nothing of either: it parses, checks and stops before Ray starts. So, in a dry run
only, each of those packages that this environment lacks is registered as a placeholder whose
every name raises if it is used. A real run never gets them.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from types import ModuleType

# The packages, and the submodules OpenRLHF imports from them.
PACKAGES = {
    "flash_attn": ("flash_attn.bert_padding", "flash_attn.utils", "flash_attn.utils.distributed"),
    "vllm": ("vllm.inputs", "vllm.utils"),
}


class _Absent:
    """A name from a package that is not installed; using it says so."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{self.name} is not installed: --dry-run only checks the command line")


def _placeholder(name: str) -> ModuleType:
    module = ModuleType(name, f"gtpo-openrlhf --dry-run placeholder: {name} is not installed")
    module.__path__ = []  # a package, so that its submodules import
    module.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)

    def absent(attr: str) -> _Absent:
        if attr.startswith("__"):  # __file__, __version__, …: what inspect and others probe
            raise AttributeError(attr)
        return _Absent(f"{name}.{attr}")

    module.__getattr__ = absent
    return module


def register_missing() -> list[str]:
    """Register a placeholder for each package of PACKAGES that cannot be imported; returns
    their names."""
    missing = [name for name in PACKAGES if importlib.util.find_spec(name) is None]
    for name in missing:
        for module in (name, *PACKAGES[name]):
            sys.modules.setdefault(module, _placeholder(module))
    return missing
