"""`gtpo demo --model`: the demo's trainer and report on a real pretrained instruct model.

The model comes from `gtpo model prepare` (a known name, a hub id or a directory) and keeps its
own tokenizer and chat template. The task is GSM8K-style word problems from templates
(`word_problems.py`), asked with the paper's system instruction; the answer is scored by the
reward server over HTTP like every other run of the project.

How the model first meets the format (docs/demo.md says how this was chosen): a short SFT warm
start on worked solutions written in the paper's format, `<reasoning>` to `</answer>` and the
end-of-turn token. An instruct model of this size never writes the tags from the system prompt
alone (every reward 0, nothing to learn from), and prefilling `<reasoning>` in the template or
showing a worked example in the system prompt still left most completions without the full
format and almost none right. After the warm start, one-step problems are right often enough
that groups disagree, and RL has room to improve.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch

from gtpo.data.prompt import SYSTEM_PROMPT, render_chat
from gtpo.demo.model import Policy
from gtpo.demo.word_problems import WordProblem, WordSplit, make_word_split

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ChatProblem:
    """A word problem as the model is asked it: `prompt` is the chat template's rendering of
    the system instruction and the question, with the assistant turn opened."""

    prompt: str
    answer: int
    solution: str  # the worked solution in the paper's format (the warm start's target)
    kind: str


def chat_problems(problems: list[WordProblem], tokenizer) -> list[ChatProblem]:
    """`problems` rendered with the model's own chat template and the paper's instruction."""
    rendered = []
    for p in problems:
        messages = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": p.question},
        ]
        rendered.append(
            ChatProblem(render_chat(messages, tokenizer), p.answer, p.demonstration(), p.kind)
        )
    return rendered


def worked_solution(problem: ChatProblem, rng: object = None) -> str:
    """The warm start's target for `problem`: its worked solution (the same every time)."""
    return problem.solution


@dataclass(frozen=True)
class ChatSplit:
    train: list[ChatProblem]
    heldout: list[ChatProblem]


def chat_split(tokenizer, n_train: int, n_heldout: int, steps: tuple[int, ...]) -> ChatSplit:
    split: WordSplit = make_word_split(n_train, n_heldout, steps=steps)
    return ChatSplit(chat_problems(split.train, tokenizer), chat_problems(split.heldout, tokenizer))


@dataclass(frozen=True)
class HFPolicySpec:
    """How a worker process loads the policy: a local HF directory (`gtpo model prepare`) and,
    optionally, weights trained from it (a state dict file). Picklable."""

    model_dir: str

    def load(self, state_path: str | None = None, seed: int = 0) -> Policy:
        """The pretrained model (or `state_path`'s weights for it); `seed` is unused (the
        weights are the model's), kept for the tiny model's spec's signature."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(self.model_dir)
        model = AutoModelForCausalLM.from_pretrained(self.model_dir, dtype=torch.float32)
        if state_path is not None:
            model.load_state_dict(torch.load(state_path, weights_only=True))
        model.eval()
        if native_bf16():
            # fp32 weights and optimiser (small updates survive), bf16 matrix products where
            # the CPU has bf16 units: about half the time of a step in fp32 (docs/demo.md).
            model.forward = torch.autocast("cpu", dtype=torch.bfloat16)(model.forward)
        return hf_policy(model, tokenizer)


def native_bf16() -> bool:
    """Whether this CPU multiplies bf16 matrices in hardware (AVX-512 BF16 or AMX). Without,
    bf16 is emulated and several times slower than fp32, so the demo stays in fp32."""
    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(getattr(torch.cpu, name, lambda: False)() for name in checks)


def hf_policy(model, tokenizer) -> Policy:
    """A transformers model and its tokenizer as the demo's Policy. Completions are decoded with
    special tokens kept: the query the server reads ends with the end-of-turn token, as
    OpenRLHF's does."""
    if tokenizer.eos_token_id is None:
        raise ValueError(f"{tokenizer.name_or_path}: the tokenizer has no end-of-turn token")
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    return Policy(
        model=model,
        encode=lambda text: tokenizer(text, add_special_tokens=False)["input_ids"],
        decode=lambda ids: tokenizer.decode(ids, skip_special_tokens=False),
        eos_id=tokenizer.eos_token_id,
        pad_id=pad,
    )
