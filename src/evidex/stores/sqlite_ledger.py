"""The SQLite store's `Ledger` (`evidex.stores.sqlite`): batches, dead letters, the index's embedder, each live
document's hash and the counts, read from the store's tables on its connection and under its lock."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from evidex.errors import StoreError
from evidex.stores.rows import label_counts
from evidex.stores.sqlite_schema import row_to_batch
from evidex.stores.sqlite_write import recorded_model
from evidex.timestamps import read_time
from evidex.types import BatchInfo, DeadLetter


class SqliteLedger:
    """`Ledger` of one SQLite index. `snapshot_id` is the store's (its stats name it)."""

    finished_rollbacks: Sequence[str] = ()  # a rollback is one transaction: a crash never leaves one half done

    def __init__(self, db: sqlite3.Connection, lock: threading.RLock, path: Path,
                 snapshot_id: Callable[[], str]) -> None:
        self._db, self._lock, self._path, self._snapshot_id = db, lock, path, snapshot_id

    def embedding_model(self) -> str | None:
        with self._lock:
            return recorded_model(self._db)

    def document_hashes(self) -> dict[str, str]:
        with self._lock:
            rows = self._db.execute(
                "SELECT DISTINCT doc_id, doc_hash FROM records WHERE retired_by IS NULL").fetchall()
        return {r[0]: r[1] for r in rows}

    def batches(self) -> list[BatchInfo]:
        with self._lock:
            ids = [r[0] for r in self._db.execute("SELECT batch_id FROM batches ORDER BY seq")]
        return [self.batch(b) for b in ids]

    def batch(self, batch_id: str) -> BatchInfo:
        """One batch by id (what a commit or a rollback returns)."""
        with self._lock:
            r = self._db.execute("SELECT * FROM batches WHERE batch_id=?", (batch_id,)).fetchone()
        if r is None:
            raise StoreError(f"unknown batch {batch_id!r}")
        return row_to_batch(r)

    def dead_letters(self) -> list[DeadLetter]:
        with self._lock:
            rows = self._db.execute("SELECT * FROM dead_letters ORDER BY source").fetchall()
        return [DeadLetter(source=r["source"], reason=r["reason"], batch_id=r["batch_id"],
                           failed_at=read_time(r["failed_at"]) or datetime.now(UTC), location=r["location"],
                           attempts=r["attempts"], path=r["path"]) for r in rows]

    def chunk_count(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM records WHERE retired_by IS NULL").fetchone()[0])

    def stats(self) -> dict[str, Any]:
        with self._lock:
            one = self._db.execute
            return {
                "backend": "sqlite",
                "path": str(self._path),
                "snapshot_id": self._snapshot_id(),
                "documents": one("SELECT COUNT(DISTINCT doc_id) FROM records WHERE retired_by IS NULL"
                                 ).fetchone()[0],
                "chunks": self.chunk_count(),
                "retired_chunks": one("SELECT COUNT(*) FROM records WHERE retired_by IS NOT NULL").fetchone()[0],
                "batches": one("SELECT COUNT(*) FROM batches WHERE status='committed'").fetchone()[0],
                "rolled_back_batches": one("SELECT COUNT(*) FROM batches WHERE status='rolled-back'").fetchone()[0],
                "dead_letters": one("SELECT COUNT(*) FROM dead_letters").fetchone()[0],
                "families": dict(one("SELECT COALESCE(evidence_family, '-'), COUNT(*) FROM records WHERE "
                                     "retired_by IS NULL GROUP BY 1 ORDER BY 1").fetchall()),
                "access_labels": label_counts(one("SELECT access_labels, COUNT(*) FROM records WHERE "
                                                  "retired_by IS NULL GROUP BY 1").fetchall(), json.loads),
            }
