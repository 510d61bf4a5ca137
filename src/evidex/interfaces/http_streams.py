"""Bounds on the event streams a serving process holds open (MCP over HTTP: `GET /mcp` opens one).

An event stream is a response that never has to end: without bounds one key could open hundreds and hold them
for good. `StreamLimits` counts the streams open per key and in all, refuses one more over `[server]
max_streams_per_key` (429, the key's own limit) or `max_streams` (503, the server's), and closes a stream that
has sent nothing but keep-alive comments for `stream_idle_timeout_s`, or that has been open `stream_max_s`.

    limits = StreamLimits.from_config(engine.config.server)
    await limits.serve(app, scope, receive, send, key="ci-bot")  # in an ASGI layer that knows the key

One process counts its own streams (a stream lives in one process); the counts are not shared across workers.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from evidex.config.sections import ServerConfig


async def refuse(send: Send, status: int, code: str, message: str, retry_after_s: float) -> None:
    """Answer with `{"error": {"code", "message"}}` and a Retry-After header (whole seconds, rounded up)."""
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"retry-after", str(max(1, math.ceil(retry_after_s))).encode())]})
    await send({"type": "http.response.body", "body": body})


def is_keep_alive(message: Message) -> bool:
    """A body part made only of SSE comment lines (": ping ..."): it keeps a proxy from closing the connection
    but carries nothing, so it does not count as the stream being used."""
    body: bytes = message.get("body", b"")
    lines = [line for line in body.splitlines() if line.strip()]
    return bool(lines) and all(line.startswith(b":") for line in lines)


@dataclass
class StreamLimits:
    """The open streams of one process, per key, and the bounds they are held to (see the module docstring)."""

    per_key: int
    total: int
    idle_s: float
    max_s: float
    open: Counter[str] = field(default_factory=Counter)

    @classmethod
    def from_config(cls, server: ServerConfig) -> StreamLimits:
        return cls(server.max_streams_per_key, server.max_streams, server.stream_idle_timeout_s, server.stream_max_s)

    @property
    def open_total(self) -> int:
        return sum(self.open.values())

    async def serve(self, app: ASGIApp, scope: Scope, receive: Receive, send: Send, *, key: str) -> None:
        """Run `app` for one stream of `key` within the bounds, or refuse it (429 per key, 503 in all)."""
        if self.open[key] >= self.per_key:
            await refuse(send, 429, "too-many-streams", f"this key already holds {self.open[key]} open event "
                         f"streams (at most {self.per_key}); close one first", self.idle_s)
            return
        if self.open_total >= self.total:
            await refuse(send, 503, "too-many-streams", f"the server holds {self.total} open event streams; "
                         "retry later", self.idle_s)
            return
        self.open[key] += 1
        try:
            await self._bounded(app, scope, receive, send)
        finally:
            self.open[key] -= 1
            if not self.open[key]:
                del self.open[key]

    async def _bounded(self, app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
        """Run `app`, cancelling it when idle or too old; a response it started is then ended cleanly."""
        last_used = anyio.current_time()
        started = ended = False

        async def watched_send(message: Message) -> None:
            nonlocal last_used, started, ended
            if message["type"] == "http.response.start":
                started = True
            elif message["type"] == "http.response.body":
                ended = not message.get("more_body", False)
                if not is_keep_alive(message):
                    last_used = anyio.current_time()
            await send(message)

        async with anyio.create_task_group() as group:
            async def watchdog() -> None:
                while (wait := last_used + self.idle_s - anyio.current_time()) > 0:
                    await anyio.sleep(wait)
                group.cancel_scope.cancel()

            async def run() -> None:
                with anyio.move_on_after(self.max_s):
                    await app(scope, receive, watched_send)
                group.cancel_scope.cancel()

            group.start_soon(watchdog)
            group.start_soon(run)
        if started and not ended:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        elif not started:
            await refuse(send, 504, "stream-timeout", "the stream opened nothing before its time ran out",
                         self.idle_s)
