"""Score fusion of several ranked lists: reciprocal-rank fusion or a normalised weighted sum.

Two pitfalls users of other engines report are handled here, and tested:
- weights silently ignored: both modes apply the per-list weights (weighted RRF), and a zero weight
  really removes a list;
- duplicate ids inflating RRF: a list that returns one id twice (two chunks mapped to one id, a retry)
  counts it once, at its best rank.
With a `depth`, only the top `depth` hits of each list count (a deeper hit gets 0 from it, like an
absent one) and min-max normalisation maps them to [0, 1], so a query's order does not depend on how
many hits were fetched: asking for 200 instead of 100 must not reorder the first 10. A list whose
scores are all equal maps to 1.0 rather than dividing by zero. Ties break on record id, so fusion is
deterministic and independent of the order lists arrive in.
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


def min_max(scores: Sequence[float], depth: int | None = None) -> list[float]:
    """Ranked scores mapped to [0, 1] by the min and max of the first `depth` of them (all when None);
    the ones after that get 0."""
    if not scores:
        return []
    top = list(scores[:depth] if depth else scores)
    lo, hi = min(top), max(top)
    rest = [0.0] * (len(scores) - len(top))
    if hi == lo:
        return [1.0] * len(top) + rest
    return [(s - lo) / (hi - lo) for s in top] + rest


def fuse(lists: Sequence[Sequence[ScoredId]], weights: Sequence[float], mode: FusionMode,
         rrf_k: int = 60, depth: int | None = None) -> list[FusedHit]:
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
        for rank, (hit, value) in enumerate(zip(hits, min_max([h.score for h in hits], depth), strict=True), start=1):
            ranks.setdefault(hit.record_id, [None] * n)[i] = rank
            raw.setdefault(hit.record_id, [None] * n)[i] = hit.score
            norm.setdefault(hit.record_id, [0.0] * n)[i] = value
    total = math.fsum(weights)  # fsum: exact, so the order of the lists cannot change a score
    fused = []
    for record_id, id_ranks in ranks.items():
        if mode is FusionMode.RRF:
            score = math.fsum(w / (rrf_k + r) for w, r in zip(weights, id_ranks, strict=True)
                              if r is not None and (depth is None or r <= depth))
        else:
            score = math.fsum(w * v for w, v in zip(weights, norm[record_id], strict=True)) / total
        fused.append(FusedHit(record_id, score, tuple(id_ranks), tuple(raw[record_id]), tuple(norm[record_id])))
    fused.sort(key=lambda h: (-h.score, h.record_id))
    return fused
