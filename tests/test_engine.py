"""The Engine as a library object: configurations over one index, and who closes the store."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from evidex.engine import Engine
from evidex.errors import ConfigError
from evidex.types import RetrievalMode

EngineFactory = Callable[..., Engine]
CorpusWriter = Callable[..., Path]


def test_an_engine_with_another_configuration_borrows_the_store(make_engine: EngineFactory,
                                                                write_corpus: CorpusWriter) -> None:
    """Closing the derived engine (an ablation's, say) had closed the store under the engine it came from."""
    engine = make_engine()
    engine.ingest([write_corpus({"rotation.md": "# Key rotation\n\nRotate the signing key every quarter.\n"})])
    derived = engine.with_config(engine.config.replace(evidence={"grade_correct": 0.9}))
    assert derived.config.evidence.grade_correct == 0.9 and derived.store is engine.store
    assert [h.chunk.source for h in derived.search("signing key", k=1, mode=RetrievalMode.BM25)] == ["rotation.md"]
    derived.close()
    assert [h.chunk.source for h in engine.search("signing key", k=1, mode=RetrievalMode.BM25)] == ["rotation.md"]


def test_a_configuration_that_needs_another_index_is_refused(make_engine: EngineFactory) -> None:
    engine = make_engine()
    with pytest.raises(ConfigError, match="different index"):
        engine.with_config(engine.config.replace(chunking={"max_chars": 300}))
