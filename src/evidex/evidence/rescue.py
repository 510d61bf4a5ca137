"""Rescue: for each required family short of candidates, ONE bounded sparse search with its rescue
query, restricted to that family. Never an open retry loop.

A declared family (configuration, a question shape, an explicit plan) is searched across every record, so
evidence that exists but that the requester may not read is found, rejected by the gate and reported
`found-but-rejected`: the operator chose that disclosure when declaring the family. An automatic aspect is
the requester's own words, so its search sees only what the requester may read (`reader`); otherwise a
question could test whether restricted text contains a word.
"""

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


def rescue(store: Store, families: Sequence[RequiredFamily], pool: Sequence[Candidate], *,
           wide_limit: int, min_matches: int, reader: SearchFilters | None,
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
        hits = store.search_sparse(family.rescue_query, wide_limit, family_filters(family, reader))
        found = [c for c in to_candidates(hits) if c.chunk.record_id not in have and family.matches(c.chunk)]
        for c in found:
            have.add(c.chunk.record_id)
        added.extend(found)
        attempts.append(RescueAttempt(family.name, family.rescue_query, len(hits), len(found),
                                      (time.perf_counter() - started) * 1000))
    return added, attempts
