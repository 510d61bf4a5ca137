"""Signals for agents, computed from a pipeline outcome in well under a millisecond: confidence, source
diversity, coverage, and the recommendation (proceed / re-query / stop)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from evidex.evidence.aspects import described_entities, described_phrases
from evidex.evidence.bridge import titled
from evidex.evidence.grade import Grade
from evidex.evidence.plan import PlanSource
from evidex.evidence.terms import chunk_terms, terms
from evidex.evidence.words import WordsHeld, words_held
from evidex.outcome import Action, FamilyState, Recommendation, SearchOutcome
from evidex.signals.coverage import DEFAULT_RANK_DEPTH, AspectState, AspectVerdict, CoveredBy, judge_aspects
from evidex.signals.model import ConfidenceModel, shipped_model
from evidex.types import Candidate

STOP_CONDITION = "stop-no-fresh-authorized-citable-source"


def confidence_model() -> dict[str, Any]:
    """The shipped model's parameters as written (`evidex calibrate` fits them; data, not code)."""
    return shipped_model().document


def features(outcome: SearchOutcome, nest: Nesting | None = None,
             cov: dict[str, Any] | None = None) -> dict[str, float]:
    """The quantities confidence is fitted on. All in [0, 1] or small ranges; cheap to compute. `nest` and `cov`:
    `nesting(outcome)` and `coverage(outcome, nest)` when the caller has them already."""
    nest = nest or nesting(outcome)
    cov = cov or coverage(outcome, nest)
    ctx = outcome.context
    scores = sorted((c.score for c in ctx), reverse=True)
    top = scores[0] if scores else 0.0
    lexical = [dict(c.scores).get("lexical", 0.0) for c in ctx]
    q_terms = set(terms(outcome.request.query))
    found_terms: set[str] = set()
    for c in ctx:
        found_terms |= q_terms & chunk_terms(c.chunk)[0]
    best_match = [max((f.match_score(c.chunk) for c in ctx), default=0.0) for f in outcome.plan.families]
    linked = [dict(c.scores).get("linked", 0.0) for c in ctx]
    return {
        "hops_unfollowed": nest.hops_unfollowed / 3,
        "chain_reach": nest.reach,
        "coverage": float(cov["ratio"]),  # aspects and families as judged (`coverage`)
        "min_family_match": min(best_match, default=1.0),
        "n_families": len(outcome.plan.families) / 6,
        "chained": 1.0 if outcome.plan.chained else 0.0,
        "linked": sum(linked) / len(linked) if linked else 0.0,
        "query_length": len(q_terms) / 30,
        "top_score": top,
        "mean_score": sum(scores) / len(scores) if scores else 0.0,
        "margin": (scores[0] - scores[min(len(scores) - 1, 4)]) if scores else 0.0,
        "top_lexical": max(lexical, default=0.0),
        "query_term_coverage": len(found_terms) / len(q_terms) if q_terms else 0.0,
        "dense_top": max((c.dense_score or 0.0 for c in ctx), default=0.0),
        "n_context": len(ctx) / max(1, outcome.request.k),
        "dense_commitment": dense_commitment(outcome.ranked),  # admitted candidates only
        "sparse_top": sparse_top(outcome.ranked, len(q_terms)),
        "page_agreement": page_agreement(outcome.ranked),  # admitted candidates only
    }


def page_agreement(candidates: Sequence[Candidate], depth: int = 10) -> float:
    """The share of the dense retriever's best `depth` pages that the sparse retriever also ranks among its best
    `depth` (a post-retrieval query-performance predictor: two retrievers that agree on where the answer is
    are more often right than two that do not)."""
    def best_pages(rank_of: Callable[[Candidate], int | None]) -> set[str]:
        ranked = sorted((c for c in candidates if rank_of(c) is not None), key=lambda c: rank_of(c) or 0)
        return set(list(dict.fromkeys(c.chunk.doc_id for c in ranked))[:depth])

    dense, sparse = best_pages(lambda c: c.dense_rank), best_pages(lambda c: c.sparse_rank)
    return len(dense & sparse) / depth if dense and sparse else 0.0


def sparse_top(candidates: Sequence[Candidate], query_terms: int) -> float:
    """The best BM25 score among the admitted candidates per query term: how strongly the words of the query
    occur together in one passage (BM25 grows with the number of matched terms, hence the division)."""
    best = max((c.sparse_score for c in candidates if c.sparse_score is not None), default=0.0)
    return best / max(1, query_terms) / 10


def dense_commitment(candidates: Sequence[Candidate], depth: int = 10) -> float:
    """Normalised query commitment of the dense retriever (after Shtok et al., 2012): the spread of the top
    admitted similarities relative to their mean. Best matches that stand out from the rest predict a well
    answered query; a flat list, one the index cannot tell apart."""
    by_rank = sorted((c for c in candidates if c.dense_rank is not None), key=lambda c: c.dense_rank or 0)
    top = [c.dense_score for c in by_rank[:depth] if c.dense_score is not None]
    if len(top) < 2:
        return 0.0
    mean = sum(top) / len(top)
    spread = math.sqrt(sum((x - mean) ** 2 for x in top) / len(top))
    return spread / mean if mean > 0 else 0.0


@dataclass(frozen=True)
class Nesting:
    """How far a nested question's evidence reaches: the entities it describes (`need`), the followed pages in
    the context (`linked`), and the evidence chain from the page it names (`chain`, in pages)."""

    nested: bool
    need: int = 0
    linked: int = 0
    chain: int = 0

    @property
    def hops_unfollowed(self) -> int:
        """Described entities the evidence does not reach (0 for a question that does not nest).

        Besides the page the question names, it needs one page per entity it describes ("the city where
        the architect of X was born": the architect's page, the city's), so a chain of that many pages plus
        one from the named page. Pages do not always name each other verbatim, so a bridge that followed that
        many pages stands in for the chain; at least one followed page and a chain as long as the count are
        always needed."""
        if not self.nested:
            return 0
        need, linked, chain = self.need, self.linked, self.chain
        return min(need, max(0, need - linked, need - chain, min(need + 1 - chain, need + 1 - linked)))

    @property
    def reach(self) -> float:
        """The share of the described entities the chain from the named page reaches (1.0 when not nested)."""
        return max(0.0, min(1.0, (self.chain - 1) / self.need)) if self.nested else 1.0


def nesting(outcome: SearchOutcome) -> Nesting:
    need = described_entities(outcome.request.query)
    if not (outcome.plan.chained and outcome.plan.aspects and need):
        return Nesting(nested=False)
    return Nesting(nested=True, need=need,
                   linked=len({c.chunk.doc_id for c in outcome.context if c.chunk.record_id in outcome.followed}),
                   chain=evidence_chain(outcome))


def evidence_chain(outcome: SearchOutcome) -> int:
    """How far the context's evidence reaches from the page the question names, in pages: that page, then
    pages named in its text ("Salt Road (film)" -> "Mara Voss"), pages named in theirs, and so on
    (breadth first, so each page counts at its nearest distance); 0 when no page the question names is in
    the context."""
    pages: dict[str, tuple[str, str]] = {}
    for c in outcome.context:
        title, text = pages.get(c.chunk.doc_id, (c.chunk.title, ""))
        pages[c.chunk.doc_id] = (title, f"{text} {c.chunk.text}".lower())
    names = [f.name for f in outcome.plan.families if f.entity]
    bare = {d: outcome.titles.bare(title).lower() for d, (title, _) in pages.items()}
    frontier = list(dict.fromkeys(c.chunk.doc_id for c in outcome.context
                                  if any(titled(c, n, outcome.titles) for n in names)))
    reached = set(frontier)
    depth = 0
    while frontier:
        depth += 1
        frontier = [b for b in pages if b not in reached and bare[b]
                    and any(bare[b] in pages[a][1] for a in frontier)]
        reached.update(frontier)
    return depth


def bounded_confidence(outcome: SearchOutcome, feats: dict[str, float], model: ConfidenceModel | None = None) -> float:
    """The fitted confidence, bounded by what is known to be missing. A family declared by its members (a
    question shape's, the caller's) is a requirement, not a guess: while a share of them has no admitted
    evidence (missing, or found but rejected), the result's quality is at most the share covered, so a stop over
    restricted evidence never reads as sure. An aspect the agent focused on is not declared."""
    value = confidence(feats, model)
    declared = {f.name for f in outcome.plan.families if f.is_store_filterable}  # not an agent's focus
    statuses = [f.status for f in outcome.families if f.name in declared]
    if statuses:
        value = min(value, statuses.count(FamilyState.COVERED) / len(statuses))
    return value


def confidence(feats: dict[str, float], model: ConfidenceModel | None = None) -> float:
    """The fitted logistic model (the shipped one unless `model`) on the features, each first clipped to the
    range it took in training: a question unlike any the model saw is scored at the edge of what it knows, not
    by extrapolation."""
    return (model or shipped_model()).probability(feats)


def source_diversity(outcome: SearchOutcome) -> dict[str, Any]:
    chunks = [c.chunk for c in outcome.context]
    domains = {urlparse(c.provenance.citation_uri).netloc for c in chunks if c.provenance.citation_uri}
    dates = sorted(c.provenance.published_at for c in chunks if c.provenance.published_at is not None)
    return {
        "sources": len({c.source for c in chunks}),
        "documents": len({c.doc_id for c in chunks}),
        "domains": len(domains),
        "date_span_days": (dates[-1] - dates[0]).days if len(dates) > 1 else 0,
        "oldest": dates[0].strftime("%Y-%m-%d") if dates else None,
        "newest": dates[-1].strftime("%Y-%m-%d") if dates else None,
    }


HOP_ASPECT = "the entities the question describes (further hops)"


def coverage(outcome: SearchOutcome, nest: Nesting | None = None, depth: int = DEFAULT_RANK_DEPTH) -> dict[str, Any]:
    """Each planned aspect judged covered, missing or not in the index (`judge_aspects`; `depth`: `[signals]
    aspect_rank_depth`), with the evidence that decided it under "aspects", and the lists and ratio clients read."""
    verdicts = judge_aspects(outcome, depth)
    nest = nest or nesting(outcome)
    if nest.nested:
        # A nested question ("the city where the architect of X was born") also needs the evidence hops
        # away: pages reached by following names out of the first evidence, at least one per entity the
        # question describes (here two: the architect, the city), connected to the page the question names
        # (`evidence_chain`). Without a named starting point ("a release that is already serving traffic") a
        # relative clause only describes; no hop.
        verdicts.insert(len(outcome.plan.aspects), AspectVerdict(
            HOP_ASPECT, AspectState.MISSING if nest.hops_unfollowed else AspectState.COVERED,
            CoveredBy.EVIDENCE_CHAIN, float(nest.hops_unfollowed)))
    by_aspect = {state: [v.aspect for v in verdicts if v.status is state] for state in AspectState}
    covered, missing = by_aspect[AspectState.COVERED], by_aspect[AspectState.MISSING]
    # An identifier the question quotes that no readable record holds is no obligation (it took no slot of the
    # plan), but the evidence still says nothing of it: it counts against the ratio like a missing aspect, so an
    # answer about a subject the corpus never names does not proceed.
    not_in_index = by_aspect[AspectState.NOT_IN_INDEX]
    total = len(verdicts)
    by_status: dict[FamilyState, list[str]] = {state: [] for state in FamilyState}
    declared = {f.name for f in outcome.plan.families if f.is_store_filterable}
    for f in outcome.families:
        # An automatic aspect's family stands as its aspect was judged; a declared family (a shape's, the
        # caller's) as the pipeline found its members; found but rejected stays so.
        status = f.status
        if f.status is FamilyState.MISSING and f.name not in declared and f.name in covered:
            status = FamilyState.COVERED
        by_status[status].append(f.name)
    aspect_ratio = len(covered) / total if total else 1.0
    family_ratio = len(by_status[FamilyState.COVERED]) / len(outcome.families) if outcome.families else 1.0
    return {
        "aspects_covered": covered,
        "aspects_missing": missing,
        # Identifiers the question quotes that no readable record holds (the requester's own values, or a spelling
        # the index does not use): missing, but a re-query for them would find nothing.
        "aspects_not_in_index": not_in_index,
        "aspects": [v.to_dict() for v in verdicts],
        # The lesser of the two: a family found but rejected is not covered, whatever the aspects say.
        "ratio": round(min(aspect_ratio, family_ratio), 4),
        "families_covered": by_status[FamilyState.COVERED],
        "families_missing": by_status[FamilyState.MISSING],
        "families_found_but_rejected": by_status[FamilyState.FOUND_BUT_REJECTED],
    }


def planned(cov: dict[str, Any], families: Sequence[Any]) -> bool:
    """Whether the plan had anything to cover (aspects, or families), so that a coverage ratio means something:
    `cov` is `coverage()`'s, `families` the outcome's or a result's."""
    return bool(cov["aspects_covered"] or cov["aspects_missing"] or cov["aspects_not_in_index"] or families)


def is_stop(outcome: SearchOutcome) -> bool:
    """Nothing admissible and relevant remains: no context at all, or only noise after grading, while
    candidates were rejected by the gate."""
    if not outcome.context:
        return True
    rejected = outcome.gate is not None and bool(outcome.gate.rejected)
    no_valid = outcome.graded is not None and outcome.graded.overall is Grade.INCORRECT
    return rejected and no_valid


def next_step_owner(outcome: SearchOutcome, fallback: str | None, blocked: Sequence[str] = ()) -> str | None:
    """Who can unblock the request: the most frequent owner among the rejected records of the `blocked`
    families (all rejected records when none is named or none of theirs has an owner), else `fallback`. An
    expired page of another topic must not name its owner as the one to ask for a restricted family."""
    if outcome.gate is None:
        return fallback
    rejected = list(outcome.gate.rejected)
    families = [f for f in outcome.plan.families if f.name in blocked]
    if families:
        chunks = {c.chunk.record_id: c.chunk for c in outcome.ranked_all}
        theirs = [r for r in rejected if r.owner and r.record_id in chunks
                  and any(f.matches(chunks[r.record_id]) for f in families)]
        rejected = theirs or rejected
    owners = Counter(r.owner for r in rejected if r.owner)
    return owners.most_common(1)[0][0] if owners else fallback


NOTHING_PLANNED = "no aspect or family planned; the evidence holds the question's words"
NO_SEARCHABLE_WORDS = "the question has no searchable words (only stopwords or punctuation): rephrase it"


def describe_off_topic(words: WordsHeld) -> str:
    found, asked = words.held, words.asked
    if found == 0:
        what = "none of the question's words occurs"
    elif found * 2 < asked:
        what = f"only {found} of the question's {asked} words occur{'s' if found == 1 else ''}"
    else:  # most words are held, but not the rare ones that say what the question is about
        what = f"{found} of the question's {asked} words occur, but not {', '.join(words.missing)},"
    return f"{what} in the evidence: it may be off-topic for this index"


def recommend(outcome: SearchOutcome, cov: dict[str, Any], *, threshold: float, min_question_word_share: float,
              confidence: float, min_proceed_confidence: float, default_owner: str | None,
              proceed_confidence: float = 0.0) -> Recommendation:
    blocked = tuple(cov["families_found_but_rejected"])
    if is_stop(outcome):
        return Recommendation(Action.STOP, STOP_CONDITION, owner=next_step_owner(outcome, default_owner, blocked))
    if blocked and outcome.plan.source in (PlanSource.CALLER, PlanSource.SHAPE):
        # Required evidence exists but this requester may not use it (restricted, expired, uncitable): a
        # re-query cannot fix that; a person can. Checked before the question's own words: a declared family
        # is required whatever else the question says (it had come back "may be off-topic").
        return Recommendation(Action.STOP, STOP_CONDITION, focus=blocked,
                              owner=next_step_owner(outcome, default_owner, blocked))
    focus = outcome.request.aspect_focus
    query = f"{outcome.request.query} {focus}" if focus else outcome.request.query  # as the reranker read it
    # The question's words no evidence holds, as one focus (not for a caller's plan; not the plan's `unheld`
    # identifiers, which no record holds at all).
    absent_words: tuple[str, ...] = ()
    if outcome.plan.source is not PlanSource.CALLER:
        words = words_held(query, outcome.context, outcome.ranked)  # admitted candidates only
        if not words.asked:
            # Only stopwords or punctuation: whatever came back matched nothing the question says.
            return Recommendation(Action.REQUERY, NO_SEARCHABLE_WORDS)
        if outcome.context and words.weighted_share < min_question_word_share:
            # Most of what the question says, weighed by rarity, is in no evidence ("how do I file an expense
            # report for travel?" against an engineering handbook; or its rarest words, "HSM master key ceremony
            # custodians"): the dense neighbours of an off-topic question are not an answer to it
            # (`scripts/eval_offtopic.py` measures how often this fires on and off a corpus's own domain).
            return Recommendation(Action.REQUERY, describe_off_topic(words), focus=(" ".join(words.missing),))
        absent_words = (" ".join(words.missing),) if words.missing else ()
    ratio = cov["ratio"]
    if ratio < threshold:
        # The hop itself is not a phrase to search for: an agent re-queries the missing named aspects, else
        # the descriptions that start from a name ("the architect of the Harbour Library"), innermost first.
        aspects = (tuple(a for a in cov["aspects_missing"] if a != HOP_ASPECT) or tuple(cov["families_missing"])
                   or (tuple(described_phrases(outcome.request.query)) if HOP_ASPECT in cov["aspects_missing"]
                       else ()))
        if not aspects and cov["aspects_not_in_index"]:
            # Only what the index holds no record of is missing: searching for it again cannot find it.
            return Recommendation(Action.REQUERY, f"coverage {ratio:.2f} is below {threshold:.2f}: the index holds no "
                                  f"record of {', '.join(cov['aspects_not_in_index'])}; rephrase or ask elsewhere")
        return Recommendation(Action.REQUERY, f"coverage {ratio:.2f} is below {threshold:.2f}", focus=aspects)
    if confidence < min_proceed_confidence and absent_words:
        # Some of the question's words are in no evidence (too few, by weight, for the check above), and the
        # fitted model expects little of the answer: a near miss, such as "kubelet eviction thresholds" asked of
        # a handbook that mentions a kubelet and thresholds but never eviction. Both are needed: on a corpus of
        # a few pages the confidence is low even for an answer that holds every word of the question.
        return Recommendation(Action.REQUERY, f"confidence {confidence:.2f} is below {min_proceed_confidence:.2f} and "
                              f"the evidence lacks {absent_words[0]}: it may not answer the question",
                              focus=absent_words)
    return _proceed_or_requery(outcome, cov, absent_words, confidence, proceed_confidence)


def _proceed_or_requery(outcome: SearchOutcome, cov: dict[str, Any], absent_words: tuple[str, ...],
                        confidence: float, proceed_confidence: float) -> Recommendation:
    """Proceed only on the evidence: no required family missing and a calibrated confidence that clears
    `proceed_confidence`. Nothing planned is no pass: the confidence alone must clear it. A re-query names
    what to focus on: the missing families, else the question's words no evidence holds, else its aspects. A
    required family is a declared one (a question shape's, the caller's); an automatic aspect is a guess that
    the coverage ratio and the confidence already weigh."""
    declared = {f.name for f in outcome.plan.families if f.is_store_filterable}
    required_missing = tuple(name for name in cov["families_missing"] if name in declared)
    if required_missing:
        return Recommendation(Action.REQUERY, f"required evidence missing: {', '.join(required_missing)}",
                              focus=required_missing)
    if confidence < proceed_confidence:
        focus = (tuple(a for a in cov["aspects_missing"] if a != HOP_ASPECT) or absent_words
                 or tuple(a for a in outcome.plan.aspects) or (outcome.request.query,))
        return Recommendation(Action.REQUERY, f"confidence {confidence:.2f} is below {proceed_confidence:.2f}: the "
                              "evidence may not hold everything the question needs", focus=focus)
    if not planned(cov, outcome.families):
        # Nothing was planned to check; the terminal shows "coverage n/a" beside it, not a vacuous 1.00.
        return Recommendation(Action.PROCEED, NOTHING_PLANNED)
    return Recommendation(Action.PROCEED, f"coverage {cov['ratio']:.2f}, confidence {confidence:.2f}")
