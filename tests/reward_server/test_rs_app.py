"""The app in-process (no lifespan): readiness and failure modes that a live server hides."""

from __future__ import annotations

import asyncio

import httpx

from reward_server.app import create_app
from reward_server.settings import Settings

R = "<reasoning>r</reasoning>"


def _call(method: str, path: str, **kw) -> httpx.Response:
    async def go() -> httpx.Response:
        # ASGITransport does not run the lifespan: the verification pool never starts.
        app = create_app(Settings(verify_workers=1))
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://rs") as client:
            return await client.request(method, path, **kw)

    return asyncio.run(go())


def test_not_ready_before_the_workers_are_warm() -> None:
    r = _call("GET", "/readyz")
    assert r.status_code == 503 and r.json() == {"status": "starting"}
    assert _call("GET", "/healthz").status_code == 200


def test_a_missing_verifier_never_scores_a_correct_answer() -> None:
    body = {
        "query": [R + "<answer>\\frac{\\sqrt{2}}{2}</answer>", R + "<answer>4</answer>"],
        "labels": ["\\frac{1}{\\sqrt{2}}", "4"],
    }
    r = _call("POST", "/v1/score", json=body)
    assert r.status_code == 200
    symbolic, numeric = r.json()["results"]
    # The symbolic check needs the pool, which is down: 0, with the reason, never 10.
    assert (symbolic["accuracy_score"], symbolic["reason"]) == (0.0, "worker_error")
    # Numbers are decided in the server process and keep working.
    assert (numeric["accuracy_score"], numeric["reason"]) == (10.0, "equivalent")
