"""The signals stage: everything an agent reads about the evidence, computed from the pipeline's outcome.

`signals_of` is the one entry point; the quantities themselves live in `evidex.signals.compute`.
"""

from __future__ import annotations

from dataclasses import dataclass

from evidex.config import Config
from evidex.outcome import SearchOutcome, Signals
from evidex.signals.compute import bounded_confidence, coverage, features, nesting, recommend, source_diversity
from evidex.signals.coverage import DEFAULT_RANK_DEPTH
from evidex.signals.model import ConfidenceModel, load_model


@dataclass(frozen=True)
class DecisionSettings:
    """The thresholds the recommendation applies and the confidence model (`[evidence]`, `[signals]` and `[gate]`
    in the configuration)."""

    requery_threshold: float
    min_question_word_share: float
    min_proceed_confidence: float
    default_owner: str | None
    model: ConfidenceModel | None = None  # None: the shipped model
    proceed_confidence: float = 0.0
    aspect_rank_depth: int = DEFAULT_RANK_DEPTH

    @classmethod
    def from_config(cls, config: Config) -> DecisionSettings:
        ev = config.evidence
        return cls(requery_threshold=ev.requery_threshold, min_question_word_share=ev.min_question_word_share,
                   min_proceed_confidence=ev.min_proceed_confidence, default_owner=config.gate.default_owner or None,
                   model=load_model(config.confidence_model_path),
                   proceed_confidence=config.signals.proceed_confidence,
                   aspect_rank_depth=config.signals.aspect_rank_depth)


def signals_of(outcome: SearchOutcome, settings: DecisionSettings) -> Signals:
    """Confidence, coverage, diversity and the recommendation for `outcome`."""
    nest = nesting(outcome)  # both the coverage and the confidence features read it
    cov = coverage(outcome, nest, settings.aspect_rank_depth)
    feats = features(outcome, nest, cov)
    confidence = round(bounded_confidence(outcome, feats, settings.model), 4)
    rec = recommend(outcome, cov, threshold=settings.requery_threshold,
                    min_question_word_share=settings.min_question_word_share, confidence=confidence,
                    min_proceed_confidence=settings.min_proceed_confidence, default_owner=settings.default_owner,
                    proceed_confidence=settings.proceed_confidence)
    return Signals(confidence=confidence, features={k: round(v, 4) for k, v in sorted(feats.items())},
                   coverage=cov, source_diversity=source_diversity(outcome), recommendation=rec)
