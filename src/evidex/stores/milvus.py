"""`Store` on Milvus (a standalone server, a cluster, or Milvus Lite for a local `.db` file).

Two collections per index, a chunk collection and its `_meta` companion (`evidex.stores.milvus_schema`); the
client and Milvus Lite's server come from `evidex.stores.milvus_connection`, filters become Milvus expressions
in `evidex.stores.milvus_expression`.

Milvus has no transactions, so a batch is written in an order that a crash can only interrupt harmlessly:
the batch is recorded as `pending`, its rows are written as `pending:<batch>` (invisible), the rows it
replaces are retired, its rows go live, and only then is it recorded as `committed`. A rollback is
recorded as `rolling-back` before it changes anything. On open (and before every write) `repair` undoes
what a `pending` batch wrote and completes a `rolling-back` one (which the next `rollback()` then reports
instead of undoing another batch); every step is an idempotent upsert or delete, so repairing twice is
harmless. It also checks that the stored rows number what the committed batches wrote (a damaged Lite file
loses rows silently). Between two steps a concurrent reader can briefly see a replaced document with no
live chunks; it never sees a half-written batch's new rows or a duplicate record id.
One writer at a time (a lock in this process; run one ingest per index).

This module is longer than the usual 300 lines (about 640): it is the store class alone, whose write protocol,
its repair and the reads that must agree with them (what is live, the generation a snapshot names) are one
unit that can be read top to bottom.
"""

from __future__ import annotations

import json
import os
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from evidex.errors import BackendUnavailable, ConfigError, StoreError
from evidex.ingest.provenance import read_time
from evidex.retrieval.links import LinkIndex
from evidex.stores.dense import DenseIndex
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
from evidex.stores.milvus_expression import expression, literal, literals, query_terms
from evidex.stores.milvus_schema import (
    CHUNK_FIELDS,
    LINK_FIELDS,
    MAY_LINK,
    META_FIELDS,
    ROW_FIELDS,
    SCHEMA_VERSION,
    batch_info,
    batch_row,
    check_lengths,
    event_row,
    filter_fields,
    now,
    open_collections,
    to_chunk,
    to_row,
)
from evidex.stores.protocol import BatchWrite, model_after
from evidex.stores.rows import label_counts
from evidex.stores.transfer import DeadLetterEvent, IndexLog, StoredRow
from evidex.types import BatchInfo, Chunk, DeadLetter, ScoredId, SearchFilters

if TYPE_CHECKING:
    from evidex.config import Config

# The store, and the helpers used outside the Milvus modules (the read commands' missing-index check).
__all__ = ["MilvusStore", "collection_name", "missing_index", "query_terms"]

MAX_TOPK = 16384  # Milvus's limit on one search's top-k
_PAGE = 500  # ids per `in [...]` query, rows per upsert
_SEQ_PAGE = 5000  # sequence numbers per page of a scan


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
        self._error: type[Exception] = MilvusException
        self._lock = threading.RLock()
        self._sources: tuple[int, list[str]] = (-1, [])
        # (generation, its live records' link contexts, those records' filter fields)
        self._links: tuple[int, LinkIndex, DenseIndex] = (-1, LinkIndex(()), filter_fields([]))
        self.finished_rollbacks: list[str] = []  # rollbacks a crash had interrupted that `repair` completed
        self._owed_rollback: str | None = None  # the last of them, until a rollback or a commit follows
        self._closed = False
        self._lite_key = os.path.abspath(uri) if self.is_lite else None  # as milvus-lite names its servers
        if self._lite_key is not None:
            hold_lite_server(self._lite_key)
        try:
            self._client = connect(uri, token)
            self._call("open", self._open)
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

    # ---- plumbing ---------------------------------------------------------------------------------------
    def _call(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except self._error as exc:
            raise StoreError(f"milvus {what} on collection {self.collection!r} failed: {exc}") from None

    def _mutate(self, op: str, collection: str, **kwargs: Any) -> None:
        """Every write goes through here (upsert rows / delete by filter), one idempotent step at a time."""
        if op == "upsert":
            rows = kwargs["data"]
            for i in range(0, len(rows), _PAGE):
                self._call(op, self._client.upsert, collection, data=rows[i:i + _PAGE])
        else:
            self._call(op, self._client.delete, collection, filter=kwargs["filter"])

    def _query(self, collection: str, expr: str, fields: Sequence[str]) -> list[dict[str, Any]]:
        return list(self._call("query", self._client.query, collection, filter=expr, output_fields=list(fields)))

    def _scan(self, collection: str, expr: str, fields: Sequence[str]) -> Iterator[dict[str, Any]]:
        """All rows matching `expr`, in pages of `_SEQ_PAGE` consecutive sequence numbers (a plain query is
        capped at 16384 rows; pymilvus's query iterator needs a server-side timestamp Lite lacks). The
        state's `seq` is raised before any row with a higher number is written."""
        seq_field = "seq" if collection == self.meta else "row_seq"
        top = int(self._state()["seq"])
        for start in range(0, top + 1, _SEQ_PAGE):
            page = self._query(collection, f"({expr}) and {seq_field} >= {start} and "
                                           f"{seq_field} < {start + _SEQ_PAGE}", [*fields, seq_field])
            yield from sorted(page, key=lambda r: int(r[seq_field]))

    def _query_in(self, field: str, values: Sequence[str], extra: str, fields: Sequence[str], *,
                  paged: bool = False) -> list[dict[str, Any]]:
        """Rows with `field` in `values` (and `extra`), asking for `_PAGE` values at a time."""
        out: list[dict[str, Any]] = []
        for i in range(0, len(values), _PAGE):
            expr = f"{extra} and {field} in {literals(values[i:i + _PAGE])}"
            out.extend(self._scan(self.collection, expr, fields) if paged
                       else self._query(self.collection, expr, fields))
        return out

    # ---- schema -----------------------------------------------------------------------------------------
    def _open(self) -> None:
        open_collections(self._client, self.collection, self.meta, self.dim, self.is_lite)
        state = self._state()
        if state["schema"] > SCHEMA_VERSION:
            raise StoreError(f"collection {self.collection!r} was written by a newer evidex "
                             f"(schema {state['schema']})")

    # ---- meta rows --------------------------------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        rows = self._query(self.meta, 'key == "state"', ["body"])
        if rows:
            state: dict[str, Any] = json.loads(rows[0]["body"])
            return state
        return {"schema": SCHEMA_VERSION, "generation": 0, "seq": 0, "last": None, "importing": False}

    def _put_state(self, state: dict[str, Any]) -> None:
        self._put_meta([{"key": "state", "kind": "state", "seq": 0, "batch_id": "", "status": "",
                         "body": json.dumps(state)}])

    def _put_meta(self, rows: list[dict[str, Any]]) -> None:
        self._mutate("upsert", self.meta, data=[{**r, "unused": [0.0, 0.0]} for r in rows])

    _batch_row = staticmethod(batch_row)
    _event_row = staticmethod(event_row)
    _info = staticmethod(batch_info)

    def _batch_rows(self, expr: str = 'kind == "batch"') -> list[dict[str, Any]]:
        return list(self._scan(self.meta, expr, META_FIELDS))

    def _set_retired(self, rows: list[dict[str, Any]], retired_by: str) -> None:
        if rows:
            self._mutate("upsert", self.collection, data=[{**r, "retired_by": retired_by} for r in rows])

    def _rows(self, expr: str) -> list[dict[str, Any]]:
        return list(self._scan(self.collection, expr, ROW_FIELDS))

    # ---- writes ---------------------------------------------------------------------------------------
    def _writable_state(self) -> dict[str, Any]:
        self.repair()
        state = self._state()
        if state.get("importing"):
            raise StoreError(f"an import into {self.collection!r} was interrupted; run the import again")
        return state

    def commit_batch(self, batch: BatchWrite) -> BatchInfo:
        started = now()
        with self._lock:
            state = self._writable_state()
            self._owed_rollback = None  # this batch is the last one now
            self._check_batch(batch)
            model = model_after(state.get("embedding_model") or None, batch, self._is_empty)  # named at the commit
            added = sum(len(d.chunks) for d in batch.documents)
            doc_ids = [d.doc_id for d in batch.documents]
            old = self._query_in("doc_id", doc_ids, 'retired_by == ""', ROW_FIELDS, paged=True)
            had_rows = {r["doc_id"] for r in old}
            retired = sum(1 for d in batch.documents if d.doc_id in had_rows and not d.chunks)
            replaced = len(had_rows) - retired
            seq = int(state["seq"])
            pending = BatchInfo(batch.batch_id, started, None, "pending", added, replaced, batch.unchanged,
                                len(batch.dead_letters), batch.label, retired)
            seq += 1
            batch_seq = seq
            new: list[dict[str, Any]] = []
            for doc in batch.documents:
                for chunk, vector in zip(doc.chunks, doc.vectors, strict=True):
                    seq += 1
                    new.append(to_row(chunk, doc.doc_hash, batch.batch_id, vector, f"pending:{batch.batch_id}", seq))
            for row in new:
                check_lengths(row)
            events = [DeadLetterEvent(d.source, "failed", batch.batch_id, d.failed_at, d.reason, d.location,
                                      d.path or d.location) for d in batch.dead_letters]
            events += [DeadLetterEvent(s, "resolved", batch.batch_id, started) for s in batch.resolved_dead_letters]
            event_rows = []
            for event in events:
                seq += 1
                event_rows.append(self._event_row(event, seq))
            try:
                # 0. reserve sequence numbers (scans stop at seq), and move the generation: a search that overlaps
                # steps 3-5 sees rows of a half-applied batch, so its snapshot id must differ before and after.
                self._put_state({**state, "seq": seq, "generation": int(state["generation"]) + 1})
                self._put_meta([self._batch_row(pending, batch_seq)])  # 1. intent: repair undoes from here on
                if event_rows:
                    self._put_meta(event_rows)  # 2. counted only once the batch is committed
                if new:
                    self._mutate("upsert", self.collection, data=new)  # 3. written, not yet visible
                self._set_retired(old, batch.batch_id)  # 4. the replaced chunks leave the live set
                self._set_retired(new, "")  # 5. the new ones enter it
                info = BatchInfo(batch.batch_id, started, now(), "committed", added, replaced, batch.unchanged,
                                 len(batch.dead_letters), batch.label, retired)
                self._put_meta([self._batch_row(info, batch_seq, model)])  # 6. the commit point
                self._put_state({**state, "seq": seq, "generation": int(state["generation"]) + 2,
                                 "last": batch.batch_id, "embedding_model": model})
            except Exception as exc:
                try:
                    self.repair()
                except Exception as again:
                    raise StoreError(f"batch {batch.batch_id} was not committed ({exc}) and could not be undone "
                                     f"yet ({again}); the next open repairs it") from None
                raise StoreError(f"batch {batch.batch_id} was not committed: {exc}") from None
        return info

    def _is_empty(self) -> bool:
        return not self._query(self.collection, 'pk != ""', ["count(*)"])[0]["count(*)"]

    def _check_batch(self, batch: BatchWrite) -> None:
        """What SQLite's constraints refuse: a used batch id, a record id twice, or a record id that is live
        in a document this batch does not replace."""
        if batch.batch_id.startswith("pending:") or not batch.batch_id:
            raise StoreError(f"batch id {batch.batch_id!r} is reserved")
        if self._query(self.meta, f"key == {literal('batch:' + batch.batch_id)}", ["status"]):
            raise StoreError(f"batch {batch.batch_id} conflicts with the index: batch id already used")
        owner: dict[str, str] = {}
        for doc in batch.documents:
            if len(doc.chunks) != len(doc.vectors) or (len(doc.vectors) and doc.vectors.shape[1] != self.dim):
                raise StoreError(f"batch {batch.batch_id}: document {doc.doc_id!r} needs one {self.dim}-"
                                 "dimensional vector per chunk")
            for chunk in doc.chunks:
                if chunk.record_id in owner:
                    raise StoreError(f"batch {batch.batch_id} conflicts with the index: record id "
                                     f"{chunk.record_id!r} appears twice")
                owner[chunk.record_id] = doc.doc_id
        replacing = {d.doc_id for d in batch.documents}
        for row in self._query_in("record_id", list(owner), 'retired_by == ""', ["record_id", "doc_id"]):
            if row["doc_id"] not in replacing:
                raise StoreError(f"batch {batch.batch_id} conflicts with the index: record id "
                                 f"{row['record_id']!r} is live in document {row['doc_id']!r}")

    def rollback(self, batch_id: str | None = None) -> BatchInfo:
        """Also: when `repair` completed an interrupted rollback (on open, or just now), undo nothing more
        and return that batch unless `batch_id` names one. Re-running a rollback that was killed had undone
        the batch before it as well, and so on until the index was empty."""
        with self._lock:
            self._writable_state()
            owed, self._owed_rollback = self._owed_rollback, None
            if batch_id is None and owed is not None:
                return self._batch(owed)
            if batch_id is None:
                committed = self._batch_rows('kind == "batch" and status == "committed"')
                if not committed:
                    raise StoreError("nothing to roll back: no committed batch")
                batch_id = str(committed[-1]["batch_id"])
            rows = self._query(self.meta, f"key == {literal('batch:' + batch_id)}", META_FIELDS)
            if not rows:
                raise StoreError(f"unknown batch {batch_id!r}")
            if rows[0]["status"] != "committed":
                raise StoreError(f"batch {batch_id!r} is already {rows[0]['status']}")
            later = {r["retired_by"] for r in self._scan(
                self.collection, f'batch_id == {literal(batch_id)} and retired_by != ""', ["retired_by"])}
            # A batch that emptied a document holds no rows of it: a later version shows as live rows.
            retired_docs = {r["doc_id"] for r in self._scan(
                self.collection, f"retired_by == {literal(batch_id)}", ["doc_id"])}
            if retired_docs:
                later |= {r["batch_id"] for r in self._query_in(
                    "doc_id", sorted(retired_docs), 'retired_by == ""', ["batch_id"], paged=True)
                    if r["batch_id"] != batch_id}
            if later:
                raise StoreError(f"batch {batch_id!r} cannot be rolled back alone: later batch(es) "
                                 f"{', '.join(sorted(later))} replaced its documents; roll those back first")
            self._put_meta([{**rows[0], "status": "rolling-back"}])  # from here on repair completes it
            state = self._state()  # the generation moves before the rows do, as for a commit
            self._put_state({**state, "generation": int(state["generation"]) + 1})
            self._finish_rollback(batch_id)
        return self._batch(batch_id)

    def _finish_rollback(self, batch_id: str) -> None:
        self._mutate("delete", self.collection, filter=f"batch_id == {literal(batch_id)}")
        self._set_retired(self._rows(f"retired_by == {literal(batch_id)}"), "")
        self._mutate("delete", self.meta, filter=f'kind == "event" and batch_id == {literal(batch_id)}')
        row = self._query(self.meta, f"key == {literal('batch:' + batch_id)}", META_FIELDS)[0]
        self._put_meta([{**row, "status": "rolled-back"}])
        state = self._state()
        committed = self._batch_rows('kind == "batch" and status == "committed"')
        self._put_state({**state, "generation": int(state["generation"]) + 1,
                         "last": committed[-1]["batch_id"] if committed else None,
                         "embedding_model": None if self._is_empty() else state.get("embedding_model")})

    def repair(self) -> list[str]:
        """Finish what a crash interrupted: undo `pending` batches, complete `rolling-back` ones (recorded in
        `finished_rollbacks`, so that `rollback()` answers with them). Returns the batch ids it touched."""
        with self._lock:
            touched = []
            for row in self._batch_rows('kind == "batch" and status in ["pending", "rolling-back"]'):
                batch_id = str(row["batch_id"])
                touched.append(batch_id)
                if row["status"] == "rolling-back":
                    self._finish_rollback(batch_id)
                    self.finished_rollbacks.append(batch_id)
                    self._owed_rollback = batch_id
                    continue
                self._mutate("delete", self.collection, filter=f"batch_id == {literal(batch_id)}")
                self._set_retired(self._rows(f"retired_by == {literal(batch_id)}"), "")
                self._mutate("delete", self.meta, filter=f'kind == "event" and batch_id == {literal(batch_id)}')
                self._mutate("delete", self.meta, filter=f"key == {literal('batch:' + batch_id)}")
                state = self._state()
                self._put_state({**state, "generation": int(state["generation"]) + 1})
            # A crash between a batch's commit point and the state update leaves `last` behind.
            state = self._state()
            batches = self._batch_rows()
            committed = [r for r in batches if r["status"] == "committed"]
            last = committed[-1]["batch_id"] if committed else None
            if state["last"] != last:
                body = json.loads(committed[-1]["body"]) if committed else {}
                # A batch row written before models were recorded names none: then the state's stands.
                model = body["embedding_model"] if "embedding_model" in body else state.get("embedding_model")
                self._put_state({**state, "generation": int(state["generation"]) + 1, "last": last,
                                 "embedding_model": None if self._is_empty() else model})
            self._check_stored(batches, state)
            return touched

    def _check_stored(self, batches: list[dict[str, Any]], state: dict[str, Any]) -> None:
        """Every row a committed batch wrote is kept (retired rows too) and a rollback deletes its batch's
        rows, so the rows outside batches being written number the committed batches' `added`. A damaged
        Milvus Lite file (a segment deleted, a manifest fallen back to an older one) loads with fewer rows or
        fewer batch records, and had answered as an empty or partial index."""
        if state.get("importing"):
            return  # an import writes its rows before its batches; the import is resumed, then checked
        busy = [str(r["batch_id"]) for r in batches if r["status"] in ("pending", "rolling-back")]
        expected = sum(int(json.loads(r["body"])["added"]) for r in batches if r["status"] == "committed")
        expr = f"batch_id not in {literals(busy)}" if busy else 'pk != ""'
        stored = int(self._query(self.collection, expr, ["count(*)"])[0]["count(*)"])
        # Recounted only on a mismatch: another process's write between the reads changes its batch records.
        if stored != expected and batches == self._batch_rows() and not self._state().get("importing"):
            raise StoreError(f"collection {self.collection!r} holds {stored} chunk rows, but its committed "
                             f"batches wrote {expected}: the index storage is damaged (a lost data segment or "
                             "manifest?). Restore it from a backup or an `evidex export`, or ingest into a new "
                             "index")

    # ---- reads ------------------------------------------------------------------------------------------
    def embedding_model(self) -> str | None:
        model = self._state().get("embedding_model")
        return str(model) if model else None

    def document_hashes(self) -> dict[str, str]:
        return {r["doc_id"]: r["doc_hash"] for r in self._scan(self.collection, 'retired_by == ""',
                                                                ["doc_id", "doc_hash"])}

    def get(self, record_ids: Sequence[str]) -> list[Chunk]:
        ids = list(dict.fromkeys(record_ids))
        found = {r["record_id"]: to_chunk(r) for r in self._query_in("record_id", ids, 'retired_by == ""',
                                                                     CHUNK_FIELDS)}
        return [found[i] for i in ids if i in found]

    def all_chunks(self) -> list[Chunk]:
        return [to_chunk(r) for r in self._scan(self.collection, 'retired_by == ""', CHUNK_FIELDS)]

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

    def word_counts(self, text: str, readers: tuple[str, ...] | None = None) -> tuple[int, dict[str, int]]:
        """Not known: Milvus keeps its BM25 word statistics on the server (a plan then keeps every aspect)."""
        return 0, {}

    def inlink_contexts(self, sources: Sequence[str], filters: SearchFilters | None = None) -> dict[str, list[str]]:
        """Read from a link index of the live records, built on first use at each generation (as the live
        sources are) from the rows whose text can hold a link. It keeps those records' filter fields, so which
        of them pass `filters` is decided here, by the test SQLite's link index uses (`DenseIndex.passes`):
        asking Milvus per request had cost a k8s search about 170 ms on Milvus Lite."""
        links, rows = self._link_index()
        readable, _ = rows.passes(filters)
        return links.contexts(sources, readable)

    def _link_index(self) -> tuple[LinkIndex, DenseIndex]:
        generation = int(self._state()["generation"])
        with self._lock:
            if self._links[0] != generation:
                rows = list(self._scan(self.collection, f'retired_by == "" and ({MAY_LINK})', LINK_FIELDS))
                self._links = (generation, LinkIndex((r["record_id"], r["source"], r["text"]) for r in rows),
                               filter_fields(rows))
            return self._links[1], self._links[2]

    def read_ahead(self, words: Sequence[str]) -> None:
        """Nothing to read: Milvus scores BM25 on the server, per search."""

    def _search(self, data: Any, field: str, limit: int, expr: str,
                params: dict[str, Any]) -> list[tuple[str, float]]:
        """(record_id, raw distance) best first, equal scores in the order the rows were written (as SQLite
        ranks them): Milvus returns ties in the order of its segments, which a seal or a compaction changes.
        Milvus Lite reports BM25 as a negative distance, a server as a positive score: callers take abs() of
        BM25 values, which are never negative."""
        result = self._call("search", self._client.search, self.collection, data=[data], anns_field=field,
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
        generation = int(self._state()["generation"])
        with self._lock:
            if self._sources[0] != generation:
                rows = self._scan(self.collection, 'retired_by == ""', ["source"])
                self._sources = (generation, sorted({r["source"] for r in rows}))
            return self._sources[1]

    def batches(self) -> list[BatchInfo]:
        return [self._info(r) for r in self._batch_rows() if r["status"] in {"committed", "rolled-back"}]

    def _batch(self, batch_id: str) -> BatchInfo:
        rows = self._query(self.meta, f"key == {literal('batch:' + batch_id)}", META_FIELDS)
        if not rows:
            raise StoreError(f"unknown batch {batch_id!r}")
        return self._info(rows[0])

    def _events(self) -> list[DeadLetterEvent]:
        """The dead-letter event log of committed and rolled-back batches, in order."""
        done = {b.batch_id for b in self.batches()}
        events = []
        for r in self._scan(self.meta, 'kind == "event"', META_FIELDS):
            if r["batch_id"] in done:
                b = json.loads(r["body"])
                events.append(DeadLetterEvent(b["source"], b["kind"], r["batch_id"], read_time(b["at"]) or now(),
                                              b["reason"], b["location"], b["path"]))
        return events

    def dead_letters(self) -> list[DeadLetter]:
        """Like the SQLite view: a source's latest event is a failure; attempts count failures since it
        last resolved."""
        latest: dict[str, tuple[DeadLetterEvent, int]] = {}
        for e in self._events():
            if e.kind == "resolved":
                latest[e.source] = (e, 0)
            else:
                latest[e.source] = (e, (latest[e.source][1] if e.source in latest else 0) + 1)
        return [DeadLetter(source=e.source, reason=e.reason, batch_id=e.batch_id, failed_at=e.at,
                           location=e.location, attempts=n, path=e.path)
                for source, (e, n) in sorted(latest.items()) if e.kind == "failed"]

    def snapshot_id(self) -> str:
        state = self._state()
        return f"g{state['generation']}-{state['last'] or 'empty'}"

    def chunk_count(self) -> int:
        return int(self._query(self.collection, 'retired_by == ""', ["count(*)"])[0]["count(*)"])

    def stats(self) -> dict[str, Any]:
        docs: set[str] = set()
        families: dict[str, int] = {}
        labels: Counter[tuple[str, ...]] = Counter()  # chunks per label set, as SQLite groups them
        chunks = 0
        for r in self._scan(self.collection, 'retired_by == ""', ["doc_id", "evidence_family", "access_labels"]):
            chunks += 1
            docs.add(r["doc_id"])
            family = r["evidence_family"] or "-"
            families[family] = families.get(family, 0) + 1
            labels[tuple(r["access_labels"])] += 1
        retired = self._query(self.collection, 'retired_by != "" and not (retired_by like "pending:%")',
                              ["count(*)"])[0]["count(*)"]
        statuses = [b.status for b in self.batches()]
        return {
            "backend": "milvus", "uri": self.uri, "collection": self.collection, "lite": self.is_lite,
            "snapshot_id": self.snapshot_id(), "documents": len(docs), "chunks": chunks,
            "retired_chunks": int(retired),
            "batches": sum(1 for b in statuses if b == "committed"),
            "rolled_back_batches": sum(1 for b in statuses if b == "rolled-back"),
            "dead_letters": len(self.dead_letters()), "families": dict(sorted(families.items())),
            "access_labels": label_counts(labels.items(), list),
        }

    def drop(self) -> None:
        """Delete this index's two collections, everything in them included."""
        with self._lock:
            for name in (self.collection, self.meta):
                self._call("drop", self._client.drop_collection, name)

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
        for r in self._scan(self.collection, 'pk != ""', ROW_FIELDS):
            if not r["retired_by"].startswith("pending:"):
                yield StoredRow(to_chunk(r), r["doc_hash"], np.asarray(r["vector"], dtype=np.float32),
                                r["retired_by"] or None)

    def export_log(self) -> IndexLog:
        writing = bool(self._batch_rows('kind == "batch" and status in ["pending", "rolling-back"]'))
        state = self._state()
        return IndexLog(tuple(self.batches()), tuple(self._events()), int(state["generation"]), writing,
                        state.get("embedding_model") or None)

    def import_rows(self, rows: Iterable[StoredRow], log: IndexLog) -> None:
        with self._lock:
            self.repair()
            state = self._state()
            if not state.get("importing") and (self._batch_rows() or not self._is_empty()):
                raise StoreError(f"cannot import into collection {self.collection!r}: it is not empty")
            self._put_state({**state, "importing": True})
            seq = 0
            page: list[dict[str, Any]] = []
            for stored in rows:
                seq += 1
                row = to_row(stored.chunk, stored.doc_hash, stored.chunk.batch_id, stored.vector,
                             stored.retired_by or "", seq)
                check_lengths(row)
                page.append(row)
                if len(page) == _PAGE:
                    self._put_state({**state, "importing": True, "seq": seq})
                    self._mutate("upsert", self.collection, data=page)
                    page = []
            events = []
            for event in log.events:
                seq += 1
                events.append(self._event_row(event, seq))
            batches = []
            for info in log.batches:
                seq += 1
                batches.append(self._batch_row(info, seq, log.embedding_model))
            self._put_state({**state, "importing": True, "seq": seq})
            if page:
                self._mutate("upsert", self.collection, data=page)
            if events:
                self._put_meta(events)
            if batches:
                self._put_meta(batches)
            committed = [b.batch_id for b in log.batches if b.status == "committed"]
            self._put_state({"schema": SCHEMA_VERSION, "seq": seq, "importing": False,
                             "generation": max(int(state["generation"]), log.generation) + 1,
                             "last": committed[-1] if committed else None, "embedding_model": log.embedding_model})
