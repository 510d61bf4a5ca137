"""The HTTP servers' outermost layer (`Guard`), shared by the HTTP API and MCP over HTTP: the body limit, the
security headers and the one log line per request."""

from __future__ import annotations

import logging
import time

from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from evidex.interfaces.http_errors import api_error

log = logging.getLogger("evidex.http")

# The inspector loads only its own files; nothing may be framed, embedded or fetched from elsewhere.
_SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                                 b"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
)


class Guard:
    """Outermost layer: the body limit (413 before a byte too many is read), security headers on every
    response, and one log line per request (no bodies, no queries, no results)."""

    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500
        response_started = False
        received = 0

        async def guarded_send(message: Message) -> None:
            nonlocal status, response_started
            if message["type"] == "http.response.start":
                status, response_started = int(message["status"]), True
                ours = {k for k, _ in _SECURITY_HEADERS}
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() not in ours]
                headers.extend(_SECURITY_HEADERS)
                if scope["path"].startswith("/v1/"):
                    headers.append((b"cache-control", b"no-store"))
                message = {**message, "headers": headers}
            await send(message)

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    raise StarletteHTTPException(413)
            return message

        try:
            if _content_length(scope) > self.max_body_bytes:
                await api_error(StarletteHTTPException(413)).response()(scope, receive, guarded_send)
            else:
                await self.app(scope, limited_receive, guarded_send)
        except StarletteHTTPException as exc:
            if exc.status_code != 413 or response_started:
                raise
            await api_error(exc).response()(scope, receive, guarded_send)
        finally:
            key = scope.get("state", {}).get("evidex_key", "-")
            client = (scope.get("client") or ("-",))[0]
            log.info("%s %s %s %d key=%s %.1f ms", client, scope["method"], scope["path"], status, key,
                     (time.perf_counter() - started) * 1000)


def _content_length(scope: Scope) -> int:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return 0
    return 0

