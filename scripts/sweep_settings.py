"""Do the evidence stage's settings generalise? A sweep over `[evidence]` settings, judged by leaving each k8s
question set out in turn.

    .venv/bin/python scripts/sweep_settings.py SETTINGS.jsonl [--out sweep.jsonl] [--data ../shared/data]
    .venv/bin/python scripts/sweep_settings.py --random 60 --seed 25 [--out sweep.jsonl]

Each line of SETTINGS.jsonl is one set of `[evidence]` overrides (`{"w_lexical": 0.15}`; `{}` is the defaults,
always run first). `--random N` instead varies the reranker's weights one at a time (x 0.5, 0.75, 1.33, 2) and
then N times all at once (each x 0.5-2). Every setting runs the full pipeline (auto plan, k=10) on the k8s
development set and every blind set (~12 s a setting on the 2-core machine, query vectors cached), and each
question's family recall is appended to `--out`, so a sweep can be stopped and resumed.

It then prints, for each set, the setting best on all the other sets and what that setting scores on the one
left out, against the defaults: a setting that only fits the sets it was chosen on loses there. Ties keep the
defaults. The quality figures are deterministic; the times are noisy.
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import statistics
import sys
import time
from pathlib import Path

from evidex.config import load_config
from evidex.engine import configured_embedder
from evidex.evaluation import metrics
from evidex.evaluation.runner import PIPELINES, EvalSettings, open_eval_engine
from evidex.types import EvalPlan

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "eval"))  # eval/dev_sets.py: where the sets are
from dev_sets import blind_k8s_sets, dev_sets

REPOSITORY = Path(__file__).resolve().parents[1]
WEIGHTS = {"w_retrieval": 0.8, "w_lexical": 0.3, "w_title": 0.1, "w_linked": 0.3, "w_inlink": 0.5, "cited_bonus": 0.2}


def random_settings(count: int, seed: int) -> list[dict[str, float]]:
    rng = random.Random(seed)
    one_at_a_time = [{key: round(value * m, 4)} for key, value in WEIGHTS.items() for m in (0.5, 0.75, 1.33, 2)]
    together = [{key: round(value * rng.choice((0.5, 0.75, 1, 1, 1.33, 2)), 4) for key, value in WEIGHTS.items()}
                for _ in range(count)]
    return one_at_a_time + together


def key(setting: dict[str, float]) -> str:
    return json.dumps(setting, sort_keys=True)


def run(settings: list[dict[str, float]], out: Path, data: Path) -> None:
    lines = out.read_text().splitlines() if out.exists() else []
    done = {key(json.loads(line)["setting"]) for line in lines if line.strip()}
    todo = [s for s in [{}, *settings] if key(s) not in done]
    if not todo:
        return
    sets = [s for s in dev_sets(data) if s.name == "k8s"] + blind_k8s_sets(data)
    questions = {s.name: s.questions() for s in sets}
    base = load_config()
    embedder = configured_embedder(base)
    embedder.embed_query = functools.lru_cache(maxsize=None)(embedder.embed_query)  # each question embedded once
    opened = open_eval_engine(base, list(sets[0].corpus), None, embedder=embedder)
    with out.open("a", encoding="utf-8") as sink:
        for setting in todo:
            engine = opened.with_config(opened.config.replace(evidence=setting))
            started = time.perf_counter()
            auto = EvalSettings(10, EvalPlan.AUTO)
            recalls = {name: [round(metrics.family_recall(q, PIPELINES["full"](engine, q, auto).top_k(10)), 4)
                              for q in qs]
                       for name, qs in questions.items()}
            sink.write(json.dumps({"setting": setting, "recall": recalls}) + "\n")
            sink.flush()
            pooled = [r for name, rs in recalls.items() if name != "k8s" for r in rs]
            print(f"{key(setting)}: development {statistics.fmean(recalls['k8s']):.3f}, blind pooled "
                  f"{statistics.fmean(pooled):.4f} ({time.perf_counter() - started:.0f} s)", flush=True)


def leave_one_out(out: Path) -> None:
    rows = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    defaults = next(r for r in rows if r["setting"] == {})
    names = list(defaults["recall"])
    rows = [r for r in rows if set(r["recall"]) == set(names)]  # a file resumed after a set was added

    def total(row: dict, among: list[str]) -> float:
        return round(sum(sum(row["recall"][n]) for n in among), 6)

    held_default = held_chosen = 0.0
    count = 0
    for name in names:
        others = [n for n in names if n != name]
        chosen = max(rows, key=lambda r: (total(r, others), r["setting"] == {}))
        size = len(defaults["recall"][name])
        a, b = sum(defaults["recall"][name]), sum(chosen["recall"][name])
        held_default, held_chosen, count = held_default + a, held_chosen + b, count + size
        print(f"{name:14} defaults {a / size:.3f}  chosen on the others {b / size:.3f}  {key(chosen['setting'])}")
    print(f"left out in turn, pooled ({len(rows)} settings, {count} questions): defaults {held_default / count:.4f}, "
          f"chosen {held_chosen / count:.4f}")
    best = max(rows, key=lambda r: (total(r, names), r["setting"] == {}))
    print(f"best on every set at once: {key(best['setting'])} {total(best, names) / count:.4f} "
          f"(defaults {total(defaults, names) / count:.4f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("settings", nargs="?", type=Path, help="JSONL of [evidence] overrides")
    ap.add_argument("--random", type=int, default=0, help="sweep the reranker's weights at random instead")
    ap.add_argument("--seed", type=int, default=25)
    ap.add_argument("--out", type=Path, default=Path("sweep.jsonl"))
    ap.add_argument("--data", type=Path, default=REPOSITORY.parent / "shared" / "data")
    args = ap.parse_args()
    if args.settings is None and not args.random:
        ap.error("give a SETTINGS.jsonl file or --random N")
    settings = ([json.loads(line) for line in args.settings.read_text().splitlines() if line.strip()]
                if args.settings else random_settings(args.random, args.seed))
    run(settings, args.out, args.data)
    leave_one_out(args.out)


if __name__ == "__main__":
    main()
