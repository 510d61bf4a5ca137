"""Constrained top-k: the best admitted chunk of each required family first, then global rank, cut at k.

A cap on chunks per document keeps one long page from crowding out the other families' sources.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from evidex.evidence.plan import RequiredFamily
from evidex.types import Candidate


@dataclass(frozen=True)
class Selection:
    chunks: tuple[Candidate, ...]  # in final order (score descending)
    reserved: dict[str, str]  # family name -> record id reserved for it


def reserve(ranked: Sequence[Candidate], families: Sequence[RequiredFamily], k: int,
            max_per_doc: int = 0) -> Selection:
    chosen: dict[str, Candidate] = {}
    per_doc: dict[str, int] = {}
    reserved: dict[str, str] = {}

    def take(c: Candidate) -> None:
        chosen[c.chunk.record_id] = c
        per_doc[c.chunk.doc_id] = per_doc.get(c.chunk.doc_id, 0) + 1

    present = {c.chunk.record_id for c in ranked}
    for family in families:
        if len(chosen) >= k:
            break
        # A family whose best evidence is known (a page its name titles) and admitted is met only by that
        # evidence; when none of it was admitted, by its other members as usual.
        known = present.intersection(family.record_ids)
        already = next((c for c in chosen.values() if (c.chunk.record_id in known if known
                                                        else family.matches(c.chunk))), None)
        if already is not None:
            reserved[family.name] = already.chunk.record_id
            continue
        members = [c for c in ranked if c.chunk.record_id not in chosen and family.matches(c.chunk)]
        # An aspect's best evidence is the chunk that covers it most, then the best ranked.
        best = max(members, key=lambda c: (round(family.match_score(c.chunk), 3), c.score), default=None)
        if best is not None:
            take(best)
            reserved[family.name] = best.chunk.record_id
    for c in ranked:
        if len(chosen) >= k:
            break
        if c.chunk.record_id in chosen:
            continue
        if max_per_doc and per_doc.get(c.chunk.doc_id, 0) >= max_per_doc:
            continue
        take(c)
    if len(chosen) < k and max_per_doc:  # the cap never leaves slots empty
        for c in ranked:
            if len(chosen) >= k:
                break
            if c.chunk.record_id not in chosen:
                take(c)
    ordered = sorted(chosen.values(), key=lambda c: (-c.score, c.chunk.record_id))
    return Selection(tuple(ordered), reserved)
