"""The service's ASGI middleware: body size limit, request-id echo, request metrics.

Pure ASGI classes (no per-request task, unlike ``BaseHTTPMiddleware``); ``app.py`` adds them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from reward_server.service import memory
from reward_server.service.metrics import Metrics


class BodySizeLimit:
    """Reject bodies over ``max_bytes`` with 413: at once by Content-Length, else while reading a
    chunked upload (which has none). The body is read here, up to the limit, and replayed to the
    app: every route needs all of it to parse the JSON anyway.

    Two bounds on the memory that bodies hold while they arrive: a request that ``accepts``
    refuses (a missing or wrong token) goes to the app unread, which answers 401 without
    buffering anything (24 unauthenticated connections each holding 15 MB of a 16 MB body held
    345 MB); and the bodies being received, all requests together, hold at most
    ``max_pending_bytes``: past it a request is answered 503 with Retry-After and its part
    freed. A body sent too slowly is cut by the connection's body deadline (connections.py).
    Once the last request with a large body has been answered, the heaps are trimmed
    (memory.py)."""

    def __init__(
        self,
        app: ASGIApp,
        max_bytes: int,
        max_pending_bytes: int | None = None,
        accepts: Callable[[Scope], bool] | None = None,
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.max_pending_bytes = max_pending_bytes
        self.accepts = accepts
        self.pending = 0  # bytes of bodies being received, every request together
        self.large_in_flight = 0  # requests with large bodies (memory.py) being answered

    async def _reject(self, scope: Scope, receive: Receive, send: Send) -> None:
        detail = f"request body exceeds {self.max_bytes} bytes (GTPO_RS_MAX_BODY_BYTES)"
        await JSONResponse({"detail": detail}, status_code=413)(scope, receive, send)

    async def _busy(self, scope: Scope, receive: Receive, send: Send) -> None:
        detail = (
            f"request bodies being received hold over {self.max_pending_bytes} bytes "
            "(GTPO_RS_MAX_PENDING_BODY_BYTES); retry"
        )
        headers = {"Retry-After": "1", "Connection": "close"}
        await JSONResponse({"detail": detail}, status_code=503, headers=headers)(
            scope, receive, send
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        if self.accepts is not None and not self.accepts(scope):
            await self.app(scope, receive, send)  # refused before the body is read
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length" and value.isdigit() and int(value) > self.max_bytes:
                await self._reject(scope, receive, send)
                return
        chunks: list[bytes] = []
        size = 0
        try:
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    return  # client went away
                chunk = message.get("body", b"")
                size += len(chunk)
                self.pending += len(chunk)
                if size > self.max_bytes:
                    await self._reject(scope, receive, send)
                    return
                if self.max_pending_bytes is not None and self.pending > self.max_pending_bytes:
                    chunks.clear()
                    await self._busy(scope, receive, send)
                    return
                chunks.append(chunk)
                if not message.get("more_body", False):
                    break
        finally:
            self.pending -= size
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        large = size >= memory.TRIM_AFTER_BYTES
        self.large_in_flight += large
        try:
            await self.app(scope, replay, send)
        finally:
            self.large_in_flight -= large
            if large and not self.large_in_flight:
                chunks.clear()
                # In a thread: trimming a few hundred MB takes milliseconds.
                asyncio.get_running_loop().run_in_executor(None, memory.trim)


class EchoRequestId:
    """Return the client's ``X-Request-ID`` header on its response, so that a client, a proxy
    or a log can match every answer to its request (ids over 200 bytes are not echoed)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request_id = None
        if scope["type"] == "http":
            for name, value in scope.get("headers", []):
                if name == b"x-request-id" and len(value) <= 200:
                    request_id = value
        if request_id is None:
            await self.app(scope, receive, send)
            return

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [*message.get("headers", []), (b"x-request-id", request_id)]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_id)


class RequestMetrics:
    """Count requests and time them per route (pure ASGI: no extra task per request). Paths
    outside ``routes`` are counted as ``other``, so that a scan of random URLs cannot grow the
    metrics' label set."""

    def __init__(self, app: ASGIApp, metrics: Metrics, routes: frozenset[str]) -> None:
        self.app = app
        self.metrics = metrics
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        route = scope["path"] if scope["path"] in self.routes else "other"
        start = time.perf_counter()
        code = 500

        async def send_status(message: Message) -> None:
            nonlocal code
            if message["type"] == "http.response.start":
                code = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            self.metrics.requests.labels(route, str(code)).inc()
            self.metrics.latency.labels(route).observe(time.perf_counter() - start)


class AnswerWhenCancelled:
    """A request still running when uvicorn's graceful stop runs out (``timeout_graceful_shutdown``
    after a stop signal; __main__ sets it past the wall-clock net, so only a machine too busy to
    answer by then gets here) is cancelled by uvicorn, which logged the cancellation as a
    traceback and answered a plain-text 500. Here its client gets what any check that could not
    be computed gets: a one-line 503 with Retry-After, to send to a server that is up."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def send_started(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, send_started)
        except asyncio.CancelledError:
            if started:
                raise
            detail = "the server stopped before this request could be answered; retry"
            headers = {"Retry-After": "1", "Connection": "close"}
            # The request's task ends here, as its cancellation asked, with the answer sent.
            await JSONResponse({"detail": detail}, status_code=503, headers=headers)(
                scope, receive, send
            )
