"""Reward server settings: one object, read from the environment (prefix ``GTPO_RS_``).

Every field can be set as ``GTPO_RS_<NAME>`` (for example ``GTPO_RS_VERIFY_TIMEOUT_S=3``); the
console script's ``--host/--port/--workers`` override the three fields of the same name.
"""

from __future__ import annotations

import os

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from reward_server.protocol import DEFAULT_FORMAT, RESPONSE_FORMATS, response_format
from reward_server.service.pool import WALL_NET_FACTOR


def _default_verify_workers() -> int:
    # One verification process per core: the symbolic check is CPU bound and single threaded.
    return max(1, os.cpu_count() or 1)


class Settings(BaseSettings):
    """All knobs of the reward service. Defaults follow the paper's setup (GTPO, Sec. 6)."""

    model_config = SettingsConfigDict(env_prefix="GTPO_RS_", extra="ignore")

    # --- serving
    host: str = Field("127.0.0.1", description="Interface to bind (0.0.0.0 for every interface).")
    port: int = Field(8000, ge=0, le=65535, description="TCP port.")
    workers: int = Field(1, ge=1, description="uvicorn worker processes (each has its own pool).")
    log_level: str = Field("info", description="Python logging level for the service.")
    access_log: bool = Field(
        False, description="Log every request (off: thousands per second; /metrics counts them)."
    )
    keep_alive_s: float = Field(
        75.0,
        gt=0,
        description="Seconds an idle keep-alive connection stays open. Longer than the clients' "
        "own idle expiry (httpx 5 s, aiohttp 15 s): a server that closes first races a client "
        "reusing the connection, which then reads a reset instead of an answer.",
    )

    # --- scoring (paper's scale: format 0..10, accuracy 0 or 10)
    response_format: str = Field(
        DEFAULT_FORMAT,
        description="Response format when a request names none (?format=): "
        + "; ".join(f"{f.name}: {f.summary}" for f in RESPONSE_FORMATS.values())
        + ".",
    )
    strict_format: bool = Field(
        False,
        description="Full format also needs exactly one block of each, <reasoning> first and only "
        "whitespace between the blocks.",
    )
    accuracy_requires_format: bool = Field(
        True,
        description="Accuracy counts only when the reasoning block precedes the answer block: "
        "full format, or that shape with text after the answer block (the format pays for it).",
    )
    extra_end_tokens: list[str] = Field(
        default_factory=list,
        description="More end-of-turn tokens to drop from the end of a response (JSON list).",
    )

    # --- verification
    verify_workers: int = Field(
        default_factory=_default_verify_workers, ge=1, description="Verification processes."
    )
    verify_timeout_s: float = Field(
        2.0,
        gt=0,
        description="CPU budget per symbolic check: seconds of its worker's CPU time (not wall "
        "time, so waiting for a CPU or a worker does not count); the worker is ended past it.",
    )
    verify_wall_timeout_s: float | None = Field(
        None,
        gt=0,
        description="Wall-clock safety net per answer, from its arrival, waiting for a worker "
        f"included (default: {WALL_NET_FACTOR:g} x verify_timeout_s); at least verify_timeout_s.",
    )
    worker_memory_mb: int = Field(
        2048, ge=0, description="Address-space limit of a verification process (0: none)."
    )
    worker_max_tasks: int = Field(
        20000, ge=0, description="Replace a verification process after this many checks (0: never)."
    )
    cache_size: int = Field(
        100_000, ge=0, description="LRU entries of (answer, reference) verdicts."
    )
    max_answer_chars: int = Field(
        1000, ge=1, description="Longer answers or references score 0 without being parsed."
    )
    max_nesting: int = Field(
        40, ge=1, description="Deeper {}/()/[] nesting scores 0 without being parsed."
    )

    # --- limits and auth
    max_body_bytes: int = Field(16 * 1024 * 1024, ge=1, description="Largest request body.")
    max_batch_size: int = Field(4096, ge=1, description="Most items in one request.")
    api_token: SecretStr | None = Field(
        None,
        description="When set, scoring routes need 'Authorization: Bearer <token>' (or "
        "?token=<token> from clients that cannot send headers). Set and empty is refused.",
    )

    # --- connection limits (reward_server/service/connections.py)
    max_header_bytes: int = Field(
        16 * 1024,
        ge=1024,
        description="Largest request line and headers together, in bytes; 431 past it.",
    )
    max_headers: int = Field(100, ge=8, description="Most header lines in a request; 431 past it.")
    header_timeout_s: float = Field(
        10.0,
        gt=0,
        description="Seconds for a request's line and headers, from the connection's start or "
        "the first byte of the request: a connection that sends nothing or sends slowly is "
        "closed (408 when it sent part of a request).",
    )
    body_timeout_s: float = Field(
        30.0, gt=0, description="Seconds for a request's body after its headers; 408 past it."
    )
    send_timeout_s: float = Field(
        30.0,
        gt=0,
        description="Seconds an answer may wait for its client to read it; the connection is "
        "dropped past it, with the memory it held.",
    )
    max_unsent_bytes: int = Field(
        64 * 1024 * 1024,
        ge=1,
        description="Bytes of answers waiting for clients that do not read them, all "
        "connections together; the connection whose answer would pass it is reset.",
    )
    max_connections: int = Field(
        1000,
        ge=1,
        description="Open connections per server process (at most the file descriptors the "
        "process may open, less 64). Past it a connection without a request in progress is "
        "closed to make room, oldest first; a request that finds every connection busy gets "
        "503.",
    )
    max_pending_body_bytes: int = Field(
        128 * 1024 * 1024,
        ge=1,
        description="Bytes of request bodies being received, all connections together; a "
        "request whose body would pass it gets 503 with Retry-After.",
    )

    @field_validator("response_format")
    @classmethod
    def _known_format(cls, name: str) -> str:
        return response_format(name).name  # a ValueError naming the valid ones

    @field_validator("api_token")
    @classmethod
    def _token_not_empty(cls, token: SecretStr | None) -> SecretStr | None:
        # `GTPO_RS_API_TOKEN=${TOKEN}` with TOKEN unset sets it empty, which `?token=` matched:
        # the server ran open while its operator believed it closed.
        if token is not None and not token.get_secret_value().strip():
            raise ValueError(
                "GTPO_RS_API_TOKEN is set but empty: set it to a secret, or unset it to serve "
                "without a token"
            )
        # HTTP trims a header's value, so a token with spaces or a newline at either end (a
        # secret file read with its newline) would refuse every Bearer client.
        if token is not None and token.get_secret_value() != token.get_secret_value().strip():
            raise ValueError(
                "GTPO_RS_API_TOKEN has spaces or a newline at its start or end, which no "
                "Authorization header can carry: remove them"
            )
        return token

    @model_validator(mode="after")
    def _wall_net(self) -> Settings:
        if self.verify_wall_timeout_s is None:
            self.verify_wall_timeout_s = WALL_NET_FACTOR * self.verify_timeout_s
        elif self.verify_wall_timeout_s < self.verify_timeout_s:
            raise ValueError(
                f"verify_wall_timeout_s ({self.verify_wall_timeout_s}) is below "
                f"verify_timeout_s ({self.verify_timeout_s}): a check could never use its CPU "
                "budget; raise GTPO_RS_VERIFY_WALL_TIMEOUT_S or leave it unset"
            )
        return self

    # --- test hook, never set in production: a worker that receives exactly this answer spins
    # until stopped, so tests can prove that a hung verification is killed and replaced.
    debug_hang_answer: str | None = Field(None, description="Test hook (leave unset).")
