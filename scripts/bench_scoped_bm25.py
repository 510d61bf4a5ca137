"""What it costs to take BM25's word rarity over the records a requester may read (the SQLite store's scoped
path, which keeps restricted text from moving readable scores), against FTS5's own bm25() unfiltered.

    python scripts/bench_scoped_bm25.py [--chunks 100000] [--queries 200]

Builds the generated corpus of `evidex bench` (its access labels: about 57% of records readable by the
benchmark's reader), then times, per query, `search_sparse(q, 60)` three ways: unfiltered (FTS5 alone), scoped
with an empty word cache (every word read from the index), and scoped with the cache warm (a question's words
recur in its aspects' searches, and across questions). Wall-clock on a shared machine: compare the rows of one
run, not runs.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from evidex.config import load_config
from evidex.evaluation import bench
from evidex.evaluation.synthetic import FILTER
from evidex.stores.sqlite import SqliteStore
from evidex.types import SearchFilters

POOL = 60  # the pipeline's candidate pool


def timed(queries: Sequence[str], search: Callable[[str], object]) -> tuple[float, float]:
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
    report, store, queries = bench._synthetic_part(load_config(), n_chunks=args.chunks, queries=args.queries,
                                                   work=work, seed=1, log=lambda _: None, batch_chunks=5000)
    assert isinstance(store, SqliteStore)
    reader = SearchFilters(access_labels=FILTER["access_labels"])
    print(f"{args.chunks} chunks, {report['filter']['passing_share']:.0%} readable (with validity), "
          f"{len(queries)} queries, limit {POOL}; ms p50 / p95")

    def cold(q: str) -> object:
        store._word_cache_generation = -1  # the cache is per generation: this empties it
        return store.search_sparse(q, POOL, reader)

    rows = [("FTS5 bm25(), unfiltered", timed(queries, lambda q: store.search_sparse(q, POOL))),
            ("scoped, empty word cache", timed(queries, cold)),
            ("scoped, warm word cache", timed(queries, lambda q: store.search_sparse(q, POOL, reader)))]
    for name, (p50, p95) in rows:
        print(f"  {name:28s} {p50:7.2f} / {p95:7.2f}")
    store.close()


if __name__ == "__main__":
    main()
