"""Reward calls through an outage: OpenRLHF's own client, and GTPO's retrying one (the rollout
actors' `gtpo.reward_client.AsyncRewardClient`, built by `rollout_reward_client`).

Real reward servers on 127.0.0.1 (`gtpo.local_reward_server.LocalRewardServer`, the same
`python -m reward_server` a user starts), real OpenRLHF executor classes. Only the vLLM
engine is scripted (it needs a GPU): it returns fixed completion tokens. The end-to-end version
(a 10 s outage inside PPOTrainer.fit) is in test_orl_fit.py.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from types import SimpleNamespace

import pytest

agent = pytest.importorskip("openrlhf.utils.agent")

from gtpo.local_reward_server import LocalRewardServer  # noqa: E402
from gtpo.openrlhf.rewards import rollout_reward_client, root_message  # noqa: E402
from gtpo.reward_client import RewardServerError  # noqa: E402

PROMPT = "What is 3+4?\n"
RIGHT = "<reasoning>3+4=7</reasoning><answer>7</answer>"


def payload(response: str = RIGHT, label: str = "7") -> dict:
    return {"query": [PROMPT + response], "prompts": [PROMPT], "labels": [label]}


def dead_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}/get_reward"


@pytest.fixture
def late_server(tmp_path):
    """A reward server whose port is known now but which starts only 3 s later."""
    server = LocalRewardServer(tmp_path / "rs.log")

    def start_later() -> None:
        time.sleep(3)
        server.start()

    thread = threading.Thread(target=start_later)
    thread.start()
    try:
        yield server
    finally:
        thread.join()
        server.stop()


def test_retry_waits_for_a_server_that_comes_up(late_server, caplog):
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="gtpo"):
        client = rollout_reward_client([late_server.url + "/get_reward"], 60)
        answer = asyncio.run(client.get_reward(payload()))
    assert answer["rewards"] == [20.0]  # full format + correct, the paper's scale
    assert time.monotonic() - started >= 3
    assert "unreachable" in caplog.text and "answers again after" in caplog.text


def test_retry_gives_up_after_the_timeout_naming_the_url():
    url = dead_url()
    started = time.monotonic()
    with pytest.raises(RewardServerError) as error:
        asyncio.run(rollout_reward_client([url], 2.0).get_reward(payload()))
    elapsed = time.monotonic() - started
    assert 1.0 <= elapsed <= 4.0
    assert url in str(error.value) and "raise --gtpo.reward_timeout" in str(error.value)


def test_a_refused_request_fails_at_once(tmp_path):
    with LocalRewardServer(tmp_path / "rs.log") as server:
        server.wait()
        bad = {"query": ["q"], "prompts": ["p"]}  # no labels: the server answers 422
        started = time.monotonic()
        client = rollout_reward_client([server.url + "/get_reward"], 60)
        with pytest.raises(RewardServerError, match="refused the request: HTTP 422"):
            asyncio.run(client.get_reward(bad))
        assert time.monotonic() - started < 5  # not retried for 60 s


class ScriptedEngine:
    """The vLLM engine's `generate` as the executor calls it (vLLM needs a GPU)."""

    async def generate(self, prompt_ids, params, multi_modal_data=None):
        output = SimpleNamespace(token_ids=[1, 2, 3], finish_reason="stop", logprobs=None)
        return SimpleNamespace(outputs=[output])


def word_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "a": 1, "b": 2, "c": 3}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>")


def execute(executor) -> dict:
    params = SimpleNamespace(max_tokens=16, logprobs=None)
    return asyncio.run(
        executor.execute(PROMPT, "7", params, 64, word_tokenizer(), ScriptedEngine())
    )


def test_openrlhf_executor_drops_the_reward_when_the_server_is_down():
    """What GTPO guards against: OpenRLHF retries 5 times 1 s apart, then returns the
    sample with reward None (logged at INFO only) for the trainer to fail on later."""
    started = time.monotonic()
    output = execute(agent.SingleTurnAgentExecutor(remote_rm_url=dead_url()))
    assert output["reward"] is None and output["scores"] is None
    assert 4 <= time.monotonic() - started < 10


def test_gtpo_executor_stops_instead_of_dropping_the_reward():
    pytest.importorskip("deepspeed")  # seam.py imports the training side of OpenRLHF
    from gtpo.openrlhf.rollout_actor import RetryingRewardExecutor

    url = dead_url()
    with pytest.raises(RewardServerError, match="did not answer") as error:
        execute(RetryingRewardExecutor(url, reward_timeout=1.5))
    assert url in str(error.value)


@pytest.fixture
def two_servers(tmp_path):
    with (
        LocalRewardServer(tmp_path / "a.log") as a,
        LocalRewardServer(tmp_path / "b.log") as b,
    ):
        a.wait()
        b.wait()
        yield a, b


def test_gtpo_executor_shares_the_load_over_every_server(two_servers):
    """64 concurrent samples through one rollout actor's executor with two live servers in
    --reward.remote_url: each server gets half of the requests (each request starts at the next
    server), and every sample gets the reward its text earns."""
    pytest.importorskip("deepspeed")
    from gtpo.openrlhf.rollout_actor import RetryingRewardExecutor
    from gtpo.reward_client import request_count

    a, b = two_servers
    executor = RetryingRewardExecutor(
        [a.url + "/get_reward", b.url + "/get_reward"], reward_timeout=30
    )
    params = SimpleNamespace(max_tokens=16, logprobs=None)

    async def rollout() -> list[dict]:
        tokenizer = word_tokenizer()
        engine = ScriptedEngine()
        return await asyncio.gather(
            *(executor.execute(PROMPT, "7", params, 64, tokenizer, engine) for _ in range(64))
        )

    outputs = asyncio.run(rollout())
    assert [o["reward"] for o in outputs] == [[0.0]] * 64  # "a b c": no format, no answer
    assert request_count(a.url) == request_count(b.url) == 32


def test_root_message_unwraps_ray_task_errors():
    inner = RewardServerError("reward server http://x did not answer")
    middle = RuntimeError("ray::RolloutRayActor.generate_responses() ...")
    middle.cause = inner
    outer = RuntimeError("ray::PPOTrainer.fit() ...")
    outer.cause = middle
    assert root_message(outer) == "reward server http://x did not answer"


def test_the_launcher_hands_the_token_from_its_environment_to_the_rollout_actors(
    tmp_path, monkeypatch
):
    """gtpo-openrlhf reads GTPO_RS_API_TOKEN (as it reads the W&B key) and its rollout actors
    send it as Authorization: Bearer to a server that requires it; --reward.remote_url carries
    no ?token=, which the job's command line, Ray's dashboard and access logs would show."""
    pytest.importorskip("deepspeed")
    from openrlhf.trainer.ray import vllm_engine

    from gtpo.openrlhf.__main__ import installed
    from gtpo.openrlhf.flags import parse_gtpo_flags
    from gtpo.openrlhf.rollout_actor import RetryingRewardExecutor

    monkeypatch.setenv("GTPO_RS_API_TOKEN", "s3cret")  # the launcher's and the server's
    with installed(parse_gtpo_flags([])[0]):
        token = vllm_engine.RolloutRayActor.extra["reward_token"]
    assert token == "s3cret"
    with LocalRewardServer(tmp_path / "rs.log") as server:
        server.wait()
        url = server.url + "/get_reward"
        assert execute(RetryingRewardExecutor(url, 30, reward_token=token))["reward"] == [0.0]
        with pytest.raises(RewardServerError, match="HTTP 401"):
            execute(RetryingRewardExecutor(url, 30))
