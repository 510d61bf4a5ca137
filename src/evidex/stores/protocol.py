"""The store contract. Every backend (embedded SQLite, Milvus) implements it; the pipeline above it
(fusion, families, the gate, signals) is written once. `evidex.testing.store_contract` checks it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from evidex.errors import StoreError
from evidex.types import BatchInfo, Chunk, DeadLetter, ScoredId, SearchFilters


@dataclass(frozen=True)
class DocumentWrite:
    """One document's new state: all its chunks (replacing any it had) with their vectors."""

    doc_id: str
    source: str
    doc_hash: str
    chunks: tuple[Chunk, ...]
    vectors: npt.NDArray[np.float32]  # (len(chunks), dim)


@dataclass(frozen=True)
class BatchWrite:
    """Everything one ingest run changes. A store applies it atomically or not at all."""

    batch_id: str
    label: str
    documents: tuple[DocumentWrite, ...]
    unchanged: int
    dead_letters: tuple[DeadLetter, ...]
    resolved_dead_letters: tuple[str, ...] = ()  # sources that now loaded fine
    embedding_model: str = ""  # the model_id of the embedder that made its vectors ("" when it has none)


class Store(Protocol):
    @property
    def finished_rollbacks(self) -> Sequence[str]:
        """Rollbacks a crash had interrupted that opening the store completed, oldest first (a store whose rollback
        is one transaction, as SQLite's, never has any)."""
        ...

    def commit_batch(self, batch: BatchWrite) -> BatchInfo:
        """Apply a batch atomically. A document's old chunks are retired, not deleted, so rollback works."""
        ...

    def rollback(self, batch_id: str | None = None) -> BatchInfo:
        """Undo the last committed batch (or `batch_id`) atomically; restores the chunks it replaced."""
        ...

    def embedding_model(self) -> str | None:
        """The model (`Embedder.model_id`) whose vectors the index holds: set by the first batch with vectors,
        and a batch from another model is refused (vectors of two models cannot be compared, even at the same
        dimension). None until then, and for an index written before evidex recorded it."""
        ...

    def document_hashes(self) -> dict[str, str]:
        """doc_id -> content hash of each live document (to skip unchanged documents)."""
        ...

    def get(self, record_ids: Sequence[str]) -> list[Chunk]:
        """Live chunks by id, in the order asked; unknown ids are left out."""
        ...

    def all_chunks(self) -> list[Chunk]:
        """Every live chunk, in the order written (a chunk a later batch wrote again, at its new place)."""
        ...

    def search_dense(self, vector: npt.NDArray[np.float32], limit: int,
                     filters: SearchFilters | None = None) -> list[ScoredId]:
        """Exact or approximate nearest neighbours by cosine, best first."""
        ...

    def search_sparse(self, query: str, limit: int, filters: SearchFilters | None = None, *,
                      title_only: bool = False, scope: tuple[str, ...] | None = None) -> list[ScoredId]:
        """BM25 over title and text (or the title alone), best first (higher score is better). The words'
        rarity is taken over the records carrying one of the `scope` labels (default: the filter's access
        labels; neither: every record), so what a requester may not read cannot move what they see. A search
        wider than its scope returns up to `limit` hits inside it and up to `limit` outside."""
        ...

    def word_counts(self, text: str, readers: tuple[str, ...] | None = None) -> tuple[int, dict[str, int]]:
        """The live records (those carrying one of `readers`, when given) and, for each word of `text` the sparse
        search would search, how many of them hold it (title or text); (0, {}) when the store cannot tell."""
        ...

    def inlink_contexts(self, sources: Sequence[str], filters: SearchFilters | None = None) -> dict[str, list[str]]:
        """For each of `sources` (pages) that links of other pages' live records name, the words around those
        links (`evidex.retrieval.links`), only from records that pass `filters` (the requester's): what readable
        pages say of it."""
        ...

    def read_ahead(self, words: Sequence[str]) -> None:
        """Read now what sparse searches of `words` will need (a server's warm-up): searches then cost what they
        would after those words had been searched once, with the same results. Nothing where there is no
        such cache."""
        ...

    def batches(self) -> list[BatchInfo]:
        ...

    def dead_letters(self) -> list[DeadLetter]:
        ...

    def snapshot_id(self) -> str:
        """Changes whenever the searchable content changes (a commit or a rollback)."""
        ...

    def stats(self) -> dict[str, Any]:
        ...

    def chunk_count(self) -> int:
        """The live chunks (`stats()["chunks"]`), counted without reading them: a server's warm-up asks, and on
        Milvus `stats()` reads every live row."""
        ...

    def close(self) -> None:
        ...


def model_after(recorded: str | None, batch: BatchWrite, index_is_empty: Callable[[], bool]) -> str | None:
    """The index's model once `batch` commits (every store applies this one rule): the first batch with vectors
    names it, a batch from another model is refused, and an index written before evidex recorded its model (it
    holds vectors, none named) stays unnamed: the batch's model need not be the one of the vectors there."""
    if not batch.embedding_model or not any(d.chunks for d in batch.documents):
        return recorded
    if recorded is not None and recorded != batch.embedding_model:
        raise StoreError(describe_model_mismatch(recorded, batch.embedding_model))
    return recorded or (batch.embedding_model if index_is_empty() else None)


def describe_model_mismatch(index_model: str, other: str) -> str:
    """The error for vectors of another embedder than the index's (one message for ingest and queries)."""
    return (f"this index holds vectors of the model {index_model}, and the configured embedder is {other}: "
            "vectors of two models cannot be compared. Configure [embedding] with the index's model, or ingest "
            "into a new index")
