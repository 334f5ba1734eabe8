"""Where the response is in OpenRLHF's query: just past its prompt, up to its end tokens.

OpenRLHF sends ``query = tokenizer.decode(prompt_ids + response_ids, skip_special_tokens=False)``
with the prompt string it started from. A decode round trip need not give that string back: it
can change whitespace (SentencePiece's spaces, ``clean_up_tokenization_spaces``), the Unicode
form (a normalizer's NFC or NFKC: a decomposed ``é`` comes back composed, a full-width digit as
an ASCII one), add special tokens (a second BOS) or drop them. So the prompt is located on a
key that ignores all four; the response starts just past its match.

Without ``prompts``, the response starts after the last assistant header of a chat template, or
is the whole query when it has none (a client that sends completions alone). When a prompt is
given and neither it nor a header is in its query, the response is **not found**
(``Start.NOT_FOUND``): the scorer never scores the query's text then, which would score the
prompt (whose instruction names the format's tags).

Every function here is linear in its input: they run in the event loop for small requests.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass
from enum import Enum

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

# Where the assistant's turn starts in common chat templates; used when no prompt is given or
# it cannot be found in the query. The last occurrence wins.
_ASSISTANT_HEADERS = re.compile(
    r"<\|im_start\|>assistant\s*\n?"
    r"|<\|start_header_id\|>assistant<\|end_header_id\|>\s*"
    r"|<start_of_turn>model\s*\n?"
    r"|<\|assistant\|>\s*"
    r"|<｜Assistant｜>"
    r"|\[/INST\]\s*"
)

# Special tokens a decode round trip may add or drop: ``<|…|>`` and DeepSeek's ``<｜…｜>``
# spellings, SentencePiece's and BERT's. The tags of response formats (``<think>``,
# ``<answer>``) are not among them: they are text the prompt and the response both hold.
_SPECIAL_TOKEN = re.compile(
    r"<\|[^<>|\s]{1,64}\|>|<｜[^<>｜]{1,64}｜>|</?s>|<(?:unk|pad|bos|eos|mask)>"
    r"|\[(?:CLS|SEP|PAD|UNK|MASK)\]"
)
_NON_SPACE = re.compile(r"\S+")
# The prompt is sought this far into the query: its own length twice, and room for what a
# round trip adds before it (BOS tokens). A prompt found later is not the query's prompt.
_SEARCH_SLACK = 4096


class Start(str, Enum):
    """Where the response was found to start (``/v1/score``'s ``response_start``, counted in
    ``gtpo_rs_responses_total``). The values are what the JSON carries."""

    PROMPT = "prompt"  # just past the prompt, as given or as a round trip changed it
    CHAT_HEADER = "chat_header"  # past the last assistant header (no prompt given, or not found)
    WHOLE_QUERY = "whole_query"  # no prompt given and no header: the query is the response
    NOT_FOUND = "not_found"  # a prompt was given; neither it nor a header is in the query

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class Located:
    """A query cut in two: what precedes the response (where a template's prefilled ``<think>``
    is) and the response with its end tokens dropped; ``response`` is None when not found."""

    before: str
    response: str | None
    start: Start


def locate(
    query: str, prompt: str | None, extra_end_tokens: tuple[str, ...] | list[str] = ()
) -> Located:
    """The response in ``query`` (see the module)."""
    start: int | None = None
    how = Start.PROMPT
    if prompt:
        start = prompt_end(query, prompt)
    if start is None:
        headers = list(_ASSISTANT_HEADERS.finditer(query))
        if headers:
            start, how = headers[-1].end(), Start.CHAT_HEADER
        elif prompt:
            return Located(query, None, Start.NOT_FOUND)
        else:
            start, how = 0, Start.WHOLE_QUERY
    return Located(query[:start], strip_end_tokens(query[start:], extra_end_tokens), how)


def extract_response(
    query: str, prompt: str | None, extra_end_tokens: tuple[str, ...] | list[str] = ()
) -> str | None:
    """The model's response inside ``query`` (prompt removed, trailing end tokens dropped), or
    None when a prompt is given and cannot be found."""
    return locate(query, prompt, extra_end_tokens).response


def prompt_end(query: str, prompt: str) -> int | None:
    """Where the response starts in ``query``: just past ``prompt``, matched on the key of
    ``_key`` (whitespace, special tokens and the Unicode form ignored); None when the prompt's
    key does not occur in the key of the query's first ``2 len(prompt) + _SEARCH_SLACK``
    characters."""
    if query.startswith(prompt):
        return len(prompt)
    prompt_key, prompt_ends = _key(prompt)
    if not prompt_key:
        return None
    query_key, ends = _key(query[: 2 * len(prompt) + _SEARCH_SLACK])
    # The first occurrence: a leading duplicated BOS shifts the prompt but does not repeat it.
    hit = query_key.find(prompt_key)
    if hit < 0:
        return None
    return _past(query, ends[hit + len(prompt_key) - 1], prompt[prompt_ends[-1] :])


def _past(query: str, end: int, ignored: str) -> int:
    """Where the response starts: past ``end`` (the prompt's last character the key holds), the
    special tokens and whitespace the prompt ends with (``ignored``, which the key left out) as
    the query spells them: every one of those tokens it holds there, with any whitespace
    around them, and as much whitespace after them as the prompt has (the response's own
    leading whitespace stays)."""
    tokens = [m.group() for m in _SPECIAL_TOKEN.finditer(ignored)]
    spaces = len(ignored) - sum(map(len, tokens))
    while True:
        after = end
        while after < len(query) and query[after].isspace():
            after += 1
        token = _SPECIAL_TOKEN.match(query, after)
        if token is not None and token.group() in tokens:
            tokens.remove(token.group())
            end = token.end()
            continue
        return end + min(after - end, spaces)


def _key(text: str) -> tuple[str, list[int]]:
    """``text`` as the prompt is matched: special tokens and whitespace dropped, every other
    character in its compatibility decomposition (NFKD, one character at a time, so that
    positions map back); with, for each character of the key, the index in ``text`` just past
    the character it came from."""
    parts: list[str] = []
    ends: list[int] = []
    done = 0
    for token in (*_SPECIAL_TOKEN.finditer(text), None):
        stop = len(text) if token is None else token.start()
        segment = text[done:stop]
        if segment.isascii():  # the usual case: no decomposition, runs of non-space at once
            for run in _NON_SPACE.finditer(segment):
                parts.append(run.group())
                first = done + run.start()
                ends.extend(range(first + 1, first + len(run.group()) + 1))
        else:
            for i, char in enumerate(segment, done + 1):
                if not char.isspace():
                    decomposed = _decomposed(char)
                    parts.append(decomposed)
                    ends.extend([i] * len(decomposed))
        if token is not None:
            done = token.end()
    return "".join(parts), ends


@functools.lru_cache(maxsize=4096)
def _decomposed(char: str) -> str:
    # NFKD may decompose to spaces (U+00A0 to " "), which the key drops like any whitespace
    return "".join(unicodedata.normalize("NFKD", char).split())


def strip_end_tokens(text: str, extra_tokens: tuple[str, ...] | list[str] = ()) -> str:
    """Drop trailing whitespace and end-of-turn tokens (repeatedly: '</s><pad><pad>').

    One walk back from the end, copying the text once: a policy that repeats its end token
    (800 KB of '</s>') cost a copy of the whole response per token, 1.1 s for 200,000 of them."""
    tokens = _end_tokens(tuple(extra_tokens))
    end = len(text)
    last = ""  # the token found last: a run repeats one token, so it is tried first
    while True:
        while end and text[end - 1].isspace():
            end -= 1
        if last and text.endswith(last, 0, end):
            end -= len(last)
            continue
        for tok in tokens:
            if text.endswith(tok, 0, end):
                last = tok
                end -= len(tok)
                break
        else:
            return text[:end]


@functools.lru_cache(maxsize=64)
def _end_tokens(extra: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(tok for tok in (*extra, *END_TOKENS) if tok)
