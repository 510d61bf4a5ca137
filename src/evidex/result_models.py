"""The result of `search_with_reasoning` as typed models (pydantic v2): the one definition its published JSON
schema is generated from (the HTTP API's OpenAPI, the MCP tool's output schema, `evidex tool-schema`), and a typed
way for Python callers to read a result.

    from evidex.result_models import Result

    result = Result.model_validate(engine.search_with_reasoning("how are backups restored?"))
    if result.decision.recommendation.action == "proceed":
        cited = [chunk.citation for source in result.evidence for chunk in source.chunks]

The result dict is built in `evidex.result`; these models describe it and a test validates real results against
them, both ways through JSON. Every model accepts fields it does not name (`extra="allow"`): a result may carry
more than this describes (a new signal, a trace detail), and a client reading an older description keeps working.
"""

from __future__ import annotations

import copy
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Action = Literal["proceed", "re-query", "stop"]
FamilyStatus = Literal["covered", "missing", "found-but-rejected"]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class Index(_Open):
    """The index snapshot and configuration the decision was made on (replay needs both)."""

    snapshot_id: str
    config_hash: str


class Recommendation(_Open):
    """What the caller should do next."""

    action: Action
    reason: str
    focus: list[str] = Field(description="re-query: the aspects to search again; stop: the blocked families")
    owner: str | None = Field(description="stop: who can unblock the missing evidence")


class Decision(_Open):
    recommendation: Recommendation
    stop_condition: str | None
    grade: str | None = None


class Family(_Open):
    """A required evidence family (or question aspect) and whether the context covers it."""

    name: str
    status: FamilyStatus
    record_ids: list[str] = []
    reasons: list[str] = []


class EvidenceChunk(_Open):
    """One admitted chunk: what an answer may quote, with its exact citation."""

    record_id: str
    citation: str = Field(description="citation URI with the exact anchor")
    citation_anchor: str | None = None
    evidence_family: str | None = None
    status: str = Field(description="candidate-found, citation-accepted or human-verified")
    score: float
    text: str | None = None


class EvidenceSource(_Open):
    """Admitted evidence of one source, its chunks in document order."""

    source: str
    title: str | None = None
    citation_uri: str | None = None
    chunks: list[EvidenceChunk]


class Signals(_Open):
    """What an agent weighs before answering."""

    confidence: float = Field(description="calibrated probability that the context holds every required piece")
    coverage: dict[str, Any] = Field(description="aspects and families covered, missing, found but rejected; ratio")
    features: dict[str, float] | None = None
    source_diversity: dict[str, Any] | None = None


class Cost(_Open):
    latency_ms: dict[str, float]
    model_tokens: int = Field(0, description="Tokens fed to the cross-encoder, if one is configured (no generative "
                                             "model runs).")
    searches_ms: list[dict[str, Any]] = Field([], description="Each bounded search (rescue, name look-up, bridge) "
                                                               "with its stage, query and time.")


class Result(_Open):
    """The result of one search_with_reasoning call (JSON-stable; everything but `cost` is reproducible from
    request, index snapshot and configuration)."""

    version: int
    request: dict[str, Any] = Field(description="The request as run: query, k, aspect_focus, principal, "
                                                "retrieved_at (pinned), plan, mode.")
    index: Index
    plan: dict[str, Any] = Field(description="The evidence plan: required families and question aspects.")
    decision: Decision
    families: list[Family]
    evidence: list[EvidenceSource] = Field(description="Admitted evidence grouped by source; each chunk carries "
                                                       "its exact `citation`.")
    expanded: list[Any] = []
    rejected: dict[str, Any] | None = Field(description="Rejected candidates as ids, sources and reason codes "
                                                        "(access denials only counted), with counts per reason.")
    signals: Signals
    retrieval_metadata: dict[str, Any]
    trace: list[dict[str, Any]]
    cost: Cost


def result_schema() -> dict[str, Any]:
    """`Result`'s JSON schema with every `$ref` inlined: it is embedded in other documents (an OpenAPI
    description, an MCP tool listing), where a reference to `#/$defs/...` would point at their root. Null
    defaults are left out (OpenAPI documents drop them, and a response has no defaults)."""
    schema = Result.model_json_schema(mode="validation")
    definitions = schema.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return inline(copy.deepcopy(definitions[node["$ref"].rsplit("/", 1)[-1]]))
            # A null default says nothing about a response, and OpenAPI documents drop nulls: leave it out.
            return {key: inline(value) for key, value in node.items() if not (key == "default" and value is None)}
        if isinstance(node, list):
            return [inline(item) for item in node]
        return node

    inlined: dict[str, Any] = inline(schema)
    return inlined
