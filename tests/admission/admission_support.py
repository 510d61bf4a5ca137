"""Builders for admission tests: chunks with explicit provenance, candidates, a fixed instant.

Imported by the test modules beside it (pytest puts this directory on sys.path; the name is unique).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from evidex.admission import GateDecision, RejectionVisibility
from evidex.types import Candidate, Chunk, Provenance

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def make_chunk(
    record_id: str,
    *,
    labels: tuple[str, ...] = ("public",),
    published_at: datetime | None = None,
    expires_at: datetime | None = None,
    citation_uri: str | None = "https://handbook.example/doc",
    citation_anchor: str | None = "#section",
    text: str = "",
    title: str = "",
    heading: str = "",
    owner: str | None = "team-docs",
    source_version: str | None = "v1",
) -> Chunk:
    provenance = Provenance(
        source_version=source_version, published_at=published_at, expires_at=expires_at,
        access_labels=labels, citation_uri=citation_uri, owner=owner)
    return Chunk(
        record_id=record_id, doc_id=f"doc-{record_id}", chunk_index=0, source=f"docs/{record_id}.md",
        title=title or f"title of {record_id}", text=text or f"text of {record_id}",
        citation_anchor=citation_anchor, span_start=0, span_end=len(text), content_hash="0" * 16,
        provenance=provenance, heading=heading)


def candidate(chunk: Chunk, score: float = 0.5) -> Candidate:
    return Candidate(chunk=chunk, score=score)


def canonical(decision: GateDecision, visibility: RejectionVisibility) -> str:
    """The requester-facing decision as canonical JSON (what must be byte-for-byte replayable)."""
    return json.dumps(decision.to_dict(visibility), sort_keys=True, separators=(",", ":"))
