"""Where evidex `full` spends a question's time on a development set: the pipeline's own per-stage trace (median
over the questions, wall and CPU), then a pyinstrument profile of the same questions (wall clock).

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/peers/profile_full.py ../shared/data/k8s [--rounds 2] [--html F]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict
from pathlib import Path

from evidex.config import load_config
from evidex.engine import ready_to_serve
from evidex.evaluation.answers import EvalSettings
from evidex.evaluation.datasets import load_questions
from evidex.evaluation.runner import PIPELINES, open_eval_engine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("set", type=Path, help="a development set folder: docs/ and questions.jsonl")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--html", type=Path, help="also write pyinstrument's HTML report here")
    args = parser.parse_args()
    engine = open_eval_engine(load_config(None), [args.set / "docs"], None)
    ready_to_serve(engine)
    questions = load_questions(args.set / "questions.jsonl")
    full, settings = PIPELINES["full"], EvalSettings()
    full(engine, questions[0], settings)  # warm-up
    stages: dict[str, list[float]] = defaultdict(list)
    totals, cpu = [], []
    for _ in range(args.rounds):
        for q in questions:
            started, started_cpu = time.perf_counter(), time.thread_time()
            ranked = full(engine, q, settings)
            totals.append((time.perf_counter() - started) * 1000)
            cpu.append((time.thread_time() - started_cpu) * 1000)
            for stage in ranked.info["outcome"].trace.stages:
                stages[stage.name].append(stage.ms)
    print(f"full on {args.set.name}: {len(totals)} questions, p50 {statistics.median(totals):.1f} ms wall, "
          f"{statistics.median(cpu):.1f} ms CPU of the calling thread")
    for name, values in sorted(stages.items(), key=lambda kv: -statistics.median(kv[1])):
        print(f"  {name:<14} p50 {statistics.median(values):7.2f} ms   mean {statistics.fmean(values):7.2f} ms")
    from pyinstrument import Profiler

    profiler = Profiler(interval=0.0005)
    profiler.start()
    for q in questions:
        full(engine, q, settings)
    profiler.stop()
    print(profiler.output_text(unicode=False, color=False, show_all=False))
    if args.html:
        args.html.write_text(profiler.output_html())
    engine.close()


if __name__ == "__main__":
    main()
