"""One stored row -> `Chunk`, and the stats' label counts, shared by every backend. Backends differ only in
how they store times and access labels, so they pass those in already decoded (or a decoder)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from evidex.types import Chunk, Provenance


def chunk_from_row(row: Any, *, published_at: datetime | None, expires_at: datetime | None,
                   indexed_at: datetime | None, access_labels: Sequence[str]) -> Chunk:
    """`row` is any mapping-like record (sqlite3.Row, a dict) with the chunk's column names."""
    provenance = Provenance(
        source_version=row["source_version"], published_at=published_at, expires_at=expires_at,
        access_labels=tuple(access_labels), citation_uri=row["citation_uri"],
        authority_tier=row["authority_tier"], evidence_family=row["evidence_family"], owner=row["owner"],
        superseded_by=row["superseded_by"])
    return Chunk(
        record_id=row["record_id"], doc_id=row["doc_id"], chunk_index=row["chunk_index"], source=row["source"],
        title=row["title"], text=row["text"], citation_anchor=row["citation_anchor"],
        span_start=row["span_start"], span_end=row["span_end"], content_hash=row["content_hash"],
        provenance=provenance, heading=row["heading"], batch_id=row["batch_id"], indexed_at=indexed_at)


def label_counts(rows: Iterable[tuple[Any, int]], decode: Callable[[Any], Sequence[str]]) -> dict[str, int]:
    """Live chunks per access label ("-": chunks with none, which the gate never admits), from (stored labels,
    chunks) rows; a chunk with two labels counts under both."""
    counts: dict[str, int] = {}
    for stored, n in rows:
        for label in decode(stored) or ["-"]:
            counts[label] = counts.get(label, 0) + n
    return dict(sorted(counts.items()))
