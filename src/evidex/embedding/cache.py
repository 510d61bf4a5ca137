"""Embeddings cached by (model fingerprint, content hash) in one SQLite file shared by every index.

Re-ingesting, rebuilding an evaluation index or retrying a dead letter never recomputes a vector that
was computed before. Vectors are written after every model batch, so a run killed half-way keeps what it
had already paid for.
"""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Collection, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from evidex.embedding.protocol import Embedder, Vectors

CACHE_FILE = "embeddings.sqlite"


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


_VECTORS_COLUMNS = "(model TEXT NOT NULL, hash TEXT NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (model, hash))"


def _without_rowid(db: sqlite3.Connection) -> bool:
    (ddl,) = db.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'vectors'").fetchone()
    return "WITHOUT ROWID" in str(ddl).upper()


class EmbeddingCache:
    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._path = directory / CACHE_FILE
        self._db = sqlite3.connect(self._path, check_same_thread=False, timeout=60)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(f"CREATE TABLE IF NOT EXISTS vectors {_VECTORS_COLUMNS}")
        self._db.commit()
        if _without_rowid(self._db):
            with contextlib.suppress(sqlite3.OperationalError):  # read-only, or busy past the timeout: next time
                self._move_rows_inline()

    def _move_rows_inline(self) -> None:
        """Rewrite a cache made by an earlier evidex, whose table kept its rows in the primary key's tree
        (WITHOUT ROWID): a 1.5 KB vector is far larger than such a tree keeps in a page, so every row spilled to
        an overflow page of its own (4.6 KB a vector; 2.2 KB in a table with row ids). Once, in one transaction;
        another process that opens the cache meanwhile waits, then finds it rewritten."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            rewrite = _without_rowid(self._db)  # not if another process has just done it
            if rewrite:
                self._db.execute(f"CREATE TABLE vectors_inline {_VECTORS_COLUMNS}")
                self._db.execute("INSERT INTO vectors_inline SELECT model, hash, vector FROM vectors")
                self._db.execute("DROP TABLE vectors")
                self._db.execute("ALTER TABLE vectors_inline RENAME TO vectors")
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        if rewrite:
            self._give_space_back()

    def _give_space_back(self) -> None:
        """Shrink the file to the rows it holds. VACUUM waits (timeout) for another process's transaction, and
        in WAL mode writes the whole database to the log first, so the log is emptied after it."""
        self._db.execute("VACUUM")
        self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def lookup(self, model: str, hashes: Sequence[str]) -> dict[str, Vectors]:
        found: dict[str, Vectors] = {}
        unique = list(dict.fromkeys(hashes))
        with self._lock:
            for i in range(0, len(unique), 500):
                part = unique[i:i + 500]
                rows = self._db.execute(
                    f"SELECT hash, vector FROM vectors WHERE model=? AND hash IN ({','.join('?' * len(part))})",
                    (model, *part)).fetchall()
                found.update((h, np.frombuffer(v, dtype=np.float32)) for h, v in rows)
        return found

    def store(self, model: str, items: Sequence[tuple[str, Vectors]]) -> None:
        with self._lock:
            self._db.executemany("INSERT OR REPLACE INTO vectors VALUES (?,?,?)",
                                 [(model, h, np.asarray(v, dtype=np.float32).tobytes()) for h, v in items])
            self._db.commit()

    @property
    def path(self) -> Path:
        return self._path

    def models(self) -> dict[str, int]:
        """How many vectors each model (by fingerprint) has here."""
        with self._lock:
            return dict(self._db.execute("SELECT model, count(*) FROM vectors GROUP BY model ORDER BY model"))

    def drop_models(self, keep: Collection[str]) -> int:
        """Delete the vectors of every model not in `keep`, then give their space back to the file system;
        returns how many were deleted. An index keeps its own vectors: a dropped one is only computed again
        if a document with that text is ingested with that model."""
        keep = sorted(set(keep))
        with self._lock:
            deleted = self._db.execute(f"DELETE FROM vectors WHERE model NOT IN ({','.join('?' * len(keep))})",
                                       keep).rowcount
            self._db.commit()
            if deleted:
                self._give_space_back()
        return deleted

    def close(self) -> None:
        with self._lock:
            self._db.close()


def embed_cached(embedder: Embedder, texts: Sequence[str], cache: EmbeddingCache | None, *,
                 batch_size: int = 64, on_progress: Callable[[int], None] | None = None) -> tuple[Vectors, int]:
    """Vectors for `texts` (cache first); returns (matrix, how many were computed now)."""
    hashes = [content_hash(t) for t in texts]
    model = embedder.fingerprint
    known = cache.lookup(model, hashes) if cache is not None else {}
    missing = list(dict.fromkeys(h for h in hashes if h not in known))
    counts = Counter(hashes)
    if on_progress is not None and missing != hashes:
        on_progress(len(texts) - sum(counts[h] for h in missing))
    text_of = dict(zip(hashes, texts, strict=True))
    for i in range(0, len(missing), batch_size):
        part = missing[i:i + batch_size]
        vectors = embedder.embed_documents([text_of[h] for h in part])
        if cache is not None:
            cache.store(model, list(zip(part, vectors, strict=True)))
        known.update(zip(part, vectors, strict=True))
        if on_progress is not None:
            on_progress(sum(counts[h] for h in part))
    if not texts:
        return np.zeros((0, embedder.dim), dtype=np.float32), 0
    return np.vstack([known[h] for h in hashes]).astype(np.float32, copy=False), len(missing)


class QueryVectors:
    """The last `size` query texts' vectors, in memory (0: none kept). An agent asks again about what it
    asked: the `re-query` recommendation repeats the question with an aspect focus, and the question's vector
    (18-20 ms of a k8s search on 2 cores) is the same. Vectors are returned read-only: one is shared by every
    request that asks the same text."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._vectors: OrderedDict[str, npt.NDArray[np.float32]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, text: str, embed: Callable[[str], npt.NDArray[np.float32]]) -> npt.NDArray[np.float32]:
        with self._lock:
            vector = self._vectors.get(text)
            if vector is not None:
                self._vectors.move_to_end(text)
                return vector
        vector = embed(text)
        if self._size > 0:
            vector.flags.writeable = False
            with self._lock:
                self._vectors[text] = vector
                while len(self._vectors) > self._size:
                    self._vectors.popitem(last=False)
        return vector
