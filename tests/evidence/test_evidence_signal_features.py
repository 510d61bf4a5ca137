"""Confidence features that read retrieval scores: what they measure, on hand-made candidates."""

from __future__ import annotations

import pytest
from evidence_support import make_chunk

from evidex.signals.compute import dense_commitment
from evidex.types import Candidate


def _ranked(scores: list[float | None]) -> list[Candidate]:
    return [Candidate(make_chunk(f"c{i}"), 0.0, dense_score=s, dense_rank=None if s is None else i + 1)
            for i, s in enumerate(scores)]


def test_best_matches_that_stand_out_commit_more_than_a_flat_list() -> None:
    standout = dense_commitment(_ranked([0.9, 0.85, 0.3, 0.3, 0.3]))
    flat = dense_commitment(_ranked([0.5, 0.5, 0.49, 0.5, 0.5]))
    assert standout > 0.4 > 0.01 > flat >= 0.0


def test_commitment_is_the_spread_over_the_mean_of_the_top_ranks() -> None:
    # Ranks beyond the depth and candidates only the sparse retriever found do not count.
    ranked = _ranked([0.6, None, 0.2, 0.99, 0.01])
    assert dense_commitment(ranked, depth=2) == pytest.approx(0.2 / 0.4)


def test_too_few_dense_scores_commit_nothing() -> None:
    assert dense_commitment(_ranked([0.7])) == 0.0
    assert dense_commitment(_ranked([None, None])) == 0.0
    assert dense_commitment([]) == 0.0
