"""Where the response starts: just past its prompt, whatever a tokenizer round trip changed (the
Unicode form, whitespace, special tokens), with the project's real tokenizers over every prompt
format the docs show; never the prompt's text when the prompt cannot be found."""

from __future__ import annotations

import asyncio
import logging
import unicodedata

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reward_server.checker.response import Start, locate, strip_end_tokens
from reward_server.protocol import formatted
from reward_server.service.app import create_app
from reward_server.service.settings import Settings

RESPONSE = formatted("\n6 times 7 is 42.\n", "\n42\n")
# A question holding what round trips change: accents (composed or not), a full-width digit, a
# ligature, a fraction, a no-break space, an ideographic space, an ellipsis, Greek and CJK.
QUESTION = "Combien font 6 × 7 ? Café, naïve, ﬁnal, ½, ２\u00a0fois\u3000…: α数"


# ----------------------------------------------------------------- the real tokenizers


def _smollm2(real_model):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(real_model.path)


def _smollm2_nfkc(real_model):
    """SmolLM2's tokenizer with a SentencePiece-style NFKC normalizer (Llama 2, Mistral and T5
    normalize so): its decode gives the prompt back composed and compatibility-folded."""
    from tokenizers import Tokenizer, normalizers
    from transformers import PreTrainedTokenizerFast

    original = _smollm2(real_model)
    backend = Tokenizer.from_str(original.backend_tokenizer.to_str())
    backend.normalizer = normalizers.NFKC()
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, eos_token="<|im_end|>", chat_template=original.chat_template
    )


def _prompts(tokenizer) -> dict[str, str]:
    """Every prompt format the docs show (``gtpo data --format``, the demo's tasks), for one
    question, rendered with ``tokenizer``'s chat template where the format has one."""
    from gtpo.data.prompt import build_prompt, chat_messages, prefill_template

    template = tokenizer.chat_template
    return {
        # messages: rendered by the trainer with the model's template; chat: rendered now
        "chat": build_prompt(QUESTION, "chat", tokenizer),
        "plain": build_prompt(QUESTION, "plain"),
        # a template whose generation prompt opens the reasoning block (prefill)
        "prefilled": tokenizer.apply_chat_template(
            chat_messages(QUESTION),
            chat_template=prefill_template(template, "<reasoning>\n"),
            tokenize=False,
            add_generation_prompt=True,
        ),
    }


# Prompt formats whose text has an assistant header: found without ``prompts`` too.
WITH_HEADER = {"chat", "prefilled"}


def _openrlhf_query(tokenizer, prompt: str, response: str) -> tuple[str, str]:
    """(query, the response as the round trip gives it back): OpenRLHF tokenizes the prompt
    (vLLM, special tokens added), generates the response's ids and the end token, and decodes
    them all with special tokens kept."""
    prompt_ids = tokenizer(prompt)["input_ids"]
    response_ids = [*tokenizer(response, add_special_tokens=False)["input_ids"]]
    response_ids.append(tokenizer.eos_token_id)
    query = tokenizer.decode(prompt_ids + response_ids, skip_special_tokens=False)
    return query, strip_end_tokens(tokenizer.decode(response_ids, skip_special_tokens=False))


@pytest.mark.parametrize("which", ["smollm2", "smollm2_nfkc"])
def test_the_response_is_found_exactly_for_every_documented_prompt_format(real_model, which):
    tokenizer = {"smollm2": _smollm2, "smollm2_nfkc": _smollm2_nfkc}[which](real_model)
    for name, prompt in _prompts(tokenizer).items():
        response = RESPONSE.removeprefix("<reasoning>") if name == "prefilled" else RESPONSE
        query, expected = _openrlhf_query(tokenizer, prompt, response)
        # the prompt as the dataset holds it, as a decomposed copy of it, as NFKC folds it
        for sent in {prompt, unicodedata.normalize("NFD", prompt)}:
            located = locate(query, sent)
            assert (located.response, located.start) == (expected, Start.PROMPT), (name, sent)
        without = locate(query, None)
        if name in WITH_HEADER:
            # past the header: a template's prefilled tag is then read as the response's own
            prefill = "<reasoning>\n" if name == "prefilled" else ""
            assert (without.response, without.start) == (prefill + expected, Start.CHAT_HEADER)
        else:  # a plain prompt cannot be told from a response: documented, prompts required
            assert without.start == Start.WHOLE_QUERY, name
    if which == "smollm2_nfkc":  # the round trip did change the prompt
        query, _ = _openrlhf_query(tokenizer, _prompts(tokenizer)["plain"], RESPONSE)
        assert not query.startswith(_prompts(tokenizer)["plain"])


def test_the_demos_tokenizer_and_prompts() -> None:
    """The demo's own BPE and its arithmetic prompts (``3+4-2=``), its queries decoded as the
    demo decodes them (special tokens kept, the end token last)."""
    from gtpo.demo.task import clean_completion, corpus, make_split
    from gtpo.demo.tokenizer import EOS, build_tokenizer

    split = make_split(40, 8)
    tokenizer = build_tokenizer(corpus(split.train))
    for problem in split.heldout:
        completion = clean_completion(problem, "short")
        ids = tokenizer.encode(problem.prompt).ids + tokenizer.encode(completion).ids
        query = tokenizer.decode([*ids, tokenizer.token_to_id(EOS)], skip_special_tokens=False)
        located = locate(query, problem.prompt)
        assert (located.response, located.start) == (completion, Start.PROMPT)


# ----------------------------------------------------------------- the class of round trips

_CHARS = [
    *"abcxyz ABC 0123456789 .,:;?!'\"()+-=*/\n\t",
    "é",
    "e\u0301",
    "ñ",
    "n\u0303",
    "½",
    "２",
    "ﬁ",
    "Å",
    "\u212b",  # the angstrom sign, Å after NFC
    "\u00a0",
    "\u3000",
    "…",
    "α",
    "数",
    "<|im_end|>",
    "<|im_start|>",
    "<s>",
]
_ROUND_TRIPS = {
    "as is": lambda p: p,
    "NFC": lambda p: unicodedata.normalize("NFC", p),
    "NFD": lambda p: unicodedata.normalize("NFD", p),
    "NFKC": lambda p: unicodedata.normalize("NFKC", p),
    "spaces": lambda p: " ".join(p.split()),
    "newlines as spaces": lambda p: p.replace("\n", " "),
    "a second BOS": lambda p: "<|begin_of_text|>" + p,
    "special tokens dropped": lambda p: p.replace("<|im_end|>", "").replace("<s>", ""),
    "space before special tokens": lambda p: p.replace("<|im_start|>", " <|im_start|>"),
}


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    before=st.lists(st.sampled_from(_CHARS), max_size=20).map("".join),
    after=st.lists(st.sampled_from(_CHARS), max_size=20).map("".join),
    round_trip=st.sampled_from(sorted(_ROUND_TRIPS)),
    ending=st.sampled_from(["", "\n", "<|im_start|>assistant\n", "<|im_end|>"]),
    answer=st.integers(0, 10**6),
)
def test_a_prompt_changed_as_round_trips_change_it_is_found(
    before, after, round_trip, ending, answer
):
    prompt = before + "Question" + after + ending  # one word at least: whitespace locates nothing
    response = formatted("r", str(answer))
    query = _ROUND_TRIPS[round_trip](prompt) + response + "<|im_end|>"
    located = locate(query, prompt)
    assert (located.response, located.start) == (response, Start.PROMPT)


@settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=[*HealthCheck])
@given(
    prompt=st.lists(st.sampled_from(_CHARS), min_size=1, max_size=40).map("".join),
    answer=st.integers(0, 10**6),
)
def test_a_prompt_not_in_its_query_is_never_scored(prompt, answer):
    """A prompt that is not in the query, a query without an assistant header: the response
    is not found, and nothing of the query is returned as one."""
    prompt = "Answer in <reasoning> and <answer> tags. " + prompt + " #"  # '#' is not in the query
    query = "Answer in <reasoning> and <answer> tags.\n" + formatted("r", str(answer))
    located = locate(query, prompt)
    assert (located.response, located.start) == (None, Start.NOT_FOUND)


# ----------------------------------------------------------------- the service


def _post(path: str, body: dict, app=None) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app or create_app(Settings(verify_workers=1)))
        async with httpx.AsyncClient(transport=transport, base_url="http://rs") as client:
            return await client.post(path, json=body)

    return asyncio.run(go())


def test_a_prompt_in_another_unicode_form_is_found_and_the_response_alone_is_scored() -> None:
    """The project's plain prompt (its instruction names the tags), sent decomposed while the
    query holds it composed: a right answer scored 1.5 (several_answer_blocks), and so did a
    wrong one and a response without any block."""
    from gtpo.data.prompt import build_prompt

    prompt = build_prompt("Combien font 6 × 7 ? Réponse en café.", "plain")
    responses = [formatted("r", "42"), formatted("r", "41"), "I do not know."]
    body = {
        "query": [prompt + r for r in responses],
        "prompts": [unicodedata.normalize("NFD", prompt)] * 3,
        "labels": ["42"] * 3,
    }
    results = _post("/v1/score", body).json()["results"]
    assert [r["reward"] for r in results] == [20.0, 10.0, 0.0]
    assert [r["response"] for r in results] == responses
    assert {r["response_start"] for r in results} == {"prompt"}


def test_a_prompt_that_is_not_found_scores_nothing_is_counted_and_logged_once(caplog) -> None:
    app = create_app(Settings(verify_workers=1))
    body = {
        "query": ["A plain prompt naming <answer> tags\n" + formatted("r", "42")] * 3,
        "prompts": ["Another prompt\n"] * 3,
        "labels": ["42"] * 3,
    }
    with caplog.at_level(logging.WARNING, logger="reward_server.service.routes"):
        results = [_post("/v1/score", body, app).json()["results"] for _ in range(2)]
        rewards = _post("/get_reward", body, app).json()["rewards"]
    for r in results[0]:
        assert (r["response"], r["response_start"], r["reason"]) == (
            "",
            "not_found",
            "response_not_found",
        )
        assert (r["format_score"], r["format_reason"], r["reward"]) == (
            0.0,
            "response_not_found",
            0.0,
        )
    assert rewards == [0.0] * 3
    lines = [r for r in caplog.records if "responses not found" in r.getMessage()]
    assert len(lines) == 1 and "3 of 3 responses not found: prompts[0]" in lines[0].getMessage()
    metrics = asyncio.run(_get(app, "/metrics"))
    assert 'gtpo_rs_responses_total{start="not_found"} 9.0' in metrics


async def _get(app, path: str) -> str:
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://rs"
    ) as client:
        return (await client.get(path)).text
