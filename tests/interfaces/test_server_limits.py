"""What one key, or all of them, may hold of a server: every authenticated request counts (MCP initialize and
tools/list included, a search against the key's rate as well), event streams are bounded per key and in all and
closed when idle or old, and the health check shows nothing of the index to a caller without a key."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import anyio
import httpx2
import pytest
from fastapi.testclient import TestClient
from interfaces_support import live_server

from evidex.engine import Engine
from evidex.interfaces.http import create_app
from evidex.interfaces.http_streams import is_keep_alive
from evidex.interfaces.keys import KeyStore, RateLimiter
from evidex.interfaces.mcp_server import MCP_PATH, http_app

EngineFactory = Callable[..., Engine]
LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
ACCEPT = {"Accept": "application/json, text/event-stream"}


def test_health_shows_the_snapshot_only_to_a_valid_key(make_engine: EngineFactory, keys: KeyStore) -> None:
    engine = make_engine()
    key, _ = keys.create("ops", "olga", ["ops"], rate_per_min=60)
    with TestClient(create_app(engine, keys, limiter=RateLimiter(clock=lambda: 0.0))) as client:
        anonymous = client.get("/v1/health")
        forged = client.get("/v1/health", headers={"X-API-Key": "evx_0123456789ab_" + "A" * 43})
        keyed = client.get("/v1/health", headers={"Authorization": f"Bearer {key}"})
    assert anonymous.status_code == forged.status_code == keyed.status_code == 200
    assert anonymous.json() == forged.json() == {"status": "ok"}
    assert keyed.json() == {"status": "ok", "snapshot_id": engine.store.snapshot_id()}


def test_every_http_request_of_a_key_counts(make_engine: EngineFactory, keys: KeyStore) -> None:
    """Rate 2 with [server] requests_per_call = 3: six requests of any kind a minute, two of them searches."""
    engine = make_engine(server={"requests_per_call": 3})
    key, _ = keys.create("bot", "bob", ["ops"], rate_per_min=2)
    headers = {"Authorization": f"Bearer {key}"}
    with TestClient(create_app(engine, keys, limiter=RateLimiter(clock=lambda: 0.0))) as client:
        statuses = [client.get("/v1/health", headers=headers).status_code for _ in range(7)]
        refused = client.get("/v1/health", headers=headers)
    assert statuses == [200] * 6 + [429]
    assert refused.status_code == 429 and refused.headers["Retry-After"] == "10"
    assert refused.json()["error"]["code"] == "rate-limited"


def test_mcp_tools_list_counts_against_the_key(make_engine: EngineFactory, keys: KeyStore) -> None:
    engine = make_engine()  # requests_per_call = 4: a 5-per-minute key may make 20 requests a minute
    key, _ = keys.create("lister", "lee", ["ops"], rate_per_min=5)
    other, _ = keys.create("other", "olive", ["ops"], rate_per_min=5)
    app = http_app(engine, keys, limiter=RateLimiter(clock=lambda: 0.0))

    async def lists(base: str, key: str, n: int) -> list[int]:
        async with httpx2.AsyncClient(timeout=30, headers={"Authorization": f"Bearer {key}", **ACCEPT}) as http:
            return [(await http.post(base + MCP_PATH, json=LIST)).status_code for _ in range(n)]

    with live_server(app) as base:
        mine = anyio.run(lists, base, key, 25)
        theirs = anyio.run(lists, base, other, 1)
    assert mine == [200] * 20 + [429] * 5
    assert theirs == [200]  # one key's bucket, not the server's


def _streams(make_engine: EngineFactory, **server: Any) -> Engine:
    return make_engine(server={"max_streams_per_key": 1, "max_streams": 2, **server})


async def _open(http: httpx2.AsyncClient, base: str, key: str) -> httpx2.Response:
    request = http.build_request("GET", base + MCP_PATH, headers={"Authorization": f"Bearer {key}",
                                                                  "Accept": "text/event-stream"})
    return await http.send(request, stream=True)


def test_event_streams_are_bounded_per_key_and_in_all(make_engine: EngineFactory, keys: KeyStore) -> None:
    engine = _streams(make_engine, stream_idle_timeout_s=20, stream_max_s=30)
    a, _ = keys.create("a", "ann", ["ops"], rate_per_min=60)
    b, _ = keys.create("b", "ben", ["ops"], rate_per_min=60)
    c, _ = keys.create("c", "cat", ["ops"], rate_per_min=60)
    app = http_app(engine, keys, limiter=RateLimiter(clock=lambda: 0.0))

    async def scenario(base: str) -> dict[str, Any]:
        async with httpx2.AsyncClient(timeout=10) as http:
            first = await _open(http, base, a)
            second = await _open(http, base, a)  # the same key again: its own limit
            other = await _open(http, base, b)
            third = await _open(http, base, c)  # a third stream in all: the server's limit
            out = {"first": first.status_code, "second": second.status_code, "other": other.status_code,
                   "third": third.status_code, "second_body": (await second.aread()).decode(),
                   "retry": second.headers.get("retry-after")}
            await first.aclose()
            await other.aclose()
            await second.aclose()
            await third.aclose()
            await anyio.sleep(0.3)  # the server sees the disconnects and counts the streams closed
            again = await _open(http, base, a)
            out["again"] = again.status_code
            await again.aclose()
            return out

    with live_server(app) as base:
        seen = anyio.run(scenario, base)
    assert (seen["first"], seen["second"], seen["other"], seen["third"], seen["again"]) == (200, 429, 200, 503, 200)
    assert "too-many-streams" in seen["second_body"] and seen["retry"] == "20"


@pytest.mark.parametrize(("idle_s", "max_s", "expected_s"), [(0.5, 30.0, 0.5), (30.0, 1.0, 1.0)])
def test_an_idle_or_old_stream_is_closed(make_engine: EngineFactory, keys: KeyStore, idle_s: float, max_s: float,
                                         expected_s: float) -> None:
    engine = _streams(make_engine, stream_idle_timeout_s=idle_s, stream_max_s=max_s)
    key, _ = keys.create("a", "ann", ["ops"], rate_per_min=60)
    app = http_app(engine, keys, limiter=RateLimiter(clock=lambda: 0.0))

    async def held(base: str) -> tuple[int, float]:
        async with httpx2.AsyncClient(timeout=10) as http:
            started = time.monotonic()
            stream = await _open(http, base, key)
            async for _ in stream.aiter_bytes():
                pass
            await stream.aclose()
            return stream.status_code, time.monotonic() - started

    with live_server(app) as base:
        status, lasted = anyio.run(held, base)
    assert status == 200
    assert expected_s * 0.9 <= lasted < expected_s + 2.0


def test_keep_alive_comments_are_not_use() -> None:
    assert is_keep_alive({"type": "http.response.body", "body": b": ping - 2026-01-01 00:00:00\r\n\r\n"})
    assert not is_keep_alive({"type": "http.response.body", "body": b"event: message\r\ndata: {}\r\n\r\n"})
    assert not is_keep_alive({"type": "http.response.body", "body": b""})
