"""Score fusion of several ranked lists: reciprocal-rank fusion or a normalised weighted sum.

Two pitfalls users of other engines report are handled here, and tested:
- weights silently ignored: both modes apply the per-list weights (weighted RRF), and a zero weight
  really removes a list;
- duplicate ids inflating RRF: a list that returns one id twice (two chunks mapped to one id, a retry)
  counts it once, at its best rank.
Min-max normalisation maps each list to [0, 1]; a list whose scores are all equal maps to 1.0 rather
than dividing by zero. An id absent from a list gets 0 from it. Ties break on record id, so fusion
is deterministic and independent of the order lists arrive in.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from evidex.types import FusionMode, ScoredId


@dataclass(frozen=True)
class FusedHit:
    record_id: str
    score: float
    ranks: tuple[int | None, ...]  # 1-based rank in each input list (None: absent)
    raw: tuple[float | None, ...]  # raw score in each input list
    normalized: tuple[float, ...]  # min-max normalised score in each list (0 when absent)


def dedupe(hits: Sequence[ScoredId]) -> list[ScoredId]:
    """Keep each id once, at its first (best) position."""
    seen: set[str] = set()
    out = []
    for hit in hits:
        if hit.record_id not in seen:
            seen.add(hit.record_id)
            out.append(hit)
    return out


def min_max(scores: Sequence[float]) -> list[float]:
    if not scores:
        return []
    lo, hi = min(scores), max(scores)
    if hi == lo:
        return [1.0] * len(scores)
    return [(s - lo) / (hi - lo) for s in scores]


def fuse(lists: Sequence[Sequence[ScoredId]], weights: Sequence[float], mode: FusionMode,
         rrf_k: int = 60) -> list[FusedHit]:
    if len(lists) != len(weights):
        raise ValueError(f"fuse: {len(lists)} lists but {len(weights)} weights")
    if any(w < 0 for w in weights) or sum(weights) == 0:
        raise ValueError("fuse: weights must be >= 0 and not all 0")
    clean = [dedupe(hits) for hits in lists]
    ranks: dict[str, list[int | None]] = {}
    raw: dict[str, list[float | None]] = {}
    norm: dict[str, list[float]] = {}
    n = len(clean)
    for i, hits in enumerate(clean):
        for rank, (hit, value) in enumerate(zip(hits, min_max([h.score for h in hits]), strict=True), start=1):
            ranks.setdefault(hit.record_id, [None] * n)[i] = rank
            raw.setdefault(hit.record_id, [None] * n)[i] = hit.score
            norm.setdefault(hit.record_id, [0.0] * n)[i] = value
    total = math.fsum(weights)  # fsum: exact, so the order of the lists cannot change a score
    fused = []
    for record_id, id_ranks in ranks.items():
        if mode is FusionMode.RRF:
            score = math.fsum(w / (rrf_k + r) for w, r in zip(weights, id_ranks, strict=True)
                              if r is not None)
        else:
            score = math.fsum(w * v for w, v in zip(weights, norm[record_id], strict=True)) / total
        fused.append(FusedHit(record_id, score, tuple(id_ranks), tuple(raw[record_id]), tuple(norm[record_id])))
    fused.sort(key=lambda h: (-h.score, h.record_id))
    return fused
