"""Ranking and evidence metrics. Each takes one question's ranked chunks; the runner averages."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from evidex.evaluation.datasets import Question
from evidex.types import Chunk


def family_recall(question: Question, chunks: Sequence[Chunk]) -> float:
    if not question.families:
        return 1.0
    covered = sum(1 for f in question.families if any(f.matches(c) for c in chunks))
    return covered / len(question.families)


def missed_families(question: Question, context: Sequence[Chunk], ranking: Sequence[Chunk]) -> list[dict[str, Any]]:
    """The families `context` holds no member of, each with the document rank of its best member in `ranking`
    (1-based over distinct documents; None when the ranking holds none): a miss ranked 12th lost its slot,
    one with no rank was never retrieved."""
    pages = doc_ranking(ranking)
    missed = []
    for f in question.families:
        if any(f.matches(c) for c in context):
            continue
        rank = next((i for i, c in enumerate(pages, start=1) if f.matches(c)), None)
        missed.append({"family": f.name, "document_rank": rank})
    return missed


def doc_ranking(chunks: Sequence[Chunk]) -> list[Chunk]:
    """One entry per document, at its best chunk's position (document-level metrics)."""
    seen: set[str] = set()
    out = []
    for c in chunks:
        if c.doc_id not in seen:
            seen.add(c.doc_id)
            out.append(c)
    return out


def _relevant_total(question: Question) -> int | None:
    if question.qrels:
        return sum(1 for g in question.qrels.values() if g > 0)
    if all(f.doc_ids and f.source_regex is None for f in question.families):
        return len({d for f in question.families for d in f.doc_ids})
    return None  # regex families: the number of relevant documents is open-ended


def ndcg_at(question: Question, chunks: Sequence[Chunk], k: int = 10) -> float | None:
    docs = doc_ranking(chunks)[:k]
    gains = [question.is_relevant(c) for c in docs]
    dcg = sum(g / math.log2(i + 2) for i, g in enumerate(gains))
    if question.qrels:
        ideal = sorted(question.qrels.values(), reverse=True)[:k]
    else:
        total = _relevant_total(question)
        if total is None:  # families matched by a source pattern: no ideal ranking to compare with
            return None
        ideal = [1] * min(total, k)
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else None


def recall_at(question: Question, chunks: Sequence[Chunk], k: int = 100) -> float | None:
    total = _relevant_total(question)
    if not total:
        return None
    found = {c.doc_id for c in doc_ranking(chunks)[:k] if question.is_relevant(c)}
    return len(found) / total


def reciprocal_rank(question: Question, chunks: Sequence[Chunk]) -> float:
    for i, c in enumerate(doc_ranking(chunks), start=1):
        if question.is_relevant(c):
            return 1.0 / i
    return 0.0


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def _ranks(values: Sequence[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for m in range(i, j + 1):
            ranks[order[m]] = (i + j) / 2 + 1  # ties share their mean rank
        i = j + 1
    return ranks


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rank correlation (Pearson on mean ranks); None when either side is constant."""
    if len(x) != len(y) or len(x) < 3:
        return None
    rx, ry = _ranks(x), _ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    vx = sum((a - mx) ** 2 for a in rx)
    vy = sum((b - my) ** 2 for b in ry)
    if vx == 0 or vy == 0:
        return None
    return cov / math.sqrt(vx * vy)


def spearman_ceiling(y: Sequence[float]) -> float | None:
    """The Spearman correlation with `y` of a perfect predictor that never ties: one that orders every
    question by its true quality and breaks quality ties arbitrarily. When most of `y` is tied (nearly every
    answer complete), even this predictor stays far below 1: a bound on what any continuous score can reach."""
    strict = [0.0] * len(y)
    for position, i in enumerate(sorted(range(len(y)), key=lambda i: y[i])):
        strict[i] = float(position)
    return spearman(strict, y)


def auroc(scores: Sequence[float], positive: Sequence[bool]) -> float | None:
    """Probability that a positive outranks a negative (ties count half); None without both classes."""
    pos = [s for s, p in zip(scores, positive, strict=True) if p]
    neg = [s for s, p in zip(scores, positive, strict=True) if not p]
    if not pos or not neg:
        return None
    ranks = _ranks([*pos, *neg])
    u = sum(ranks[: len(pos)]) - len(pos) * (len(pos) + 1) / 2
    return u / (len(pos) * len(neg))


def reliability_bins(probs: Sequence[float], outcomes: Sequence[bool],
                     bins: int = 10) -> list[tuple[int, float, float]]:
    """`bins` equal-width bins of [0, 1] (a probability of exactly 1 falls in the last): per bin, how many
    predictions it holds, their mean probability and the share of them that came true (0, 0, 0 when empty).
    The points of a reliability diagram, and what `ece` weighs."""
    count = [0] * bins
    stated = [0.0] * bins
    true = [0.0] * bins
    for p, y in zip(probs, outcomes, strict=True):
        b = min(bins - 1, max(0, int(p * bins)))
        count[b] += 1
        stated[b] += p
        true[b] += 1.0 if y else 0.0
    return [(n, s / n, t / n) if n else (0, 0.0, 0.0) for n, s, t in zip(count, stated, true, strict=True)]


def ece(probs: Sequence[float], outcomes: Sequence[bool], bins: int = 10) -> float | None:
    """Expected calibration error: over equal-width bins of the stated probability, the gap between the mean
    probability and how often it came true, weighed by the bin's share of predictions (0: every stated
    probability means what it says). None without predictions.

    >>> round(ece([0.9, 0.9, 0.2, 0.2], [True, False, False, False]), 4)
    0.3
    """
    if not probs:
        return None
    return sum(n * abs(s - t) for n, s, t in reliability_bins(probs, outcomes, bins)) / len(probs)


def brier(probs: Sequence[float], outcomes: Sequence[bool]) -> float | None:
    """Mean squared gap between a stated probability and what happened (1 or 0); None without predictions.

    >>> brier([1.0, 0.5], [True, False])
    0.125
    """
    if not probs:
        return None
    return sum((p - (1.0 if y else 0.0)) ** 2 for p, y in zip(probs, outcomes, strict=True)) / len(probs)


def balanced_accuracy(says: Sequence[bool], truth: Sequence[bool]) -> float | None:
    """The mean of the rate of `says` among true cases and of its absence among false ones (here: proceed when
    the answer is complete, not proceed when it is not), so a decision that always proceeds scores 0.5
    whatever the share of complete answers; None without both kinds of case."""
    pos = [s for s, t in zip(says, truth, strict=True) if t]
    neg = [s for s, t in zip(says, truth, strict=True) if not t]
    if not pos or not neg:
        return None
    return (sum(pos) / len(pos) + sum(1 for s in neg if not s) / len(neg)) / 2
