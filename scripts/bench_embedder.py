"""Benchmark the embedding backends: document throughput and query latency, idle and under CPU load.

    python scripts/bench_embedder.py [--cache-dir DIR] [--threads N] [--load-procs N]

Paragraphs come from the Kubernetes docs under /work/shared/data/k8s/docs when present (else
synthetic text). "loaded" runs the same measurements while busy processes occupy every core.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import re
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from evidex.embedding import default_model_dir, export_onnx_int8, onnx_cache_dir
from evidex.embedding.onnx import OnnxEmbedder
from evidex.embedding.protocol import Embedder
from evidex.embedding.sentence_transformers import SentenceTransformerEmbedder

DOCS_DIR = Path("/work/shared/data/k8s/docs")
QUERY_STEMS = [
    "how do I",
    "why does my",
    "what is the difference between",
    "troubleshoot",
    "configure",
]
QUERY_TOPICS = [
    "roll back a deployment",
    "pod stuck in pending",
    "a ConfigMap and a Secret",
    "DNS inside the cluster",
    "liveness probe failures",
    "resource limits for containers",
    "ingress TLS certificates",
    "persistent volume claim binding",
    "node drain with PodDisruptionBudgets",
    "etcd backups",
]


def paragraphs(count: int, seed: int = 7) -> list[str]:
    """count paragraphs of 100-250 words from the k8s docs, or synthetic ones."""
    rng = random.Random(seed)
    words: list[str] = []
    if DOCS_DIR.is_dir():
        for path in sorted(DOCS_DIR.rglob("*.md")):
            text = re.sub(
                r"```.*?```", " ", path.read_text(encoding="utf-8", errors="replace"), flags=re.DOTALL
            )
            words.extend(re.sub(r"[#*`>|{}\[\]]+", " ", text).split())
            if len(words) > count * 400:
                break
    if len(words) < 1000:
        vocab = ["pod", "node", "kubelet", "scheduler", "volume", "claim", "service", "ingress", "the", "of"]
        words = [rng.choice(vocab) for _ in range(count * 250)]
    out = []
    for _ in range(count):
        size = rng.randint(100, 250)
        start = rng.randrange(0, len(words) - size)
        out.append(" ".join(words[start : start + size]))
    return out


def queries(count: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    return [f"{rng.choice(QUERY_STEMS)} {rng.choice(QUERY_TOPICS)}" for _ in range(count)]


def _busy(deadline: float) -> None:
    x = 0
    while time.time() < deadline:
        x = (x * 31 + 7) % 1_000_003


@contextmanager
def cpu_load(procs: int, max_seconds: float) -> Iterator[None]:
    """procs busy-looping processes, each ending by itself after max_seconds at most."""
    ctx = mp.get_context("spawn")
    workers = [
        ctx.Process(target=_busy, args=(time.time() + max_seconds,), daemon=True) for _ in range(procs)
    ]
    for worker in workers:
        worker.start()
    time.sleep(0.5)
    try:
        yield
    finally:
        for worker in workers:
            worker.terminate()
            worker.join()


def throughput(embedder: Embedder, texts: list[str]) -> float:
    embedder.embed_documents(texts[:8])  # warm-up
    started = time.perf_counter()
    embedder.embed_documents(texts)
    return len(texts) / (time.perf_counter() - started)


def latencies_ms(embed: Callable[[str], object], texts: list[str]) -> tuple[float, float]:
    for text in texts[:5]:
        embed(text)
    samples = []
    for text in texts:
        started = time.perf_counter()
        embed(text)
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(0.95 * (len(samples) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "evidex-bench")
    parser.add_argument("--threads", type=int, default=None, help="document threads (default: all cores)")
    parser.add_argument("--load-procs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--paragraphs", type=int, default=200)
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()

    model_dir = default_model_dir()
    target = onnx_cache_dir(model_dir, args.cache_dir)
    started = time.perf_counter()
    export_onnx_int8(model_dir, target)
    print(f"ONNX export ready in {time.perf_counter() - started:.1f}s ({target})")

    texts, qs = paragraphs(args.paragraphs), queries(args.queries)
    backends: dict[str, Embedder] = {
        "onnx-int8": OnnxEmbedder(target, threads=args.threads),
        "torch (st)": SentenceTransformerEmbedder(model_dir, threads=args.threads),
    }
    vectors = {name: e.embed_documents(texts) for name, e in backends.items()}
    cos = (vectors["onnx-int8"] * vectors["torch (st)"]).sum(axis=1)
    qcos = np.array(
        [float(backends["onnx-int8"].embed_query(q) @ backends["torch (st)"].embed_query(q)) for q in qs]
    )
    print(
        f"cores {os.cpu_count()}, doc threads {args.threads or os.cpu_count()}, {len(texts)} paragraphs "
        f"(mean {np.mean([len(t.split()) for t in texts]):.0f} words), {len(qs)} queries"
    )
    print(
        f"agreement onnx vs torch: paragraphs cos min {cos.min():.4f} mean {cos.mean():.4f}; "
        f"queries cos min {qcos.min():.4f} mean {qcos.mean():.4f}"
    )

    rows: list[tuple[str, str, float, float, float]] = []
    for load in ("idle", "loaded"):
        for name, embedder in backends.items():
            if load == "idle":
                tput = throughput(embedder, texts)
                p50, p95 = latencies_ms(embedder.embed_query, qs)
            else:
                with cpu_load(args.load_procs, max_seconds=120):
                    tput = throughput(embedder, texts)
                    p50, p95 = latencies_ms(embedder.embed_query, qs)
            rows.append((name, load, tput, p50, p95))

    print(f"\n{'backend':<12} {'cpu':<8} {'chunks/s':>9} {'query p50 ms':>13} {'query p95 ms':>13}")
    for name, load, tput, p50, p95 in rows:
        print(f"{name:<12} {load:<8} {tput:>9.1f} {p50:>13.2f} {p95:>13.2f}")
    if any(load == "loaded" for _, load, *_ in rows):
        print(f"(loaded = {args.load_procs} busy processes on {os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
