"""The Haystack adapter as a component, alone and in a Pipeline, over the real handbook index."""

from __future__ import annotations

import pytest

pytest.importorskip("haystack", reason="the Haystack extra is not installed: pip install '.[haystack]'")

from haystack import Document, Pipeline
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

from evidex.engine import Engine
from evidex.integrations.haystack import EvidexRetriever


def test_run_returns_cited_documents_and_the_decision(handbook: Engine) -> None:
    result = EvidexRetriever(handbook, READER, top_k=5, retrieved_at=AT).run(query=ROTATION_QUESTION)
    docs = result["documents"]
    assert docs and len(docs) <= 5 and all(isinstance(d, Document) for d in docs)
    assert docs[0].meta["citation"] == ROTATION_CITATION and set(docs[0].meta) >= METADATA_KEYS
    assert docs[0].content is not None and "vlctl transit rotate" in docs[0].content
    assert result["decision"]["recommendation"] == docs[0].meta["recommendation"]
    fewer = EvidexRetriever(handbook, READER, retrieved_at=AT).run(query=ROTATION_QUESTION, top_k=2)["documents"]
    assert len(fewer) <= 2 and fewer[0].id == docs[0].id  # run's top_k overrides the component's


def test_in_a_pipeline_restricted_text_never_reaches_a_reader(handbook: Engine) -> None:
    pipeline = Pipeline()
    pipeline.add_component("retriever", EvidexRetriever(handbook, READER, retrieved_at=AT))
    out = pipeline.run({"retriever": {"query": BREAKGLASS_QUESTION}})["retriever"]
    assert all(MARKER not in (d.content or "") for d in out["documents"])
    assert BREAKGLASS_SOURCE not in {d.meta["source"] for d in out["documents"]}
    assert out["decision"]["recommendation"] == "stop"
    security = EvidexRetriever(handbook, SECURITY, retrieved_at=AT).run(query=BREAKGLASS_QUESTION)
    assert security["documents"][0].meta["source"] == BREAKGLASS_SOURCE


def test_top_k_must_be_positive(handbook: Engine) -> None:
    with pytest.raises(ValueError, match="top_k"):
        EvidexRetriever(handbook, READER, top_k=0)
