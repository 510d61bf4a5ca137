"""The statistics behind the signal validation: Spearman with ties, its ceiling for a predictor that never
ties, and AUROC. Checked against brute-force definitions on drawn data."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evidex.evaluation.datasets import FamilySpec, Question
from evidex.evaluation.metrics import auroc, missed_families, spearman, spearman_ceiling
from evidex.testing.store_contract import make_chunk

QUALITIES = st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0]), min_size=3, max_size=60)


def test_spearman_of_monotone_and_reversed_orders() -> None:
    x = [0.1, 0.4, 0.2, 0.9]
    assert spearman(x, [1, 3, 2, 4]) == pytest.approx(1.0)
    assert spearman(x, [4, 2, 3, 1]) == pytest.approx(-1.0)
    assert spearman(x, [5, 5, 5, 5]) is None


def test_the_ceiling_is_one_without_ties() -> None:
    assert spearman_ceiling([0.3, 0.1, 0.9, 0.5]) == pytest.approx(1.0)


def test_the_ceiling_when_nearly_every_answer_is_complete() -> None:
    # 64 incomplete answers in 1000: a perfect continuous predictor reaches about sqrt(3 p (1 - p)) = 0.42.
    y = [0.5] * 64 + [1.0] * 936
    assert spearman_ceiling(y) == pytest.approx(math.sqrt(3 * 0.064 * 0.936), abs=0.01)


@given(QUALITIES.flatmap(lambda y: st.tuples(st.just(y), st.permutations(range(len(y))))))
def test_no_predictor_that_never_ties_beats_the_ceiling(drawn: tuple[list[float], list[int]]) -> None:
    y, order = drawn
    ceiling = spearman_ceiling(y)
    if ceiling is None:
        assert len(set(y)) == 1
        return
    scores = [float(p) for p in order]  # any predictor without ties, as its ranks
    rho = spearman(scores, y)
    assert rho is not None and rho <= ceiling + 1e-9
    perfect = [q + 1e-6 * i for i, q in enumerate(y)]  # orders by quality, breaks ties arbitrarily
    assert spearman(perfect, y) == pytest.approx(ceiling)


@given(st.lists(st.tuples(st.sampled_from([0.1, 0.2, 0.3, 0.7]), st.booleans()), min_size=1, max_size=40))
def test_auroc_counts_pairs(rows: list[tuple[float, bool]]) -> None:
    scores = [s for s, _ in rows]
    labels = [p for _, p in rows]
    pos = [s for s, p in rows if p]
    neg = [s for s, p in rows if not p]
    got = auroc(scores, labels)
    if not pos or not neg:
        assert got is None
        return
    wins = sum(1.0 if a > b else 0.5 if a == b else 0.0 for a, b in itertools.product(pos, neg))
    assert got == pytest.approx(wins / (len(pos) * len(neg)))


def test_auroc_extremes() -> None:
    assert auroc([0.9, 0.8, 0.1], [True, True, False]) == 1.0
    assert auroc([0.1, 0.8, 0.9], [True, False, False]) == 0.0
    assert auroc([0.5, 0.5], [True, False]) == 0.5


def test_an_oracle_family_without_a_rescue_query_is_searched_by_its_name() -> None:
    from evidex.evaluation.datasets import FamilySpec, Question
    from evidex.evaluation.runner import oracle_plan

    question = Question("q", "Why are our policies ignored on the new cluster?", (
        FamilySpec("network-policy-provider", source_regex="^tasks/network-policy-provider/"),
        FamilySpec("Ed Wood", doc_ids=("hp1",)),
        FamilySpec("cluster-dns", source_regex="^dns", rescue_query="CoreDNS kube-dns port 53")))
    assert [f.rescue_query for f in oracle_plan(question).families] == [
        "network policy provider", "Ed Wood", "CoreDNS kube-dns port 53"]


def test_a_missed_family_reports_where_its_best_member_ranked() -> None:
    ranking = [make_chunk(doc, i, "text", source=f"{doc}.md") for doc, i in
               [("a", 0), ("a", 1), ("b", 0), ("c", 0), ("d", 0)]]
    question = Question("q1", "a question", (FamilySpec("found", source_regex=r"^a\.md$"),
                                             FamilySpec("ranked-low", source_regex=r"^(d|c)\.md$"),
                                             FamilySpec("never", doc_ids=("z",))))
    missed = missed_families(question, ranking[:3], ranking)
    # Document ranks count pages, not chunks: "c" is the third page though the fourth chunk.
    assert missed == [{"family": "ranked-low", "document_rank": 3}, {"family": "never", "document_rank": None}]
    assert missed_families(question, ranking, ranking) == [{"family": "never", "document_rank": None}]
