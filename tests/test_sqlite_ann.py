"""The SQLite store with its approximate dense index forced on (`ann_min_chunks = 0`): the whole store contract,
and on a few hundred rows the same hits and scores as exact search, filters included, across commits, rollbacks
and a reopened index (the saved index is the snapshot's)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

from evidex.stores.ann import ANN_DIR, AnnSettings
from evidex.stores.sqlite import SqliteStore
from evidex.testing.store_contract import DIM, T0, StoreContract, batch, document, make_chunk
from evidex.types import Provenance, SearchFilters

pytest.importorskip("faiss")

FORCED = AnnSettings(min_chunks=0, exact_below_share=0.0)


class TestSqliteStoreApproximate(StoreContract):
    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[SqliteStore]:
        s = SqliteStore(tmp_path / "idx", ann=FORCED)
        yield s
        problems = s.check_integrity()
        s.close()
        assert problems == []


LABELS = [("eng",), ("ops",), ("eng", "hr"), ()]
FAMILIES = ["deploy", "network", None]


def _write(store: SqliteStore, batch_id: str, first: int, docs: int, seed: int) -> None:
    """`docs` documents of three chunks each with random unit vectors and varied labels, families, times."""
    rng = np.random.default_rng(seed)
    writes = []
    for d in range(first, first + docs):
        provenance = Provenance(access_labels=LABELS[d % 4], evidence_family=FAMILIES[d % 3],
                                published_at=T0 - timedelta(days=d % 5),
                                expires_at=T0 + timedelta(days=1) if d % 7 else T0 - timedelta(days=1))
        source = f"docs/{'net' if d % 2 else 'apps'}/page-{d}.md"
        chunks = [make_chunk(f"doc{d}", i, f"page {d} part {i}", source=source, provenance=provenance)
                  for i in range(3)]
        vectors = rng.standard_normal((3, DIM)).astype(np.float32)
        writes.append(document(chunks, list(vectors / np.linalg.norm(vectors, axis=1, keepdims=True))))
    store.commit_batch(batch(batch_id, *writes))


FILTERS = [None, SearchFilters(access_labels=("eng",)), SearchFilters(valid_at=T0),
           SearchFilters(families=("network",), access_labels=("ops", "hr")),
           SearchFilters(source_pattern=r"^docs/net/"), SearchFilters(doc_ids=("doc3", "doc8", "doc40"))]


def _same_as_exact(approximate: SqliteStore, exact: SqliteStore, seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(20):
        query = rng.standard_normal(DIM).astype(np.float32)
        query /= np.linalg.norm(query)
        for filters in FILTERS:
            assert approximate.search_dense(query, 7, filters) == exact.search_dense(query, 7, filters), filters


def test_approximate_search_matches_exact_through_commits_and_rollbacks(tmp_path: Path) -> None:
    approximate = SqliteStore(tmp_path / "ann", ann=FORCED)
    exact = SqliteStore(tmp_path / "exact", ann=AnnSettings(min_chunks=10**9))
    for store in (approximate, exact):
        _write(store, "b1", 0, 200, seed=1)
    _same_as_exact(approximate, exact, seed=2)
    assert approximate._dense_index().ann is not None and exact._dense_index().ann is None
    saved = sorted(p.name for p in (tmp_path / "ann" / ANN_DIR).glob("ivf-*.faiss"))
    assert len(saved) == 1

    for store in (approximate, exact):
        _write(store, "b2", 150, 100, seed=3)  # replaces 50 documents, adds 50
    _same_as_exact(approximate, exact, seed=4)
    for store in (approximate, exact):
        store.rollback()
    _same_as_exact(approximate, exact, seed=5)
    now_saved = sorted(p.name for p in (tmp_path / "ann" / ANN_DIR).glob("ivf-*.faiss"))
    assert len(now_saved) == 1 and now_saved != saved  # one index, the current snapshot's
    approximate.close()

    reopened = SqliteStore(tmp_path / "ann", ann=FORCED)  # loads the saved index of the same snapshot
    _same_as_exact(reopened, exact, seed=5)
    assert sorted(p.name for p in (tmp_path / "ann" / ANN_DIR).glob("ivf-*.faiss")) == now_saved
    reopened.close()
    exact.close()


def test_a_narrow_filter_is_searched_exactly_over_its_rows(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "idx", ann=AnnSettings(min_chunks=0, exact_below_share=0.5))
    _write(store, "b1", 0, 100, seed=7)
    index = store._dense_index()
    assert index.ann is not None
    query = np.eye(DIM, dtype=np.float32)[0]
    narrow = SearchFilters(doc_ids=("doc1", "doc2"))  # 6 of 300 rows: below the share, exact over them
    hits = store.search_dense(query, 4, narrow)
    assert len(hits) == 4 and {h.record_id.split("#")[0] for h in hits} <= {"doc1", "doc2"}
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    store.close()


def test_the_live_scan_reads_what_all_chunks_holds(tmp_path: Path) -> None:
    """`LiveScan`: the titles and the records that may link, as a pass over `all_chunks` finds them, in order."""
    store = SqliteStore(tmp_path / "idx")
    texts = ["see [the guide](guide.md)", "plain words", 'an <a HREF="x">anchor</a>', "100% of_rows \\ here",
             "no ] ( link"]
    chunks = [make_chunk(f"d{i}", 0, text, title=f"Title {i}") for i, text in enumerate(texts)]
    store.commit_batch(batch("b1", *[document([c], [np.eye(DIM, dtype=np.float32)[i]]) for i, c in enumerate(chunks)]))
    every = store.all_chunks()
    assert store.live_titles() == [c.title for c in every]
    may_link = [c for c in every if "](" in c.text or "href" in c.text.lower()]
    assert store.live_chunks_with(("](", "href")) == may_link and len(may_link) == 2
    assert [c.doc_id for c in store.live_chunks_with(("100%", "of_"))] == ["d3"]  # LIKE's wildcards escaped
    assert store.live_chunks_with(("0%x",)) == []
    store.close()
