"""The assemble stage: the final context (a selected chunk's neighbours of the same section added while
there is room) and each required family's status: covered, missing, or found but rejected by the gate."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from evidex.admission.gate import GateDecision, Rejection, RejectReason
from evidex.evidence.assemble import expand_neighbours
from evidex.evidence.grade import Graded, grade_of
from evidex.evidence.plan import EvidencePlan, RequiredFamily
from evidex.outcome import FamilyState, FamilyStatus
from evidex.pipeline.context import RequestContext
from evidex.types import Candidate


@dataclass(frozen=True)
class Assembled:
    context: tuple[Candidate, ...]
    families: tuple[FamilyStatus, ...]
    graded: Graded | None  # grading's verdicts, with the grade of each neighbour added
    expanded: tuple[tuple[str, str], ...] = ()  # (selected record, neighbour added beside it)


def assemble(ctx: RequestContext, targets: EvidencePlan, selected: Sequence[Candidate],
             admitted: Sequence[Candidate], ranked: Sequence[Candidate], decision: GateDecision | None,
             graded: Graded | None) -> Assembled:
    context: list[Candidate] = list(selected)
    expanded: tuple[tuple[str, str], ...] = ()
    with ctx.trace.stage("assemble", len(selected)) as st:
        if ctx.request.switches.expand:
            dropped = set(graded.removed) if graded is not None else set()  # never back what grading removed
            assembly = expand_neighbours(selected, [c for c in admitted if c.chunk.record_id not in dropped], ctx.k)
            context, expanded = list(assembly.chunks), assembly.expanded
            if graded is not None and expanded:  # a neighbour kept with its section shows its own grade
                neighbours = {c.chunk.record_id: grade_of(c, ctx.thresholds) for c in context}
                graded = dataclasses.replace(graded, grades={**neighbours, **graded.grades})
            st.decisions = {"expanded": [list(pair) for pair in expanded]}
        st.n_out = len(context)
        families = family_statuses(targets, context, ranked, decision, graded)
    return Assembled(tuple(context), families, graded, expanded)


def family_statuses(plan: EvidencePlan, selected: Sequence[Candidate], ranked: Sequence[Candidate],
                    decision: GateDecision | None, graded: Graded | None) -> tuple[FamilyStatus, ...]:
    rejected_by_id = {r.record_id: r for r in decision.rejected} if decision else {}
    # A family grading found no validated evidence for is missing, whatever merely matches it in the context;
    # so is one whose evidence did not fit in k (admissible evidence exists: a re-query, not a stop).
    unvalidated = set(graded.missing_families) if graded else set()
    cut = set(graded.cut) if graded else set()
    out = []
    for family in plan.families:
        ids = () if family.name in unvalidated else tuple(c.chunk.record_id for c in selected
                                                           if family.matches(c.chunk))
        if ids:
            out.append(FamilyStatus(family.name, FamilyState.COVERED, ids))
        elif family.name in cut:
            out.append(FamilyStatus(family.name, FamilyState.MISSING))
        else:
            out.append(_unmet(family, ranked, rejected_by_id))
    return tuple(out)


def _unmet(family: RequiredFamily, ranked: Sequence[Candidate], rejected_by_id: dict[str, Rejection]) -> FamilyStatus:
    """Found but rejected, when a rejected candidate meets the family, else missing. An automatic aspect is the
    requester's own words: a record they may not read must not tell them it is there (a declared family may,
    by the operator's choice)."""
    rejected = [c.chunk.record_id for c in ranked
                if c.chunk.record_id in rejected_by_id and family.matches(c.chunk)
                and (family.is_store_filterable
                     or rejected_by_id[c.chunk.record_id].reason is not RejectReason.ACCESS)]
    if not rejected:
        return FamilyStatus(family.name, FamilyState.MISSING)
    reasons = sorted({rejected_by_id[r].reason.value for r in rejected})
    return FamilyStatus(family.name, FamilyState.FOUND_BUT_REJECTED, (), tuple(reasons))
