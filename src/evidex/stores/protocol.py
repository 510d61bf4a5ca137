"""The store contract: what a storage engine must do. Every backend (embedded SQLite, Milvus) implements it; the
pipeline above it (fusion, families, the gate, signals, and the corpus facts of `evidex.retrieval.corpus`) is
written once. `evidex.testing.store_contract` checks it.

`Store` has eight methods and one attribute, grouped by what they serve:

* writing: `commit_batch` (all of a batch or nothing) and `rollback`;
* reading: `get` (by record id) and `all_chunks` (the snapshot's scan);
* searching: `search_dense` and `search_sparse`, each with the same `SearchFilters` applied before the limit;
* `snapshot_id`, which names what a search read (results are replayed and caches kept by it), and `close`;
* `ledger`: the index's bookkeeping (`Ledger`): batches, dead letters, the embedder of its vectors, each live
  document's hash, counts. It is one object rather than seven more store methods because its callers are the
  operations (ingest, `evidex batches`, stats), never a search, and a backend keeps it beside its chunks in its
  own way (SQLite in tables, Milvus in a companion collection).

What the pipeline reads of the corpus beside search (what pages say around their links to a page, how many
records hold a word, reading ahead at warm-up) is not storage: `evidex.retrieval.corpus` computes it from the
protocol above. A backend that can answer faster offers an optional capability (`WordCounts`, `ReadAhead`),
checked at run time; a third backend is one class meeting `Store` (and `Ledger`) plus the contract suite.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

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


class Ledger(Protocol):
    """What an index records beside its chunks, read by the operations (ingest, rollback, stats), never by a
    search: `store.ledger.batches()`."""

    @property
    def finished_rollbacks(self) -> Sequence[str]:
        """Rollbacks a crash had interrupted that opening the store completed, oldest first (a store whose rollback
        is one transaction, as SQLite's, never has any)."""
        ...

    def batches(self) -> list[BatchInfo]:
        """Every batch, committed or rolled back, in commit order."""
        ...

    def dead_letters(self) -> list[DeadLetter]:
        """Sources whose latest load failed, by source; `attempts` counts failures since it last loaded."""
        ...

    def embedding_model(self) -> str | None:
        """The model (`Embedder.model_id`) whose vectors the index holds: set by the first batch with vectors,
        and a batch from another model is refused (vectors of two models cannot be compared, even at the same
        dimension). None until then, and for an index written before evidex recorded it."""
        ...

    def document_hashes(self) -> dict[str, str]:
        """doc_id -> content hash of each live document (to skip unchanged documents)."""
        ...

    def chunk_count(self) -> int:
        """The live chunks (`stats()["chunks"]`), counted without reading them: a server's warm-up asks, and on
        Milvus `stats()` reads every live row."""
        ...

    def stats(self) -> dict[str, Any]:
        """At least `backend`, `snapshot_id`, `documents` and `chunks` (live), `retired_chunks`, `batches`
        (committed), `rolled_back_batches`, `dead_letters`, `families` and `access_labels` (live chunks per
        family and per label)."""
        ...


class Store(Protocol):
    @property
    def ledger(self) -> Ledger:
        """The index's batches, dead letters, embedder, document hashes and counts."""
        ...

    def commit_batch(self, batch: BatchWrite) -> BatchInfo:
        """Apply a batch atomically. A document's old chunks are retired, not deleted, so rollback works."""
        ...

    def rollback(self, batch_id: str | None = None) -> BatchInfo:
        """Undo the last committed batch (or `batch_id`) atomically; restores the chunks it replaced."""
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

    def snapshot_id(self) -> str:
        """Changes whenever the searchable content changes (a commit or a rollback)."""
        ...

    def close(self) -> None:
        ...


@runtime_checkable
class WordCounts(Protocol):
    """Optional: a store that knows how many records hold a word (a full-text index's postings). Without it,
    `evidex.retrieval.corpus.word_counts` answers "cannot tell"."""

    def word_counts(self, text: str, readers: tuple[str, ...] | None = None) -> tuple[int, dict[str, int]]:
        """The live records (those carrying one of `readers`, when given) and, for each word of `text` the sparse
        search would search, how many of them hold it (title or text)."""
        ...


@runtime_checkable
class ReadAhead(Protocol):
    """Optional: a store that caches what sparse searches read, and can read it before the first search."""

    def read_ahead(self, words: Sequence[str]) -> None:
        """Read now what sparse searches of `words` will need (a server's warm-up): searches then cost what they
        would after those words had been searched once, with the same results."""
        ...


@runtime_checkable
class LiveScan(Protocol):
    """Optional: a store that can read part of what `all_chunks` reads, without decoding every record (at a
    million chunks, a pass over every decoded record holds gigabytes): the live titles, and the live records
    whose text may hold a link."""

    def live_titles(self) -> list[str]:
        """Every live record's title, in `all_chunks` order."""
        ...

    def live_chunks_with(self, needles: Sequence[str]) -> list[Chunk]:
        """The live records whose text holds one of `needles` (ASCII letters match in either case, other
        characters exactly), in `all_chunks` order: a superset the caller tests again."""
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
