"""What a cross-encoder costs per query on this machine: sentence-transformers (torch) against its ONNX export.

    .venv/bin/python scripts/bench_cross_encoder.py [--queries 20] [--top-n 30] [--threads 2]

No cross-encoder weights can be had offline here, so the model is a randomly initialised one with the
architecture of ms-marco-MiniLM-L-6-v2 (6 layers, hidden 384, 12 heads, the packaged MiniLM vocabulary),
built in a temporary directory. Its scores mean nothing; its time per query is what a real model of that
size costs. The texts are the top `--top-n` hybrid hits of the k8s development questions
(../shared/data/k8s, from the evaluation index cache) when present, else the bundled handbook's paragraphs.
The machine is shared and noisy: compare the two backends within one run (the ratio), not across runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
HANDBOOK = Path(__file__).resolve().parents[1] / "src" / "evidex" / "sample" / "handbook"


def workload(n_queries: int, top_n: int) -> tuple[str, list[tuple[str, list[str]]]]:
    k8s = DATA / "k8s"
    if (k8s / "questions.jsonl").is_file():
        from evidex.config import load_config
        from evidex.evaluation.runner import open_eval_engine

        engine = open_eval_engine(load_config(), [k8s / "docs"], None)
        questions = [json.loads(line)["question"] for line in (k8s / "questions.jsonl").open()][:n_queries]
        work = [(q, [c.chunk.text for c in engine.search(q, k=top_n)]) for q in questions]
        engine.close()
        return "k8s development questions, their top hybrid hits", work
    paragraphs = [p for f in sorted(HANDBOOK.rglob("*.md")) for p in f.read_text().split("\n\n") if len(p) > 200]
    texts = (paragraphs * (top_n // max(1, len(paragraphs)) + 1))[:top_n]
    return "bundled handbook paragraphs", [(f"question {i} about the handbook", texts) for i in range(n_queries)]


def timed(score: Callable[[str, Sequence[str]], list[float]], work: list[tuple[str, list[str]]]) -> list[float]:
    score(*work[0])  # warm-up
    out = []
    for query, texts in work:
        started = time.perf_counter()
        score(query, texts)
        out.append((time.perf_counter() - started) * 1000)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--top-n", type=int, default=30)
    ap.add_argument("--threads", type=int, default=2, help="parallel ONNX inferences (and torch threads)")
    args = ap.parse_args()
    import torch
    from transformers.utils import logging as hf_logging

    from evidex.rerank.cross_encoder import OnnxCrossEncoder, SentenceTransformerCrossEncoder, export_onnx
    from evidex.testing.models import MINILM_L6, random_cross_encoder

    hf_logging.disable_progress_bar()
    torch.set_num_threads(args.threads)
    source, work = workload(args.queries, args.top_n)
    chars = statistics.fmean(len(t) for _, texts in work for t in texts)
    print(f"workload: {len(work)} queries x {args.top_n} texts ({source}; mean {chars:.0f} characters per text)")
    with tempfile.TemporaryDirectory() as tmp:
        model = random_cross_encoder(Path(tmp) / "minilm-l6-shaped-ce", MINILM_L6, seed=0)
        started = time.perf_counter()
        onnx_dir = export_onnx(model, Path(tmp) / "onnx")
        int8_dir = export_onnx(model, Path(tmp) / "onnx-int8", int8=True)
        print(f"ONNX exports (fp32 and int8): {time.perf_counter() - started:.1f} s")
        backends: dict[str, Callable[[str, Sequence[str]], list[float]]] = {
            "sentence-transformers (torch)": SentenceTransformerCrossEncoder(model, max_length=512).score,
            "ONNX fp32 (onnxruntime)": OnnxCrossEncoder(onnx_dir, threads=args.threads).score,
            "ONNX int8 (onnxruntime)": OnnxCrossEncoder(int8_dir, threads=args.threads).score,
        }
        results = {name: timed(score, work) for name, score in backends.items()}
    base = statistics.median(next(iter(results.values())))
    for name, ms in results.items():
        p50, p95 = statistics.median(ms), sorted(ms)[int(0.95 * (len(ms) - 1))]
        print(f"{name:32s} per query p50 {p50:7.1f} ms  p95 {p95:7.1f} ms  ({p50 / base:.2f}x torch)")


if __name__ == "__main__":
    main()
