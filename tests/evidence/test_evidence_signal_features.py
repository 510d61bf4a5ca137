"""Confidence features: what they measure, on hand-made candidates and tiny indexes."""

from __future__ import annotations

import pytest
from evidence_support import make_chunk

from evidex.signals.compute import Nesting, dense_commitment, page_agreement, sparse_top
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


@pytest.mark.parametrize(("nest", "reach", "unfollowed"), [
    (Nesting(nested=False), 1.0, 0),
    (Nesting(nested=True, need=1, linked=1, chain=2), 1.0, 0),  # named page -> the page it describes
    (Nesting(nested=True, need=2, linked=2, chain=2), 0.5, 1),  # one of two described entities reached
    (Nesting(nested=True, need=1, linked=2, chain=1), 0.0, 0),  # a wider bridge stands in for the chain
    (Nesting(nested=True, need=1, linked=1, chain=1), 0.0, 1),
    (Nesting(nested=True, need=2, linked=0, chain=0), 0.0, 2),  # no named page in the context
])
def test_nesting_reach_and_unfollowed_hops(nest: Nesting, reach: float, unfollowed: int) -> None:
    assert nest.reach == reach
    assert nest.hops_unfollowed == unfollowed


def test_sparse_top_is_the_best_bm25_score_per_query_term() -> None:
    ranked = [Candidate(make_chunk(f"c{i}"), 0.0, sparse_score=s) for i, s in enumerate([None, 12.0, 30.0, 6.0])]
    assert sparse_top(ranked, 3) == pytest.approx(30.0 / 3 / 10)
    assert sparse_top(ranked, 0) == pytest.approx(30.0 / 10)  # no content term: no division by zero
    assert sparse_top(ranked[:1], 3) == 0.0  # only dense hits


def _by_page(dense: list[str], sparse: list[str]) -> list[Candidate]:
    """Candidates of the pages `dense` and `sparse` rank, in their order (two chunks of a page per list)."""
    out = []
    for name, pages in (("d", dense), ("s", sparse)):
        for rank, page in enumerate(p for p in pages for _ in range(2)):
            chunk = make_chunk(f"{name}{rank}", doc_id=page)
            out.append(Candidate(chunk, 0.0, dense_rank=rank + 1) if name == "d"
                       else Candidate(chunk, 0.0, sparse_rank=rank + 1))
    return out


def test_page_agreement_is_the_share_of_the_best_pages_both_retrievers_rank() -> None:
    assert page_agreement(_by_page(["a", "b", "c"], ["c", "b", "a"]), depth=3) == 1.0  # order aside
    assert page_agreement(_by_page(["a", "b", "c", "d"], ["d", "x", "b", "a"]), depth=2) == 0.0  # beyond the depth
    assert page_agreement(_by_page(["a", "b", "c", "d"], ["b", "x", "a", "y"]), depth=4) == pytest.approx(0.5)
    assert page_agreement(_by_page(["a", "b"], []), depth=2) == 0.0  # one retriever only (a BM25 or dense search)


def test_confidence_clips_each_feature_to_the_range_it_was_fitted_on() -> None:
    """A question unlike any in training (a one-word query on a tiny corpus gave dense_commitment far above
    anything fitted, and confidence 0.9993) is scored at the edge of what the model saw."""
    from evidex.signals.compute import confidence, confidence_model

    ranges = confidence_model()["ranges"]
    assert set(ranges) == set(confidence_model()["weights"])
    at_edges = {name: float(high) for name, (_, high) in ranges.items()}
    beyond = {name: float(high) * 10 + 5 for name, (_, high) in ranges.items()}
    assert confidence(beyond) == confidence(at_edges)
    below = {name: float(low) - 5 for name, (low, _) in ranges.items()}
    assert confidence(below) == confidence({name: float(low) for name, (low, _) in ranges.items()})
    inside = {name: (float(low) + float(high)) / 2 for name, (low, high) in ranges.items()}
    assert confidence(inside) != confidence(at_edges)  # clipping leaves values in range alone
