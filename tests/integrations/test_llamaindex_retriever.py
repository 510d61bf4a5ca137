"""The LlamaIndex adapter through LlamaIndex's own retriever interface, over the real handbook index."""

from __future__ import annotations

import pytest

pytest.importorskip("llama_index.core", reason="the LlamaIndex extra is not installed: pip install '.[llamaindex]'")

from integrations_support import (
    AT,
    BREAKGLASS_QUESTION,
    BREAKGLASS_SOURCE,
    MARKER,
    METADATA_KEYS,
    READER,
    ROTATION_CITATION,
    ROTATION_QUESTION,
    SECURITY,
)
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode

from evidex.engine import Engine
from evidex.integrations.llamaindex import EvidexRetriever


def test_retrieve_returns_cited_nodes_best_first(handbook: Engine) -> None:
    retriever = EvidexRetriever(handbook, READER, k=5, retrieved_at=AT)
    assert isinstance(retriever, BaseRetriever)
    hits = retriever.retrieve(ROTATION_QUESTION)
    assert hits and all(isinstance(h, NodeWithScore) and isinstance(h.node, TextNode) for h in hits)
    first = hits[0].node
    assert first.metadata["citation"] == ROTATION_CITATION
    assert set(first.metadata) >= METADATA_KEYS
    assert first.metadata["status"] == "citation-accepted" and first.metadata["evidence_family"] == "key-rotation"
    assert "vlctl transit rotate" in first.get_content()
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    # An LLM sees the text, the title and the citation, not the bookkeeping.
    prompt = first.get_content(metadata_mode=MetadataMode.LLM)
    assert ROTATION_CITATION in prompt and "snapshot_id" not in prompt


def test_restricted_text_never_reaches_a_reader(handbook: Engine) -> None:
    reader = EvidexRetriever(handbook, READER, retrieved_at=AT).retrieve(QueryBundle(BREAKGLASS_QUESTION))
    assert all(MARKER not in h.node.get_content() for h in reader)
    assert BREAKGLASS_SOURCE not in {h.node.metadata["source"] for h in reader}
    assert {h.node.metadata["recommendation"] for h in reader} == {"stop"}
    security = EvidexRetriever(handbook, SECURITY, retrieved_at=AT).retrieve(BREAKGLASS_QUESTION)
    assert security[0].node.metadata["source"] == BREAKGLASS_SOURCE
