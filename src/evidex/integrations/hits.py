"""The evidence of one `search_with_reasoning` call as flat hits: text, score and metadata, the part every
framework adapter shares (framework-free, so it is tested without one).

A hit is one admitted chunk. Its metadata carries where to cite it (`citation` = URI + `#` + anchor), what it
is evidence of (`evidence_family`), that the gate admitted it (`status`), and the decision of the whole call
(`recommendation`, `confidence`, `missing_aspects`): an agent reading any one hit can tell whether the set is
complete enough to answer from. Hits of a `stop` or `re-query` decision are admitted too (the requester may read
them), but they do not answer the question in full: read `recommendation` before answering from them.

>>> from evidex.engine import Engine                                       # doctest: +SKIP
>>> hits = search_hits(Engine.open(), "How are keys rotated?", k=3)        # doctest: +SKIP
>>> hits[0].metadata["citation"]                                           # doctest: +SKIP
'https://handbook.northwind.example/security/key-rotation/#rotate-keys'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from evidex.admission.gate import Principal

_PROVENANCE_KEYS = ("source_version", "published_at", "expires_at", "authority_tier", "owner")


class ReasoningEngine(Protocol):
    """What the adapters call: `evidex.engine.Engine` meets it."""

    def search_with_reasoning(self, query: str, aspect_focus: str | None = None, *, k: int = 10,
                              principal: Principal | None = None,
                              retrieved_at: datetime | None = None) -> Any: ...


@dataclass(frozen=True)
class Hit:
    """One admitted chunk: its id, text, fused score and flat, JSON-ready metadata."""

    record_id: str
    text: str
    score: float
    metadata: dict[str, Any]


def result_dict(result: Any) -> Mapping[str, Any]:
    """The result as a mapping: the JSON-ready dict, or a typed result model's JSON dump."""
    if isinstance(result, Mapping):
        return result
    dump = getattr(result, "model_dump", None)
    if dump is None:
        raise TypeError(f"not a search_with_reasoning result: {type(result).__name__}")
    data: Mapping[str, Any] = dump(mode="json")
    return data


def decision_metadata(result: Mapping[str, Any]) -> dict[str, Any]:
    """The decision of a call, flat: what every hit of it carries."""
    recommendation = result["decision"]["recommendation"]
    coverage = result["signals"]["coverage"]
    return {
        "recommendation": recommendation["action"],
        "recommendation_reason": recommendation["reason"],
        "missing_aspects": list(recommendation["focus"]),
        "owner_of_next_step": recommendation["owner"],
        "confidence": result["signals"]["confidence"],
        "families_missing": list(coverage["families_missing"]),
        "families_found_but_rejected": list(coverage["families_found_but_rejected"]),
        "snapshot_id": result["index"]["snapshot_id"],
        "config_hash": result["index"]["config_hash"],
    }


def hits_of(result: Any) -> list[Hit]:
    """Every admitted chunk of a `search_with_reasoning` result, in the result's order (best first)."""
    data = result_dict(result)
    decision = decision_metadata(data)
    hits = []
    for group in data["evidence"]:
        for chunk in group["chunks"]:
            provenance = chunk.get("provenance", {})
            metadata = {
                "citation": chunk["citation"],
                "citation_uri": group["citation_uri"],
                "citation_anchor": chunk["citation_anchor"],
                "source": group["source"],
                "title": group["title"],
                "heading": chunk.get("heading"),
                "doc_id": chunk["doc_id"],
                "record_id": chunk["record_id"],
                "chunk_index": chunk["chunk_index"],
                "evidence_family": chunk.get("evidence_family"),
                "status": chunk["status"],
                "human_verified": bool(chunk.get("verifications")),
                "grade": chunk.get("grade"),
                "score": chunk["score"],
                "access_labels": list(provenance.get("access_labels", [])),
                **{key: provenance.get(key) for key in _PROVENANCE_KEYS},
                **decision,
            }
            hits.append(Hit(chunk["record_id"], chunk["text"], float(chunk["score"]), metadata))
    return hits


def search_hits(engine: ReasoningEngine, query: str, *, principal: Principal | None = None, k: int = 10,
                retrieved_at: datetime | None = None, aspect_focus: str | None = None) -> list[Hit]:
    """Run the agent tool for `query` as `principal` (None: the engine's default principal) and flatten it."""
    result = engine.search_with_reasoning(query, aspect_focus, k=k, principal=principal, retrieved_at=retrieved_at)
    return hits_of(result)
