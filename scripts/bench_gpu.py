"""What a CUDA GPU changes for evidex: ingest (the slow part on a CPU), query embedding, and a cross-encoder.

    python scripts/bench_gpu.py --model-dir DIR --corpus ../shared/data/k8s/docs \
        [--questions ../shared/data/k8s/questions.jsonl] [--out report.json]

Run it on a machine with a GPU and torch built for CUDA; evidex never needs one (`[embedding] device` and
`[evidence] cross_encoder_device` default to "cpu"). In one run it:
1. ingests the corpus with the torch backend on the GPU (`device = "cuda"`), end to end (chunking, embedding,
   SQLite), and embeds the same chunks on the CPU (torch, every core) to compare throughput;
2. checks that the vectors agree: cosine between GPU and CPU vectors of every chunk, and whether each
   question's dense top 10 is the same with either set of vectors;
3. evaluates the full pipeline on the GPU-built index (when --questions is given), querying on the CPU, as a
   GPU-built index is served on a CPU machine;
4. times a cross-encoder of MiniLM-L6's size (random weights: none can be had offline) on 30 hits per query,
   CPU against GPU.
It prints one table and writes the numbers as JSON. Timings on shared machines are noisy: read the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np


def ms(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"p50": round(statistics.median(ordered), 2), "p95": round(ordered[int(0.95 * (len(ordered) - 1))], 2)}


def embedder(model_dir: Path, device: str, batch_size: int) -> Any:
    from evidex.embedding import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(model_dir, threads=os.cpu_count(), batch_size=batch_size, device=device)


def ingest_on(device: str, model_dir: Path, corpus: Path, work: Path, batch_size: int) -> tuple[Any, dict[str, Any]]:
    from evidex.config import Config
    from evidex.engine import Engine

    config = Config().replace(index={"path": str(work / "index")},
                              embedding={"backend": "torch", "device": device, "model_dir": str(model_dir),
                                         "batch_size": batch_size, "cache_dir": str(work / "cache")})
    gpu = embedder(model_dir, device, batch_size)
    gpu.embed_documents(["warm up the GPU"] * batch_size)
    engine = Engine.open(config, embedder=gpu)
    started = time.perf_counter()
    report = engine.ingest([corpus], label="gpu-bench")
    seconds = time.perf_counter() - started
    return engine, {"documents": report.documents, "chunks": report.added_chunks, "seconds": round(seconds, 2),
                    "chunks_per_s": round(report.added_chunks / seconds, 1)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-dir", type=Path, required=True, help="a local sentence-transformers model (fp32)")
    ap.add_argument("--corpus", type=Path, required=True)
    ap.add_argument("--questions", type=Path)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--device", default="cuda", help="the accelerator (cpu only to try the script itself)")
    args = ap.parse_args()
    import torch
    from transformers.utils import logging as hf_logging

    from evidex.engine import Engine
    from evidex.evaluation.datasets import load_questions
    from evidex.evaluation.runner import evaluate
    from evidex.ingest.run import embedding_text
    from evidex.rerank.cross_encoder import SentenceTransformerCrossEncoder
    from evidex.testing.models import MINILM_L6, random_cross_encoder

    hf_logging.disable_progress_bar()
    dev = args.device
    on_gpu = dev.startswith("cuda")
    if on_gpu and not torch.cuda.is_available():
        raise SystemExit("no CUDA GPU visible to torch: this benchmark needs one")

    def sync() -> None:
        if on_gpu:
            torch.cuda.synchronize()

    report: dict[str, Any] = {"gpu": torch.cuda.get_device_name(0) if on_gpu else None, "torch": torch.__version__,
                              "cpu_cores": os.cpu_count()}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        engine, report["ingest_gpu"] = ingest_on(dev, args.model_dir, args.corpus, work, args.batch_size)
        chunks = engine.store.all_chunks()
        texts = [embedding_text(c) for c in chunks]

        gpu = embedder(args.model_dir, dev, args.batch_size)
        cpu = embedder(args.model_dir, "cpu", 32)
        sync()
        started = time.perf_counter()
        gpu_vectors = gpu.embed_documents(texts)
        sync()
        gpu_s = time.perf_counter() - started
        started = time.perf_counter()
        cpu_vectors = cpu.embed_documents(texts)
        cpu_s = time.perf_counter() - started
        cosine = np.sum(gpu_vectors * cpu_vectors, axis=1)
        report["embed_documents"] = {
            "texts": len(texts), "gpu_s": round(gpu_s, 2), "cpu_s": round(cpu_s, 2),
            "gpu_texts_per_s": round(len(texts) / gpu_s, 1), "cpu_texts_per_s": round(len(texts) / cpu_s, 1),
            "speedup": round(cpu_s / gpu_s, 1),
            "gpu_peak_memory_mib": round(torch.cuda.max_memory_allocated() / 2**20) if on_gpu else None,
            "cosine_gpu_vs_cpu": {"min": float(np.min(cosine)), "mean": float(np.mean(cosine))}}

        questions = load_questions(args.questions) if args.questions else []
        queries = [q.text for q in questions] or [t[:200] for t in texts[:50]]
        for name, model in (("cpu", cpu), ("gpu", gpu)):
            model.embed_query(queries[0])
            times = []
            for q in queries:
                started = time.perf_counter()
                model.embed_query(q)
                times.append((time.perf_counter() - started) * 1000)
            report[f"embed_query_ms_{name}"] = ms(times)
        same_top10 = 0
        for q in queries:
            v = cpu.embed_query(q)
            top_gpu = np.argsort(-(gpu_vectors @ v))[:10]
            top_cpu = np.argsort(-(cpu_vectors @ v))[:10]
            same_top10 += int(list(top_gpu) == list(top_cpu))
        report["dense_top10_identical"] = f"{same_top10}/{len(queries)}"

        served = Engine(engine.config, engine.store, cpu)  # the GPU-built index, queried on the CPU
        if questions:
            full = evaluate(served, questions, ["hybrid", "full"], k=10)["pipelines"]
            report["eval_gpu_index_cpu_queries"] = {
                name: {"family_recall": v["family_recall"], "all_found": v["all_found"]} for name, v in full.items()}

        ce_dir = random_cross_encoder(work / "ce", MINILM_L6, seed=0)
        pairs = [(q, [c.chunk.text for c in served.search(q, k=30)]) for q in queries[:20]]
        for device in dict.fromkeys(("cpu", dev)):
            ce = SentenceTransformerCrossEncoder(ce_dir, max_length=512, device=device)
            ce.score(*pairs[0])
            times = []
            for q, hits in pairs:
                started = time.perf_counter()
                ce.score(q, hits)
                sync()
                times.append((time.perf_counter() - started) * 1000)
            report[f"cross_encoder_30_hits_ms_{'gpu' if device != 'cpu' else 'cpu'}"] = ms(times)
        engine.close()
    print(json.dumps(report, indent=2))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
