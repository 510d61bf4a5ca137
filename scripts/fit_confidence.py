"""Fit evidex's confidence model on the development sets and write src/evidex/data/confidence.json.

    .venv/bin/python scripts/fit_confidence.py [--data ../shared/data] [--limit 0]

Runs the full pipeline (auto plan) on each set's questions, records the signal features of each result
and its quality (family recall@10, or nDCG@10 for SciFact), fits a logistic regression of quality on the
standardised features (L2, Newton steps, numpy only), and reports per-set Spearman correlation of the
fitted confidence with quality, in-sample and with 2-fold cross-validation (folds split by question).
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from evidex.config import load_config
from evidex.evaluation.datasets import dev_sets
from evidex.evaluation.metrics import spearman, spearman_ceiling
from evidex.evaluation.runner import open_eval_engine
from evidex.evaluation.signal_check import quality
from evidex.pipeline import SearchRequest
from evidex.signals.compute import features

FEATURES = ["hops_unfollowed", "coverage", "min_family_match", "n_families", "chained", "linked", "query_length",
            "top_score", "mean_score", "margin", "top_lexical", "query_term_coverage", "dense_top", "n_context",
            "dense_commitment", "chain_reach", "sparse_top"]
OUT = Path(__file__).resolve().parents[1] / "src" / "evidex" / "data" / "confidence.json"


def collect(data: Path, limit: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    cfg = load_config()
    out = {}
    for dev in dev_sets(data):
        if not dev.exists():
            print(f"skip {dev.name}: {dev.corpus[0]} not found")
            continue
        engine = open_eval_engine(cfg, list(dev.corpus), None, log=print)
        qs = dev.questions()[: limit or None]
        xs, ys = [], []
        for q in qs:
            outcome = engine.run(SearchRequest(query=q.text, k=10))
            f = features(outcome)
            xs.append([f[k] for k in FEATURES])
            ys.append(quality(q, [c.chunk for c in outcome.ranked], 10))
        engine.close()
        out[dev.name] = (np.array(xs), np.array(ys))
        print(f"{dev.name}: {len(qs)} questions, mean quality {np.mean(ys):.3f}")
    return out


MIN_VARYING = 30  # answers whose value differs from the feature's most common one


def degenerate(x: np.ndarray) -> list[str]:
    """Features that vary on too few answers to be fitted: a weight learnt from a handful of points is noise
    that the model then applies with full force wherever the value is common (a CRAG-grade feature that 4 of
    682 answers varied on did exactly that behind the gate)."""
    out = []
    for i, name in enumerate(FEATURES):
        _, counts = np.unique(np.round(x[:, i], 4), return_counts=True)
        if len(x) - counts.max() < MIN_VARYING:
            out.append(f"{name} ({len(x) - counts.max()} answers differ from its most common value)")
    return out


def fit(x: np.ndarray, y: np.ndarray, l2: float = 1.0, steps: int = 50) -> np.ndarray:
    """Logistic regression with soft labels y in [0, 1]; returns weights with the bias last."""
    xb = np.hstack([x, np.ones((len(x), 1))])
    w = np.zeros(xb.shape[1])
    reg = np.eye(len(w)) * l2
    reg[-1, -1] = 0.0
    for _ in range(steps):
        p = 1 / (1 + np.exp(-xb @ w))
        grad = xb.T @ (p - y) + reg @ w
        hess = xb.T @ (xb * (p * (1 - p))[:, None]) + reg + 1e-6 * np.eye(len(w))
        w -= np.linalg.solve(hess, grad)
    return w


def predict(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-(np.hstack([x, np.ones((len(x), 1))]) @ w)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=Path("../shared/data"))
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args()
    sets = collect(args.data, args.limit)
    x = np.vstack([v[0] for v in sets.values()])
    y = np.concatenate([v[1] for v in sets.values()])
    if bad := degenerate(x):
        raise SystemExit(f"not fitting: these features vary on fewer than {MIN_VARYING} answers: {', '.join(bad)}")
    mean, std = x.mean(axis=0), x.std(axis=0) + 1e-9
    w = fit((x - mean) / std, y)
    report = {}
    rng = np.random.default_rng(0)
    for name, (xs, ys) in sets.items():
        in_sample = spearman(list(predict(w, (xs - mean) / std)), list(ys))
        # 2-fold cross-validation: fit on the other sets plus half of this one, score the held-out half.
        idx = rng.permutation(len(xs))
        halves = [idx[: len(idx) // 2], idx[len(idx) // 2:]]
        preds = np.zeros(len(xs))
        for held, train in (halves, halves[::-1]):
            others = [v for n, v in sets.items() if n != name]
            xt = np.vstack([*(o[0] for o in others), xs[train]])
            yt = np.concatenate([*(o[1] for o in others), ys[train]])
            m, s = xt.mean(axis=0), xt.std(axis=0) + 1e-9
            preds[held] = predict(fit((xt - m) / s, yt), (xs[held] - m) / s)
        cv = spearman(list(preds), list(ys))
        report[name] = {"questions": len(xs), "spearman_in_sample": round(in_sample or 0, 4),
                        "spearman_cv": round(cv or 0, 4),
                        "spearman_ceiling": round(spearman_ceiling(list(ys)) or 0, 4)}
        r = report[name]
        print(f"{name}: Spearman in-sample {r['spearman_in_sample']}, 2-fold CV {r['spearman_cv']} "
              f"(a perfect predictor without ties: {r['spearman_ceiling']})")
    pooled = spearman(list(predict(w, (x - mean) / std)), list(y))
    report["pooled"] = {"questions": len(x), "spearman_in_sample": round(pooled or 0, 4)}
    print(f"pooled: Spearman in-sample {report['pooled']['spearman_in_sample']}")
    # Fold standardisation into the weights so the model applies to raw features.
    weights = {f: round(float(w[i] / std[i]), 6) for i, f in enumerate(FEATURES)}
    intercept = round(float(w[-1] - np.sum(w[:-1] * mean / std)), 6)
    model = {"intercept": intercept, "weights": weights,
             "fitted_on": f"{', '.join(sets)} dev sets, full pipeline, auto plan, k=10; "
                          f"{datetime.now(UTC).strftime('%Y-%m-%d')}",
             "validation": report}
    if not args.dry_run:
        OUT.write_text(json.dumps(model, indent=2) + "\n")
        print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
