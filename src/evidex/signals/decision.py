"""The signals stage: everything an agent reads about the evidence, computed from the pipeline's outcome.

`signals_of` is the one entry point; the quantities themselves live in `evidex.signals.compute`.
"""

from __future__ import annotations

from dataclasses import dataclass

from evidex.config import Config
from evidex.outcome import SearchOutcome, Signals
from evidex.signals.compute import bounded_confidence, coverage, features, nesting, recommend, source_diversity


@dataclass(frozen=True)
class DecisionSettings:
    """The thresholds the recommendation applies (`[evidence]` and `[gate]` in the configuration)."""

    requery_threshold: float
    min_question_word_share: float
    min_proceed_confidence: float
    default_owner: str | None

    @classmethod
    def from_config(cls, config: Config) -> DecisionSettings:
        ev = config.evidence
        return cls(requery_threshold=ev.requery_threshold, min_question_word_share=ev.min_question_word_share,
                   min_proceed_confidence=ev.min_proceed_confidence, default_owner=config.gate.default_owner or None)


def signals_of(outcome: SearchOutcome, settings: DecisionSettings) -> Signals:
    """Confidence, coverage, diversity and the recommendation for `outcome`."""
    nest = nesting(outcome)  # both the coverage and the confidence features read it
    cov = coverage(outcome, nest)
    feats = features(outcome, nest)
    confidence = round(bounded_confidence(outcome, feats), 4)
    rec = recommend(outcome, cov, threshold=settings.requery_threshold,
                    min_question_word_share=settings.min_question_word_share, confidence=confidence,
                    min_proceed_confidence=settings.min_proceed_confidence, default_owner=settings.default_owner)
    return Signals(confidence=confidence, features={k: round(v, 4) for k, v in sorted(feats.items())},
                   coverage=cov, source_diversity=source_diversity(outcome), recommendation=rec)
