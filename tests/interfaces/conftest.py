"""Fixtures for the interface tests: a real index of the sample handbook (real ONNX embedder, shared
embedding cache, so ingest takes about a second), and API keys on a clock the test controls."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from interfaces_support import HANDBOOK, TickClock, WallClock

from evidex.engine import Engine
from evidex.interfaces.keys import KeyStore, RateLimiter


@pytest.fixture
def handbook_engine(make_engine: Callable[..., Engine]) -> Engine:
    """An engine on a fresh index of the 36-page sample handbook."""
    engine = make_engine()
    report = engine.ingest([HANDBOOK])
    assert report.documents == 36 and not report.dead_letters
    return engine


@pytest.fixture
def wall_clock() -> WallClock:
    return WallClock()


@pytest.fixture
def tick_clock() -> TickClock:
    return TickClock()


@pytest.fixture
def keys(tmp_path: Path, wall_clock: WallClock) -> Iterator[KeyStore]:
    with KeyStore(tmp_path / "keys.sqlite", clock=wall_clock) as store:
        yield store


@pytest.fixture
def limiter(tick_clock: TickClock) -> RateLimiter:
    return RateLimiter(clock=tick_clock)
