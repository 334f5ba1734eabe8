"""Text extraction: the response from OpenRLHF's query, the answer from the response, the reference
from the dataset label.

OpenRLHF sends ``query = tokenizer.decode(prompt_ids + response_ids, skip_special_tokens=False)``
together with the prompt string it started from. A decode round trip can change whitespace (and
some tokenizers add a second BOS), so the prompt is located ignoring whitespace, with chat-template
markers as the fallback. Every function here is linear in its input: they run in the event loop.
"""

from __future__ import annotations

import re

# End-of-turn / end-of-text / padding tokens of common chat templates (Qwen, Llama 2/3, Mistral,
# Gemma, Phi, DeepSeek, GPT-OSS). They are dropped from the end of a response before the format
# check, because "...</answer><|im_end|>" still ends with the answer block.
END_TOKENS: tuple[str, ...] = (
    "<|im_end|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|end_of_text|>",
    "<|endoftext|>",
    "</s>",
    "<end_of_turn>",
    "<eos>",
    "<|end|>",
    "<|return|>",
    "<|im_sep|>",
    "<｜end▁of▁sentence｜>",
    "<|end▁of▁sentence|>",
    "<pad>",
    "<|pad|>",
    "<|finetune_right_pad_id|>",
)

# Where the assistant's turn starts in common chat templates; used only when the prompt cannot be
# found in the query. The last occurrence wins.
_ASSISTANT_MARKERS = re.compile(
    r"<\|im_start\|>assistant\s*\n?"
    r"|<\|start_header_id\|>assistant<\|end_header_id\|>\s*"
    r"|<start_of_turn>model\s*\n?"
    r"|<\|assistant\|>\s*"
    r"|<｜Assistant｜>"
    r"|\[/INST\]\s*"
)

_WS = re.compile(r"\s+")


def _strip_prompt(query: str, prompt: str) -> str | None:
    """The text after ``prompt`` in ``query``, matching the prompt with whitespace ignored.

    Returns None when the prompt's non-whitespace characters do not occur in order in the query.
    """
    if query.startswith(prompt):
        return query[len(prompt) :]
    compact_prompt = _WS.sub("", prompt)
    if not compact_prompt:
        return None
    # The first occurrence: a leading duplicated BOS shifts the prompt but does not repeat it.
    hit = _WS.sub("", query).find(compact_prompt)
    if hit < 0:
        return None
    # Map the end of the hit back to the original query: walk the non-whitespace runs.
    remaining = hit + len(compact_prompt)
    rest = ""
    for run in re.finditer(r"\S+", query):
        if remaining <= len(run.group()):
            rest = query[run.start() + remaining :]
            break
        remaining -= len(run.group())
    # The prompt's trailing whitespace (e.g. "assistant\n") may have been decoded differently.
    return rest.lstrip() if prompt[-1:].isspace() else rest


def strip_end_tokens(text: str, extra_tokens: tuple[str, ...] | list[str] = ()) -> str:
    """Drop trailing whitespace and end-of-turn tokens (repeatedly: '</s><pad><pad>')."""
    tokens = tuple(extra_tokens) + END_TOKENS
    while True:
        stripped = text.rstrip()
        for tok in tokens:
            if tok and stripped.endswith(tok):
                stripped = stripped[: -len(tok)]
                break
        else:
            return stripped
        text = stripped


def extract_response(
    query: str, prompt: str | None, extra_end_tokens: tuple[str, ...] | list[str] = ()
) -> str:
    """The model's response inside ``query`` (prompt removed, trailing end tokens dropped)."""
    response: str | None = None
    if prompt:
        response = _strip_prompt(query, prompt)
    if response is None:
        markers = list(_ASSISTANT_MARKERS.finditer(query))
        response = query[markers[-1].end() :] if markers else query
    return strip_end_tokens(response, extra_end_tokens)


def answer_block(response: str) -> str | None:
    """Content of the last ``<answer>…</answer>`` block, or None when there is none.

    Found with ``rfind`` rather than a lazy regex, which is quadratic on thousands of unclosed
    ``<answer>`` tags.
    """
    close = response.rfind("</answer>")
    if close < 0:
        return None
    start = response.rfind("<answer>", 0, close)
    return None if start < 0 else response[start + len("<answer>") : close]


def last_braced(text: str, command: str) -> str | None:
    """Content of the last ``\\command{…}`` in ``text`` with balanced braces, else None.

    Also accepts the brace-less ``\\boxed 5`` form (one token after a space).
    """
    start = text.rfind(command)
    while start >= 0:
        i = start + len(command)
        if i < len(text) and text[i] == "{":
            depth = 0
            for j in range(i, len(text)):
                ch = text[j]
                if ch == "{":
                    depth += 1
                elif ch == "}":
                    depth -= 1
                    if depth == 0:
                        return text[i + 1 : j]
            # Unbalanced: try an earlier occurrence.
        elif i < len(text) and text[i] == " ":
            token = text[i + 1 :].split(None, 1)
            if token:
                return token[0].rstrip("$.")
        start = text.rfind(command, 0, start)
    return None


_MATH_DELIMS = (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))


def unwrap_math(text: str) -> str:
    """Remove ``\\boxed{}``/``\\fbox{}`` (keeping the last one's content) and math delimiters."""
    text = text.strip()
    for command in ("\\boxed", "\\fbox"):
        if command in text:
            inner = last_braced(text, command)
            if inner is not None:
                text = inner.strip()
    changed = True
    while changed:
        changed = False
        for left, right in _MATH_DELIMS:
            long_enough = len(text) >= len(left) + len(right)
            if long_enough and text.startswith(left) and text.endswith(right):
                text = text[len(left) : len(text) - len(right)].strip()
                changed = True
    return text


def extract_answer(response: str) -> str | None:
    """The answer written in the response's last ``<answer>`` block, unwrapped; None if absent."""
    block = answer_block(response)
    if block is None:
        return None
    return unwrap_math(block)


_GSM8K = re.compile(r"####\s*(.+)")


def extract_reference(label: object) -> str | None:
    """The reference answer in a dataset label, detected automatically.

    GSM8K solutions end with ``#### 72``; MATH solutions put the answer in the last
    ``\\boxed{…}``; anything else is taken as the bare answer (``72``, ``\\frac{1}{2}``, ``(1,2)``).
    """
    if label is None or isinstance(label, bool):
        return None
    if isinstance(label, int | float):
        text = repr(label) if isinstance(label, float) else str(label)
    elif isinstance(label, str):
        text = label
    else:
        return None
    if "####" in text:
        hits = _GSM8K.findall(text)
        text = hits[-1] if hits else ""
    elif "\\boxed" in text or "\\fbox" in text:
        return unwrap_math(text) or None
    text = unwrap_math(text)
    return text or None
