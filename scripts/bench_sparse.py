"""The SQLite store's BM25 search (each word's bm25() read once per snapshot and summed, see
`SqliteStore.search_sparse`) against FTS5 ranking the OR query itself in SQL, which it reproduces exactly.

    python scripts/bench_sparse.py [--chunks 100000] [--queries 200]

Builds the generated corpus of `evidex bench` (its access labels: about 57% of records readable by the
benchmark's reader), then times, per query, the best 60 matches: FTS5 in SQL; the store unfiltered with every
word read from the index (an empty word cache) and with its words cached (a question's words recur in its
aspects' searches, and across questions); and the store scoped to the reader (word rarity over what it may
read), cold and warm. Wall-clock on a shared machine: compare the rows of one run, not runs.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from evidex.config import load_config
from evidex.evaluation.bench_synthetic import synthetic_part
from evidex.evaluation.synthetic import FILTER
from evidex.stores.sqlite import SqliteStore
from evidex.stores.sqlite_bm25 import fts_query
from evidex.types import SearchFilters

POOL = 60  # the pipeline's candidate pool


def timed(queries: Sequence[str], search: Callable[[str], object], *, primed: bool = False) -> tuple[float, float]:
    """p50 and p95 ms of `search` over `queries`; `primed`: after one untimed pass (the words cached)."""
    for q in queries if primed else ():
        search(q)
    took = []
    for q in queries:
        started = time.perf_counter()
        search(q)
        took.append((time.perf_counter() - started) * 1000)
    took.sort()
    return statistics.median(took), took[int(0.95 * (len(took) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-scoped-"))
    report, store, queries = synthetic_part(load_config(), n_chunks=args.chunks, queries=args.queries,
                                            work=work, seed=1, log=lambda _: None, batch_chunks=5000)
    assert isinstance(store, SqliteStore)
    reader = SearchFilters(access_labels=FILTER["access_labels"])
    print(f"{args.chunks} chunks, {report['filter']['passing_share']:.0%} readable (with validity), "
          f"{len(queries)} queries, limit {POOL}; ms p50 / p95")

    db = sqlite3.connect(store.path)

    def fts5(q: str) -> object:
        return db.execute("SELECT rowid, bm25(records_fts, ?, 1.0) AS s FROM records_fts WHERE records_fts MATCH ? "
                          "ORDER BY s, rowid LIMIT ?", (store.title_weight, fts_query(q), POOL)).fetchall()

    def cold(filters: SearchFilters | None) -> Callable[[str], object]:
        def search(q: str) -> object:
            store._word_cache.clear()
            return store.search_sparse(q, POOL, filters)
        return search

    rows = [("FTS5 ranks the OR query", timed(queries, fts5)),
            ("store, empty word cache", timed(queries, cold(None))),
            ("store, warm word cache", timed(queries, lambda q: store.search_sparse(q, POOL), primed=True)),
            ("scoped, empty word cache", timed(queries, cold(reader))),
            ("scoped, warm word cache", timed(queries, lambda q: store.search_sparse(q, POOL, reader), primed=True))]
    for name, (p50, p95) in rows:
        print(f"  {name:28s} {p50:7.2f} / {p95:7.2f}")
    db.close()
    store.close()


if __name__ == "__main__":
    main()
