"""Assembly: the final context, grouped by source, each chunk with its citation, family and scores.

Adjacent chunks of one source that belong together (one section split in two, a numbered step list
that continues) are kept together: when one is selected and its neighbour is among the candidates, the
neighbour is added while the budget allows, and the result says so.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from evidex.types import Candidate, Chunk

_STEP = re.compile(r"^\s*(\d+)[.)]\s", re.M)


def continues(first: Chunk, second: Chunk) -> bool:
    """True when `second` directly continues `first`: same document, next chunk, same section or steps."""
    if first.doc_id != second.doc_id or second.chunk_index != first.chunk_index + 1:
        return False
    if first.citation_anchor and first.citation_anchor == second.citation_anchor and first.heading:
        return True
    steps_first = _STEP.findall(first.text)
    steps_second = _STEP.findall(second.text)
    return bool(steps_first and steps_second and int(steps_second[0]) == int(steps_first[-1]) + 1)


@dataclass(frozen=True)
class Assembly:
    chunks: tuple[Candidate, ...]
    expanded: tuple[tuple[str, str], ...]  # (selected record id, neighbour added with it)


def expand_neighbours(selected: Sequence[Candidate], pool: Sequence[Candidate], budget: int) -> Assembly:
    chosen = list(selected)
    ids = {c.chunk.record_id for c in chosen}
    by_position = {(c.chunk.doc_id, c.chunk.chunk_index): c for c in pool}
    expanded = []
    for c in list(chosen):
        if len(chosen) >= budget:
            break
        for delta in (1, -1):
            n = by_position.get((c.chunk.doc_id, c.chunk.chunk_index + delta))
            if n is None or n.chunk.record_id in ids or len(chosen) >= budget:
                continue
            pair = (c.chunk, n.chunk) if delta == 1 else (n.chunk, c.chunk)
            if continues(*pair):
                chosen.append(n)
                ids.add(n.chunk.record_id)
                expanded.append((c.chunk.record_id, n.chunk.record_id))
    return Assembly(tuple(chosen), tuple(expanded))


def group_by_source(chunks: Sequence[Candidate]) -> list[list[Candidate]]:
    """Groups in order of each source's best chunk; within a group, document order."""
    groups: dict[str, list[Candidate]] = {}
    for c in chunks:
        groups.setdefault(c.chunk.source, []).append(c)
    return [sorted(g, key=lambda c: c.chunk.chunk_index) for g in groups.values()]
