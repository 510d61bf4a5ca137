"""Builders for the evidence-pipeline tests: chunks and candidates with explicit fields, a real SQLite
store holding a tiny inline corpus (4-dimensional vectors: the tests that use it search BM25 only), a
store that counts its searches, and the bundled Northwind handbook on a temporary index.

Imported by the test modules beside it (pytest puts this directory on sys.path; the name is unique).
"""

from __future__ import annotations

import hashlib
import re
import shutil
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from evidex.admission.gate import Principal
from evidex.config import Config, load_config
from evidex.embedding.protocol import Embedder
from evidex.engine import Engine
from evidex.retrieval.fusion import fuse
from evidex.retrieval.hybrid import candidates as to_candidates
from evidex.stores.protocol import BatchWrite, DocumentWrite
from evidex.stores.sqlite import SqliteStore
from evidex.types import Candidate, Chunk, FusionMode, Provenance, RetrievalMode, ScoredId, SearchFilters

# ---- tiny inline chunks -----------------------------------------------------------------------------


def make_chunk(record_id: str, text: str = "", *, doc_id: str | None = None, chunk_index: int = 0,
               title: str = "", heading: str = "", family: str | None = None, source: str | None = None,
               anchor: str | None = "section", labels: tuple[str, ...] = ("public",),
               citation_uri: str | None = "https://docs.example/page", owner: str | None = "docs-team",
               source_version: str | None = "v1") -> Chunk:
    doc = doc_id or f"doc-{record_id}"
    body = text or f"text of {record_id}"
    provenance = Provenance(source_version=source_version, access_labels=labels, citation_uri=citation_uri,
                            evidence_family=family, owner=owner)
    return Chunk(record_id=record_id, doc_id=doc, chunk_index=chunk_index, source=source or f"{doc}.md",
                 title=title or f"Title of {doc}", text=body, citation_anchor=anchor, span_start=0,
                 span_end=len(body), content_hash=hashlib.sha256(body.encode()).hexdigest(),
                 provenance=provenance, heading=heading)


def cand(chunk: Chunk, score: float) -> Candidate:
    return Candidate(chunk=chunk, score=score)


def ids(candidates: Iterable[Candidate]) -> list[str]:
    return [c.chunk.record_id for c in candidates]


# ---- a real store over a tiny corpus ----------------------------------------------------------------
DIM = 4


def fill(store: SqliteStore, chunks: Sequence[Chunk], batch_id: str = "b-test") -> None:
    """Commit `chunks` (one document each unless they share a doc_id) to `store` as one batch. Vectors are
    constant: these stores are searched with BM25 only."""
    by_doc: dict[str, list[Chunk]] = {}
    for c in chunks:
        by_doc.setdefault(c.doc_id, []).append(c)
    writes = tuple(
        DocumentWrite(doc_id, group[0].source, hashlib.sha256(doc_id.encode()).hexdigest(), tuple(group),
                      np.ones((len(group), DIM), dtype=np.float32))
        for doc_id, group in by_doc.items())
    store.commit_batch(BatchWrite(batch_id, "test", writes, 0, ()))


def build_store(directory: Path, chunks: Sequence[Chunk]) -> SqliteStore:
    """A real SqliteStore holding `chunks`."""
    store = SqliteStore(directory)
    fill(store, chunks)
    return store


def sparse_candidates(store: SqliteStore) -> Callable[[list[ScoredId]], list[Candidate]]:
    """What the pipeline turns a sparse hit list into (the rescue / bridge `to_candidates` argument)."""

    def convert(hits: list[ScoredId]) -> list[Candidate]:
        return to_candidates(store, fuse([hits], [1.0], FusionMode.WEIGHTED), RetrievalMode.BM25)

    return convert


def constant_encoder(text: str) -> npt.NDArray[np.float32]:
    """A query encoder for stores searched with BM25 only (the pipeline never calls it in BM25 mode)."""
    return np.ones(DIM, dtype=np.float32)


@dataclass(frozen=True)
class SparseCall:
    query: str
    limit: int
    filters: SearchFilters | None
    title_only: bool


class CountingStore(SqliteStore):
    """A real SqliteStore that records every sparse and dense search made on it (nothing else changes)."""

    def __init__(self, directory: Path, *, title_weight: float = 1.0) -> None:
        super().__init__(directory, title_weight=title_weight)
        self.sparse_calls: list[SparseCall] = []
        self.dense_calls = 0

    def search_sparse(self, query: str, limit: int, filters: SearchFilters | None = None, *,
                      title_only: bool = False, scope: tuple[str, ...] | None = None) -> list[ScoredId]:
        self.sparse_calls.append(SparseCall(query, limit, filters, title_only))
        return super().search_sparse(query, limit, filters, title_only=title_only, scope=scope)

    def search_dense(self, vector: npt.NDArray[np.float32], limit: int,
                     filters: SearchFilters | None = None) -> list[ScoredId]:
        self.dense_calls += 1
        return super().search_dense(vector, limit, filters)


def counting_store(directory: Path, chunks: Sequence[Chunk]) -> CountingStore:
    """A CountingStore holding `chunks`."""
    store = CountingStore(directory)
    fill(store, chunks)
    return store


# ---- the bundled handbook ---------------------------------------------------------------------------
SAMPLE = Path(__file__).resolve().parents[2] / "src" / "evidex" / "sample"
HANDBOOK = SAMPLE / "handbook"
SAMPLE_CONFIG = SAMPLE / "evidex.toml"
QUESTIONS = SAMPLE / "handbook-questions.jsonl"
RETRIEVED_AT = datetime(2026, 11, 30, 0, 0, 0, tzinfo=UTC)
RETRIEVED_AT_TEXT = "2026-11-30T00:00:00Z"
ENGINEER = Principal.of("engineer", ["engineering-read"])
SECURITY = Principal.of("security-engineer", ["engineering-read", "security-team"])
RESTRICTED_LABEL = "security-team"
MARKER = "RESTRICTED-MARKER"

BREAK_GLASS_QUESTION = "What is the break-glass procedure for the Vaultline root token?"
ROLLBACK_QUESTION = "What is the rollback procedure for a bad release that is already serving all production traffic?"
ROTATION_QUESTION = "How do I rotate the transit key without making old rows unreadable?"
CAPACITY_QUESTION = "What are the capacity planning headroom targets for Postgres connections?"


def handbook_config(index_dir: Path, cache_dir: Path) -> Config:
    """The sample configuration (gate, families, the break-glass shape) on `index_dir`, no environment."""
    return load_config(SAMPLE_CONFIG, env={}).replace(index={"path": str(index_dir)},
                                                      embedding={"cache_dir": str(cache_dir)})


def open_handbook(index_dir: Path, cache_dir: Path, embedder: Embedder, handbook: Path = HANDBOOK) -> Engine:
    """An engine on `index_dir` with `handbook` ingested (about 1 s once the embeddings are cached)."""
    engine = Engine.open(handbook_config(index_dir, cache_dir), embedder=embedder)
    report = engine.ingest([handbook], label="handbook")
    assert not report.dead_letters, report.dead_letters
    return engine


def copy_handbook(target: Path) -> Path:
    shutil.copytree(HANDBOOK, target)
    return target


def all_chunks(engine: Engine) -> list[Chunk]:
    store = engine.store
    assert isinstance(store, SqliteStore)
    return store.all_chunks()


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def sentences(text: str, min_chars: int = 30) -> set[str]:
    """Sentences and lines of `text` (whitespace normalised) long enough to identify it."""
    out = set()
    for piece in _SENTENCE_END.split(text):
        s = " ".join(piece.split())
        if len(s) >= min_chars:
            out.add(s)
    return out


@dataclass
class HiddenText:
    """Text a principal must never see: sentences of records it may not read (and no page it may read
    contains), the ids of those records, and the marker lines restricted pages carry."""

    sentences: set[str] = field(default_factory=set)
    record_ids: set[str] = field(default_factory=set)


def restricted_text(engine: Engine, label: str = RESTRICTED_LABEL) -> HiddenText:
    chunks = all_chunks(engine)
    readable = " ".join(" ".join(c.text.split()) for c in chunks if label not in c.provenance.access_labels)
    hidden = HiddenText()
    for c in chunks:
        if label in c.provenance.access_labels:
            hidden.record_ids.add(c.record_id)
            hidden.sentences |= {s for s in sentences(c.text) if s not in readable}
    return hidden


def record_texts(engine: Engine, record_ids: Iterable[str], *, readable_by_principal: set[str]) -> set[str]:
    """Sentences of `record_ids` that appear in none of the records in `readable_by_principal`."""
    chunks = {c.record_id: c for c in all_chunks(engine)}
    readable = " ".join(" ".join(chunks[r].text.split()) for r in readable_by_principal if r in chunks)
    out: set[str] = set()
    for rid in record_ids:
        out |= {s for s in sentences(chunks[rid].text) if s not in readable}
    return out


def strings(value: Any) -> list[str]:
    """Every string inside a JSON-like value (keys included)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (str(k), *strings(v))]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in strings(v)]
    return []


def normalised(value: Any) -> str:
    """All strings of a JSON-like value, whitespace normalised and joined (for sentence containment)."""
    return "\n".join(" ".join(s.split()) for s in strings(value))
