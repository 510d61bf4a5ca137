"""Dense search over one snapshot's vectors, with filters applied as boolean masks.

Below `[index] ann_min_chunks` the search is exact: one matrix-vector product (100k x 384 is 150 MB and a few
milliseconds on two cores). Above it an approximate index (`evidex.stores.ann`) proposes candidates, which are
scored exactly here; a filter passing few rows is still searched exactly over those rows. See `evidex bench`.
"""

from __future__ import annotations

import mmap
import re
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt

from evidex.errors import StoreError
from evidex.stores.ann import AnnIndex
from evidex.types import Chunk, ScoredId, SearchFilters

_RELEASE_EVERY = 32  # re-scorings between two releases of the mapped pages: ~32 x 400 rows stay resident
_NEVER = np.iinfo(np.int64).max
_ALWAYS = np.iinfo(np.int64).min


class DenseIndex:
    """Live vectors of one snapshot plus the per-row fields filters need."""

    def __init__(self, ids: Sequence[str], matrix: npt.NDArray[np.float32], *, doc_ids: Sequence[str],
                 sources: Sequence[str], families: Sequence[str | None], labels: Sequence[Sequence[str]],
                 published: npt.NDArray[np.int64], expires: npt.NDArray[np.int64],
                 rowids: npt.NDArray[np.int64] | None = None) -> None:
        self.ids = list(ids)
        self.matrix = matrix
        # The store's row numbers, ascending (a full-text hit names its row by them); 0..n-1 when not given.
        self.rowids = np.arange(len(self.ids), dtype=np.int64) if rowids is None else rowids
        self._doc_ids = np.asarray(doc_ids, dtype=object)
        self._families = np.asarray([f or "" for f in families], dtype=object)
        self._published = published
        self._expires = expires
        self._source_values, self._source_index = np.unique(np.asarray(sources, dtype=object),
                                                            return_inverse=True)
        label_rows: dict[str, list[int]] = {}
        for row, row_labels in enumerate(labels):
            for label in row_labels:
                label_rows.setdefault(label, []).append(row)
        self._label_rows = {label: np.asarray(rows, dtype=np.int64) for label, rows in label_rows.items()}
        self._label_masks: dict[tuple[str, ...], npt.NDArray[np.bool_]] = {}
        self._pattern_masks: dict[str, npt.NDArray[np.bool_]] = {}
        self._rows: dict[str, int] | None = None  # record id -> row, built on first use
        self.ann: AnnIndex | None = None  # approximate candidates (large indexes; `evidex.stores.ann`)
        self._reads = 0  # exact re-scorings of a memory-mapped matrix (see _release_pages)

    @classmethod
    def of_chunks(cls, chunks: Sequence[Chunk]) -> DenseIndex:
        """The fields `SearchFilters` test of `chunks`, without vectors: its `passes` is the test every store's
        search applies (times are whole seconds, as stores keep them)."""
        def epoch(value: datetime | None, default: int) -> int:
            return default if value is None else int(value.timestamp())

        return cls([c.record_id for c in chunks], np.zeros((len(chunks), 0), dtype=np.float32),
                   doc_ids=[c.doc_id for c in chunks], sources=[c.source for c in chunks],
                   families=[c.provenance.evidence_family for c in chunks],
                   labels=[c.provenance.access_labels for c in chunks],
                   published=np.array([epoch(c.provenance.published_at, _ALWAYS) for c in chunks], dtype=np.int64),
                   expires=np.array([epoch(c.provenance.expires_at, _NEVER) for c in chunks], dtype=np.int64))

    def __len__(self) -> int:
        return len(self.ids)

    def mask(self, filters: SearchFilters | None) -> npt.NDArray[np.bool_] | None:
        """Rows that pass `filters`; None when nothing is filtered."""
        if filters is None or filters.is_empty():
            return None
        keep = np.ones(len(self.ids), dtype=bool)
        if filters.access_labels is not None:
            keep &= self._labels_mask(filters.access_labels)
        if filters.valid_at is not None:
            t = int(filters.valid_at.timestamp())
            keep &= (self._published <= t) & (self._expires > t)
        if filters.families is not None:
            keep &= np.isin(self._families, list(filters.families))
        if filters.doc_ids is not None:
            keep &= np.isin(self._doc_ids, list(filters.doc_ids))
        if filters.source_pattern is not None:
            keep &= self._pattern_mask(filters.source_pattern)
        return keep

    def passes(self, filters: SearchFilters | None) -> tuple[Callable[[str], bool], float]:
        """A test by record id of whether a live record passes `filters` (the test `mask` applies), and the
        share of live records that do."""
        keep = self.mask(filters)
        if keep is None:
            return (lambda record_id: True), 1.0
        if self._rows is None:
            self._rows = {record_id: row for row, record_id in enumerate(self.ids)}
        rows, mask = self._rows, keep
        share = float(mask.mean()) if len(mask) else 0.0
        return (lambda record_id: (row := rows.get(record_id)) is not None and bool(mask[row])), share

    def _labels_mask(self, labels: tuple[str, ...]) -> npt.NDArray[np.bool_]:
        """Rows carrying any of `labels` (kept per label set: a principal's labels recur in every search)."""
        key = tuple(sorted(set(labels)))
        cached = self._label_masks.get(key)
        if cached is None:
            cached = np.zeros(len(self.ids), dtype=bool)
            for label in key:
                cached[self._label_rows.get(label, np.zeros(0, dtype=np.int64))] = True
            if len(self._label_masks) < 256:
                self._label_masks[key] = cached
        return cached

    def _pattern_mask(self, pattern: str) -> npt.NDArray[np.bool_]:
        cached = self._pattern_masks.get(pattern)
        if cached is None:
            regex = re.compile(pattern)
            per_source = np.array([regex.search(s) is not None for s in self._source_values], dtype=bool)
            cached = per_source[self._source_index] if len(self.ids) else np.zeros(0, dtype=bool)
            if len(self._pattern_masks) < 256:
                self._pattern_masks[pattern] = cached
        return cached

    def search(self, vector: npt.NDArray[np.float32], limit: int,
               filters: SearchFilters | None = None) -> list[ScoredId]:
        if not self.ids or limit <= 0:
            return []
        query = np.asarray(vector, dtype=np.float32)
        if query.shape != (self.matrix.shape[1],):
            raise StoreError(f"the query vector has shape {query.shape} but the index holds "
                             f"{self.matrix.shape[1]}-dimensional vectors: the index was embedded with another model")
        keep = self.mask(filters)
        if self.ann is not None and limit < len(self.ids):
            rows = self._approximate_rows(query, limit, keep)
            if rows is not None:
                return self._ranked(rows, self._scores(rows, query), limit)
        # numpy's own loop, not BLAS: under load the multi-threaded BLAS product waited for a free core (8 ms
        # instead of 0.5 at 3,563 rows, measured in the engine); idle it is a little faster (0.24 vs 0.47 ms)
        # and at 100k rows both take about 7 ms.
        scores = np.einsum("ij,j->i", self.matrix, query)
        if keep is not None:
            scores = np.where(keep, scores, -np.inf)
        return self._ranked(np.arange(len(scores)), scores, limit)

    def _approximate_rows(self, query: npt.NDArray[np.float32], limit: int,
                          keep: npt.NDArray[np.bool_] | None) -> npt.NDArray[np.int64] | None:
        """The rows whose exact scores decide the result: the approximate index's candidates, or every row a
        narrow filter lets through (too few of them lie in the lists a scan reads); None when the candidates
        cannot fill `limit` (exact search then)."""
        assert self.ann is not None
        if keep is not None:
            passing = np.flatnonzero(keep)
            if len(passing) < self.ann.settings.exact_below_share * len(keep):
                return passing
        rows = self.ann.candidates(query, limit, keep)
        return rows if len(rows) >= limit else None

    def _scores(self, rows: npt.NDArray[np.int64], query: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """Exact cosines of `rows` (read in row order: a memory-mapped matrix is then read forward)."""
        order = np.argsort(rows, kind="stable")
        scores = np.empty(len(rows), dtype=np.float32)
        scores[order] = np.einsum("ij,j->i", np.asarray(self.matrix[rows[order]], dtype=np.float32), query)
        self._reads += 1
        if self._reads % _RELEASE_EVERY == 0:
            self._release_pages()
        return scores

    def _release_pages(self) -> None:
        """Drop the memory-mapped vectors' pages from this process's resident set (they stay in the page cache, and
        a later read maps them again in microseconds): re-scoring reads rows all over the file, and the pages of a
        long-running server would otherwise add up to the whole file in its RSS."""
        mapping = getattr(self.matrix, "_mmap", None)
        if mapping is not None and hasattr(mmap, "MADV_DONTNEED"):
            mapping.madvise(mmap.MADV_DONTNEED)

    def _ranked(self, rows: npt.NDArray[np.int64], scores: npt.NDArray[np.floating[Any]],
                limit: int) -> list[ScoredId]:
        """The best `limit` of `rows` (`scores[i]` is row `rows[i]`'s), score descending then row ascending (the
        stable order of exact search)."""
        n = min(limit, len(scores))
        if n == 0:
            return []
        top = np.argpartition(-scores, n - 1)[:n] if n < len(scores) else np.arange(len(scores))
        top = top[np.lexsort((rows[top], -scores[top]))]
        return [ScoredId(self.ids[rows[i]], float(scores[i])) for i in top if np.isfinite(scores[i])]
