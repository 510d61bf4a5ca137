"""`run_search`: the stages in plain order, each a function of the request context and typed values.

plan → retrieve → rerank → rescue → bridge → cite → rescore → admit → reserve → grade → assemble → signals

Each stage records its name, time, counts and decisions in the trace; a failure inside one is raised as a
`StageError` naming it. Rescue, bridge, cite and rescore run only with the rescue switch on (the default);
admit only with a gate and a principal. A rejection or a low grade is a result, not an exception.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from evidex.outcome import SearchOutcome, SearchRequest
from evidex.pipeline.admission import admit
from evidex.pipeline.assembly import assemble
from evidex.pipeline.bridging import Bridged, follow_names
from evidex.pipeline.citing import cite
from evidex.pipeline.context import RequestContext
from evidex.pipeline.grading import grade_selection
from evidex.pipeline.parts import PipelineParts
from evidex.pipeline.planning import bind, plan, with_known_evidence
from evidex.pipeline.reranking import Additions, rerank_pool, rescore
from evidex.pipeline.rescue import Rescued, rescue_families
from evidex.pipeline.reservation import reserve_families
from evidex.pipeline.retrieval import retrieve
from evidex.signals.decision import DecisionSettings, signals_of
from evidex.types import Candidate


def run_search(parts: PipelineParts, request: SearchRequest) -> SearchOutcome:
    ctx = RequestContext.start(parts, request)
    planned = plan(ctx)
    retrieved = retrieve(ctx, planned)
    targets = bind(planned, retrieved.pool, retrieved.known)
    ranking = rerank_pool(ctx, planned, retrieved.pool)
    ranked = list(ranking.candidates)
    rescued, bridged = Rescued(), Bridged()
    if request.switches.rescue:
        rescued = rescue_families(ctx, targets, ranked)
        targets = with_known_evidence(targets, rescued.known)  # the pages named aspects title
        bridged = follow_names(ctx, planned, ranked)
        cited = cite(ctx, ranked)
        held = {c.chunk.record_id for c in [*retrieved.pool, *rescued.added]}
        added = (*rescued.added, *(c for c in bridged.candidates if c.chunk.record_id not in held))
        ranked = rescore(ctx, planned, retrieved.pool, ranked, Additions(added, bridged.linked, cited))
    admitted = admit(ctx, ranked)
    reserved = reserve_families(ctx, targets, admitted.candidates, bridged, rescued.leads)
    graded = grade_selection(ctx, reserved.selected, admitted.candidates, [*targets.families, *reserved.leads])
    selected = reserved.selected if graded is None else graded.chunks
    assembled = assemble(ctx, targets, selected, admitted.candidates, ranked, admitted.decision, graded)
    deeper = deeper_ranking(assembled.context, admitted.candidates)
    reranker = ranking.reranker
    if ctx.cross_encoder is not None and reranker["cross_encoder"]:
        reranker = {**reranker, "pairs_scored": ctx.cross_encoder.pairs_scored, "tokens": ctx.cross_encoder.tokens_used}
    outcome = SearchOutcome(request=request, retrieved_at=ctx.access.retrieved_at, plan=targets,
                            context=assembled.context, families=assembled.families, gate=admitted.decision,
                            graded=assembled.graded, expanded=assembled.expanded,
                            ranked=(*assembled.context, *deeper), ranked_all=tuple(ranked), reranker=reranker,
                            trace=ctx.trace, hidden_successors=admitted.hidden_successors, followed=bridged.followed,
                            titles=ctx.titles)
    return with_signals(ctx, outcome)


def deeper_ranking(context: Sequence[Candidate], admitted: Sequence[Candidate]) -> list[Candidate]:
    """The admitted candidates after the context, as a reader with more room goes on: first the best chunk of
    each page the context does not show, in rank order, then the rest in rank order. Page diversity holds past
    k as it does within it (`evidence.max_per_doc`): a second chunk of a page already read adds less than a new
    page."""
    chosen = {c.chunk.record_id for c in context}
    pages = {c.chunk.doc_id for c in context}
    first: list[Candidate] = []
    rest: list[Candidate] = []
    for c in admitted:
        if c.chunk.record_id in chosen:
            continue
        if c.chunk.doc_id in pages:
            rest.append(c)
        else:
            pages.add(c.chunk.doc_id)
            first.append(c)
    return [*first, *rest]


def with_signals(ctx: RequestContext, outcome: SearchOutcome) -> SearchOutcome:
    """The signals stage: confidence, coverage, diversity and the recommendation, from the outcome."""
    with ctx.trace.stage("signals", len(outcome.context)) as st:
        signals = signals_of(outcome, DecisionSettings.from_config(ctx.config))
        st.decisions = {"action": signals.recommendation.action.value}
        st.n_out = len(outcome.context)
    return dataclasses.replace(outcome, signals=signals)
