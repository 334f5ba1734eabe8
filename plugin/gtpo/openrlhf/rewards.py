"""Reward calls that survive a reward-server restart, and stop the run when it stays down.

OpenRLHF 0.11's `SingleTurnAgentExecutor._fetch_rewards_via_http` tries 5 times, 1 s apart,
then raises; its `execute` catches that, logs at INFO level and returns the sample with
`reward=None`. The trainer then fails later with an error about reward models (see
docs/training-openrlhf.md, "Reward server outages"). A rolling restart of the reward
service, a slow container start, or a pool that needs longer than ~4 s to come back, all end
the run that way.

`post_with_retry` replaces that call in GTPO's rollout actors: connection errors, timeouts, HTTP
5xx, 408 and 429 (`gtpo.reward_client.retryable_status`) are retried with exponential backoff
until `--gtpo.reward_timeout` seconds have passed; any other 4xx (a request the server refuses)
or an answer that is not the OpenRLHF protocol fails at once. Either way the run then stops with
`RewardServiceUnavailable`, whose message names the URL, instead of training on unscored
samples.

This module does not import OpenRLHF (the executor subclass lives in `actors.py`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any

import aiohttp

from gtpo.reward_client import backoff_delays, retryable_status

logger = logging.getLogger(__name__)

MAX_BACKOFF_S = 8.0  # the backoff starts at gtpo.reward_client's 0.5 s and doubles up to this
REQUEST_TIMEOUT_S = 180.0  # one request, as OpenRLHF's client allows


class RewardServiceUnavailable(RuntimeError):
    """The reward server did not score a sample within --gtpo.reward_timeout (or refused it)."""


def root_message(exc: BaseException) -> str:
    """The message of the exception at the bottom of Ray's re-raise chain (`RayTaskError.cause`)."""
    while isinstance(getattr(exc, "cause", None), BaseException):
        exc = exc.cause
    return str(exc)


class _OutageLog:
    """One warning when an outage starts, one every 30 s while it lasts, one when it ends.

    Every concurrent rollout sample retries on its own; without this a restart would print one
    line per sample per attempt.
    """

    def __init__(self) -> None:
        self.down_since: float | None = None
        self.last_warning = 0.0

    def failed(self, url: str, error: str, deadline_s: float) -> None:
        now = time.monotonic()
        if self.down_since is None:
            self.down_since = now
        if now - self.last_warning >= 30.0:
            self.last_warning = now
            logger.warning(
                "reward server %s unreachable for %.0f s (%s); retrying for up to %.0f s "
                "(--gtpo.reward_timeout)",
                url, now - self.down_since, error, deadline_s,
            )  # fmt: skip

    def succeeded(self, url: str) -> None:
        if self.down_since is not None:
            logger.warning(
                "reward server %s answers again after %.1f s",
                url,
                time.monotonic() - self.down_since,
            )
            self.down_since = None
            self.last_warning = 0.0


OUTAGES = _OutageLog()


async def post_with_retry(
    urls: Sequence[str], payload: dict[str, Any], timeout_s: float
) -> dict[str, Any]:
    """POST `payload` (OpenRLHF's /get_reward body) until a server scores it or time runs out.

    Attempts rotate over `urls`. Returns the decoded answer, which must hold `rewards`.
    Raises RewardServiceUnavailable after `timeout_s` seconds of retryable failures, or at once
    on an answer that retrying cannot fix.
    """
    started = time.monotonic()
    delays = backoff_delays(max_s=MAX_BACKOFF_S)
    backoff = next(delays)
    attempt = 0
    while True:
        url = urls[attempt % len(urls)]
        attempt += 1
        remaining = timeout_s - (time.monotonic() - started)
        timeout = aiohttp.ClientTimeout(total=max(1.0, min(REQUEST_TIMEOUT_S, remaining)))
        try:
            async with (
                aiohttp.ClientSession(timeout=timeout) as session,
                session.post(url, json=payload) as response,
            ):
                if retryable_status(response.status):
                    error = f"HTTP {response.status}"
                elif response.status >= 400:
                    detail = (await response.text()).strip().splitlines()[:1]
                    raise RewardServiceUnavailable(
                        f"reward server {url} refused the request: HTTP {response.status} "
                        f"{detail[0] if detail else ''}".rstrip()
                    )
                else:
                    answer = await response.json(content_type=None)
                    if not isinstance(answer, dict) or "rewards" not in answer:
                        raise RewardServiceUnavailable(
                            f"reward server {url} answered without 'rewards'; it must speak "
                            "OpenRLHF's /get_reward protocol"
                        )
                    OUTAGES.succeeded(url)
                    return answer
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            error = f"{type(exc).__name__}: {exc}".rstrip(": ")
        except ValueError as exc:  # not JSON
            raise RewardServiceUnavailable(f"reward server {url} answered non-JSON: {exc}") from exc

        elapsed = time.monotonic() - started
        if elapsed + backoff > timeout_s:
            raise RewardServiceUnavailable(
                f"reward server {', '.join(urls)} did not answer for {elapsed:.0f} s "
                f"({attempt} attempts, last: {error}); check that it is running and reachable, "
                "or raise --gtpo.reward_timeout"
            )
        OUTAGES.failed(url, error, timeout_s)
        await asyncio.sleep(backoff)
        backoff = next(delays)
