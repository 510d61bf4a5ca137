"""The result an agent (or a person) gets: JSON-stable and replayable.

Everything but the `cost` block (wall-clock timings) is a pure function of the request, the index
snapshot and the configuration, so `decision_json()` of the same request on the same snapshot is byte
for byte identical. Rejected records appear only as ids, sources and reason codes, never with text, title
or excerpt; access rejections only as a count unless the gate's visibility policy says otherwise.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from evidex.admission.verification import EvidenceStatus, Verification, status_of
from evidex.evidence.assemble import group_by_source
from evidex.outcome import Action, SearchOutcome
from evidex.timestamps import format_time
from evidex.types import Candidate, RejectionVisibility

RESULT_VERSION = 1


@dataclass(frozen=True)
class ResultContext:
    """What the result needs to know beyond the outcome."""

    snapshot_id: str
    config_hash: str
    embedding_model: str
    chunk_size: int
    visibility: RejectionVisibility
    # Rejection reasons whose records show no source path (`[gate] hide_unpublished_paths`, `hide_rejected_paths`):
    # an embargoed page's name can itself be the news.
    hide_paths_of: frozenset[str] = frozenset()


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 6)


def _chunk(c: Candidate, outcome: SearchOutcome, verifications: dict[str, list[Verification]]) -> dict[str, Any]:
    ch = c.chunk
    p = ch.provenance
    vs = verifications.get(ch.record_id, [])
    admitted = outcome.gate is not None
    status = status_of(True, vs) if admitted else EvidenceStatus.CANDIDATE_FOUND
    grade = outcome.graded.grades.get(ch.record_id) if outcome.graded else None
    citation = f"{p.citation_uri}#{ch.citation_anchor}" if p.citation_uri and ch.citation_anchor else None
    return {
        "record_id": ch.record_id,
        "doc_id": ch.doc_id,
        "chunk_index": ch.chunk_index,
        "heading": ch.heading,
        "citation": citation,
        "citation_anchor": ch.citation_anchor,
        "span": [ch.span_start, ch.span_end],
        "evidence_family": p.evidence_family,
        "meets": [f.name for f in outcome.plan.families if f.matches(ch)],
        "status": status.value,
        "verifications": [{"claim": v.claim, "verified_by": v.verified_by,
                           "verified_at": format_time(v.verified_at)} for v in vs if v.is_current],
        "grade": grade.value if grade else None,
        "score": _round(c.score),
        "scores": {k: _round(v) for k, v in c.scores},
        "dense_score": _round(c.dense_score),
        "sparse_score": _round(c.sparse_score),
        "provenance": {
            "source_version": p.source_version, "published_at": format_time(p.published_at),
            "expires_at": format_time(p.expires_at), "authority_tier": p.authority_tier,
            "access_labels": list(p.access_labels), "owner": p.owner, "batch_id": ch.batch_id,
            # A newer page replaces this one (not a gate rule: an expiry date is). Never a successor the
            # requester may not read: naming it would reveal the page.
            "superseded_by": None if p.superseded_by in outcome.hidden_successors else p.superseded_by,
        },
        "text": ch.text,
    }


def build_result(outcome: SearchOutcome, ctx: ResultContext,
                 verifications: dict[str, list[Verification]] | None = None) -> dict[str, Any]:
    """The JSON-ready result of an outcome the signals stage has run on."""
    if outcome.signals is None:
        raise ValueError("build_result needs an outcome with signals (run_search computes them)")
    verifications = verifications or {}
    req, signals, gate = outcome.request, outcome.signals, outcome.gate
    rec = signals.recommendation
    evidence = [{"source": group[0].chunk.source, "title": group[0].chunk.title,
                 "citation_uri": group[0].chunk.provenance.citation_uri,
                 "chunks": [_chunk(c, outcome, verifications) for c in group]}
                for group in group_by_source(outcome.context)]
    return {
        "version": RESULT_VERSION,
        "request": _request(outcome),
        "index": {"snapshot_id": ctx.snapshot_id, "config_hash": ctx.config_hash},
        "plan": outcome.plan.to_dict(),
        "decision": {
            "recommendation": rec.to_dict(),
            "stop_condition": rec.reason if rec.action is Action.STOP else None,
            "grade": outcome.graded.overall.value if outcome.graded else None,
        },
        "families": [{"name": f.name, "status": f.status.value, "record_ids": list(f.record_ids),
                      "reasons": list(f.reasons)} for f in outcome.families],
        "evidence": evidence,
        "expanded": [list(pair) for pair in outcome.expanded],
        "rejected": _rejected(outcome, ctx.visibility, ctx.hide_paths_of),
        "signals": {"confidence": signals.confidence, "features": signals.features,
                    "source_diversity": signals.source_diversity, "coverage": signals.coverage},
        "retrieval_metadata": {
            "embedding_model": ctx.embedding_model, "chunk_size": ctx.chunk_size, "top_k": req.k,
            "mode": req.mode.value, "reranker": outcome.reranker, "index_snapshot": ctx.snapshot_id,
            "config_hash": ctx.config_hash, "gate": "on" if gate is not None else "off",
        },
        "trace": outcome.trace.to_dict(timing=False),
        "cost": _cost(outcome),
    }


def _request(outcome: SearchOutcome) -> dict[str, Any]:
    req = outcome.request
    return {
        "query": req.query, "k": req.k, "aspect_focus": req.aspect_focus,
        "principal": {"name": req.principal.name, "labels": list(req.principal.labels)} if req.principal else None,
        "retrieved_at": format_time(outcome.retrieved_at),
        "plan": req.plan.to_dict() if req.plan is not None else None,  # as given: replay re-applies focus
        "mode": req.mode.value,
    }


def _rejected(outcome: SearchOutcome, visibility: RejectionVisibility,
              hide_paths_of: frozenset[str] = frozenset()) -> dict[str, Any] | None:
    """The gate's rejections as the visibility policy allows. Visible (non-access) rejections may say where the
    record came from and what replaced it: that is provenance, not restricted text, and it tells the reader
    where the current version lives (unless the requester may read none of the successor: then its name alone
    would reveal it). A rejection whose reason is in `hide_paths_of` says neither."""
    if outcome.gate is None:
        return None
    rejected = outcome.gate.to_dict(visibility)
    rejected.pop("admitted", None)
    chunks = {c.chunk.record_id: c.chunk for c in outcome.ranked_all}
    visible: list[dict[str, Any]] = rejected["rejected"]  # type: ignore[assignment]
    for item in visible:
        ch = chunks.get(item["record_id"])
        if ch is not None and item["reason"] != "access-label-not-granted" and item["reason"] not in hide_paths_of:
            item["source"] = ch.source
            successor = ch.provenance.superseded_by
            item["superseded_by"] = None if successor in outcome.hidden_successors else successor
    return rejected


def _cost(outcome: SearchOutcome) -> dict[str, Any]:
    stages = outcome.trace.stages
    return {
        "latency_ms": {**{s.name: round(s.ms, 3) for s in stages}, "total": round(outcome.trace.total_ms(), 3)},
        # Tokens fed to a model that reads candidate text (a configured cross-encoder); no generative model
        # is called, and the query's own embedding is not counted.
        "model_tokens": int(outcome.reranker.get("tokens", 0)),
        # Each bounded search a stage ran (rescue, name look-ups, bridges), with its time.
        "searches_ms": [x for s in stages for x in s.searches_ms()],
    }


def decision_json(result: dict[str, Any]) -> str:
    """The deterministic part of a result as canonical JSON (everything but `cost`)."""
    stable = {k: v for k, v in result.items() if k != "cost"}
    return json.dumps(stable, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def first_difference(a: Any, b: Any, path: str = "$") -> str | None:
    """The JSON path of the first place two results differ, or None."""
    if type(a) is not type(b):
        return f"{path}: {a!r} != {b!r}"
    if isinstance(a, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                return f"{path}.{key}: present in only one result"
            diff = first_difference(a[key], b[key], f"{path}.{key}")
            if diff:
                return diff
        return None
    if isinstance(a, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            diff = first_difference(x, y, f"{path}[{i}]")
            if diff:
                return diff
        return None if len(a) == len(b) else f"{path}: {len(a)} items != {len(b)} items"
    return None if a == b else f"{path}: {a!r} != {b!r}"
