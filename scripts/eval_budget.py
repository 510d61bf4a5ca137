"""Every development set at equal budget: one table of family recall / all found within 2,048 tokens.

    .venv/bin/python scripts/eval_budget.py [--data ../shared/data] [--out /tmp/evidex-budget]
        [--pipelines bm25,dense,hybrid,full] [--sets k8s,fastapi,...] [--budget 2048] [--reuse | --merge]

Runs `evidex eval`'s pipelines (automatic plans, k = 10) on each development set of `eval/dev_sets.py` (k8s,
FastAPI, HotpotQA, MuSiQue, SciFact), writes each set's report to `--out/<set>.json`, and prints one table:
per set and pipeline, family recall / all found within `--budget` tokens (see `evidex.evaluation.budget`), then
`full`'s figures @10 (nDCG@10 for SciFact) and its p50 latency. `--reuse` prints the table from the reports
already in `--out` without running anything; `--merge` runs only `--pipelines` and keeps the other
pipelines' figures from the reports there (a change to the evidence stages leaves the plain retrievers as they
were). The quality figures are deterministic; the latencies are not (a
shared 2-core machine): compare them only between runs made side by side.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from evidex.config import load_config
from evidex.engine import ready_to_serve
from evidex.evaluation.runner import PIPELINES, evaluate, open_eval_engine
from evidex.types import EvalPlan

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "eval"))  # eval/dev_sets.py: where the sets are
from dev_sets import DevSet, dev_sets

REPOSITORY = Path(__file__).resolve().parents[1]


def run_set(dev: DevSet, pipelines: list[str], out: Path, merge: bool) -> dict[str, Any]:
    engine = open_eval_engine(load_config(), list(dev.corpus), None, log=lambda m: print(m, file=sys.stderr))
    try:
        ready_to_serve(engine)
        report = evaluate(engine, dev.questions(), pipelines, k=10, plan=EvalPlan.AUTO)
    finally:
        engine.close()
    report["set"] = dev.name
    if merge and out.exists():
        kept = json.loads(out.read_text())["pipelines"]
        report["pipelines"] = {**{n: r for n, r in kept.items() if n not in pipelines}, **report["pipelines"]}
    out.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    return report


def cell(row: dict[str, Any], budget: int) -> str:
    figures = row.get("at_tokens", {}).get(str(budget))
    return "-" if figures is None else f"{figures['family_recall']:.3f} / {figures['all_found']:.3f}"


def table(reports: dict[str, dict[str, Any]], pipelines: list[str], budget: int) -> str:
    head = ["set", *(f"{p} @{budget} tok" for p in pipelines), "full @10", "full p50 ms"]
    rows = [head]
    for name, report in reports.items():
        rows_by = report["pipelines"]
        full = rows_by.get("full")
        at10 = "-"
        if full is not None:
            at10 = (f"nDCG {full['ndcg@10']:.3f}" if name == "scifact"
                    else f"{full['family_recall']:.3f} / {full['all_found']:.3f}")
        p50 = f"{full['latency_ms']['p50']:.1f}" if full is not None else "-"
        rows.append([name, *(cell(rows_by[p], budget) if p in rows_by else "-" for p in pipelines), at10, p50])
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = [" | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=REPOSITORY.parent / "shared" / "data")
    parser.add_argument("--out", type=Path, default=Path("/tmp/evidex-budget"))
    parser.add_argument("--pipelines", default="bm25,dense,hybrid,full")
    parser.add_argument("--sets", default="", help="comma-separated set names (default: every development set)")
    parser.add_argument("--budget", type=int, default=2048, choices=(1024, 2048, 4096))
    parser.add_argument("--reuse", action="store_true", help="print the table from the reports in --out")
    parser.add_argument("--merge", action="store_true", help="keep the figures of pipelines not run from --out")
    args = parser.parse_args()
    pipelines = [p.strip() for p in args.pipelines.split(",") if p.strip()]
    wanted = {s.strip() for s in args.sets.split(",") if s.strip()}
    args.out.mkdir(parents=True, exist_ok=True)
    reports: dict[str, dict[str, Any]] = {}
    for dev in dev_sets(args.data):
        if (wanted and dev.name not in wanted) or not dev.exists():
            continue
        path = args.out / f"{dev.name}.json"
        if args.reuse:
            if path.exists():
                reports[dev.name] = json.loads(path.read_text())
            continue
        print(f"{dev.name}: {', '.join(pipelines)}", file=sys.stderr)
        reports[dev.name] = run_set(dev, pipelines, path, args.merge)
    shown = [p for p in PIPELINES if any(p in r["pipelines"] for r in reports.values())]
    print(table(reports, shown, args.budget))


if __name__ == "__main__":
    main()
