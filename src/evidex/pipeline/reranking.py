"""The rerank stage, and the rescore stage that ranks the pool again once rescue, bridging and citations
have added candidates and bonuses: the fused score of `evidex.rerank.fused` over both."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from evidex.evidence.plan import EvidencePlan
from evidex.pipeline.context import RequestContext
from evidex.rerank.fused import rerank
from evidex.retrieval.corpus import inlink_contexts
from evidex.types import Candidate


@dataclass(frozen=True)
class Ranking:
    candidates: tuple[Candidate, ...]
    reranker: dict[str, Any] = field(default_factory=lambda: {"cross_encoder": None, "weights": {}})


@dataclass(frozen=True)
class Additions:
    """What the stages after reranking add: candidates (at the retrieval floor) and reranker bonuses."""

    candidates: tuple[Candidate, ...] = ()
    linked: frozenset[str] = frozenset()  # records a bridge reached (the linked bonus)
    cited: frozenset[str] = frozenset()  # records leading readable pages link to (the citation bonus)


def rerank_pool(ctx: RequestContext, plan: EvidencePlan, pool: Sequence[Candidate]) -> Ranking:
    if not ctx.request.switches.rerank:
        return Ranking(tuple(pool))
    with ctx.trace.stage("rerank", len(pool)) as st:
        outcome = rerank(ctx.request.query, pool, ctx.weights, ctx.cross_encoder, plan.aspects,
                         inlinks=inlinks(ctx, pool))
        st.n_out = len(outcome.candidates)
        st.decisions = {"cross_encoder": outcome.cross_encoder or "none (offline default)"}
    return Ranking(tuple(outcome.candidates), {"cross_encoder": outcome.cross_encoder, "weights": outcome.weights})


def rescore(ctx: RequestContext, plan: EvidencePlan, pool: Sequence[Candidate], ranked: Sequence[Candidate],
            additions: Additions) -> list[Candidate]:
    """The ranking with the added candidates, entered at the retrieval floor and scored with the rest of the
    pool, and the linked and cited bonuses applied. Records the requester may not read (a declared family's
    rescue may bring them in) are scored among themselves, without a model, so that the readable ones' scores
    (word rarity, score ranges, a cross-encoder's range and token count) come from readable text alone."""
    with ctx.trace.stage("rescore", len(ranked)) as st:
        out = list(ranked)
        if additions.candidates or additions.linked or additions.cited:
            floor = min((c.score for c in pool), default=0.0)
            extra = [Candidate(c.chunk, floor, sparse_score=c.sparse_score) for c in additions.candidates]
            merged = [*pool, *extra]
            if ctx.request.switches.rerank:
                readable = [c for c in merged if ctx.access.may_read(c.chunk)]
                unreadable = [c for c in merged if not ctx.access.may_read(c.chunk)]
                query, weights, linked, cited = ctx.request.query, ctx.weights, additions.linked, additions.cited
                out = sorted([*rerank(query, readable, weights, ctx.cross_encoder, plan.aspects, linked, cited,
                                      inlinks(ctx, readable)).candidates,
                              *rerank(query, unreadable, weights, None, plan.aspects, linked, cited).candidates],
                             key=lambda c: (-c.score, c.chunk.record_id))
            else:
                out = [*ranked, *extra]
        st.n_out = len(out)
    return out


def inlinks(ctx: RequestContext, candidates: Sequence[Candidate]) -> dict[str, list[str]]:
    """What readable pages say around their links to the candidates' pages (the reranker's inlink match)."""
    if ctx.weights.inlink <= 0:
        return {}
    return inlink_contexts(ctx.store, sorted({c.chunk.source for c in candidates}), ctx.access.reader)
