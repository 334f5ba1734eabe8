"""Rewards over HTTP: start the reward server on 127.0.0.1 (or use a running one) and call
``POST /get_reward`` in OpenRLHF's request shape.

Every reward of the demo, in training and evaluation, comes through here. Requests carry one
prompt's group each and are sent concurrently; results are put back by index, so neither the
order in which responses arrive nor thread timing can change what the trainer sees.
Standard library only (urllib), so the client adds no dependency.
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"


class RewardServerError(RuntimeError):
    """The reward server could not be started or answered badly."""


@dataclass(frozen=True)
class Rewards:
    """Per completion: total reward (0..20), format reward (0..10), accuracy reward (0/10)."""

    total: list[float]
    format: list[float]
    accuracy: list[float]


def _get(url: str, timeout: float = 5.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(errors="replace")


def _post_json(url: str, payload: dict, timeout: float) -> dict:
    request = urllib.request.Request(
        url,
        data=json.dumps(payload).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as err:
        detail = err.read().decode(errors="replace")[:500]
        raise RewardServerError(f"POST {url} returned HTTP {err.code}: {detail}") from None
    except (urllib.error.URLError, TimeoutError, ConnectionError) as err:
        raise RewardServerError(
            f"POST {url} failed ({err}); is the reward server running? (--reward-url)"
        ) from None


def check_loopback(url: str) -> str:
    """The demo talks to a local server only: refuse anything but a loopback address."""
    parts = urlsplit(url)
    if parts.scheme != "http" or parts.hostname not in (LOOPBACK, "localhost", "::1"):
        raise ValueError(
            f"--reward-url {url!r}: the demo only sends rewards traffic to a server on this "
            "machine; use http://127.0.0.1:PORT (for example the compose service's published "
            "port)"
        )
    return url.rstrip("/")


def wait_ready(url: str, timeout_s: float = 60.0, proc: subprocess.Popen | None = None) -> None:
    """Poll ``GET /readyz`` until it answers 200 (verification workers warm)."""
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RewardServerError(
                f"the reward server exited with code {proc.returncode} before it was ready; "
                "see its log in the report folder (reward_server.log)"
            )
        try:
            status, body = _get(f"{url}/readyz", timeout=2.0)
            if status == 200:
                return
            last = f"HTTP {status} {body[:200]}"
        except (urllib.error.URLError, ConnectionError, TimeoutError) as err:
            last = str(err)
        time.sleep(0.1)
    raise RewardServerError(f"reward server at {url} not ready after {timeout_s:.0f} s ({last})")


def request_count(url: str, route: str = "/get_reward") -> float:
    """Requests served on `route` so far, read from the server's Prometheus ``/metrics``."""
    status, text = _get(f"{url}/metrics")
    if status != 200:
        raise RewardServerError(f"GET {url}/metrics returned HTTP {status}")
    pattern = re.compile(r"^gtpo_rs_requests_total\{(?P<labels>[^}]*)\}\s+(?P<value>\S+)$")
    total = 0.0
    for line in text.splitlines():
        match = pattern.match(line)
        if match and f'route="{route}"' in match["labels"]:
            total += float(match["value"])
    return total


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


class LocalRewardServer:
    """``python -m reward_server`` as a child process on 127.0.0.1 and a free port.

    Use as a context manager; the server and its workers are stopped on exit.
    """

    def __init__(self, log_path: Path, verify_workers: int = 1) -> None:
        self.port = _free_port()
        self.url = f"http://{LOOPBACK}:{self.port}"
        self.log_path = log_path
        self.verify_workers = verify_workers
        self.proc: subprocess.Popen | None = None

    def start(self) -> LocalRewardServer:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        command = [
            sys.executable,
            "-m",
            "reward_server",
            "--host",
            LOOPBACK,
            "--port",
            str(self.port),
            "--verify-workers",
            str(self.verify_workers),
            "--log-level",
            "warning",
        ]
        log.info("starting the reward server: %s", " ".join(command))
        with open(self.log_path, "wb") as sink:
            # A session of its own, so Ctrl-C in the terminal reaches the demo, which then stops
            # the server cleanly instead of both racing to shut down.
            self.proc = subprocess.Popen(
                command,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        return self

    def wait(self, timeout_s: float = 60.0) -> None:
        wait_ready(self.url, timeout_s, self.proc)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> LocalRewardServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class RewardClient:
    """Scores completions through ``POST /get_reward`` (OpenRLHF's remote reward protocol)."""

    def __init__(self, url: str, concurrency: int = 8, timeout_s: float = 60.0) -> None:
        self.url = check_loopback(url)
        self.timeout_s = timeout_s
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="reward")

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def score(
        self, prompts: list[str], responses: list[str], labels: list[str], per_request: int
    ) -> Rewards:
        """Rewards of ``prompt + response`` against `labels`, `per_request` samples a request.

        The request body is ``{"query": [prompt + response, …], "prompts": […], "labels":
        […]}``, exactly what OpenRLHF sends; responses are decoded with special tokens kept.
        """
        if not len(prompts) == len(responses) == len(labels):
            raise ValueError("prompts, responses and labels must have the same length")
        chunks = [
            range(i, min(i + per_request, len(prompts)))
            for i in range(0, len(prompts), per_request)
        ]

        def call(rows: range) -> dict:
            payload = {
                "query": [prompts[i] + responses[i] for i in rows],
                "prompts": [prompts[i] for i in rows],
                "labels": [labels[i] for i in rows],
            }
            return _post_json(f"{self.url}/get_reward", payload, self.timeout_s)

        total: list[float] = []
        fmt: list[float] = []
        acc: list[float] = []
        # map() yields in submission order, whatever order the answers come back in.
        for rows, body in zip(chunks, self._pool.map(call, chunks), strict=True):
            try:
                extra = body["extra_logs"]
                got = (body["rewards"], extra["format_reward"], extra["accuracy_reward"])
            except (KeyError, TypeError):
                raise RewardServerError(
                    f"unexpected /get_reward answer {str(body)[:300]}; expected rewards and "
                    "extra_logs.format_reward / accuracy_reward"
                ) from None
            if any(len(values) != len(rows) for values in got):
                raise RewardServerError(
                    f"/get_reward returned {len(got[0])} rewards for {len(rows)} queries"
                )
            total.extend(map(float, got[0]))
            fmt.extend(map(float, got[1]))
            acc.extend(map(float, got[2]))
        return Rewards(total, fmt, acc)
