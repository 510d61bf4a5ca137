"""What each cheap reranking signal adds: the full pipeline (auto plan, k=10) with one signal removed at a
time, on every development set, side by side in one run.

    .venv/bin/python scripts/ablate_rerank.py [--data ../shared/data] [--limit 0]

Timings on this 2-core machine are noisy; the quality columns are deterministic.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from evidex.config import load_config
from evidex.evaluation.datasets import dev_sets
from evidex.evaluation.runner import evaluate, open_eval_engine

VARIANTS = {
    "full (all signals)": {},
    "- retrieval score": {"w_retrieval": 0.0},
    "- lexical overlap": {"w_lexical": 0.0},
    "- title match": {"w_title": 0.0},
    "- bridge link": {"w_linked": 0.0},
    "- inlink match": {"w_inlink": 0.0},
    "- exact-token bonus": {"exact_token_bonus": 0.0},
    "retrieval only": {"w_lexical": 0.0, "w_title": 0.0, "w_linked": 0.0, "w_inlink": 0.0, "exact_token_bonus": 0.0},
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=Path("../shared/data"))
    ap.add_argument("--limit", type=int, default=0)
    args = ap.parse_args()
    sets = [dev for dev in dev_sets(args.data) if dev.exists()]
    base = load_config()
    print(f"{'variant':24} " + " ".join(f"{dev.name + ' FR/AF/nDCG':>26}" for dev in sets))
    engines = {dev.name: open_eval_engine(base, list(dev.corpus), None) for dev in sets}
    questions = {dev.name: dev.questions()[: args.limit or None] for dev in sets}
    for label, change in VARIANTS.items():
        cells = []
        for name in engines:
            engine = engines[name].with_config(base.replace(evidence=change))
            row = evaluate(engine, questions[name], ["full"], k=10)["pipelines"]["full"]
            ndcg = "-" if row["ndcg@10"] is None else f"{row['ndcg@10']:.3f}"  # none for pattern families (k8s)
            cells.append(f"{row['family_recall']:.3f}/{row['all_found']:.3f}/{ndcg}")
        print(f"{label:24} " + " ".join(f"{c:>26}" for c in cells), flush=True)


if __name__ == "__main__":
    main()
