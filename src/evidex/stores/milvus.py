"""`Store` on Milvus (a standalone server, a cluster, or Milvus Lite for a local `.db` file).

Two collections per index, a chunk collection and its `_meta` companion (`evidex.stores.milvus_schema`), read and
written through `evidex.stores.milvus_collections`; the client and Milvus Lite's server come from
`evidex.stores.milvus_connection`, filters become Milvus expressions in `evidex.stores.milvus_expression`.
Milvus has no transactions: batches, rollbacks, imports and the repair of what a crash interrupted follow the
write protocol of `evidex.stores.milvus_writes`, and the batches, dead letters and counts are read by
`evidex.stores.milvus_ledger`. This module holds the store itself: opening the index, its reads and searches.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from evidex.errors import BackendUnavailable, ConfigError, StoreError
from evidex.stores.milvus_collections import MilvusCollections
from evidex.stores.milvus_connection import (
    INSTALL,
    collection_name,
    connect,
    hold_lite_server,
    is_local,
    let_go_lite_server,
    location,
    missing_index,
)
from evidex.stores.milvus_expression import expression, query_terms
from evidex.stores.milvus_ledger import MilvusLedger, snapshot_of
from evidex.stores.milvus_schema import CHUNK_FIELDS, ROW_FIELDS, SCHEMA_VERSION, open_collections, to_chunk
from evidex.stores.milvus_writes import MilvusWriter
from evidex.stores.protocol import BatchWrite
from evidex.stores.transfer import IndexLog, StoredRow
from evidex.types import BatchInfo, Chunk, ScoredId, SearchFilters

if TYPE_CHECKING:
    from evidex.config import Config

# The store, and the helpers used outside the Milvus modules (the read commands' missing-index check).
__all__ = ["MilvusStore", "collection_name", "missing_index", "query_terms"]

MAX_TOPK = 16384  # Milvus's limit on one search's top-k


class MilvusStore:
    """`Store` on one Milvus collection (plus its `_meta` companion). Thread-safe; one writer per index."""

    def __init__(self, uri: str, *, collection: str = "evidex", token: str | None = None, dim: int = 384,
                 title_weight: float = 1.0, ef_search: int = 128) -> None:
        try:
            from pymilvus import MilvusException  # type: ignore[import-untyped,import-not-found,unused-ignore]
        except ImportError as exc:
            raise BackendUnavailable(f"the milvus backend needs pymilvus: {INSTALL} ({exc})") from None
        self.is_lite = is_local(uri)
        if self.is_lite:
            if not uri.endswith(".db"):
                raise ConfigError(f"Milvus Lite needs a file name ending in .db, got {uri!r}")
            Path(uri).parent.mkdir(parents=True, exist_ok=True)
        self.uri, self.collection, self.meta = uri, collection, f"{collection}_meta"
        self.dim, self.title_weight, self.ef_search = dim, title_weight, ef_search
        self._lock = threading.RLock()
        self._sources: tuple[int, list[str]] = (-1, [])  # (generation, its live sources)
        self._closed = False
        self._lite_key = os.path.abspath(uri) if self.is_lite else None  # as milvus-lite names its servers
        if self._lite_key is not None:
            hold_lite_server(self._lite_key)
        try:
            self._client = connect(uri, token)
            self._io = MilvusCollections(self._client, self.collection, self.meta, MilvusException)
            self.ledger = MilvusLedger(self._io, {"uri": uri, "collection": collection, "lite": self.is_lite})
            self._writer = MilvusWriter(self._io, self.ledger, dim)
            self._io.call("open", self._open)
            self.repair()
        except BaseException:
            self._closed = True
            if hasattr(self, "_client"):
                self._client.close()
            self._forget_lite()
            raise

    @classmethod
    def from_config(cls, config: Config, *, token: str | None = None, dim: int = 384) -> MilvusStore:
        """The store `config.index` names (see `location`). The token is passed in: only `evidex.config`
        reads the environment."""
        uri, name = location(config)
        return cls(uri, collection=name, token=token, dim=dim, title_weight=config.retrieval.title_weight)

    # ---- schema -----------------------------------------------------------------------------------------
    def _open(self) -> None:
        open_collections(self._client, self.collection, self.meta, self.dim, self.is_lite)
        state = self._io.state()
        if state["schema"] > SCHEMA_VERSION:
            raise StoreError(f"collection {self.collection!r} was written by a newer evidex "
                             f"(schema {state['schema']})")

    # ---- writes (evidex.stores.milvus_writes) -----------------------------------------------------------
    def commit_batch(self, batch: BatchWrite) -> BatchInfo:
        return self._writer.commit_batch(batch)

    def rollback(self, batch_id: str | None = None) -> BatchInfo:
        """Also: when `repair` completed an interrupted rollback (on open, or just now), undo nothing more
        and return that batch unless `batch_id` names one (see `MilvusWriter.rollback`)."""
        return self._writer.rollback(batch_id)

    def repair(self) -> list[str]:
        """Finish what a crash interrupted (`MilvusWriter.repair`). Returns the batch ids it touched."""
        return self._writer.repair()

    # ---- reads ------------------------------------------------------------------------------------------
    def get(self, record_ids: Sequence[str]) -> list[Chunk]:
        ids = list(dict.fromkeys(record_ids))
        found = {r["record_id"]: to_chunk(r) for r in self._io.query_in("record_id", ids, 'retired_by == ""',
                                                                     CHUNK_FIELDS)}
        return [found[i] for i in ids if i in found]

    def all_chunks(self) -> list[Chunk]:
        return [to_chunk(r) for r in self._io.scan(self.collection, 'retired_by == ""', CHUNK_FIELDS)]

    def search_dense(self, vector: npt.NDArray[np.float32], limit: int,
                     filters: SearchFilters | None = None) -> list[ScoredId]:
        expr = self._expression(filters)
        if expr is None or limit <= 0:
            return []
        data = [float(x) for x in np.asarray(vector, dtype=np.float32)]
        params: dict[str, Any] = {"metric_type": "COSINE"}
        if not self.is_lite:
            params["params"] = {"ef": max(self.ef_search, min(limit, MAX_TOPK))}
        return [ScoredId(record_id, score) for record_id, score in self._search(data, "vector", limit, expr, params)]

    def search_sparse(self, query: str, limit: int, filters: SearchFilters | None = None, *,
                      title_only: bool = False, scope: tuple[str, ...] | None = None) -> list[ScoredId]:
        """BM25 by Milvus's own function, whose word statistics cover the whole collection: `scope` cannot be
        honoured (see docs/milvus.md: restricted text shifts readable scores)."""
        terms = query_terms(query)
        expr = self._expression(filters) if terms else None
        if expr is None or limit <= 0:
            return []
        text, params = " ".join(terms), {"metric_type": "BM25"}
        if title_only or self.title_weight == 1.0:
            hits = self._search(text, "title_sparse" if title_only else "text_sparse", limit, expr, params)
            return [ScoredId(record_id, abs(score)) for record_id, score in hits]
        # title_weight != 1: bm25(title + text) + (title_weight - 1) * bm25(title), reranked over a wider
        # pool of the combined field's hits (every title hit is one of them).
        pool = min(MAX_TOPK, max(4 * limit, 100))
        both = self._search(text, "text_sparse", pool, expr, params)
        title = dict(self._search(text, "title_sparse", pool, expr, params))
        scored = [(abs(s) + (self.title_weight - 1.0) * abs(title.get(r, 0.0)), -n, r)
                  for n, (r, s) in enumerate(both)]
        return [ScoredId(r, s) for s, _, r in sorted(scored, reverse=True)[:limit]]

    def _search(self, data: Any, field: str, limit: int, expr: str,
                params: dict[str, Any]) -> list[tuple[str, float]]:
        """(record_id, raw distance) best first, equal scores in the order the rows were written (as SQLite
        ranks them): Milvus returns ties in the order of its segments, which a seal or a compaction changes.
        Milvus Lite reports BM25 as a negative distance, a server as a positive score: callers take abs() of
        BM25 values, which are never negative."""
        result = self._io.call("search", self._client.search, self.collection, data=[data], anns_field=field,
                            limit=min(limit, MAX_TOPK), filter=expr, search_params=params,
                            output_fields=["record_id", "row_seq"])

        def goodness(distance: float) -> float:
            return distance if field == "vector" else abs(distance)

        hits = sorted(result[0], key=lambda hit: (-goodness(float(hit["distance"])), hit["entity"]["row_seq"]))
        return [(hit["entity"]["record_id"], float(hit["distance"])) for hit in hits]

    def _expression(self, filters: SearchFilters | None) -> str | None:
        """The Milvus filter for live chunks passing `filters`; None when nothing can pass."""
        return expression(filters, self._live_sources)

    def _live_sources(self) -> list[str]:
        """Distinct live sources, read once per snapshot."""
        generation = int(self._io.state()["generation"])
        with self._lock:
            if self._sources[0] != generation:
                rows = self._io.scan(self.collection, 'retired_by == ""', ["source"])
                self._sources = (generation, sorted({r["source"] for r in rows}))
            return self._sources[1]

    def snapshot_id(self) -> str:
        return snapshot_of(self._io.state())

    def drop(self) -> None:
        """Delete this index's two collections, everything in them included."""
        with self._lock:
            for name in (self.collection, self.meta):
                self._io.call("drop", self._client.drop_collection, name)

    def close(self) -> None:
        """Also stops the Milvus Lite server when this was the process's last store on its file: Lite searches
        the rows its running server wrote without their index (on the k8s pages dense ~140 ms and BM25 ~700 ms
        a search, against 13 and 21 ms once a new server has opened them, with the same results), so an engine
        opened again after an ingest searches at full speed (`scripts/bench_milvus_fresh.py`)."""
        if self._closed:
            return
        self._closed = True
        self._client.close()
        self._forget_lite()

    def _forget_lite(self) -> None:
        if self._lite_key is not None:
            let_go_lite_server(self._lite_key)

    # ---- export / import (evidex.stores.transfer.Exportable) --------------------------------------------
    def export_rows(self) -> Iterator[StoredRow]:
        for r in self._io.scan(self.collection, 'pk != ""', ROW_FIELDS):
            if not r["retired_by"].startswith("pending:"):
                yield StoredRow(to_chunk(r), r["doc_hash"], np.asarray(r["vector"], dtype=np.float32),
                                r["retired_by"] or None)

    def export_log(self) -> IndexLog:
        writing = bool(self._io.batch_rows('kind == "batch" and status in ["pending", "rolling-back"]'))
        state = self._io.state()
        return IndexLog(tuple(self.ledger.batches()), tuple(self.ledger.events()), int(state["generation"]), writing,
                        state.get("embedding_model") or None)

    def import_rows(self, rows: Iterable[StoredRow], log: IndexLog) -> None:
        self._writer.import_rows(rows, log)
