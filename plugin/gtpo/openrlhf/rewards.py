"""Reward calls of GTPO's rollout actors: shared over several servers, and stopping the run when
the service stays down.

OpenRLHF 0.11's `SingleTurnAgentExecutor._fetch_rewards_via_http` opens a new HTTP session per
request, tries 5 times 1 s apart on the same server, then raises; its `execute` catches that,
logs at INFO level and returns the sample with `reward=None`. The trainer then fails later with
an error about reward models (docs/training-openrlhf.md, "Reward server outages"). A rolling
restart of the reward service, a slow container start, or a pool that needs longer than ~4 s to
come back, all end the run that way.

GTPO's rollout actors send the call through `gtpo.reward_client.AsyncRewardClient` instead: one
pooled client per actor for the whole run, requests rotated over every `--reward.remote_url`
server (each request starts at the next one), a retryable failure (connection error, timeout,
HTTP 5xx, 408, 429) moved to the next server at once, backoff between rounds, for up to
`--gtpo.reward_timeout` seconds. A refused request (another 4xx) or an answer outside the
OpenRLHF protocol fails at once. Either way the run then stops with `RewardServerError`, whose
message names the servers, instead of training on unscored samples.

The server's token (`GTPO_RS_API_TOKEN`) is read from the launcher's environment, as the W&B
key is, and handed to the rollout actors, which send it as `Authorization: Bearer`: never in
`--reward.remote_url` (`?token=`), where the job's command line, Ray's dashboard and the
server's access log show it.

This module does not import OpenRLHF (the executor subclass lives in `rollout_actor.py`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from gtpo.config import flag
from gtpo.reward_client import AsyncRewardClient
from reward_server.protocol import API_TOKEN_ENV

# One attempt may take this long (OpenRLHF's own client allows 180 s); a slow server that
# answers within it is never sent the same request twice. See docs/training-openrlhf.md,
# "Several reward servers", for what was measured under a burst.
ATTEMPT_TIMEOUT_S = 180.0
# Requests in flight per rollout actor; the rest wait for a pooled keep-alive connection.
MAX_CONNECTIONS = 64


def reward_token() -> str | None:
    """The reward server's token in this process's environment (None when unset or empty)."""
    return os.environ.get(API_TOKEN_ENV) or None


def rollout_reward_client(
    endpoints: Sequence[str], reward_timeout: float, token: str | None = None
) -> AsyncRewardClient:
    """The reward client of one rollout actor (`--reward.remote_url`, `--gtpo.reward_timeout`,
    the token the launcher read with `reward_token`)."""
    return AsyncRewardClient(
        endpoints,
        retry_for_s=reward_timeout,
        timeout_s=ATTEMPT_TIMEOUT_S,
        max_connections=MAX_CONNECTIONS,
        hint=f"check that it is running and reachable, or raise {flag('reward_timeout')}",
        token=token,
    )


def root_message(exc: BaseException) -> str:
    """The message of the exception at the bottom of Ray's re-raise chain (`RayTaskError.cause`)."""
    while isinstance(getattr(exc, "cause", None), BaseException):
        exc = exc.cause
    return str(exc)
