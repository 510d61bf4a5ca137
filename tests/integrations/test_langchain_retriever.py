"""The LangChain adapter through LangChain's own Runnable interface, over the real handbook index."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("langchain_core", reason="the LangChain extra is not installed: pip install '.[langchain]'")

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
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from evidex.engine import Engine
from evidex.integrations.langchain import EvidexRetriever


def test_invoke_returns_cited_documents(handbook: Engine) -> None:
    retriever = EvidexRetriever(engine=handbook, principal=READER, k=5, retrieved_at=AT)
    assert isinstance(retriever, BaseRetriever)
    docs = retriever.invoke(ROTATION_QUESTION)
    assert docs and all(isinstance(d, Document) for d in docs)
    assert docs[0].metadata["citation"] == ROTATION_CITATION
    assert set(docs[0].metadata) >= METADATA_KEYS
    assert docs[0].id == docs[0].metadata["record_id"]
    assert "vlctl transit rotate" in docs[0].page_content
    assert len(docs) <= 5


def test_async_and_batch_give_the_same_documents(handbook: Engine) -> None:
    retriever = EvidexRetriever(engine=handbook, principal=READER, k=3, retrieved_at=AT)
    sync = retriever.invoke(ROTATION_QUESTION)
    assert asyncio.run(retriever.ainvoke(ROTATION_QUESTION)) == sync
    assert retriever.batch([ROTATION_QUESTION, ROTATION_QUESTION]) == [sync, sync]


def test_restricted_text_never_reaches_a_reader(handbook: Engine) -> None:
    reader = EvidexRetriever(engine=handbook, principal=READER, retrieved_at=AT).invoke(BREAKGLASS_QUESTION)
    assert all(MARKER not in d.page_content for d in reader)
    assert BREAKGLASS_SOURCE not in {d.metadata["source"] for d in reader}
    security = EvidexRetriever(engine=handbook, principal=SECURITY, retrieved_at=AT).invoke(BREAKGLASS_QUESTION)
    assert security[0].metadata["source"] == BREAKGLASS_SOURCE
    assert security[0].metadata["recommendation"] == "proceed"
