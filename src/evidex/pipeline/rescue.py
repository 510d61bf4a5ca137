"""The rescue stage: for each planned family the candidates do not meet, one bounded search. A named aspect
is first looked up by title (the page it titles is its best evidence); then each family short of candidates
gets one sparse search of its rescue query; an automatic aspect nothing meets keeps a lead (see
`evidex.evidence.rescue`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from evidex.evidence.bridge import named_pages
from evidex.evidence.plan import EvidencePlan
from evidex.evidence.rescue import rescue
from evidex.pipeline.context import RequestContext
from evidex.pipeline.planning import KnownEvidence, with_known_evidence
from evidex.types import Candidate

NAME_LOOKUP_LIMIT = 10  # hits of one title look-up


@dataclass(frozen=True)
class Rescued:
    added: tuple[Candidate, ...] = ()  # found by a name look-up or a rescue search, not already in the ranking
    known: KnownEvidence = field(default_factory=dict)  # the pages each named aspect titles
    leads: dict[str, str] = field(default_factory=dict)  # aspect name -> the record kept for it (none met it)


def rescue_families(ctx: RequestContext, targets: EvidencePlan, ranked: Sequence[Candidate]) -> Rescued:
    ev = ctx.evidence
    with ctx.trace.stage("rescue", len(ranked)) as st:
        by_name, pages, lookups = named_pages(ctx.store, targets.families, ranked, max_lookups=ev.name_lookups,
                                              limit=NAME_LOOKUP_LIMIT,
                                              to_candidates=ctx.access.readable(ctx.sparse_candidates),
                                              filters=ctx.access.reader, titles=ctx.titles)
        named = with_known_evidence(targets, pages)
        found = rescue(ctx.store, named.families, [*ranked, *by_name], wide_limit=ev.wide_limit,
                       min_matches=ev.min_matches, reader=ctx.access.reader, to_candidates=ctx.sparse_candidates,
                       thresholds=ctx.thresholds, leading=ctx.k)
        added = (*by_name, *found.added)
        st.n_out = len(added)
        st.decisions = {"names": [s.to_dict() for s in lookups], "searches": [a.to_dict() for a in found.attempts]}
        st.searches = [*(("name", s.entity, s.ms) for s in lookups),
                       *(("rescue", a.query, a.ms) for a in found.attempts)]
    return Rescued(added, pages, found.leads)
