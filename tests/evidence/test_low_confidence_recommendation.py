"""A covered answer the fitted confidence expects little of is re-queried, not proceeded on: the check on the
question's words is a bag of words, and a near miss passes it ("kubelet eviction thresholds" against a page
on a kubelet-like agent and another on canary thresholds, with no word of eviction anywhere)."""

from __future__ import annotations

from pathlib import Path

import pytest
from evidence_support import constant_encoder, counting_store, make_chunk

from evidex.config import Config, EvidenceConfig
from evidex.errors import ConfigError
from evidex.outcome import Recommendation
from evidex.pipeline import PipelineParts, SearchOutcome, SearchRequest, run_search
from evidex.signals.compute import coverage, recommend
from evidex.types import RetrievalMode

CORPUS = [
    make_chunk("agent", "Configure how often the kubelet refreshes workload tokens: at 80% of their lifetime.",
               title="Workload identity"),
    make_chunk("canary", "The canary profile selects the steps and the analysis thresholds, configured per "
                         "service.", title="Canary rollouts"),
]
QUESTION = "How do I configure the kubelet eviction thresholds?"


@pytest.fixture
def outcome(tmp_path: Path) -> SearchOutcome:
    store = counting_store(tmp_path, CORPUS)
    try:
        return run_search(PipelineParts(store=store, encode=constant_encoder, config=Config()),
                          SearchRequest(QUESTION, mode=RetrievalMode.BM25))
    finally:
        store.close()


def _recommend(outcome: SearchOutcome, confidence: float) -> Recommendation:
    ev = Config().evidence
    return recommend(outcome, coverage(outcome), threshold=ev.requery_threshold,
                     min_question_word_share=ev.min_question_word_share, confidence=confidence,
                     min_proceed_confidence=ev.min_proceed_confidence, default_owner=None)


def test_a_near_miss_passes_the_word_check_but_not_the_confidence_floor(outcome: SearchOutcome) -> None:
    floor = EvidenceConfig.min_proceed_confidence
    assert _recommend(outcome, floor + 0.01).action == "proceed"  # the words alone let it through
    rec = _recommend(outcome, floor - 0.01)
    assert rec.action == "re-query"
    assert rec.reason.startswith(f"confidence {floor - 0.01:.2f} is below {floor:.2f}")
    assert len(rec.focus) == 1 and "eviction" in rec.focus[0].split()  # what to ask for next


def test_the_floor_is_a_checked_setting() -> None:
    with pytest.raises(ConfigError, match="min_proceed_confidence"):
        Config().replace(evidence={"min_proceed_confidence": 1.5})


def test_an_answer_holding_every_word_proceeds_however_low_the_confidence(tmp_path: Path) -> None:
    """On a corpus of a few pages the fitted confidence is low even for an exact answer (features far from the
    development sets'); without a word missing there is no near miss to re-query for."""
    store = counting_store(tmp_path, CORPUS)
    try:
        exact = run_search(PipelineParts(store=store, encode=constant_encoder, config=Config()),
                           SearchRequest("How often does the kubelet refresh workload tokens?",
                                         mode=RetrievalMode.BM25))
    finally:
        store.close()
    assert _recommend(exact, 0.01).action == "proceed"
