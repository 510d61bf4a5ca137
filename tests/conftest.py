"""Shared fixtures: the real default embedder (loaded once), engines on temporary indexes, tiny corpora.

The ONNX export of all-MiniLM-L6-v2 is built once into the cache directory (EVIDEX_TEST_CACHE, default
~/.cache/evidex) and reused by every later run, so the suite pays only for loading it (~0.3 s).
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from evidex.config import Config
from evidex.embedding import load_embedder
from evidex.embedding.protocol import Embedder
from evidex.engine import Engine

# No example database: it would write .hypothesis/ into the working tree. No deadline: CI machines are slow.
# No time limits: this is a 2-core machine shared with other work, where generation speed says nothing about
# the code under test (a too-slow health check once failed a run that passed everywhere else).
settings.register_profile("evidex", database=None, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
# EVIDEX_HYPOTHESIS_PROFILE=deep draws many more examples (run it before a release; CI keeps the default).
settings.register_profile("deep", settings.get_profile("evidex"), max_examples=1500)
settings.load_profile(os.environ.get("EVIDEX_HYPOTHESIS_PROFILE", "evidex"))

EngineFactory = Callable[..., Engine]
CorpusWriter = Callable[..., Path]


@pytest.fixture(scope="session")
def cache_dir() -> Path:
    """Where the ONNX export (and the shared embeddings cache) live across runs."""
    path = Path(os.environ.get("EVIDEX_TEST_CACHE", Path.home() / ".cache" / "evidex"))
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="session")
def embedder(cache_dir: Path) -> Embedder:
    """The real default embedder (ONNX int8 all-MiniLM-L6-v2), one instance for the whole session."""
    return load_embedder("onnx", None, cache_dir)


def engine_config(index_dir: Path, cache_dir: Path, **sections: Any) -> Config:
    """Default config on `index_dir`, embeddings cached in `cache_dir`; `sections` replace on top."""
    config = Config().replace(index={"path": str(index_dir)}, embedding={"cache_dir": str(cache_dir)})
    return config.replace(**sections) if sections else config


@pytest.fixture
def make_engine(tmp_path: Path, embedder: Embedder, cache_dir: Path) -> Iterator[EngineFactory]:
    """make_engine(**sections) -> Engine on tmp_path/idx (pass index={"path": ...} for a second index)."""
    engines: list[Engine] = []

    def make(**sections: Any) -> Engine:
        engine = Engine.open(engine_config(tmp_path / "idx", cache_dir, **sections), embedder=embedder)
        engines.append(engine)
        return engine

    yield make
    for engine in engines:
        engine.close()


@pytest.fixture
def write_corpus(tmp_path: Path) -> CorpusWriter:
    """write_corpus({"a.md": "...", "b.bin": b"..."}, name="corpus") -> the corpus directory.

    Text is dedented and its leading newline dropped, so front matter can be written indented inline.
    """

    def write(files: dict[str, str | bytes], name: str = "corpus") -> Path:
        root = tmp_path / name
        for rel, content in files.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(textwrap.dedent(content).lstrip("\n"), encoding="utf-8")
        root.mkdir(parents=True, exist_ok=True)
        return root

    return write
