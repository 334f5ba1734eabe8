"""The real instruct model's task in the slow suites (TRL and OpenRLHF), built once per run.

With only the paper's system prompt SmolLM2-135M-Instruct never writes the tags, so every reward
and advantage is 0 and λ never fires. Two things every user of a reasoning format has make the
rewards vary within groups here: the assistant turn opens with the reasoning tag (the chat
template prefills `<reasoning>\\n`, as reasoning models' templates prefill `<think>`), and the
system prompt shows one worked example in the format. The questions are the demo's word problems
with one arithmetic step.
"""

from __future__ import annotations

import os
from pathlib import Path

from gtpo.data.prompt import SYSTEM_PROMPT, chat_messages, prefill_template
from gtpo.demo.word_problems import make_word_split

PREFILL = "<reasoning>\n"
G = 4
# Low enough that most completions stay on the example's pattern (so some are right and the
# tags close), high enough that groups disagree.
TEMPERATURE = 0.7


def system_prompt() -> str:
    example = make_word_split(1, 0, steps=(1,), seed=7).train[0]
    return f"{SYSTEM_PROMPT}\n\nExample.\nQuestion: {example.question}\n{example.demonstration()}"


def conversations(n: int) -> list[dict]:
    """`n` chat prompts (system + user) with their numeric labels."""
    system = system_prompt()
    return [
        {"prompt": chat_messages(p.question, system), "label": str(p.answer)}
        for p in make_word_split(n, 0, steps=(1,)).train
    ]


def prefilled_model(prepared: Path, out: Path) -> Path:
    """`prepared`'s model in `out` (weights linked, not copied) with the prefilling template."""
    from transformers import AutoTokenizer

    out.mkdir(parents=True, exist_ok=True)
    for item in prepared.iterdir():
        if item.name.startswith("tokenizer") or item.name == "chat_template.jinja":
            continue
        target = out / item.name
        if not target.exists():
            os.symlink(item, target)
    tokenizer = AutoTokenizer.from_pretrained(prepared)
    tokenizer.chat_template = prefill_template(tokenizer.chat_template, PREFILL)
    tokenizer.save_pretrained(out)
    return out
