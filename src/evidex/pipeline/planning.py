"""The plan stage: which families and aspects the question needs. The plan is final when this stage ends;
later stages learn evidence for its families (`bind`) but never change which are required."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

from evidex.evidence.plan import EvidencePlan, QuestionShape, plan_question, with_term_weights, without_frames
from evidex.evidence.rescue import index_holds
from evidex.pipeline.context import RequestContext
from evidex.retrieval.corpus import word_counts
from evidex.types import Candidate

KnownEvidence = Mapping[str, tuple[str, ...]]  # family name -> record ids known to be its best evidence


def plan(ctx: RequestContext) -> EvidencePlan:
    """The caller's plan, else a configured question shape's, else one from the question's aspects; with the
    aspect focus first and without the aspects that only frame the question ("how do I turn that on")."""
    ev, request, reader = ctx.evidence, ctx.request, ctx.access.reader

    def similarity(shape: QuestionShape) -> float | None:
        examples = ctx.parts.shape_examples.get(shape.name)
        return None if examples is None else round(float(np.max(examples @ ctx.encode(request.query))), 4)

    with ctx.trace.stage("plan") as st:
        planned = plan_question(request.query, shapes=ctx.parts.shapes, explicit=request.plan,
                                aspect_focus=request.aspect_focus, max_aspects=ev.max_aspects, similarity=similarity,
                                held=lambda identifier: index_holds(ctx.store, identifier, limit=ev.wide_limit,
                                                                    reader=reader))
        # Word counts among what the requester may read: restricted text holding a word must not decide which
        # aspects are obligations.
        planned, frames = without_frames(planned, lambda text: word_counts(ctx.store, text, ctx.access.reader_labels),
                                         ev.frame_word_share, ev.frame_min_records, keep=request.aspect_focus)
        st.n_out = len(planned.families)
        st.decisions = {"source": planned.source.value, "families": [f.name for f in planned.families],
                        "frames": list(frames)}
    return planned


def bind(plan: EvidencePlan, pool: Sequence[Candidate], known: KnownEvidence) -> EvidencePlan:
    """`plan` as matching reads it: each family with the records known to be its best evidence added, and its
    terms weighted by their rarity among the request's `pool` (see `with_term_weights`)."""
    return with_term_weights(with_known_evidence(plan, known), pool)


def with_known_evidence(plan: EvidencePlan, pages: KnownEvidence) -> EvidencePlan:
    """`plan` with known best evidence added per family name (the pages a name titles, a focused search's
    best hits), after any the plan itself names."""
    if not pages:
        return plan
    families = tuple(dataclasses.replace(f, record_ids=tuple(dict.fromkeys([*f.record_ids, *pages[f.name]])))
                     if f.name in pages else f for f in plan.families)
    return dataclasses.replace(plan, families=families)
