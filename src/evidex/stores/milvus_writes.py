"""The Milvus store's write protocol (`evidex.stores.milvus`): a batch, a rollback, an import, and the repair
of what a crash interrupted.

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
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from typing import Any

from evidex.errors import StoreError
from evidex.stores.milvus_collections import MilvusCollections
from evidex.stores.milvus_expression import literal, literals
from evidex.stores.milvus_ledger import MilvusLedger
from evidex.stores.milvus_schema import (
    ROW_FIELDS,
    SCHEMA_VERSION,
    batch_row,
    check_lengths,
    event_row,
    now,
    to_row,
)
from evidex.stores.protocol import BatchWrite, model_after
from evidex.stores.transfer import DeadLetterEvent, IndexLog, StoredRow
from evidex.types import BatchInfo


class MilvusWriter:
    """The writes of one Milvus index of `dim`-dimensional vectors; a finished interrupted rollback is recorded
    in `ledger.finished_rollbacks`."""

    def __init__(self, io: MilvusCollections, ledger: MilvusLedger, dim: int) -> None:
        self._io, self._ledger, self.dim = io, ledger, dim
        self._lock = threading.RLock()
        self._owed_rollback: str | None = None  # the last rollback `repair` completed, until a rollback or a commit

    def _writable_state(self) -> dict[str, Any]:
        self.repair()
        state = self._io.state()
        if state.get("importing"):
            raise StoreError(f"an import into {self._io.collection!r} was interrupted; run the import again")
        return state

    def commit_batch(self, batch: BatchWrite) -> BatchInfo:
        started = now()
        with self._lock:
            state = self._writable_state()
            self._owed_rollback = None  # this batch is the last one now
            self._check_batch(batch)
            model = model_after(state.get("embedding_model") or None, batch, self._io.is_empty)  # named at the commit
            added = sum(len(d.chunks) for d in batch.documents)
            doc_ids = [d.doc_id for d in batch.documents]
            old = self._io.query_in("doc_id", doc_ids, 'retired_by == ""', ROW_FIELDS, paged=True)
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
                event_rows.append(event_row(event, seq))
            try:
                # 0. reserve sequence numbers (scans stop at seq), and move the generation: a search that overlaps
                # steps 3-5 sees rows of a half-applied batch, so its snapshot id must differ before and after.
                self._io.put_state({**state, "seq": seq, "generation": int(state["generation"]) + 1})
                self._io.put_meta([batch_row(pending, batch_seq)])  # 1. intent: repair undoes from here on
                if event_rows:
                    self._io.put_meta(event_rows)  # 2. counted only once the batch is committed
                if new:
                    self._io.mutate("upsert", self._io.collection, data=new)  # 3. written, not yet visible
                self._io.set_retired(old, batch.batch_id)  # 4. the replaced chunks leave the live set
                self._io.set_retired(new, "")  # 5. the new ones enter it
                info = BatchInfo(batch.batch_id, started, now(), "committed", added, replaced, batch.unchanged,
                                 len(batch.dead_letters), batch.label, retired)
                self._io.put_meta([batch_row(info, batch_seq, model)])  # 6. the commit point
                self._io.put_state({**state, "seq": seq, "generation": int(state["generation"]) + 2,
                                     "last": batch.batch_id, "embedding_model": model})
            except Exception as exc:
                try:
                    self.repair()
                except Exception as again:
                    raise StoreError(f"batch {batch.batch_id} was not committed ({exc}) and could not be undone "
                                     f"yet ({again}); the next open repairs it") from None
                raise StoreError(f"batch {batch.batch_id} was not committed: {exc}") from None
        return info

    def _check_batch(self, batch: BatchWrite) -> None:
        """What SQLite's constraints refuse: a used batch id, a record id twice, or a record id that is live
        in a document this batch does not replace."""
        if batch.batch_id.startswith("pending:") or not batch.batch_id:
            raise StoreError(f"batch id {batch.batch_id!r} is reserved")
        if self._io.batch_record(batch.batch_id) is not None:
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
        for row in self._io.query_in("record_id", list(owner), 'retired_by == ""', ["record_id", "doc_id"]):
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
                return self._ledger.batch(owed)
            if batch_id is None:
                committed = self._io.batch_rows('kind == "batch" and status == "committed"')
                if not committed:
                    raise StoreError("nothing to roll back: no committed batch")
                batch_id = str(committed[-1]["batch_id"])
            row = self._io.batch_record(batch_id)
            if row is None:
                raise StoreError(f"unknown batch {batch_id!r}")
            if row["status"] != "committed":
                raise StoreError(f"batch {batch_id!r} is already {row['status']}")
            later = {r["retired_by"] for r in self._io.scan(
                self._io.collection, f'batch_id == {literal(batch_id)} and retired_by != ""', ["retired_by"])}
            # A batch that emptied a document holds no rows of it: a later version shows as live rows.
            retired_docs = {r["doc_id"] for r in self._io.scan(
                self._io.collection, f"retired_by == {literal(batch_id)}", ["doc_id"])}
            if retired_docs:
                later |= {r["batch_id"] for r in self._io.query_in(
                    "doc_id", sorted(retired_docs), 'retired_by == ""', ["batch_id"], paged=True)
                    if r["batch_id"] != batch_id}
            if later:
                raise StoreError(f"batch {batch_id!r} cannot be rolled back alone: later batch(es) "
                                 f"{', '.join(sorted(later))} replaced its documents; roll those back first")
            self._io.put_meta([{**row, "status": "rolling-back"}])  # from here on repair completes it
            state = self._io.state()  # the generation moves before the rows do, as for a commit
            self._io.put_state({**state, "generation": int(state["generation"]) + 1})
            self._finish_rollback(batch_id)
        return self._ledger.batch(batch_id)

    def _finish_rollback(self, batch_id: str) -> None:
        self._io.mutate("delete", self._io.collection, filter=f"batch_id == {literal(batch_id)}")
        self._io.set_retired(self._io.rows(f"retired_by == {literal(batch_id)}"), "")
        self._io.mutate("delete", self._io.meta, filter=f'kind == "event" and batch_id == {literal(batch_id)}')
        row = self._io.batch_record(batch_id)
        if row is None:
            raise StoreError(f"unknown batch {batch_id!r}")
        self._io.put_meta([{**row, "status": "rolled-back"}])
        state = self._io.state()
        committed = self._io.batch_rows('kind == "batch" and status == "committed"')
        self._io.put_state({**state, "generation": int(state["generation"]) + 1,
                             "last": committed[-1]["batch_id"] if committed else None,
                             "embedding_model": None if self._io.is_empty() else state.get("embedding_model")})

    def repair(self) -> list[str]:
        """Finish what a crash interrupted: undo `pending` batches, complete `rolling-back` ones (recorded in
        `finished_rollbacks`, so that `rollback()` answers with them). Returns the batch ids it touched."""
        with self._lock:
            touched = []
            for row in self._io.batch_rows('kind == "batch" and status in ["pending", "rolling-back"]'):
                batch_id = str(row["batch_id"])
                touched.append(batch_id)
                if row["status"] == "rolling-back":
                    self._finish_rollback(batch_id)
                    self._ledger.finished_rollbacks.append(batch_id)
                    self._owed_rollback = batch_id
                    continue
                self._io.mutate("delete", self._io.collection, filter=f"batch_id == {literal(batch_id)}")
                self._io.set_retired(self._io.rows(f"retired_by == {literal(batch_id)}"), "")
                self._io.mutate("delete", self._io.meta, filter=f'kind == "event" and batch_id == {literal(batch_id)}')
                self._io.mutate("delete", self._io.meta, filter=f"key == {literal('batch:' + batch_id)}")
                state = self._io.state()
                self._io.put_state({**state, "generation": int(state["generation"]) + 1})
            # A crash between a batch's commit point and the state update leaves `last` behind.
            state = self._io.state()
            batches = self._io.batch_rows()
            committed = [r for r in batches if r["status"] == "committed"]
            last = committed[-1]["batch_id"] if committed else None
            if state["last"] != last:
                body = json.loads(committed[-1]["body"]) if committed else {}
                # A batch row written before models were recorded names none: then the state's stands.
                model = body["embedding_model"] if "embedding_model" in body else state.get("embedding_model")
                self._io.put_state({**state, "generation": int(state["generation"]) + 1, "last": last,
                                     "embedding_model": None if self._io.is_empty() else model})
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
        stored = int(self._io.query(self._io.collection, expr, ["count(*)"])[0]["count(*)"])
        # Recounted only on a mismatch: another process's write between the reads changes its batch records.
        if stored != expected and batches == self._io.batch_rows() and not self._io.state().get("importing"):
            raise StoreError(f"collection {self._io.collection!r} holds {stored} chunk rows, but its committed "
                             f"batches wrote {expected}: the index storage is damaged (a lost data segment or "
                             "manifest?). Restore it from a backup or an `evidex export`, or ingest into a new "
                             "index")

    def import_rows(self, rows: Iterable[StoredRow], log: IndexLog) -> None:
        with self._lock:
            self.repair()
            state = self._io.state()
            if not state.get("importing") and (self._io.batch_rows() or not self._io.is_empty()):
                raise StoreError(f"cannot import into collection {self._io.collection!r}: it is not empty")
            self._io.put_state({**state, "importing": True})
            seq = 0
            page: list[dict[str, Any]] = []
            for stored in rows:
                seq += 1
                row = to_row(stored.chunk, stored.doc_hash, stored.chunk.batch_id, stored.vector,
                             stored.retired_by or "", seq)
                check_lengths(row)
                page.append(row)
                if len(page) == self._io.page:
                    self._io.put_state({**state, "importing": True, "seq": seq})
                    self._io.mutate("upsert", self._io.collection, data=page)
                    page = []
            events = []
            for event in log.events:
                seq += 1
                events.append(event_row(event, seq))
            batches = []
            for info in log.batches:
                seq += 1
                batches.append(batch_row(info, seq, log.embedding_model))
            self._io.put_state({**state, "importing": True, "seq": seq})
            if page:
                self._io.mutate("upsert", self._io.collection, data=page)
            if events:
                self._io.put_meta(events)
            if batches:
                self._io.put_meta(batches)
            committed = [b.batch_id for b in log.batches if b.status == "committed"]
            self._io.put_state({"schema": SCHEMA_VERSION, "seq": seq, "importing": False,
                                 "generation": max(int(state["generation"]), log.generation) + 1,
                                 "last": committed[-1] if committed else None, "embedding_model": log.embedding_model})
