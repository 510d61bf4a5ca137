"""The agent signals checked against the evaluation truth: does each predict the quality of the answer?

- confidence_spearman: rank correlation between `confidence` and each question's quality (family recall
  at k for questions files, nDCG@10 for BEIR sets); confidence_spearman_ceiling: what a perfect predictor
  that never ties would reach on the same qualities (far below 1 when nearly every answer is complete);
  confidence_auroc: how often a complete answer gets a higher confidence than an incomplete one;
- coverage_precision / coverage_recall: the coverage detector says "complete" (every planned aspect and
  family covered) — how often is every gold family (every relevant document, for BEIR sets) really in the
  top k, and how many complete answers does it recognise; coverage_auroc: how often a complete answer gets a
  higher coverage ratio than an incomplete one (0.5: the ratio tells them apart no better than chance);
- requery_when_incomplete: how often the recommendation is re-query or stop when the answer really is
  incomplete; proceed_when_complete: how often it is proceed when the answer is complete;
  decision_balanced_accuracy: the mean of the two (an agent that always proceeds scores 0.5);
- confidence_ece: expected calibration error of `confidence` as the probability that the answer is complete
  (10 equal-width bins); confidence_brier: its mean squared error against completeness;
  confidence_reliability: per bin, [answers, mean confidence, share complete];
- signals_ms: what computing the signals adds to a query (p50 / p95 of each result's `cost`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evidex.evaluation import metrics
from evidex.evaluation.datasets import Question


def quality(question: Question, ranking: Sequence[Any], answer: Sequence[Any]) -> float:
    """nDCG@10 of the ranking for BEIR sets, else the family recall of the answer (the top k)."""
    if question.qrels:
        return metrics.ndcg_at(question, ranking, 10) or 0.0
    return metrics.family_recall(question, answer)


def check_signals(rows: Sequence[tuple[Question, dict[str, Any], float, bool]]) -> dict[str, Any]:
    """rows: (question, result JSON, quality, complete: every required family / relevant document in the top k)."""
    conf = [r["signals"]["confidence"] for _, r, _, _ in rows]
    qual = [q for _, _, q, _ in rows]
    ratios: list[float] = []
    says_complete: list[bool] = []
    is_complete: list[bool] = []
    action: list[str] = []
    for _, result, _, complete in rows:
        cov = result["signals"]["coverage"]
        ratios.append(cov["ratio"])
        says = cov["ratio"] >= 1.0 and not cov["families_missing"] and not cov["families_found_but_rejected"]
        says_complete.append(says)
        is_complete.append(complete)
        action.append(result["decision"]["recommendation"]["action"])

    def ratio(num: int, den: int) -> float | None:
        return round(num / den, 4) if den else None

    tp = sum(1 for s, t in zip(says_complete, is_complete, strict=True) if s and t)
    when_incomplete = [a for a, t in zip(action, is_complete, strict=True) if not t]
    when_complete = [a for a, t in zip(action, is_complete, strict=True) if t]
    spent = [float(r["cost"]["latency_ms"]["signals"]) for _, r, _, _ in rows]
    rho = metrics.spearman(conf, qual)
    ceiling = metrics.spearman_ceiling(qual)
    auc = metrics.auroc(conf, is_complete)
    coverage_auc = metrics.auroc(ratios, is_complete)
    calibration_error = metrics.ece(conf, is_complete)
    brier = metrics.brier(conf, is_complete)
    balanced = metrics.balanced_accuracy([a == "proceed" for a in action], is_complete)
    return {
        "confidence_spearman": None if rho is None else round(rho, 4),
        "confidence_spearman_ceiling": None if ceiling is None else round(ceiling, 4),
        "confidence_auroc": None if auc is None else round(auc, 4),
        "coverage_precision": ratio(tp, sum(says_complete)),
        "coverage_recall": ratio(tp, sum(is_complete)),
        "coverage_auroc": None if coverage_auc is None else round(coverage_auc, 4),
        "requery_when_incomplete": ratio(sum(1 for a in when_incomplete if a != "proceed"), len(when_incomplete)),
        "proceed_when_complete": ratio(sum(1 for a in when_complete if a == "proceed"), len(when_complete)),
        "decision_balanced_accuracy": None if balanced is None else round(balanced, 4),
        "confidence_ece": None if calibration_error is None else round(calibration_error, 4),
        "confidence_brier": None if brier is None else round(brier, 4),
        # The reliability diagram's points: per tenth of the stated probability, [answers, mean confidence,
        # share complete] (`evidex eval --plots` draws them).
        "confidence_reliability": [[n, round(s, 4), round(t, 4)] for n, s, t in metrics.reliability_bins(conf,
                                                                                                         is_complete)],
        "signals_ms": {"p50": round(metrics.percentile(spent, 50), 3), "p95": round(metrics.percentile(spent, 95), 3)},
        "questions": len(rows),
    }
