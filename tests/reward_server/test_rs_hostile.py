"""Hostile input against a real server: every request gets a clear 4xx or a 0-accuracy verdict
within the wall-clock net of an answer, nothing is ever evaluated, and without the token nothing is
scored. The cases live in reliability_harness.py (benchmarks/reward_server_reliability.py prints
them as figures); conftest.py makes one test of each."""

from __future__ import annotations

import dataclasses

import httpx
import pytest

WALL_S = 2.0  # GTPO_RS_VERIFY_WALL_TIMEOUT_S of the `server` fixture
# Room for the request itself (a 16 MB body, a 1 MB answer) on a slow, shared CI machine.
MARGIN_S = 2.5


def test_hostile_request(server, harness, hostile_case, code_marker) -> None:
    paths = ["/v1/score", "/get_reward"] if hostile_case.status != 200 else ["/v1/score"]
    for path in paths:
        result = harness.probe(server.url, dataclasses.replace(hostile_case, path=path))
        assert not result.problem, f"{path}: {result.problem}"
        assert result.seconds < WALL_S + MARGIN_S, f"{path}: took {result.seconds:.2f} s"
    assert not code_marker.exists(), "an answer or label was executed as code"
    # The server is still whole: a plain request is scored right after the hostile one.
    body = {"query": ["<reasoning>r</reasoning><answer>\\sqrt{49}</answer>"], "labels": ["7"]}
    assert httpx.post(server.url + "/get_reward", json=body).json()["rewards"] == [20.0]


def test_request_ids_are_echoed_on_every_answer(server) -> None:
    for content, status in ((b'{"query": [], "labels": []}', 200), (b"{", 422)):
        r = httpx.post(
            server.url + "/get_reward", content=content, headers={"X-Request-ID": "abc-123"}
        )
        assert r.status_code == status and r.headers["x-request-id"] == "abc-123"
    r = httpx.post(server.url + "/get_reward", content=b"{}", headers={"X-Request-ID": "x" * 300})
    assert "x-request-id" not in r.headers  # over-long ids are not echoed


def test_openapi_fuzzing_finds_no_server_error(server, harness) -> None:
    """schemathesis generates requests from /openapi.json (valid and invalid ones) and checks
    every answer: no 5xx, status codes, content types and bodies as the spec documents them."""
    if harness.schemathesis_cli() is None:
        pytest.skip("schemathesis is not installed (it comes with the dev extra)")
    generated, failures, output = harness.fuzz_openapi(server.url, max_examples=100)
    assert generated >= 100, output[-3000:]
    assert failures == 0, output[-6000:]


def test_without_the_token_nothing_is_scored(secured_server, harness) -> None:
    report = harness.auth_probes(secured_server.url, "s3cret")
    assert report.requests >= 30
    assert report.refused == report.requests, "a request without a valid token was not a 401"
    assert report.scored == 0, "an unauthenticated request was scored"
    assert report.healthz_open
    assert report.accepted_with_token
