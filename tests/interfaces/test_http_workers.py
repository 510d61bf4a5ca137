"""`serve --workers N`: each worker listens on its own socket of one port, so the kernel spreads new connections
over them (one shared socket let the first worker to wake accept every waiting connection)."""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path

import httpx2
import pytest
import uvicorn
from interfaces_support import free_port

from evidex.engine import Engine
from evidex.interfaces.http_workers import can_share_port, reuse_port_listener, run_workers

pytestmark = pytest.mark.skipif(not can_share_port(), reason="needs SO_REUSEPORT")


def test_connections_are_spread_over_the_workers_sockets() -> None:
    port = free_port()
    listeners = [reuse_port_listener("127.0.0.1", port, 128) for _ in range(2)]
    clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(64)]
    try:
        accepted = []
        for listener in listeners:
            listener.setblocking(False)
            count = 0
            while True:
                try:
                    conn, _ = listener.accept()
                except BlockingIOError:
                    break
                conn.close()
                count += 1
            accepted.append(count)
        assert sum(accepted) == 64
        assert min(accepted) >= 8  # all on one socket: 2 ** -63 by chance; 8 or fewer: under 1e-9
        assert all(s.proto == socket.IPPROTO_TCP for s in listeners)  # asyncio sets TCP_NODELAY on theirs
    finally:
        for s in [*clients, *listeners]:
            s.close()


def test_a_port_another_program_listens_on_fails_before_any_worker_starts() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        config = uvicorn.Config("evidex.interfaces.http:worker_app", factory=True, host="127.0.0.1",
                                port=taken.getsockname()[1])
        with pytest.raises(OSError):
            run_workers(config, 2)


def _children(pid: int) -> set[int]:
    """The worker processes of the supervisor `pid` (spawned; not multiprocessing's resource tracker)."""
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        found |= {int(c) for c in (task / "children").read_text().split()}
    return {c for c in found if b"spawn_main" in _cmdline(c)}


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:  # gone already
        return b""


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads the process tree from Linux /proc")
def test_a_killed_worker_is_replaced(handbook_engine: Engine, cache_dir: Path) -> None:
    from test_serve_processes import serving

    index = Path(handbook_engine.config.index.path)
    with serving(index, cache_dir, "--workers", "2") as base:
        port = base.rsplit(":", 1)[1]
        parent = next(p for p in (int(x) for x in os.listdir("/proc") if x.isdigit())
                      if f"--port\0{port}\0--workers".encode() in _cmdline(p))
        deadline = time.monotonic() + 60
        while len(workers := _children(parent)) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(workers) == 2
        victim = min(workers)
        os.kill(victim, signal.SIGKILL)
        while (victim in _children(parent) or len(_children(parent)) < 2) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert victim not in _children(parent) and len(_children(parent)) == 2
        assert httpx2.get(f"{base}/v1/health", timeout=10).status_code == 200
