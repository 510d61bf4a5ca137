"""Fit evidex's confidence model on the development sets and write src/evidex/data/confidence.json.

    .venv/bin/python scripts/fit_confidence.py [--data ../shared/data] [--limit 0]

Runs the full pipeline (auto plan) on each set's questions, records the signal features of each result
and its quality (family recall@10, or nDCG@10 for SciFact), fits a logistic regression of quality on the
standardised features (L2, Newton steps, numpy only), and reports per-set Spearman correlation of the
fitted confidence with quality, in-sample and with 2-fold cross-validation (folds split by question).

The k8s questions also run behind the admission gate (`k8s-gate`: the overlay's metadata, an
`engineering-read` principal, the instant `evidex eval` pins), because that is how evidex is used: there a
required family may be restricted, and the confidence should learn what that looks like. A question held out
of a fold is held out of both k8s runs.

`off-topic`: questions asked of an index that cannot answer them (the k8s questions against the other sets'
indexes, and theirs against the k8s index), quality 0, so the fit also learns what an unanswerable question
looks like; its report is the mean cross-validated confidence they get.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from evidex.admission.gate import Principal
from evidex.config import load_config
from evidex.evaluation.metrics import spearman, spearman_ceiling
from evidex.evaluation.runner import open_eval_engine
from evidex.evaluation.signal_check import quality
from evidex.pipeline import SearchRequest
from evidex.signals.compute import features

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "eval"))  # eval/dev_sets.py: where the sets are
from dev_sets import dev_sets

FEATURES = ["hops_unfollowed", "coverage", "min_family_match", "n_families", "chained", "linked", "query_length",
            "top_score", "mean_score", "margin", "top_lexical", "query_term_coverage", "dense_top", "n_context",
            "dense_commitment", "chain_reach", "sparse_top", "page_agreement"]
OUT = Path(__file__).resolve().parents[1] / "src" / "evidex" / "data" / "confidence.json"


GATED = ("k8s", "k8s-gate", Principal.of("eval", ["engineering-read"]), datetime(2026, 11, 30, tzinfo=UTC))


@dataclass
class Answers:
    x: np.ndarray  # features, one row per question
    y: np.ndarray  # quality
    ids: list[str]  # "<set>/<question id>": the same question in two runs shares it


def collect(data: Path, limit: int) -> dict[str, Answers]:
    cfg = load_config()
    out = {}
    base, gated_name, principal, at = GATED
    for dev in dev_sets(data):
        if not dev.exists():
            print(f"skip {dev.name}: {dev.corpus[0]} not found")
            continue
        runs = [(dev.name, None, SearchRequest)]
        overlay = data / dev.name / "overlay.jsonl"
        if dev.name == base and overlay.exists():
            runs.append((gated_name, overlay, partial(SearchRequest, principal=principal, retrieved_at=at)))
        for name, metadata, request in runs:
            engine = open_eval_engine(cfg, list(dev.corpus), metadata, log=print)
            qs = dev.questions()[: limit or None]
            xs, ys = [], []
            for q in qs:
                outcome = engine.run(request(query=q.text, k=10))
                f = features(outcome)
                xs.append([f[k] for k in FEATURES])
                ys.append(quality(q, [c.chunk for c in outcome.ranked], [c.chunk for c in outcome.context]))
            engine.close()
            out[name] = Answers(np.array(xs), np.array(ys), [f"{dev.name}/{q.id}" for q in qs])
            print(f"{name}: {len(qs)} questions, mean quality {np.mean(ys):.3f}")
    out[OFF_TOPIC] = off_topic(data, cfg, [d for d in dev_sets(data) if d.exists()], limit)
    return out


OFF_TOPIC = "off-topic"
OFF_TOPIC_PER_PAIR = 30  # questions of one set asked against the other's index
ENGINEERING = "k8s"  # the one corpus whose domain no other set shares (the Wikipedia sets overlap each other)


def off_topic(data: Path, cfg: Any, sets: list[Any], limit: int) -> Answers:
    """Questions asked of an index that cannot answer them (quality 0): the k8s questions against each other
    set's index, and each other set's questions against the k8s index. Without them the fit never sees an
    off-topic question, and gave k8s-style questions asked of a Wikipedia index a confidence of 0.65."""
    by_name = {d.name: d for d in sets}
    if ENGINEERING not in by_name:
        return Answers(np.zeros((0, len(FEATURES))), np.zeros(0), [])
    pairs = [(by_name[ENGINEERING], d) for d in sets if d.name != ENGINEERING]
    pairs += [(d, by_name[ENGINEERING]) for d in sets if d.name != ENGINEERING]
    xs, ids = [], []
    for index_set, asked in pairs:
        engine = open_eval_engine(cfg, list(index_set.corpus), None, log=print)
        for q in asked.questions()[: min(limit or OFF_TOPIC_PER_PAIR, OFF_TOPIC_PER_PAIR)]:
            f = features(engine.run(SearchRequest(query=q.text, k=10)))
            xs.append([f[k] for k in FEATURES])
            ids.append(f"{asked.name}/{q.id}")  # held out of a fold with the question's own answers
        engine.close()
    print(f"{OFF_TOPIC}: {len(xs)} questions asked of another set's index (quality 0)")
    return Answers(np.array(xs), np.zeros(len(xs)), ids)


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
    x = np.vstack([a.x for a in sets.values()])
    y = np.concatenate([a.y for a in sets.values()])
    if bad := degenerate(x):
        raise SystemExit(f"not fitting: these features vary on fewer than {MIN_VARYING} answers: {', '.join(bad)}")
    mean, std = x.mean(axis=0), x.std(axis=0) + 1e-9
    w = fit((x - mean) / std, y)
    report = {}
    rng = np.random.default_rng(0)
    ids = [i for a in sets.values() for i in a.ids]
    for name, answers in sets.items():
        xs, ys = answers.x, answers.y
        in_sample = spearman(list(predict(w, (xs - mean) / std)), list(ys))
        # 2-fold cross-validation: fit on everything but the held-out half of this set's questions (in any
        # run of them), score that half.
        idx = rng.permutation(len(xs))
        preds = np.zeros(len(xs))
        for held in (idx[: len(idx) // 2], idx[len(idx) // 2:]):
            out_ids = {answers.ids[i] for i in held}
            keep = np.array([i not in out_ids for i in ids])
            m, s = x[keep].mean(axis=0), x[keep].std(axis=0) + 1e-9
            preds[held] = predict(fit((x[keep] - m) / s, y[keep]), (xs[held] - m) / s)
        if name == OFF_TOPIC:  # every quality is 0: how low does the confidence go?
            report[name] = {"questions": len(xs), "mean_confidence_cv": round(float(np.mean(preds)), 4),
                            "above_half_cv": round(float(np.mean(preds > 0.5)), 4)}
            print(f"{name}: mean confidence (2-fold CV) {report[name]['mean_confidence_cv']}, "
                  f"above 0.5 for {report[name]['above_half_cv']:.0%}")
            continue
        cv = spearman(list(preds), list(ys))
        report[name] = {"questions": len(xs), "spearman_in_sample": round(in_sample or 0, 4),
                        "spearman_cv": round(cv or 0, 4),
                        "spearman_ceiling": round(spearman_ceiling(list(ys)) or 0, 4)}
        r = report[name]
        print(f"{name}: Spearman in-sample {r['spearman_in_sample']}, 2-fold CV {r['spearman_cv']} "
              f"(a perfect predictor without ties: {r['spearman_ceiling']})")
    # Pooled over the development sets' own questions only: the off-topic zeros are easy to rank and would
    # flatter it.
    own = np.concatenate([np.full(len(a.y), name != OFF_TOPIC) for name, a in sets.items()])
    pooled = spearman(list(predict(w, (x[own] - mean) / std)), list(y[own]))
    report["pooled"] = {"questions": int(own.sum()), "spearman_in_sample": round(pooled or 0, 4)}
    print(f"pooled: Spearman in-sample {report['pooled']['spearman_in_sample']}")
    # Fold standardisation into the weights so the model applies to raw features.
    weights = {f: round(float(w[i] / std[i]), 6) for i, f in enumerate(FEATURES)}
    intercept = round(float(w[-1] - np.sum(w[:-1] * mean / std)), 6)
    # The range each feature took in training: confidence clips to it, so an unusual question (a one-word
    # query on a tiny corpus) is not scored by extrapolating the fit far beyond what it saw.
    ranges = {f: [round(float(x[:, i].min()), 6), round(float(x[:, i].max()), 6)] for i, f in enumerate(FEATURES)}
    model = {"intercept": intercept, "weights": weights, "ranges": ranges,
             "fitted_on": f"{', '.join(sets)} (development sets; k8s-gate: k8s behind the gate; off-topic: "
                          "questions asked of another set's index, quality 0), full pipeline, "
                          f"auto plan, k=10; "
                          f"{datetime.now(UTC).strftime('%Y-%m-%d')}",
             "validation": report}
    if not args.dry_run:
        OUT.write_text(json.dumps(model, indent=2) + "\n")
        print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
