"""Fitting the confidence model on labelled questions (`evidex calibrate`): run the pipeline on each question,
record its signal features and whether the answer is complete, and fit a logistic regression of completeness on
the features, so that `confidence` is the probability the design promises: that the context holds every piece
of required evidence.

The fit is deterministic (numpy only: L2-regularised Newton steps from zero on standardised features), so the
same rows always give the same model; the model file records the features, the weights, the standardisation and
clipping ranges, the label's definition, the evidex version and a hash of the feature definitions, and the
features of a few questions per set, so a test can tell when the current pipeline no longer reproduces them.

    rows = collect(engine, questions, k=10, name="handbook")
    write_model(Path("model.json"), fit_model(rows))
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import json
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from evidex.evaluation.datasets import Question
from evidex.evaluation.metrics import family_recall
from evidex.pipeline import SearchRequest
from evidex.signals import compute, coverage
from evidex.signals.model import FORMAT

FEATURES = ("hops_unfollowed", "coverage", "min_family_match", "n_families", "chained", "linked", "query_length",
            "top_score", "mean_score", "margin", "top_lexical", "query_term_coverage", "dense_top", "n_context",
            "dense_commitment", "chain_reach", "sparse_top", "page_agreement")
LABEL = ("complete: every required family of the question has a chunk in the context (for BEIR qrels, every "
         "relevant document); auto plan")
L2 = 1.0
NEWTON_STEPS = 60
SAMPLES_PER_SET = 4  # questions per set whose features the model file keeps, for the reproducibility check


@dataclass(frozen=True)
class Row:
    """One labelled answer: the set it came from, the question id, its features, and whether it was complete."""

    set: str
    id: str
    features: dict[str, float]
    complete: bool

    def to_dict(self) -> dict[str, Any]:
        return {"set": self.set, "id": self.id, "complete": self.complete,
                "features": {k: self.features[k] for k in FEATURES}}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Row:
        return cls(str(d["set"]), str(d["id"]), {k: float(v) for k, v in d["features"].items()}, bool(d["complete"]))


def feature_hash() -> str:
    """A hash of the feature names and of the code that computes them (its syntax tree without docstrings, so a
    reworded comment or docstring does not invalidate a fitted model): a model fitted on other definitions is
    told apart from one fitted on these."""
    parts = [",".join(FEATURES), *(_code_of(fn) for fn in (
        compute.features, compute.page_agreement, compute.sparse_top, compute.dense_commitment, compute.nesting,
        compute.evidence_chain, compute.Nesting, compute.coverage, coverage.judge_aspects, coverage.judge_aspect,
        coverage.own_rank))]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _code_of(obj: Any) -> str:
    """The syntax tree of a function's or class's source with its docstrings removed."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(obj)))
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and isinstance(body, list)
                and body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree)


def is_complete(question: Question, context: Sequence[Any]) -> bool:
    """The label: every required family (every relevant document, for qrels) has a chunk in `context`."""
    return family_recall(question, context) == 1.0


def collect(run: Callable[[SearchRequest], Any], questions: Sequence[Question], *, name: str, k: int = 10,
            request: Callable[..., SearchRequest] = SearchRequest,
            progress: Callable[[int, int], None] | None = None) -> list[Row]:
    """Ask each question through `run` (an `Engine.run`) and record its features and label."""
    rows = []
    for i, q in enumerate(questions, start=1):
        outcome = run(request(query=q.text, k=k))
        feats = compute.features(outcome)
        rows.append(Row(name, q.id, {f: feats[f] for f in FEATURES},
                        is_complete(q, [c.chunk for c in outcome.context])))
        if progress is not None:
            progress(i, len(questions))
    return rows


def _matrix(rows: Sequence[Row]) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    x = np.array([[r.features[f] for f in FEATURES] for r in rows], dtype=np.float64)
    y = np.array([1.0 if r.complete else 0.0 for r in rows], dtype=np.float64)
    return x, y


def newton_logistic(x: npt.NDArray[np.float64], y: npt.NDArray[np.float64], l2: float = L2,
                    steps: int = NEWTON_STEPS) -> npt.NDArray[np.float64]:
    """L2-regularised logistic regression by Newton steps from zero (the bias, last, unpenalised): the same
    input gives the same weights, to the last bit, on any machine numpy's LAPACK agrees on."""
    xb = np.hstack([x, np.ones((len(x), 1))])
    w = np.zeros(xb.shape[1])
    reg = np.eye(len(w)) * l2
    reg[-1, -1] = 0.0
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-np.clip(xb @ w, -700, 700)))
        grad = xb.T @ (p - y) + reg @ w
        hess = xb.T @ (xb * (p * (1 - p))[:, None]) + reg + 1e-6 * np.eye(len(w))
        w = w - np.linalg.solve(hess, grad)
    return w


def fit_model(rows: Sequence[Row], *, l2: float = L2, version: str = "") -> dict[str, Any]:
    """The model file's content fitted on `rows` (`ValueError` without both complete and incomplete answers)."""
    x, y = _matrix(rows)
    if len(rows) < 2 or y.min() == y.max():
        raise ValueError("calibration needs both complete and incomplete answers among the questions")
    mean, std = x.mean(axis=0), x.std(axis=0) + 1e-9
    w = newton_logistic((x - mean) / std, y, l2)
    weights = {f: round(float(w[i] / std[i]), 9) for i, f in enumerate(FEATURES)}  # on the raw features
    intercept = round(float(w[-1] - np.sum(w[:-1] * mean / std)), 9)
    sets: dict[str, list[Row]] = {}
    for r in rows:
        sets.setdefault(r.set, []).append(r)
    return {
        "format": FORMAT, "label": LABEL, "features": list(FEATURES), "intercept": intercept, "weights": weights,
        "standardisation": {"mean": {f: round(float(mean[i]), 9) for i, f in enumerate(FEATURES)},
                            "std": {f: round(float(std[i]), 9) for i, f in enumerate(FEATURES)}},
        "ranges": {f: [round(float(x[:, i].min()), 9), round(float(x[:, i].max()), 9)] for i, f in enumerate(FEATURES)},
        "l2": l2, "evidex_version": version, "feature_hash": feature_hash(),
        "fitted_on": {name: {"questions": len(rs), "complete": sum(r.complete for r in rs)}
                      for name, rs in sets.items()},
        "samples": {name: [r.to_dict() for r in rs[:SAMPLES_PER_SET]] for name, rs in sets.items()},
    }


def write_model(path: Path, model: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(model, indent=2) + "\n", encoding="utf-8")


def read_rows(path: Path) -> list[Row]:
    with path.open(encoding="utf-8") as handle:
        return [Row.from_dict(json.loads(line)) for line in handle if line.strip()]


def write_rows(path: Path, rows: Sequence[Row]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r.to_dict(), sort_keys=True) + "\n" for r in rows), encoding="utf-8")
