"""The signal validation `evidex eval` reports: each figure counted from a handful of answers whose truth is
known, so a miscount (precision over the wrong denominator, AUROC of the wrong score) shows. Figures are rounded
to 4 places."""

from __future__ import annotations

from typing import Any

import pytest

from evidex.evaluation.datasets import Question
from evidex.evaluation.signal_check import check_signals


def answer(confidence: float, ratio: float, action: str, *, families_missing: tuple[str, ...] = (),
           signals_ms: float = 0.5) -> dict[str, Any]:
    return {"signals": {"confidence": confidence,
                        "coverage": {"ratio": ratio, "families_missing": list(families_missing),
                                     "families_found_but_rejected": []}},
            "decision": {"recommendation": {"action": action}},
            "cost": {"latency_ms": {"signals": signals_ms}}}


def rows(*answers: tuple[dict[str, Any], float, bool]) -> list[tuple[Question, dict[str, Any], float, bool]]:
    return [(Question(id=f"q{i}", text="?", families=()), result, quality, complete)
            for i, (result, quality, complete) in enumerate(answers)]


def test_each_figure_counts_the_answers_it_names() -> None:
    report = check_signals(rows(
        (answer(0.9, 1.0, "proceed"), 1.0, True),  # says complete, is
        (answer(0.8, 1.0, "proceed"), 0.5, False),  # says complete, is not
        (answer(0.7, 0.5, "re-query"), 1.0, True),  # complete, not recognised
        (answer(0.2, 0.5, "re-query"), 0.5, False),
        (answer(0.1, 0.0, "stop"), 0.0, False),
    ))
    assert report["coverage_precision"] == pytest.approx(1 / 2, abs=1e-4)  # of the two it called complete
    assert report["coverage_recall"] == pytest.approx(1 / 2, abs=1e-4)  # of the two complete answers
    assert report["requery_when_incomplete"] == pytest.approx(2 / 3, abs=1e-4)  # a stop counts as not proceeding
    assert report["proceed_when_complete"] == pytest.approx(1 / 2, abs=1e-4)
    # Complete answers' ratios (1.0, 0.5) against incomplete ones' (1.0, 0.5, 0.0): 4 of 6 pairs won, ties half.
    assert report["coverage_auroc"] == pytest.approx(4 / 6, abs=1e-4)
    assert report["confidence_auroc"] == pytest.approx(5 / 6, abs=1e-4)  # 0.7 < 0.8 is the one pair lost
    assert report["questions"] == 5


def test_a_family_missing_is_no_complete_call_whatever_the_ratio() -> None:
    report = check_signals(rows(
        (answer(0.9, 1.0, "proceed", families_missing=("rbac",)), 0.5, False),
        (answer(0.9, 1.0, "proceed"), 1.0, True),
    ))
    assert report["coverage_precision"] == 1.0 and report["coverage_recall"] == 1.0


def test_figures_without_both_classes_are_none_not_a_guess() -> None:
    report = check_signals(rows((answer(0.9, 1.0, "proceed"), 1.0, True), (answer(0.6, 0.5, "re-query"), 1.0, True)))
    assert report["coverage_auroc"] is None and report["confidence_auroc"] is None
    assert report["requery_when_incomplete"] is None
    assert report["proceed_when_complete"] == 0.5
