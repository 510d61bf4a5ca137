"""The HTTP API and the web inspector: a thin FastAPI layer over `Engine.search_with_reasoning`.

    POST /v1/search_with_reasoning   the agent tool (body: query, aspect_focus?, k?); needs an API key
    GET  /v1/tool                    the tool definition (?format=mcp|openai|anthropic)
    GET  /v1/health                  liveness; with a valid key also the index snapshot served
    GET  /openapi.json               the OpenAPI document (no Swagger UI: it would load a CDN)
    GET  /                           the web inspector (static HTML + JS from `static/`, nothing external)

Who is asking comes from the key (`Authorization: Bearer evx_...` or `X-API-Key: evx_...`), never from the
body: a body with any field beyond query / aspect_focus / k is refused. Every error, whatever raised it, is
turned into a status and a JSON body `{"error": {"code", "message"}}` by `api_error` (`http_errors`), the one
mapping table; messages name the problem, never echo restricted text, and carry no stack trace. The request log
(`evidex.http`, written by the outermost layer `Guard` in `http_guard`) records method, path, status, key name
and latency: never a query or a result.

`serve` runs one process; `serve_workers` runs several (uvicorn's supervisor), each building its own engine
with `worker_app`, all sharing the key file and its rate buckets.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import Depends, FastAPI, Request, Security
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp

from evidex.engine import Engine, ready_to_serve
from evidex.errors import StageError
from evidex.interfaces import tool
from evidex.interfaces.http_errors import ApiError as ApiError  # re-exported: the API's error type and mapping
from evidex.interfaces.http_errors import api_error as api_error
from evidex.interfaces.http_errors import validation_message
from evidex.interfaces.http_guard import Guard as Guard  # re-exported: MCP over HTTP wraps its app in it too
from evidex.interfaces.keys import KeyRecord, KeyStore, RateLimiter, rates_path

if TYPE_CHECKING:
    import uvicorn

log = logging.getLogger("evidex.http")

STATIC_DIR = Path(__file__).parent / "static"
DEFAULT_PORT = 8700
SEARCH_PATH = "/v1/search_with_reasoning"
WORKER_ENV = "EVIDEX_SERVE_WORKER"  # the JSON settings `serve_workers` hands each worker process

def _openapi_without_422(app: FastAPI, generate: Callable[[], dict[str, Any]], max_k: int) -> dict[str, Any]:
    """FastAPI documents a 422 for every route with a body or parameters; this API answers 400 instead. `k`'s
    maximum is this server's (`serve --max-k`), not the tool's."""
    if app.openapi_schema is None:
        schema = generate()
        for operations in schema["paths"].values():
            for operation in operations.values():
                operation.get("responses", {}).pop("422", None)
        schemas = schema.get("components", {}).get("schemas", {})
        schemas.pop("HTTPValidationError", None)
        schemas.pop("ValidationError", None)
        for variant in schemas["SearchBody"]["properties"]["k"].get("anyOf", []):
            if variant.get("type") == "integer":
                variant["maximum"] = max_k
    return app.openapi_schema or generate()


# ---- the request body ------------------------------------------------------------------------------
class SearchBody(BaseModel):
    """The tool's arguments. No principal, no labels: those come from the API key."""

    model_config = ConfigDict(extra="forbid", strict=True)  # "5" is not an integer, as in the tool's schema

    query: str = Field(min_length=1, max_length=tool.MAX_QUERY_CHARS, description="The question.")
    aspect_focus: str | None = Field(default=None, max_length=tool.MAX_ASPECT_FOCUS_CHARS,
                                     description="Optional aspect to concentrate on.")
    k: int | None = Field(default=None, ge=1, le=tool.MAX_K, description="At most this many evidence chunks.")


class ErrorDetail(BaseModel):
    code: str
    message: str


class ErrorBody(BaseModel):
    """Every error response: `{"error": {"code", "message"}}`."""

    error: ErrorDetail


_bearer = HTTPBearer(auto_error=False, description="Authorization: Bearer evx_...")
_api_key_header = APIKeyHeader(name="X-API-Key", auto_error=False, description="X-API-Key: evx_...")


def authorize(request: Request,
              bearer: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)],
              api_key: Annotated[str | None, Security(_api_key_header)]) -> KeyRecord:
    """The caller's key (from `Authorization: Bearer` or `X-API-Key`), within its rate, or an ApiError."""
    limiter: RateLimiter = request.app.state.evidex_limiter
    record = _key_of(request, bearer.credentials if bearer is not None else api_key)
    _count_request(request, record)
    decision = limiter.acquire(record.name, record.rate_per_min)
    if not decision.allowed:
        raise ApiError(429, "rate-limited", f"over {record.rate_per_min} requests per minute for this key; "
                       f"retry after {decision.retry_after_header} s", {"Retry-After": decision.retry_after_header})
    return record


def _count_request(request: Request, record: KeyRecord) -> None:
    """Count one request of `record`'s in its request bucket (`[server] requests_per_call`), or a 429 ApiError."""
    limiter: RateLimiter = request.app.state.evidex_limiter
    per_call: float = request.app.state.evidex_requests_per_call
    decision = limiter.acquire_request(record.name, record.rate_per_min, per_call)
    if not decision.allowed:
        raise ApiError(429, "rate-limited", f"over this key's requests per minute; retry after "
                       f"{decision.retry_after_header} s", {"Retry-After": decision.retry_after_header})


def _key_of(request: Request, presented: str | None) -> KeyRecord:
    """The valid key `presented`, or a 401 ApiError."""
    keys: KeyStore = request.app.state.evidex_keys
    challenge = {"WWW-Authenticate": "Bearer"}
    if not presented or not presented.strip():
        raise ApiError(401, "unauthorized", "an API key is required (Authorization: Bearer <key> or X-API-Key)",
                       challenge)
    record = keys.authenticate(presented.strip())
    if record is None:
        raise ApiError(401, "unauthorized", "the API key is not valid (unknown, revoked or expired)", challenge)
    request.state.evidex_key = record.name
    return record


def _presented_key(request: Request) -> str | None:
    """The key in the headers, read as the route's security schemes read it."""
    scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials
    return request.headers.get("x-api-key")


MAX_BODY_BYTES = 16384  # a request body, by default (a search is a few hundred bytes)


def create_app(engine: Engine, keys: KeyStore, *, max_body_bytes: int = MAX_BODY_BYTES, max_k: int = tool.MAX_K,
               limiter: RateLimiter | None = None) -> FastAPI:
    """The HTTP API over `engine`, authenticating with `keys` and rate-limiting with `limiter`."""
    if not 1 <= max_k <= tool.MAX_K:
        raise ValueError(f"max_k must be between 1 and {tool.MAX_K}")
    app = FastAPI(title="evidex", version="1", description=tool.DESCRIPTION, docs_url=None, redoc_url=None)
    app.state.evidex_keys = keys
    app.state.evidex_limiter = limiter or RateLimiter()
    app.state.evidex_requests_per_call = engine.config.server.requests_per_call
    _add_tool_routes(app, engine, max_k=max_k, max_body_bytes=max_body_bytes)
    _add_operation_routes(app, engine)
    handle = _error_handler(max_k)
    for cls in (ApiError, RequestValidationError, StarletteHTTPException):
        app.add_exception_handler(cls, handle)
    app.openapi = functools.partial(_openapi_without_422, app, app.openapi, max_k)  # type: ignore[method-assign]
    app.add_middleware(Guard, max_body_bytes=max_body_bytes)
    return app


def _add_tool_routes(app: FastAPI, engine: Engine, *, max_k: int, max_body_bytes: int) -> None:
    """The agent tool: `POST /v1/search_with_reasoning` (behind a key) and its definition."""

    @app.post(SEARCH_PATH, tags=["agent tool"], summary="search_with_reasoning(query, aspect_focus)",
              description=tool.DESCRIPTION, response_class=JSONResponse,
              responses={200: {"description": "The decision, evidence, signals, trace and cost.",
                               "content": {"application/json": {"schema": tool.OUTPUT_SCHEMA}}},
                         400: {"model": ErrorBody, "description": "Invalid arguments (the message names one)."},
                         401: {"model": ErrorBody, "description": "Missing, unknown, revoked or expired API key."},
                         413: {"model": ErrorBody, "description": f"Body over {max_body_bytes} bytes."},
                         429: {"model": ErrorBody, "description": "Over the key's rate; see Retry-After."},
                         500: {"model": ErrorBody, "description": "A search stage failed (details in the log)."}})
    def search_with_reasoning(body: SearchBody, key: Annotated[KeyRecord, Depends(authorize)]) -> JSONResponse:
        try:
            args = tool.parse_arguments(body.model_dump(), max_k=max_k)
            result = engine.search_with_reasoning(args.query, args.aspect_focus, k=args.k,
                                                  principal=key.to_principal())
        except Exception as exc:
            raise api_error(exc) from exc
        return JSONResponse(result)

    @app.get("/v1/tool", tags=["agent tool"], summary="The tool definition")
    def tool_definition(format: tool.SchemaFormat = tool.SchemaFormat.MCP) -> dict[str, Any]:
        return tool.definition(format, max_k=max_k)


def _add_operation_routes(app: FastAPI, engine: Engine) -> None:
    """Liveness, and the web inspector with its static files."""

    @app.get("/v1/health", tags=["operations"], summary="Liveness",
             description="`{\"status\": \"ok\"}`; a caller with a valid API key also gets the index snapshot "
                         "served (it names batches: nothing of the index is shown without a key).")
    def health(request: Request) -> dict[str, Any]:
        presented = _presented_key(request)
        record = request.app.state.evidex_keys.authenticate(presented.strip()) if presented else None
        if record is None:
            return {"status": "ok"}
        request.state.evidex_key = record.name
        _count_request(request, record)
        try:
            snapshot = engine.store.snapshot_id()
        except Exception as exc:
            raise api_error(exc) from exc
        return {"status": "ok", "snapshot_id": snapshot}

    @app.get("/", include_in_schema=False)
    def inspector() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html", media_type="text/html")

    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")


def _error_handler(max_k: int) -> Callable[[Request, Exception], Awaitable[JSONResponse]]:
    """The app's one exception handler: every error as `api_error` maps it, server errors logged by type."""

    async def handle(request: Request, exc: Exception) -> JSONResponse:
        if isinstance(exc, RequestValidationError) and request.url.path == SEARCH_PATH:
            # The body is parsed before the key is checked: a caller without a valid key learns nothing
            # about its body, and a valid one is told the limits this server applies.
            try:
                _key_of(request, _presented_key(request))
            except ApiError as denied:
                return denied.response()
            return ApiError(400, "invalid-argument", validation_message(exc, max_k)).response()
        error = api_error(exc)
        if error.status >= 500:
            cause = exc.__cause__ or exc
            stage = f" (stage {cause.stage})" if isinstance(cause, StageError) else ""
            log.error("%s %s failed: %s%s", request.method, request.url.path, type(cause).__name__, stage)
            log.debug("details", exc_info=cause)
        return error.response()

    return handle


def log_config(level: str = "info") -> dict[str, Any]:
    """uvicorn's logging setup plus the `evidex` loggers on its console handler (our request line replaces
    uvicorn's access log: it adds the key name and the latency, and like it never logs a body)."""
    import copy

    from uvicorn.config import LOGGING_CONFIG

    config: dict[str, Any] = copy.deepcopy(LOGGING_CONFIG)
    config["loggers"]["evidex"] = {"handlers": ["default"], "level": level.upper(), "propagate": False}
    return config


def serve(app: ASGIApp, *, host: str = "127.0.0.1", port: int = DEFAULT_PORT, log_level: str = "info") -> None:
    """Run `app` with uvicorn until interrupted."""
    import uvicorn

    uvicorn.run(app, host=host, port=port, log_level=log_level, log_config=log_config(log_level), access_log=False,
                server_header=False, proxy_headers=False)


def serve_workers(settings: dict[str, Any], *, workers: int, host: str = "127.0.0.1", port: int = DEFAULT_PORT,
                  log_level: str = "info", app: str = f"{__name__}:worker_app") -> None:
    """Run `workers` processes until interrupted, each serving the app that the factory `app` ("module:function",
    by default this API's `worker_app`) builds from `settings` (config, index, keys, and what the app needs
    besides). A search holds the GIL for most of its ~20 ms, so one process uses about one core; more processes
    answer more requests per second on more cores. Each worker has its own socket of the port where the system
    allows it (`http_workers`: connections spread evenly), else they share uvicorn's one."""
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    from evidex.interfaces.http_workers import can_share_port, run_workers

    os.environ[WORKER_ENV] = json.dumps(settings)
    config = uvicorn.Config(app, factory=True, workers=workers, host=host, port=port,
                            log_level=log_level, log_config=log_config(log_level), access_log=False,
                            server_header=False, proxy_headers=False)
    if can_share_port():  # a socket per worker: the kernel spreads the connections (see `http_workers`)
        run_workers(config, workers)
        return
    sock = tcp_listener(config)
    try:
        Multiprocess(config, sockets=[sock]).run()
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()


def tcp_listener(config: uvicorn.Config) -> socket.socket:
    """uvicorn's listening socket, declared TCP. uvicorn binds it with protocol 0, and asyncio sets TCP_NODELAY
    only on accepted sockets of protocol IPPROTO_TCP: every keep-alive request after the first then waited on
    the client's delayed ACK (uvicorn issue #3149; `serve --workers 2` answered one client at 72 ms p50
    against 24 ms for one process)."""
    bound = config.bind_socket()
    sock = socket.socket(bound.family, socket.SOCK_STREAM, socket.IPPROTO_TCP, fileno=bound.detach())
    sock.set_inheritable(True)
    return sock


@dataclass(frozen=True)
class WorkerParts:
    """What one worker process serves with, opened from the settings in WORKER_ENV: its own engine, key store
    and limiter. The rate buckets are the key file's, shared by every worker. They stay open for the life of
    the process."""

    settings: dict[str, Any]
    engine: Engine
    keys: KeyStore
    limiter: RateLimiter

    @classmethod
    def from_env(cls) -> WorkerParts:
        from evidex.interfaces.cli_runtime import build_config

        settings = json.loads(os.environ[WORKER_ENV])
        config = build_config(Path(settings["config"]) if settings["config"] else None, Path(settings["index"]))
        keys = KeyStore(settings["keys"])
        engine = Engine.open(config)
        ready_to_serve(engine)  # before the first request, as one process's server does
        return cls(settings, engine, keys, RateLimiter(rates_path(keys.path)))


def worker_app() -> FastAPI:
    """One `serve --workers N` process's app (see `serve_workers`)."""
    parts = WorkerParts.from_env()
    return create_app(parts.engine, parts.keys, max_body_bytes=parts.settings["max_body_bytes"],
                      max_k=parts.settings["max_k"], limiter=parts.limiter)
