"""A real reward server on 127.0.0.1 and tiny local models whose samples are known in law.

The model is a Llama built from a config (no download) with every transformer block zeroed, so
the residual stream is the last token's embedding: with one-hot embeddings and lm_head rows set
to log-probabilities, its next-token distribution at temperature 1 is a Markov chain we choose.
It answers ``<reasoning> think </reasoning> <answer> A </answer>`` with A drawn from a given law,
or the same in another response format (``LAYOUTS``).
"""

from __future__ import annotations

import itertools
import json
import math
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gtpo.local_reward_server import free_port

SPECIAL = ["[PAD]", "[UNK]", "</s>"]
ANSWERS = ["1/2", "0.5", "3", "\\frac{1}{2}"]
CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}ASSISTANT{% endif %}"
)


@dataclass(frozen=True)
class Layout:
    """How a tiny model lays out its completion: the tokens before its answer, the answer
    token's spelling, the tokens after it, and what the chat template puts after ASSISTANT."""

    before: tuple[str, ...]
    answer: str  # "{}" is the answer
    after: tuple[str, ...]
    prefill: str = ""


LAYOUTS = {
    "paper": Layout(("<reasoning>", "think", "</reasoning>", "<answer>"), "{}", ("</answer>",)),
    # DeepSeek-R1 distills: the template opens the think block; the answer is boxed after it
    "think_prefilled": Layout(("think", "</think>"), "\\boxed{{{}}}", (), prefill="<think>"),
    "think": Layout(("<think>", "think", "</think>"), "\\boxed{{{}}}", ()),
    # Qwen2.5-Math: the working, then the boxed answer ("think" would hedge the box here)
    "boxed": Layout(("work",), "\\boxed{{{}}}", ()),
}


@pytest.fixture(scope="session")
def reward_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``python -m reward_server`` on a free loopback port, ready (``/readyz``) before use."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GTPO_RS_")}
    env.update({"GTPO_RS_VERIFY_WORKERS": "1", "GTPO_RS_LOG_LEVEL": "warning"})
    log = tmp_path_factory.mktemp("reward") / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "reward_server", "--host", "127.0.0.1", "--port", str(port)],
            env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            if proc.poll() is not None:
                pytest.fail(f"reward server exited early:\n{log.read_text()}")
            try:
                with urllib.request.urlopen(url + "/readyz", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"reward server not ready in 90 s:\n{log.read_text()}")
            time.sleep(0.2)
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def build_tokenizer(path: Path, words: list[str], prefill: str = "") -> None:
    """Word-level tokenizer: the chain's words, the answers, everything else [UNK]."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(words)}
    core = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core, unk_token="[UNK]", pad_token="[PAD]", eos_token="</s>"
    )
    tok.chat_template = CHAT_TEMPLATE.replace(
        "ASSISTANT", f"ASSISTANT\n{prefill}\n" if prefill else "ASSISTANT"
    )
    tok.save_pretrained(path)


def build_markov_model(path: Path, answer_law: dict[str, float], layout: str = "paper") -> Path:
    """Save a tiny Llama + tokenizer to ``path`` that writes ``LAYOUTS[layout]`` with its answer
    drawn from ``answer_law`` (probabilities over `ANSWERS`) and then stops."""
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    shape = LAYOUTS[layout]
    spelled = {a: shape.answer.format(a) for a in ANSWERS}
    chain = [*shape.before, *shape.after] + ([shape.prefill] if shape.prefill else [])
    vocab = SPECIAL + chain + list(spelled.values())
    index = {tok: i for i, tok in enumerate(vocab)}
    # 2 heads of 32: the smallest head size vLLM's CPU attention supports (tests/eval/
    # test_eval_vllm.py samples these models with it).
    hidden = 64
    config = LlamaConfig(
        vocab_size=len(vocab), hidden_size=hidden, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=256,
        pad_token_id=0, bos_token_id=None, eos_token_id=index["</s>"],
        tie_word_embeddings=False,
    )  # fmt: skip
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    steps = list(shape.before)
    law: dict[str, dict[str, float]] = {tok: {steps[0]: 1.0} for tok in vocab}  # the prompt
    law.update({a: {b: 1.0} for a, b in itertools.pairwise(steps)})
    law[steps[-1]] = {spelled[a]: p for a, p in answer_law.items()}
    ending = [*shape.after, "</s>"]
    law.update({spelled[a]: {ending[0]: 1.0} for a in ANSWERS})
    law.update({a: {b: 1.0} for a, b in itertools.pairwise(ending)})
    with torch.no_grad():
        for layer in model.model.layers:  # zero blocks: the residual is the token embedding
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        model.model.embed_tokens.weight.zero_()
        model.model.embed_tokens.weight[:, : len(vocab)] = torch.eye(len(vocab))
        model.model.norm.weight.fill_(1.0)
        # RMSNorm turns the one-hot e_i into sqrt(hidden)·e_i: scale the logits back.
        head = torch.full((len(vocab), hidden), -40.0 / math.sqrt(hidden))
        for tok, nxt in law.items():
            head[:, index[tok]] = -40.0 / math.sqrt(hidden)
            for target, p in nxt.items():
                if p > 0:
                    head[index[target], index[tok]] = math.log(p) / math.sqrt(hidden)
        model.lm_head.weight.copy_(head)
    model.generation_config = GenerationConfig(
        eos_token_id=index["</s>"], pad_token_id=0, do_sample=True
    )
    model.save_pretrained(path)
    build_tokenizer(path, vocab, shape.prefill)
    (path / "law.json").write_text(json.dumps(answer_law))
    return path


@pytest.fixture(scope="session")
def markov_model():
    """`build_markov_model` for tests (conftest is not importable under importlib mode)."""
    return build_markov_model
