"""What a pipeline runs with: the store, the query encoder, the configuration, the gate and the optional
models. Built once per engine (`Engine.pipeline_parts`) and shared by every request."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from evidex.admission.gate import AdmissionGate
from evidex.config import Config
from evidex.evidence.plan import QuestionShape, RequiredFamily
from evidex.evidence.titles import TitleConventions
from evidex.rerank.fused import CrossEncoder
from evidex.stores.protocol import Store


@dataclass(frozen=True)
class PipelineParts:
    store: Store
    encode: Callable[[str], npt.NDArray[np.float32]]
    config: Config
    gate: AdmissionGate | None = None
    cross_encoder: CrossEncoder | None = None
    shapes: tuple[QuestionShape, ...] = ()
    shape_examples: dict[str, npt.NDArray[np.float32]] = field(default_factory=dict)  # shape -> example vectors
    titles: TitleConventions = field(default_factory=TitleConventions)  # how the index writes titles, per snapshot


def shapes_from_config(config: Config) -> tuple[QuestionShape, ...]:
    """The `[[shapes]]` of the configuration as question shapes the planner matches."""
    return tuple(
        QuestionShape(name=s.name, keywords=s.keywords, min_keywords=s.min_keywords, patterns=s.patterns,
                      examples=s.examples, min_similarity=s.min_similarity,
                      families=tuple(RequiredFamily(name=f.name, rescue_query=f.rescue_query, label=f.label,
                                                    source_regex=f.source_regex) for f in s.families))
        for s in config.shapes)
