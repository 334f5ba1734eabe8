"""The one reward-server client (gtpo.reward_client) against a scripted HTTP server on 127.0.0.1:
retries with backoff on 5xx, no retry on a refused request, the bearer token, input order.

The scripted server stands in for failures a real reward server cannot be made to produce on
demand (a 503 then a recovery); the client's happy path against the real server is covered by
tests/demo and tests/eval.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from gtpo.local_reward_server import check_loopback
from gtpo.reward_client import RewardClient, RewardServerError, backoff_delays
from reward_server.protocol import NON_VOTING, Reason, is_correct


class Scripted(BaseHTTPRequestHandler):
    """Answers POST /get_reward: ``fail_first`` times with ``fail_status``, then scores every
    query as reward = its length (so the order of results is checkable)."""

    fail_status = 503
    fail_first = 0
    seen: ClassVar[list[dict]] = []  # each test's fixture makes a subclass with its own list

    def log_message(self, *args: object) -> None:  # keep pytest's output clean
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append({"auth": self.headers.get("Authorization"), "body": body})
        if len(type(self).seen) <= type(self).fail_first:
            self.send_response(type(self).fail_status)
            self.end_headers()
            self.wfile.write(b'{"detail": "scripted failure"}')
            return
        values = [float(len(q)) for q in body["query"]]
        answer = {
            "rewards": values,
            "scores": values,
            "extra_logs": {"format_reward": values, "accuracy_reward": [0.0] * len(values)},
        }
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def scripted() -> Iterator[tuple[str, type[Scripted]]]:
    handler = type("Handler", (Scripted,), {"seen": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


def test_retries_a_5xx_then_returns_rewards_in_input_order(scripted) -> None:
    url, handler = scripted
    handler.fail_first = 2
    with RewardClient(url, token="s3cret", retries=2) as client:
        got = client.score(["p", "pp", "ppp"], ["a", "bb", "c"], ["1", "2", "3"], per_request=2)
    assert got.total == [2.0, 4.0, 4.0]  # len(prompt + response), in input order
    assert got.accuracy == [0.0, 0.0, 0.0]
    assert len(handler.seen) == 2 + 2  # two failed attempts, then both requests answered
    assert {s["auth"] for s in handler.seen} == {"Bearer s3cret"}
    assert handler.seen[-1]["body"]["prompts"] in (["p", "pp"], ["ppp"])


def test_gives_up_after_the_retries_with_a_hint(scripted) -> None:
    url, handler = scripted
    handler.fail_first = 10
    with (
        RewardClient(url, retries=1) as client,
        pytest.raises(RewardServerError, match="failed after 2 attempts"),
    ):
        client.get_reward(["x"], None, ["1"])
    assert len(handler.seen) == 2


def test_a_refused_request_is_not_retried(scripted) -> None:
    url, handler = scripted
    handler.fail_first, handler.fail_status = 10, 401
    with (
        RewardClient(url, retries=3) as client,
        pytest.raises(RewardServerError, match=r"answered 401.*--reward-token"),
    ):
        client.get_reward(["x"], None, ["1"])
    assert len(handler.seen) == 1


def test_backoff_doubles_up_to_its_cap() -> None:
    delays = backoff_delays(0.5, 4.0)
    assert [next(delays) for _ in range(6)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]


def test_the_client_takes_remote_urls_the_demo_does_not() -> None:
    RewardClient("https://rewards.example.org:8443").close()  # nothing is sent
    with pytest.raises(ValueError, match="http:// or https://"):
        RewardClient("rewards.example.org:8000")
    with pytest.raises(ValueError, match="only sends rewards traffic to a server on this"):
        check_loopback("http://rewards.example.org:8000")
    assert check_loopback("http://127.0.0.1:8000/") == "http://127.0.0.1:8000"


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
