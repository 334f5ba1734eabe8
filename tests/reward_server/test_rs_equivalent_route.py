"""``POST /v1/equivalent`` on a real server: verdicts in order, the answer policy and the cost
guard apply, bad requests get a one-line 4xx, auth and the batch limit hold."""

from __future__ import annotations

import httpx


def _post(url: str, pairs: list[dict], **kw) -> httpx.Response:
    return httpx.post(url + "/v1/equivalent", json={"pairs": pairs}, timeout=30, **kw)


def test_verdicts_in_order_with_reasons(server) -> None:
    pairs = [
        {"answer": "\\frac{2}{4}", "reference": "0.5"},
        {"answer": "\\sqrt{8}", "reference": "2\\sqrt{2}"},  # symbolic, in a worker
        {"answer": "3", "reference": "4"},
        {"answer": "7\\text{ or more}", "reference": "7"},
        {"answer": "10^{10^{10^{10}}}", "reference": "7"},
        {"answer": "72", "reference": "Natalia sold 48 + 24 = 72 clips.\n#### 72"},
        {"answer": "\\boxed{2}, \\boxed{3}", "reference": "\\{3, 2\\}"},
        {"answer": " ", "reference": "1"},
        {"answer": "1", "reference": ""},
    ]
    r = _post(server.url, pairs)
    assert r.status_code == 200, r.text
    got = [(v["equivalent"], v["reason"]) for v in r.json()["results"]]
    assert got == [
        (True, "equivalent"),
        (True, "equivalent"),
        (False, "not_equivalent"),
        (False, "hedged_answer"),
        (False, "answer_huge_exponent"),
        (True, "equivalent"),
        (True, "equivalent"),
        (False, "empty_answer"),
        (False, "no_reference"),
    ]


def test_empty_list_and_bad_requests(server) -> None:
    assert _post(server.url, []).json() == {"results": []}
    for content in (
        b"{",
        b'{"pairs": [{"answer": "1"}]}',
        b'{"pairs": [{"answer": 1, "reference": "1"}]}',
        b'{"pairs": "x"}',
        b'{"pairs": [], "extra": 1}',
    ):
        r = httpx.post(server.url + "/v1/equivalent", content=content)
        assert r.status_code == 422, (content, r.text)
        detail = r.json()["detail"]
        assert isinstance(detail, str) and "\n" not in detail and detail


def test_auth_and_batch_limit(secured_server) -> None:
    url, auth = secured_server.url, {"Authorization": "Bearer s3cret"}
    pair = {"answer": "1", "reference": "1"}
    assert _post(url, [pair]).status_code == 401
    assert _post(url, [pair], headers=auth).json()["results"][0]["equivalent"] is True
    r = _post(url, [pair] * 5, headers=auth)  # GTPO_RS_MAX_BATCH_SIZE=4
    assert r.status_code == 413 and "GTPO_RS_MAX_BATCH_SIZE" in r.json()["detail"]
