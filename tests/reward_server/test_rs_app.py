"""The app in-process (no lifespan): readiness and failure modes that a live server hides."""

from __future__ import annotations

import asyncio

import httpx

from reward_server.service.app import create_app
from reward_server.service.settings import Settings

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
    """The symbolic check needs the pool, which is down: the request is a 503 the client
    retries (it used to be a 200 with accuracy 0 and reason worker_error: a reward nobody
    computed); numbers are decided in the server process and keep working."""
    symbolic = {
        "query": [R + "<answer>\\frac{\\sqrt{2}}{2}</answer>"],
        "labels": ["\\frac{1}{\\sqrt{2}}"],
    }
    numeric = {"query": [R + "<answer>4</answer>"], "labels": ["4"]}
    for path in ("/v1/score", "/get_reward"):
        r = _call("POST", path, json={k: symbolic[k] + numeric[k] for k in symbolic})
        assert r.status_code == 503 and r.headers["retry-after"] == "1", r.text
        assert "could not be computed" in r.json()["detail"] and "no_verifier" in r.json()["detail"]
    r = _call("POST", "/v1/score", json=numeric)
    assert r.status_code == 200
    assert r.json()["results"][0]["reason"] == "equivalent"
    r = _call("POST", "/v1/equivalent", json={"pairs": [{"answer": "x^2", "reference": "x*x"}]})
    assert r.status_code == 503
