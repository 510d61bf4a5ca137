"""One snapshot's dense index read from the SQLite store (`evidex.stores.sqlite`): the live rows streamed in pages,
so a million rows never sit in memory as SQLite rows at once.

A small index keeps its vectors in memory. From `AnnSettings.min_chunks` live rows on (with faiss installed) the
vectors go to a file beside the SQLite file, named by the snapshot and memory-mapped (only the rows a search
re-scores are read), and an approximate index (`evidex.stores.ann`) serves the search; both files are reused by
the next process that opens the same snapshot.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from evidex.stores import ann
from evidex.stores.ann import AnnIndex, AnnSettings
from evidex.stores.dense import DenseIndex

_PAGE = 20_000
_NEVER = np.iinfo(np.int64).max
_ALWAYS = np.iinfo(np.int64).min
_FIELDS = "rowid, record_id, doc_id, source, evidence_family, access_labels, published_at, expires_at"


def load_dense(db: sqlite3.Connection, folder: Path, generation: int, settings: AnnSettings) -> DenseIndex:
    """The live rows of `db` (the caller holds one read transaction) as a `DenseIndex`, with an approximate
    index attached when `settings` apply to their number and faiss is installed."""
    rows, size = db.execute("SELECT COUNT(*), MAX(length(vector)) FROM records WHERE retired_by IS NULL").fetchone()
    dim = (size or 0) // 4
    approximate = settings.applies(rows) and dim > 0 and ann.available()
    key = f"g{generation}-n{rows}"
    vectors_path = folder / ann.ANN_DIR / f"vectors-{key}.f32"
    have_vectors = approximate and vectors_path.exists() and vectors_path.stat().st_size == rows * dim * 4
    fields = _Fields(rows)
    if approximate and not have_vectors:
        vectors_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with open(vectors_path, "wb") as out:
            for page in _pages(db, with_vectors=True):
                fields.add(page)
                out.write(b"".join(r[8] for r in page))
        vectors_path.chmod(0o600)
        for old in vectors_path.parent.glob("vectors-*.f32"):
            if old != vectors_path:
                old.unlink(missing_ok=True)
    elif approximate:
        for page in _pages(db, with_vectors=False):
            fields.add(page)
    else:
        matrix = np.empty((rows, dim), dtype=np.float32)
        for page in _pages(db, with_vectors=True):
            start = fields.count
            fields.add(page)
            if dim:
                matrix[start:fields.count] = np.frombuffer(b"".join(r[8] for r in page),
                                                           dtype=np.float32).reshape(-1, dim)
        return fields.index(matrix if rows else np.zeros((0, 0), dtype=np.float32))
    building: npt.NDArray[np.float32] = np.memmap(vectors_path, dtype=np.float32, mode="r", shape=(rows, dim))
    approximate_index = AnnIndex.open(vectors_path.parent, key, building, settings)
    del building  # unmapped: the pages the build read leave this process
    index = fields.index(np.memmap(vectors_path, dtype=np.float32, mode="r", shape=(rows, dim)))
    index.ann = approximate_index
    return index


def _pages(db: sqlite3.Connection, *, with_vectors: bool) -> Iterator[list[Any]]:
    cursor = db.execute(f"SELECT {_FIELDS}{', vector' if with_vectors else ''} FROM records "
                        "WHERE retired_by IS NULL ORDER BY rowid")
    while page := cursor.fetchmany(_PAGE):
        yield page


class _Fields:
    """The per-row fields filters test, gathered page by page; repeated values (a document's id, source, labels
    and dates, on each of its chunks) are decoded once and shared."""

    def __init__(self, rows: int) -> None:
        self.count = 0
        self.rowids = np.empty(rows, dtype=np.int64)
        self.published = np.empty(rows, dtype=np.int64)
        self.expires = np.empty(rows, dtype=np.int64)
        self.ids: list[str] = []
        self.doc_ids: list[str] = []
        self.sources: list[str] = []
        self.families: list[str | None] = []
        self.labels: list[list[str]] = []
        self._seen: dict[Any, Any] = {}

    def _once(self, value: Any, decode: Callable[[Any], Any]) -> Any:
        key = (decode, value)
        found = self._seen.get(key)
        if found is None:
            found = self._seen[key] = decode(value)
        return found

    def add(self, page: list[Any]) -> None:
        for r in page:
            i = self.count
            self.rowids[i] = r[0]
            self.ids.append(r[1])
            self.doc_ids.append(self._once(r[2], str))
            self.sources.append(self._once(r[3], str))
            self.families.append(r[4] if r[4] is None else self._once(r[4], str))
            self.labels.append(self._once(r[5], json.loads))
            self.published[i] = _ALWAYS if r[6] is None else self._once(r[6], _epoch)
            self.expires[i] = _NEVER if r[7] is None else self._once(r[7], _epoch)
            self.count += 1

    def index(self, matrix: npt.NDArray[np.float32]) -> DenseIndex:
        return DenseIndex(self.ids, matrix, doc_ids=self.doc_ids, sources=self.sources, families=self.families,
                          labels=self.labels, published=self.published[:self.count],
                          expires=self.expires[:self.count], rowids=self.rowids[:self.count])


def _epoch(value: str) -> int:
    return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp())
