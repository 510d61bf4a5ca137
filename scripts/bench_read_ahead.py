"""What reading the common words' sparse matches at warm-up (`Engine.warm_up`, `Store.read_ahead`) saves a
search that meets its words for the first time, as every question of a lone `evidex eval` does.

    python scripts/bench_read_ahead.py [--data ../shared/data] [--sets k8s k8s-blind ... k8s-blind-6]

Two engines on one k8s index in one process, sharing one model: `ahead` warms up as servers and evaluations
do; `cold` warms up the same way but reads no words ahead. Each question runs on both back to back, the order
alternating, so both see the machine's load alike; `cold` reads each new word of it as a cold evaluation
does. Prints, per question set (fresh engines each), the warm-up's cost (seconds, matches read ahead) and each
engine's p50 and the median of the paired differences. The machine is shared and noisy: compare the rows of one run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from evidex.config import load_config
from evidex.engine import WARM_WORDS, Engine, settle_heap
from evidex.evaluation.datasets import BLIND_K8S_SETS
from evidex.evaluation.runner import open_eval_engine
from evidex.pipeline import SearchRequest

ROOT = Path(__file__).resolve().parents[1]
SETS = {"k8s": "{data}/k8s/questions.jsonl",
        **{name: str(ROOT / "eval" / name / "questions.jsonl") for name in BLIND_K8S_SETS}}


def _timed(engine: Engine, question: str) -> float:
    started = time.perf_counter()
    engine.result_of(engine.run(SearchRequest(query=question)))
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--sets", nargs="+", default=list(SETS), choices=list(SETS))
    args = parser.parse_args()
    docs = args.data / "k8s" / "docs"
    if not docs.is_dir():
        raise SystemExit(f"no k8s pages under {args.data} (pass --data)")
    model = None
    for name in args.sets:
        path = Path(SETS[name].format(data=args.data))
        questions = [json.loads(line)["question"] for line in path.read_text(encoding="utf-8").splitlines() if line]
        # Fresh engines per set: a set's words are new to both, as a lone evaluation's are.
        ahead = open_eval_engine(load_config(None), [docs], None, embedder=model)
        model = ahead.embedder
        cold = open_eval_engine(load_config(None), [docs], None, embedder=model)
        cold.store.read_ahead = lambda words: None  # type: ignore[method-assign]
        started = time.perf_counter()
        cold.warm_up()
        plain_s = time.perf_counter() - started
        started = time.perf_counter()
        ahead.warm_up()
        ahead_s = time.perf_counter() - started
        rows = ahead.store._word_cache.used - cold.store._word_cache.used  # type: ignore[attr-defined]
        settle_heap()
        with_ahead: list[float] = []
        without: list[float] = []
        for i, question in enumerate(questions):
            pair = [(ahead, with_ahead), (cold, without)]
            for engine, out in pair if i % 2 == 0 else reversed(pair):
                out.append(_timed(engine, question))
        diffs = [b - a for a, b in zip(with_ahead, without, strict=True)]
        print(f"{name} ({len(questions)} questions): warm-up {plain_s:.2f} -> {ahead_s:.2f} s ({WARM_WORDS} words, "
              f"{rows:,} matches, {rows * 16 / 2**20:.1f} MB read ahead); p50 {statistics.median(without):.1f} -> "
              f"{statistics.median(with_ahead):.1f} ms; paired difference median {statistics.median(diffs):.1f} ms "
              f"(mean {statistics.mean(diffs):.1f})")
        ahead.close()
        cold.close()

if __name__ == "__main__":
    main()
