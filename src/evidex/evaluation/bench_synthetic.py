"""Parts 3 and 5 of `evidex bench`, on a generated corpus (`evidex.evaluation.synthetic`): build throughput and
query latency of the SQLite store at scale, where a hybrid query spends its time, and a plain `bm25s` baseline
on the same texts and queries.

The corpus is written straight through `SqliteStore.commit_batch`, and queries come with their vectors from the
same generator, so no model runs: query encoding is excluded here (the docs part measures it).
"""

from __future__ import annotations

import gc
import sqlite3
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from evidex.config import Config
from evidex.embedding.protocol import Vectors
from evidex.engine import Engine
from evidex.evaluation.measure import dir_mb, ms_stats, rss_mb, time_modes
from evidex.evaluation.metrics import percentile
from evidex.evaluation.synthetic import FILTER, SyntheticCorpus
from evidex.retrieval.fusion import fuse
from evidex.retrieval.hybrid import candidates
from evidex.stores.protocol import BatchWrite, Store
from evidex.stores.sqlite import SqliteStore
from evidex.types import RetrievalMode, SearchFilters

Log = Callable[[str], None]
K = 10
MODES = ("bm25", "dense", "hybrid", "hybrid+filter")


class LookupEmbedder:
    """Query vectors prepared in advance (synthetic corpus): `Engine.search` runs unchanged, encoding costs
    a dict lookup."""

    def __init__(self, vectors: dict[str, Vectors], dim: int) -> None:
        self._vectors = vectors
        self._dim = dim

    @property
    def fingerprint(self) -> str:
        return "bench-synthetic"

    @property
    def model_id(self) -> str:
        return "bench-synthetic"

    @property
    def dim(self) -> int:
        return self._dim

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        raise RuntimeError("the synthetic benchmark writes its vectors directly")

    def embed_query(self, text: str) -> Vectors:
        return self._vectors[text]


@dataclass(frozen=True)
class BuiltSynthetic:
    """The synthetic index as committed, with what its build cost."""

    store: Store
    documents: int
    passing: int
    batches: int
    setup_s: float
    generate_s: float
    commit_s: float


def synthetic_part(config: Config, *, n_chunks: int, queries: int, work: Path, seed: int, log: Log,
                   batch_chunks: int) -> tuple[dict[str, Any], SqliteStore, list[str]]:
    """The synthetic report, the store (left open for the bm25s baseline) and the query texts."""
    started = time.perf_counter()
    gen = SyntheticCorpus.create(seed)
    setup_s = time.perf_counter() - started
    index_dir = work / "synthetic-index"
    store = SqliteStore(index_dir, title_weight=config.retrieval.title_weight)
    built = build_synthetic(gen, config, index_dir, n_chunks, batch_chunks, seed, setup_s, log, store)
    qs = gen.queries(seed + 7, queries)
    texts = [q for q, _ in qs]
    embedder = LookupEmbedder(dict(qs), gen.dim)
    engine = Engine.open(config.replace(index={"path": str(index_dir)}), embedder=embedder, store=store)
    filters = SearchFilters(access_labels=FILTER["access_labels"], valid_at=datetime.now(UTC))
    cold, times = _latency(engine, texts, filters, log)
    breakdown = {"hybrid": _hybrid_breakdown(engine, store, texts, embedder, None),
                 "hybrid+filter": _hybrid_breakdown(engine, store, texts, embedder, filters)}
    report = {
        "chunks": n_chunks, "documents": built.documents, "dim": gen.dim, "vocabulary": len(gen.vocab),
        "clusters": len(gen.centroids), "tokens_per_chunk": "80-200 (Zipf s=1.07, 15% cluster topic words)",
        "commit_batches": built.batches, "generator_setup_s": round(built.setup_s, 2),
        "generate_s": round(built.generate_s, 2), "build_s": round(built.commit_s, 2),
        "build_chunks_per_s": round(n_chunks / built.commit_s, 1),
        "index_mb": round(dir_mb(index_dir), 1),
        "cold_first_query_s": cold,
        "queries": len(texts), "k": K, "candidate_pool": config.retrieval.candidate_pool,
        "fusion": config.retrieval.fusion.value,
        "query_words": "3-8: 1-2 cluster topic words + Zipfian words outside the 100 most frequent",
        "fts_matching_chunks_per_query": _fts_match_counts(store, texts),
        "filter": {"access_labels": list(FILTER["access_labels"]), "valid_at": "now",
                   "passing_share": round(built.passing / n_chunks, 3)},
        "modes": times,
        "hybrid_stages_ms": breakdown,
        "note": "query vectors come from the generator: query encoding is excluded here (see the docs "
                "figures for its cost)",
    }
    return report, store, texts


def build_synthetic(gen: SyntheticCorpus, config: Config, index_dir: Path, n_chunks: int, batch_chunks: int,
                    seed: int, setup_s: float, log: Log, store: Store | None = None) -> BuiltSynthetic:
    """The corpus written through `commit_batch` into `store` (default: a SQLite store in `index_dir`)."""
    store = store or SqliteStore(index_dir, title_weight=config.retrieval.title_weight)
    now = datetime.now(UTC).replace(microsecond=0)
    generate_s = commit_s = 0.0
    docs = passing = done = b = 0
    while done < n_chunks:
        size = min(batch_chunks, n_chunks - done)
        started = time.perf_counter()
        writes, n_docs, n_pass = gen.batch(seed * 1_000_003 + b, docs, size, now)
        generate_s += time.perf_counter() - started
        started = time.perf_counter()
        store.commit_batch(BatchWrite(f"bench-{b:04d}", "bench synthetic", tuple(writes), 0, ()))
        commit_s += time.perf_counter() - started
        del writes
        docs += n_docs
        passing += n_pass
        done += size
        b += 1
        log(f"synthetic: {done}/{n_chunks} chunks committed ({commit_s:.1f} s in commit_batch, "
            f"{generate_s:.1f} s generating)")
    return BuiltSynthetic(store, docs, passing, b, setup_s, generate_s, commit_s)


def _latency(engine: Engine, texts: list[str], filters: SearchFilters,
             log: Log) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """The first bm25 and dense query (cold), then every mode at k=10 (`MODES`), warmed up."""
    cold: dict[str, float] = {}
    for mode in (RetrievalMode.BM25, RetrievalMode.DENSE):
        started = time.perf_counter()
        engine.search(texts[0], k=K, mode=mode)
        cold[mode.value] = round(time.perf_counter() - started, 3)
    log(f"synthetic: first bm25 query {cold['bm25'] * 1000:.0f} ms; first dense query (loads the vector "
        f"matrix) {cold['dense']:.2f} s")
    for q in texts[:5]:  # warm-up
        engine.search(q, k=K, mode=RetrievalMode.HYBRID)
        engine.search(q, k=K, mode=RetrievalMode.HYBRID, filters=filters)

    def run(q: str, mode: str) -> object:
        if mode == "hybrid+filter":
            return engine.search(q, k=K, mode=RetrievalMode.HYBRID, filters=filters)
        return engine.search(q, k=K, mode=RetrievalMode(mode))

    times = time_modes(run, texts, MODES)
    log("synthetic latency: " + ", ".join(f"{m} p50 {v['p50_ms']:.1f} ms" for m, v in times.items()))
    return cold, times


def _hybrid_breakdown(engine: Engine, store: SqliteStore, queries: Sequence[str], embedder: LookupEmbedder,
                      filters: SearchFilters | None) -> dict[str, Any]:
    """The stages of `retrieve` in hybrid mode, timed one by one with the same calls it makes."""
    settings = engine.config.retrieval
    pool = max(K, settings.candidate_pool)
    names = ("dense_search", "bm25_search", "fusion", "fetch_chunks")
    wall: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}

    def clock() -> tuple[float, float]:
        return time.perf_counter(), time.thread_time()

    for q in queries:
        t0 = clock()
        dense = store.search_dense(embedder.embed_query(q), pool, filters)
        t1 = clock()
        sparse = store.search_sparse(q, pool, filters)
        t2 = clock()
        hits = fuse([dense, sparse], [settings.dense_weight, settings.sparse_weight], settings.fusion,
                    settings.rrf_k, depth=settings.candidate_pool)
        t3 = clock()
        candidates(store, hits[:K], RetrievalMode.HYBRID)
        t4 = clock()
        for name, a, b in zip(names, (t0, t1, t2, t3), (t1, t2, t3, t4), strict=True):
            wall[name].append((b[0] - a[0]) * 1000)
            cpu[name].append((b[1] - a[1]) * 1000)
    out: dict[str, Any] = {n: ms_stats(wall[n], cpu[n]) for n in names}
    out["total"] = ms_stats([sum(wall[n][i] for n in names) for i in range(len(queries))],
                            [sum(cpu[n][i] for n in names) for i in range(len(queries))])
    return out


def _fts_match_counts(store: SqliteStore, queries: Sequence[str]) -> dict[str, float]:
    """How many chunks each query's OR-ed terms match (what FTS5 must score before LIMIT)."""
    from evidex.stores.sqlite_bm25 import fts_query

    counts: list[float] = []
    with sqlite3.connect(store.path) as db:
        for q in queries[:50]:
            match = fts_query(q)
            if match:
                counts.append(float(db.execute("SELECT count(*) FROM records_fts WHERE records_fts MATCH ?",
                                               (match,)).fetchone()[0]))
    db.close()
    if not counts:
        return {}
    return {"p50": percentile(counts, 50), "p95": percentile(counts, 95),
            "mean": round(statistics.fmean(counts), 1),
            "queries_sampled": len(counts)}


def bm25s_part(store_path: Path, queries: Sequence[str], log: Log) -> dict[str, Any]:
    """Part 5: `bm25s` indexing and querying the synthetic store's texts (skipped when it is not installed)."""
    try:
        import bm25s
    except ImportError as exc:
        return {"skipped": f"bm25s is not installed ({exc}); pip install bm25s"}
    with sqlite3.connect(store_path) as db:
        texts = [f"{t}\n{x}" for t, x in db.execute(
            "SELECT title, text FROM records WHERE retired_by IS NULL ORDER BY rowid")]
    db.close()
    rss_before = rss_mb()
    started = time.perf_counter()
    tokens = bm25s.tokenize(texts, stopwords="en", show_progress=False)
    tokenize_s = time.perf_counter() - started
    retriever = bm25s.BM25()
    retriever.index(tokens, show_progress=False)
    build_s = time.perf_counter() - started
    del tokens, texts
    gc.collect()
    k = min(K, int(retriever.scores["num_docs"]))

    def search(q: str) -> None:
        query_tokens = bm25s.tokenize([q], stopwords="en", return_ids=False, show_progress=False)
        retriever.retrieve(query_tokens, k=k, show_progress=False)  # n_threads=0: in this thread

    for q in queries[:5]:
        search(q)
    times = time_modes(lambda q, _: search(q), queries, ["bm25s"])["bm25s"]
    report = {"version": getattr(bm25s, "__version__", "?"), "method": "lucene k1=1.5 b=0.75, en stopwords, "
              "no stemmer", "tokenize_s": round(tokenize_s, 2), "build_s": round(build_s, 2),
              "build_chunks_per_s": round(retriever.scores["num_docs"] / build_s, 1),
              "rss_growth_mb": round(rss_mb() - rss_before, 1),
              "latency": times, "note": "single queries, tokenisation included, one thread"}
    log(f"bm25s: build {build_s:.1f} s, p50 {report['latency']['p50_ms']:.1f} ms")
    return report
