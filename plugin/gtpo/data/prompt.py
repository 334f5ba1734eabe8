"""The paper's system instruction and the three prompt formats ``gtpo data`` writes.

- ``messages`` (default): ``[{"role": "system", ...}, {"role": "user", ...}]``, rendered later by
  the trainer (OpenRLHF ``--apply_chat_template``) or by ``gtpo eval`` with the model's template.
- ``chat``: the same messages rendered now with a tokenizer's chat template (a string ending with
  the assistant turn's header), for tools that take the prompt as is.
- ``plain``: instruction and question as plain text, for base models without a chat template.
"""

from __future__ import annotations

import json
import logging
from typing import Any

log = logging.getLogger(__name__)

# The system instruction of the authors' public code (dataset.system_instruction in
# train_model.py of github.com/winstonsmith1897/GTPO): reasoning and answer in tagged blocks,
# which is what the reward server's format score checks.
SYSTEM_PROMPT = (
    "You are a helpful assistant for solving problems. Given a question, first think step by "
    "step between <reasoning> and </reasoning>. Then, give the final answer between <answer> "
    "and </answer>."
)

FORMATS = ("messages", "chat", "plain")


def chat_messages(question: str, system: str = SYSTEM_PROMPT) -> list[dict[str, str]]:
    """System instruction + the question as the user turn."""
    return [{"role": "system", "content": system}, {"role": "user", "content": question}]


def render_chat(messages: list[dict[str, str]], tokenizer: Any) -> str:
    """Apply ``tokenizer``'s chat template with the assistant turn opened.

    Some templates (Gemma's, for one) refuse a system role; then the instruction goes in front
    of the user turn, which is what those models are trained to read.
    """
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError(
            "this tokenizer has no chat template: use --format plain (base model) or "
            "--format messages"
        )
    try:
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    except Exception as err:  # jinja2 TemplateError and friends: the template rejected a role
        if messages[0]["role"] != "system":
            raise
        log.warning("chat template refused the system role (%s): merged into the user turn", err)
        merged = [
            {"role": "user", "content": messages[0]["content"] + "\n\n" + messages[1]["content"]}
        ]
        return tokenizer.apply_chat_template(merged, tokenize=False, add_generation_prompt=True)


def prefill_template(chat_template: str, prefill: str) -> str:
    """`chat_template` whose generation prompt ends with `prefill` (e.g. ``"<reasoning>\\n"``).

    The assistant turn then starts inside the reasoning block, as reasoning models' templates
    open it with ``<think>``: the model continues from the tag instead of having to produce it.
    Every chat template renders the generation prompt last, so the prefill is appended after it.
    """
    literal = json.dumps(prefill, ensure_ascii=False)  # a string literal Jinja reads back exactly
    return chat_template + "{% if add_generation_prompt %}{{ " + literal + " }}{% endif %}"


def build_prompt(
    question: str, fmt: str = "messages", tokenizer: Any = None, system: str = SYSTEM_PROMPT
) -> str | list[dict[str, str]]:
    """The prompt of one question in format ``fmt`` (see the module docstring)."""
    if fmt == "messages":
        return chat_messages(question, system)
    if fmt == "chat":
        if tokenizer is None:
            raise ValueError("--format chat needs --tokenizer PATH (the model's tokenizer)")
        return render_chat(chat_messages(question, system), tokenizer)
    if fmt == "plain":
        return f"{system}\n\n{question}\n"
    raise ValueError(f"unknown prompt format {fmt!r}: choose one of {', '.join(FORMATS)}")
