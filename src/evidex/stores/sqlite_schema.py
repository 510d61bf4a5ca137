"""How the SQLite index (`evidex.stores.sqlite`) is laid out, how its schema changes, and a row as a chunk or a batch.

The schema is built by numbered migrations (`MIGRATIONS`; the schema version is `PRAGMA user_version`):

* `meta`: key -> value: `generation` (bumped by every commit and rollback) and `embedding_model` once a batch
  names one.
* `batches`: one row per batch, in order (`seq`), with its status (`committed`, `rolled-back`) and counts.
* `records`: one row per stored chunk, live or retired, with its provenance and its vector (float32 bytes). A
  row is live when `retired_by IS NULL`; once replaced it holds the batch that replaced it. A record id is
  unique among live rows only.
* `records_fts`: FTS5 postings of the live rows' title and text, keyed by the record's rowid.
* `dead_letter_events`: each failure and resolution of a source, per batch; the `dead_letters` view is the
  sources whose last event is a failure.

Times are stored as text in `format_time`'s form (UTC, seconds, trailing Z).
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime

from evidex.stores.rows import chunk_from_row
from evidex.timestamps import format_time, read_time
from evidex.types import BatchInfo, Chunk

# Numbered migrations: the position in this list is the schema version (PRAGMA user_version).
MIGRATIONS = [
    """
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    INSERT INTO meta VALUES ('generation', '0');
    CREATE TABLE batches (
        seq INTEGER PRIMARY KEY AUTOINCREMENT, batch_id TEXT NOT NULL UNIQUE, label TEXT NOT NULL,
        started_at TEXT NOT NULL, finished_at TEXT, status TEXT NOT NULL,
        added INTEGER NOT NULL, replaced INTEGER NOT NULL, unchanged INTEGER NOT NULL,
        dead_letters INTEGER NOT NULL);
    CREATE TABLE records (
        rowid INTEGER PRIMARY KEY, record_id TEXT NOT NULL, doc_id TEXT NOT NULL, doc_hash TEXT NOT NULL,
        chunk_index INTEGER NOT NULL, source TEXT NOT NULL, title TEXT NOT NULL, heading TEXT NOT NULL,
        text TEXT NOT NULL, citation_anchor TEXT, span_start INTEGER NOT NULL, span_end INTEGER NOT NULL,
        content_hash TEXT NOT NULL, source_version TEXT, published_at TEXT, expires_at TEXT,
        access_labels TEXT NOT NULL, citation_uri TEXT, authority_tier TEXT, evidence_family TEXT,
        owner TEXT, superseded_by TEXT, batch_id TEXT NOT NULL, indexed_at TEXT NOT NULL,
        retired_by TEXT, vector BLOB NOT NULL);
    CREATE UNIQUE INDEX records_live_id ON records(record_id) WHERE retired_by IS NULL;
    CREATE INDEX records_doc ON records(doc_id, retired_by);
    CREATE INDEX records_batch ON records(batch_id);
    CREATE INDEX records_retired ON records(retired_by);
    CREATE VIRTUAL TABLE records_fts USING fts5(title, text, tokenize='porter unicode61 remove_diacritics 2');
    CREATE TABLE dead_letters (
        source TEXT PRIMARY KEY, reason TEXT NOT NULL, location TEXT NOT NULL, path TEXT NOT NULL,
        batch_id TEXT NOT NULL, failed_at TEXT NOT NULL, attempts INTEGER NOT NULL);
    """,
    # 2: dead letters become an event log (failed / resolved, per batch), so a rollback restores exactly
    # the dead-letter list as it was before the batch.
    """
    CREATE TABLE dead_letter_events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT, source TEXT NOT NULL, kind TEXT NOT NULL,
        reason TEXT NOT NULL, location TEXT NOT NULL, path TEXT NOT NULL, batch_id TEXT NOT NULL,
        at TEXT NOT NULL);
    CREATE INDEX dead_letter_events_source ON dead_letter_events(source, seq);
    INSERT INTO dead_letter_events (source, kind, reason, location, path, batch_id, at)
        SELECT source, 'failed', reason, location, path, batch_id, failed_at FROM dead_letters;
    DROP TABLE dead_letters;
    CREATE VIEW dead_letters AS
        SELECT e.source AS source, e.reason AS reason, e.location AS location, e.path AS path,
               e.batch_id AS batch_id, e.at AS failed_at,
               (SELECT COUNT(*) FROM dead_letter_events f WHERE f.source = e.source AND f.kind = 'failed'
                  AND f.seq > COALESCE((SELECT MAX(g.seq) FROM dead_letter_events g
                                        WHERE g.source = e.source AND g.kind = 'resolved'), 0)) AS attempts
        FROM dead_letter_events e
        WHERE e.seq = (SELECT MAX(seq) FROM dead_letter_events h WHERE h.source = e.source)
          AND e.kind = 'failed';
    """,
    # 3: only retired rows need the retired_by index; a full index made SQLite's planner scan every live
    # row for `record_id IN (...)` lookups (150 ms instead of 0.2 ms at 100k chunks).
    """
    DROP INDEX records_retired;
    CREATE INDEX records_retired ON records(retired_by) WHERE retired_by IS NOT NULL;
    """,
    # 4: a batch counts the documents it retired without a successor apart from those it replaced.
    """
    ALTER TABLE batches ADD COLUMN retired INTEGER NOT NULL DEFAULT 0;
    """,
]

CHUNK_COLUMNS = (
    "record_id, doc_id, chunk_index, source, title, heading, text, citation_anchor, span_start, span_end, "
    "content_hash, source_version, published_at, expires_at, access_labels, citation_uri, authority_tier, "
    "evidence_family, owner, superseded_by, batch_id, indexed_at"
)


def statements(script: str) -> list[str]:
    return [s.strip() for s in script.split(";") if s.strip()]


def now() -> str:
    return format_time(datetime.now(UTC)) or ""


def row_to_batch(r: sqlite3.Row) -> BatchInfo:
    return BatchInfo(batch_id=r["batch_id"], started_at=read_time(r["started_at"]) or datetime.now(UTC),
                     finished_at=read_time(r["finished_at"]), status=r["status"], added=r["added"],
                     replaced=r["replaced"], unchanged=r["unchanged"], dead_letters=r["dead_letters"],
                     label=r["label"], retired=r["retired"])


def row_to_chunk(row: sqlite3.Row) -> Chunk:
    return chunk_from_row(row, published_at=read_time(row["published_at"]), expires_at=read_time(row["expires_at"]),
                          indexed_at=read_time(row["indexed_at"]), access_labels=json.loads(row["access_labels"]))
