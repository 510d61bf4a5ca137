"""One query's embedding on one ONNX thread against two (`[embedding] query_threads`), idle and with cores
kept busy, and the full pipeline's latency with each.

    python scripts/bench_query_threads.py [--data ../shared/data] [--rounds 5] [--threads 1 2]

Questions: the k8s development set's when `--data` holds it (and then the full pipeline on its index too),
else the bundled handbook's. "busy N": N other processes spin on a core each, as other requests or an ingest
would. Rounds alternate the thread counts; each figure is the median over rounds of a round's p50. The machine
is shared and noisy: compare the rows of one run, not runs.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from evidex.config import load_config
from evidex.embedding import default_model_dir, onnx_cache_dir
from evidex.embedding.onnx import OnnxEmbedder
from evidex.engine import Engine, configured_embedder
from evidex.evaluation.measure import p50_ms
from evidex.evaluation.runner import open_eval_engine
from evidex.pipeline import SearchRequest

SAMPLE = Path(__file__).resolve().parents[1] / "src" / "evidex" / "sample" / "handbook-questions.jsonl"


def _spin(stop: Any) -> None:
    while not stop.is_set():
        pass


@contextmanager
def busy(cores: int) -> Iterator[None]:
    stop = multiprocessing.Event()
    workers = [multiprocessing.Process(target=_spin, args=(stop,), daemon=True) for _ in range(cores)]
    for w in workers:
        w.start()
    time.sleep(0.3 if cores else 0)
    try:
        yield
    finally:
        stop.set()
        for w in workers:
            w.join()


def alternated(runs: dict[int, Callable[[str], object]], texts: Sequence[str], rounds: int) -> dict[int, float]:
    per_round: dict[int, list[float]] = {n: [] for n in runs}
    for _ in range(rounds):
        for n, run in runs.items():
            per_round[n].append(p50_ms(run, texts))
    return {n: statistics.median(v) for n, v in per_round.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    k8s = args.data / "k8s"
    source = k8s / "questions.jsonl" if (k8s / "questions.jsonl").is_file() else SAMPLE
    questions = [json.loads(line)["question"] for line in source.read_text(encoding="utf-8").splitlines() if line]
    config = load_config()
    assert isinstance(configured_embedder(config), OnnxEmbedder), "query threads are the ONNX backend's"
    export = onnx_cache_dir(default_model_dir(), config.cache_dir)  # built by the line above
    embedders = {n: OnnxEmbedder(export, threads=1, query_threads=n) for n in args.threads}
    print(f"{len(questions)} questions of {source}; {os.cpu_count()} cores; ms, median of {args.rounds} "
          "alternated rounds' p50")
    for cores in (0, 1, (os.cpu_count() or 1)):
        with busy(cores):
            result = alternated({n: e.embed_query for n, e in embedders.items()}, questions, args.rounds)
        print(f"embed_query, busy {cores}: " + ", ".join(f"{n} thread(s) {ms:.1f}" for n, ms in result.items()))
    if source == SAMPLE:
        print(f"full pipeline: skipped ({k8s} not found)")
        return
    engines = {n: open_eval_engine(config, [k8s / "docs"], None, embedder=e) for n, e in embedders.items()}
    for engine in engines.values():
        engine.warm_up()

    def search(engine: Engine) -> Callable[[str], object]:
        return lambda q: engine.run(SearchRequest(query=q))  # evaluation engines keep no query vectors

    result = alternated({n: search(e) for n, e in engines.items()}, questions, args.rounds)
    print("full pipeline (k8s, warm index): " + ", ".join(f"{n} thread(s) {ms:.1f}" for n, ms in result.items()))


if __name__ == "__main__":
    main()
