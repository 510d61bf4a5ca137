"""The decision follows the evidence: proceed only when the calibrated confidence clears `[signals]
proceed_confidence` and no required family is missing; nothing planned is no pass; a re-query names what to
focus on; stop keeps the gate's stop condition."""

from __future__ import annotations

from pathlib import Path

import pytest
from evidence_support import constant_encoder, counting_store, make_chunk

from evidex.config import Config
from evidex.errors import ConfigError
from evidex.evidence.plan import RequiredFamily, explicit_plan
from evidex.outcome import Action, Recommendation
from evidex.pipeline import PipelineParts, SearchOutcome, SearchRequest, run_search
from evidex.signals.compute import STOP_CONDITION, coverage, recommend
from evidex.types import RetrievalMode

CORPUS = [
    make_chunk("tokens", "The kubelet refreshes projected service account tokens at 80% of their lifetime.",
               title="Token refresh", source="tokens.md"),
    make_chunk("quota", "A resource quota caps the memory a namespace may request.", title="Quotas",
               source="quota.md"),
]
THRESHOLD = Config().signals.proceed_confidence


def ask(tmp_path: Path, question: str, plan: object = None) -> SearchOutcome:
    store = counting_store(tmp_path, CORPUS)
    try:
        return run_search(PipelineParts(store=store, encode=constant_encoder, config=Config()),
                          SearchRequest(question, mode=RetrievalMode.BM25, plan=plan))  # type: ignore[arg-type]
    finally:
        store.close()


def decide(outcome: SearchOutcome, confidence: float) -> Recommendation:
    ev = Config().evidence
    return recommend(outcome, coverage(outcome), threshold=ev.requery_threshold,
                     min_question_word_share=ev.min_question_word_share, confidence=confidence,
                     min_proceed_confidence=ev.min_proceed_confidence, default_owner=None,
                     proceed_confidence=THRESHOLD)


def test_proceed_needs_the_confidence_to_clear_the_threshold(tmp_path: Path) -> None:
    outcome = ask(tmp_path, "How often does the kubelet refresh service account tokens?")
    assert decide(outcome, THRESHOLD).action is Action.PROCEED
    low = decide(outcome, THRESHOLD - 0.01)
    assert low.action is Action.REQUERY
    assert low.reason.startswith(f"confidence {THRESHOLD - 0.01:.2f} is below {THRESHOLD:.2f}")
    assert low.focus  # what to ask for next


def test_a_missing_required_family_is_no_pass_however_sure(tmp_path: Path) -> None:
    plan = explicit_plan([RequiredFamily("tokens", rescue_query="token refresh", source_regex=r"^tokens\.md$"),
                          RequiredFamily("rotation", rescue_query="key rotation", source_regex=r"^rotation\.md$")],
                         (), "How often are tokens refreshed and keys rotated?")
    outcome = ask(tmp_path, "How often are tokens refreshed and keys rotated?", plan)
    rec = decide(outcome, 0.99)
    assert rec.action is Action.REQUERY and "rotation" in rec.focus


def test_nothing_planned_is_no_pass(tmp_path: Path) -> None:
    outcome = ask(tmp_path, "tokens")
    assert not outcome.plan.families and not outcome.plan.aspects
    assert decide(outcome, THRESHOLD - 0.3).action is Action.REQUERY
    assert decide(outcome, THRESHOLD + 0.01).action is Action.PROCEED  # the confidence alone decides


def test_stop_keeps_the_gates_stop_condition(tmp_path: Path) -> None:
    outcome = ask(tmp_path, "zzqqxx wwvvyy")
    assert not outcome.context  # nothing admissible: a stop whatever the confidence
    rec = decide(outcome, 0.99)
    assert rec.action is Action.STOP and rec.reason == STOP_CONDITION


def test_the_threshold_is_a_checked_setting() -> None:
    with pytest.raises(ConfigError, match="proceed_confidence"):
        Config().replace(signals={"proceed_confidence": 1.5})
