"""The HTTP client of the GTPO reward server: every reward and verdict the training side reads
comes through this module.

- ``RewardClient`` (threads; the demo, ``gtpo eval``, TRL's ``RewardServerReward``):
  ``score(prompts, responses, labels, per_request)`` → ``Rewards`` (``POST /get_reward`` in
  OpenRLHF's request shape, requests sent concurrently); ``verdicts`` (``POST /v1/score``);
  ``equivalent`` and ``find_match`` (``POST /v1/equivalent``, maj@k's grouping); ``wait_ready``
  (``GET /readyz``); ``concurrently`` (a function over items on the client's threads).
- ``AsyncRewardClient`` (asyncio; GTPO's OpenRLHF rollout actors): ``get_reward(payload)``
  posts OpenRLHF's ``/get_reward`` body to the endpoint URLs OpenRLHF was given.

Both keep their connections for their lifetime (one pooled httpx client per server; one aiohttp
session per server in the rollout actors, see ``AsyncRewardClient``), so connections are reused:
a keep-alive connection per concurrent request, not one per request. Both take one server or several
(``"http://a:8000,http://b:8000"`` or a list): each request starts at the next server in turn
(`ServerRotation`), and a failure that a later attempt may not get (a connection error, a
timeout, HTTP 5xx, 408 or 429: ``retryable_status``) moves it to the next server at once. When
every server of a round has failed, the request waits (backoff 0.5 s, doubled up to 8 s) and
starts another round, until ``retry_for_s`` seconds have passed since its first attempt; then it
raises ``RewardServerError`` naming the servers. That policy is declared once (`retrying`,
tenacity's retry loop), for the threaded client, the asyncio client and the readiness wait. A
request the server refuses (any other 4xx) or an answer outside the protocol raises at once:
retrying cannot fix it. Results come back in input order, whatever order the answers arrive in.
Outages are logged once when they start, every 30 s while they last and once when they end
(`OutageLog`), not once per request.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

import httpx
from tenacity import AsyncRetrying, RetryCallState, Retrying, retry_if_exception_type
from tenacity import stop_before_delay as stop_before_s

from reward_server import protocol

log = logging.getLogger(__name__)

FIRST_BACKOFF_S = 0.5  # then doubled after each failed round, up to MAX_BACKOFF_S
MAX_BACKOFF_S = 8.0
READY_POLL_S = 0.1  # the readiness wait asks this often: a server comes up within a second
OUTAGE_LOG_EVERY_S = 30.0
_START_HINT = "start it with: gtpo-reward-server --port PORT"

Item = TypeVar("Item")
Result = TypeVar("Result")


# The HTTP libraries whose INFO records are one line per request ("HTTP Request: POST …/get_reward
# 200 OK"): thousands in a demo or eval run, drowning its progress bars.
HTTP_REQUEST_LOGGERS = ("httpx", "httpcore")


def quiet_request_logs(level: int) -> None:
    """Keep the HTTP libraries' per-request lines out of the log unless `level` is DEBUG; their
    warnings and the client's own outage messages (`gtpo.reward_client`) stay."""
    for name in HTTP_REQUEST_LOGGERS:
        logging.getLogger(name).setLevel(
            logging.DEBUG if level <= logging.DEBUG else logging.WARNING
        )


def retryable_status(code: int) -> bool:
    """An HTTP status that a later attempt may not get: any 5xx, 408 (timeout), 429 (busy).

    Every other 4xx is the request's own fault, so retrying cannot help.
    """
    return code >= 500 or code in (408, 429)


class RewardServerError(RuntimeError):
    """The reward server is unreachable, refused a request, or answered outside the protocol."""


class Retryable(Exception):
    """One attempt at `server` failed in a way the next attempt may not (the message says how)."""

    def __init__(self, server: str, reason: str) -> None:
        super().__init__(reason)
        self.server = server


@dataclass(frozen=True)
class Rewards:
    """Per completion, in input order: the total reward, the format reward and the accuracy
    reward, on the scale of ``reward_server.protocol`` (0..20, 0..10, 0 or 10)."""

    total: list[float]
    format: list[float]
    accuracy: list[float]


def retrying(
    budget_s: float,
    gave_up: Callable[[RetryCallState], str],
    *,
    servers: int = 1,
    first_s: float = FIRST_BACKOFF_S,
    max_s: float = MAX_BACKOFF_S,
    failed: Callable[[RetryCallState], None] | None = None,
    asynchronous: bool = False,
) -> Retrying | AsyncRetrying:
    """The client's retry policy, declared once: an attempt that raises `Retryable` is followed
    by the next, on the next server (the caller rotates: `ServerRotation.cycle`); after each
    round of ``servers`` failed attempts it waits ``first_s``, doubled each round up to
    ``max_s`` (so a restarting server is not hammered), until the next attempt would start
    ``budget_s`` seconds or more after the first (always made). Then it raises
    RewardServerError(``gave_up(state)``). ``failed`` sees each failed attempt; any other
    exception ends the loop at once. The threaded client and the readiness wait iterate
    tenacity's `Retrying`, the asyncio client its `AsyncRetrying`."""

    def wait(state: RetryCallState) -> float:
        rounds, within = divmod(state.attempt_number, servers)
        return 0.0 if within else min(max_s, first_s * 2 ** (rounds - 1))

    def give_up(state: RetryCallState) -> NoReturn:
        raise RewardServerError(gave_up(state))

    return (AsyncRetrying if asynchronous else Retrying)(
        retry=retry_if_exception_type(Retryable),
        wait=wait,
        stop=stop_before_s(budget_s),
        after=failed or (lambda state: None),
        retry_error_callback=give_up,
    )


def last_failure(state: RetryCallState) -> str:
    """Why the last attempt of `state` failed."""
    return str(state.outcome.exception()) if state.outcome else "no attempt"


def server_urls(urls: str | Sequence[str]) -> tuple[str, ...]:
    """The servers of one reward service: a list, or one string of comma-separated URLs (the
    spelling of OpenRLHF's --reward.remote_url). Each must start with http:// or https://."""
    items = urls.split(",") if isinstance(urls, str) else list(urls)
    out = tuple(u.strip().rstrip("/") for u in items if u.strip())
    if not out:
        raise ValueError(f"no reward server URL in {urls!r}")
    for url in out:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"reward URL must start with http:// or https://, got {url!r}")
    return out


class ServerRotation:
    """Which server each attempt of a request goes to.

    Request k starts at server k mod n (round robin, as OpenRLHF rotates its remote URLs), and
    each failed attempt moves on to the next server. Thread- and task-safe (one shared counter).
    """

    def __init__(self, urls: Sequence[str]) -> None:
        self.urls = tuple(urls)
        self._next = itertools.count()
        self._lock = threading.Lock()

    def cycle(self) -> Iterator[str]:
        """The servers of one request's attempts, in turn, from the next request's start."""
        with self._lock:
            start = next(self._next)
        return (self.urls[(start + k) % len(self.urls)] for k in itertools.count())


class OutageLog:
    """One warning when a server stops answering, one every 30 s while it stays down, one when
    it answers again. Concurrent requests retry on their own; without this a restart would
    print one line per request per attempt."""

    def __init__(self, retry_for_s: float) -> None:
        self.retry_for_s = retry_for_s
        self._down_since: dict[str, float] = {}
        self._last_warning: dict[str, float] = {}
        self._lock = threading.Lock()

    def failed(self, state: RetryCallState) -> None:
        """After a failed attempt (the `failed` callback of `retrying`)."""
        error = state.outcome.exception() if state.outcome else None
        if not isinstance(error, Retryable):
            return
        url, now = error.server, time.monotonic()
        with self._lock:
            since = self._down_since.setdefault(url, now)
            if now - self._last_warning.get(url, -OUTAGE_LOG_EVERY_S) < OUTAGE_LOG_EVERY_S:
                return
            self._last_warning[url] = now
        log.warning(
            "reward server %s unreachable for %.0f s (%s); retrying for up to %.0f s",
            url, now - since, error, self.retry_for_s,
        )  # fmt: skip

    def succeeded(self, url: str) -> None:
        with self._lock:
            since = self._down_since.pop(url, None)
            self._last_warning.pop(url, None)
        if since is not None:
            log.warning(
                "reward server %s answers again after %.1f s", url, time.monotonic() - since
            )


_REFUSAL_HINTS = {401: " (set --reward-token or GTPO_RS_API_TOKEN)", 413: " (send smaller batches)"}


def _decode(server: str, url: str, status: int, text: str) -> Any:
    """The JSON answer of one attempt at `url` (on `server`); raises Retryable or, for a
    refusal, RewardServerError."""
    if retryable_status(status):
        raise Retryable(server, f"HTTP {status}")
    if status >= 400:
        detail = text.strip().splitlines()[:1]
        raise RewardServerError(
            f"reward server {url} refused the request: HTTP {status} "
            f"{detail[0][:300] if detail else ''}".rstrip()
            + _REFUSAL_HINTS.get(status, "")
        )
    try:
        return json.loads(text)
    except ValueError as exc:
        raise RewardServerError(f"reward server {url} answered non-JSON: {exc}") from None


def _transport_error(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}".rstrip(": ")


def _gave_up(urls: Sequence[str], hint: str) -> Callable[[RetryCallState], str]:
    return lambda state: (
        f"reward server {', '.join(urls)} did not answer for {state.seconds_since_start or 0:.0f}"
        f" s ({state.attempt_number} attempts, last: {last_failure(state)}); {hint}"
    )


class RewardClient:
    """Client of one reward service at ``url`` (``http(s)://host:port``, no path; several
    servers comma-separated or as a list).

    ``timeout_s`` per attempt; retryable failures are retried for ``retry_for_s`` seconds (see
    the module). ``concurrency`` requests run at once, over as many pooled connections;
    ``batch_size`` items go in one ``/v1/score`` or ``/v1/equivalent`` request. ``hint`` ends
    the message of a request that ran out of time. ``response_format`` (``paper``, ``think``,
    ``boxed``: ``reward_server.protocol``'s profiles) is sent as ``?format=`` with every
    scoring request; None leaves the server's own setting. Use as a context manager, or call
    ``close()``.
    """

    def __init__(
        self,
        url: str | Sequence[str],
        *,
        token: str | None = None,
        timeout_s: float = 120.0,
        retry_for_s: float = 30.0,
        batch_size: int = 64,
        concurrency: int = 8,
        hint: str = f"is the reward server running? ({_START_HINT}, or check --reward-url)",
        response_format: str | None = None,
    ) -> None:
        if batch_size < 1 or concurrency < 1 or retry_for_s < 0:
            raise ValueError("batch_size and concurrency must be >= 1 and retry_for_s >= 0")
        # Checked here, against the profiles the server declares: a typo fails before any run.
        self.response_format = (
            None if response_format is None else protocol.response_format(response_format).name
        )
        self._format_query = "" if response_format is None else f"?format={self.response_format}"
        self.servers = ServerRotation(server_urls(url))
        self.url = self.servers.urls[0]
        self.retry_for_s = retry_for_s
        self.batch_size = batch_size
        self.concurrency = concurrency
        self.hint = hint
        self.outages = OutageLog(retry_for_s)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        # One connection pool per server (one shared pool would close idle connections to one
        # server to open them to the next as requests rotate). pool=None: waiting for one of
        # our own pooled connections is not a server failure.
        self._http = {
            url: httpx.Client(
                headers=headers,
                timeout=httpx.Timeout(timeout_s, pool=None),
                limits=httpx.Limits(
                    max_connections=concurrency, max_keepalive_connections=concurrency
                ),
            )
            for url in self.servers.urls
        }
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="reward")

    def close(self) -> None:
        """Wait for requests in flight, stop the client's threads and close its connections."""
        self._pool.shutdown(wait=True)
        for http in self._http.values():
            http.close()

    def __enter__(self) -> RewardClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ transport

    def _request(self, path: str, payload: dict[str, Any]) -> Any:
        """POST ``payload`` as JSON to ``path``, retried and failed over as the module says."""
        servers = self.servers.cycle()
        policy = retrying(
            self.retry_for_s, _gave_up(self.servers.urls, self.hint),
            servers=len(self.servers.urls), failed=self.outages.failed,
        )  # fmt: skip
        for attempt in policy:
            with attempt:
                url = next(servers)
                try:
                    response = self._http[url].post(url + path, json=payload)
                except httpx.TransportError as exc:
                    raise Retryable(url, _transport_error(exc)) from None
                answer = _decode(url, url + path, response.status_code, response.text)
        self.outages.succeeded(url)
        return answer

    def wait_ready(self, timeout_s: float = 120.0, proc: subprocess.Popen | None = None) -> None:
        """Block until ``GET /readyz`` says ready on every server (verification workers warm),
        asking every `READY_POLL_S` (the client's retry policy, with that wait).

        ``proc``: the server's process when this program started it; its exit fails at once.
        """
        deadline = time.monotonic() + timeout_s
        for url in self.servers.urls:
            policy = retrying(
                deadline - time.monotonic(),
                lambda state, url=url: f"reward server at {url} not ready after {timeout_s:.0f} "
                f"s ({last_failure(state)}); {_START_HINT}",
                first_s=READY_POLL_S, max_s=READY_POLL_S,
            )  # fmt: skip
            for attempt in policy:
                with attempt:
                    if proc is not None and proc.poll() is not None:
                        raise RewardServerError(
                            f"the reward server exited with code {proc.returncode} before it "
                            "was ready; see its log"
                        )
                    try:
                        response = self._http[url].get(url + "/readyz", timeout=2.0)
                    except httpx.TransportError as exc:
                        raise Retryable(url, _transport_error(exc)) from None
                    if response.status_code != 200:
                        raise Retryable(url, f"HTTP {response.status_code} {response.text[:200]}")

    def concurrently(
        self, function: Callable[[Item], Result], items: Sequence[Item], *, desc: str | None = None
    ) -> list[Result]:
        """``function`` of each item (each call may send requests), ``concurrency`` calls at a
        time on the client's threads, in input order; with a progress bar when ``desc`` is
        given."""
        results = self._pool.map(function, items)  # yields in submission order
        if desc is None:
            return list(results)
        from tqdm.auto import tqdm

        return list(tqdm(results, total=len(items), desc=desc))

    # ------------------------------------------------------------------ /get_reward

    def get_reward(
        self, queries: Sequence[str], prompts: Sequence[str] | None, labels: Sequence[Any]
    ) -> Rewards:
        """One ``POST /get_reward`` (OpenRLHF's body: ``query`` is prompt + response)."""
        payload: dict[str, Any] = {"query": list(queries), "labels": list(labels)}
        if prompts is not None:
            payload["prompts"] = list(prompts)
        body = self._request("/get_reward" + self._format_query, payload)
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
        for part in self.concurrently(call, chunks):
            out.total.extend(part.total)
            out.format.extend(part.format)
            out.accuracy.extend(part.accuracy)
        return out

    # ------------------------------------------------------------------ /v1/score

    def _results(self, path: str, payload: dict[str, Any], n: int) -> list[dict[str, Any]]:
        """The ``results`` list of a POST to ``path``, checked to hold one entry per item."""
        answer = self._request(path, payload)
        results = answer.get("results") if isinstance(answer, dict) else None
        if not isinstance(results, list) or len(results) != n:
            raise RewardServerError(
                f"{self.url}{path} returned {len(results or [])} results for {n} items: is the "
                "URL a GTPO reward server (with /v1/score and /v1/equivalent)?"
            )
        return results

    def verdicts_batch(
        self, queries: Sequence[str], prompts: Sequence[str] | None, labels: Sequence[Any]
    ) -> list[dict[str, Any]]:
        """One ``/v1/score`` request; the per-item verdicts (see
        ``reward_server.service.schemas``)."""
        payload: dict[str, Any] = {"query": list(queries), "labels": list(labels)}
        if prompts is not None:
            payload["prompts"] = list(prompts)
        return self._results("/v1/score" + self._format_query, payload, len(queries))

    def verdicts(
        self,
        queries: Sequence[str],
        prompts: Sequence[str] | None,
        labels: Sequence[Any],
        *,
        per_request: int | None = None,
        desc: str | None = "score",
    ) -> list[dict[str, Any]]:
        """The verdict of every item, ``per_request`` (default ``batch_size``) per request,
        ``concurrency`` requests at a time, with a progress bar unless ``desc`` is None; results
        come back in input order."""
        size = per_request or self.batch_size

        def one(start: int) -> list[dict[str, Any]]:
            return self.verdicts_batch(
                queries[start : start + size],
                None if prompts is None else prompts[start : start + size],
                labels[start : start + size],
            )

        batches = self.concurrently(one, range(0, len(queries), size), desc=desc)
        return [verdict for batch in batches for verdict in batch]

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


class AsyncRewardClient:
    """OpenRLHF's ``/get_reward`` call for an asyncio caller (one per rollout actor).

    ``endpoints``: the URLs OpenRLHF posts to (``--reward.remote_url``, path included), one or
    several. Retries and failover as the module says, for ``retry_for_s`` seconds; each attempt
    may take ``timeout_s`` (less when the retry budget ends sooner). At most
    ``max_connections`` requests are in flight per server, over as many keep-alive connections;
    the others wait their turn (that wait is not a server failure and is not timed). ``token``
    is sent as ``Authorization: Bearer`` (never in the URL, where command lines, dashboards and
    access logs show it).

    The transport is aiohttp (OpenRLHF's own client library, so the rollout side adds nothing):
    on a rollout's burst of one-sample requests to this project's server it sent 870-950 a
    second from one event loop, where httpx's async client sent 160-270 (2,000 requests,
    8 or 64 in flight, 2 cores shared with the server).
    """

    def __init__(
        self,
        endpoints: str | Sequence[str],
        *,
        retry_for_s: float,
        timeout_s: float = 180.0,
        max_connections: int = 64,
        hint: str = "check that it is running and reachable",
        token: str | None = None,
    ) -> None:
        self.servers = ServerRotation(server_urls(endpoints))
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.retry_for_s = retry_for_s
        self.timeout_s = timeout_s
        self.max_connections = max_connections
        self.hint = hint
        self.outages = OutageLog(retry_for_s)
        self._sessions: dict[str, Any] = {}
        self._slots: dict[str, asyncio.Semaphore] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    def _session(self, url: str) -> tuple[Any, asyncio.Semaphore]:
        """The server's session (its keep-alive connections) and the semaphore that keeps its
        requests in flight within `max_connections`. A session belongs to the event loop it was
        made in; a Ray async actor has one loop for its life, a test may run several in turn."""
        import aiohttp

        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._sessions, self._slots, self._loop = {}, {}, loop
        if url not in self._sessions:
            connector = aiohttp.TCPConnector(limit=self.max_connections)
            self._sessions[url] = aiohttp.ClientSession(connector=connector, headers=self._headers)
            self._slots[url] = asyncio.Semaphore(self.max_connections)
        return self._sessions[url], self._slots[url]

    async def aclose(self) -> None:
        for session in self._sessions.values():
            await session.close()
        self._sessions, self._slots = {}, {}

    async def get_reward(self, payload: dict[str, Any]) -> dict[str, Any]:
        """POST ``payload`` (OpenRLHF's /get_reward body); the answer, which holds ``rewards``.

        Raises RewardServerError after ``retry_for_s`` seconds of retryable failures, or at once
        on a refusal or an answer outside the protocol.
        """
        import aiohttp

        servers = self.servers.cycle()
        policy = retrying(
            self.retry_for_s, _gave_up(self.servers.urls, self.hint),
            servers=len(self.servers.urls), failed=self.outages.failed, asynchronous=True,
        )  # fmt: skip
        async for attempt in policy:
            with attempt:
                url = next(servers)
                session, slots = self._session(url)
                try:
                    async with slots:
                        # Timed from here: the wait for a slot above is ours, not the server's.
                        spent = time.monotonic() - attempt.retry_state.start_time
                        remaining = self.retry_for_s - spent
                        timeout = aiohttp.ClientTimeout(
                            total=max(1.0, min(self.timeout_s, remaining))
                        )
                        async with session.post(url, json=payload, timeout=timeout) as response:
                            status, text = response.status, await response.text()
                except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
                    raise Retryable(url, _transport_error(exc)) from None
                answer = _decode(url, url, status, text)
        if not isinstance(answer, dict) or "rewards" not in answer:
            raise RewardServerError(
                f"reward server {url} answered without 'rewards'; it must speak "
                "OpenRLHF's /get_reward protocol"
            )
        self.outages.succeeded(url)
        return answer


def request_count(url: str, *routes: str) -> float:
    """Requests served on ``routes`` (default ``/get_reward``) so far, read from the server's
    Prometheus ``/metrics`` (``gtpo_rs_requests_total``; prometheus_client's parser comes with
    the server extra)."""
    routes = routes or ("/get_reward",)
    from prometheus_client.parser import text_string_to_metric_families

    try:
        text = httpx.get(f"{url.rstrip('/')}/metrics", timeout=5.0).text
    except httpx.TransportError as err:
        raise RewardServerError(f"GET {url}/metrics failed ({err})") from None
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "gtpo_rs_requests_total" and sample.labels.get("route") in routes
    )
