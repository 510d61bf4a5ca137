"""Rescue: for each required family short of candidates, ONE bounded sparse search with its rescue
query, restricted to that family. Never an open retry loop."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from evidex.evidence.plan import RequiredFamily
from evidex.stores.protocol import Store
from evidex.types import Candidate, ScoredId, SearchFilters


@dataclass(frozen=True)
class RescueAttempt:
    family: str
    query: str
    hits: int  # store hits of the rescue search
    added: int  # candidates it added to the pool
    ms: float

    def to_dict(self) -> dict[str, object]:
        return {"family": self.family, "query": self.query, "hits": self.hits, "added": self.added}


def family_filters(family: RequiredFamily, base: SearchFilters | None) -> SearchFilters | None:
    """The store-side restriction for a family, on top of the request's own filters."""
    b = base or SearchFilters()
    if family.label is not None:
        return SearchFilters(b.access_labels, b.valid_at, (family.label,), b.source_pattern, b.doc_ids)
    if family.doc_ids:
        return SearchFilters(b.access_labels, b.valid_at, b.families, b.source_pattern, family.doc_ids)
    if family.source_regex is not None:
        return SearchFilters(b.access_labels, b.valid_at, b.families, family.source_regex, b.doc_ids)
    return base  # an automatic aspect: its membership is tested on the hits instead


def rescue(store: Store, families: Sequence[RequiredFamily], pool: Sequence[Candidate], *,
           wide_limit: int, min_matches: int, base_filters: SearchFilters | None,
           to_candidates: Callable[[list[ScoredId]], list[Candidate]]) -> tuple[list[Candidate], list[RescueAttempt]]:
    """Candidates added by rescue searches (not already in `pool`), and what each search did."""
    have = {c.chunk.record_id for c in pool}
    added: list[Candidate] = []
    attempts = []
    for family in families:
        present = sum(1 for c in pool if family.matches(c.chunk))
        if present >= min_matches:
            continue
        started = time.perf_counter()
        hits = store.search_sparse(family.rescue_query, wide_limit, family_filters(family, base_filters))
        found = [c for c in to_candidates(hits) if c.chunk.record_id not in have and family.matches(c.chunk)]
        for c in found:
            have.add(c.chunk.record_id)
        added.extend(found)
        attempts.append(RescueAttempt(family.name, family.rescue_query, len(hits), len(found),
                                      (time.perf_counter() - started) * 1000))
    return added, attempts
