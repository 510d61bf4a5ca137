"""The cite stage: a candidate page that several of the leading readable pages link to gains the reranker's
citation bonus (`cited_bonus`): its authors tied it to the evidence."""

from __future__ import annotations

from collections.abc import Sequence

from evidex.evidence.citations import cited_records
from evidex.pipeline.context import RequestContext
from evidex.types import Candidate


def cite(ctx: RequestContext, ranked: Sequence[Candidate]) -> frozenset[str]:
    with ctx.trace.stage("cite", len(ranked)) as st:
        cited = cited_records(ctx.access.admitted(ranked[: ctx.k]), ranked, ctx.evidence.cited_min_pages)
        st.n_out = len(cited)
        st.decisions = {"cited": sorted(cited)}
    return cited
