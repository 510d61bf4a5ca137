"""The SQLite store's write path (`evidex.stores.sqlite`): a batch committed, or rolled back, inside the
transaction the store opens around it.

A replaced chunk is retired (`retired_by` = the batch that replaced it), never deleted, so rolling a batch back
restores exactly what it replaced; the full-text rows follow the live set. Both functions leave the transaction
to the caller, which commits it (and bumps the generation) or rolls it back on any error: a process killed
mid-ingest leaves the last committed state.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from evidex.errors import StoreError
from evidex.stores.protocol import BatchWrite, model_after
from evidex.stores.sqlite_schema import CHUNK_COLUMNS, now
from evidex.timestamps import format_time
from evidex.types import Chunk


def write_batch(db: sqlite3.Connection, batch: BatchWrite, started: str) -> None:
    """Insert `batch`'s chunks, retire those they replace, and record its dead letters and the batch itself."""
    replaced = retired = 0
    _check_dimension(db, batch)
    _record_model(db, batch)
    for doc in batch.documents:
        old = [r[0] for r in db.execute("SELECT rowid FROM records WHERE doc_id=? AND retired_by IS NULL",
                                        (doc.doc_id,))]
        if old:
            replaced += bool(doc.chunks)
            retired += not doc.chunks
            _retire(db, old, batch.batch_id)
        for chunk, vector in zip(doc.chunks, doc.vectors, strict=True):
            _insert(db, chunk, doc.doc_hash, batch.batch_id, vector)
    for letter in batch.dead_letters:
        db.execute(
            "INSERT INTO dead_letter_events (source, kind, reason, location, path, batch_id, at) "
            "VALUES (?, 'failed', ?, ?, ?, ?, ?)",
            (letter.source, letter.reason, letter.location, letter.path or letter.location, batch.batch_id,
             format_time(letter.failed_at)))
    for source in batch.resolved_dead_letters:
        db.execute(
            "INSERT INTO dead_letter_events (source, kind, reason, location, path, batch_id, at) "
            "VALUES (?, 'resolved', '', '', '', ?, ?)", (source, batch.batch_id, started))
    added = sum(len(d.chunks) for d in batch.documents)
    db.execute(
        "INSERT INTO batches (batch_id, label, started_at, finished_at, status, added, replaced, "
        "retired, unchanged, dead_letters) VALUES (?,?,?,?,?,?,?,?,?,?)",
        (batch.batch_id, batch.label, started, now(), "committed", added, replaced, retired, batch.unchanged,
         len(batch.dead_letters)))


def recorded_model(db: sqlite3.Connection) -> str | None:
    """The embedder the index records for its vectors (`Ledger.embedding_model`)."""
    row = db.execute("SELECT value FROM meta WHERE key='embedding_model'").fetchone()
    return None if row is None else str(row[0])


def _check_dimension(db: sqlite3.Connection, batch: BatchWrite) -> None:
    """Every vector of an index has one dimension: a batch from another embedding model would make dense
    search fail for every query (or, at the same dimension, compare unlike vectors; that one the store
    cannot see)."""
    row = db.execute("SELECT length(vector) FROM records LIMIT 1").fetchone()
    have = None if row is None else row[0] // 4
    for doc in batch.documents:
        if not doc.chunks:
            continue
        dim = int(doc.vectors.shape[1])
        if have is not None and dim != have:
            raise StoreError(f"this index holds {have}-dimensional vectors and the batch brings {dim}-dimensional "
                             "ones: the embedding model changed. Ingest into a new index (or export/import "
                             "after re-embedding)")
        have = dim


def _record_model(db: sqlite3.Connection, batch: BatchWrite) -> None:
    """Inside the batch's transaction: `model_after` names the index's model, or refuses the batch."""
    recorded = recorded_model(db)
    model = model_after(recorded, batch, lambda: db.execute("SELECT 1 FROM records LIMIT 1").fetchone() is None)
    if model is not None and recorded is None:
        db.execute("INSERT INTO meta VALUES ('embedding_model', ?)", (model,))


def _retire(db: sqlite3.Connection, rowids: Sequence[int], batch_id: str) -> None:
    for rowid in rowids:
        db.execute("DELETE FROM records_fts WHERE rowid=?", (rowid,))
        db.execute("UPDATE records SET retired_by=? WHERE rowid=?", (batch_id, rowid))


def _insert(db: sqlite3.Connection, chunk: Chunk, doc_hash: str, batch_id: str,
            vector: npt.NDArray[np.float32]) -> None:
    p = chunk.provenance
    cur = db.execute(
        f"INSERT INTO records ({CHUNK_COLUMNS}, doc_hash, vector) VALUES ({', '.join('?' * 24)})",
        (chunk.record_id, chunk.doc_id, chunk.chunk_index, chunk.source, chunk.title, chunk.heading,
         chunk.text, chunk.citation_anchor, chunk.span_start, chunk.span_end, chunk.content_hash,
         p.source_version, format_time(p.published_at), format_time(p.expires_at),
         json.dumps(list(p.access_labels)), p.citation_uri, p.authority_tier, p.evidence_family, p.owner,
         p.superseded_by, batch_id, format_time(chunk.indexed_at) or now(), doc_hash,
         np.asarray(vector, dtype=np.float32).tobytes()))
    db.execute("INSERT INTO records_fts (rowid, title, text) VALUES (?,?,?)", (cur.lastrowid, chunk.title, chunk.text))


def undo_batch(db: sqlite3.Connection, batch_id: str | None) -> str:
    """Roll back `batch_id` (None: the last committed batch): delete its rows, restore the rows it retired and
    forget its dead letters. Refuses a batch a later batch built on. Returns the batch rolled back."""
    batch_id = _batch_to_undo(db, batch_id)
    for (rowid,) in db.execute("SELECT rowid FROM records WHERE batch_id=?", (batch_id,)):
        db.execute("DELETE FROM records_fts WHERE rowid=?", (rowid,))
    db.execute("DELETE FROM records WHERE batch_id=?", (batch_id,))
    restored = db.execute("SELECT rowid, title, text FROM records WHERE retired_by=?", (batch_id,)).fetchall()
    for row in restored:
        db.execute("INSERT INTO records_fts (rowid, title, text) VALUES (?,?,?)",
                   (row["rowid"], row["title"], row["text"]))
    db.execute("UPDATE records SET retired_by=NULL WHERE retired_by=?", (batch_id,))
    db.execute("DELETE FROM dead_letter_events WHERE batch_id=?", (batch_id,))
    db.execute("UPDATE batches SET status='rolled-back' WHERE batch_id=?", (batch_id,))
    if db.execute("SELECT 1 FROM records LIMIT 1").fetchone() is None:  # no vector is left
        db.execute("DELETE FROM meta WHERE key='embedding_model'")
    return batch_id


def _batch_to_undo(db: sqlite3.Connection, batch_id: str | None) -> str:
    """`batch_id` (or the last committed batch) once it is known to be committed and not built on."""
    if batch_id is None:
        row = db.execute("SELECT batch_id FROM batches WHERE status='committed' ORDER BY seq DESC LIMIT 1").fetchone()
        if row is None:
            raise StoreError("nothing to roll back: no committed batch")
        batch_id = str(row[0])
    status = db.execute("SELECT status FROM batches WHERE batch_id=?", (batch_id,)).fetchone()
    if status is None:
        raise StoreError(f"unknown batch {batch_id!r}")
    if status[0] != "committed":
        raise StoreError(f"batch {batch_id!r} is already {status[0]}")
    later = db.execute("SELECT DISTINCT retired_by FROM records WHERE batch_id=? AND retired_by IS NOT NULL",
                       (batch_id,)).fetchall()
    # A batch that retired a document without writing any of it (the document was emptied) holds no rows a later
    # batch could retire: a later version of that document shows as live rows.
    later += db.execute(
        "SELECT DISTINCT batch_id FROM records WHERE retired_by IS NULL AND batch_id != ? AND doc_id IN "
        "(SELECT doc_id FROM records WHERE retired_by = ?)", (batch_id, batch_id)).fetchall()
    if later:
        names = ", ".join(sorted({str(r[0]) for r in later}))
        raise StoreError(f"batch {batch_id!r} cannot be rolled back alone: later batch(es) {names} replaced its "
                         "documents; roll those back first")
    return batch_id
