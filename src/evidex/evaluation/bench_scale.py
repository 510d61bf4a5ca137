"""Part 6 of `evidex bench`: cost as the index grows. For each size (`--chunks 10000,100000,1000000`) a generated
corpus (`evidex.evaluation.synthetic`: Zipfian text, vectors clustered on the sphere) is built in one child process
and served from another, so each process's peak RSS is its own: the build's (ingest, then the dense index and
its approximate index), and the server's (what a process answering queries holds).

The server times, with each mode interleaved per query: bm25, dense and hybrid `Engine.search` (k=10), hybrid with
a label + expiry filter, the full pipeline with the gate (`search_with_reasoning`), and hybrid filtered to 1 %,
10 % and 50 % of the documents (one access label each). Query vectors come from the generator: no model runs.
It also measures the approximate dense search against exact search (recall@10 of `search_dense`, plain and
under each selectivity filter) and the hybrid ranking's top 10 against the same fusion over exact dense lists.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from evidex.admission.gate import Principal
from evidex.config import Config, load_config
from evidex.engine import Engine, open_store
from evidex.evaluation.bench_synthetic import K, LookupEmbedder, build_synthetic
from evidex.evaluation.measure import dir_mb, peak_rss_mb, rss_mb, rss_parts_mb, time_modes
from evidex.evaluation.synthetic import FILTER, SELECTIVITY, SyntheticCorpus
from evidex.retrieval.hybrid import fuse_lists
from evidex.stores.sqlite import SqliteStore
from evidex.types import RetrievalMode, ScoredId, SearchFilters

SELECTIVE = {f"filtered_{label.split('-')[1]}pct": label for label in SELECTIVITY}
MODES = ("bm25", "dense", "hybrid", "hybrid_filter", "full", *SELECTIVE)
RECALL_QUERIES = 50


def scale_part(config_path: Path | None, sizes: list[int], queries: int, work: Path, seed: int,
               log: Any) -> dict[str, Any]:
    """{"sizes": {"<n>": figures}}: each size built and served in its own child process."""
    out: dict[str, Any] = {}
    for n in sizes:
        index_dir = work / f"scale-{n}"
        common = ["--dir", str(index_dir), "--chunks", str(n), "--seed", str(seed), "--queries", str(queries)]
        if config_path is not None:
            common += ["--config", str(config_path)]
        log(f"scale: building {n:,} chunks in a child process")
        built = _child("build", common)
        log(f"scale: {n:,} built in {built['build_s']} s (+ dense index {built['dense_index_build_s']} s); serving")
        served = _child("serve", common)
        out[str(n)] = {**built, **served}
        log(f"scale: {n:,}: hybrid p50 {served['latency_ms']['hybrid']['p50']} ms, full p50 "
            f"{served['latency_ms']['full']['p50']} ms, serving peak RSS {served['peak_rss_mb']} MB")
    return {"sizes": out}


def _child(role: str, args: list[str]) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "evidex.evaluation.bench_scale", role, *args],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"bench {role} child failed ({done.returncode}): {done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _config(path: str | None, index_dir: Path) -> Config:
    return load_config(Path(path) if path else None).replace(index={"path": str(index_dir)})


def build(index_dir: Path, n: int, seed: int, config: Config) -> dict[str, Any]:
    """Write the corpus through `commit_batch`, then load the dense index (and build the approximate one)."""
    gen = SyntheticCorpus.create(seed)
    built = build_synthetic(gen, config, index_dir, n, 10_000, seed, 0.0, lambda _m: None, open_store(config))
    started = time.perf_counter()
    approximate = None  # Milvus: its own index, built as rows arrive
    if isinstance(built.store, SqliteStore):
        approximate = built.store._dense_index().ann is not None
    dense_s = time.perf_counter() - started
    built.store.close()
    return {"chunks": n, "documents": built.documents, "build_s": round(built.commit_s, 1),
            "ingest_chunks_per_s": round(n / built.commit_s, 1), "generate_s": round(built.generate_s, 1),
            "dense_index_build_s": round(dense_s, 1), "approximate": approximate,
            "disk_mb": round(dir_mb(index_dir), 1), "build_peak_rss_mb": round(peak_rss_mb(), 1)}


def serve(index_dir: Path, n: int, seed: int, queries: int, config: Config) -> dict[str, Any]:
    """Open the built index as a server would, time every mode, measure recall against exact search."""
    gen = SyntheticCorpus.create(seed)
    qs = gen.queries(seed + 7, queries)
    texts = [q for q, _ in qs]
    store = open_store(config)
    engine = Engine.open(config, embedder=LookupEmbedder(dict(qs), gen.dim), store=store)
    started = time.perf_counter()
    store.search_dense(qs[0][1], K)  # loads the dense index (SQLite) or the collection (Milvus)
    open_s = time.perf_counter() - started
    now = datetime.now(UTC).replace(microsecond=0)
    reader = Principal.of("bench", list(FILTER["access_labels"]))
    filters = {"hybrid_filter": SearchFilters(access_labels=FILTER["access_labels"], valid_at=now),
               **{mode: SearchFilters(access_labels=(label,)) for mode, label in SELECTIVE.items()}}

    def run(q: str, mode: str) -> object:
        if mode == "full":
            return engine.search_with_reasoning(q, principal=reader, retrieved_at=now)
        plain = mode in ("bm25", "dense", "hybrid")
        return engine.search(q, k=K, mode=RetrievalMode(mode) if plain else RetrievalMode.HYBRID,
                             filters=None if plain else filters[mode])

    for q in texts[:5]:
        for mode in MODES:
            run(q, mode)
    times = time_modes(run, texts, MODES)
    serving_rss, serving_peak, parts = rss_mb(), peak_rss_mb(), rss_parts_mb()  # before the recall check
    recall: dict[str, Any] = {"filter_shares": "n/a (Milvus)"}
    if isinstance(store, SqliteStore):  # exact search over the same vectors is the reference
        recall = _recall(engine, store, store._dense_index().matrix, qs[:RECALL_QUERIES], filters)
        recall["filter_shares"] = {mode: round(float(np.mean(store._dense_index().mask(f))), 4)  # type: ignore[arg-type]
                                   for mode, f in filters.items()}
    return {"serve_open_s": round(open_s, 2), "queries": len(texts), "backend": config.index.backend.value,
            "latency_ms": {m: {"p50": t["p50_ms"], "p95": t["p95_ms"], "cpu_p50": t["cpu_p50_ms"]}
                           for m, t in times.items()},
            **recall, "rss_serving_mb": round(serving_rss, 1), "peak_rss_mb": round(serving_peak, 1),
            "rss_serving_parts_mb": parts}


def _recall(engine: Engine, store: SqliteStore, matrix: npt.NDArray[np.float32], qs: list[tuple[str, Any]],
            filters: dict[str, SearchFilters]) -> dict[str, Any]:
    """Recall@10 of `search_dense` against exact search, plain and under each selectivity filter, and of the
    hybrid top 10 against fusion over exact dense lists (the same sparse lists)."""
    pool = max(K, engine.config.retrieval.candidate_pool)
    index = store._dense_index()
    cases = {"": None, **{f"{mode}_": filters[mode] for mode in SELECTIVE}}
    masks = {name: index.mask(f) for name, f in cases.items()}
    exact = _exact_top(matrix, np.vstack([v for _, v in qs]), masks, pool)
    out: dict[str, Any] = {}
    for name, f in cases.items():
        dense_hits = hybrid_hits = possible = hybrid_possible = 0
        for i, (text, vector) in enumerate(qs):
            truth = exact[name][i]
            possible += min(K, len(truth))  # a narrow filter may let fewer than K rows through
            found = store.search_dense(vector, pool, f)
            dense_hits += len({h.record_id for h in found[:K]} & {index.ids[r] for r in truth[:K]})
            sparse = store.search_sparse(text, pool, f)
            exact_list = [ScoredId(index.ids[r], float(matrix[r] @ vector)) for r in truth]
            weights = [engine.config.retrieval.dense_weight, engine.config.retrieval.sparse_weight]
            ours = fuse_lists([found, sparse], weights, engine.config.retrieval)[:K]
            ref = fuse_lists([exact_list, sparse], weights, engine.config.retrieval)[:K]
            hybrid_hits += len({h.record_id for h in ours} & {h.record_id for h in ref})
            hybrid_possible += len(ref)
        prefix = "ann" if not name else name.rstrip("_")
        out[f"{prefix}_recall_at_10"] = round(dense_hits / max(1, possible), 4)
        out[f"{prefix}_hybrid_recall_at_10"] = round(hybrid_hits / max(1, hybrid_possible), 4)
    return out


def _exact_top(matrix: npt.NDArray[np.float32], queries: npt.NDArray[np.float32],
               masks: dict[str, npt.NDArray[np.bool_] | None], pool: int) -> dict[str, list[list[int]]]:
    """Exact top `pool` rows per query under each mask, in one pass over the (memory-mapped) matrix."""
    scores = np.empty((len(queries), len(matrix)), dtype=np.float32)
    for start in range(0, len(matrix), 100_000):
        block = np.asarray(matrix[start:start + 100_000], dtype=np.float32)
        scores[:, start:start + len(block)] = queries @ block.T
    out: dict[str, list[list[int]]] = {}
    for name, mask in masks.items():
        masked = scores if mask is None else np.where(mask, scores, -np.inf)
        tops = []
        for row in masked:
            top = np.argpartition(-row, pool)[:pool]
            top = top[np.lexsort((top, -row[top]))]
            tops.append([int(r) for r in top if np.isfinite(row[r])])
        out[name] = tops
    return out


def main(argv: list[str]) -> None:
    role, args = argv[0], dict(zip(argv[1::2], argv[2::2], strict=True))
    index_dir, n, seed = Path(args["--dir"]), int(args["--chunks"]), int(args["--seed"])
    config = _config(args.get("--config"), index_dir)
    if role == "build":
        result = build(index_dir, n, seed, config)
    else:
        result = serve(index_dir, n, seed, int(args["--queries"]), config)
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
