"""Where a full-pipeline query's time goes: per stage (the trace) and per step inside the stages.

    .venv/bin/python scripts/profile_query.py [--data ../shared/data] [--rounds 3]

Opens the k8s development index like `evidex eval` (warmed up as a server is), then asks the 32 development
questions `--rounds` times; the first round meets each question's words for the first time, as `evidex eval`
does. Prints, per round, the mean time of each stage and of the pipeline's main steps (timed by wrapping
them: the wrappers add about a microsecond a call). Noisy machine: compare two runs only side by side.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import evidex.pipeline as pipeline
from evidex.config import load_config
from evidex.evaluation.datasets import dev_sets
from evidex.evaluation.runner import open_eval_engine
from evidex.pipeline import SearchRequest

STEPS = ("query_lists", "fuse_lists", "without_frames", "with_term_weights", "to_candidates", "plan_question",
         "rerank", "named_pages", "rescue", "cited_records", "reserve", "grade")


def timed(spent: dict[str, float], name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[name] += (time.perf_counter() - started) * 1000

    return wrapper


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=Path("../shared/data"))
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    spent: dict[str, float] = defaultdict(float)
    for name in STEPS:
        setattr(pipeline, name, timed(spent, name, getattr(pipeline, name)))
    k8s = next(d for d in dev_sets(args.data) if d.name == "k8s")
    engine = open_eval_engine(load_config(), list(k8s.corpus), None)
    engine.warm_up()
    questions = [q.text for q in k8s.questions()]
    for round_no in range(1, args.rounds + 1):
        spent.clear()
        stages: dict[str, list[float]] = defaultdict(list)
        totals = []
        for text in questions:
            started = time.perf_counter()
            outcome = engine.run(SearchRequest(query=text, k=10))
            totals.append((time.perf_counter() - started) * 1000)
            for stage in outcome.trace.stages:
                stages[stage.name].append(stage.ms)
        n = len(questions)
        print(f"round {round_no}: p50 {statistics.median(totals):.1f} ms, mean {statistics.fmean(totals):.1f}")
        print("  stages: " + ", ".join(f"{k} {statistics.fmean(v):.2f}" for k, v in stages.items()))
        print("  steps:  " + ", ".join(f"{k} {v / n:.2f}" for k, v in sorted(spent.items(), key=lambda kv: -kv[1])))
    engine.close()


if __name__ == "__main__":
    main()
