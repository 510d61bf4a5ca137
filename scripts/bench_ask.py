"""The reference agent loop (`evidex ask`) with and without the query vectors an engine keeps
(`[embedding] query_cache`): a re-query repeats the question with an aspect focus, so its vector is reused.

    .venv/bin/python scripts/bench_ask.py [--questions FILE] [--passes 2] [--rounds 3]

One process, one index (the eval cache's, over ../shared/data/k8s/docs): the questions go through the loop
once to warm up, then passes alternate between an engine keeping no query vectors and one keeping the
configured number, each pass starting empty. Prints ms per question (mean, p50) and rounds per question, which
must not change. Wall-clock on a shared machine: compare the rows of one run, not runs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from evidex.agent import ask
from evidex.config import load_config
from evidex.embedding.cache import QueryVectors
from evidex.evaluation.datasets import load_questions
from evidex.evaluation.runner import open_eval_engine

sys.path.insert(0, str(Path(__file__).resolve().parent))
from eval_agent import ungated_tool  # a sibling script

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "k8s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=Path,
                        default=Path(__file__).resolve().parents[1] / "eval" / "k8s-blind-2" / "questions.jsonl")
    parser.add_argument("--corpus", type=Path, default=DATA / "docs")
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    config = load_config()
    engine = open_eval_engine(config, [args.corpus], None)
    tool = ungated_tool(engine)
    questions = [q.text for q in load_questions(args.questions)]
    for text in questions:
        ask(tool, text, max_rounds=args.rounds)
    print(f"{args.questions}: {len(questions)} questions, at most {args.rounds} rounds")
    for _ in range(args.passes):
        for kept in (0, config.embedding.query_cache):
            engine._query_vectors = QueryVectors(kept)  # each pass starts with no vector kept
            took, rounds = [], 0
            for text in questions:
                started = time.perf_counter()
                rounds += len(ask(tool, text, max_rounds=args.rounds).rounds)
                took.append((time.perf_counter() - started) * 1000)
            print(f"  query vectors kept {kept:4d}: {statistics.fmean(took):6.1f} ms a question "
                  f"(p50 {statistics.median(took):.1f}), {rounds / len(questions):.2f} rounds")
    engine.close()


if __name__ == "__main__":
    main()
