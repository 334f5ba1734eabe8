"""The routes of the reward service (an ``APIRouter``) and the dependencies they take.

The scorer, the verifier, the pool and the settings come in as one ``Service`` dependency that
``app.py`` builds at start-up; token auth is a dependency of every scoring route.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar
from urllib.parse import parse_qsl

from fastapi import APIRouter, Depends, HTTPException, Request, Response, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import BaseModel, ValidationError
from starlette.types import Scope

from reward_server.checker.response import Start
from reward_server.protocol import (
    NOT_COMPUTED,
    RESPONSE_FORMATS,
    ResponseFormat,
    accuracy_score,
    response_format,
)
from reward_server.service.logs import Throttled
from reward_server.service.metrics import Metrics, exposition
from reward_server.service.pool import VerifierPool
from reward_server.service.schemas import (
    EquivalentRequest,
    EquivalentResponse,
    EquivalentVerdict,
    ErrorResponse,
    ExtraLogs,
    ItemScore,
    RewardRequest,
    RewardResponse,
    ScoreResponse,
)
from reward_server.service.scoring import Scorer
from reward_server.service.settings import Settings
from reward_server.service.verify import Verifier

log = logging.getLogger(__name__)
_throttled = Throttled(log)


@dataclass(frozen=True)
class Service:
    """What the routes use: built once per app by ``create_app``, kept in ``app.state``."""

    settings: Settings
    metrics: Metrics
    pool: VerifierPool
    verifier: Verifier
    scorer: Scorer


async def service(request: Request) -> Service:
    # async: FastAPI runs a plain-def dependency in its thread pool, a thread hop per request;
    # measured at concurrency 64 (benchmarks/reward_server_load.py): 1,790-1,890 completions/s
    # with the thread hop, 2,190-2,320 without
    return request.app.state.service


ServiceDep = Annotated[Service, Depends(service)]


def token_accepted(scope: Scope, token: str | None) -> bool:
    """Whether a request may be scored: no token is set, or it presents ``token`` as
    ``Authorization: Bearer`` or, for clients that cannot send headers (OpenRLHF's own),
    as ``?token=`` (compared in constant time). A request with an Authorization header is
    judged by that header alone: an empty or wrong Bearer is not rescued by the query. Read
    from the ASGI scope, so that the body limit can refuse to buffer the body of a request that
    would be refused anyway."""
    if token is None:
        return True
    given: bytes | None = None
    headers = [value for name, value in scope.get("headers", ()) if name == b"authorization"]
    if headers:
        value = headers[-1]
        if value[:7].lower() == b"bearer ":
            given = value[7:].strip()
    else:
        given = next((v.encode() for k, v in query_pairs(scope) if k == "token"), None)
    return bool(given) and hmac.compare_digest(given, token.encode())  # type: ignore[arg-type]


def query_pairs(scope: Scope) -> list[tuple[str, str]]:
    """The query's (name, value) pairs, URL-decoded: ``?%74oken=`` is ``token``."""
    return parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)


def _require_token(request: Request, svc: Service) -> None:
    """Bearer-token auth when ``GTPO_RS_API_TOKEN`` is set (``token_accepted``)."""
    token = svc.settings.api_token
    if not token_accepted(request.scope, None if token is None else token.get_secret_value()):
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "missing or wrong API token: send 'Authorization: Bearer <token>' or ?token=",
            headers={"WWW-Authenticate": "Bearer"},
        )


Body = TypeVar("Body", bound=BaseModel)


async def _accepted(request: Request, model: type[Body]) -> tuple[Service, Body]:
    """What every scoring route starts with: the service, and the request's body parsed as
    ``model`` once its token is accepted (a 401 before the body is read otherwise).

    Called by the routes themselves, not declared as FastAPI dependencies: solving the four
    dependencies this replaces (the service, the token, ``?format=``, the body) cost 5-8 % of
    the server's CPU per completion at concurrency 64 (benchmarks/reward_server_load.py, three
    side-by-side runs). ``_post`` documents the body and ``?format=`` for OpenAPI instead."""
    svc: Service = request.app.state.service
    _require_token(request, svc)
    return svc, await _parse_body(request, model)


# The most colons (so keys) a body may hold for its keys to be checked for repeats.
REPEATED_KEYS_CHECKED = 20_000


class _RepeatedKey(ValueError):
    pass


def _no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _RepeatedKey(f"the key {key!r} is given twice in one object")
            seen.add(key)
    return obj


# One decoder for every request (``json.loads`` with a hook builds a new one each call).
_REPEATS_DECODER = json.JSONDecoder(object_pairs_hook=_no_repeats)


# Bodies from this size up are parsed in a thread, so that the event loop's work per request
# does not grow with its body: parsing a 15 MB body took 45 ms on the loop (both passes below),
# and 8 at once put /healthz at up to 195 ms. Smaller bodies stay on the loop: a thread hop
# costs more than their parse.
PARSED_OFF_LOOP_BYTES = 64 * 1024


async def _parse_body(request: Request, model: type[BaseModel]) -> Any:
    """Parse the JSON body whatever its Content-Type (curl -d sends form-urlencoded), with
    pydantic's errors turned into one clear 422 (``_parsed``), in a thread when it is large."""
    body = await request.body()
    if len(body) < PARSED_OFF_LOOP_BYTES:
        return _parsed(body, model)
    return await asyncio.to_thread(_parsed, body, model)


def _parsed(body: bytes, model: type[BaseModel]) -> Any:
    """``body`` validated as ``model``. A key given twice in one object (also spelled with an
    escape, ``"\\u006cabels"``) is a 422 too: JSON parsers let the last one win, so the server
    would score what the client did not mean to send. pydantic's parser does not tell; the
    standard one's hook does, on a body pydantic already found sound (a second, C-speed pass)
    and with at most ``REPEATED_KEYS_CHECKED`` colons."""
    try:
        parsed = model.model_validate_json(body)
    except ValidationError as exc:
        raise RequestValidationError(
            [{**e, "loc": ("body", *e.get("loc", ()))} for e in exc.errors()]
        ) from None
    # The standard parser builds every key as an object: a body of a million ignored keys took
    # it 2.9 s on the event loop (pydantic 0.2 s). Every key has a colon, so counting them (C
    # speed) bounds that pass; a body with more is scored unchecked (what a repeated key would
    # change is the sender's own request).
    if body.count(b":") > REPEATED_KEYS_CHECKED:
        return parsed
    try:
        # pydantic accepted it, so it is UTF-8 (it refuses other encodings and invalid bytes)
        _REPEATS_DECODER.decode(body.decode())
    except _RepeatedKey as exc:
        raise RequestValidationError(
            [{"type": "value_error", "loc": ("body",), "msg": str(exc), "input": None}]
        ) from None
    except (ValueError, RecursionError) as exc:  # what only pydantic reads (a huge number)
        raise RequestValidationError(
            [{"type": "json_invalid", "loc": ("body",), "msg": str(exc), "input": None}]
        ) from None
    return parsed


def chosen_format(request: Request, svc: Service) -> ResponseFormat:
    """``?format=think`` on a scoring route: one server serves runs of several formats, and
    OpenRLHF's ``--reward.remote_url`` carries the choice in its URL. The last one counts when
    it is given twice; without one, the server's (``GTPO_RS_RESPONSE_FORMAT``)."""
    name = None
    if request.scope.get("query_string"):
        name = dict(query_pairs(request.scope)).get("format")
    if name is None:
        return svc.scorer.response_format
    try:
        return response_format(name)
    except ValueError as exc:
        raise HTTPException(422, f"?format=: {exc}") from None


# ``?format=`` as OpenAPI documents it (``chosen_format`` reads it).
FORMAT_PARAMETER = {
    "name": "format",
    "in": "query",
    "required": False,
    "schema": {"type": "string", "enum": list(RESPONSE_FORMATS)},
    "description": "Response format of this request's completions (default: the server's "
    "GTPO_RS_RESPONSE_FORMAT): "
    + "; ".join(f"{f.name}: {f.summary}" for f in RESPONSE_FORMATS.values()),
}


def _check_batch(n: int, settings: Settings) -> None:
    if n > settings.max_batch_size:
        raise HTTPException(
            413,
            f"batch of {n} items exceeds the limit of "
            f"{settings.max_batch_size} (GTPO_RS_MAX_BATCH_SIZE)",
        )


def format_validation_error(exc: RequestValidationError) -> str:
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


async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
    return JSONResponse(status_code=422, content={"detail": format_validation_error(exc)})


async def unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    # Never a stack trace to the client; the log has it.
    log.exception("unhandled error on %s", request.url.path)
    return JSONResponse(status_code=500, content={"detail": "internal error (see server log)"})


router = APIRouter()


def _self_contained_schema(model: type[BaseModel]) -> dict[str, Any]:
    """``model``'s JSON schema with its ``$defs`` written in place: pydantic's ``#/$defs/X``
    references point at the document root, which in /openapi.json is not this schema, so
    clients and fuzzers generated from the spec could not resolve them."""
    schema = model.model_json_schema()
    defs = schema.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref", "")
            if ref.startswith("#/$defs/"):
                return inline(defs[ref.removeprefix("#/$defs/")])
            return {key: inline(value) for key, value in node.items()}
        if isinstance(node, list):
            return [inline(value) for value in node]
        return node

    return inline(schema)


def _post(
    path: str, response_model: type[BaseModel], body: type[BaseModel], *parameters: dict[str, Any]
) -> Any:
    """A token-protected POST route that reads its request itself (``_accepted``), so its
    body's schema and its query ``parameters`` are documented here for OpenAPI."""
    return router.post(
        path,
        response_model=response_model,
        responses={code: {"model": ErrorResponse} for code in (401, 413, 422, 503)},
        openapi_extra={
            **({"parameters": list(parameters)} if parameters else {}),
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": _self_contained_schema(body)}},
            },
        },
    )


def client_of(request: Request) -> Hashable:
    """Whom the verification pool's fair queue shares the workers between: the connection
    (its peer's address and port; one client's keep-alive connection, or one request)."""
    return request.scope.get("client")


# What a client waits before it asks again when a verdict could not be computed in time.
RETRY_AFTER_S = 1


def _computed(reasons: list[str], svc: Service) -> None:
    """Raise 503 (with Retry-After) when any verdict of the request could not be computed in
    time: OpenRLHF's protocol has no per-item error, and a 0 for a check that never finished
    would train the policy on a reward nobody computed. Every client retries a 503."""
    for reason in reasons:
        if reason in NOT_COMPUTED:
            break
    else:
        return  # every verdict computed: the usual case, without building a list
    missing = [r for r in reasons if r in NOT_COMPUTED]
    if missing:
        svc.metrics.not_computed.inc(len(missing))
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            f"{len(missing)} of {len(reasons)} verdicts could not be computed in time "
            f"({', '.join(sorted(set(missing)))}): the server is busy; retry",
            headers={"Retry-After": str(RETRY_AFTER_S)},
        )


async def _score_counted(
    body: RewardRequest, svc: Service, fmt: ResponseFormat, request: Request
) -> list[ItemScore]:
    """Both scoring routes: limits checked, items scored in order, verdicts counted, and a 503
    when a verdict could not be computed."""
    _check_batch(len(body.query), svc.settings)
    items = await svc.scorer.score_batch(
        body.query, body.prompts, body.labels, fmt, client=client_of(request)
    )
    svc.metrics.items.inc(len(items))
    not_found = 0
    for it in items:
        svc.metrics.verdicts.labels(it.reason).inc()
        svc.metrics.format_scores.labels(it.format_reason).inc()
        svc.metrics.responses.labels(it.response_start).inc()
        not_found += it.response_start == Start.NOT_FOUND
    if not_found:
        first = next(i for i, it in enumerate(items) if it.response_start == Start.NOT_FOUND)
        _throttled.warning(
            "response_not_found",
            "%d of %d responses not found: prompts[%d] (%r) is not in its query (%r), which has "
            "no assistant header either; those items score 0 (response_not_found, counted in "
            "gtpo_rs_responses_total). Send each query's own prompt as 'prompts', or leave "
            "'prompts' out when the queries are the responses alone",
            not_found, len(items), first, _excerpt(body.prompts[first] if body.prompts else ""),
            _excerpt(body.query[first]),
        )  # fmt: skip
    _computed([it.reason for it in items], svc)
    return items


def _excerpt(text: str, chars: int = 60) -> str:
    """The start and end of ``text`` for a log line."""
    if len(text) <= 2 * chars:
        return text
    return f"{text[:chars]}…{text[-chars:]}"


@_post("/get_reward", RewardResponse, RewardRequest, FORMAT_PARAMETER)
async def get_reward(request: Request) -> RewardResponse:
    """OpenRLHF's remote reward protocol: total reward = format (0..10) + accuracy (0/10);
    ``scores`` is the accuracy as 1 or 0 (what OpenRLHF's dynamic filtering reads)."""
    svc, body = await _accepted(request, RewardRequest)
    items = await _score_counted(body, svc, chosen_format(request, svc), request)
    return RewardResponse(
        rewards=[it.reward for it in items],
        scores=[accuracy_score(it.accuracy_score) for it in items],
        extra_logs=ExtraLogs(
            format_reward=[it.format_score for it in items],
            accuracy_reward=[it.accuracy_score for it in items],
        ),
    )


@_post("/v1/score", ScoreResponse, RewardRequest, FORMAT_PARAMETER)
async def score(request: Request) -> ScoreResponse:
    """Same scoring as /get_reward with the full verdict of every item."""
    svc, body = await _accepted(request, RewardRequest)
    fmt = chosen_format(request, svc)
    return ScoreResponse(results=await _score_counted(body, svc, fmt, request))


@_post("/v1/equivalent", EquivalentResponse, EquivalentRequest)
async def equivalent(request: Request) -> EquivalentResponse:
    """Answer/reference pairs in, verdicts out: the checker behind the accuracy reward, with
    the same answer policy, cost guard and deadline (what ``gtpo eval`` groups maj@k by)."""
    svc, body = await _accepted(request, EquivalentRequest)
    _check_batch(len(body.pairs), svc.settings)
    pairs = [(p.answer, p.reference) for p in body.pairs]
    verdicts = await svc.scorer.equivalent_batch(pairs, client=client_of(request))
    _computed([v.reason for v in verdicts], svc)
    return EquivalentResponse(
        results=[EquivalentVerdict(equivalent=v.equal, reason=v.reason) for v in verdicts]
    )


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is alive and serving HTTP."""
    return {"status": "ok"}


@router.get("/readyz", responses={503: {"description": "Workers still starting"}})
async def readyz(svc: ServiceDep) -> JSONResponse:
    """Ready when the verification workers are warmed up."""
    if svc.pool.ready:
        return JSONResponse({"status": "ready", "workers": svc.settings.verify_workers})
    return JSONResponse({"status": "starting"}, status_code=503)


@router.get("/metrics", response_class=PlainTextResponse)
async def prometheus(svc: ServiceDep) -> Response:
    body, content_type = exposition(svc.metrics)
    return Response(body, media_type=content_type)


# Every path the router serves (the request metrics label other paths "other").
ROUTE_PATHS = frozenset(route.path for route in router.routes if hasattr(route, "path"))
