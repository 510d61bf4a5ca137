"""`evidex bench`: throughput, latency and memory, measured side by side in one run.

Five parts, each reported next to its goal:

1. Embedding (with `--docs DIR`): the raw embedder (`embed_documents` in batches of `embedding.batch_size`, no
   cache) on the chunk texts of the folder's first pages, versus `Engine.ingest` of the same pages into a fresh
   index with a fresh, empty embedding cache (so it really embeds). Goal: ingest >= 80 % of the raw throughput.
2. Query latency of `Engine.search(k=10)` in bm25, dense and hybrid mode on that index, query encoding
   included, asking the questions of an optional questions file (else the pages' titles). Parts 1 and 2 are
   `bench_docs`; without a folder they are skipped.
3. A generated corpus (default 100k chunks) written straight through `SqliteStore.commit_batch`: build
   throughput, then latency of bm25 / dense / hybrid / filtered hybrid at k=10 with query vectors from the
   same generator (query encoding excluded), and where a hybrid query spends its time.
   Goals: hybrid p50 <= 30 ms, p95 <= 80 ms.
4. Memory: peak RSS (`ru_maxrss`) and the RSS growth of the synthetic part. Goal: <= 1.5 GB.
5. A plain `bm25s` baseline on the same synthetic texts and queries (skipped if bm25s is not installed).
   Parts 3 and 5 are `bench_synthetic`.
6. Cost as the index grows (`--chunks 10000,100000,1000000`): each size built and served in child processes,
   every mode's latency (the full pipeline and filters of 1 %, 10 % and 50 % included), peak RSS, disk, and the
   approximate dense index's recall against exact search (`bench_scale`); `--plots` draws it.

Timings are wall-clock; on a small shared machine they are indicative, and the report says so. The goals
and the text report are in `bench_report`, the timing and memory probes in `measure`.
"""

from __future__ import annotations

import gc
import os
import platform
import sqlite3
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from evidex.config import Config
from evidex.embedding.protocol import Embedder
from evidex.engine import configured_embedder
from evidex.evaluation.bench_docs import docs_part
from evidex.evaluation.bench_report import GOALS, check_goals
from evidex.evaluation.bench_scale import scale_part
from evidex.evaluation.bench_synthetic import bm25s_part, synthetic_part
from evidex.evaluation.measure import RssSampler, loadavg, machine, maxrss_mb, rss_mb

Log = Callable[[str], None]

NOISE_NOTE = ("{cpus} CPU core(s), shared with other running processes: the machine is noisy, so every "
              "timing here is indicative, not precise")


# ---- the run ---------------------------------------------------------------------------------------------
def run_bench(config: Config, *, docs: Path | None, questions: Path | None = None, synthetic_chunks: int = 100_000,
              queries: int = 200, log: Log = print, embedder: Embedder | None = None, docs_chunk_budget: int = 600,
              embed_rounds: int = 2, synthetic_batch_chunks: int = 10_000, seed: int = 13,
              workdir: Path | None = None, scale_sizes: list[int] | None = None,
              config_path: Path | None = None) -> dict[str, Any]:
    """Measure everything in one run; returns the report (see `format_bench`). Parts 1 and 2 run on the
    documents of `docs` (asking `questions`, else the pages' titles) and are skipped without it. Temporary
    indexes are created under `workdir` (default: the system temp dir) and deleted afterwards."""
    if synthetic_chunks < 1 or queries < 1 or embed_rounds < 1:
        raise ValueError("synthetic_chunks, queries and embed_rounds must be >= 1")
    started_all = time.perf_counter()
    report: dict[str, Any] = {"environment": _environment(), "goals": dict(GOALS)}
    log(f"evidex bench: {report['environment']['note']}")
    if workdir is not None:
        Path(workdir).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="evidex-bench-", dir=workdir) as tmp:
        work = Path(tmp)
        if docs is not None:
            embedder = embedder or configured_embedder(config)  # the configured cache holds the ONNX export
            report["embedding"], report["docs_latency"] = docs_part(
                config, embedder, Path(docs), questions, chunk_budget=docs_chunk_budget, rounds=embed_rounds,
                queries=queries, work=work, log=log)
        else:
            report["embedding"] = {"skipped": "no documents given (--docs DIR)"}
            report["docs_latency"] = {"skipped": "no documents given (--docs DIR)"}
        _synthetic_and_memory(report, config, synthetic_chunks, queries, work, seed, synthetic_batch_chunks, log)
        if scale_sizes:  # part 6: each size built and served in child processes (read `config_path` again)
            report.update(scale_part(config_path, scale_sizes, queries, work, seed, log))
    report["environment"]["loadavg_end"] = loadavg()
    report["total_s"] = round(time.perf_counter() - started_all, 1)
    report["checks"] = check_goals(report)
    return report


def _environment() -> dict[str, Any]:
    return {
        **machine(), "loadavg_start": loadavg(), "python": platform.python_version(),
        "numpy": np.__version__, "sqlite": sqlite3.sqlite_version,
        "blas_threads": {k: os.environ.get(k, "unset") for k in
                         ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")},
        "note": NOISE_NOTE.format(cpus=os.cpu_count() or 1),
    }


def _synthetic_and_memory(report: dict[str, Any], config: Config, n_chunks: int, queries: int, work: Path,
                          seed: int, batch_chunks: int, log: Log) -> None:
    """Parts 3, 4 and 5 into `report`: the synthetic corpus, the memory it took, the bm25s baseline."""
    gc.collect()
    rss_before = rss_mb()
    maxrss_before = maxrss_mb()
    with RssSampler() as sampler:
        synthetic, store, texts = synthetic_part(config, n_chunks=n_chunks, queries=queries, work=work, seed=seed,
                                                 log=log, batch_chunks=batch_chunks)
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
        "note": "ru_maxrss is the whole process (embedder model and docs part included), taken before the "
                "bm25s baseline; RSS after = store still open, dense matrix loaded",
    }
    log(f"memory: ru_maxrss {maxrss_evidex:.0f} MB; synthetic part RSS {rss_before:.0f} -> "
        f"{rss_after:.0f} MB (peak sampled {sampler.peak:.0f} MB)")
    try:
        report["bm25s"] = bm25s_part(store.path, texts, log)
    finally:
        store.close()
    report["memory"]["ru_maxrss_after_bm25s_mb"] = round(maxrss_mb(), 1)
