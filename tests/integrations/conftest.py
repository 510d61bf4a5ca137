"""A real index of the bundled handbook, as `evidex demo` builds it (its own configuration, the shared embedding
cache), for the framework adapters' tests: one per test module."""

from __future__ import annotations

import os
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pytest

from evidex.config import load_config
from evidex.embedding.protocol import Embedder
from evidex.engine import Engine

# Haystack reports usage to its vendor unless told not to; a test run must not try to reach the network.
os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")


@pytest.fixture(scope="module")
def handbook(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder, cache_dir: Path) -> Iterator[Engine]:
    sample = resources.files("evidex").joinpath("sample")
    with resources.as_file(sample) as sample_dir:
        config = load_config(sample_dir / "evidex.toml", env={}).replace(
            index={"path": str(tmp_path_factory.mktemp("handbook") / "idx")},
            embedding={"cache_dir": str(cache_dir)})
        engine = Engine.open(config, embedder=embedder)
        report = engine.ingest([sample_dir / "handbook"], label="demo")
        assert report.documents == 36 and not report.dead_letters
        yield engine
        engine.close()
