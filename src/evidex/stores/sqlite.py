"""The embedded default store: one SQLite file (WAL) is the single source of truth.

Records, provenance, vectors, batches and dead letters live in tables; FTS5 holds BM25 postings of the
live records. Dense search is exact: the live vectors are loaded once per snapshot into a numpy matrix
and filters become boolean masks; records read by id are kept decoded for their snapshot too. A replaced
chunk is retired (`retired_by` = the batch that replaced it), never deleted, so rolling a batch back
restores exactly what it replaced. Every batch and every rollback is one transaction: a process killed
mid-ingest leaves the last committed state.

The tables, their numbered migrations and a row as a chunk or a batch are in `evidex.stores.sqlite_schema`;
FTS5's bm25(), summed word by word for sparse search, in `evidex.stores.sqlite_bm25`.

This module is longer than the usual 300 lines (about 530): it holds the store class (about 470) and little
else. Its writes (a batch or a rollback, each one transaction that retires or restores rows and bumps the
generation) and its reads share its connections, their locks and that generation, which names a snapshot and
keeps the per-snapshot caches (the dense matrix, each word's matches, decoded records, link contexts) valid:
they are read together.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from evidex.errors import StoreError
from evidex.ingest.provenance import format_time, read_time
from evidex.retrieval.lexical import tokens
from evidex.retrieval.links import LinkIndex
from evidex.stores.dense import DenseIndex
from evidex.stores.protocol import BatchWrite, model_after
from evidex.stores.rows import label_counts
from evidex.stores.snapshot_cache import SnapshotCache
from evidex.stores.sqlite_bm25 import BM25, WordMatches, fts5_idf, significant, top
from evidex.stores.sqlite_schema import (
    CHUNK_COLUMNS,
    MIGRATIONS,
    now,
    row_to_batch,
    row_to_chunk,
    statements,
)
from evidex.types import BatchInfo, Chunk, DeadLetter, ScoredId, SearchFilters

INDEX_FILE = "index.sqlite"

_WORD_CACHE_ROWS = 2_000_000  # about 32 MB of (rowid, score) pairs
_CHUNK_CACHE_ROWS = 10_000  # decoded chunks kept per snapshot: a few tens of MB of text at most


def _regexp(pattern: str, value: str | None) -> bool:
    return value is not None and re.search(pattern, value) is not None


class SqliteStore:
    """`Store` on one SQLite file. Safe to share between threads (one connection behind a lock)."""

    finished_rollbacks: Sequence[str] = ()  # a rollback is one transaction: a crash never leaves one half done

    def __init__(self, directory: Path, *, title_weight: float = 1.0) -> None:
        if directory.exists() and not directory.is_dir():
            raise StoreError(f"{directory} is a file, not an index folder: point --index / the config at a folder")
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / INDEX_FILE
        self.title_weight = title_weight
        self._lock = threading.RLock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("PRAGMA busy_timeout=30000")
        self._db.create_function("regexp", 2, _regexp, deterministic=True)
        self._migrate()
        # Full-text search runs on its own read connection (WAL readers never block), so a hybrid search can
        # run it in a second thread while the dense search uses the matrix.
        self._fts = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._fts.execute("PRAGMA busy_timeout=30000")
        self._fts.create_function("regexp", 2, _regexp, deterministic=True)
        self._fts_lock = threading.Lock()
        # One-word MATCH -> its rows and scores (see _word_matches), bounded by rows.
        self._word_cache: SnapshotCache[str, WordMatches] = SnapshotCache(_WORD_CACHE_ROWS, lambda m: len(m[0]))
        self._dense: DenseIndex | None = None
        self._dense_generation = -1
        self._links: tuple[int, LinkIndex] | None = None  # (generation, its live records' link contexts)
        self._chunk_cache: SnapshotCache[str, Chunk] = SnapshotCache(_CHUNK_CACHE_ROWS)  # live record id (see get)

    # ---- schema -----------------------------------------------------------------------------------
    def _migrate(self) -> None:
        with self._lock:
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            if version > len(MIGRATIONS):
                raise StoreError(f"{self.path} was written by a newer evidex (schema {version})")
            for number in range(version, len(MIGRATIONS)):
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    for statement in statements(MIGRATIONS[number]):
                        self._db.execute(statement)
                    self._db.execute(f"PRAGMA user_version = {number + 1}")
                    self._db.execute("COMMIT")
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise

    def _generation(self) -> int:
        return int(self._db.execute("SELECT value FROM meta WHERE key='generation'").fetchone()[0])

    def _bump_generation(self) -> None:
        self._db.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key='generation'")

    # ---- writes -------------------------------------------------------------------------------------
    def commit_batch(self, batch: BatchWrite) -> BatchInfo:
        started = now()
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                replaced = retired = 0
                self._check_dimension(batch)
                self._record_model(batch)
                for doc in batch.documents:
                    old = [r[0] for r in self._db.execute(
                        "SELECT rowid FROM records WHERE doc_id=? AND retired_by IS NULL", (doc.doc_id,))]
                    if old:
                        replaced += bool(doc.chunks)
                        retired += not doc.chunks
                        self._retire(old, batch.batch_id)
                    for chunk, vector in zip(doc.chunks, doc.vectors, strict=True):
                        self._insert(chunk, doc.doc_hash, batch.batch_id, vector)
                for letter in batch.dead_letters:
                    self._db.execute(
                        "INSERT INTO dead_letter_events (source, kind, reason, location, path, batch_id, at) "
                        "VALUES (?, 'failed', ?, ?, ?, ?, ?)",
                        (letter.source, letter.reason, letter.location, letter.path or letter.location,
                         batch.batch_id, format_time(letter.failed_at)))
                for source in batch.resolved_dead_letters:
                    self._db.execute(
                        "INSERT INTO dead_letter_events (source, kind, reason, location, path, batch_id, at) "
                        "VALUES (?, 'resolved', '', '', '', ?, ?)", (source, batch.batch_id, started))
                added = sum(len(d.chunks) for d in batch.documents)
                self._db.execute(
                    "INSERT INTO batches (batch_id, label, started_at, finished_at, status, added, replaced, "
                    "retired, unchanged, dead_letters) VALUES (?,?,?,?,?,?,?,?,?,?)",
                    (batch.batch_id, batch.label, started, now(), "committed", added, replaced, retired,
                     batch.unchanged, len(batch.dead_letters)))
                self._bump_generation()
                self._db.execute("COMMIT")
            except sqlite3.IntegrityError as exc:
                self._db.execute("ROLLBACK")
                raise StoreError(f"batch {batch.batch_id} conflicts with the index: {exc}") from None
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return self._batch(batch.batch_id)

    def _check_dimension(self, batch: BatchWrite) -> None:
        """Every vector of an index has one dimension: a batch from another embedding model would make dense
        search fail for every query (or, at the same dimension, compare unlike vectors; that one the store
        cannot see)."""
        row = self._db.execute("SELECT length(vector) FROM records LIMIT 1").fetchone()
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

    def embedding_model(self) -> str | None:
        with self._lock:
            return self._recorded_model()

    def _recorded_model(self) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key='embedding_model'").fetchone()
        return None if row is None else str(row[0])

    def _record_model(self, batch: BatchWrite) -> None:
        """Inside the batch's transaction: `model_after` names the index's model, or refuses the batch."""
        recorded = self._recorded_model()
        model = model_after(recorded, batch, lambda: self._db.execute("SELECT 1 FROM records LIMIT 1").fetchone()
                            is None)
        if model is not None and recorded is None:
            self._db.execute("INSERT INTO meta VALUES ('embedding_model', ?)", (model,))

    def _retire(self, rowids: Sequence[int], batch_id: str) -> None:
        for rowid in rowids:
            self._db.execute("DELETE FROM records_fts WHERE rowid=?", (rowid,))
            self._db.execute("UPDATE records SET retired_by=? WHERE rowid=?", (batch_id, rowid))

    def _insert(self, chunk: Chunk, doc_hash: str, batch_id: str, vector: npt.NDArray[np.float32]) -> None:
        p = chunk.provenance
        cur = self._db.execute(
            f"INSERT INTO records ({CHUNK_COLUMNS}, doc_hash, vector) VALUES "
            f"({', '.join('?' * 24)})",
            (chunk.record_id, chunk.doc_id, chunk.chunk_index, chunk.source, chunk.title, chunk.heading,
             chunk.text, chunk.citation_anchor, chunk.span_start, chunk.span_end, chunk.content_hash,
             p.source_version, format_time(p.published_at), format_time(p.expires_at),
             json.dumps(list(p.access_labels)), p.citation_uri, p.authority_tier, p.evidence_family, p.owner,
             p.superseded_by, batch_id, format_time(chunk.indexed_at) or now(), doc_hash,
             np.asarray(vector, dtype=np.float32).tobytes()))
        self._db.execute("INSERT INTO records_fts (rowid, title, text) VALUES (?,?,?)",
                         (cur.lastrowid, chunk.title, chunk.text))

    def rollback(self, batch_id: str | None = None) -> BatchInfo:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                if batch_id is None:
                    row = self._db.execute(
                        "SELECT batch_id FROM batches WHERE status='committed' ORDER BY seq DESC LIMIT 1"
                    ).fetchone()
                    if row is None:
                        raise StoreError("nothing to roll back: no committed batch")
                    batch_id = str(row[0])
                status = self._db.execute("SELECT status FROM batches WHERE batch_id=?", (batch_id,)).fetchone()
                if status is None:
                    raise StoreError(f"unknown batch {batch_id!r}")
                if status[0] != "committed":
                    raise StoreError(f"batch {batch_id!r} is already {status[0]}")
                later = self._db.execute(
                    "SELECT DISTINCT retired_by FROM records WHERE batch_id=? AND retired_by IS NOT NULL",
                    (batch_id,)).fetchall()
                # A batch that retired a document without writing any of it (the document was emptied) holds
                # no rows a later batch could retire: a later version of that document shows as live rows.
                later += self._db.execute(
                    "SELECT DISTINCT batch_id FROM records WHERE retired_by IS NULL AND batch_id != ? AND doc_id IN "
                    "(SELECT doc_id FROM records WHERE retired_by = ?)", (batch_id, batch_id)).fetchall()
                if later:
                    names = ", ".join(sorted({str(r[0]) for r in later}))
                    raise StoreError(f"batch {batch_id!r} cannot be rolled back alone: later batch(es) {names} "
                                     "replaced its documents; roll those back first")
                for (rowid,) in self._db.execute("SELECT rowid FROM records WHERE batch_id=?", (batch_id,)):
                    self._db.execute("DELETE FROM records_fts WHERE rowid=?", (rowid,))
                self._db.execute("DELETE FROM records WHERE batch_id=?", (batch_id,))
                restored = self._db.execute(
                    "SELECT rowid, title, text FROM records WHERE retired_by=?", (batch_id,)).fetchall()
                for row in restored:
                    self._db.execute("INSERT INTO records_fts (rowid, title, text) VALUES (?,?,?)",
                                     (row["rowid"], row["title"], row["text"]))
                self._db.execute("UPDATE records SET retired_by=NULL WHERE retired_by=?", (batch_id,))
                self._db.execute("DELETE FROM dead_letter_events WHERE batch_id=?", (batch_id,))
                self._db.execute("UPDATE batches SET status='rolled-back' WHERE batch_id=?", (batch_id,))
                if self._db.execute("SELECT 1 FROM records LIMIT 1").fetchone() is None:  # no vector is left
                    self._db.execute("DELETE FROM meta WHERE key='embedding_model'")
                self._bump_generation()
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return self._batch(batch_id)

    # ---- reads --------------------------------------------------------------------------------------
    def document_hashes(self) -> dict[str, str]:
        with self._lock:
            rows = self._db.execute(
                "SELECT DISTINCT doc_id, doc_hash FROM records WHERE retired_by IS NULL").fetchall()
        return {r[0]: r[1] for r in rows}

    def get(self, record_ids: Sequence[str]) -> list[Chunk]:
        """The live records among `record_ids`, in that order. A record read once is kept for its snapshot: a
        search asks for many of the same records several times (its pool, rescues, look-ups), and a server's
        requests for the same pages; a row read and decoded again cost more than a search's SQL."""
        ids = list(dict.fromkeys(record_ids))
        with self._lock:
            self._db.execute("BEGIN")  # the generation and the rows: one snapshot
            try:
                self._chunk_cache.at(self._generation())
                found = self._chunk_cache.found(ids)
                missing = [i for i in ids if i not in found]
                for i in range(0, len(missing), 500):
                    part = missing[i:i + 500]
                    rows = self._db.execute(
                        f"SELECT {CHUNK_COLUMNS} FROM records INDEXED BY records_live_id "
                        f"WHERE retired_by IS NULL AND record_id IN "
                        f"({','.join('?' * len(part))})", part).fetchall()
                    for r in rows:
                        found[r["record_id"]] = chunk = row_to_chunk(r)
                        self._chunk_cache.keep(r["record_id"], chunk)
            finally:
                self._db.execute("COMMIT")
        return [found[i] for i in ids if i in found]

    def all_chunks(self) -> list[Chunk]:
        """Every live record, in storage order. When they all fit in the record cache they are kept there too
        (`get` then reads none of them again at this snapshot): a server's warm-up reads them all, and the first
        searches after it no longer decode the rows their rescues meet (k8s, lone cold `full` runs alternated:
        rescue stage 12.0 -> 10.2 ms, search 46.4 -> 42.6 ms at the median of nine pairs; noisy)."""
        with self._lock:
            self._db.execute("BEGIN")
            try:
                generation = self._generation()
                rows = self._db.execute(
                    f"SELECT {CHUNK_COLUMNS} FROM records WHERE retired_by IS NULL ORDER BY rowid").fetchall()
            finally:
                self._db.execute("COMMIT")
            chunks = [row_to_chunk(r) for r in rows]
            if len(chunks) <= _CHUNK_CACHE_ROWS:
                self._chunk_cache.at(generation)
                self._chunk_cache.clear()
                for c in chunks:
                    self._chunk_cache.keep(c.record_id, c)
        return chunks

    def search_dense(self, vector: npt.NDArray[np.float32], limit: int,
                     filters: SearchFilters | None = None) -> list[ScoredId]:
        return self._dense_index().search(vector, limit, filters)

    def _dense_snapshot(self) -> tuple[DenseIndex, int]:
        with self._lock:
            return self._dense_index(), self._dense_generation

    def _fts_generation_locked(self) -> int:
        """The generation the full-text connection sees (the caller holds `_fts_lock`)."""
        return int(self._fts.execute("SELECT value FROM meta WHERE key='generation'").fetchone()[0])

    def _dense_index(self) -> DenseIndex:
        with self._lock:
            generation = self._generation()
            if self._dense is None or generation != self._dense_generation:
                rows = self._db.execute(
                    "SELECT rowid, record_id, doc_id, source, evidence_family, access_labels, published_at, "
                    "expires_at, vector FROM records WHERE retired_by IS NULL ORDER BY rowid").fetchall()
                self._dense = DenseIndex.from_rows(rows)
                self._dense_generation = generation
            return self._dense

    def search_sparse(self, query: str, limit: int, filters: SearchFilters | None = None, *,
                      title_only: bool = False, scope: tuple[str, ...] | None = None) -> list[ScoredId]:
        """FTS5's bm25() ranking (ties by row), summed word by word over each word's matches.

        FTS5's bm25() of an OR of words is, per row, the sum in query order of each word's own bm25() (the
        word's idf times its term-frequency part; a word a row lacks adds exactly zero). Each word's matches
        and scores are read once per snapshot and kept (a question's words recur in its aspects' rescues,
        name look-ups and the next questions), so a search is a few vector additions and the filters are the
        masks dense search applies: the same scores, to the last bit, as FTS5 ranking the OR query itself,
        without a full-text query per search.

        With readers (the filters' access labels, or `scope` for a search wider than its readers), each word's
        rarity and the row count are taken over the records they may read, not over every record: a
        restricted record holding a word must not change a readable record's score or rank, or a question
        could test restricted text for that word. The word's term-frequency part is recovered by dividing out
        FTS5's idf and multiplied by the idf among readable rows. Only the average row length is still taken
        over every row: it says nothing of which words restricted text holds."""
        words = [f'"{t}"' for t in dict.fromkeys(tokens(query))]
        if not words or limit <= 0:
            return []
        if title_only:
            words = ["{title} : (" + w + ")" for w in words]
        index, per_word = self._snapshot_matches(words)
        readers = scope if scope is not None else filters.access_labels if filters is not None else None
        readable = index.mask(SearchFilters(access_labels=readers)) if readers is not None else None
        if readable is not None and bool(readable.all()):
            readable = None  # every record readable: FTS5's own statistics are the readers'
        n_all = len(index)
        n_readable = n_all if readable is None else int(readable.sum())
        scores = np.zeros(n_all)
        for at, raw in per_word:
            if readable is None:
                scores[at] += raw
            elif len(at):
                scores[at] += raw * (fts5_idf(n_readable, int(readable[at].sum())) / fts5_idf(n_all, len(at)))
        matched = scores > 0  # a word's bm25() is positive in every row holding it (FTS5's idf is at least 1e-6)
        passing = index.mask(filters)
        keep = np.flatnonzero(matched if passing is None else matched & passing)
        if readable is None:
            best = top(keep, scores, limit)
        else:
            # Dividing out FTS5's idf leaves rounding noise that depends on every record's words: ten
            # significant digits keep it out of the scores and out of the order of ties.
            scores[keep] = significant(scores[keep], 10)
            # A search wider than the readers (a declared family's rescue) takes up to `limit` of each
            # audience: cut together, restricted hits would push readable ones out of the result.
            best = np.concatenate([top(keep[readable[keep]], scores, limit),
                                   top(keep[~readable[keep]], scores, limit)])
            best = best[np.lexsort((best, -scores[best]))]
        return [ScoredId(index.ids[i], float(scores[i])) for i in best]

    def word_counts(self, text: str, readers: tuple[str, ...] | None = None) -> tuple[int, dict[str, int]]:
        words = list(dict.fromkeys(tokens(text)))
        index, per_word = self._snapshot_matches([f'"{w}"' for w in words])
        readable = index.mask(SearchFilters(access_labels=readers)) if readers is not None else None
        total = len(index) if readable is None else int(readable.sum())
        return total, {w: len(at) if readable is None else int(readable[at].sum())
                       for w, (at, _) in zip(words, per_word, strict=True)}

    def inlink_contexts(self, sources: Sequence[str], filters: SearchFilters | None = None) -> dict[str, list[str]]:
        """Read from a link index of the snapshot's live records, built on first use after each commit or
        rollback from the records whose text holds a link (k8s: 1,728 of 3,563 chunks, 0.2 s)."""
        for _ in range(3):  # a commit between the link index and the filter's snapshot: read both again
            index, generation = self._dense_snapshot()
            links = self._link_index(generation)
            if links is not None:
                readable, _ = index.passes(filters)
                return links.contexts(sources, readable)
        raise StoreError("the index kept changing during a search; try again")

    def _link_index(self, generation: int) -> LinkIndex | None:
        """The link index at `generation` (None when the index has moved past it)."""
        with self._lock:
            if self._links is None or self._links[0] != generation:
                if self._generation() != generation:
                    return None
                rows = self._db.execute(
                    "SELECT record_id, source, text FROM records WHERE retired_by IS NULL AND "
                    "(instr(text, '](') > 0 OR instr(lower(text), 'href') > 0) ORDER BY rowid").fetchall()
                self._links = (generation, LinkIndex((r["record_id"], r["source"], r["text"]) for r in rows))
            return self._links[1]

    def read_ahead(self, words: Sequence[str]) -> None:
        """Each word's matches and scores, read into the per-snapshot cache a search reads them from."""
        self._snapshot_matches([f'"{t}"' for t in dict.fromkeys(t for w in words for t in tokens(w))])

    def _snapshot_matches(self, words: Sequence[str]) -> tuple[DenseIndex, list[WordMatches]]:
        """The dense snapshot and each one-word MATCH expression's matches, read at the same generation."""
        for _ in range(3):  # a commit between the snapshot and the full-text reads: read both again
            index, generation = self._dense_snapshot()
            per_word = self._word_matches(words, index, generation)
            if per_word is not None:
                return index, per_word
        raise StoreError("the index kept changing during a search; try again")

    def _word_matches(self, words: Sequence[str], index: DenseIndex, generation: int) -> list[WordMatches] | None:
        """Every row matching each one-word MATCH expression, as its position in `index` (the snapshot's rows),
        with FTS5's bm25() for it (negated: higher is better), read in one transaction at `generation`; None when
        the index is at another generation. Kept per generation (a question's words recur in its aspects'
        searches, and across questions), up to _WORD_CACHE_ROWS rows."""
        with self._fts_lock:
            self._word_cache.at(generation)
            found = self._word_cache.found(words)
            missing = [w for w in words if w not in found]
            if missing:
                self._fts.execute("BEGIN")
                try:
                    if self._fts_generation_locked() != generation:
                        return None
                    for w in missing:
                        # The scores as SQLite's doubles: its printf keeps 16 significant digits, and a word's
                        # scores are summed to FTS5's own to the last bit.
                        rows = self._fts.execute(f"SELECT rowid, {BM25} FROM records_fts WHERE records_fts MATCH ?",
                                                 (self.title_weight, w)).fetchall()
                        found[w] = (np.searchsorted(index.rowids, np.array([r[0] for r in rows], dtype=np.int64)),
                                    -np.array([r[1] for r in rows], dtype=np.float64))
                finally:
                    self._fts.execute("COMMIT")
                for w in missing:
                    self._word_cache.keep(w, found[w])
            return [found[w] for w in words]

    def batches(self) -> list[BatchInfo]:
        with self._lock:
            ids = [r[0] for r in self._db.execute("SELECT batch_id FROM batches ORDER BY seq")]
        return [self._batch(b) for b in ids]

    def _batch(self, batch_id: str) -> BatchInfo:
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

    def snapshot_id(self) -> str:
        with self._lock:
            generation = self._generation()
            last = self._db.execute(
                "SELECT batch_id FROM batches WHERE status='committed' ORDER BY seq DESC LIMIT 1").fetchone()
        return f"g{generation}-{last[0] if last else 'empty'}"

    def chunk_count(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM records WHERE retired_by IS NULL").fetchone()[0])

    def stats(self) -> dict[str, Any]:
        with self._lock:
            one = self._db.execute
            return {
                "backend": "sqlite",
                "path": str(self.path),
                "snapshot_id": self.snapshot_id(),
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

    def check_integrity(self) -> list[str]:
        """Problems found (empty when consistent): SQLite's own check plus FTS and live-record invariants."""
        problems = []
        with self._lock:
            result = self._db.execute("PRAGMA integrity_check").fetchone()[0]
            if result != "ok":
                problems.append(f"sqlite integrity_check: {result}")
            live = self._db.execute("SELECT COUNT(*) FROM records WHERE retired_by IS NULL").fetchone()[0]
            fts = self._db.execute("SELECT COUNT(*) FROM records_fts").fetchone()[0]
            if live != fts:
                problems.append(f"{live} live records but {fts} full-text rows")
            orphan = self._db.execute(
                "SELECT COUNT(*) FROM records r LEFT JOIN batches b ON b.batch_id = r.batch_id "
                "WHERE b.batch_id IS NULL OR b.status != 'committed'").fetchone()[0]
            if orphan:
                problems.append(f"{orphan} records belong to no committed batch")
        return problems

    def close(self) -> None:
        with self._lock, self._fts_lock:
            self._fts.close()
            self._db.close()
