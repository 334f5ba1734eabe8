"""The HTTP connections of the reward server: uvicorn's httptools protocol with the limits that
trusted servers set and uvicorn leaves off (each a setting, ``reward_server/service/settings.py``).

- **Header size and count** (``GTPO_RS_MAX_HEADER_BYTES``, ``GTPO_RS_MAX_HEADERS``): 431 past
  either. httptools has no limit of its own (it gathers a header's value until the header
  ends), and an ASGI middleware sees the headers only once the parser has kept them all: an
  8 MB header and 100,000 headers were accepted. Counted here, as bytes arrive and in the
  parser's callbacks, so that no more than one read (256 KB) is parsed past the limit.
- **A time limit for the request line and headers** (``GTPO_RS_HEADER_TIMEOUT_S``), from the
  connection's start or the first byte of each request: a socket that never sends, or sends a
  header a byte at a time, is closed (408 when it sent part of a request). uvicorn times only
  the wait between requests (keep-alive): 200 slowloris connections stayed 60 s, 500 silent
  sockets 86 s.
- **A time limit for the body** (``GTPO_RS_BODY_TIMEOUT_S``) from the end of the headers: 408.
- **Answers a client does not read** (``GTPO_RS_SEND_TIMEOUT_S``): once the transport's buffer
  is full, the client has that long to read some of it, or the connection is reset with what
  it held; and the answers waiting for their clients hold at most
  ``GTPO_RS_MAX_UNSENT_BYTES`` together (past it, the connection whose answer would pass it is
  reset at once). Ten clients that never read an 8 MB answer held 150 MB for as long as they
  liked.
- **A cap on connections** (``GTPO_RS_MAX_CONNECTIONS``, and never more than the file
  descriptors the process may open, less ``FD_RESERVE``): a connection past it closes the
  oldest one that has no request in progress (silent and idle connections cost a descriptor
  each, and a process out of descriptors resets every new connection); a request that finds
  every connection busy is answered 503 (uvicorn's ``limit_concurrency``).

``gtpo-reward-server`` runs uvicorn with ``LimitedHttpProtocol``; it reads its limits from the
environment (``GTPO_RS_*``) once per process, as the app factory does.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import resource
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from reward_server.service.logs import Throttled
from reward_server.service.settings import Settings

log = logging.getLogger(__name__)

# File descriptors kept for what is not a connection: the listening socket, the verification
# workers' pipes, the forkserver, log and metrics files.
FD_RESERVE = 64


@dataclass(frozen=True)
class ConnectionLimits:
    max_header_bytes: int
    max_headers: int
    header_timeout_s: float
    body_timeout_s: float
    send_timeout_s: float
    max_connections: int
    max_unsent_bytes: int


def descriptor_limit() -> int:
    """This process's soft limit on open files, raised first to its hard limit (what servers
    commonly do at start: a soft limit of 1,024 or 256 runs out long before the machine)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return soft


@functools.cache
def limits() -> ConnectionLimits:
    """The limits of this process, from ``GTPO_RS_*`` (read once)."""
    s = Settings()
    most = max(1, descriptor_limit() - FD_RESERVE)
    if s.max_connections > most:
        log.warning(
            "GTPO_RS_MAX_CONNECTIONS=%d is more than this process can open (%d file "
            "descriptors less %d): %d connections at most",
            s.max_connections, most + FD_RESERVE, FD_RESERVE, most,
        )  # fmt: skip
    return ConnectionLimits(
        s.max_header_bytes,
        s.max_headers,
        s.header_timeout_s,
        s.body_timeout_s,
        s.send_timeout_s,
        min(s.max_connections, most),
        s.max_unsent_bytes,
    )


# Bytes of answers waiting in the transports of connections whose clients do not read them,
# every connection of this process together.
_unsent = [0]


# Refusals, one line per kind at most every minute (an attack would otherwise log a line a
# connection).
_refusals = Throttled(log)
# Where this process counts requests and connections ended early
# (``gtpo_rs_connections_dropped_total{cause}``): the app built in it (``count_with``).
_counters: list[Callable[[str, int], None]] = []


def count_with(count: Callable[[str, int], None]) -> None:
    """Count what connections drop with ``count(cause, n)`` (the app's metrics)."""
    _counters[:] = [count]


def _count(cause: str, n: int = 1) -> None:
    for count in _counters:
        count(cause, n)


def _refused(cause: str, what: str) -> None:
    """Count a refusal, and log its kind once a minute at most."""
    _count(cause)
    _refusals.warning(cause, "%s", what)


# How often the deadlines of every connection are looked at: one sweep for all connections,
# where a timer per request cost two schedulings and two cancellations a request.
SWEEP_S = 0.25


class LimitedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the limits of the module docstring."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limits = limits()
        # uvicorn answers 503 when this many connections (this one included) are open.
        self.limit_concurrency = self.limits.max_connections + 1
        # The deadline running (loop time) and what passing it does: headers, body, or an
        # answer left unread; None when the connection waits on nobody but the app.
        self._deadline: float | None = None
        self._expire: Callable[[], None] = self._header_timeout
        self._in_request = False  # from a request's first byte until its answer is sent
        self._idle_since = time.monotonic()
        self._head_received = 0  # bytes received while the headers were not complete
        self._headers_done = False
        self._too_large: str | None = None
        self._unsent = 0  # this connection's share of _unsent
        self._answering: Any = None  # the request cycle whose answer runs (uvicorn's may be later)

    # ------------------------------------------------------------ connection

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._until(self.limits.header_timeout_s, self._header_timeout)
        if not getattr(self.server_state, "gtpo_sweeping", False):
            self.server_state.gtpo_sweeping = True  # type: ignore[attr-defined]
            self.loop.call_later(SWEEP_S, _sweep, self.server_state, self.loop)
        if len(self.connections) > self.limits.max_connections:
            self._make_room()

    def connection_lost(self, exc: Exception | None) -> None:
        self._deadline = None
        self._count_unsent(0)
        # uvicorn marks only its latest request as disconnected: with requests pipelined, the
        # one being answered is an earlier one, whose answer then went to a closed transport
        # (a RuntimeError and two tracebacks, thousands a second from one client that sends
        # two requests and resets). Every request of the connection is marked, and the queued
        # ones are dropped unstarted.
        unanswered = [c for c, _ in self.pipeline]
        if self._answering is not None and not self._answering.response_complete:
            unanswered.append(self._answering)
        self.pipeline.clear()
        for cycle in unanswered:
            cycle.disconnected = True
            cycle.message_event.set()
        if unanswered:
            _count("client_gone", len(unanswered))
        super().connection_lost(exc)

    def _start_asgi_task(self, cycle: Any, app: Any) -> None:
        self._answering = cycle
        super()._start_asgi_task(cycle, _unless_gone(cycle, app))

    def _make_room(self) -> None:
        """Close the connection that has waited longest without a request in progress."""
        idle = [
            c
            for c in self.connections
            if c is not self
            and isinstance(c, LimitedHttpProtocol)
            and not c._in_request
            and not c.transport.is_closing()
        ]
        if idle:
            oldest = min(idle, key=lambda c: c._idle_since)
            _refused(
                "connection_cap",
                f"more than {self.limits.max_connections} connections "
                "(GTPO_RS_MAX_CONNECTIONS): closing idle ones, oldest first",
            )
            oldest.transport.close()
            # No longer counted: uvloop reports a closed connection lost only later, and a
            # request arriving meanwhile would be refused for a connection already going.
            self.connections.discard(oldest)

    # ------------------------------------------------------------ deadlines

    def _until(self, seconds: float, expire: Callable[[], None]) -> None:
        self._deadline = self.loop.time() + seconds
        self._expire = expire

    def _header_timeout(self) -> None:
        if self._in_request:
            seconds = self.limits.header_timeout_s
            _refused("header_timeout", f"a request's headers took over {seconds:g} s")
            self._refuse(408, "request headers not received in time (GTPO_RS_HEADER_TIMEOUT_S)")
        elif not self.transport.is_closing():
            self.transport.close()  # it never sent a byte

    def _body_timeout(self) -> None:
        _refused("body_timeout", f"a request's body took over {self.limits.body_timeout_s:g} s")
        if self.cycle is not None and not self.cycle.response_started:
            self._refuse(408, "request body not received in time (GTPO_RS_BODY_TIMEOUT_S)")
        elif not self.transport.is_closing():
            self.transport.close()

    def _send_timeout(self) -> None:
        seconds = self.limits.send_timeout_s
        _refused("send_timeout", f"a client left its answer unread for {seconds:g} s")
        self._reset()

    def _reset(self) -> None:
        """Drop the connection and the answer it holds."""
        self._deadline = None
        self._count_unsent(0)
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            # A reset, not a close: a close would leave what the kernel holds of the answer
            # queued behind a FIN the client never reads (megabytes per connection).
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.transport.abort()  # drops the unsent answer with the connection

    def _refuse(self, status: int, detail: str) -> None:
        """Answer ``status`` with a one-line JSON detail and close the connection."""
        self._deadline = None
        if self.transport.is_closing():
            return
        body = json.dumps({"detail": detail}).encode()
        head = [STATUS_LINE[status]]
        for name, value in self.server_state.default_headers:
            head += [name, b": ", value, b"\r\n"]
        head += [
            b"content-type: application/json\r\n",
            b"content-length: " + str(len(body)).encode() + b"\r\n",
            b"connection: close\r\n\r\n",
        ]
        self.transport.write(b"".join([*head, body]))
        self.transport.close()

    # ------------------------------------------------------------ parsing

    def data_received(self, data: bytes) -> None:
        if not self._in_request:
            self._in_request = True  # its first byte: the header deadline runs from here
            self._headers_done = False
            self._head_received = 0
            self._until(self.limits.header_timeout_s, self._header_timeout)
        if not self._headers_done:
            self._head_received += len(data)
        super().data_received(data)
        if not self._headers_done and self._head_received > self.limits.max_header_bytes:
            self._too_large = self._head_too_large()  # one header still growing, or many
        if self._too_large is not None:
            _refused("headers_too_large", self._too_large)
            self._refuse(431, self._too_large)

    def _head_too_large(self) -> str:
        return (
            f"request line and headers over {self.limits.max_header_bytes} bytes "
            "(GTPO_RS_MAX_HEADER_BYTES)"
        )

    def on_headers_complete(self) -> None:
        self._headers_done = True
        if len(self.headers) > self.limits.max_headers:
            self._too_large = f"over {self.limits.max_headers} headers (GTPO_RS_MAX_HEADERS)"
        elif self._head_received > self.limits.max_header_bytes:
            # The read that ended the headers may hold body too: count the headers themselves.
            size = len(self.url) + sum(len(n) + len(v) + 4 for n, v in self.headers)
            if size > self.limits.max_header_bytes:
                self._too_large = self._head_too_large()
        if self._too_large is not None:
            return  # never reaches the app; data_received answers 431
        self._until(self.limits.body_timeout_s, self._body_timeout)
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        if self._too_large is None:
            super().on_body(body)

    def on_message_complete(self) -> None:
        if self._too_large is not None:
            return
        if not self.flow.write_paused:
            self._deadline = None  # the body is in; the answer is the app's
        super().on_message_complete()

    # ------------------------------------------------------------ answering

    def on_response_complete(self) -> None:
        self._in_request = False
        self._idle_since = time.monotonic()
        super().on_response_complete()  # arms uvicorn's keep-alive deadline

    def pause_writing(self) -> None:
        super().pause_writing()
        self._count_unsent(self.transport.get_write_buffer_size())
        if _unsent[0] > self.limits.max_unsent_bytes:
            _refused(
                "unsent_limit",
                f"answers waiting for their clients passed {self.limits.max_unsent_bytes} bytes "
                "(GTPO_RS_MAX_UNSENT_BYTES)",
            )
            self._reset()
            return
        self._until(self.limits.send_timeout_s, self._send_timeout)

    def resume_writing(self) -> None:
        super().resume_writing()
        self._count_unsent(0)
        if self._expire == self._send_timeout:
            self._deadline = None

    def _count_unsent(self, size: int) -> None:
        _unsent[0] += size - self._unsent
        self._unsent = size


def _unless_gone(cycle: Any, app: Any) -> Any:
    """``app``, run only if ``cycle``'s client is still there when its task starts: a client
    that sends a request and resets at once (thousands a second) would otherwise have each
    scored for nobody, and hold the event loop that answers everyone else."""

    async def run(scope: Any, receive: Any, send: Any) -> None:
        # uvloop closes the transport of a reset connection at once, and tells the protocol
        # (connection_lost) only later: after this task's first step when both came in one read
        if not cycle.disconnected and not cycle.transport.is_closing():
            await app(scope, receive, send)

    return run


def _sweep(server_state: Any, loop: asyncio.AbstractEventLoop) -> None:
    """Act on every connection whose deadline has passed; again in ``SWEEP_S``."""
    now = loop.time()
    for conn in list(server_state.connections):
        deadline = getattr(conn, "_deadline", None)
        if deadline is not None and now >= deadline:
            conn._deadline = None
            conn._expire()
    loop.call_later(SWEEP_S, _sweep, server_state, loop)
