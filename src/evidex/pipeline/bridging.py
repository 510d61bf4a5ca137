"""The bridge stage: a nested question ("the bridge in the city where the canal ends") follows the
names its leading evidence adds, a title look-up per name, then one search of the question with the first
names (`evidex.evidence.bridge`). Names are followed only out of text the requester may read, and only to
records they may read: a restricted page must neither steer what else is found nor be named in the trace."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from evidex.evidence.bridge import BridgeSearch, bridge, context_search
from evidex.evidence.plan import EvidencePlan
from evidex.pipeline.context import RequestContext
from evidex.types import Candidate

BRIDGE_LIMIT = 10  # hits of one bridge search


@dataclass(frozen=True)
class Bridged:
    candidates: tuple[Candidate, ...] = ()
    linked: frozenset[str] = frozenset()  # records a followed name reached
    followed: frozenset[str] = frozenset()  # records reached by following a name out of the evidence
    named: frozenset[str] = frozenset()  # records titled exactly by a followed name


def follow_names(ctx: RequestContext, plan: EvidencePlan, ranked: Sequence[Candidate]) -> Bridged:
    with ctx.trace.stage("bridge", len(ranked)) as st:
        found, searches = (_bridge(ctx, ranked) if ctx.evidence.bridge_from_top and plan.chained else ([], []))
        st.n_out = len(found)
        st.decisions = {"bridges": [b.to_dict() for b in searches]}
        st.searches = [("bridge", b.entity, b.ms) for b in searches]
    return Bridged(tuple(found), frozenset(r for s in searches for r in s.linked),
                   frozenset(r for s in searches for r in s.followed), frozenset(r for s in searches for r in s.named))


def _bridge(ctx: RequestContext, ranked: Sequence[Candidate]) -> tuple[list[Candidate], list[BridgeSearch]]:
    ev, query = ctx.evidence, ctx.request.query
    sources = ctx.access.admitted(ranked[: ev.bridge_from_top * 2])
    follow = ctx.access.readable(ctx.sparse_candidates)
    added, searches = bridge(ctx.store, query, sources, from_top=ev.bridge_from_top,
                             max_entities=ev.bridge_max_searches, limit=BRIDGE_LIMIT, to_candidates=follow,
                             hops=ev.bridge_hops, filters=ctx.access.reader, titles=ctx.titles)
    held = {c.chunk.record_id for c in [*ranked, *added]}
    found, search = context_search(ctx.store, query, sources[: ev.bridge_from_top], names=ev.bridge_context_names,
                                   limit=BRIDGE_LIMIT, held=held, to_candidates=follow, filters=ctx.access.reader)
    return [*added, *found], [*searches, *([search] if search is not None else [])]
