"""The HTTP client of the GTPO reward server: every reward and verdict the training side reads
comes through ``RewardClient``.

- ``score(prompts, responses, labels, per_request)`` → ``Rewards``: ``POST /get_reward`` in
  OpenRLHF's request shape, requests sent concurrently (the demo trainer, a TRL trainer);
- ``verdicts(queries, prompts, labels)``: the full per-item verdicts of ``POST /v1/score`` in
  concurrent batches (``gtpo eval``);
- ``equivalent``, ``find_match`` and ``group``: answer equivalence as the server judges it
  (``POST /v1/equivalent``; maj@k groups answers with it);
- ``wait_ready``: block until ``GET /readyz`` answers 200.

Connection errors, timeouts, HTTP 5xx, 408 and 429 are retried with exponential backoff; any
other failure raises ``RewardServerError`` with a message that says what to change. Results
always come back in input order, whatever order the answers arrive in. The server may run on
another host (``http://`` or ``https://``; ``token`` is sent as ``Authorization: Bearer``).
Standard library HTTP (urllib): the client adds no dependency.
"""

from __future__ import annotations

import json
import logging
import re
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

FIRST_BACKOFF_S = 0.5  # then doubled after each failed attempt
_START_HINT = "start it with: gtpo-reward-server --port PORT"


def retryable_status(code: int) -> bool:
    """An HTTP status that a later attempt may not get: any 5xx, 408 (timeout), 429 (busy).

    Every other 4xx is the request's own fault, so retrying cannot help.
    """
    return code >= 500 or code in (408, 429)


class RewardServerError(RuntimeError):
    """The reward server is unreachable, refused a request, or answered outside the protocol."""


@dataclass(frozen=True)
class Rewards:
    """Per completion, in input order: the total reward, the format reward and the accuracy
    reward, on the scale of ``reward_server.protocol`` (0..20, 0..10, 0 or 10)."""

    total: list[float]
    format: list[float]
    accuracy: list[float]


def backoff_delays(
    first_s: float = FIRST_BACKOFF_S, max_s: float = float("inf")
) -> Iterator[float]:
    """The waits between attempts of one request: ``first_s``, doubled each time, at most
    ``max_s`` (exponential backoff, so that a restarting server is not hammered)."""
    delay = first_s
    while True:
        yield delay
        delay = min(2 * delay, max_s)


class RewardClient:
    """Client of one reward server at ``url`` (``http(s)://host:port``, no path).

    ``retries`` extra attempts per request (backoff 0.5 s, 1 s, 2 s, ...); ``timeout_s`` per
    attempt. ``concurrency`` requests run at once; ``batch_size`` items go in one ``/v1/score``
    or ``/v1/equivalent`` request. Use as a context manager, or call ``close()``.
    """

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        timeout_s: float = 120.0,
        retries: int = 4,
        batch_size: int = 64,
        concurrency: int = 8,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"reward URL must start with http:// or https://, got {url!r}")
        if batch_size < 1 or concurrency < 1 or retries < 0:
            raise ValueError("batch_size and concurrency must be >= 1 and retries >= 0")
        self.url = url.rstrip("/")
        self.token = token
        self.timeout_s = timeout_s
        self.retries = retries
        self.batch_size = batch_size
        self.concurrency = concurrency
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="reward")

    def close(self) -> None:
        """Wait for requests in flight and stop the client's threads."""
        self._pool.shutdown(wait=True)

    def __enter__(self) -> RewardClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ transport

    def _request(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        """POST ``payload`` as JSON to ``path``; retried as the class says; the decoded answer."""
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(
            self.url + path, data=json.dumps(payload).encode(), headers=headers, method="POST"
        )
        delays = backoff_delays()
        for attempt in range(self.retries + 1):
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                    return json.loads(response.read())
            except urllib.error.HTTPError as err:
                detail = err.read().decode(errors="replace")[:500]
                if not retryable_status(err.code):
                    hint = {
                        401: " (set --reward-token or GTPO_RS_API_TOKEN)",
                        413: " (lower --score-batch-size)",
                    }.get(err.code, "")
                    raise RewardServerError(
                        f"{self.url}{path} answered {err.code}: {detail}{hint}"
                    ) from None
                problem = f"HTTP {err.code}: {detail}"
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as err:
                problem = str(getattr(err, "reason", err))
            if attempt < self.retries:
                delay = next(delays)
                log.warning("%s%s failed (%s); retry in %.1f s", self.url, path, problem, delay)
                time.sleep(delay)
        raise RewardServerError(
            f"{self.url}{path} failed after {self.retries + 1} attempts ({problem}); is the "
            f"reward server running? ({_START_HINT}, or check --reward-url)"
        )

    def wait_ready(self, timeout_s: float = 120.0, proc: subprocess.Popen | None = None) -> None:
        """Block until ``GET /readyz`` says ready (the verification workers are warm).

        ``proc``: the server's process when this program started it; its exit fails at once.
        """
        deadline = time.monotonic() + timeout_s
        last = "no answer"
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                raise RewardServerError(
                    f"the reward server exited with code {proc.returncode} before it was ready; "
                    "see its log"
                )
            try:
                with urllib.request.urlopen(self.url + "/readyz", timeout=2.0) as response:
                    if response.status == 200:
                        return
            except urllib.error.HTTPError as err:
                last = f"HTTP {err.code} {err.read().decode(errors='replace')[:200]}"
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as err:
                last = str(getattr(err, "reason", err))
            time.sleep(0.1)
        raise RewardServerError(
            f"reward server at {self.url} not ready after {timeout_s:.0f} s ({last}); {_START_HINT}"
        )

    # ------------------------------------------------------------------ /get_reward

    def get_reward(
        self, queries: Sequence[str], prompts: Sequence[str] | None, labels: Sequence[Any]
    ) -> Rewards:
        """One ``POST /get_reward`` (OpenRLHF's body: ``query`` is prompt + response)."""
        payload: dict[str, Any] = {"query": list(queries), "labels": list(labels)}
        if prompts is not None:
            payload["prompts"] = list(prompts)
        body = self._request("/get_reward", payload)
        try:
            extra = body["extra_logs"]
            got = (body["rewards"], extra["format_reward"], extra["accuracy_reward"])
        except (KeyError, TypeError):
            raise RewardServerError(
                f"unexpected /get_reward answer {str(body)[:300]}; expected rewards and "
                "extra_logs.format_reward / accuracy_reward"
            ) from None
        if any(len(values) != len(queries) for values in got):
            raise RewardServerError(
                f"/get_reward returned {len(got[0])} rewards for {len(queries)} queries"
            )
        return Rewards(*(list(map(float, values)) for values in got))

    def score(
        self, prompts: list[str], responses: list[str], labels: list[Any], per_request: int
    ) -> Rewards:
        """Rewards of ``prompt + response`` against ``labels``, ``per_request`` samples a
        request, ``concurrency`` requests at a time.

        Each body is ``{"query": [prompt + response, …], "prompts": […], "labels": […]}``,
        exactly what OpenRLHF sends (responses decoded with special tokens kept).
        """
        if not len(prompts) == len(responses) == len(labels):
            raise ValueError("prompts, responses and labels must have the same length")
        chunks = [
            range(i, min(i + per_request, len(prompts)))
            for i in range(0, len(prompts), per_request)
        ]

        def call(rows: range) -> Rewards:
            return self.get_reward(
                [prompts[i] + responses[i] for i in rows],
                [prompts[i] for i in rows],
                [labels[i] for i in rows],
            )

        out = Rewards([], [], [])
        for part in self._pool.map(call, chunks):  # map yields in submission order
            out.total.extend(part.total)
            out.format.extend(part.format)
            out.accuracy.extend(part.accuracy)
        return out

    # ------------------------------------------------------------------ /v1/score

    def _results(self, path: str, payload: dict[str, Any], n: int) -> list[dict[str, Any]]:
        """The ``results`` list of a POST to ``path``, checked to hold one entry per item."""
        results = self._request(path, payload).get("results")
        if not isinstance(results, list) or len(results) != n:
            raise RewardServerError(
                f"{self.url}{path} returned {len(results or [])} results for {n} items: is the "
                "URL a GTPO reward server (with /v1/score and /v1/equivalent)?"
            )
        return results

    def verdicts_batch(
        self, queries: Sequence[str], prompts: Sequence[str] | None, labels: Sequence[Any]
    ) -> list[dict[str, Any]]:
        """One ``/v1/score`` request; the per-item verdicts (see ``reward_server.schemas``)."""
        payload: dict[str, Any] = {"query": list(queries), "labels": list(labels)}
        if prompts is not None:
            payload["prompts"] = list(prompts)
        return self._results("/v1/score", payload, len(queries))

    def verdicts(
        self,
        queries: Sequence[str],
        prompts: Sequence[str] | None,
        labels: Sequence[Any],
        *,
        desc: str = "score",
    ) -> list[dict[str, Any]]:
        """The verdict of every item, ``batch_size`` per request, ``concurrency`` requests at a
        time, with a progress bar; results come back in input order."""
        from tqdm.auto import tqdm

        def one(start: int) -> list[dict[str, Any]]:
            end = start + self.batch_size
            return self.verdicts_batch(
                queries[start:end], None if prompts is None else prompts[start:end],
                labels[start:end],
            )  # fmt: skip

        out: list[dict[str, Any]] = []
        with tqdm(total=len(queries), desc=desc, unit="sample") as bar:
            for batch in self._pool.map(one, range(0, len(queries), self.batch_size)):
                out.extend(batch)
                bar.update(len(batch))
        return out

    # ------------------------------------------------------------------ /v1/equivalent

    def equivalent(self, pairs: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
        """One ``/v1/equivalent`` request: the server's verdict (``equivalent``, ``reason``) on
        each (answer, reference) pair, in order."""
        payload = {"pairs": [{"answer": a, "reference": r} for a, r in pairs]}
        return self._results("/v1/equivalent", payload, len(pairs))

    def find_match(self, answer: str, representatives: Sequence[str]) -> int | None:
        """Index of the first representative the server holds ``answer`` equivalent to."""
        for start in range(0, len(representatives), self.batch_size):
            reps = representatives[start : start + self.batch_size]
            results = self.equivalent([(answer, rep) for rep in reps])
            for offset, item in enumerate(results):
                if item.get("equivalent") is True:
                    return start + offset
        return None

    def group(
        self, answers_per_prompt: Sequence[Sequence[str | None]], *, desc: str = "group answers"
    ) -> list[list[int | None]]:
        """Equivalence classes of each prompt's answers (see ``gtpo.eval.metrics.group_answers``),
        prompts grouped concurrently."""
        from tqdm.auto import tqdm

        from gtpo.eval.metrics import group_answers

        def one(answers: Sequence[str | None]) -> list[int | None]:
            return group_answers(answers, find_match=self.find_match)

        out = []
        with tqdm(total=len(answers_per_prompt), desc=desc, unit="prompt") as bar:
            for labels in self._pool.map(one, answers_per_prompt):
                out.append(labels)
                bar.update()
        return out


def request_count(url: str, route: str = "/get_reward") -> float:
    """Requests served on ``route`` so far, read from the server's Prometheus ``/metrics``."""
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/metrics", timeout=5.0) as response:
            text = response.read().decode()
    except (urllib.error.URLError, OSError) as err:
        raise RewardServerError(f"GET {url}/metrics failed ({err})") from None
    pattern = re.compile(r"^gtpo_rs_requests_total\{(?P<labels>[^}]*)\}\s+(?P<value>\S+)$")
    total = 0.0
    for line in text.splitlines():
        match = pattern.match(line)
        if match and f'route="{route}"' in match["labels"]:
            total += float(match["value"])
    return total
