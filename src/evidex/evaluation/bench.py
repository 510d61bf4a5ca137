"""`evidex bench`: throughput, latency and memory, measured side by side in one run.

Five parts, each reported next to its goal:

1. Embedding: the raw embedder (`embed_documents` in batches of `embedding.batch_size`, no cache) on the
   chunk texts of the first k8s pages, versus `Engine.ingest` of the same pages into a fresh index with a
   fresh, empty embedding cache (so it really embeds). Goal: ingest >= 80 % of the raw throughput.
2. Query latency of `Engine.search(k=10)` in bm25, dense and hybrid mode on that k8s index, query
   encoding included.
3. A generated corpus (default 100k chunks) written straight through `SqliteStore.commit_batch`: build
   throughput, then latency of bm25 / dense / hybrid / filtered hybrid at k=10 with query vectors from the
   same generator (query encoding excluded), and where a hybrid query spends its time.
   Goals: hybrid p50 <= 30 ms, p95 <= 80 ms.
4. Memory: peak RSS (`ru_maxrss`) and the RSS growth of the synthetic part. Goal: <= 1.5 GB.
5. A plain `bm25s` baseline on the same synthetic texts and queries (skipped if bm25s is not installed).

Timings are wall-clock; on a small shared machine they are indicative, and the report says so. The goals
and the text report are in `bench_report`, the timing and memory probes in `measure`.
"""

from __future__ import annotations

import gc
import json
import os
import platform
import shutil
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from evidex.config import Config
from evidex.embedding.protocol import Embedder, Vectors
from evidex.engine import Engine, configured_embedder
from evidex.evaluation.bench_report import GOALS, check_goals
from evidex.evaluation.measure import RssSampler, dir_mb, loadavg, machine, maxrss_mb, ms_stats, rss_mb
from evidex.evaluation.metrics import percentile
from evidex.evaluation.synthetic import FILTER, SyntheticCorpus
from evidex.ingest.loaders import iter_documents
from evidex.ingest.run import chunk_document, embedding_text
from evidex.retrieval.fusion import fuse
from evidex.retrieval.hybrid import candidates
from evidex.stores.protocol import BatchWrite
from evidex.stores.sqlite import SqliteStore
from evidex.types import Chunk, Document, FusionMode, RetrievalMode, SearchFilters

Log = Callable[[str], None]

NOISE_NOTE = ("{cpus} CPU core(s), shared with other running processes: the machine is noisy, so every "
              "timing here is indicative, not precise")
K = 10


class _LookupEmbedder:
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


def _time_modes(run: Callable[[str, str], object], queries: Sequence[str],
                modes: Sequence[str]) -> dict[str, dict[str, float]]:
    """Latency (wall and CPU ms) of every query in every mode, modes interleaved per query and rotated, so
    that load spikes and warm caches fall evenly on all modes."""
    wall: dict[str, list[float]] = {m: [] for m in modes}
    cpu: dict[str, list[float]] = {m: [] for m in modes}
    for i, q in enumerate(queries):
        for j in range(len(modes)):
            mode = modes[(i + j) % len(modes)]
            started, started_cpu = time.perf_counter(), time.thread_time()
            run(q, mode)
            wall[mode].append((time.perf_counter() - started) * 1000)
            cpu[mode].append((time.thread_time() - started_cpu) * 1000)
    return {m: ms_stats(wall[m], cpu[m]) for m in modes}


# ---- part 1 + 2: the k8s pages -------------------------------------------------------------------------
def _k8s_queries(k8s_docs: Path, docs: Sequence[Document]) -> tuple[list[str], str]:
    questions_file = k8s_docs.parent / "questions.jsonl"
    found: list[str] = []
    if questions_file.is_file():
        for line in questions_file.read_text(encoding="utf-8").splitlines():
            if line.strip():
                item = json.loads(line)
                text = item.get("question") or item.get("text") or item.get("query")
                if isinstance(text, str) and text.strip():
                    found.append(text.strip())
    if found:
        return found, str(questions_file)
    return [d.title for d in docs if d.title], "document titles"


def _k8s_part(config: Config, embedder: Embedder, k8s_docs: Path, *, chunk_budget: int, rounds: int,
              queries: int, work: Path, log: Log) -> tuple[dict[str, Any], dict[str, Any]]:
    all_docs = [d for d in iter_documents(k8s_docs) if isinstance(d, Document)]
    now = datetime.now(UTC).replace(microsecond=0)
    chosen: list[Document] = []
    chunks: list[Chunk] = []
    for doc in all_docs:
        doc_chunks = chunk_document(doc, config.chunking, now)
        if chunks and len(chunks) + len(doc_chunks) > chunk_budget:
            break
        chosen.append(doc)
        chunks.extend(doc_chunks)
    if not chunks:
        raise ValueError(f"{k8s_docs}: no document produced a chunk")
    texts = [embedding_text(c) for c in chunks]
    batch = config.embedding.batch_size
    corpus = work / "k8s-corpus"
    for doc in chosen:  # the same pages, same relative sources, so ingest chunks exactly these texts
        target = corpus / doc.source
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(k8s_docs / doc.source, target)
    log(f"k8s: first {len(chosen)} of {len(all_docs)} pages -> {len(chunks)} chunks "
        f"(budget {chunk_budget}); embedding batch {batch}")

    embedder.embed_documents(texts[:batch])  # warm-up: creates the document session, not timed
    raw_rates: list[float] = []
    ingest_rates: list[float] = []
    raw_cpu: list[float] = []  # CPU seconds per chunk (all threads of this process)
    ingest_cpu: list[float] = []
    ingest_rounds: list[dict[str, Any]] = []
    engine: Engine | None = None
    for r in range(1, rounds + 1):
        started, started_cpu = time.perf_counter(), time.process_time()
        for i in range(0, len(texts), batch):
            embedder.embed_documents(texts[i:i + batch])
        seconds = time.perf_counter() - started
        raw_cpu.append((time.process_time() - started_cpu) / len(texts))
        raw_rates.append(len(texts) / seconds)
        log(f"k8s round {r}/{rounds}: raw embedder {len(texts)} chunks in {seconds:.1f} s "
            f"= {raw_rates[-1]:.1f} chunks/s")

        if engine is not None:
            engine.close()
        cfg = config.replace(index={"path": str(work / f"k8s-index-{r}")},
                             embedding={"cache_dir": str(work / f"k8s-cache-{r}"),  # fresh, empty cache
                                        "query_cache": 0})  # the queries repeat: each is embedded again
        engine = Engine.open(cfg, embedder=embedder)
        started, started_cpu = time.perf_counter(), time.process_time()
        report = engine.ingest([corpus], label="bench")
        seconds = time.perf_counter() - started
        ingest_cpu.append((time.process_time() - started_cpu) / max(report.added_chunks, 1))
        ingest_rates.append(report.added_chunks / seconds)
        ingest_rounds.append({"seconds": round(seconds, 2), "chunks": report.added_chunks,
                              "embedded": report.embedded, "cached": report.cached,
                              "documents": report.documents, "empty_documents": report.empty_documents,
                              "dead_letters": len(report.dead_letters)})
        log(f"k8s round {r}/{rounds}: Engine.ingest {report.added_chunks} chunks "
            f"({report.embedded} embedded) "
            f"in {seconds:.1f} s = {ingest_rates[-1]:.1f} chunks/s")

    started, started_cpu = time.perf_counter(), time.process_time()
    embedder.embed_documents(texts)  # one call: the embedder sorts all texts by length (less padding)
    sorted_rate = len(texts) / (time.perf_counter() - started)
    sorted_cpu = (time.process_time() - started_cpu) / len(texts)
    log(f"k8s: raw embedder, all chunks in one length-sorted call = {sorted_rate:.1f} chunks/s")

    raw_best, ingest_best = max(raw_rates), max(ingest_rates)
    embedding = {
        "documents": len(chosen), "chunks": len(chunks), "batch_size": batch,
        "threads": config.embedding.threads or "all cores",
        "raw_chunks_per_s": round(raw_best, 2), "ingest_chunks_per_s": round(ingest_best, 2),
        "ratio": round(ingest_best / raw_best, 3),
        "raw_rounds_chunks_per_s": [round(x, 2) for x in raw_rates],
        "ingest_rounds_chunks_per_s": [round(x, 2) for x in ingest_rates],
        "ratio_per_round": [round(i / r, 3) for i, r in zip(ingest_rates, raw_rates, strict=True)],
        "raw_cpu_ms_per_chunk": round(min(raw_cpu) * 1000, 2),
        "ingest_cpu_ms_per_chunk": round(min(ingest_cpu) * 1000, 2),
        "cpu_ratio": round(min(raw_cpu) / min(ingest_cpu), 3),
        "ingest_rounds": ingest_rounds,
        "raw_one_sorted_call_chunks_per_s": round(sorted_rate, 2),
        "raw_one_sorted_call_cpu_ms_per_chunk": round(sorted_cpu * 1000, 2),
        "note": f"best of {rounds} interleaved rounds (raw, ingest, raw, ingest, ...)",
    }

    assert engine is not None
    last = engine
    try:
        pool, source = _k8s_queries(k8s_docs, all_docs)
        qs = [pool[i % len(pool)] for i in range(queries)]
        for mode in RetrievalMode:  # warm-up: loads the dense matrix, the query session, SQLite pages
            last.search(qs[0], k=K, mode=mode)
        times = _time_modes(lambda q, m: last.search(q, k=K, mode=RetrievalMode(m)), qs,
                            [m.value for m in RetrievalMode])
        encode: list[float] = []
        encode_cpu: list[float] = []
        for q in qs:
            started, started_cpu = time.perf_counter(), time.thread_time()
            last.encode_query(q)
            encode.append((time.perf_counter() - started) * 1000)
            encode_cpu.append((time.thread_time() - started_cpu) * 1000)
        latency = {
            "index_chunks": len(chunks), "queries": len(qs), "distinct_queries": len(set(qs)),
            "query_source": source, "k": K,
            "modes": times,
            "query_encoding": ms_stats(encode, encode_cpu),
            "note": "Engine.search(k=10), query encoding included",
        }
        modes: dict[str, dict[str, float]] = latency["modes"]  # type: ignore[assignment]
        log("k8s latency: " + ", ".join(f"{m} p50 {s['p50_ms']:.1f} ms" for m, s in modes.items()))
    finally:
        last.close()
    return embedding, latency


# ---- part 3: the synthetic corpus (evidex.evaluation.synthetic) ------------------------------------
def _synthetic_part(config: Config, *, n_chunks: int, queries: int, work: Path, seed: int, log: Log,
                    batch_chunks: int) -> tuple[dict[str, Any], SqliteStore, list[str]]:
    started = time.perf_counter()
    gen = SyntheticCorpus.create(seed)
    setup_s = time.perf_counter() - started
    index_dir = work / "synthetic-index"
    store = SqliteStore(index_dir, title_weight=config.retrieval.title_weight)
    now = datetime.now(UTC).replace(microsecond=0)
    generate_s = commit_s = 0.0
    docs = passing = 0
    done = 0
    b = 0
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

    qs = gen.queries(seed + 7, queries)
    texts = [q for q, _ in qs]
    embedder = _LookupEmbedder(dict(qs), gen.dim)
    cfg = config.replace(index={"path": str(index_dir)})
    engine = Engine.open(cfg, embedder=embedder, store=store)
    filters = SearchFilters(access_labels=FILTER["access_labels"], valid_at=datetime.now(UTC))

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

    modes = ["bm25", "dense", "hybrid", "hybrid+filter"]
    times = _time_modes(run, texts, modes)
    log("synthetic latency: " + ", ".join(f"{m} p50 {v['p50_ms']:.1f} ms" for m, v in times.items()))

    breakdown = {"hybrid": _hybrid_breakdown(engine, store, texts, embedder, None),
                 "hybrid+filter": _hybrid_breakdown(engine, store, texts, embedder, filters)}
    fts_matches = _fts_match_counts(store, texts)
    report = {
        "chunks": n_chunks, "documents": docs, "dim": gen.dim, "vocabulary": len(gen.vocab),
        "clusters": len(gen.centroids), "tokens_per_chunk": "80-200 (Zipf s=1.07, 15% cluster topic words)",
        "commit_batches": b, "generator_setup_s": round(setup_s, 2), "generate_s": round(generate_s, 2),
        "build_s": round(commit_s, 2), "build_chunks_per_s": round(n_chunks / commit_s, 1),
        "index_mb": round(dir_mb(index_dir), 1),
        "cold_first_query_s": cold,
        "queries": len(texts), "k": K, "candidate_pool": config.retrieval.candidate_pool,
        "fusion": config.retrieval.fusion,
        "query_words": "3-8: 1-2 cluster topic words + Zipfian words outside the 100 most frequent",
        "fts_matching_chunks_per_query": fts_matches,
        "filter": {"access_labels": list(FILTER["access_labels"]), "valid_at": "now",
                   "passing_share": round(passing / n_chunks, 3)},
        "modes": times,
        "hybrid_stages_ms": breakdown,
        "note": "query vectors come from the generator: query encoding is excluded here (see the k8s "
                "figures for its cost)",
    }
    return report, store, texts


def _hybrid_breakdown(engine: Engine, store: SqliteStore, queries: Sequence[str], embedder: _LookupEmbedder,
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
        hits = fuse([dense, sparse], [settings.dense_weight, settings.sparse_weight],
                    FusionMode.from_str(settings.fusion), settings.rrf_k, depth=settings.candidate_pool)
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
    from evidex.retrieval.lexical import fts_query

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


# ---- part 5: bm25s baseline ----------------------------------------------------------------------------
def _bm25s_part(store_path: Path, queries: Sequence[str], log: Log) -> dict[str, Any]:
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
    times: list[float] = []
    cpu: list[float] = []
    for q in queries:
        started, started_cpu = time.perf_counter(), time.thread_time()
        search(q)
        times.append((time.perf_counter() - started) * 1000)
        cpu.append((time.thread_time() - started_cpu) * 1000)
    report = {"version": getattr(bm25s, "__version__", "?"), "method": "lucene k1=1.5 b=0.75, en stopwords, "
              "no stemmer", "tokenize_s": round(tokenize_s, 2), "build_s": round(build_s, 2),
              "build_chunks_per_s": round(retriever.scores["num_docs"] / build_s, 1),
              "rss_growth_mb": round(rss_mb() - rss_before, 1),
              "latency": ms_stats(times, cpu), "note": "single queries, tokenisation included, one thread"}
    log(f"bm25s: build {build_s:.1f} s, p50 {report['latency']['p50_ms']:.1f} ms")
    return report


# ---- the run ---------------------------------------------------------------------------------------------
def run_bench(config: Config, *, k8s_docs: Path | None, synthetic_chunks: int = 100_000, queries: int = 200,
              log: Log = print, embedder: Embedder | None = None, k8s_chunk_budget: int = 600,
              embed_rounds: int = 2, synthetic_batch_chunks: int = 10_000, seed: int = 13,
              workdir: Path | None = None) -> dict[str, Any]:
    """Measure everything in one run; returns the report (see `format_bench`). Temporary indexes are
    created under `workdir` (default: the system temp dir) and deleted afterwards."""
    if synthetic_chunks < 1 or queries < 1 or embed_rounds < 1:
        raise ValueError("synthetic_chunks, queries and embed_rounds must be >= 1")
    started_all = time.perf_counter()
    cpus = os.cpu_count() or 1
    report: dict[str, Any] = {
        "environment": {
            **machine(), "loadavg_start": loadavg(), "python": platform.python_version(),
            "numpy": np.__version__, "sqlite": sqlite3.sqlite_version,
            "blas_threads": {k: os.environ.get(k, "unset") for k in
                             ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")},
            "note": NOISE_NOTE.format(cpus=cpus),
        },
        "goals": dict(GOALS),
    }
    log(f"evidex bench: {report['environment']['note']}")
    if workdir is not None:
        Path(workdir).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="evidex-bench-", dir=workdir) as tmp:
        work = Path(tmp)
        if k8s_docs is not None:
            if embedder is None:
                embedder = configured_embedder(config)  # the configured cache holds the ONNX export
            report["embedding"], report["k8s_latency"] = _k8s_part(
                config, embedder, Path(k8s_docs), chunk_budget=k8s_chunk_budget, rounds=embed_rounds,
                queries=queries, work=work, log=log)
        else:
            report["embedding"] = {"skipped": "no k8s_docs given"}
            report["k8s_latency"] = {"skipped": "no k8s_docs given"}

        gc.collect()
        rss_before = rss_mb()
        maxrss_before = maxrss_mb()
        with RssSampler() as sampler:
            synthetic, store, texts = _synthetic_part(
                config, n_chunks=synthetic_chunks, queries=queries, work=work, seed=seed, log=log,
                batch_chunks=synthetic_batch_chunks)
        rss_after = rss_mb()
        report["synthetic"] = synthetic
        maxrss_evidex = maxrss_mb()
        report["memory"] = {
            "ru_maxrss_mb": round(maxrss_evidex, 1),
            "ru_maxrss_before_synthetic_mb": round(maxrss_before, 1),
            "rss_before_synthetic_mb": round(rss_before, 1),
            "rss_after_synthetic_mb": round(rss_after, 1),
            "rss_growth_synthetic_mb": round(rss_after - rss_before, 1),
            "rss_peak_synthetic_sampled_mb": round(sampler.peak, 1),
            "note": "ru_maxrss is the whole process (embedder model and k8s part included), taken before the "
                    "bm25s baseline; RSS after = store still open, dense matrix loaded",
        }
        log(f"memory: ru_maxrss {maxrss_evidex:.0f} MB; synthetic part RSS {rss_before:.0f} -> "
            f"{rss_after:.0f} MB (peak sampled {sampler.peak:.0f} MB)")
        try:
            report["bm25s"] = _bm25s_part(store.path, texts, log)
        finally:
            store.close()
        report["memory"]["ru_maxrss_after_bm25s_mb"] = round(maxrss_mb(), 1)

    report["environment"]["loadavg_end"] = loadavg()
    report["total_s"] = round(time.perf_counter() - started_all, 1)
    report["checks"] = check_goals(report)
    return report


