"""The reserve stage: constrained top-k. The best admitted chunk of each required family first, then the
page one hop away a nested question needs, then the lead of each aspect nothing met, then global rank."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from evidex.evidence.plan import EvidencePlan, RequiredFamily
from evidex.evidence.reserve import reserve
from evidex.pipeline.bridging import Bridged
from evidex.pipeline.context import RequestContext
from evidex.types import Candidate

HOP_OBLIGATION = "(one hop away)"  # the reserve trace's name for the linked page a nested question needs
LEAD_OBLIGATION = "(lead) "  # the reserve trace's prefix for the lead kept for an aspect nothing met


@dataclass(frozen=True)
class Reserved:
    selected: tuple[Candidate, ...]
    leads: tuple[RequiredFamily, ...] = ()  # kept like evidence through grading, never counted as covering


def reserve_families(ctx: RequestContext, targets: EvidencePlan, admitted: Sequence[Candidate], bridged: Bridged,
                     leads: dict[str, str]) -> Reserved:
    with ctx.trace.stage("reserve", len(admitted)) as st:
        if not ctx.request.switches.reserve:
            st.n_out = min(len(admitted), ctx.k)
            return Reserved(tuple(admitted[: ctx.k]))
        # The best linked page, preferring one named exactly by a followed name ("Westshire" over
        # "Caldport, Westshire").
        hop_pages = tuple(sorted(bridged.named or bridged.linked))
        hop = [RequiredFamily(HOP_OBLIGATION, rescue_query="", record_ids=hop_pages)] if hop_pages else []
        admitted_ids = {c.chunk.record_id for c in admitted}
        lead_families = tuple(RequiredFamily(LEAD_OBLIGATION + name, rescue_query="", record_ids=(record_id,),
                                             lead=True)
                              for name, record_id in leads.items() if record_id in admitted_ids)
        selection = reserve(admitted, [*targets.families, *hop, *lead_families], ctx.k, ctx.evidence.max_per_doc)
        st.decisions = {"reserved": selection.reserved}
        st.n_out = len(selection.chunks)
    return Reserved(tuple(selection.chunks), lead_families)
