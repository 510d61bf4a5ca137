"""The embedded default store: one SQLite file (WAL) is the single source of truth.

Records, provenance, vectors, batches and dead letters live in tables; FTS5 holds BM25 postings of the
live records. The live vectors are loaded once per snapshot (`evidex.stores.sqlite_dense`) and filters become
boolean masks; dense search is exact below `[index] ann_min_chunks` and approximate above it (`evidex.stores.ann`,
candidates scored exactly). Records read by id are kept decoded for their snapshot too. Every batch and
every rollback is one transaction (`evidex.stores.sqlite_write`), which bumps the index's generation: the
generation names a snapshot and keeps the per-snapshot caches (the dense matrix, each word's matches, decoded
records) valid.

The tables, their numbered migrations and a row as a chunk or a batch are in `evidex.stores.sqlite_schema`;
FTS5's bm25(), summed word by word for sparse search, in `evidex.stores.sqlite_bm25`; the batches, dead letters
and counts (`Ledger`) in `evidex.stores.sqlite_ledger`. Besides `Store` it offers the `WordCounts` and
`ReadAhead` capabilities, both from the full-text postings its sparse search reads.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from evidex.errors import StoreError
from evidex.lexical import tokens
from evidex.private_files import private_file
from evidex.stores.ann import AnnSettings
from evidex.stores.dense import DenseIndex
from evidex.stores.protocol import BatchWrite
from evidex.stores.snapshot_cache import SnapshotCache
from evidex.stores.sqlite_bm25 import BM25, WordMatches, fts5_idf, match_words, significant, top
from evidex.stores.sqlite_dense import load_dense
from evidex.stores.sqlite_ledger import SqliteLedger
from evidex.stores.sqlite_schema import (
    CHUNK_COLUMNS,
    MIGRATIONS,
    now,
    row_to_chunk,
    statements,
)
from evidex.stores.sqlite_write import undo_batch, write_batch
from evidex.types import BatchInfo, Chunk, ScoredId, SearchFilters

INDEX_FILE = "index.sqlite"

_WORD_CACHE_ROWS = 2_000_000  # about 32 MB of (rowid, score) pairs
_CHUNK_CACHE_ROWS = 10_000  # decoded chunks kept per snapshot: a few tens of MB of text at most


def _regexp(pattern: str, value: str | None) -> bool:
    return value is not None and re.search(pattern, value) is not None


class SqliteStore:
    """`Store` on one SQLite file. Safe to share between threads (one connection behind a lock)."""

    def __init__(self, directory: Path, *, title_weight: float = 1.0, ann: AnnSettings | None = None) -> None:
        if directory.exists() and not directory.is_dir():
            raise StoreError(f"{directory} is a file, not an index folder: point --index / the config at a folder")
        private_file(directory / INDEX_FILE)  # 0600 in a 0700 folder (evidex.private_files)
        self.path = directory / INDEX_FILE
        self.title_weight = title_weight
        self.ann = ann or AnnSettings()  # from which size dense search is approximate (`evidex.stores.ann`)
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
        self._chunk_cache: SnapshotCache[str, Chunk] = SnapshotCache(_CHUNK_CACHE_ROWS)  # live record id (see get)
        self.ledger = SqliteLedger(self._db, self._lock, self.path, self.snapshot_id)

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
                write_batch(self._db, batch, started)
                self._bump_generation()
                self._db.execute("COMMIT")
            except sqlite3.IntegrityError as exc:
                self._db.execute("ROLLBACK")
                raise StoreError(f"batch {batch.batch_id} conflicts with the index: {exc}") from None
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return self.ledger.batch(batch.batch_id)

    def rollback(self, batch_id: str | None = None) -> BatchInfo:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                batch_id = undo_batch(self._db, batch_id)
                self._bump_generation()
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return self.ledger.batch(batch_id)

    # ---- reads --------------------------------------------------------------------------------------
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

    def live_titles(self) -> list[str]:
        """Every live record's title, in storage order (`LiveScan`: no record decoded)."""
        with self._lock:
            return [r[0] for r in self._db.execute("SELECT title FROM records WHERE retired_by IS NULL ORDER BY rowid")]

    def live_chunks_with(self, needles: Sequence[str]) -> list[Chunk]:
        """The live records whose text holds one of `needles`, in storage order (`LiveScan`): LIKE matches ASCII
        letters in either case, and a needle's `%`, `_` and `\\` are escaped."""
        if not needles:
            return []
        like = " OR ".join("text LIKE ? ESCAPE '\\'" for _ in needles)
        patterns = ["%" + re.sub(r"([%_\\])", r"\\\1", n) + "%" for n in needles]
        with self._lock:
            rows = self._db.execute(f"SELECT {CHUNK_COLUMNS} FROM records WHERE retired_by IS NULL AND ({like}) "
                                    "ORDER BY rowid", patterns).fetchall()
        return [row_to_chunk(r) for r in rows]

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
                self._dense = None  # the old snapshot's matrix is not kept while the new one loads
                self._db.execute("BEGIN")  # the count, the rows and the generation: one snapshot
                try:
                    generation = self._generation()
                    self._dense = load_dense(self._db, self.path.parent, generation, self.ann)
                finally:
                    self._db.execute("COMMIT")
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
        words = match_words(query)
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
        index, per_word = self._snapshot_matches(match_words(text))
        readable = index.mask(SearchFilters(access_labels=readers)) if readers is not None else None
        total = len(index) if readable is None else int(readable.sum())
        return total, {w: len(at) if readable is None else int(readable[at].sum())
                       for w, (at, _) in zip(words, per_word, strict=True)}

    def read_ahead(self, words: Sequence[str]) -> None:
        """Each word's matches and scores, read into the per-snapshot cache a search reads them from."""
        self._snapshot_matches(list(dict.fromkeys(m for w in words for m in match_words(w))))

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

    def snapshot_id(self) -> str:
        with self._lock:
            generation = self._generation()
            last = self._db.execute(
                "SELECT batch_id FROM batches WHERE status='committed' ORDER BY seq DESC LIMIT 1").fetchone()
        return f"g{generation}-{last[0] if last else 'empty'}"

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
