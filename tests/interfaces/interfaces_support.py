"""Helpers for the interface tests: the sample handbook, clocks the tests move, a uvicorn server in a thread.

Imported by the test modules beside it (pytest puts this directory on sys.path; the name is unique).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import uvicorn
from starlette.types import ASGIApp

import evidex

HANDBOOK = Path(evidex.__file__).parent / "sample" / "handbook"
MARKER = "RESTRICTED-MARKER"
ENGINEERING = ("engineering-read",)
SECURITY = ("engineering-read", "security-team")
# One question aimed at each restricted page of the handbook (labels: security-team).
RESTRICTED_QUESTIONS = (
    "HSM master key ceremony custodians and ceremony script",
    "break-glass root token for Vaultline: who may use it and how",
    "pentest findings 2026 Q1: open issues and remediation",
)


class WallClock:
    """A UTC clock that stands still until the test moves it (for key expiry)."""

    def __init__(self, start: datetime = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


class TickClock:
    """A monotonic clock in seconds that stands still until the test moves it (for the rate limiter)."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def live_server(app: ASGIApp) -> Iterator[str]:
    """Serve `app` with uvicorn on 127.0.0.1 and a free port in a thread; yields the base URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                           access_log=False, lifespan="on"))
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
