"""HTTP behaviour of a real uvicorn server on 127.0.0.1 (started by conftest.py)."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import tempfile
import time
from pathlib import Path

import httpx
import pytest
from reliability_harness import HANG  # the servers' hang hook (see conftest.py)

from reward_server.protocol import RESPONSE_FORMATS
from reward_server.service.routes import router

R = "<reasoning>\nwork\n</reasoning>\n"
PROMPT = "<|im_start|>user\nHow many?<|im_end|>\n<|im_start|>assistant\n"


def q(response: str) -> str:
    """What OpenRLHF sends: prompt + response decoded with special tokens."""
    return PROMPT + response + "<|im_end|>"


def post(server, path: str, body: object, **kw) -> httpx.Response:
    return httpx.post(server.url + path, json=body, timeout=30, **kw)


def test_health_ready_and_openapi(server) -> None:
    assert httpx.get(server.url + "/healthz").json() == {"status": "ok"}
    ready = httpx.get(server.url + "/readyz")
    assert ready.status_code == 200 and ready.json() == {"status": "ready", "workers": 2}
    spec = httpx.get(server.url + "/openapi.json").json()
    assert {"/get_reward", "/v1/score", "/v1/equivalent", "/healthz", "/readyz", "/metrics"} <= set(
        spec["paths"]
    )
    # Every reference resolves from the document's root, as clients generated from it need.
    refs = re.findall(r'"\$ref": "#/([^"]+)"', json.dumps(spec))
    assert refs
    for ref in refs:
        node = spec
        for part in ref.split("/"):
            assert part in node, f"unresolvable $ref #/{ref}"
            node = node[part]


CASES = [
    # (response, label, reward, format, accuracy)
    (R + "<answer>72</answer>", "Some steps.\n#### 72", 20.0, 10.0, 10.0),
    (R + "<answer>\\boxed{\\frac{1}{2}}</answer>", "so $\\boxed{0.5}$", 20.0, 10.0, 10.0),
    (R + "<answer>\\frac{\\sqrt{2}}{2}</answer>", "\\frac{1}{\\sqrt{2}}", 20.0, 10.0, 10.0),
    (R + "<answer>71</answer>", "#### 72", 10.0, 10.0, 0.0),
    (R + "<answer>0.33</answer>", "\\frac13", 10.0, 10.0, 0.0),
    ("<answer>72</answer>", "72", 1.0, 1.0, 0.0),  # right answer, format not met
    ("<reasoning>work <answer>72</answer>", "72", 1.5, 1.5, 0.0),
    (R, "72", 1.0, 1.0, 0.0),
    ("72", "72", 0.0, 0.0, 0.0),
    (R + "<answer>72</answer>", 72, 20.0, 10.0, 10.0),  # numeric label
    (R + "<answer>72</answer>", None, 10.0, 10.0, 0.0),
]


def test_get_reward_batch_in_order(server) -> None:
    body = {
        "query": [q(c[0]) for c in CASES],
        "prompts": [PROMPT] * len(CASES),
        "labels": [c[1] for c in CASES],
    }
    r = post(server, "/get_reward", body)
    assert r.status_code == 200
    data = r.json()
    assert set(data) == {"rewards", "scores", "extra_logs"}
    assert data["rewards"] == [c[2] for c in CASES]
    # scores: the accuracy as 1 or 0 (OpenRLHF's dynamic filtering reads it), not the reward
    assert data["scores"] == [c[4] / 10 for c in CASES]
    assert data["extra_logs"] == {
        "format_reward": [c[3] for c in CASES],
        "accuracy_reward": [c[4] for c in CASES],
    }


def test_single_sample_without_prompts(server) -> None:
    r = post(server, "/get_reward", {"query": [R + "<answer>5</answer>"], "labels": ["5"]})
    assert r.json()["rewards"] == [20.0]


def test_v1_score_reasons(server) -> None:
    responses = [
        R + "<answer>1,000</answer>",
        R + "<answer>999</answer>",
        "<answer>1000</answer>",
        R,
        R + "<answer>  </answer>",
        R + "<answer>" + "9" * 5000 + "</answer>",
    ]
    r = post(
        server,
        "/v1/score",
        {"query": [q(x) for x in responses], "prompts": [PROMPT] * 6, "labels": ["#### 1000"] * 6},
    )
    assert r.status_code == 200
    results = r.json()["results"]
    assert [x["reason"] for x in results] == [
        "equivalent",
        "not_equivalent",
        "format_not_met",
        "no_answer_block",
        "empty_answer",
        "answer_too_long",
    ]
    first = results[0]
    assert first["response"] == responses[0]
    assert (first["answer"], first["reference"]) == ("1,000", "1000")
    assert (first["format_score"], first["format_reason"]) == (10.0, "ok")
    assert (first["accuracy_score"], first["reward"]) == (10.0, 20.0)


PREFILLED = PROMPT + "<think>\n"
THINK_CASES = [
    # (prompt, response, label, format, accuracy): the think format, with and without the
    # template's prefilled <think>
    (
        PREFILLED,
        "Janet sells 9 eggs at $2.\n</think>\n\nShe makes $\\boxed{18}$.",
        "#### 18",
        10.0,
        10.0,
    ),
    (
        PREFILLED,
        "Janet sells 9 eggs at $2.\n</think>\n\nShe makes $\\boxed{16}$.",
        "#### 18",
        10.0,
        0.0,
    ),
    (PROMPT, "<think>\n9 eggs at $2.\n</think>\n\n$\\boxed{18}$", "#### 18", 10.0, 10.0),
    # without the prefill the block has no opening tag: the answer is there, the format is not
    (PROMPT, "9 eggs at $2.\n</think>\n\n$\\boxed{18}$", "#### 18", 1.5, 0.0),
    (PROMPT, "<think>\n9 eggs, so \\boxed{18}", "#### 18", 0.0, 0.0),  # cut off while thinking
]


@pytest.mark.parametrize("route", ["/get_reward", "/v1/score"])
def test_format_query_parameter_chooses_the_response_format(server, route: str) -> None:
    body = {
        "query": [p + r + "<|im_end|>" for p, r, *_ in THINK_CASES],
        "prompts": [p for p, *_ in THINK_CASES],
        "labels": [c[2] for c in THINK_CASES],
    }
    think = post(server, route + "?format=think", body).json()
    paper = post(server, route, body).json()  # the server's default: the paper's format
    if route == "/get_reward":
        assert think["extra_logs"]["format_reward"] == [c[3] for c in THINK_CASES]
        assert think["extra_logs"]["accuracy_reward"] == [c[4] for c in THINK_CASES]
        assert think["scores"] == [c[4] / 10 for c in THINK_CASES]
        assert paper["rewards"] == [0.0] * len(THINK_CASES)
    else:
        assert {r["response_format"] for r in think["results"]} == {"think"}
        assert [r["answer"] for r in think["results"]][:3] == ["18", "16", "18"]
        assert {r["response_format"] for r in paper["results"]} == {"paper"}


@pytest.mark.parametrize("route", ["/get_reward", "/v1/score"])
def test_unknown_format_is_a_422_naming_the_valid_ones(server, route: str) -> None:
    body = {"query": [R + "<answer>5</answer>"], "labels": ["5"]}
    r = post(server, route + "?format=xml", body)
    assert r.status_code == 422
    detail = r.json()["detail"]
    assert "'xml'" in detail and "paper, think, boxed" in detail and "\n" not in detail


def test_the_format_parameter_is_read_as_decoded_and_documented_with_its_values(server) -> None:
    """The scoring routes read ``?format=`` themselves (routes.chosen_format): spelled with an
    escape it is the same parameter, and OpenAPI still lists it on both scoring routes with
    every format a client may send."""
    body = {"query": [THINK_CASES[0][0] + THINK_CASES[0][1]], "prompts": [THINK_CASES[0][0]],
            "labels": [THINK_CASES[0][2]]}  # fmt: skip
    escaped = post(server, "/get_reward?%66ormat=think", body).json()
    assert escaped == post(server, "/get_reward?format=think", body).json()
    assert escaped != post(server, "/get_reward", body).json()
    assert post(server, "/get_reward?format=paper&format=think", body).json() == escaped
    spec = httpx.get(server.url + "/openapi.json").json()
    for route in ("/get_reward", "/v1/score"):
        (parameter,) = spec["paths"][route]["post"]["parameters"]
        assert parameter["name"] == "format" and parameter["in"] == "query"
        assert parameter["schema"]["enum"] == list(RESPONSE_FORMATS)
    assert "parameters" not in spec["paths"]["/v1/equivalent"]["post"]


def test_response_format_setting_is_the_default(make_server) -> None:
    srv = make_server({"GTPO_RS_RESPONSE_FORMAT": "boxed"})
    body = {"query": ["So she makes $\\boxed{18}$."], "labels": ["18"]}
    assert post(srv, "/get_reward", body).json()["rewards"] == [20.0]
    assert post(srv, "/get_reward?format=paper", body).json()["rewards"] == [0.0]


def test_unknown_format_setting_stops_the_server_with_a_clear_message(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    env = {**os.environ, "GTPO_RS_RESPONSE_FORMAT": "xml", "GTPO_RS_VERIFY_WORKERS": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "reward_server", "--port", "0"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode != 0
    assert "unknown response format 'xml': use one of paper, think, boxed" in proc.stderr


def test_empty_batch(server) -> None:
    r = post(server, "/get_reward", {"query": [], "prompts": [], "labels": []})
    assert r.status_code == 200
    assert r.json() == {
        "rewards": [],
        "scores": [],
        "extra_logs": {"format_reward": [], "accuracy_reward": []},
    }


def test_form_encoded_json_is_accepted(server) -> None:
    # curl -d sends JSON as application/x-www-form-urlencoded; accept the JSON anyway.
    r = httpx.post(
        server.url + "/get_reward",
        content=b'{"query": ["<reasoning>a</reasoning><answer>3</answer>"], "labels": [3]}',
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert r.json()["rewards"] == [20.0]


def _metric(text: str, name: str, labels: str = "") -> float:
    pattern = re.escape(name) + (r"\{" + re.escape(labels) + r"\}" if labels else "") + r" (\S+)"
    m = re.search(r"^" + pattern + "$", text, re.MULTILINE)
    return float(m.group(1)) if m else 0.0


def test_hung_verification_is_killed_while_other_requests_are_answered(server, rs_tools) -> None:
    """A worker stuck on one answer is killed at its 1 s CPU budget (at worst the 2 s net) and
    replaced; meanwhile the other worker and the fast path keep answering concurrent requests."""
    before = httpx.get(server.url + "/metrics").text
    processes_before = len(rs_tools.descendants(server.proc.pid))

    async def main() -> None:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            t0 = time.perf_counter()

            async def one(answer: str, label: str) -> tuple[dict, float]:
                r = await client.post(
                    "/v1/score",
                    json={"query": [R + f"<answer>{answer}</answer>"], "labels": [label]},
                )
                if answer == HANG and r.status_code == 503:  # the net: no verdict, and said so
                    return {"reason": "503", "accuracy_score": None}, time.perf_counter() - t0
                assert r.status_code == 200
                return r.json()["results"][0], time.perf_counter() - t0

            hung = asyncio.create_task(one(HANG, "1"))
            await asyncio.sleep(0.1)
            # Symbolic checks (distinct, so neither cached nor shared) and numbers.
            others = await asyncio.gather(
                *(one(f"\\sqrt{{{k * k}}}", str(k)) for k in range(20, 30)),
                *(one(f"{k},000", f"{k}000") for k in range(1, 30)),
            )
            item, hung_done = await hung
            # Its CPU budget ends it (a verdict: 0), or on a very busy machine the net (a 503).
            assert (item["reason"], item["accuracy_score"]) in (("timeout", 0.0), ("503", None))
            hung_reason.append(item["reason"])
            assert 1.0 <= hung_done < 3.0
            assert all(res["reason"] == "equivalent" for res, _ in others)
            assert max(t for _, t in others) < hung_done, "requests waited for the hung check"

    hung_reason: list[str] = []
    asyncio.run(main())
    after = httpx.get(server.url + "/metrics").text
    # The hang spins: its CPU budget ends it (counted "cpu"). On a very busy machine the
    # wall-clock net answers its request first (counted "wall"), while the check runs on to its
    # budget (counted "cpu" once it gets there, which may be after this reading).
    cpu, wall = (
        _metric(after, "gtpo_rs_verify_timeouts_total", f'cause="{cause}"')
        - _metric(before, "gtpo_rs_verify_timeouts_total", f'cause="{cause}"')
        for cause in ("cpu", "wall")
    )
    if hung_reason == ["timeout"]:
        assert (cpu, wall) == (1, 0), (cpu, wall)
    else:
        assert wall == 1 and cpu in (0, 1), (cpu, wall)

    def restarts() -> float:
        text = httpx.get(server.url + "/metrics").text
        return sum(
            _metric(text, "gtpo_rs_worker_restarts_total", f'reason="{reason}"')
            for reason in ("timeout", "wall_timeout")
        )

    # Answered at the wall-clock net (a 503), the check keeps its worker until its CPU budget
    # ends it: on a machine busy with other work, seconds after the answer.
    deadline = time.monotonic() + 60
    while restarts() < 1 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert restarts() >= 1
    # The replacement serves: two workers again, and a symbolic check succeeds.
    r = post(server, "/get_reward", {"query": [R + "<answer>\\sqrt{16}</answer>"], "labels": ["4"]})
    assert r.json()["rewards"] == [20.0]
    # The killed worker was replaced, not leaked.
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if len(rs_tools.descendants(server.proc.pid)) == processes_before:
            break
        time.sleep(0.1)
    assert len(rs_tools.descendants(server.proc.pid)) == processes_before


def test_metrics_count_requests_verdicts_and_cache(server) -> None:
    same = R + "<answer>\\frac{\\sqrt{3}}{3}</answer>"
    for _ in range(3):
        post(server, "/get_reward", {"query": [same], "labels": ["\\frac{1}{\\sqrt{3}}"]})
    text = httpx.get(server.url + "/metrics").text
    assert _metric(text, "gtpo_rs_requests_total", 'route="/get_reward",status="200"') >= 3
    assert _metric(text, "gtpo_rs_verdicts_total", 'reason="equivalent"') >= 3
    assert _metric(text, "gtpo_rs_cache_lookups_total", 'result="hit"') >= 2
    assert _metric(text, "gtpo_rs_workers_ready") == 1.0
    assert "gtpo_rs_request_seconds_bucket" in text


def test_auth_limits_and_strict_mode_from_environment(secured_server) -> None:
    body = {"query": [R + "<answer>4</answer>"], "labels": ["4"]}
    url = secured_server.url
    assert httpx.post(url + "/get_reward", json=body).status_code == 401
    bad = httpx.post(url + "/get_reward", json=body, headers={"Authorization": "Bearer nope"})
    assert bad.status_code == 401 and "token" in bad.json()["detail"]
    auth = {"Authorization": "Bearer s3cret"}
    assert httpx.post(url + "/get_reward", json=body, headers=auth).json()["rewards"] == [20.0]
    # OpenRLHF's client cannot send headers: the token may ride in the URL.
    assert httpx.post(url + "/get_reward?token=s3cret", json=body).status_code == 200
    assert httpx.post(url + "/v1/score", json=body).status_code == 401
    assert httpx.get(url + "/healthz").status_code == 200  # probes stay open

    # GTPO_RS_STRICT_FORMAT=true: text between the blocks loses the full format score.
    loose = {"query": [R + "so <answer>4</answer>"], "labels": ["4"]}
    assert httpx.post(url + "/get_reward", json=loose, headers=auth).json()["rewards"] == [1.5]

    # Batch limit (GTPO_RS_MAX_BATCH_SIZE=4).
    five = {"query": ["x"] * 5, "labels": ["1"] * 5}
    r = httpx.post(url + "/get_reward", json=five, headers=auth)
    assert r.status_code == 413 and "GTPO_RS_MAX_BATCH_SIZE" in r.json()["detail"]

    # Body limit (GTPO_RS_MAX_BODY_BYTES=4096), by Content-Length and by a chunked stream.
    big = {"query": ["x" * 5000], "labels": ["1"]}
    r = httpx.post(url + "/get_reward", json=big, headers=auth)
    assert r.status_code == 413 and "GTPO_RS_MAX_BODY_BYTES" in r.json()["detail"]

    def chunks():
        yield b'{"query": ["'
        for _ in range(10):
            yield b"x" * 1000
        yield b'"], "labels": ["1"]}'

    r = httpx.post(url + "/get_reward", content=chunks(), headers=auth)
    assert r.status_code == 413 and "GTPO_RS_MAX_BODY_BYTES" in r.json()["detail"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_no_process_outlives_the_server(make_server, rs_tools, sig: int) -> None:
    srv = make_server({"GTPO_RS_DEBUG_HANG_ANSWER": HANG, "GTPO_RS_VERIFY_TIMEOUT_S": "60"})
    # Keep a worker busy so that it cannot notice the closed pipe by itself.
    with pytest.raises(httpx.ReadTimeout):
        body = {"query": [R + f"<answer>{HANG}</answer>"], "labels": ["1"]}
        httpx.post(srv.url + "/get_reward", json=body, timeout=1.0)
    children = rs_tools.descendants(srv.proc.pid)
    assert len(children) >= 3  # two workers and the forkserver at least
    srv.stop(sig)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(rs_tools.alive(p) for p in children):
        time.sleep(0.1)
    assert not [p for p in children if rs_tools.alive(p)]


def test_metrics_add_up_across_uvicorn_workers(make_server) -> None:
    """With --workers 2 each process counts its own requests; /metrics must report their sum."""
    # A short folder of its own: under pytest-xdist, tmp_path leaves no room for the pool's
    # socket path (pool.check_socket_room).
    with tempfile.TemporaryDirectory(prefix="rs-") as folder:
        _metrics_add_up(make_server, Path(folder))


def _metrics_add_up(make_server, scratch: Path) -> None:
    srv = make_server(
        {"GTPO_RS_WORKERS": "2", "GTPO_RS_VERIFY_WORKERS": "1", "TMPDIR": str(scratch)}
    )
    body = {
        "query": ["Q: 1+1?<reasoning>r</reasoning><answer>2</answer>"],
        "prompts": ["Q: 1+1?"],
        "labels": ["2"],
    }
    sent = 40
    with httpx.Client(base_url=srv.url, timeout=30) as client:
        for _ in range(sent):
            # A fresh connection each time, as OpenRLHF's client does, spreads the requests.
            assert httpx.post(srv.url + "/get_reward", json=body, timeout=30).status_code == 200
        for _ in range(4):  # whichever worker answers the scrape, the totals are the same
            text = client.get("/metrics", headers={"Connection": "close"}).text
            counted = sum(
                float(line.rsplit(" ", 1)[1])
                for line in text.splitlines()
                if line.startswith("gtpo_rs_requests_total{") and 'route="/get_reward"' in line
            )
            assert counted == sent
            items = [ln for ln in text.splitlines() if ln.startswith("gtpo_rs_items_total")]
            assert items and float(items[0].rsplit(" ", 1)[1]) == sent
    assert list(scratch.glob("gtpo-rs-metrics-*")), "the shared samples live in a temp folder"
    srv.stop(signal.SIGTERM)
    assert not list(scratch.glob("gtpo-rs-metrics-*")), "a clean stop removes it"


DEGENERATE = {
    # The probes: each took 1-11 s and held /healthz as long.
    "12,000 spaces between two boxes": (
        R + "<answer>\\boxed{1}" + " " * 12_000 + "x\\boxed{2}</answer>", "", "2"),
    "12,000 spaces after a box": (R + "<answer>\\boxed{1}" + " " * 12_000 + "x</answer>", "", "1"),
    "?format=boxed, 12,000 spaces": (
        "w \\boxed{1}" + " " * 12_000 + "x\\boxed{2}", "?format=boxed", "2"),
    "800 KB of end tokens": (R + "<answer>1</answer>" + "</s>" * 200_000, "", "1"),
}  # fmt: skip


@pytest.mark.parametrize("name", list(DEGENERATE))
def test_degenerate_answers_are_answered_at_once_and_healthz_meanwhile(server, name: str) -> None:
    response, query, label = DEGENERATE[name]
    other = "w \\boxed{7}" if "boxed" in query else R + "<answer>7</answer>"  # its format
    body = {"query": [response, other], "labels": [label, "7"]}

    async def main() -> tuple[httpx.Response, float, float]:
        async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
            probes: list[float] = []

            async def health() -> None:
                while True:
                    t0 = time.perf_counter()
                    assert (await client.get("/healthz")).status_code == 200
                    probes.append(time.perf_counter() - t0)
                    await asyncio.sleep(0.02)

            polling = asyncio.create_task(health())
            await asyncio.sleep(0.1)
            t0 = time.perf_counter()
            r = await client.post("/v1/score" + query, json=body)
            took = time.perf_counter() - t0
            await asyncio.sleep(0.1)
            polling.cancel()
            return r, took, max(probes)

    r, took, slowest_health = asyncio.run(main())
    assert r.status_code == 200 and took < 1.0, (r.status_code, took)
    assert slowest_health < 1.0, slowest_health
    assert r.json()["results"][1]["reason"] == "equivalent"  # the batch's other item


def test_boxes_nested_400_deep_leave_the_rest_of_the_batch_scored(server) -> None:
    """RecursionError before: HTTP 500 for the whole batch and 135 KB of traceback in the log;
    OpenRLHF's client retried 5 times and then ended the run."""
    deep = "\\boxed{" * 400 + "1" + "}" * 400
    body = {
        "query": [
            R + "<answer>7</answer>",
            R + f"<answer>{deep}</answer>",
            R + "<answer>8</answer>",
        ]
        * 2,
        "labels": ["7", "1", "8", deep, "7", "8"],
    }
    r = post(server, "/get_reward", body)
    assert r.status_code == 200, r.text
    assert r.json()["rewards"] == [20.0, 10.0, 20.0, 10.0, 10.0, 20.0]


def test_a_verdict_not_computed_in_time_is_a_503_never_a_0(server) -> None:
    """Four hung checks ahead of a symbolic one from the same client: the symbolic check
    waits past its 2 s net. It used to come back 200 with reward 10 (accuracy 0, reason
    queue_timeout): a reward that looked computed. Now the request says it was not."""
    before = httpx.get(server.url + "/metrics").text
    hangs = [R + f"<answer>{HANG}</answer>"] * 4
    body = {
        "query": [*hangs, R + "<answer>\\frac{\\sqrt{2}}{2}</answer>"],
        "labels": [f"#### {k}" for k in range(4)] + ["\\frac{1}{\\sqrt{2}}"],
    }
    r = post(server, "/get_reward", body)
    assert r.status_code == 503, r.text
    assert r.headers["retry-after"] == "1"
    # Which of the net's two causes each late check meets (queue_timeout waiting, wall_timeout
    # running) depends on the machine's load; that the request says so does not.
    detail = r.json()["detail"]
    assert "could not be computed" in detail and (
        "queue_timeout" in detail or "wall_timeout" in detail
    )
    after = httpx.get(server.url + "/metrics").text
    assert _metric(after, "gtpo_rs_not_computed_total") > _metric(
        before, "gtpo_rs_not_computed_total"
    )
    # Asked again once the workers are free, the same answer is computed.
    alone = {"query": body["query"][-1:], "labels": body["labels"][-1:]}
    assert post(server, "/get_reward", alone).json()["rewards"] == [20.0]


def test_the_access_log_never_records_a_token(make_server) -> None:
    srv = make_server(
        {"GTPO_RS_ACCESS_LOG": "true", "GTPO_RS_LOG_LEVEL": "info", "GTPO_RS_API_TOKEN": "s3cret"}
    )
    body = {"query": [R + "<answer>4</answer>"], "labels": ["4"]}
    assert post(srv, "/get_reward?format=paper&token=s3cret", body).status_code == 200
    assert post(srv, "/get_reward?token=s3cretx", body).status_code == 401
    # Every spelling the server reads as the token is masked (before: accepted, logged in clear)
    for spelling in ("%74oken", "to%6Ben", "%74%6F%6B%65%6E"):
        assert post(srv, f"/get_reward?{spelling}=s3cret", body).status_code == 200
    srv.stop()
    log = srv.log.read_text()
    assert "/get_reward?format=paper&token=*** HTTP/1.1" in log, log[-2000:]
    assert "/get_reward?%74oken=*** HTTP/1.1" in log, log[-2000:]
    assert "s3cret" not in log


@pytest.mark.parametrize(
    ("headers", "query", "status"),
    [
        ({"Authorization": "Bearer s3cret"}, "", 200),
        ({}, "?token=s3cret", 200),
        ({"Authorization": "bearer   s3cret"}, "", 200),
        # An Authorization header decides alone: before, an empty or wrong Bearer beside a
        # right ?token passed.
        ({"Authorization": "Bearer"}, "?token=s3cret", 401),  # an empty Bearer, trimmed
        ({"Authorization": "Bearer nope"}, "?token=s3cret", 401),
        ({"Authorization": "Basic czNjcmV0"}, "?token=s3cret", 401),
        ({}, "?token=", 401),
    ],
)
def test_the_token_comes_from_the_header_when_there_is_one(
    secured_server, headers: dict, query: str, status: int
) -> None:
    body = {"query": [R + "<answer>4</answer>"], "labels": ["4"]}
    reply = httpx.post(f"{secured_server.url}/get_reward{query}", json=body, headers=headers)
    assert reply.status_code == status, reply.text


def test_every_post_route_refuses_a_request_without_the_token(secured_server) -> None:
    """The scoring routes check the token themselves (routes._accepted), not through a
    dependency the router adds: every POST route the server serves, a new one too, is asked."""
    posts = sorted(r.path for r in router.routes if "POST" in getattr(r, "methods", ()))
    assert {"/get_reward", "/v1/score", "/v1/equivalent"} <= set(posts)
    for path in posts:
        reply = httpx.post(secured_server.url + path, json={"pairs": [], "query": [], "labels": []})
        assert reply.status_code == 401, (path, reply.text)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"query": ["<answer>5</answer>"], "labels": ["4"], "labels": ["5"]}',
        b'{"query": ["<answer>5</answer>"], "labels": ["4"], "\\u006cabels": ["5"]}',
        b'{"pairs": [{"answer": "5", "reference": "4", "reference": "5"}]}',
    ],
)
def test_a_key_given_twice_is_refused_not_overwritten(server, raw: bytes) -> None:
    """Before: the last one won, also spelled with an escape, and the wrong label was scored."""
    path = "/v1/equivalent" if b"pairs" in raw else "/get_reward"
    reply = httpx.post(server.url + path, content=raw, headers={"Content-Type": "application/json"})
    assert reply.status_code == 422, reply.text
    assert "is given twice in one object" in reply.json()["detail"], reply.text
