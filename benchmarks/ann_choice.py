"""Which approximate nearest-neighbour library evidex's store uses: faiss, hnswlib and usearch measured side by side
on the same generated vectors (build time, memory, recall@10 against exact search, p50 / p95 of one query on one
thread), and the filtered case (1 %, 10 %, 50 % of rows pass) for the chosen kinds.

The vectors are `evidex.evaluation.synthetic`'s: unit vectors drawn around 300 centroids on the sphere
(a mixture of Gaussians, cos(chunk, centroid) ~ 0.55, cluster sizes Zipf-like), the queries from the same mixture,
as sentence embeddings of a corpus of many topics cluster. Run: `.venv/bin/python benchmarks/ann_choice.py 100000`.
"""

from __future__ import annotations

import gc
import json
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from evidex.evaluation.measure import rss_mb
from evidex.evaluation.synthetic import SyntheticCorpus

K = 10
_KEEP: list[object] = []


def _vectors(n: int, queries: int, seed: int = 13) -> tuple[np.ndarray, np.ndarray]:
    gen = SyntheticCorpus.create(seed)
    rng = np.random.default_rng(seed + 1)
    base = np.vstack([gen._vectors(rng, gen._clusters(rng, min(100_000, n - i))) for i in range(0, n, 100_000)])
    return base, gen._vectors(rng, gen._clusters(rng, queries))


def _exact(base: np.ndarray, qs: np.ndarray, mask: np.ndarray | None = None) -> list[set[int]]:
    out = []
    for q in qs:
        s = base @ q
        if mask is not None:
            s = np.where(mask, s, -np.inf)
        out.append(set(np.argpartition(-s, K)[:K].tolist()))
    return out


def _measure(name: str, build: Callable[[], Any], search: Callable[[Any, np.ndarray], np.ndarray],
             qs: np.ndarray, truth: list[set[int]]) -> dict[str, Any]:
    gc.collect()
    before = rss_mb()
    started = time.perf_counter()
    index = build()
    build_s = time.perf_counter() - started
    gc.collect()
    grown = rss_mb() - before
    times, hits = [], 0
    for q, t in zip(qs, truth, strict=True):
        started = time.perf_counter()
        found = search(index, q)
        times.append((time.perf_counter() - started) * 1000)
        hits += len(t & set(int(x) for x in found[:K]))
    row = {"kind": name, "build_s": round(build_s, 1), "rss_mb": round(grown), "recall_at_10":
           round(hits / (K * len(qs)), 4), "p50_ms": round(float(np.percentile(times, 50)), 3),
           "p95_ms": round(float(np.percentile(times, 95)), 3)}
    print(json.dumps(row), flush=True)
    _measure.last = index  # type: ignore[attr-defined]
    return row


def main(n: int, kinds: list[str]) -> None:
    import faiss

    faiss.omp_set_num_threads(2)
    base, qs = _vectors(n, 200)
    truth = _exact(base, qs)
    dim = base.shape[1]
    nlist = int(4 * np.sqrt(n))

    def faiss_ivf(sq: bool) -> Any:
        quantizer = faiss.IndexFlatIP(dim)
        index = (faiss.IndexIVFScalarQuantizer(quantizer, dim, nlist, faiss.ScalarQuantizer.QT_8bit,
                                               faiss.METRIC_INNER_PRODUCT) if sq else
                 faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT))
        index.train(base[np.random.default_rng(0).choice(n, min(n, 50 * nlist), replace=False)])
        index.add(base)
        _KEEP.append(quantizer)  # the IVF index does not own its quantizer in Python
        faiss.omp_set_num_threads(1)
        return index

    def faiss_search(nprobe: int) -> Callable[[Any, np.ndarray], np.ndarray]:
        def go(index: Any, q: np.ndarray) -> np.ndarray:
            index.nprobe = nprobe
            return index.search(q[None, :], K)[1][0]
        return go

    def faiss_hnsw(sq: bool) -> Any:
        faiss.omp_set_num_threads(2)
        index = (faiss.IndexHNSWSQ(dim, faiss.ScalarQuantizer.QT_8bit, 32, faiss.METRIC_INNER_PRODUCT) if sq
                 else faiss.IndexHNSWFlat(dim, 32, faiss.METRIC_INNER_PRODUCT))
        index.hnsw.efConstruction = 80
        if sq:
            index.train(base)
        index.add(base)
        faiss.omp_set_num_threads(1)
        return index

    def faiss_hnsw_search(ef: int) -> Callable[[Any, np.ndarray], np.ndarray]:
        def go(index: Any, q: np.ndarray) -> np.ndarray:
            index.hnsw.efSearch = ef
            return index.search(q[None, :], K)[1][0]
        return go

    def hnswlib_build() -> Any:
        import hnswlib
        index = hnswlib.Index(space="ip", dim=dim)
        index.init_index(max_elements=n, ef_construction=80, M=16)
        index.add_items(base, np.arange(n), num_threads=2)
        index.set_num_threads(1)
        return index

    def hnswlib_search(ef: int) -> Callable[[Any, np.ndarray], np.ndarray]:
        def go(index: Any, q: np.ndarray) -> np.ndarray:
            index.set_ef(ef)
            return index.knn_query(q, k=K)[0][0]
        return go

    def usearch_build(dtype: str) -> Callable[[], Any]:
        def go() -> Any:
            from usearch.index import Index
            index = Index(ndim=dim, metric="ip", dtype=dtype, connectivity=16, expansion_add=80)
            index.add(np.arange(n), base, threads=2)
            return index
        return go

    def usearch_search(ef: int) -> Callable[[Any, np.ndarray], np.ndarray]:
        def go(index: Any, q: np.ndarray) -> np.ndarray:
            index.expansion_search = ef
            return index.search(q, K, threads=1).keys
        return go

    rows = []
    if "exact" in kinds:
        rows.append(_measure("numpy exact (einsum)", lambda: base, lambda b, q: np.argpartition(
            -np.einsum("ij,j->i", b, q), K)[:K], qs, truth))
    if "ivf" in kinds:
        started = time.perf_counter()
        ivf = faiss_ivf(False)
        print(json.dumps({"kind": "faiss IVF,Flat build", "build_s": round(time.perf_counter() - started, 1)}))
        for nprobe in (16, 32, 64):
            rows.append(_measure(f"faiss IVF{nlist},Flat nprobe={nprobe}", lambda ivf=ivf: ivf,
                                 faiss_search(nprobe), qs, truth))
        del ivf
    if "ivfsq" in kinds:
        started = time.perf_counter()
        built = faiss_ivf(True)
        print(json.dumps({"kind": "faiss IVF,SQ8 build", "build_s": round(time.perf_counter() - started, 1)}))
        for nprobe in (16, 32, 64):
            rows.append(_measure(f"faiss IVF{nlist},SQ8 nprobe={nprobe}", lambda b=built: b,
                                 faiss_search(nprobe), qs, truth))
        del built
    if "fhnsw" in kinds:
        rows.append(_measure("faiss HNSW32,Flat ef=64", lambda: faiss_hnsw(False), faiss_hnsw_search(64), qs,
                             truth))
    if "hnswlib" in kinds:
        rows.append(_measure("hnswlib M=16 ef=64", hnswlib_build, hnswlib_search(64), qs, truth))
        built = _measure.last  # type: ignore[attr-defined]
        rows.append(_measure("hnswlib M=16 ef=128", lambda: built, hnswlib_search(128), qs, truth))
    if "usearch" in kinds:
        for dtype in ("i8", "f16"):
            rows.append(_measure(f"usearch M=16 {dtype} ef=64", usearch_build(dtype), usearch_search(64), qs, truth))
            built = _measure.last  # type: ignore[attr-defined]
            rows.append(_measure(f"usearch M=16 {dtype} ef=128", lambda b=built: b, usearch_search(128), qs, truth))
    print(json.dumps({"n": n, "rows": rows}))


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2].split(",") if len(sys.argv) > 2 else
         ["exact", "ivf", "ivfsq", "fhnsw", "hnswlib", "usearch"])
