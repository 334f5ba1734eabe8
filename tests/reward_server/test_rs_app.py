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


def test_a_large_body_is_parsed_off_the_event_loop(monkeypatch) -> None:
    """Before, every body was parsed on the event loop: 45 ms for one of 15 MB, and eight at
    once held /healthz for up to 195 ms. Where each parse ran is recorded: a small body on the
    loop (a thread hop costs more), a large one in a thread; a repeated key is still a 422."""
    from reward_server.service import routes

    on_loop: list[bool] = []
    parse = routes._parsed

    def recorded(body: bytes, model):
        try:
            asyncio.get_running_loop()
            on_loop.append(True)
        except RuntimeError:
            on_loop.append(False)
        return parse(body, model)

    monkeypatch.setattr(routes, "_parsed", recorded)
    small = {"query": [R + "<answer>4</answer>"], "labels": ["4"]}
    padding = "x" * routes.PARSED_OFF_LOOP_BYTES
    large = {"query": [R + padding + "<answer>4</answer>"], "labels": ["4"]}
    assert _call("POST", "/v1/score", json=small).status_code == 200
    assert _call("POST", "/v1/score", json=large).status_code == 200
    repeated = b'{"query": ["<answer>5</answer>"], "labels": ["4"], "labels": ["5"], "pad": "%s"}'
    reply = _call("POST", "/v1/score", content=repeated % padding.encode(),
                  headers={"Content-Type": "application/json"})  # fmt: skip
    assert reply.status_code == 422 and "is given twice" in reply.text, reply.text
    assert on_loop == [True, False, False]
