"""The retrieve stage: broad hybrid retrieval of the question (and of an aspect focus, fused with it) under
the requester's read filter, cut to the pool that goes on to reranking."""

from __future__ import annotations

from dataclasses import dataclass

from evidex.evidence.plan import EvidencePlan
from evidex.evidence.words import speaks_of
from evidex.pipeline.context import RequestContext
from evidex.pipeline.planning import KnownEvidence
from evidex.retrieval.fusion import FusedHit
from evidex.retrieval.hybrid import candidates as to_candidates
from evidex.retrieval.hybrid import fuse_lists, query_lists
from evidex.types import Candidate, ScoredId

FOCUS_TOP = 3  # a focused aspect's own best hits, kept in the pool and known as its evidence when they speak of it


@dataclass(frozen=True)
class Retrieved:
    pool: tuple[Candidate, ...]
    known: KnownEvidence  # the focused aspect's best hits, when the request has a focus


def retrieve(ctx: RequestContext, plan: EvidencePlan) -> Retrieved:
    request, settings = ctx.request, ctx.config.retrieval
    with ctx.trace.stage("retrieve") as st:
        pool_limit = max(ctx.evidence.pool_size, ctx.k)
        wide = max(settings.candidate_pool, pool_limit)
        queries = [request.query] + ([request.aspect_focus] if request.aspect_focus else [])
        lists: list[list[ScoredId]] = []
        weights: list[float] = []
        for text in queries:
            more, more_weights = query_lists(ctx.store, ctx.encode, text, mode=request.mode, limit=wide,
                                             settings=settings, filters=ctx.access.reader)
            lists += more
            weights += more_weights
        hits = fuse_lists(lists, weights, settings)
        focus_hits: list[FusedHit] = []
        if request.aspect_focus:
            per_query = len(lists) // len(queries)
            focus_hits = fuse_lists(lists[per_query:], weights[per_query:], settings)[:FOCUS_TOP]
            hits = _with_required(hits, focus_hits)
        pool = to_candidates(ctx.store, hits[:pool_limit], request.mode)
        st.n_out = len(pool)
        st.decisions = {"queries": len(queries), "hits": [len(x) for x in lists]}
    return Retrieved(tuple(pool), _focus_evidence(plan, request.aspect_focus, focus_hits, pool))


def _focus_evidence(plan: EvidencePlan, focus: str | None, focus_hits: list[FusedHit],
                    pool: list[Candidate]) -> KnownEvidence:
    """The focused aspect is met by the best hits of its own search that speak of it (a focus the index knows
    nothing of has nearest neighbours too). A family declared by its members (a shape's, the caller's) is met
    by those alone: focusing on its name must not let any page mentioning it stand in for evidence the
    requester may not read."""
    focused = next((f for f in plan.families if f.name == focus), None)
    if focused is None or focused.is_store_filterable:
        return {}
    chunks = {c.chunk.record_id: c.chunk for c in pool}
    return {focused.name: tuple(h.record_id for h in focus_hits
                                if h.record_id in chunks and speaks_of(chunks[h.record_id], focused.name))}


def _with_required(hits: list[FusedHit], required: list[FusedHit]) -> list[FusedHit]:
    """`hits` with `required` moved to the front if they would fall outside the pool."""
    ids = {h.record_id for h in required}
    return [*required, *(h for h in hits if h.record_id not in ids)]
