"""CRAG-style grading of the selection: each chunk is correct, ambiguous or incorrect by its fused score.

Noise (incorrect) is removed; a required family keeps its best validated chunk (see `supports`) even if
that chunk scores low for the question as a whole, and a family with nothing validated is reported
missing.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from evidex.evidence.plan import RequiredFamily
from evidex.evidence.terms import chunk_terms, terms
from evidex.types import Candidate


class Grade(enum.Enum):
    CORRECT = "correct"
    AMBIGUOUS = "ambiguous"
    INCORRECT = "incorrect"


@dataclass(frozen=True)
class GradeThresholds:
    correct: float = 0.55  # the defaults of `[evidence] grade_correct` and `grade_incorrect`
    incorrect: float = 0.15


DEFAULT_THRESHOLDS = GradeThresholds()


def grade_of(c: Candidate, t: GradeThresholds) -> Grade:
    if c.score >= t.correct:
        return Grade.CORRECT
    if c.score < t.incorrect:
        return Grade.INCORRECT
    return Grade.AMBIGUOUS


@dataclass(frozen=True)
class Graded:
    chunks: tuple[Candidate, ...]
    grades: dict[str, Grade]  # record id -> grade, for the kept chunks
    overall: Grade
    removed: tuple[str, ...]
    restored: tuple[str, ...]
    missing_families: tuple[str, ...]  # no validated evidence, or its slot lost to the k budget (`cut`)
    cut: tuple[str, ...] = ()  # families whose validated evidence did not fit in k


def supports(c: Candidate, family: RequiredFamily, t: GradeThresholds) -> bool:
    """Validated evidence for a family: a member that is not noise for the question, one that answers the
    family's own rescue query (its obligation) on at least a third of the query's terms, or a lead's record."""
    return family.matches(c.chunk) and validates(c, family, t)


def validates(c: Candidate, family: RequiredFamily, t: GradeThresholds) -> bool:
    """`supports` for a candidate already known to be a member of `family`."""
    if grade_of(c, t) is not Grade.INCORRECT:
        return True
    if family.lead and c.chunk.record_id in family.record_ids:
        return True  # the lead kept for an aspect nothing met: the best there is, whatever its score
    wanted = terms(family.rescue_query)
    have, _ = chunk_terms(c.chunk)
    return bool(wanted) and sum(1 for w in wanted if w in have) / len(wanted) >= 1 / 3


def families_order(names: Sequence[str], families: Sequence[RequiredFamily]) -> int:
    """The plan position of the first of `names` (an earlier family was planned as more specific)."""
    return min(i for i, f in enumerate(families) if f.name in names)


def grade(selection: Sequence[Candidate], ranked: Sequence[Candidate], families: Sequence[RequiredFamily],
          k: int, t: GradeThresholds) -> Graded:
    """Remove noise from the selection; never lose a required family's validated evidence, and never hold
    more than k chunks: when there are more families than slots, the later families of the plan are reported
    missing (they drive a re-query) rather than overflowing the budget.

    Removed slots are not refilled: CRAG's point is a shorter context with less noise."""
    grades = {c.chunk.record_id: grade_of(c, t) for c in selection}
    protected: dict[str, list[str]] = {}  # record id -> the families it is the evidence of, in plan order
    restored: list[str] = []
    missing: list[str] = []
    cut: list[str] = []
    for family in families:
        # The family's best evidence by the rule reserve used to choose it: coverage of the family, then score.
        own = max((c for c in selection if supports(c, family, t)), default=None,
                  key=lambda c: (round(family.match_score(c.chunk), 3), c.score))
        best = own or next((c for c in ranked if supports(c, family, t)), None)
        if best is None:
            missing.append(family.name)
            continue
        protected.setdefault(best.chunk.record_id, []).append(family.name)
        if own is None and best.chunk.record_id not in restored:
            restored.append(best.chunk.record_id)
    kept = [c for c in selection
            if grades[c.chunk.record_id] is not Grade.INCORRECT or c.chunk.record_id in protected]
    by_id = {c.chunk.record_id: c for c in ranked}
    for record_id in restored:
        if all(c.chunk.record_id != record_id for c in kept):
            kept.append(by_id[record_id])
    while len(kept) > k:  # a restored family displaces the weakest unprotected chunk...
        weakest = min((c for c in kept if c.chunk.record_id not in protected), key=lambda c: c.score, default=None)
        if weakest is None:  # ...and when only families' evidence is left, the later families lose theirs
            weakest = max(kept, key=lambda c: families_order(protected[c.chunk.record_id], families))
            for name in protected.pop(weakest.chunk.record_id):
                family = next(f for f in families if f.name == name)
                other = next((c for c in kept if c is not weakest and supports(c, family, t)), None)
                if other is None:
                    missing.append(name)
                    cut.append(name)
                else:
                    protected.setdefault(other.chunk.record_id, []).append(name)
        kept.remove(weakest)
    restored = [r for r in restored if r in protected]
    kept.sort(key=lambda c: (-c.score, c.chunk.record_id))
    kept_ids = {c.chunk.record_id for c in kept}
    removed = tuple(c.chunk.record_id for c in selection if c.chunk.record_id not in kept_ids)
    final = {c.chunk.record_id: grade_of(c, t) for c in kept}
    values = set(final.values())
    overall = Grade.CORRECT if Grade.CORRECT in values else Grade.AMBIGUOUS if values else Grade.INCORRECT
    return Graded(tuple(kept), final, overall, removed, tuple(restored), tuple(missing), tuple(cut))
