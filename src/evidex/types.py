"""Frozen data types shared by every stage. This module imports nothing from evidex."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Self


class _Choice(enum.StrEnum):
    """A mode named by a string in configuration or on the command line.

    Members are strings: one compares, hashes and serialises as its value, so a configuration holding a member
    is written (and hashed) exactly as the name it was read from. `from_str` ignores case and surrounding space,
    and an unknown name is an error that lists the valid choices:

        >>> FusionMode.from_str(" RRF ") is FusionMode.RRF
        True
    """

    @classmethod
    def from_str(cls, value: str) -> Self:
        try:
            return cls(value.strip().lower())
        except ValueError:
            choices = ", ".join(m.value for m in cls)
            raise ValueError(f"unknown {cls._label()} {value!r}; choose one of: {choices}") from None

    @classmethod
    def _label(cls) -> str:
        return "mode"


class FusionMode(_Choice):
    """How the dense and the sparse ranking are merged: reciprocal ranks, or a weighted sum of normalised scores."""

    RRF = "rrf"
    WEIGHTED = "weighted"

    @classmethod
    def _label(cls) -> str:
        return "fusion mode"


class RetrievalMode(_Choice):
    BM25 = "bm25"
    DENSE = "dense"
    HYBRID = "hybrid"

    @classmethod
    def _label(cls) -> str:
        return "retrieval mode"


class IndexBackend(_Choice):
    """Where an index lives: one SQLite file (the default), or a Milvus server or Milvus Lite file."""

    SQLITE = "sqlite"
    MILVUS = "milvus"

    @classmethod
    def _label(cls) -> str:
        return "index backend"


class EmbeddingBackend(_Choice):
    """What computes the vectors: the int8 ONNX export on onnxruntime (the default, no torch), or the
    sentence-transformers model on torch (the reference; needed for a GPU)."""

    ONNX = "onnx"
    TORCH = "torch"

    @classmethod
    def _label(cls) -> str:
        return "embedding backend"


class GateRule(_Choice):
    """One admission rule of the gate, by its configuration name."""

    ACCESS = "access"  # one of the record's access labels is granted to the principal
    FRESHNESS = "freshness"  # published at or before, and not expired at, the pinned retrieved_at
    CITATION = "citation"  # a citation URI and an exact anchor

    @classmethod
    def _label(cls) -> str:
        return "admission rule"


class RejectionVisibility(_Choice):
    """What the requester may see about rejected candidates (operators see everything in the audit log)."""

    REASONS_EXCEPT_ACCESS = "reasons-except-access"  # ids + reasons, but access denials only as a count
    COUNTS_ONLY = "counts-only"  # counts per reason, no ids
    ALL_REASONS = "all-reasons"  # ids + reasons for everything: trusted operators only

    @classmethod
    def _label(cls) -> str:
        return "rejection visibility"


class EvalPlan(_Choice):
    """Where an evaluation takes a question's evidence plan from: automatic planning, as a user's question
    gets it, or the families its questions file declares (the oracle: what a perfect planner would give)."""

    AUTO = "auto"
    ORACLE = "oracle"

    @classmethod
    def _label(cls) -> str:
        return "plan"


@dataclass(frozen=True)
class Provenance:
    """Where a document comes from and when and to whom it is valid. Every chunk inherits it."""

    source_version: str | None = None
    published_at: datetime | None = None
    expires_at: datetime | None = None
    access_labels: tuple[str, ...] = ()
    citation_uri: str | None = None
    authority_tier: str | None = None
    evidence_family: str | None = None
    owner: str | None = None
    superseded_by: str | None = None


@dataclass(frozen=True)
class Section:
    """A part of a document's text whose place in the source its loader read from the source's own structure
    (an HTML page's section, a PDF page): it runs from `start` in `Document.text` to the next section's start,
    and cites `anchor` (an id the page has, "page=3")."""

    start: int
    anchor: str
    heading: str = ""


@dataclass(frozen=True)
class Document:
    """One loaded source document, before chunking."""

    doc_id: str
    source: str
    title: str
    text: str
    provenance: Provenance = field(default_factory=Provenance)
    fmt: str = "text"  # markdown | text | html | pdf
    body_start: int = 0  # where the body starts in `text` (after front matter)
    origin: str = ""  # where it was loaded from: a file, or FILE:LINE of a JSONL corpus
    warnings: tuple[str, ...] = ()  # what its loader doubts (a key that looks like a misspelled provenance field)
    # HTML and PDF: the sections the loader read (chunked as they are, not by markdown headings), and every
    # anchor the source has (ids, "page=N"), which each section's anchor must be one of to be cited
    sections: tuple[Section, ...] = ()
    anchors: frozenset[str] = frozenset()


@dataclass(frozen=True)
class IngestWarning:
    """A written document whose provenance looks mistaken (a misspelled key, an impossible validity, a citation
    that is no URI). It is ingested as it is: a warning, not a dead letter."""

    source: str
    reason: str


@dataclass(frozen=True)
class Chunk:
    """One indexed record: a span of a document with the document's provenance."""

    record_id: str
    doc_id: str
    chunk_index: int
    source: str
    title: str
    text: str
    citation_anchor: str | None
    span_start: int
    span_end: int
    content_hash: str
    provenance: Provenance
    heading: str = ""
    batch_id: str = ""
    indexed_at: datetime | None = None

    @property
    def evidence_family(self) -> str | None:
        return self.provenance.evidence_family


@dataclass(frozen=True)
class SearchFilters:
    """Filters every store applies before ranking. None means: do not filter on this."""

    access_labels: tuple[str, ...] | None = None  # keep chunks carrying any of these labels
    valid_at: datetime | None = None  # keep chunks published at/before and not expired at this instant
    families: tuple[str, ...] | None = None  # keep chunks whose evidence_family is one of these
    source_pattern: str | None = None  # Python regex, re.search over chunk.source
    doc_ids: tuple[str, ...] | None = None  # keep chunks of these documents

    def is_empty(self) -> bool:
        return all(
            v is None
            for v in (self.access_labels, self.valid_at, self.families, self.source_pattern, self.doc_ids)
        )


@dataclass(frozen=True)
class ScoredId:
    """A store hit: a record id with the raw score of one retriever (higher is better)."""

    record_id: str
    score: float


@dataclass(frozen=True)
class Candidate:
    """A chunk with the scores that placed it."""

    chunk: Chunk
    score: float
    dense_score: float | None = None
    sparse_score: float | None = None
    dense_rank: int | None = None
    sparse_rank: int | None = None
    scores: tuple[tuple[str, float], ...] = ()  # named extra scores (rerank features), in order


@dataclass(frozen=True)
class BatchInfo:
    batch_id: str
    started_at: datetime
    finished_at: datetime | None
    status: str  # committed | rolled-back
    added: int
    replaced: int
    unchanged: int
    dead_letters: int
    label: str = ""
    retired: int = 0  # documents retired without a successor (gone from the corpus of a sync ingest)


@dataclass(frozen=True)
class DeadLetter:
    source: str
    reason: str
    batch_id: str
    failed_at: datetime
    location: str = ""  # file path and line, where known
    attempts: int = 1
    path: str = ""  # what a retry loads again (a file, or FILE:LINE of a JSONL corpus)


@dataclass(frozen=True)
class IngestReport:
    batch_id: str
    documents: int
    added_chunks: int
    replaced_documents: int
    unchanged_documents: int
    empty_documents: int  # loaded fine but had no body text (e.g. a section index with front matter only)
    dead_letters: tuple[DeadLetter, ...]
    embedded: int  # chunks whose vectors were computed (not served by the cache)
    cached: int
    seconds: float
    # written documents with no access label or no citation URI: the default gate never admits them
    without_labels_or_citation: tuple[str, ...] = ()
    retired_documents: tuple[str, ...] = ()  # live documents gone from the corpus of a sync ingest (doc ids)
    resolved_dead_letters: tuple[str, ...] = ()  # letters this batch settled: loaded now, or their file or line gone
    sync_skipped: str = ""  # why a sync ingest retired nothing (a failure that names no document)
    warnings: tuple[IngestWarning, ...] = ()  # written documents whose provenance looks mistaken
    unmatched_overlay_sources: tuple[str, ...] = ()  # overlay sources no document of the ingest has (not applied)
    skipped_paths: tuple[tuple[str, str], ...] = ()  # (path, reason) of each path under a folder not read

    def to_dict(self) -> dict[str, Any]:
        return {
            "batch_id": self.batch_id,
            "documents": self.documents,
            "added_chunks": self.added_chunks,
            "replaced_documents": self.replaced_documents,
            "unchanged_documents": self.unchanged_documents,
            "empty_documents": self.empty_documents,
            "dead_letters": [{"source": d.source, "reason": d.reason, "location": d.location}
                             for d in self.dead_letters],
            "embedded": self.embedded,
            "cached": self.cached,
            "seconds": round(self.seconds, 3),
            "without_labels_or_citation": list(self.without_labels_or_citation),
            "retired_documents": list(self.retired_documents),
            "resolved_dead_letters": list(self.resolved_dead_letters),
            "sync_skipped": self.sync_skipped,
            "warnings": [{"source": w.source, "reason": w.reason} for w in self.warnings],
            "unmatched_overlay_sources": list(self.unmatched_overlay_sources),
            "skipped_paths": {"count": len(self.skipped_paths),
                              "paths": [{"path": p, "reason": r} for p, r in self.skipped_paths]},
        }
