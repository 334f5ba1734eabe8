"""FastAPI app factory and routes of the reward service.

``create_app(settings)`` builds an app whose lifespan starts the verification pool (so
``/readyz`` turns ready once the workers are warm) and kills every worker on shutdown.
"""

import asyncio
import hmac
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Request, Response, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import ValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from reward_server.extract import extract_reference
from reward_server.metrics import Metrics, exposition, process_exited
from reward_server.pool import VerifierPool
from reward_server.schemas import (
    EquivalentRequest,
    EquivalentResponse,
    EquivalentVerdict,
    ErrorResponse,
    ExtraLogs,
    RewardRequest,
    RewardResponse,
    ScoreResponse,
)
from reward_server.scoring import Scorer
from reward_server.settings import Settings
from reward_server.verify import Verifier, symbolic_equivalent

log = logging.getLogger(__name__)


class BodySizeLimit:
    """Reject bodies over ``max_bytes`` with 413: at once by Content-Length, else while reading a
    chunked upload (which has none). The body is read here, up to the limit, and replayed to the
    app: every route needs all of it to parse the JSON anyway."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def _reject(self, scope: Scope, receive: Receive, send: Send) -> None:
        detail = f"request body exceeds {self.max_bytes} bytes (GTPO_RS_MAX_BODY_BYTES)"
        await JSONResponse({"detail": detail}, status_code=413)(scope, receive, send)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length" and value.isdigit() and int(value) > self.max_bytes:
                await self._reject(scope, receive, send)
                return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # client went away
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._reject(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


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
    """Count requests and time them per route (pure ASGI: no extra task per request)."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        route = scope["path"] if scope["path"] in _ROUTES else "other"
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


def _format_validation_error(exc: RequestValidationError) -> str:
    """One readable line per problem: ``body.query[2]: Input should be a valid string``."""
    lines = []
    for err in exc.errors():
        loc = ""
        for part in err.get("loc", ()):
            loc += f"[{part}]" if isinstance(part, int) else (f".{part}" if loc else str(part))
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        if err.get("type") == "json_invalid":
            error = err.get("ctx", {}).get("error", msg)
            lines.append(f"request body is not valid JSON ({error})")
            continue
        lines.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(lines)


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the reward service. ``settings`` defaults to the environment (``GTPO_RS_*``)."""
    settings = settings or Settings()
    metrics = Metrics()
    pool = VerifierPool(
        symbolic_equivalent,
        size=settings.verify_workers,
        timeout_s=settings.verify_timeout_s,
        memory_mb=settings.worker_memory_mb,
        max_tasks=settings.worker_max_tasks,
        hang_answer=settings.debug_hang_answer,
        on_restart=metrics.on_restart,
        on_timing=metrics.on_timing,
        on_size=metrics.on_size,
        on_rerun=metrics.on_rerun,
    )
    verifier = Verifier(
        pool,
        cache_size=settings.cache_size,
        max_chars=settings.max_answer_chars,
        max_nesting=settings.max_nesting,
        on_cache=metrics.on_cache,
    )
    scorer = Scorer(settings, verifier)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if settings.debug_hang_answer is not None:
            log.warning("GTPO_RS_DEBUG_HANG_ANSWER is set: a test hook, never use in production")
        await pool.start()
        metrics.workers_ready.set(1)
        try:
            yield
        finally:
            metrics.workers_ready.set(0)
            await pool.close()
            process_exited()

    app = FastAPI(
        title="GTPO reward server",
        summary="Format and correctness rewards for math RL (OpenRLHF remote reward protocol).",
        version="0.1.0",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.pool = pool
    app.state.metrics = metrics

    token = settings.api_token.get_secret_value() if settings.api_token else None

    async def require_token(request: Request) -> None:
        """Bearer-token auth when ``GTPO_RS_API_TOKEN`` is set. OpenRLHF's client sends no
        headers, so ``?token=...`` in the URL is accepted as well."""
        if token is None:
            return
        header = request.headers.get("authorization", "")
        given = header[7:].strip() if header.lower().startswith("bearer ") else None
        given = given or request.query_params.get("token")
        if given is None or not hmac.compare_digest(given.encode(), token.encode()):
            raise HTTPException(
                status.HTTP_401_UNAUTHORIZED,
                "missing or wrong API token: send 'Authorization: Bearer <token>' or ?token=",
                headers={"WWW-Authenticate": "Bearer"},
            )

    async def parse_body(request: Request, model: type[Any]) -> Any:
        """Parse the JSON body whatever its Content-Type (curl -d sends form-urlencoded), with
        pydantic's errors turned into one clear 422."""
        try:
            return model.model_validate_json(await request.body())
        except ValidationError as exc:
            raise RequestValidationError(
                [{**e, "loc": ("body", *e.get("loc", ()))} for e in exc.errors()]
            ) from None

    async def read_request(request: Request) -> RewardRequest:
        return await parse_body(request, RewardRequest)

    async def read_pairs(request: Request) -> EquivalentRequest:
        return await parse_body(request, EquivalentRequest)

    def check_batch(n: int) -> None:
        if n > settings.max_batch_size:
            raise HTTPException(
                413,
                f"batch of {n} items exceeds the limit of "
                f"{settings.max_batch_size} (GTPO_RS_MAX_BATCH_SIZE)",
            )

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(status_code=422, content={"detail": _format_validation_error(exc)})

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        # Never a stack trace to the client; the log has it.
        log.exception("unhandled error on %s", request.url.path)
        return JSONResponse(status_code=500, content={"detail": "internal error (see server log)"})

    body_doc = {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": RewardRequest.model_json_schema()}},
        }
    }
    errors: dict[int | str, dict[str, Any]] = {
        401: {"model": ErrorResponse},
        413: {"model": ErrorResponse},
        422: {"model": ErrorResponse},
    }

    async def score_counted(body: RewardRequest) -> list[Any]:
        """Both scoring routes: limits checked, items scored in order, verdicts counted."""
        check_batch(len(body.query))
        items = await scorer.score_batch(body.query, body.prompts, body.labels)
        _count(metrics, items)
        return items

    @app.post(
        "/get_reward",
        response_model=RewardResponse,
        dependencies=[Depends(require_token)],
        responses=errors,
        openapi_extra=body_doc,
    )
    async def get_reward(body: Annotated[RewardRequest, Depends(read_request)]) -> RewardResponse:
        """OpenRLHF's remote reward protocol: total reward = format (0..10) + accuracy (0/10)."""
        items = await score_counted(body)
        rewards = [it.reward for it in items]
        return RewardResponse(
            rewards=rewards,
            scores=rewards,
            extra_logs=ExtraLogs(
                format_reward=[it.format_score for it in items],
                accuracy_reward=[it.accuracy_score for it in items],
            ),
        )

    @app.post(
        "/v1/score",
        response_model=ScoreResponse,
        dependencies=[Depends(require_token)],
        responses=errors,
        openapi_extra=body_doc,
    )
    async def score(body: Annotated[RewardRequest, Depends(read_request)]) -> ScoreResponse:
        """Same scoring as /get_reward with the full verdict of every item."""
        return ScoreResponse(results=await score_counted(body))

    @app.post(
        "/v1/equivalent",
        response_model=EquivalentResponse,
        dependencies=[Depends(require_token)],
        responses=errors,
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": EquivalentRequest.model_json_schema()}},
            }
        },
    )
    async def equivalent(
        body: Annotated[EquivalentRequest, Depends(read_pairs)],
    ) -> EquivalentResponse:
        """Answer/reference pairs in, verdicts out: the checker behind the accuracy reward, with
        the same answer policy, cost guard and deadline (what ``gtpo eval`` groups maj@k by)."""
        check_batch(len(body.pairs))
        deadline = time.perf_counter() + settings.verify_timeout_s  # from the batch's arrival

        async def one(answer: str, label: str) -> EquivalentVerdict:
            reference = extract_reference(label)
            if not answer.strip():
                return EquivalentVerdict(equivalent=False, reason="empty_answer")
            if reference is None:
                return EquivalentVerdict(equivalent=False, reason="no_reference")
            verdict = await verifier.check(answer, reference, deadline=deadline)
            return EquivalentVerdict(equivalent=verdict.equal, reason=verdict.reason)

        results = await asyncio.gather(*(one(p.answer, p.reference) for p in body.pairs))
        return EquivalentResponse(results=list(results))

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        """The process is alive and serving HTTP."""
        return {"status": "ok"}

    @app.get("/readyz", responses={503: {"description": "Workers still starting"}})
    async def readyz() -> JSONResponse:
        """Ready when the verification workers are warmed up."""
        if pool.ready:
            return JSONResponse({"status": "ready", "workers": settings.verify_workers})
        return JSONResponse({"status": "starting"}, status_code=503)

    @app.get("/metrics", response_class=PlainTextResponse)
    async def prometheus() -> Response:
        body, content_type = exposition(metrics)
        return Response(body, media_type=content_type)

    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(RequestMetrics, metrics=metrics)  # 413s are counted too
    app.add_middleware(EchoRequestId)  # outermost: every answer carries its id, 413s and 500s too
    return app


_ROUTES = frozenset(
    {"/get_reward", "/v1/score", "/v1/equivalent", "/healthz", "/readyz", "/metrics"}
)


def _count(metrics: Metrics, items: list[Any]) -> None:
    metrics.items.inc(len(items))
    for it in items:
        metrics.verdicts.labels(it.reason).inc()
        metrics.format_scores.labels(it.format_reason).inc()


def app_from_env() -> FastAPI:
    """uvicorn factory (``--factory reward_server.app:app_from_env``): settings from GTPO_RS_*."""
    settings = Settings()
    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    return create_app(settings)
