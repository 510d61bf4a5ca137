"""The request context every stage reads: the request, its pinned instant, who may read what, the trace,
and what the request computes once and shares (query vectors, the cross-encoder's per-request counts)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC
from functools import cached_property

import numpy as np
import numpy.typing as npt

from evidex.config import Config, EvidenceConfig
from evidex.evidence.grade import GradeThresholds
from evidex.evidence.titles import TitleConvention
from evidex.outcome import SearchRequest
from evidex.pipeline.access import Access
from evidex.pipeline.parts import PipelineParts
from evidex.rerank.fused import RequestCrossEncoder, RerankWeights
from evidex.retrieval.fusion import fuse
from evidex.retrieval.hybrid import candidates as to_candidates
from evidex.stores.protocol import Store
from evidex.trace import Trace, pinned_now
from evidex.types import Candidate, FusionMode, RetrievalMode, ScoredId


@dataclass(frozen=True)
class RequestContext:
    parts: PipelineParts
    request: SearchRequest
    access: Access
    trace: Trace
    cross_encoder: RequestCrossEncoder | None
    weights: RerankWeights  # the reranker's weights (`[evidence]`)
    thresholds: GradeThresholds  # grading's thresholds (`[evidence]`)
    _vectors: dict[str, npt.NDArray[np.float32]] = field(default_factory=dict, repr=False)

    @classmethod
    def start(cls, parts: PipelineParts, request: SearchRequest) -> RequestContext:
        retrieved_at = request.retrieved_at or pinned_now()
        if retrieved_at.utcoffset() is None:
            retrieved_at = retrieved_at.replace(tzinfo=UTC)
        cross = RequestCrossEncoder(parts.cross_encoder) if parts.cross_encoder is not None else None
        ev = parts.config.evidence
        return cls(parts, request, Access.of(parts.gate, request.principal, retrieved_at), Trace(), cross,
                   RerankWeights.from_config(ev), GradeThresholds(ev.grade_correct, ev.grade_incorrect))

    @property
    def store(self) -> Store:
        return self.parts.store

    @property
    def config(self) -> Config:
        return self.parts.config

    @property
    def evidence(self) -> EvidenceConfig:
        return self.parts.config.evidence

    @property
    def k(self) -> int:
        return self.request.k

    @cached_property
    def titles(self) -> TitleConvention:
        """How the index writes page titles (read once per snapshot, see `evidex.evidence.titles`; asked once per
        request)."""
        return self.parts.titles.of(self.store, self.evidence.qualified_title_share)

    def encode(self, text: str) -> npt.NDArray[np.float32]:
        """The query encoder, once per text in this request (a shape's examples and retrieval share it)."""
        if text not in self._vectors:
            self._vectors[text] = self.parts.encode(text)
        return self._vectors[text]

    def sparse_candidates(self, hits: list[ScoredId]) -> list[Candidate]:
        """The candidates of one sparse search's hits (rescue, name look-ups, bridges)."""
        return to_candidates(self.store, fuse([hits], [1.0], FusionMode.WEIGHTED), RetrievalMode.BM25)
