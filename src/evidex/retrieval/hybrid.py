"""Broad retrieval: dense, BM25, or both fused. Returns candidates with every score that placed them."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import numpy.typing as npt

from evidex.config import RetrievalConfig
from evidex.retrieval.fusion import FusedHit, fuse
from evidex.stores.protocol import Store
from evidex.types import Candidate, FusionMode, RetrievalMode, ScoredId, SearchFilters

QueryEncoder = Callable[[str], npt.NDArray[np.float32]]


_WORKERS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="evidex-retrieve")


def dense_and_sparse(store: Store, encode: QueryEncoder, query: str, *, mode: RetrievalMode, limit: int,
                     filters: SearchFilters | None = None) -> tuple[list[ScoredId], list[ScoredId]]:
    """Both retrievers for one query; in hybrid mode the full-text search runs in a worker thread while this
    one encodes the query and multiplies the matrix (all three release the GIL)."""
    sparse_job = None
    if mode is RetrievalMode.HYBRID:
        sparse_job = _WORKERS.submit(store.search_sparse, query, limit, filters)
    dense = store.search_dense(encode(query), limit, filters) if mode is not RetrievalMode.BM25 else []
    if sparse_job is not None:
        sparse = sparse_job.result()
    elif mode is RetrievalMode.BM25:
        sparse = store.search_sparse(query, limit, filters)
    else:
        sparse = []
    return dense, sparse


def query_lists(store: Store, encode: QueryEncoder, query: str, *, mode: RetrievalMode, limit: int,
                settings: RetrievalConfig, filters: SearchFilters | None = None
                ) -> tuple[list[list[ScoredId]], list[float]]:
    """The ranked lists `mode` retrieves for one query, with their fusion weights (dense first)."""
    dense, sparse = dense_and_sparse(store, encode, query, mode=mode, limit=limit, filters=filters)
    hybrid = mode is RetrievalMode.HYBRID
    lists: list[list[ScoredId]] = []
    weights: list[float] = []
    if mode is not RetrievalMode.BM25:
        lists.append(dense)
        weights.append(settings.dense_weight if hybrid else 1.0)
    if mode is not RetrievalMode.DENSE:
        lists.append(sparse)
        weights.append(settings.sparse_weight if hybrid else 1.0)
    return lists, weights


def fuse_lists(lists: list[list[ScoredId]], weights: list[float], settings: RetrievalConfig) -> list[FusedHit]:
    """One ranking from several lists, normalised at a fixed depth so the order never depends on how many
    hits the caller keeps."""
    fusion = settings.fusion if len(lists) > 1 else FusionMode.WEIGHTED
    return fuse(lists, weights, fusion, settings.rrf_k, depth=settings.candidate_pool)


def retrieve(store: Store, encode: QueryEncoder, query: str, *, mode: RetrievalMode, limit: int,
             settings: RetrievalConfig, filters: SearchFilters | None = None) -> list[Candidate]:
    lists, weights = query_lists(store, encode, query, mode=mode, limit=max(limit, settings.candidate_pool),
                                 settings=settings, filters=filters)
    return candidates(store, fuse_lists(lists, weights, settings)[:limit], mode)


def candidates(store: Store, hits: list[FusedHit], mode: RetrievalMode) -> list[Candidate]:
    chunks = {c.record_id: c for c in store.get([h.record_id for h in hits])}
    out = []
    for h in hits:
        chunk = chunks.get(h.record_id)
        if chunk is None:
            continue
        if mode is RetrievalMode.HYBRID:
            # The question's own lists come first; a hit added from another search may carry fewer.
            dense_score, dense_rank = h.raw[0], h.ranks[0]
            sparse_score, sparse_rank = (h.raw[1], h.ranks[1]) if len(h.raw) > 1 else (None, None)
        elif mode is RetrievalMode.DENSE:
            dense_score, sparse_score, dense_rank, sparse_rank = h.raw[0], None, h.ranks[0], None
        else:
            dense_score, sparse_score, dense_rank, sparse_rank = None, h.raw[0], None, h.ranks[0]
        out.append(Candidate(chunk=chunk, score=h.score, dense_score=dense_score, sparse_score=sparse_score,
                             dense_rank=dense_rank, sparse_rank=sparse_rank))
    return out
