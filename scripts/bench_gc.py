"""What the cyclic garbage collector costs a searching process, with CPython's defaults and settled as the
servers and `evidex eval` settle it (`evidex.serving.settle_heap`).

    python scripts/bench_gc.py [--corpus DIR] [--questions FILE ...] [--passes 2]

Each setting runs in its own process (the collector's state is per process): the eval cache's engine over
the corpus, warmed up, then every question `passes` times through the full pipeline. Prints the search
latency percentiles and the collector's runs, total time and longest pause (from `gc.callbacks`). Wall-clock
on a shared machine: compare the rows of one run, not runs.
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import time
from pathlib import Path

from evidex.config import load_config
from evidex.serving import settle_heap
from evidex.evaluation.datasets import load_questions
from evidex.evaluation.runner import open_eval_engine
from evidex.pipeline import SearchRequest

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def measure(corpus: Path, questions: list[Path], passes: int, settled: bool) -> dict[str, float]:
    engine = open_eval_engine(load_config(None), [corpus], None)
    texts = [q.text for path in questions for q in load_questions(path)]
    engine.warm_up()
    if settled:
        settle_heap()
    started: list[float] = []
    pauses: list[float] = []

    def on_collect(phase: str, _info: dict[str, int]) -> None:
        if phase == "start":
            started.append(time.perf_counter())
        else:
            pauses.append((time.perf_counter() - started.pop()) * 1000)

    gc.callbacks.append(on_collect)
    took = []
    for _ in range(passes):
        for text in texts:
            t = time.perf_counter()
            engine.result_of(engine.run(SearchRequest(query=text)))
            took.append((time.perf_counter() - t) * 1000)
    gc.callbacks.remove(on_collect)
    took.sort()
    return {"searches": len(took), "p50": took[len(took) // 2], "p95": took[int(0.95 * (len(took) - 1))],
            "p99": took[int(0.99 * (len(took) - 1))], "gc_runs": len(pauses),
            "gc_ms_per_search": sum(pauses) / len(took), "gc_longest_ms": max(pauses, default=0.0)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DATA / "k8s" / "docs")
    parser.add_argument("--questions", type=Path, nargs="+", default=[DATA / "k8s" / "questions.jsonl"])
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--settled", choices=["yes", "no"], help=argparse.SUPPRESS)  # one child's setting
    args = parser.parse_args()
    if args.settled:
        print(json.dumps(measure(args.corpus, args.questions, args.passes, args.settled == "yes")))
        return
    print(f"{args.corpus}: ms; the collector's runs, ms per search and longest pause")
    for setting in ("no", "yes"):
        child = [sys.executable, __file__, "--corpus", str(args.corpus), "--passes", str(args.passes),
                 "--settled", setting, "--questions", *map(str, args.questions)]
        r = json.loads(subprocess.run(child, check=True, capture_output=True, text=True).stdout)
        name = "settled" if setting == "yes" else "CPython defaults"
        print(f"  {name:17s} {r['searches']} searches p50 {r['p50']:.1f} p95 {r['p95']:.1f} p99 {r['p99']:.1f} | "
              f"gc {r['gc_runs']} runs, {r['gc_ms_per_search']:.2f} ms a search, longest {r['gc_longest_ms']:.1f}")


if __name__ == "__main__":
    main()
