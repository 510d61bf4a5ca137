"""`evidex serve` and `evidex mcp --transport http` as real processes on a real index of the sample handbook:
`--workers 2` answers, and a key's rate is one bucket in the key file, shared by every process that serves it
(the workers, or another server)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import httpx2
import pytest
from interfaces_support import ENGINEERING, free_port
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from evidex.engine import Engine
from evidex.interfaces import tool
from evidex.interfaces.http import SEARCH_PATH
from evidex.interfaces.keys import KeyStore, RateLimiter, rates_path
from evidex.interfaces.mcp_server import MCP_PATH


@contextmanager
def serving(index: Path, cache_dir: Path, *args: str, server: tuple[str, ...] = ("serve",)) -> Iterator[str]:
    """`evidex <server> --index index *args` in a child process on a free port; yields its base URL once it
    answers HTTP (the API's health check, or the MCP endpoint's 401 to a request without a key)."""
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "EVIDEX_EMBEDDING_CACHE_DIR": str(cache_dir)}
    env.pop("EVIDEX_CONFIG", None)
    command = [sys.executable, "-c", "from evidex.interfaces.entry import main; main()", *server, "--index",
               str(index), "--port", str(port), *args]
    probe = MCP_PATH if server[0] == "mcp" else "/v1/health"
    log = index.parent / f"serve-{port}.log"
    with log.open("w") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=index.parent)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, f"the server did not answer {probe} in 90 s"
            try:
                if httpx2.get(f"{base}{probe}", timeout=2).status_code in (200, 401):
                    break
            except httpx2.TransportError:
                time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _ask(base: str, key: str) -> int:
    with httpx2.Client(timeout=60) as http:  # a new connection each time: any worker may take it
        r = http.post(f"{base}{SEARCH_PATH}", json={"query": "how do pods get API credentials?"},
                      headers={"Authorization": f"Bearer {key}"})
        return r.status_code


def test_workers_answer_and_share_each_keys_rate(handbook_engine: Engine, cache_dir: Path) -> None:
    index = Path(handbook_engine.config.index.path)
    with KeyStore(index / "keys.sqlite") as keys:
        key, _ = keys.create("agent", "alice", ENGINEERING, rate_per_min=4)
    with serving(index, cache_dir, "--workers", "2") as base:
        statuses = [_ask(base, key) for _ in range(7)]
    assert sorted(statuses) == [200] * 4 + [429] * 3


def test_mcp_workers_answer_and_share_each_keys_rate(handbook_engine: Engine, cache_dir: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The streamable-HTTP MCP server is stateless, so any worker may answer any request."""
    # Each session's initialize and notification count too ([server] requests_per_call): room for 7 sessions'
    # handshakes, so the key's rate of searches is what refuses the last three.
    monkeypatch.setenv("EVIDEX_SERVER_REQUESTS_PER_CALL", "8")
    index = Path(handbook_engine.config.index.path)
    with KeyStore(index / "keys.sqlite") as keys:
        key, _ = keys.create("agent", "alice", ENGINEERING, rate_per_min=4)

    async def call(base: str) -> tuple[bool, str]:
        # A new connection and session each time: any worker may take it.
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60) as http, \
                streamable_http_client(base + MCP_PATH, http_client=http) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool(tool.NAME, {"query": "how do pods get API credentials?"})
            return result.is_error, result.content[0].text

    with serving(index, cache_dir, "--transport", "http", "--workers", "2", server=("mcp",)) as base:
        results = [anyio.run(call, base) for _ in range(7)]
    answered = [json.loads(text) for failed, text in results if not failed]
    refused = [text for failed, text in results if failed]
    assert len(answered) == 4 and all(r["request"]["principal"]["name"] == "alice" for r in answered)
    assert len(refused) == 3 and all("rate limited" in text for text in refused)


def test_a_keys_bucket_is_shared_with_other_processes_on_its_key_file(handbook_engine: Engine,
                                                                        cache_dir: Path) -> None:
    """Another process (here this test, as `mcp --transport http` would) spends the key's rate: the server
    refuses it."""
    index = Path(handbook_engine.config.index.path)
    with KeyStore(index / "keys.sqlite") as keys:
        key, _ = keys.create("agent", "alice", ENGINEERING, rate_per_min=3)
    with serving(index, cache_dir) as base:
        assert _ask(base, key) == 200
        with RateLimiter(rates_path(index / "keys.sqlite")) as other_process:
            assert [other_process.acquire("agent", 3).allowed for _ in range(3)] == [True, True, False]
        assert _ask(base, key) == 429


def test_the_workers_listening_socket_is_declared_tcp() -> None:
    """asyncio sets TCP_NODELAY only on accepted sockets whose protocol is IPPROTO_TCP; uvicorn's own socket
    for workers says 0, and each keep-alive request after the first then waits ~40 ms on a delayed ACK."""
    import socket

    import uvicorn

    from evidex.interfaces.http import tcp_listener

    port = free_port()
    config = uvicorn.Config("evidex.interfaces.http:worker_app", factory=True, workers=2, host="127.0.0.1",
                            port=port, log_level="warning")
    with tcp_listener(config) as sock:
        assert (sock.family, sock.type, sock.proto) == (socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        assert sock.getsockname() == ("127.0.0.1", port) and sock.get_inheritable()
