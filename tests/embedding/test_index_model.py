"""An index remembers which embedder made its vectors: another one (even of the same dimension, here the
torch build of the same model) can neither add vectors to it nor query it, and says why."""

from __future__ import annotations

from pathlib import Path

import pytest

from evidex.embedding import SentenceTransformerEmbedder, default_model_dir
from evidex.embedding.protocol import Embedder
from evidex.engine import Engine
from evidex.errors import StoreError
from evidex.pipeline import SearchRequest
from evidex.types import RetrievalMode
from tests.conftest import engine_config

pytest.importorskip("sentence_transformers")


def test_another_embedder_can_neither_add_to_nor_query_an_index(tmp_path: Path, embedder: Embedder,
                                                                 cache_dir: Path) -> None:
    torch_build = SentenceTransformerEmbedder(default_model_dir(), threads=2)
    assert torch_build.dim == embedder.dim and torch_build.fingerprint != embedder.fingerprint
    corpus = tmp_path / "docs"
    corpus.mkdir()
    (corpus / "a.md").write_text("# Alpha\n\nAlpha restarts nightly.\n", encoding="utf-8")
    config = engine_config(tmp_path / "idx", cache_dir)
    with Engine.open(config, embedder=embedder) as built:
        built.ingest([corpus])
        assert built.stats()["embedding_model"] == embedder.fingerprint
    (corpus / "b.md").write_text("# Beta\n\nBeta backs up hourly.\n", encoding="utf-8")
    with Engine.open(config, embedder=torch_build) as other:
        batches = other.batches()
        with pytest.raises(StoreError, match=f"embedder {embedder.fingerprint}, and {torch_build.fingerprint}"):
            other.ingest([corpus])
        assert other.batches() == batches
        with pytest.raises(StoreError, match="vectors of two models cannot be compared"):
            other.run(SearchRequest("when does alpha restart?"))
        # Plain BM25 search needs no query vector and still works (the pipeline embeds every question).
        assert [c.chunk.source for c in other.search("restarts", mode=RetrievalMode.BM25)] == ["a.md"]
    with Engine.open(config, embedder=embedder) as same:
        assert same.ingest([corpus]).added_chunks == 1
        assert same.run(SearchRequest("when does beta back up?")).context
