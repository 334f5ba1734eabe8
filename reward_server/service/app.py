"""The app factory of the reward service: wires settings, the verification pool, the routes
and the middleware together.

``create_app(settings)`` builds an app whose lifespan starts the verification pool (so
``/readyz`` turns ready once the workers are warm) and kills every worker on shutdown.
"""

import gc
import logging
import os
import re
import signal
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from urllib.parse import unquote_plus

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError

from reward_server.checker.grade import equivalent, symbolic_equivalent
from reward_server.checker.pending import SymbolicCheck
from reward_server.service import connections
from reward_server.service.metrics import Metrics, process_exited
from reward_server.service.middleware import (
    AnswerWhenCancelled,
    BodySizeLimit,
    EchoRequestId,
    RequestMetrics,
)
from reward_server.service.pool import STOP_SIGNALS, VerifierPool, die_with_parent
from reward_server.service.routes import (
    ROUTE_PATHS,
    Service,
    invalid_request,
    router,
    token_accepted,
    unexpected_error,
)
from reward_server.service.scoring import ItemErrors, Scorer
from reward_server.service.settings import Settings
from reward_server.service.verify import Verifier

log = logging.getLogger(__name__)


def build_service(settings: Settings) -> Service:
    """The metrics, the verification pool (not started), the verifier and the scorer."""
    metrics = Metrics()
    pool = VerifierPool(
        symbolic_equivalent,
        size=settings.verify_workers,
        timeout_s=settings.verify_timeout_s,
        wall_timeout_s=settings.verify_wall_timeout_s,
        memory_mb=settings.worker_memory_mb,
        max_tasks=settings.worker_max_tasks,
        hang_answer=_hang_marker(settings.debug_hang_answer),
        on_restart=metrics.on_restart,
        on_timing=metrics.on_timing,
        on_size=metrics.on_size,
        on_rerun=metrics.on_rerun,
        on_timeout=metrics.on_timeout,
    )
    errors = ItemErrors(metrics.on_item_error)
    verifier = Verifier(
        pool,
        cache_size=settings.cache_size,
        max_chars=settings.max_answer_chars,
        max_nesting=settings.max_nesting,
        on_cache=metrics.on_cache,
        on_error=errors.report,
    )
    return Service(settings, metrics, pool, verifier, Scorer(settings, verifier, errors))


def _hang_marker(text: str | None) -> object:
    """The test hook's answer as a worker sees it (the answer of its symbolic check), or None."""
    if text is None:
        return None
    check = equivalent(text, "0")
    if not isinstance(check, SymbolicCheck):
        raise ValueError(f"GTPO_RS_DEBUG_HANG_ANSWER {text!r} is decided without a worker")
    return check.answer


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the reward service. ``settings`` defaults to the environment (``GTPO_RS_*``)."""
    settings = settings or Settings()
    service = build_service(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if settings.debug_hang_answer is not None:
            log.warning("GTPO_RS_DEBUG_HANG_ANSWER is set: a test hook, never use in production")
        # Before the workers start: a stop signal to the process group during the start also
        # kills the forkserver, and a start that then retried would log its failure and run a
        # new forkserver that outlives the server.
        restore_signals = before_stop_signals(service.pool.stop_replacing)
        try:
            await service.pool.start()
            service.metrics.workers_ready.set(int(service.pool.ready))
            # Everything built at start (the app, its routes and schemas, the checker's tables)
            # lives as long as the server: out of the garbage collector's full passes, which
            # otherwise walk all of it every few thousand requests.
            gc.freeze()
            yield
        finally:
            restore_signals()
            service.metrics.workers_ready.set(0)
            await service.pool.close()
            service.scorer.close()
            process_exited()

    app = FastAPI(
        title="GTPO reward server",
        summary="Format and correctness rewards for math RL (OpenRLHF remote reward protocol).",
        version="0.1.0",
        lifespan=lifespan,
    )
    app.state.service = service  # what the routes' `service` dependency returns
    connections.count_with(service.metrics.on_dropped)
    app.add_exception_handler(RequestValidationError, invalid_request)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, unexpected_error)
    app.include_router(router)
    token = None if settings.api_token is None else settings.api_token.get_secret_value()
    app.add_middleware(
        BodySizeLimit,
        max_bytes=settings.max_body_bytes,
        max_pending_bytes=settings.max_pending_body_bytes,
        # the body of a request that will be a 401 is never read
        accepts=None if token is None else lambda scope: token_accepted(scope, token),
    )
    app.add_middleware(AnswerWhenCancelled)  # a request cut at shutdown gets a 503, counted
    app.add_middleware(RequestMetrics, metrics=service.metrics, routes=ROUTE_PATHS)  # 413s too
    app.add_middleware(EchoRequestId)  # outermost: every answer carries its id, 413s and 500s too
    return app


def before_stop_signals(call: Callable[[], None]) -> Callable[[], None]:
    """Run ``call`` when SIGTERM or SIGINT comes, before the handler already installed (uvicorn
    installs its graceful stop before the app starts, in the main thread); returns what puts
    the handlers back. Nothing where the app runs in another thread (an in-process test client)
    or the handler is not Python's."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    installed = {stop: signal.getsignal(stop) for stop in STOP_SIGNALS}
    for stop, handler in installed.items():
        if callable(handler):

            def first_call(signum: int, frame: object, handler=handler) -> None:
                call()
                handler(signum, frame)

            signal.signal(stop, first_call)

    def restore() -> None:
        for stop, handler in installed.items():
            if callable(handler):
                signal.signal(stop, handler)

    return restore


# Set by the console script for its uvicorn worker processes: the supervisor's pid.
SUPERVISOR_PID = "GTPO_RS_SUPERVISOR_PID"


def end_with_supervisor() -> None:
    """In a uvicorn worker process: shut down (SIGTERM, uvicorn's graceful stop) when the
    supervisor dies. After ``kill -9`` of the supervisor its workers kept serving, and kept the
    port, so that a restart failed with EADDRINUSE."""
    supervisor = os.environ.get(SUPERVISOR_PID)
    if supervisor is None or os.getpid() == int(supervisor):
        return
    die_with_parent(signal.SIGTERM)
    if os.getppid() != int(supervisor):  # it died before the signal was asked for
        raise SystemExit("the gtpo-reward-server supervisor is gone; not serving")


class HideTokens(logging.Filter):
    """Write the value of every query parameter named ``token`` in a logged URL as ``***``,
    whatever its spelling (``?token=``, ``?%74oken=``, ``?to%6Ben=``: the server reads them all
    as the token, ``routes.query_pairs``). uvicorn's access log records the path with its query,
    where clients that cannot send headers put the token."""

    _PARAMETER = re.compile(r"(?<=[?&;])([^=&;\s\"]*)=([^&;\s\"]*)")

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(self.mask(a) if isinstance(a, str) else a for a in record.args)
        return True

    @classmethod
    def mask(cls, text: str) -> str:
        if "=" not in text:
            return text

        def hidden(match: re.Match[str]) -> str:
            if unquote_plus(match.group(1)).strip() == "token":
                return f"{match.group(1)}=***"
            return match.group(0)

        return cls._PARAMETER.sub(hidden, text)


def app_from_env() -> FastAPI:
    """uvicorn factory (``--factory reward_server.service.app:app_from_env``): settings from
    GTPO_RS_*."""
    end_with_supervisor()
    settings = Settings()
    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, HideTokens) for f in access.filters):
        access.addFilter(HideTokens())
    return create_app(settings)
