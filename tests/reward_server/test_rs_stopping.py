"""What the server does when it is told to stop, in-process: the stop signal reaches the pool
before uvicorn's handler, and a request uvicorn cancels at the end of its graceful stop gets a
503 to retry (the live server under `setsid` and group signals: test_rs_shutdown.py)."""

from __future__ import annotations

import asyncio
import json
import os
import signal

import pytest

from reward_server.service.app import before_stop_signals
from reward_server.service.middleware import AnswerWhenCancelled


def test_the_stop_signal_reaches_the_pool_before_the_installed_handler() -> None:
    calls: list[str] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: calls.append("uvicorn"))
    try:
        restore = before_stop_signals(lambda: calls.append("pool"))
        os.kill(os.getpid(), signal.SIGTERM)
        assert calls == ["pool", "uvicorn"]
        restore()
        os.kill(os.getpid(), signal.SIGTERM)
        assert calls == ["pool", "uvicorn", "uvicorn"]
    finally:
        signal.signal(signal.SIGTERM, previous)


async def _cancelled_request(respond_first: bool) -> list[dict]:
    """``AnswerWhenCancelled`` around an app still working when its task is cancelled, as
    uvicorn cancels it once its graceful stop has run out; what was sent."""
    sent: list[dict] = []
    working = asyncio.Event()

    async def app(scope, receive, send) -> None:
        if respond_first:
            await send({"type": "http.response.start", "status": 200, "headers": []})
        working.set()
        await asyncio.sleep(3600)

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/get_reward", "headers": []}
    task = asyncio.create_task(AnswerWhenCancelled(app)(scope, receive, send))
    await working.wait()
    task.cancel(msg="Task cancelled, timeout graceful shutdown exceeded")
    await task  # raises CancelledError when the middleware lets it through
    return sent


def test_a_request_cut_at_the_end_of_the_graceful_stop_gets_a_503_to_retry() -> None:
    """Before: uvicorn logged the cancellation as a traceback and answered a plain-text 500,
    which the client could not read as JSON."""
    sent = asyncio.run(_cancelled_request(respond_first=False))
    start, body = sent
    assert start["status"] == 503
    assert (b"retry-after", b"1") in start["headers"]
    assert "retry" in json.loads(body["body"])["detail"]


def test_a_response_already_started_is_not_answered_twice() -> None:
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(_cancelled_request(respond_first=True))
