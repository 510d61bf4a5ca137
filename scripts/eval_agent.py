"""The reference agent loop (`evidex ask`) on the development sets: does following the recommendation add
the evidence the first answer missed?

    .venv/bin/python scripts/eval_agent.py [--data ../shared/data] [--rounds 3] [--sets k8s,fastapi,...]
                                           [--markdown]

Also on our blind k8s questions (every set `eval/blind_sets.txt` lists, over the k8s pages of the data) unless
`--sets` names the sets to run. `--markdown` ends with the table the README carries (one row per set).

For each question: the loop's first round alone versus the evidence of every round together (an agent keeps
what each round adds), as family recall@10 per round-1 context and over the union; how many questions a
re-query improved; the mean number of rounds; the first recommendation's actions. No gate (the evaluation
corpora carry no access labels); quality figures are deterministic.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from evidex.agent import Tool, ask
from evidex.config import load_config
from evidex.engine import Engine
from evidex.evaluation import metrics
from evidex.evaluation.runner import open_eval_engine
from evidex.pipeline import SearchRequest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "eval"))  # eval/dev_sets.py: where the sets are
from dev_sets import blind_k8s_sets, dev_sets


def ungated_tool(engine: Engine) -> Tool:
    def tool(text: str, focus: str | None) -> dict[str, Any]:
        return engine.result_of(engine.run(SearchRequest(text, k=10, aspect_focus=focus)))

    return tool


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=Path("../shared/data"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--query-cache", type=int, default=None,
                    help="query vectors the engine keeps (default: the configured embedding.query_cache)")
    ap.add_argument("--sets", default="", help="comma-separated set names (default: every development and blind set)")
    ap.add_argument("--markdown", action="store_true", help="end with the README's table")
    args = ap.parse_args()
    config = load_config()
    wanted = [s for s in args.sets.split(",") if s]
    table: list[str] = []
    for dev in [*dev_sets(args.data), *blind_k8s_sets(args.data)]:
        if wanted and dev.name not in wanted:
            continue
        if dev.qrels_file is not None:
            continue  # a BEIR set has no evidence families to complete
        if not dev.exists():
            print(f"skip {dev.name}: {dev.corpus[0]} not found")
            continue
        kept = config.embedding.query_cache if args.query_cache is None else args.query_cache
        engine = open_eval_engine(config, list(dev.corpus), None, query_cache=kept)
        tool = ungated_tool(engine)
        questions = dev.questions()
        first, union, rounds = [], [], []
        actions: Counter[str] = Counter()
        improved = 0
        took: list[float] = []
        for q in questions:
            started = time.perf_counter()
            transcript = ask(tool, q.text, max_rounds=args.rounds)
            took.append((time.perf_counter() - started) * 1000)
            round_one = engine.store.get([r for r, e in transcript.evidence.items() if e["round"] == 1])
            every = engine.store.get(list(transcript.evidence))
            first.append(metrics.family_recall(q, round_one))
            union.append(metrics.family_recall(q, every))
            improved += union[-1] > first[-1]
            rounds.append(len(transcript.rounds))
            actions[transcript.rounds[0]["action"]] += 1
        engine.close()
        print(f"{dev.name}: {len(questions)} questions; family recall round 1 {statistics.fmean(first):.3f}, "
              f"all rounds {statistics.fmean(union):.3f}; improved by a re-query {improved}; "
              f"mean rounds {statistics.fmean(rounds):.2f}; first action {dict(actions)}; "
              f"{statistics.fmean(took):.0f} ms a question (query vectors kept: {kept})", flush=True)
        table.append(f"| {dev.name} | {len(questions)} | {statistics.fmean(first):.3f} | {statistics.fmean(union):.3f} "
                     f"| {improved} | {statistics.fmean(rounds):.2f} |")
    if args.markdown:
        print("\n| set | questions | family recall, one shot | after the loop | improved by a re-query | mean rounds |"
              "\n|---|---|---|---|---|---|")
        print("\n".join(table))


if __name__ == "__main__":
    main()
