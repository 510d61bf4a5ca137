"""The MCP server: one tool, `search_with_reasoning`, over stdio or streamable HTTP (official `mcp` SDK).

Who is asking:
- stdio: the configured principal (`[gate] default_principal` / `default_labels`, i.e.
  `Engine.default_principal()`): the process belongs to whoever launched it.
- streamable HTTP: the API key of each HTTP request (`Authorization: Bearer evx_...` or `X-API-Key`),
  checked by `KeyAuth` before the SDK sees the request (401 without a valid key). Every request counts
  (`[server] requests_per_call` of them per search the key's rate allows, 429 beyond), and each tool call
  against the key's rate too. An event stream (`GET /mcp`) is held to `[server]` stream bounds
  (`http_streams.StreamLimits`). The server is stateless (no MCP session to hijack) and answers in JSON.

A call returns the result JSON twice, as the SDK allows: as text content (for clients that read only
text) and as structured content (validated by the client against the tool's output schema). Invalid
arguments and failures are tool errors (`isError`) with a safe message from `tool_error`, the one mapping.

Run `python -m evidex.interfaces.mcp_server` (stdio; config from EVIDEX_CONFIG and EVIDEX_* overrides) or
`evidex mcp --transport stdio|http`.
"""

from __future__ import annotations

import functools
import json
import logging
from typing import Any

import anyio
import anyio.to_thread
from mcp import types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from starlette.types import ASGIApp, Receive, Scope, Send

from evidex.admission.gate import Principal
from evidex.config.sections import ServerConfig
from evidex.engine import Engine
from evidex.errors import AccessDenied, BackendUnavailable, EmbeddingError, EvidexError, StageError
from evidex.interfaces import tool
from evidex.interfaces.http_streams import StreamLimits, refuse
from evidex.interfaces.keys import KeyRecord, KeyStore, RateLimiter, rates_path

log = logging.getLogger("evidex.mcp")

SERVER_NAME = "evidex"
DEFAULT_PORT = 8701
MCP_PATH = "/mcp"
SCOPE_KEY = "evidex.key"  # where KeyAuth leaves the caller's KeyRecord in the ASGI scope


class CallRefused(Exception):
    """A tool call refused before the search ran (no key, over the rate)."""


def tool_error(exc: BaseException) -> str:
    """The message a client sees for a failed call: names the problem, never quotes data or a traceback."""
    if isinstance(exc, (tool.ToolInputError, CallRefused)):
        return str(exc)
    if isinstance(exc, AccessDenied):
        return "access denied"
    if isinstance(exc, (BackendUnavailable, EmbeddingError)):
        return "the search backend is unavailable; the operator has the details"
    if isinstance(exc, StageError):
        return f"search stage {exc.stage!r} failed; the operator has the details"
    if isinstance(exc, EvidexError):
        return f"internal error ({type(exc).__name__})"
    return "internal error"


def tool_definition() -> types.Tool:
    return types.Tool(
        name=tool.NAME, title="Search with reasoning", description=tool.DESCRIPTION,
        input_schema=tool.INPUT_SCHEMA, output_schema=tool.OUTPUT_SCHEMA,
        annotations=types.ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                                          open_world_hint=False),
    )


def build_server(engine: Engine, *, principal: Principal | None = None,
                 limiter: RateLimiter | None = None) -> Server[Any]:
    """An MCP server over `engine`. A request carrying a KeyRecord (streamable HTTP) runs as its principal;
    otherwise as `principal` (stdio); with neither, the call is refused."""
    limiter = limiter or RateLimiter()

    def caller(ctx: ServerRequestContext[Any]) -> Principal:
        request = ctx.request
        record: KeyRecord | None = request.scope.get(SCOPE_KEY) if request is not None else None
        if record is not None:
            decision = limiter.acquire(record.name, record.rate_per_min)
            if not decision.allowed:
                raise CallRefused(f"rate limited: over {record.rate_per_min} calls per minute for this key; "
                                  f"retry after {decision.retry_after_header} s")
            return record.to_principal()
        if principal is None:
            raise CallRefused("an API key is required")
        return principal

    async def list_tools(ctx: ServerRequestContext[Any],
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool_definition()])

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name != tool.NAME:
            raise MCPError(types.INVALID_PARAMS, f"unknown tool {params.name!r}; this server has {tool.NAME!r}")
        try:
            args = tool.parse_arguments(params.arguments)
            who = caller(ctx)
            search = functools.partial(engine.search_with_reasoning, args.query, args.aspect_focus, k=args.k,
                                       principal=who)
            result: dict[str, Any] = await anyio.to_thread.run_sync(search)
        except Exception as exc:
            if not isinstance(exc, (tool.ToolInputError, CallRefused)):
                stage = f" (stage {exc.stage})" if isinstance(exc, StageError) else ""
                log.error("tools/call failed: %s%s", type(exc).__name__, stage)
                log.debug("details", exc_info=exc)
            return types.CallToolResult(content=[types.TextContent(type="text", text=tool_error(exc))],
                                        is_error=True)
        text = json.dumps(result, ensure_ascii=False, sort_keys=True)
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                    structured_content=result)

    return Server(SERVER_NAME, version="1", title="evidex",
                  instructions="Call search_with_reasoning and follow decision.recommendation.action: "
                               "proceed, re-query with aspect_focus, or stop and hand over to the owner.",
                  on_list_tools=list_tools, on_call_tool=call_tool)


# ---- transports --------------------------------------------------------------------------------------
async def serve_stdio(engine: Engine) -> None:
    server = build_server(engine, principal=engine.default_principal())
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def run_stdio(engine: Engine) -> None:
    anyio.run(serve_stdio, engine)


class KeyAuth:
    """ASGI layer in front of the SDK's streamable-HTTP app: a valid API key or 401, within the key's request
    bucket or 429, nothing else gets through; an event stream is held to `streams`; the KeyRecord rides in the
    scope to the tool call (which applies the key's rate)."""

    def __init__(self, app: ASGIApp, keys: KeyStore, limiter: RateLimiter | None = None,
                 server: ServerConfig | None = None) -> None:
        self.app = app
        self.keys = keys
        self.limiter = limiter or RateLimiter()
        self.server = server or ServerConfig()
        self.streams = StreamLimits.from_config(self.server)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        scheme, _, token = headers.get("authorization", "").partition(" ")
        presented = token.strip() if scheme.lower() == "bearer" else headers.get("x-api-key", "").strip()
        record = await anyio.to_thread.run_sync(self.keys.authenticate, presented) if presented else None
        if record is None:
            body = json.dumps({"error": {"code": "unauthorized",
                                         "message": "a valid API key is required (Authorization: Bearer <key> "
                                                    "or X-API-Key)"}}).encode()
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer"),
                                    (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        scope.setdefault("state", {})["evidex_key"] = record.name  # for the request's log line (`Guard`)
        decision = await anyio.to_thread.run_sync(self.limiter.acquire_request, record.name, record.rate_per_min,
                                                  self.server.requests_per_call)
        if not decision.allowed:
            await refuse(send, 429, "rate-limited", "over this key's requests per minute; retry after "
                         f"{decision.retry_after_header} s", decision.retry_after_s)
            return
        if scope["method"] == "GET":  # an event stream: bounded in number and in time
            await self.streams.serve(self.app, {**scope, SCOPE_KEY: record}, receive, send, key=record.name)
            return
        await self.app({**scope, SCOPE_KEY: record}, receive, send)


def http_app(engine: Engine, keys: KeyStore, *, host: str = "127.0.0.1",
             limiter: RateLimiter | None = None) -> ASGIApp:
    """The streamable-HTTP MCP app at /mcp (stateless, JSON responses), behind API keys and the HTTP API's
    guard: its body limit (413), security headers and one log line per request naming the key, never a body."""
    from evidex.interfaces.http import MAX_BODY_BYTES, Guard

    limiter = limiter or RateLimiter()
    server = build_server(engine, limiter=limiter)
    app = server.streamable_http_app(streamable_http_path=MCP_PATH, stateless_http=True, json_response=True,
                                     host=host)
    return Guard(KeyAuth(app, keys, limiter, engine.config.server), max_body_bytes=MAX_BODY_BYTES)


def worker_app() -> ASGIApp:
    """One `mcp --transport http --workers N` process's app (see `evidex.interfaces.http.serve_workers`). The
    server is stateless, so any process may answer any request."""
    from evidex.interfaces.http import WorkerParts

    parts = WorkerParts.from_env()
    return http_app(parts.engine, parts.keys, host=parts.settings["host"], limiter=parts.limiter)


def run_http(engine: Engine, keys: KeyStore, *, host: str = "127.0.0.1", port: int = DEFAULT_PORT) -> None:
    """One process, as `evidex serve` runs (uvicorn's own access log off: the guard's line replaces it)."""
    from evidex.interfaces.http import serve

    with RateLimiter(rates_path(keys.path)) as limiter:  # the buckets `evidex serve` draws on too
        serve(http_app(engine, keys, host=host, limiter=limiter), host=host, port=port)


def main() -> None:
    """`python -m evidex.interfaces.mcp_server`: stdio, configured like the CLI (EVIDEX_CONFIG, EVIDEX_*)."""
    import os
    from pathlib import Path

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from evidex.interfaces.cli_runtime import build_config

    config_path = os.environ.get("EVIDEX_CONFIG")
    with Engine.open(build_config(Path(config_path) if config_path else None, None)) as engine:
        run_stdio(engine)


if __name__ == "__main__":
    main()
