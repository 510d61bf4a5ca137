"""Off-topic questions: each development set's questions asked against every other set's index, where nothing
answers them. How often does evidex still say "proceed", and how confident is it? Beside it, the same figures
for each set's own questions on its own index (where proceed is mostly right).

    .venv/bin/python scripts/eval_offtopic.py [--data ../shared/data] [--limit 100]

No gate (the evaluation corpora carry no access labels). Decisions are deterministic; a good engine proceeds
on almost none of the off-topic questions and on most of its own.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import Counter
from pathlib import Path

from evidex.config import load_config
from evidex.evaluation.runner import open_eval_engine
from evidex.pipeline import SearchRequest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "eval"))  # eval/dev_sets.py: where the sets are
from dev_sets import dev_sets


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=Path("../shared/data"))
    ap.add_argument("--limit", type=int, default=100, help="questions per set (0 = all)")
    args = ap.parse_args()
    config = load_config()
    sets = [d for d in dev_sets(args.data) if d.exists()]
    questions = {d.name: [q.text for q in d.questions()[: args.limit or None]] for d in sets}
    print(f"{'questions':10s} {'index':10s} {'n':>4s} {'proceed':>8s} {'re-query':>9s} {'stop':>5s} {'conf':>5s}")
    for index_set in sets:
        engine = open_eval_engine(config, list(index_set.corpus), None, log=lambda _: None)
        for asked in sets:
            actions: Counter[str] = Counter()
            confidence = []
            for text in questions[asked.name]:
                result = engine.result_of(engine.run(SearchRequest(text, k=10)))
                actions[result["decision"]["recommendation"]["action"]] += 1
                confidence.append(result["signals"]["confidence"])
            n = len(confidence)
            own = " (own)" if asked.name == index_set.name else ""
            print(f"{asked.name:10s} {index_set.name + own:10s} {n:4d} {actions['proceed'] / n:8.2f} "
                  f"{actions['re-query'] / n:9.2f} {actions['stop'] / n:5.2f} {statistics.mean(confidence):5.2f}")
        engine.close()


if __name__ == "__main__":
    main()
