"""The framework-free core of the adapters: a search_with_reasoning result as flat, cited hits."""

from __future__ import annotations

import json

from integrations_support import AT, READER, ROTATION_CITATION, ROTATION_QUESTION

from evidex.engine import Engine
from evidex.integrations.hits import hits_of, search_hits


def test_hits_are_the_admitted_chunks_in_order_with_the_decision(handbook: Engine) -> None:
    result = handbook.search_with_reasoning(ROTATION_QUESTION, k=4, principal=READER, retrieved_at=AT)
    hits = hits_of(result)
    chunks = [c for group in result["evidence"] for c in group["chunks"]]
    assert [h.record_id for h in hits] == [c["record_id"] for c in chunks]
    assert hits[0].metadata["citation"] == ROTATION_CITATION
    for hit in hits:
        m = hit.metadata
        assert m["citation"] == f"{m['citation_uri']}#{m['citation_anchor']}"
        assert m["status"] == "citation-accepted" and "engineering-read" in m["access_labels"]
        assert m["recommendation"] == result["decision"]["recommendation"]["action"]
        assert m["confidence"] == result["signals"]["confidence"]
    json.dumps([h.metadata for h in hits])  # every value is JSON: vector stores and tracers keep it as it is


def test_search_hits_asks_as_the_principal_given(handbook: Engine) -> None:
    nobody = search_hits(handbook, ROTATION_QUESTION, principal=READER.of("nobody", ["no-such-label"]),
                         retrieved_at=AT)
    assert nobody == []
    assert search_hits(handbook, ROTATION_QUESTION, principal=READER, retrieved_at=AT, k=2)
