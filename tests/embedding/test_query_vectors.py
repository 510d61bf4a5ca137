"""Query vectors kept in memory: an agent's re-query repeats its question, and the engine embeds it once."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from evidex.embedding.cache import QueryVectors
from evidex.embedding.protocol import Embedder
from evidex.engine import Engine
from evidex.errors import ConfigError
from evidex.pipeline import SearchRequest
from evidex.result import decision_json

EngineFactory = Callable[..., Engine]
CorpusWriter = Callable[..., Path]


class CountingEmbedder:
    """The real embedder, counting the query texts it embeds."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.queries: list[str] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        self.queries.append(text)
        return self.inner.embed_query(text)


def test_a_repeated_question_is_embedded_once_and_ranks_the_same(make_engine: EngineFactory,
                                                                write_corpus: CorpusWriter,
                                                                embedder: Embedder) -> None:
    counting = CountingEmbedder(embedder)
    engine = make_engine()
    engine._embedder = counting  # type: ignore[assignment]
    engine.ingest([write_corpus({"rotation.md": "# Key rotation\n\nRotate the signing keys every quarter.\n",
                                 "pools.md": "# Pools\n\nThe connection pool is bounded at fifty.\n"})])
    question = "How often are signing keys rotated?"
    at = datetime(2026, 11, 30, tzinfo=UTC)
    first = engine.result_of(engine.run(SearchRequest(query=question, retrieved_at=at)))
    engine.run(SearchRequest(query=question, aspect_focus="connection pool", retrieved_at=at))
    assert counting.queries == [question, "connection pool"]  # the re-query embeds only its focus
    repeat = engine.result_of(engine.run(SearchRequest(query=question, retrieved_at=at)))
    assert counting.queries == [question, "connection pool"]
    assert decision_json(repeat) == decision_json(first)
    kept = engine.encode_query(question)
    assert np.array_equal(kept, embedder.embed_query(question)) and not kept.flags.writeable


def test_the_oldest_vector_goes_first_and_size_zero_keeps_none() -> None:
    made: list[str] = []

    def embed(text: str) -> npt.NDArray[np.float32]:
        made.append(text)
        return np.full(3, len(made), dtype=np.float32)

    two = QueryVectors(2)
    for text in ["a", "b", "a", "c", "a", "b"]:  # "a" is used again before "c" arrives: "b" goes
        two.get(text, embed)
    assert made == ["a", "b", "c", "b"]
    none = QueryVectors(0)
    none.get("a", embed)
    none.get("a", embed)
    assert made[-2:] == ["a", "a"]


def test_a_negative_query_cache_is_refused(make_engine: EngineFactory) -> None:
    with pytest.raises(ConfigError, match="query_cache"):
        make_engine(embedding={"query_cache": -1})
