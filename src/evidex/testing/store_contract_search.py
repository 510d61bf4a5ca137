"""The store contract's searches (`evidex.testing.store_contract`): dense order and cosine scores, BM25 over
title and body with hostile query text read as plain words, and the same filters applied by both searches
before their limit."""

from __future__ import annotations

import pytest

from evidex.stores.protocol import Store
from evidex.testing.store_builders import (
    FILTER_CASES,
    HOSTILE_QUERIES,
    ContractCorpus,
    axis,
    batch,
    document,
    ids,
    make_chunk,
    unit,
)
from evidex.types import SearchFilters


class SearchContract(ContractCorpus):
    """What every store's dense and sparse searches must do."""

    # ---- dense search ----------------------------------------------------------------------------------
    def test_dense_search_exact_order_and_scores(self, store: Store) -> None:
        vectors = {"a": unit(1.0), "b": unit(4, 3), "c": unit(3, 4), "d": axis(1), "e": unit(-1.0)}
        store.commit_batch(batch("b1", *(document([make_chunk(k, 0, f"text {k}")], [v])
                                          for k, v in vectors.items())))
        hits = store.search_dense(axis(0), 10)
        assert ids(hits) == ["a#0", "b#0", "c#0", "d#0", "e#0"]
        assert [h.score for h in hits] == pytest.approx([1.0, 0.8, 0.6, 0.0, -1.0], abs=1e-5)
        assert ids(store.search_dense(axis(0), 2)) == ["a#0", "b#0"]
        assert ids(store.search_dense(axis(1), 3)) == ["d#0", "c#0", "b#0"]

    # ---- sparse search ---------------------------------------------------------------------------------
    def test_sparse_search_finds_title_words(self, store: Store) -> None:
        self.commit_corpus(store)
        assert ids(store.search_sparse("kubernetes", 10)) == ["kube#0"]  # only in the title
        assert ids(store.search_sparse("backups", 10)) == ["etcd#0"]

    def test_sparse_search_finds_body_words(self, store: Store) -> None:
        self.commit_corpus(store)
        assert ids(store.search_sparse("snapshot", 10)) == ["etcd#0"]
        assert ids(store.search_sparse("traffic", 10)) == ["net#0"]

    def test_sparse_search_ranks_more_matching_terms_first(self, store: Store) -> None:
        self.commit_corpus(store)
        hits = store.search_sparse("pods ingress", 10)
        assert ids(hits) == ["net#0", "kube#0"]
        assert hits[0].score > hits[1].score  # higher is better
        assert ids(store.search_sparse("pods ingress", 1)) == ["net#0"]

    @pytest.mark.parametrize("query", HOSTILE_QUERIES)
    def test_sparse_search_reads_fts_syntax_as_words(self, store: Store, query: str) -> None:
        self.commit_corpus(store)
        hits = store.search_sparse(query, 10)
        assert len(hits) == len(set(ids(hits)))
        assert set(ids(hits)) <= {"kube#0", "etcd#0", "net#0"}

    def test_sparse_search_operators_are_not_applied(self, store: Store) -> None:
        self.commit_corpus(store)
        # NOT would exclude net (which says ingress); a column filter `text:` would hide the title word.
        assert "net#0" in ids(store.search_sparse("pods NOT ingress", 10))
        assert "net#0" in ids(store.search_sparse("pods -ingress", 10))
        assert ids(store.search_sparse("text:kubernetes", 10)) == ["kube#0"]
        # AND would require both words; as plain words, either one matches.
        assert set(ids(store.search_sparse("snapshot AND traffic", 10))) == {"etcd#0", "net#0"}
        # A trailing * is not a prefix query.
        assert store.search_sparse("kuber*", 10) == []

    @pytest.mark.parametrize("query", ["", "   ", "the of and", "?!", "what is it"])
    def test_sparse_search_empty_or_stopword_query_is_empty(self, store: Store, query: str) -> None:
        self.commit_corpus(store)
        assert store.search_sparse(query, 10) == []

    # ---- filters: identical in dense and sparse search -------------------------------------------------
    @pytest.mark.parametrize(("filters", "expected"), [c[1:] for c in FILTER_CASES],
                             ids=[c[0] for c in FILTER_CASES])
    def test_filters_apply_identically_in_dense_and_sparse(self, store: Store, filters: SearchFilters,
                                                           expected: set[str]) -> None:
        self.commit_filter_corpus(store)
        want = {f"{d}#0" for d in expected}
        dense = store.search_dense(unit(1.0), 100, filters)
        sparse = store.search_sparse("common", 100, filters)
        assert set(ids(dense)) == want
        assert set(ids(sparse)) == want
        # Filtering keeps the unfiltered order of what remains.
        unfiltered = ids(store.search_dense(unit(1.0), 100))
        assert ids(dense) == [i for i in unfiltered if i in want]

    def test_filters_apply_before_the_limit(self, store: Store) -> None:
        self.commit_filter_corpus(store)
        network = SearchFilters(families=("network",))
        assert ids(store.search_dense(unit(1.0), 1, network)) == ["d3#0"]  # d1, d2 rank higher unfiltered
        assert len(store.search_sparse("common", 1, network)) == 1
        assert ids(store.search_sparse("common", 1, network))[0] in {"d3#0", "d5#0"}
