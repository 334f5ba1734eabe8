"""The one reward-server client (gtpo.reward_client) against scripted HTTP servers on 127.0.0.1:
retries with backoff on 5xx, no retry on a refused request, the bearer token, input order,
rotation and failover over several servers, and connection reuse (counted on the server side).

The scripted servers stand in for failures a real reward server cannot be made to produce on
demand (a 503 then a recovery); the client's happy path against the real server is covered by
tests/demo, tests/eval and tests/trl.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from gtpo.local_reward_server import check_loopback
from gtpo.reward_client import (
    AsyncRewardClient,
    Retryable,
    RewardClient,
    RewardServerError,
    ServerRotation,
    retrying,
    server_urls,
)
from reward_server.protocol import NON_VOTING, Reason, is_correct


class Scripted(BaseHTTPRequestHandler):
    """Answers POST /get_reward: ``fail_first`` times with ``fail_status``, then scores every
    query as reward = its length (so the order of results is checkable). HTTP/1.1 keep-alive,
    so a client may reuse a connection; ``connections`` counts the TCP connections accepted."""

    protocol_version = "HTTP/1.1"
    fail_status = 503
    fail_first = 0
    delay_s = 0.0
    seen: ClassVar[list[dict]] = []  # each test's fixture makes a subclass with its own lists
    connections: ClassVar[list[int]] = []

    def setup(self) -> None:
        super().setup()
        type(self).connections.append(1)

    def log_message(self, *args: object) -> None:  # keep pytest's output clean
        pass

    def _send(self, status: int, data: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        seen = {"auth": self.headers.get("Authorization"), "body": body, "path": self.path}
        type(self).seen.append(seen)
        if len(type(self).seen) <= type(self).fail_first:
            self._send(type(self).fail_status, b'{"detail": "scripted failure"}')
            return
        time.sleep(type(self).delay_s)
        values = [float(len(q)) for q in body["query"]]
        answer = {
            "rewards": values,
            "scores": values,
            "extra_logs": {"format_reward": values, "accuracy_reward": [0.0] * len(values)},
        }
        self._send(200, json.dumps(answer).encode())


def serve() -> Iterator[tuple[str, type[Scripted]]]:
    handler = type("Handler", (Scripted,), {"seen": [], "connections": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


scripted = pytest.fixture(serve)
other_scripted = pytest.fixture(serve)


def dead_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"  # closed again: nobody listens


def test_retries_a_5xx_then_returns_rewards_in_input_order(scripted) -> None:
    url, handler = scripted
    handler.fail_first = 2
    with RewardClient(url, token="s3cret", retry_for_s=10) as client:
        got = client.score(["p", "pp", "ppp"], ["a", "bb", "c"], ["1", "2", "3"], per_request=2)
    assert got.total == [2.0, 4.0, 4.0]  # len(prompt + response), in input order
    assert got.accuracy == [0.0, 0.0, 0.0]
    assert len(handler.seen) == 2 + 2  # two failed attempts, then both requests answered
    assert {s["auth"] for s in handler.seen} == {"Bearer s3cret"}
    assert handler.seen[-1]["body"]["prompts"] in (["p", "pp"], ["ppp"])


def test_gives_up_after_its_retry_budget_with_a_hint(scripted) -> None:
    url, handler = scripted
    handler.fail_first = 100
    started = time.monotonic()
    with (
        RewardClient(url, retry_for_s=2.0) as client,
        pytest.raises(RewardServerError, match=r"did not answer for \d+ s .*HTTP 503.*running"),
    ):
        client.get_reward(["x"], None, ["1"])
    # Backoff 0.5, 1 s: three attempts fit in 2 s, a fourth (after 2 s more) would not.
    assert len(handler.seen) == 3
    assert 1.4 <= time.monotonic() - started < 2.5


def test_a_refused_request_is_not_retried(scripted) -> None:
    url, handler = scripted
    handler.fail_first, handler.fail_status = 10, 401
    with (
        RewardClient(url, retry_for_s=30) as client,
        pytest.raises(RewardServerError, match=r"refused the request: HTTP 401.*--reward-token"),
    ):
        client.get_reward(["x"], None, ["1"])
    assert len(handler.seen) == 1


def test_connections_are_reused_across_requests(scripted) -> None:
    """96 one-completion requests, 8 at a time: at most 8 TCP connections, not 96."""
    url, handler = scripted
    n = 96
    with RewardClient(url, concurrency=8) as client:
        got = client.score(["p"] * n, ["a"] * n, ["1"] * n, per_request=1)
    assert got.total == [2.0] * n and len(handler.seen) == n
    assert 1 <= len(handler.connections) <= 8


def test_requests_rotate_over_several_servers(scripted, other_scripted) -> None:
    (a, seen_a), (b, seen_b) = scripted, other_scripted
    with RewardClient(f"{a},{b}", concurrency=8) as client:
        got = client.score(["p"] * 64, [str(i) for i in range(64)], ["1"] * 64, per_request=1)
    assert got.total == [float(len("p" + str(i))) for i in range(64)]
    assert len(seen_a.seen) == len(seen_b.seen) == 32  # each request starts at the next server


def test_a_dead_server_is_failed_over_without_losing_a_sample(scripted) -> None:
    url, handler = scripted
    dead = dead_url()
    with RewardClient([dead, url], retry_for_s=5) as client:
        started = time.monotonic()
        got = client.score(["p"] * 20, [str(i) for i in range(20)], ["1"] * 20, per_request=1)
    assert got.total == [float(len("p" + str(i))) for i in range(20)]
    assert len(handler.seen) == 20  # every request answered by the live one
    assert time.monotonic() - started < 2  # failover is immediate, no backoff in between


def _attempts(policy, servers, failures: int) -> list[tuple[str, float]]:
    """(server, wait before it) of each attempt of one request that fails `failures` times,
    with the policy's sleeps recorded instead of slept."""
    waits: list[float] = []
    policy.sleep = waits.append
    made: list[str] = []
    for attempt in policy:
        with attempt:
            made.append(next(servers))
            if len(made) <= failures:
                raise Retryable(made[-1], "HTTP 503")
    return list(zip(made, [0.0, *waits], strict=True))


def test_rotation_waits_only_after_a_full_round() -> None:
    rotation = ServerRotation(["a", "b", "c"])
    policy = retrying(100, lambda state: "gave up", servers=3)
    assert _attempts(policy, rotation.cycle(), failures=6) == [
        ("a", 0.0), ("b", 0.0), ("c", 0.0), ("a", 0.5), ("b", 0.0), ("c", 0.0), ("a", 1.0),
    ]  # fmt: skip
    assert next(rotation.cycle()) == "b"  # the next request's start
    assert server_urls(" http://a:1/, http://b:2 ") == ("http://a:1", "http://b:2")


def test_async_client_rotates_reuses_and_fails_over(scripted, other_scripted) -> None:
    """The rollout actors' client: 64 concurrent requests over two servers, one connection
    pool for its life; then with one server down every request still gets its reward."""
    (a, seen_a), (b, seen_b) = scripted, other_scripted
    seen_a.delay_s = seen_b.delay_s = 0.01

    async def burst(client: AsyncRewardClient, n: int) -> list[dict]:
        bodies = [{"query": [f"q{i}"], "prompts": ["p"], "labels": ["1"]} for i in range(n)]
        return await asyncio.gather(*(client.get_reward(body) for body in bodies))

    client = AsyncRewardClient([a + "/get_reward", b + "/get_reward"], retry_for_s=5,
                               max_connections=16)  # fmt: skip

    async def run() -> tuple[list[dict], list[dict]]:
        first = await burst(client, 64)
        second = await burst(client, 64)
        await client.aclose()
        return first, second

    first, second = asyncio.run(run())
    assert [r["rewards"] for r in first + second] == [[float(len(f"q{i}"))] for i in range(64)] * 2
    assert len(seen_a.seen) == len(seen_b.seen) == 64
    # One pool of 16 per server, kept across bursts: the second burst opens no connection.
    assert len(seen_a.connections) <= 16 and len(seen_b.connections) <= 16

    failover = AsyncRewardClient([dead_url() + "/get_reward", a + "/get_reward"], retry_for_s=5)
    answers = asyncio.run(burst(failover, 32))
    assert [r["rewards"] for r in answers] == [[float(len(f"q{i}"))] for i in range(32)]


def test_async_client_gives_up_naming_every_server() -> None:
    urls = [dead_url() + "/get_reward", dead_url() + "/get_reward"]
    client = AsyncRewardClient(urls, retry_for_s=1.5, hint="raise the budget")
    with pytest.raises(RewardServerError) as error:
        asyncio.run(client.get_reward({"query": ["q"], "prompts": ["p"], "labels": ["1"]}))
    message = str(error.value)
    assert all(u in message for u in urls) and message.endswith("raise the budget")


def test_backoff_doubles_up_to_its_cap() -> None:
    attempts = _attempts(retrying(100, str, max_s=4.0), iter(["a"] * 7), failures=6)
    assert [wait for _, wait in attempts[1:]] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]


def test_the_policy_gives_up_before_an_attempt_past_its_budget() -> None:
    """The first attempt is always made; then one whose wait would end past the budget is not."""
    policy = retrying(0.6, lambda state: f"gave up after {state.attempt_number} attempts")
    with pytest.raises(RewardServerError, match="gave up after 2 attempts"):
        _attempts(policy, iter(["a"] * 9), failures=9)  # waits 0.5 s; 1.0 s more would end past
    with pytest.raises(RewardServerError, match="after 1 attempts"):
        _attempts(retrying(0, lambda state: f"after {state.attempt_number} attempts"),
                  iter(["a"]), failures=1)  # fmt: skip


def test_the_client_takes_remote_urls_the_demo_does_not() -> None:
    RewardClient("https://rewards.example.org:8443").close()  # nothing is sent
    with pytest.raises(ValueError, match="http:// or https://"):
        RewardClient("http://127.0.0.1:8000,rewards.example.org:8000")
    with pytest.raises(ValueError, match="http:// or https://"):
        RewardClient("rewards.example.org:8000")
    with pytest.raises(ValueError, match="only sends rewards traffic to a server on this"):
        check_loopback("http://rewards.example.org:8000")
    assert check_loopback("http://127.0.0.1:8000/") == "http://127.0.0.1:8000"


def test_the_response_format_goes_with_every_scoring_request(scripted) -> None:
    url, handler = scripted
    with RewardClient(url, response_format="think") as client:
        client.score(["p"], ["r"], ["1"], per_request=1)
    with RewardClient(url) as client:  # none: the server's own setting
        client.score(["p"], ["r"], ["1"], per_request=1)
    assert [seen["path"] for seen in handler.seen] == ["/get_reward?format=think", "/get_reward"]
    with pytest.raises(ValueError, match="unknown response format 'xml': use one of paper, think"):
        RewardClient(url, response_format="xml")


def test_protocol_reasons_serialise_as_their_values() -> None:
    assert json.dumps({"reason": Reason.FORMAT_NOT_MET}) == '{"reason": "format_not_met"}'
    assert f"{Reason.NO_ANSWER_BLOCK}" == str(Reason.NO_ANSWER_BLOCK) == "no_answer_block"
    assert Reason("empty_answer") in NON_VOTING and "empty_answer" in NON_VOTING
    assert Reason.EQUIVALENT not in NON_VOTING
    assert is_correct(10.0) and not is_correct(0.0)


def test_protocol_imports_nothing_but_the_standard_library() -> None:
    # The training side imports it without the server extra: no FastAPI, pydantic or sympy.
    code = (
        "import sys, reward_server.protocol, gtpo.reward_client, gtpo.local_reward_server\n"
        "print(sorted(m for m in ('fastapi', 'pydantic', 'sympy', 'starlette') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_rollout_client_sends_the_token_from_the_environment_as_a_header(
    scripted, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gtpo-openrlhf takes GTPO_RS_API_TOKEN from its environment (as it takes the W&B key)
    and its rollout actors send it as Authorization: Bearer: before, the token rode in
    --reward.remote_url (?token=), which command lines, dashboards and access logs show."""
    from gtpo.openrlhf.rewards import reward_token, rollout_reward_client

    url, handler = scripted
    monkeypatch.setenv("GTPO_RS_API_TOKEN", "s3cret")
    client = rollout_reward_client([url + "/get_reward"], 5.0, reward_token())

    async def ask() -> dict:
        try:
            return await client.get_reward({"query": ["q"], "prompts": ["p"], "labels": ["1"]})
        finally:
            await client.aclose()

    assert asyncio.run(ask())["rewards"] == [1.0]
    assert handler.seen[-1]["auth"] == "Bearer s3cret"
    assert "s3cret" not in handler.seen[-1]["path"]
    monkeypatch.setenv("GTPO_RS_API_TOKEN", "")
    assert reward_token() is None  # set and empty: no token (the server refuses to start so)
