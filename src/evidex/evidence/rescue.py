"""Rescue: for each required family short of candidates that grading would keep, ONE bounded sparse search
with its rescue query, restricted to that family. Never an open retry loop.

A declared family (configuration, a question shape, an explicit plan) is searched across every record, so
evidence that exists but that the requester may not read is found, rejected by the gate and reported
`found-but-rejected`: the operator chose that disclosure when declaring the family. An automatic aspect is
the requester's own words, so its search sees only what the requester may read (`reader`); otherwise a
question could test whether restricted text contains a word.

An automatic aspect that nothing meets by its terms, before or after its search, gets a *lead*: the search's
best hit that speaks of the aspect, from a page the leading candidates do not already hold ("which retry
budget does that client get" -> a page on retries, which holds "retry" but not "budget"). A lead is
kept in the context like evidence, but never covers its aspect: the aspect is still reported missing. An
identifier (met only whole) gets no lead: a page that does not hold it is not about it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from evidex.evidence.grade import DEFAULT_THRESHOLDS, GradeThresholds, validates
from evidex.evidence.plan import RequiredFamily
from evidex.evidence.terms import chunk_terms, holds_verbatim
from evidex.evidence.words import speaks_of
from evidex.stores.protocol import Store
from evidex.types import Candidate, ScoredId, SearchFilters


@dataclass(frozen=True)
class RescueAttempt:
    family: str
    query: str
    hits: int  # store hits of the rescue search
    added: int  # candidates it added to the pool
    ms: float
    lead: str | None = None  # the record kept for an aspect nothing met (see the module's docstring)

    def to_dict(self) -> dict[str, object]:
        d: dict[str, object] = {"family": self.family, "query": self.query, "hits": self.hits, "added": self.added}
        if self.lead is not None:
            d["lead"] = self.lead
        return d


@dataclass(frozen=True)
class Rescued:
    added: list[Candidate]  # candidates the searches found that the pool did not hold
    attempts: list[RescueAttempt]

    @property
    def leads(self) -> dict[str, str]:
        """Aspect name -> the record kept for it when nothing met it."""
        return {a.family: a.lead for a in self.attempts if a.lead is not None}


def family_filters(family: RequiredFamily, reader: SearchFilters | None) -> SearchFilters | None:
    """The store-side restriction of a family's rescue search: its declared membership, or, for an automatic
    aspect (whose membership is tested on the hits), what the requester may read."""
    if family.label is not None:
        return SearchFilters(families=(family.label,))
    if family.doc_ids:
        return SearchFilters(doc_ids=family.doc_ids)
    if family.source_regex is not None:
        return SearchFilters(source_pattern=family.source_regex)
    return reader


def index_holds(store: Store, identifier: str, *, limit: int, reader: SearchFilters | None) -> bool:
    """Whether a record the requester may read holds `identifier` whole: among the best `limit` hits of the
    search an identifier's rescue would make, so an identifier this says no to is one no rescue could meet."""
    hits = store.search_sparse(identifier, limit, reader, scope=reader.access_labels if reader is not None else None)
    return any(holds_verbatim(c, identifier) for c in store.get([h.record_id for h in hits]))


def rescue(store: Store, families: Sequence[RequiredFamily], pool: Sequence[Candidate], *,
           wide_limit: int, min_matches: int, reader: SearchFilters | None,
           to_candidates: Callable[[list[ScoredId]], list[Candidate]],
           thresholds: GradeThresholds = DEFAULT_THRESHOLDS, leading: int = 10) -> Rescued:
    """Candidates added by rescue searches (not already in `pool`), what each search did, and the leads
    for automatic aspects nothing met, from pages the first `leading` candidates of `pool` do not hold.

    A family is searched when fewer than `min_matches` of its members in `pool` are evidence grading would
    keep for it (`supports`): a declared family's page that the question's words reach only in passing (an
    add-ons list for "network policy provider") is noise to the grader, which would then report the family
    missing while its real evidence was one search away."""
    have = {c.chunk.record_id for c in pool}
    leading_pages = {c.chunk.doc_id for c in pool[:leading]}
    added: list[Candidate] = []
    attempts = []
    for family in families:
        members = [c for c in pool if family.matches(c.chunk)]
        if sum(1 for c in members if validates(c, family, thresholds)) >= min_matches:
            continue
        present = len(members)
        started = time.perf_counter()
        # Word rarity from what the requester may read, even when the search itself spans every record.
        hits = store.search_sparse(family.rescue_query, wide_limit, family_filters(family, reader),
                                   scope=reader.access_labels if reader is not None else None)
        hit_candidates = to_candidates(hits)
        found = [c for c in hit_candidates if c.chunk.record_id not in have and family.matches(c.chunk)]
        lead = None
        if not found and present == 0 and not family.is_store_filterable and not family.verbatim:
            telling = _telling_terms(family, hit_candidates)
            lead = next((c for c in hit_candidates if c.chunk.doc_id not in leading_pages
                         and speaks_of(c.chunk, family.name) and telling & chunk_terms(c.chunk)[0]), None)
            if lead is not None:
                found = [lead] if lead.chunk.record_id not in have else []
        for c in found:
            have.add(c.chunk.record_id)
        added.extend(found)
        attempts.append(RescueAttempt(family.name, family.rescue_query, len(hits), len(found),
                                      (time.perf_counter() - started) * 1000,
                                      lead.chunk.record_id if lead is not None else None))
    return Rescued(added, attempts)


def _telling_terms(family: RequiredFamily, hits: Sequence[Candidate]) -> frozenset[str]:
    """The aspect's terms that at most half of its search's hits hold (any, when it has one hit): a lead must hold
    one, so that a word most hits share ("go" in "where does egress go") cannot pick it."""
    def held_by(term: str) -> int:
        return sum(1 for c in hits if term in chunk_terms(c.chunk)[0])

    return frozenset(t for t in family.aspect_terms if held_by(t) <= max(1, len(hits) // 2))
