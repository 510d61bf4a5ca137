"""The search pipeline: plan → retrieve → rerank → rescue → bridge → cite → rescore → admit → reserve →
grade → assemble → signals, in plain order in `evidex.pipeline.search.run_search`. Each stage is a function in
its own module of this package, taking the request context (`context.RequestContext`) and typed values."""

from evidex.outcome import FamilyStatus, SearchOutcome, SearchRequest
from evidex.pipeline.parts import PipelineParts, shapes_from_config
from evidex.pipeline.reservation import HOP_OBLIGATION, LEAD_OBLIGATION
from evidex.pipeline.search import run_search

__all__ = ["HOP_OBLIGATION", "LEAD_OBLIGATION", "FamilyStatus", "PipelineParts", "SearchOutcome", "SearchRequest",
           "run_search", "shapes_from_config"]
