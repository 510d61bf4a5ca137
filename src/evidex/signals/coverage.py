"""Coverage per planned aspect: covered, missing or not in the index, with the evidence that decided it.

An aspect is covered when a chunk of the context holds enough of its words (`RequiredFamily.matches`, the term
share), or when the context holds one of the pages the aspect's own ranking puts first: the admitted candidates
ordered by how well each speaks of the aspect alone (its match score, the pipeline's order breaking ties). The
second test judges meaning the first misses: an answer that paraphrases the aspect ("stop the token being
mounted" for "automountServiceAccountToken off") shares few of its words, yet the page that speaks of it best is
the one in the context. A page that does not speak of the aspect at all (score 0) never covers it, however it
ranks. An identifier the question quotes that no readable record holds is not in the index.

    verdicts = judge_aspects(outcome, depth=2)
    [v.to_dict() for v in verdicts]  # [{"aspect": ..., "status": "covered", "by": "own-ranking", "score": 0.0}]

Both tests read only what the pipeline computed (the context, the admitted candidates and the plan's term
weights): no search and no encoder call, so the signals stay cheap.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evidex.evidence.plan import RequiredFamily
from evidex.evidence.terms import terms
from evidex.outcome import SearchOutcome
from evidex.types import Candidate

DEFAULT_RANK_DEPTH = 2  # `[signals] aspect_rank_depth`


class AspectState(enum.StrEnum):
    """Where a planned aspect stands against the context."""

    COVERED = "covered"
    MISSING = "missing"
    NOT_IN_INDEX = "not-in-index"


class CoveredBy(enum.StrEnum):
    """The evidence that decided an aspect's state."""

    TERMS = "terms"  # a context chunk holds enough of the aspect's words (score: the best term share)
    OWN_RANKING = "own-ranking"  # a context page is among the aspect's own best pages (score: its place, 0 = first)
    EVIDENCE_CHAIN = "evidence-chain"  # the hops of a nested question (score: hops the evidence does not reach)
    NO_RECORD = "no-record"  # no readable record holds the identifier
    NOTHING = "nothing"  # neither test met it (score: the best term share)


@dataclass(frozen=True)
class AspectVerdict:
    aspect: str
    status: AspectState
    by: CoveredBy
    score: float

    def to_dict(self) -> dict[str, Any]:
        return {"aspect": self.aspect, "status": self.status.value, "by": self.by.value, "score": round(self.score, 4)}


def probe_of(outcome: SearchOutcome, aspect: str) -> RequiredFamily:
    """The planned family of `aspect` (which carries the pipeline's term weights and known records), else one
    made from its words."""
    planned = {f.name: f for f in outcome.plan.families}
    return planned.get(aspect) or RequiredFamily(name=aspect, rescue_query=aspect, aspect_terms=terms(aspect))


def own_rank(probe: RequiredFamily, ranked: Sequence[Candidate], pages: set[str]) -> int | None:
    """The place (0 = first) of the best page of `pages` in the aspect's own ranking of `ranked`: pages ordered
    by their best chunk's match score, that chunk's place in `ranked` breaking ties; None when no page of `pages`
    speaks of the aspect (match score 0)."""
    best: dict[str, tuple[float, int]] = {}
    for i, c in enumerate(ranked):
        key = (probe.match_score(c.chunk), -i)
        best[c.chunk.doc_id] = max(key, best.get(c.chunk.doc_id, key))
    order = sorted(best.items(), key=lambda kv: kv[1], reverse=True)
    for place, (doc_id, (score, _)) in enumerate(order):
        if doc_id in pages and score > 0:
            return place
    return None


def judge_aspect(outcome: SearchOutcome, aspect: str, depth: int) -> AspectVerdict:
    """Covered by its words, else by its own ranking within `depth` pages, else missing."""
    probe = probe_of(outcome, aspect)
    chunks = [c.chunk for c in outcome.context]
    share = max((probe.match_score(c) for c in chunks), default=0.0)
    if any(probe.matches(c) for c in chunks):
        return AspectVerdict(aspect, AspectState.COVERED, CoveredBy.TERMS, share)
    place = own_rank(probe, outcome.ranked, {c.doc_id for c in chunks}) if depth > 0 else None
    if place is not None and place < depth:
        return AspectVerdict(aspect, AspectState.COVERED, CoveredBy.OWN_RANKING, float(place))
    return AspectVerdict(aspect, AspectState.MISSING, CoveredBy.NOTHING, share)


def judge_aspects(outcome: SearchOutcome, depth: int = DEFAULT_RANK_DEPTH) -> list[AspectVerdict]:
    """A verdict for each planned aspect, then each quoted identifier no readable record holds."""
    verdicts = [judge_aspect(outcome, a, depth) for a in outcome.plan.aspects]
    return verdicts + [AspectVerdict(u, AspectState.NOT_IN_INDEX, CoveredBy.NO_RECORD, 0.0)
                       for u in outcome.plan.unheld]
