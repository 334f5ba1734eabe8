"""Stand-in for vLLM's `AsyncLLMEngine`: transformers `generate` behind the same async surface.

OpenRLHF's real `RolloutRayActor` (trainer/ray/vllm_engine.py), created by its real
`create_vllm_engines`, builds one of these and calls exactly these methods: `generate` (from its
agent executor, which also fetches the reward over HTTP), `collective_rpc("init_process_group" /
"update_weight")` for the weight sync, `sleep` / `wake_up` / `is_sleeping`,
`reset_prefix_cache`, `pause_generation` / `resume_generation` and
`output_processor.get_num_unfinished_requests()`. Everything around the engine is OpenRLHF's.

Kept honest where it is cheap to be: generating or syncing weights while asleep raises (as on
a GPU, where the memory is gone), a weight whose dtype or name does not match the model raises
(as vLLM's WorkerWrap asserts). What it cannot show: vLLM's sampler and its logprobs, paged KV
cache, continuous batching, CUDA memory under sleep mode, tensor parallelism.

If GTPO_TEST_CAPTURE_DIR is set, each completed weight sync saves the engine's weights there
(rollout_weights_<pid>_<n>.pt), so the test can check that trained weights reach the rollout side
(tests/openrlhf/fit_site records each generation with the engine's count of syncs).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


@dataclass
class AsyncEngineArgs:
    model: str
    seed: int = 0
    dtype: str = "bfloat16"
    max_model_len: int | None = None
    tensor_parallel_size: int = 1
    ignored: dict[str, Any] = field(default_factory=dict)

    def __init__(self, model: str, seed: int = 0, dtype: str = "bfloat16", **kwargs: Any):
        self.model, self.seed, self.dtype = model, seed, dtype
        self.max_model_len = kwargs.pop("max_model_len", None)
        self.tensor_parallel_size = kwargs.pop("tensor_parallel_size", 1)
        if self.tensor_parallel_size != 1:
            raise NotImplementedError("vllm stand-in: tensor parallelism needs the real vLLM")
        self.ignored = kwargs  # enforce_eager, gpu_memory_utilization, ...: GPU-only knobs


@dataclass
class CompletionOutput:
    token_ids: list[int]
    text: str
    finish_reason: str
    logprobs: Any = None


@dataclass
class RequestOutput:
    request_id: str
    outputs: list[CompletionOutput]


class AsyncLLMEngine:
    @classmethod
    def from_engine_args(cls, engine_args: AsyncEngineArgs) -> AsyncLLMEngine:
        return cls(engine_args)

    def __init__(self, engine_args: AsyncEngineArgs) -> None:
        torch.manual_seed(engine_args.seed)  # sampling draws from the global generator
        self.dtype = getattr(torch, engine_args.dtype)
        self.tokenizer = AutoTokenizer.from_pretrained(engine_args.model)
        self.model = AutoModelForCausalLM.from_pretrained(engine_args.model, dtype=self.dtype)
        self.model.eval()
        self.params = dict(self.model.named_parameters())
        self.awake = {"weights", "kv_cache"}
        self.unfinished = 0
        self.output_processor = SimpleNamespace(get_num_unfinished_requests=lambda: self.unfinished)
        self._sync_group = None
        self._weights_received = 0
        self._syncs = 0

    # --- generation ---------------------------------------------------------------------------

    async def generate(self, prompt: dict, sampling_params: Any, request_id: str):
        if self.awake != {"weights", "kv_cache"}:
            raise RuntimeError(f"generate() while asleep (awake: {sorted(self.awake)})")
        if getattr(sampling_params, "logprobs", None):
            raise NotImplementedError("vllm stand-in: rollout logprobs need the real vLLM")
        self.unfinished += 1
        try:
            ids = torch.tensor([prompt["prompt_token_ids"]])
            top_k = getattr(sampling_params, "top_k", -1)
            with torch.no_grad():
                out = self.model.generate(
                    ids,
                    attention_mask=torch.ones_like(ids),
                    do_sample=True,
                    temperature=sampling_params.temperature,
                    top_p=sampling_params.top_p,
                    top_k=top_k if top_k and top_k > 0 else 0,
                    max_new_tokens=sampling_params.max_tokens,
                    min_new_tokens=getattr(sampling_params, "min_tokens", 0) or 0,
                    eos_token_id=self.tokenizer.eos_token_id,
                    pad_token_id=self.tokenizer.pad_token_id,
                )
            tokens = out[0, ids.shape[1] :].tolist()
            # Like vLLM: the EOS token is part of the output ids; "stop" if it ended on EOS.
            finish = "stop" if tokens and tokens[-1] == self.tokenizer.eos_token_id else "length"
            text = self.tokenizer.decode(
                tokens, skip_special_tokens=getattr(sampling_params, "skip_special_tokens", True)
            )
            yield RequestOutput(request_id, [CompletionOutput(tokens, text, finish)])
        finally:
            self.unfinished -= 1

    # --- weight sync (what vLLM runs in its workers through OpenRLHF's WorkerWrap) -----------

    async def collective_rpc(self, method: str, args: tuple = ()) -> list[Any]:
        return [getattr(self, f"_rpc_{method}")(*args)]

    def _rpc_init_process_group(
        self, master_address, master_port, rank_offset, world_size, group_name, backend, use_ray
    ) -> None:
        if use_ray:
            raise NotImplementedError("vllm stand-in: --vllm.sync_with_ray is not covered")
        from openrlhf.utils.distributed_util import stateless_init_process_group

        # One worker per engine (no tensor parallelism): its rank in the sync group is the offset.
        self._sync_group = stateless_init_process_group(
            master_address, master_port, rank_offset, world_size, "cpu"
        )

    def _rpc_update_weight(self, name: str, dtype: torch.dtype, shape, empty_cache=False) -> None:
        if "weights" not in self.awake:
            raise RuntimeError(f"update_weight({name}) while the weights are asleep")
        if dtype != self.dtype:
            raise AssertionError(f"mismatch dtype: src {dtype}, dst {self.dtype}")
        weight = torch.empty(shape, dtype=dtype)
        self._sync_group.broadcast(weight, src=0)
        with torch.no_grad():
            self.params[name].copy_(weight)  # KeyError on a name the model does not have
        self._weights_received += 1
        if empty_cache:  # OpenRLHF sets it on the last parameter of a sync
            if self._weights_received != len(self.params):
                raise AssertionError(
                    f"weight sync sent {self._weights_received} of {len(self.params)} parameters"
                )
            self._weights_received = 0
            self._syncs += 1
            capture = os.environ.get("GTPO_TEST_CAPTURE_DIR")
            if capture:
                state = {k: v.detach().clone() for k, v in self.params.items()}
                torch.save(
                    state, os.path.join(capture, f"rollout_weights_{os.getpid()}_{self._syncs}.pt")
                )

    # --- sleep mode and cache control ---------------------------------------------------------

    async def is_sleeping(self) -> bool:
        return not self.awake

    async def sleep(self, level: int = 1) -> None:
        self.awake = set()

    async def wake_up(self, tags: list[str] | None = None) -> None:
        self.awake |= set(tags or ["weights", "kv_cache"])

    async def reset_prefix_cache(self) -> None:
        pass

    async def pause_generation(self, mode: str = "keep") -> None:
        pass

    async def resume_generation(self) -> None:
        pass
