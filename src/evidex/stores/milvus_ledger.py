"""The Milvus store's `Ledger` (`evidex.stores.milvus`): batches, dead letters, the embedder, each live
document's hash and the counts, read from the `_meta` collection's batch and event rows and the chunk rows."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from evidex.errors import StoreError
from evidex.stores.milvus_collections import MilvusCollections
from evidex.stores.milvus_schema import META_FIELDS, batch_info, now
from evidex.stores.rows import label_counts
from evidex.stores.transfer import DeadLetterEvent
from evidex.timestamps import read_time
from evidex.types import BatchInfo, DeadLetter


def snapshot_of(state: dict[str, Any]) -> str:
    """The snapshot id a state row names (`Store.snapshot_id`): its generation and last committed batch."""
    return f"g{state['generation']}-{state['last'] or 'empty'}"


class MilvusLedger:
    """`Ledger` of one Milvus index. `where` is what its stats say of the index's place (uri, collection)."""

    def __init__(self, io: MilvusCollections, where: dict[str, Any]) -> None:
        self._io, self._where = io, where
        self.finished_rollbacks: list[str] = []  # rollbacks a crash had interrupted that a repair completed

    def embedding_model(self) -> str | None:
        model = self._io.state().get("embedding_model")
        return str(model) if model else None

    def document_hashes(self) -> dict[str, str]:
        return {r["doc_id"]: r["doc_hash"] for r in self._io.scan(self._io.collection, 'retired_by == ""',
                                                                  ["doc_id", "doc_hash"])}

    def batches(self) -> list[BatchInfo]:
        return [batch_info(r) for r in self._io.batch_rows() if r["status"] in {"committed", "rolled-back"}]

    def batch(self, batch_id: str) -> BatchInfo:
        """One batch by id (what a commit or a rollback returns)."""
        row = self._io.batch_record(batch_id)
        if row is None:
            raise StoreError(f"unknown batch {batch_id!r}")
        return batch_info(row)

    def events(self) -> list[DeadLetterEvent]:
        """The dead-letter event log of committed and rolled-back batches, in order."""
        done = {b.batch_id for b in self.batches()}
        events = []
        for r in self._io.scan(self._io.meta, 'kind == "event"', META_FIELDS):
            if r["batch_id"] in done:
                b = json.loads(r["body"])
                events.append(DeadLetterEvent(b["source"], b["kind"], r["batch_id"], read_time(b["at"]) or now(),
                                              b["reason"], b["location"], b["path"]))
        return events

    def dead_letters(self) -> list[DeadLetter]:
        """Like the SQLite view: a source's latest event is a failure; attempts count failures since it
        last resolved."""
        latest: dict[str, tuple[DeadLetterEvent, int]] = {}
        for e in self.events():
            if e.kind == "resolved":
                latest[e.source] = (e, 0)
            else:
                latest[e.source] = (e, (latest[e.source][1] if e.source in latest else 0) + 1)
        return [DeadLetter(source=e.source, reason=e.reason, batch_id=e.batch_id, failed_at=e.at,
                           location=e.location, attempts=n, path=e.path)
                for source, (e, n) in sorted(latest.items()) if e.kind == "failed"]

    def chunk_count(self) -> int:
        return self._io.count('retired_by == ""')

    def stats(self) -> dict[str, Any]:
        docs: set[str] = set()
        families: dict[str, int] = {}
        labels: Counter[tuple[str, ...]] = Counter()  # chunks per label set, as SQLite groups them
        chunks = 0
        for r in self._io.scan(self._io.collection, 'retired_by == ""',
                               ["doc_id", "evidence_family", "access_labels"]):
            chunks += 1
            docs.add(r["doc_id"])
            family = r["evidence_family"] or "-"
            families[family] = families.get(family, 0) + 1
            labels[tuple(r["access_labels"])] += 1
        retired = self._io.count('retired_by != "" and not (retired_by like "pending:%")')
        statuses = [b.status for b in self.batches()]
        return {
            "backend": "milvus", **self._where,
            "snapshot_id": snapshot_of(self._io.state()), "documents": len(docs), "chunks": chunks,
            "retired_chunks": retired,
            "batches": sum(1 for b in statuses if b == "committed"),
            "rolled_back_batches": sum(1 for b in statuses if b == "rolled-back"),
            "dead_letters": len(self.dead_letters()), "families": dict(sorted(families.items())),
            "access_labels": label_counts(labels.items(), list),
        }
