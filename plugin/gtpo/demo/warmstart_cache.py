"""`gtpo demo`'s warm starts, kept between runs and keyed by everything that determines them.

The warm start does not depend on the RL settings, yet it is a quick run's largest phase: 22 of
the tiny model's 41 seconds on 2 cores. A run that finds a warm start made from the same
starting weights, demonstrations, settings, code and numerics loads it instead of training it
again. Its key hashes:

- the starting weights: the tiny model's tokenizer and seed (its initialisation is seeded), or
  the content of every file of a real model's directory;
- the demonstrations: the training problems and the function that writes their targets;
- the SFT settings: steps, batch size, learning rate and seed;
- the code that computes it: the source of the demo's modules it runs;
- this machine's numerics: its CPU (model and instruction sets: the kernels torch picks), torch's
  version, its thread count and whether bf16 is native (`gtpo.demo.real.native_bf16`: a real
  model's forward runs in bf16 only where it is). A cache folder shared by several machines
  (a network home) keeps one entry per kind of machine.

So a hit holds the weights a fresh run would compute here, bit for bit; a change to any of
these is a miss, never a stale start (tests/demo/test_demo_warmstart_cache.py). The cache is a
folder of ``<key>.pt`` files (the weights and the loss of each step): ``$GTPO_CACHE_DIR``, else
``$XDG_CACHE_HOME/gtpo``, else ``~/.cache/gtpo``, with ``warm-starts/`` below. A real model's
entry is its fp32 weights (about 540 MB for SmolLM2-135M); ``gtpo demo --no-cache`` neither
reads nor writes it, and deleting the folder is always safe.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import logging
import os
import platform
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

log = logging.getLogger(__name__)

CACHE_ENV = "GTPO_CACHE_DIR"


def default_folder() -> Path:
    """Where `gtpo demo` keeps its warm starts unless told otherwise."""
    if os.environ.get(CACHE_ENV):
        root = Path(os.environ[CACHE_ENV])
    elif os.environ.get("XDG_CACHE_HOME"):
        root = Path(os.environ["XDG_CACHE_HOME"]) / "gtpo"
    else:
        root = Path.home() / ".cache" / "gtpo"
    return root / "warm-starts"


def source_digest(modules: Iterable[str]) -> str:
    """The named modules' source files, hashed: a change to the code is another warm start."""
    digest = hashlib.sha256()
    for name in modules:
        digest.update(Path(inspect.getfile(importlib.import_module(name))).read_bytes())
    return digest.hexdigest()


def folder_digest(folder: Path) -> str:
    """Every file under ``folder`` (a real model's weights, config and tokenizer), by name and
    content."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(folder)).encode() + b"\0")
        with path.open("rb") as file:
            for block in iter(lambda: file.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def _cpu() -> str:
    """The CPU's model and instruction-set flags (Linux's /proc/cpuinfo), else its platform
    name."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor() or platform.machine()
    wanted = [line for line in lines if line.startswith(("model name", "flags"))]
    return "\n".join(dict.fromkeys(wanted))


def key(parts: dict[str, Any]) -> str:
    """The cache key of a warm start determined by ``parts`` (JSON-able values; anything else
    by its ``repr``) and by this machine's numerics."""
    from gtpo.demo.real import native_bf16

    numerics = {
        "cpu": _cpu(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "native_bf16": native_bf16(),
    }
    text = json.dumps({**parts, "numerics": numerics}, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class WarmStart:
    state_dict: dict[str, torch.Tensor]
    losses: list[float]


def load(folder: Path, digest: str) -> WarmStart | None:
    """The warm start stored under ``digest``, or None. An entry that cannot be read (cut
    short by a full disk, written by another torch) counts as none and is made again."""
    path = folder / f"{digest}.pt"
    if not path.is_file():
        return None
    try:
        entry = torch.load(path, weights_only=True)
        return WarmStart(entry["state_dict"], [float(x) for x in entry["losses"]])
    except Exception as err:
        log.warning("warm start cache: %s cannot be read (%s); training it again", path, err)
        return None


def store(folder: Path, digest: str, warm: WarmStart) -> Path:
    """Write the entry whole or not at all (a temporary file renamed into place): two demos
    storing the same key at once leave one complete file."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{digest}.pt"
    fd, temporary = tempfile.mkstemp(dir=folder, suffix=".part")
    try:
        with os.fdopen(fd, "wb") as file:
            torch.save({"state_dict": warm.state_dict, "losses": warm.losses}, file)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path
