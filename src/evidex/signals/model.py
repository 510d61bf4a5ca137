"""The confidence model: a logistic regression over the signal features that `evidex calibrate` fits and
writes as JSON (data, not code), and that every result's confidence comes from.

The shipped default lives in `evidex/data/confidence.json`; `[signals] confidence_model` points at another, so a
team scores confidence with a model fitted on its own questions:

    >>> model = ConfidenceModel.from_dict({"intercept": 0.0, "weights": {"coverage": 2.0},
    ...                                    "ranges": {"coverage": [0.0, 1.0]}})
    >>> round(model.probability({"coverage": 5.0}), 4)  # clipped to the range it was fitted on
    0.8808
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from evidex.errors import ConfigError

FORMAT = "evidex-confidence/1"


@dataclass(frozen=True)
class ConfidenceModel:
    """Weights on the raw features (standardisation folded in), the intercept, and the range each feature took
    in training: a question unlike any the model saw is scored at the edge of what it knows, not by
    extrapolation. `document` is the whole file as read (label definition, version, feature hash, samples)."""

    intercept: float
    weights: tuple[tuple[str, float], ...]
    ranges: dict[str, tuple[float, float]]
    document: dict[str, Any]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ConfidenceModel:
        try:
            weights = tuple((str(k), float(v)) for k, v in data["weights"].items())
            ranges = {str(k): (float(v[0]), float(v[1])) for k, v in data.get("ranges", {}).items()}
            return cls(float(data["intercept"]), weights, ranges, data)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
            raise ConfigError(f"not a confidence model (intercept, weights, ranges): {exc!r}") from None

    def clipped(self, name: str, value: float) -> float:
        low, high = self.ranges.get(name, (value, value))
        return min(max(value, low), high)

    def probability(self, feats: dict[str, float]) -> float:
        """The fitted probability that the context holds every required piece of evidence."""
        z = self.intercept + sum(w * self.clipped(name, feats.get(name, 0.0)) for name, w in self.weights)
        return 1.0 / (1.0 + math.exp(-max(-700.0, min(700.0, z))))


@lru_cache(maxsize=1)
def shipped_model() -> ConfidenceModel:
    text = resources.files("evidex").joinpath("data/confidence.json").read_text(encoding="utf-8")
    return ConfidenceModel.from_dict(json.loads(text))


@lru_cache(maxsize=8)
def _model_file(path: str, mtime_ns: int) -> ConfidenceModel:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"config key 'signals.confidence_model': cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config key 'signals.confidence_model': {path} is not a confidence model")
    try:
        return ConfidenceModel.from_dict(data)
    except ConfigError as exc:
        raise ConfigError(f"config key 'signals.confidence_model': {path}: {exc}") from None


def load_model(path: Path | None) -> ConfidenceModel:
    """The model at `path` (re-read when the file changes), or the shipped one for None; `ConfigError` names a
    file that is missing or not a model."""
    if path is None:
        return shipped_model()
    try:
        mtime = path.stat().st_mtime_ns
    except OSError as exc:
        raise ConfigError(f"config key 'signals.confidence_model': cannot read {path}: {exc.strerror}") from None
    return _model_file(str(path), mtime)
