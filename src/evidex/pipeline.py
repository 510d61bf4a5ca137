"""The search pipeline in plain order: plan → retrieve → rerank → rescue → admit → reserve → grade →
assemble (signals are computed from the outcome, in `evidex.signals`). Each step goes through
`Trace.stage`, which records its time, counts and decisions; a failure inside a step is re-raised as
`StageError` naming that step. A rejection or a low grade is a result, not an exception.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
import numpy.typing as npt

from evidex.admission.gate import AdmissionGate, GateDecision, Principal, RejectReason
from evidex.config import Config
from evidex.evidence.assemble import expand_neighbours
from evidex.evidence.bridge import BridgeSearch, bridge, context_search, named_pages
from evidex.evidence.citations import cited_records
from evidex.evidence.grade import Graded, GradeThresholds, grade, grade_of
from evidex.evidence.plan import (
    EvidencePlan,
    QuestionShape,
    RequiredFamily,
    plan_question,
    with_term_weights,
    without_frames,
)
from evidex.evidence.rescue import index_holds, rescue
from evidex.evidence.reserve import reserve
from evidex.evidence.words import speaks_of
from evidex.rerank.fused import CrossEncoder, RequestCrossEncoder, RerankWeights, rerank
from evidex.retrieval.fusion import FusedHit, fuse
from evidex.retrieval.hybrid import candidates as to_candidates
from evidex.retrieval.hybrid import fuse_lists, query_lists
from evidex.stores.protocol import Store
from evidex.trace import StageSwitches, Trace, pinned_now
from evidex.types import Candidate, FusionMode, RetrievalMode, ScoredId, SearchFilters


@dataclass(frozen=True)
class SearchRequest:
    query: str
    k: int = 10
    principal: Principal | None = None  # None: no gate (evaluation of retrieval only)
    retrieved_at: datetime | None = None  # pinned; None = now, truncated to the second
    aspect_focus: str | None = None
    plan: EvidencePlan | None = None  # an explicit plan (the caller's / the oracle's)
    switches: StageSwitches = field(default_factory=StageSwitches)
    mode: RetrievalMode = RetrievalMode.HYBRID

    def __post_init__(self) -> None:
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise ValueError(f"k must be a positive integer (got {self.k!r})")
        # A focus of only whitespace is no focus (it had run an empty second search and changed the answer).
        object.__setattr__(self, "aspect_focus", (self.aspect_focus or "").strip() or None)


@dataclass(frozen=True)
class FamilyStatus:
    name: str
    status: str  # covered | missing | found-but-rejected
    record_ids: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class SearchOutcome:
    """What the pipeline decided, before signals and serialisation (see `evidex.result`)."""

    request: SearchRequest
    retrieved_at: datetime
    plan: EvidencePlan
    context: tuple[Candidate, ...]
    families: tuple[FamilyStatus, ...]
    gate: GateDecision | None
    graded: Graded | None
    expanded: tuple[tuple[str, str], ...]
    ranked: tuple[Candidate, ...]  # every admitted candidate, best first (deeper than k)
    ranked_all: tuple[Candidate, ...]  # every candidate before the gate (never serialised with text)
    reranker: dict[str, Any]
    trace: Trace
    hidden_successors: frozenset[str] = frozenset()  # `superseded_by` sources the requester may not read
    followed: frozenset[str] = frozenset()  # records reached by following a name out of the evidence (bridging)
    snapshot_id: str = ""  # the one index snapshot every read saw (set by `Engine.run`, which checks it)


@dataclass(frozen=True)
class PipelineParts:
    store: Store
    encode: Callable[[str], npt.NDArray[np.float32]]
    config: Config
    gate: AdmissionGate | None = None
    cross_encoder: CrossEncoder | None = None
    shapes: tuple[QuestionShape, ...] = ()
    shape_examples: dict[str, npt.NDArray[np.float32]] = field(default_factory=dict)  # shape -> example vectors


def shapes_from_config(config: Config) -> tuple[QuestionShape, ...]:
    return tuple(
        QuestionShape(name=s.name, keywords=s.keywords, min_keywords=s.min_keywords, patterns=s.patterns,
                      examples=s.examples, min_similarity=s.min_similarity,
                      families=tuple(RequiredFamily(name=f.name, rescue_query=f.rescue_query, label=f.label,
                                                    source_regex=f.source_regex) for f in s.families))
        for s in config.shapes)



def run_search(parts: PipelineParts, request: SearchRequest) -> SearchOutcome:
    cfg = parts.config
    ev = cfg.evidence
    sw = request.switches
    trace = Trace()
    retrieved_at = request.retrieved_at or pinned_now()
    if retrieved_at.utcoffset() is None:
        retrieved_at = retrieved_at.replace(tzinfo=UTC)
    k = request.k
    # What searches steered by the request's own words may see: only records the requester may read.
    reader = parts.gate.readable(request.principal) if parts.gate is not None and request.principal else None
    vectors: dict[str, npt.NDArray[np.float32]] = {}

    def encode(text: str) -> npt.NDArray[np.float32]:
        """The query encoder, once per text in this request (a shape's examples and retrieval share it)."""
        if text not in vectors:
            vectors[text] = parts.encode(text)
        return vectors[text]

    def similarity(shape: QuestionShape) -> float | None:
        examples = parts.shape_examples.get(shape.name)
        return None if examples is None else round(float(np.max(examples @ encode(request.query))), 4)

    with trace.stage("plan") as st:
        plan = plan_question(request.query, shapes=parts.shapes, explicit=request.plan,
                             aspect_focus=request.aspect_focus, max_aspects=ev.max_aspects, similarity=similarity,
                             held=lambda identifier: index_holds(parts.store, identifier, limit=ev.wide_limit,
                                                                 reader=reader))
        st.n_out = len(plan.families)
        st.decisions = {"source": plan.source.value, "families": [f.name for f in plan.families]}

    with trace.stage("retrieve") as st:
        pool_limit = max(ev.pool_size, k)
        wide = max(cfg.retrieval.candidate_pool, pool_limit)
        # An aspect focus is retrieved for in its own right, beside the question, and fused with it.
        queries = [request.query] + ([request.aspect_focus] if request.aspect_focus else [])
        lists: list[list[ScoredId]] = []
        weights: list[float] = []
        for text in queries:
            more, more_weights = query_lists(parts.store, encode, text, mode=request.mode, limit=wide,
                                             settings=cfg.retrieval, filters=reader)
            lists += more
            weights += more_weights
        hits = fuse_lists(lists, weights, cfg.retrieval)
        # Word counts among what the requester may read (the question's words are read by now): restricted
        # text holding a word must not decide which aspects are obligations.
        plan, frames = without_frames(plan, lambda text: parts.store.word_counts(
            text, reader.access_labels if reader is not None else None), ev.frame_word_share, ev.frame_min_records,
            keep=request.aspect_focus)
        focus_hits: list[FusedHit] = []
        if request.aspect_focus:
            per_query = len(lists) // len(queries)
            focus_hits = fuse_lists(lists[per_query:], weights[per_query:], cfg.retrieval)[:FOCUS_TOP]
            hits = _with_required(hits, focus_hits)
        pool = to_candidates(parts.store, hits[:pool_limit], request.mode)
        focused = next((f for f in plan.families if f.name == request.aspect_focus), None)
        if focused is not None and not focused.is_store_filterable:
            # The focused aspect is met by the best hits of its own search, not only by shared words; but only
            # by those that speak of it: a focus the index knows nothing of has nearest neighbours too. A family
            # declared by its members (a shape's, the caller's) is met by those alone: focusing on its name had
            # let any page mentioning it stand in for evidence the requester may not read.
            chunks = {c.chunk.record_id: c.chunk for c in pool}
            plan = with_known_evidence(plan, {focused.name: tuple(
                h.record_id for h in focus_hits if h.record_id in chunks and speaks_of(chunks[h.record_id],
                                                                                        focused.name))})
        plan = with_term_weights(plan, pool)
        st.n_out = len(pool)
        st.decisions = {"queries": len(queries), "hits": [len(x) for x in lists], "frames": list(frames)}

    weights_cfg = RerankWeights.from_config(ev)
    reranker: dict[str, Any] = {"cross_encoder": None, "weights": {}}

    def inlinks(candidates: Sequence[Candidate]) -> dict[str, list[str]]:
        """What readable pages say around their links to the candidates' pages (the reranker's inlink match)."""
        if weights_cfg.inlink <= 0:
            return {}
        return parts.store.inlink_contexts(sorted({c.chunk.source for c in candidates}), reader)

    cross_encoder = RequestCrossEncoder(parts.cross_encoder) if parts.cross_encoder is not None else None
    ranked = list(pool)
    if sw.rerank:
        with trace.stage("rerank", len(pool)) as st:
            outcome = rerank(request.query, pool, weights_cfg, cross_encoder, plan.aspects, inlinks=inlinks(pool))
            ranked = list(outcome.candidates)
            reranker = {"cross_encoder": outcome.cross_encoder, "weights": outcome.weights}
            st.n_out = len(ranked)
            st.decisions = {"cross_encoder": outcome.cross_encoder or "none (offline default)"}

    thresholds = GradeThresholds(ev.grade_correct, ev.grade_incorrect)
    linked: frozenset[str] = frozenset()
    followed: frozenset[str] = frozenset()
    named: frozenset[str] = frozenset()
    leads: dict[str, str] = {}
    if sw.rescue:
        with trace.stage("rescue", len(ranked)) as st:
            def sparse_candidates(h: list[ScoredId]) -> list[Candidate]:
                return to_candidates(parts.store, fuse([h], [1.0], FusionMode.WEIGHTED), RetrievalMode.BM25)

            # A named aspect's best evidence is the page it titles: found in the pool or by a title look-up.
            added_by_name, pages, lookups = named_pages(parts.store, plan.families, ranked, max_lookups=ev.name_lookups,
                                                 limit=10, to_candidates=_readable(parts, request, retrieved_at,
                                                                                   sparse_candidates), filters=reader)
            plan = with_known_evidence(plan, pages)
            rescued = rescue(parts.store, plan.families, [*ranked, *added_by_name], wide_limit=ev.wide_limit,
                             min_matches=ev.min_matches, reader=reader, to_candidates=sparse_candidates,
                             thresholds=thresholds, leading=k)
            added, attempts, leads = rescued.added, rescued.attempts, rescued.leads
            # Names are only followed out of text the requester may read: a restricted page must not steer
            # (or, through the trace, reveal) what else is found.
            bridged: list[Candidate] = []
            searches: list[BridgeSearch] = []
            if ev.bridge_from_top and plan.chained:
                bridged, searches = _bridge(parts, request, ranked, retrieved_at, sparse_candidates, reader)
            linked = frozenset(r for s in searches for r in s.linked)
            followed = frozenset(r for s in searches for r in s.followed)
            named = frozenset(r for s in searches for r in s.named)
            cited = cited_records(_admitted(parts, request, ranked[:k], retrieved_at), ranked, ev.cited_min_pages)
            added = [*added_by_name, *added]
            known = {c.chunk.record_id for c in [*pool, *added]}
            bridged = [c for c in bridged if c.chunk.record_id not in known]
            if added or bridged or linked or cited:
                # Rescued chunks enter at the retrieval floor and are scored with the rest of the pool.
                floor = min((c.score for c in pool), default=0.0)
                extra = [Candidate(c.chunk, floor, sparse_score=c.sparse_score) for c in [*added, *bridged]]
                merged = [*pool, *extra]
                if sw.rerank:
                    # A declared family's rescue may bring in records the requester may not read: they are scored
                    # among themselves (no model), so that the readable ones' scores (word rarity, score ranges,
                    # a cross-encoder's range and token count) come from readable text alone.
                    gate, who = parts.gate, request.principal
                    readable: list[Candidate] = []
                    unreadable: list[Candidate] = []
                    for c in merged:
                        (readable if gate is None or who is None or gate.may_read(who, c.chunk) else unreadable
                         ).append(c)
                    ranked = sorted([*rerank(request.query, readable, weights_cfg, cross_encoder, plan.aspects,
                                             linked, cited, inlinks(readable)).candidates,
                                     *rerank(request.query, unreadable, weights_cfg, None, plan.aspects,
                                             linked, cited).candidates], key=lambda c: (-c.score, c.chunk.record_id))
                else:
                    ranked = [*ranked, *extra]
            st.n_out = len(ranked)
            st.decisions = {"names": [s.to_dict() for s in lookups], "searches": [a.to_dict() for a in attempts],
                            "bridges": [b.to_dict() for b in searches], "cited": sorted(cited)}
            st.searches = [*(("name", s.entity, s.ms) for s in lookups), *(("rescue", a.query, a.ms) for a in attempts),
                           *(("bridge", b.entity, b.ms) for b in searches)]

    decision: GateDecision | None = None
    admitted = ranked
    hidden: frozenset[str] = frozenset()
    if parts.gate is not None and request.principal is not None:
        with trace.stage("admit", len(ranked)) as st:
            decision = parts.gate.admit(ranked, request.principal, retrieved_at)
            admitted = list(decision.admitted)
            hidden = _unreadable_successors(parts.store, lambda: encode(request.query), ranked, decision, reader)
            st.n_out = len(admitted)
            st.decisions = {"rejected_counts": decision.counts()}

    lead_families: list[RequiredFamily] = []
    with trace.stage("reserve", len(admitted)) as st:
        if sw.reserve:
            # A nested question also needs the page one hop away: the best linked page is reserved like a family,
            # preferring a page named exactly by a followed name ("Kansas" over "Ellis, Kansas").
            hop_pages = tuple(sorted(named or linked))
            hop = [RequiredFamily(HOP_OBLIGATION, rescue_query="", record_ids=hop_pages)] if hop_pages else []
            # Then the lead of each aspect nothing met: kept like evidence (through grading too), never
            # counted as covering the aspect (the family statuses come from the plan alone).
            admitted_ids = {c.chunk.record_id for c in admitted}
            lead_families = [RequiredFamily(LEAD_OBLIGATION + name, rescue_query="", record_ids=(record_id,),
                                            lead=True)
                             for name, record_id in leads.items() if record_id in admitted_ids]
            selection = reserve(admitted, [*plan.families, *hop, *lead_families], k, ev.max_per_doc)
            selected = list(selection.chunks)
            st.decisions = {"reserved": selection.reserved}
        else:
            selected = admitted[:k]
        st.n_out = len(selected)

    graded: Graded | None = None
    if sw.grade:
        with trace.stage("grade", len(selected)) as st:
            graded = grade(selected, admitted, [*plan.families, *lead_families], k, thresholds)
            selected = list(graded.chunks)
            st.n_out = len(selected)
            st.decisions = {"overall": graded.overall.value, "removed": list(graded.removed),
                            "restored": list(graded.restored), "missing": list(graded.missing_families),
                            "cut_by_k": list(graded.cut)}

    expanded: tuple[tuple[str, str], ...] = ()
    with trace.stage("assemble", len(selected)) as st:
        if sw.expand:
            # Never back what grading just removed as noise.
            dropped = set(graded.removed) if graded is not None else set()
            assembly = expand_neighbours(selected, [c for c in admitted if c.chunk.record_id not in dropped], k)
            selected = list(assembly.chunks)
            expanded = assembly.expanded
            if graded is not None and expanded:  # a neighbour kept with its section shows its own grade
                neighbours = {c.chunk.record_id: grade_of(c, thresholds) for c in selected}
                graded = dataclasses.replace(graded, grades={**neighbours, **graded.grades})
            st.decisions = {"expanded": [list(pair) for pair in expanded]}
        st.n_out = len(selected)
        families = _family_statuses(plan, selected, ranked, decision, graded)

    if cross_encoder is not None and reranker["cross_encoder"]:
        reranker = {**reranker, "pairs_scored": cross_encoder.pairs_scored, "tokens": cross_encoder.tokens_used}
    chosen_ids = {c.chunk.record_id for c in selected}
    deeper = [c for c in admitted if c.chunk.record_id not in chosen_ids]
    return SearchOutcome(request=request, retrieved_at=retrieved_at, plan=plan, context=tuple(selected),
                         families=families, gate=decision, graded=graded, expanded=expanded,
                         ranked=tuple([*selected, *deeper]), ranked_all=tuple(ranked), reranker=reranker,
                         trace=trace, hidden_successors=hidden, followed=followed)


def _bridge(parts: PipelineParts, request: SearchRequest, ranked: Sequence[Candidate], retrieved_at: datetime,
            sparse_candidates: Callable[[list[ScoredId]], list[Candidate]], reader: SearchFilters | None,
            ) -> tuple[list[Candidate], list[BridgeSearch]]:
    """Follow names out of readable evidence only, and only to readable records: a restricted page must
    neither steer what else is found nor be named (by id) in the trace."""
    ev = parts.config.evidence
    sources = _admitted(parts, request, ranked[: ev.bridge_from_top * 2], retrieved_at)
    follow = _readable(parts, request, retrieved_at, sparse_candidates)
    added, searches = bridge(parts.store, request.query, sources, from_top=ev.bridge_from_top,
                             max_entities=ev.bridge_max_searches, limit=10, to_candidates=follow,
                             hops=ev.bridge_hops, filters=reader)
    held = {c.chunk.record_id for c in [*ranked, *added]}
    found, search = context_search(parts.store, request.query, sources[: ev.bridge_from_top],
                                   names=ev.bridge_context_names, limit=10, held=held, to_candidates=follow,
                                   filters=reader)
    return [*added, *found], [*searches, *([search] if search is not None else [])]


def _admitted(parts: PipelineParts, request: SearchRequest, candidates: Sequence[Candidate],
              retrieved_at: datetime) -> list[Candidate]:
    """`candidates` the gate admits for this request (all of them when there is no gate)."""
    gate, who = parts.gate, request.principal
    if gate is None or who is None:
        return list(candidates)
    return list(gate.admit(candidates, who, retrieved_at).admitted)


def _unreadable_successors(store: Store, vector: Callable[[], npt.NDArray[np.float32]],
                           candidates: Sequence[Candidate], decision: GateDecision,
                           reader: SearchFilters | None) -> frozenset[str]:
    """The successors (`superseded_by`) named by admitted or visibly rejected candidates of which the requester
    may read nothing: naming one would reveal a restricted page. A one-row dense search under the reader's
    filter and the source tells whether any of it is readable (`vector`: any query vector, computed only if
    needed)."""
    if reader is None:
        return frozenset()
    visible = {r.record_id for r in decision.rejected if r.reason is not RejectReason.ACCESS}
    visible |= {c.chunk.record_id for c in decision.admitted}
    named = sorted({s for c in candidates if c.chunk.record_id in visible
                    and (s := c.chunk.provenance.superseded_by)})
    return frozenset(source for source in named if not store.search_dense(vector(), 1, dataclasses.replace(
        reader, source_pattern=f"^{re.escape(source)}$")))


FOCUS_TOP = 3
HOP_OBLIGATION = "(one hop away)"  # the reserve trace's name for the linked page a nested question needs
LEAD_OBLIGATION = "(lead) "  # the reserve trace's prefix for the lead kept for an aspect nothing met


ToCandidates = Callable[[list[ScoredId]], list[Candidate]]


def _readable(parts: PipelineParts, request: SearchRequest, retrieved_at: datetime,
              to_candidates: ToCandidates) -> ToCandidates:
    """`to_candidates` limited to records the requester may read (a look-up must not reveal, even by id in
    the trace, what the gate would reject)."""
    if parts.gate is None or request.principal is None:
        return to_candidates

    def readable(hits: list[ScoredId]) -> list[Candidate]:
        return _admitted(parts, request, to_candidates(hits), retrieved_at)

    return readable


def with_known_evidence(plan: EvidencePlan, pages: dict[str, tuple[str, ...]]) -> EvidencePlan:
    """`plan` with known best evidence added per aspect name (the pages a name titles, a focused search's
    best hits)."""
    if not pages:
        return plan
    families = tuple(dataclasses.replace(f, record_ids=tuple(dict.fromkeys([*f.record_ids, *pages[f.name]])))
                     if f.name in pages else f for f in plan.families)
    return dataclasses.replace(plan, families=families)


def _with_required(hits: list[FusedHit], required: list[FusedHit]) -> list[FusedHit]:
    """`hits` with `required` moved to the front if they would fall outside the pool."""
    ids = {h.record_id for h in required}
    return [*required, *(h for h in hits if h.record_id not in ids)]


def _family_statuses(plan: EvidencePlan, selected: Sequence[Candidate], ranked: Sequence[Candidate],
                     decision: GateDecision | None, graded: Graded | None) -> tuple[FamilyStatus, ...]:
    out = []
    rejected_by_id = {r.record_id: r for r in decision.rejected} if decision else {}
    # A family grading found no validated evidence for is missing, whatever merely matches it in the context;
    # so is one whose evidence did not fit in k (admissible evidence exists: a re-query, not a stop).
    unvalidated = set(graded.missing_families) if graded else set()
    cut = set(graded.cut) if graded else set()
    for family in plan.families:
        ids = () if family.name in unvalidated else tuple(c.chunk.record_id for c in selected
                                                           if family.matches(c.chunk))
        if ids:
            out.append(FamilyStatus(family.name, "covered", ids))
            continue
        if family.name in cut:
            out.append(FamilyStatus(family.name, "missing"))
            continue
        # An automatic aspect is the requester's own words: a record they may not read must not tell them it
        # is there (a declared family may, by the operator's choice). Its candidates come from searches the
        # requester may read, but a declared family's rescue brings restricted ones into the same pool.
        rejected = [c.chunk.record_id for c in ranked
                    if c.chunk.record_id in rejected_by_id and family.matches(c.chunk)
                    and (family.is_store_filterable
                         or rejected_by_id[c.chunk.record_id].reason is not RejectReason.ACCESS)]
        if rejected:
            reasons = sorted({rejected_by_id[r].reason.value for r in rejected})
            out.append(FamilyStatus(family.name, "found-but-rejected", (), tuple(reasons)))
        else:
            out.append(FamilyStatus(family.name, "missing"))
    return tuple(out)
