"""Fit the shipped confidence model on the development sets of every domain together, and judge it leaving one
domain out.

    .venv/bin/python scripts/calibrate_dev.py [--data ../shared/data] [--rows eval/confidence_rows.jsonl]
                                              [--reuse] [--dry-run]

For each development set (k8s, FastAPI, HotpotQA, MuSiQue, SciFact; auto plan, k = 10) it asks every question
through the full pipeline and records the signal features and the label `evidex calibrate` fits on (every
required family in the context; for SciFact every relevant abstract), writes them to `--rows` (`--reuse` reads
them from there instead), then:

- per left-out domain: fits on the other domains only and prints the left-out domain's AUROC, ECE, Brier and
  the balanced accuracy of "confidence >= [signals] proceed_confidence" (the figure that counts), and the
  pooled ECE of those left-out predictions;
- fits on every domain with `evidex calibrate --rows ...` and writes src/evidex/data/confidence.json, with the
  left-out figures under "validation" (unless `--dry-run`).

tests/test_confidence_model.py fails when the shipped model no longer reproduces from the current pipeline;
rerun this script (without `--reuse`) to refit.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
from typer.testing import CliRunner

from evidex.config import load_config
from evidex.evaluation import metrics
from evidex.evaluation.runner import open_eval_engine
from evidex.interfaces.cli import app
from evidex.signals.calibration import Row, collect, fit_model, read_rows, write_rows
from evidex.signals.model import ConfidenceModel

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "eval"))  # eval/dev_sets.py: where the sets are
from dev_sets import dev_sets

OUT = ROOT / "src" / "evidex" / "data" / "confidence.json"


def gather(data: Path) -> list[Row]:
    cfg = load_config()
    rows: list[Row] = []
    for dev in dev_sets(data):
        if not dev.exists():
            raise SystemExit(f"{dev.corpus[0]} not found: every domain is needed")
        engine = open_eval_engine(cfg, list(dev.corpus), None, log=print)
        try:
            mine = collect(engine.run, dev.questions(), name=dev.name)
        finally:
            engine.close()
        print(f"{dev.name}: {len(mine)} questions, {sum(r.complete for r in mine)} complete")
        rows += mine
    return rows


def leave_one_out(rows: list[Row], threshold: float) -> dict[str, Any]:
    names = list(dict.fromkeys(r.set for r in rows))
    report: dict[str, Any] = {}
    pooled_p: list[float] = []
    pooled_y: list[bool] = []
    for held in names:
        model = ConfidenceModel.from_dict(fit_model([r for r in rows if r.set != held]))
        mine = [r for r in rows if r.set == held]
        p = [model.probability(r.features) for r in mine]
        y = [r.complete for r in mine]
        pooled_p += p
        pooled_y += y
        figures = {"questions": len(mine), "complete": sum(y), "auroc": metrics.auroc(p, y),
                   "ece": metrics.ece(p, y), "brier": metrics.brier(p, y),
                   "balanced_accuracy": metrics.balanced_accuracy([x >= threshold for x in p], y)}
        report[held] = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in figures.items()}
        print(f"left out {held:9} " + "  ".join(f"{k} {_fmt(v)}" for k, v in report[held].items()))
    report["pooled"] = {"questions": len(pooled_y), "ece": round(metrics.ece(pooled_p, pooled_y) or 0.0, 4),
                        "auroc": round(metrics.auroc(pooled_p, pooled_y) or 0.0, 4)}
    print(f"pooled left-out: ECE {report['pooled']['ece']}, AUROC {report['pooled']['auroc']}")
    return report


def _fmt(v: Any) -> str:
    return "n/a" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--rows", type=Path, default=ROOT / "eval" / "confidence_rows.jsonl")
    ap.add_argument("--reuse", action="store_true", help="read the rows from --rows instead of asking again")
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args()
    rows = read_rows(args.rows) if args.reuse else gather(args.data)
    if not args.reuse:
        write_rows(args.rows, rows)
    threshold = load_config().signals.proceed_confidence
    validation = leave_one_out(rows, threshold)
    if args.dry_run:
        return
    result = CliRunner().invoke(app, ["calibrate", "--rows", str(args.rows), "--out", str(OUT)])
    if result.exit_code != 0:
        raise SystemExit(result.output)
    print(result.output.strip())
    model = json.loads(OUT.read_text(encoding="utf-8"))
    model["validation"] = {"leave_one_domain_out": validation, "proceed_confidence": threshold,
                           "mean_complete": round(float(np.mean([r.complete for r in rows])), 4)}
    OUT.write_text(json.dumps(model, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
