"""The MCP server through the SDK's own client: stdio (a real subprocess, `python -m
evidex.interfaces.mcp_server`, configured by environment) and streamable HTTP (uvicorn in a thread, API
keys in headers), on a real index of the sample handbook."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
import jsonschema
import pytest
from interfaces_support import ENGINEERING, MARKER, RESTRICTED_QUESTIONS, SECURITY, live_server
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from evidex.engine import Engine
from evidex.interfaces import tool
from evidex.interfaces.keys import KeyStore, RateLimiter
from evidex.interfaces.mcp_server import MCP_PATH, http_app

pytestmark = pytest.mark.slow


def structured(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    data: dict[str, Any] = result.structured_content
    assert json.loads(result.content[0].text) == data  # the same result as text, for text-only clients
    jsonschema.validate(data, tool.OUTPUT_SCHEMA)
    return data


def test_stdio_runs_as_the_configured_principal(handbook_engine: Engine, cache_dir: Path, tmp_path: Path) -> None:
    index = handbook_engine.config.index_dir
    handbook_engine.close()
    env = {"EVIDEX_INDEX_PATH": str(index), "EVIDEX_EMBEDDING_CACHE_DIR": str(cache_dir),
           "EVIDEX_GATE_DEFAULT_PRINCIPAL": "local-agent", "EVIDEX_GATE_DEFAULT_LABELS": "engineering-read",
           "HF_HUB_OFFLINE": "1"}
    params = StdioServerParameters(command=sys.executable, args=["-m", "evidex.interfaces.mcp_server"], env=env,
                                   cwd=str(tmp_path))
    server_log = tmp_path / "server.stderr"

    async def session() -> None:
        with server_log.open("w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as s:
                init = await s.initialize()
                assert init.server_info.name == "evidex"
                tools = (await s.list_tools()).tools
                assert [t.name for t in tools] == [tool.NAME]
                assert tools[0].input_schema == tool.INPUT_SCHEMA
                assert tools[0].output_schema == tool.OUTPUT_SCHEMA
                assert tools[0].annotations is not None and tools[0].annotations.read_only_hint

                result = structured(await s.call_tool(tool.NAME, {"query": "How do I restore a Postgres backup?",
                                                                  "k": 5}))
                assert result["request"]["principal"] == {"name": "local-agent", "labels": ["engineering-read"]}
                assert result["decision"]["recommendation"]["action"] in {"proceed", "re-query", "stop"}
                assert result["evidence"] and len([c for g in result["evidence"] for c in g["chunks"]]) <= 5

                for question in RESTRICTED_QUESTIONS:
                    hidden = await s.call_tool(tool.NAME, {"query": question, "aspect_focus": "security"})
                    assert MARKER not in hidden.content[0].text
                    # Its searches see only what local-agent may read (no declared family reaches further).
                    assert structured(hidden)["rejected"]["rejected_counts"]["access-label-not-granted"] == 0

                bad = await s.call_tool(tool.NAME, {"query": "x", "k": 99})
                assert bad.is_error and bad.content[0].text == "k: must be between 1 and 50 (got 99)"
                sneaky = await s.call_tool(tool.NAME, {"query": "x", "principal": "root"})
                assert sneaky.is_error and "principal" in sneaky.content[0].text
                with pytest.raises(MCPError, match="unknown tool"):
                    await s.call_tool("drop_index", {})

    anyio.run(session)
    assert MARKER not in server_log.read_text()


def test_streamable_http_takes_the_principal_from_the_key(handbook_engine: Engine, keys: KeyStore) -> None:
    sec, _ = keys.create("sec", "sam", SECURITY, rate_per_min=3)
    eng, _ = keys.create("eng", "erin", ENGINEERING)
    # A stopped clock: the bucket cannot refill while a loaded machine runs the calls, so the wait is exact.
    app = http_app(handbook_engine, keys, limiter=RateLimiter(clock=lambda: 0.0))

    async def call(base: str, key: str, n: int = 1, *, bearer: bool = True) -> list[Any]:
        headers = {"Authorization": f"Bearer {key}"} if bearer else {"X-API-Key": key}
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http, \
                streamable_http_client(base + MCP_PATH, http_client=http) as (read, write), \
                ClientSession(read, write) as s:
            await s.initialize()
            return [await s.call_tool(tool.NAME, {"query": RESTRICTED_QUESTIONS[0]}) for _ in range(n)]

    async def refused(base: str, headers: dict[str, str]) -> int:
        async with httpx2.AsyncClient(timeout=30) as http:
            r = await http.post(base + MCP_PATH, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                                headers={**headers, "Accept": "application/json, text/event-stream"})
            assert "Traceback" not in r.text
            return r.status_code

    with live_server(app) as base:
        as_sec = anyio.run(call, base, sec, 4)
        as_eng = anyio.run(lambda: call(base, eng, bearer=False))
        assert anyio.run(refused, base, {}) == 401
        assert anyio.run(refused, base, {"X-API-Key": "evx_0123456789ab_" + "A" * 43}) == 401
        keys.revoke("eng")
        assert anyio.run(refused, base, {"Authorization": f"Bearer {eng}"}) == 401

    first = structured(as_sec[0])
    assert first["request"]["principal"] == {"name": "sam", "labels": list(SECURITY)}
    assert MARKER in as_sec[0].content[0].text
    assert [r.is_error for r in as_sec] == [False, False, False, True]  # 3 per minute
    assert "rate limited" in as_sec[3].content[0].text and "retry after 20 s" in as_sec[3].content[0].text
    assert structured(as_eng[0])["request"]["principal"] == {"name": "erin", "labels": list(ENGINEERING)}
    assert MARKER not in as_eng[0].content[0].text


def test_streamable_http_logs_one_line_per_request_and_limits_the_body(
        handbook_engine: Engine, keys: KeyStore, caplog: pytest.LogCaptureFixture) -> None:
    """The HTTP API's guard fronts the MCP app too: one line per request naming the key, never the query or the
    result (the single-process server had logged uvicorn's own lines instead), and a body over the limit is 413."""
    eng, _ = keys.create("eng", "erin", ENGINEERING)
    app = http_app(handbook_engine, keys, limiter=RateLimiter(clock=lambda: 0.0))
    accept = {"Authorization": f"Bearer {eng}", "Accept": "application/json, text/event-stream"}
    question = RESTRICTED_QUESTIONS[0]

    async def post(base: str, body: dict[str, Any]) -> tuple[int, str]:
        async with httpx2.AsyncClient(timeout=60) as http:
            r = await http.post(base + MCP_PATH, json=body, headers=accept)
            return r.status_code, r.text

    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": tool.NAME, "arguments": {"query": question}}}
    caplog.set_level(logging.INFO)
    with live_server(app) as base:
        status, text = anyio.run(post, base, call)
        too_big, _ = anyio.run(post, base, {**call, "padding": "x" * 20_000})
    assert status == 200 and '"result"' in text
    assert too_big == 413
    lines = [rec.getMessage() for rec in caplog.records if rec.name == "evidex.http"]
    assert any(f"POST {MCP_PATH} 200 key=eng" in line for line in lines), lines
    assert any(f"POST {MCP_PATH} 413 key=-" in line for line in lines), lines
    logged = "\n".join(rec.getMessage() for rec in caplog.records)
    assert question not in logged and eng not in logged
