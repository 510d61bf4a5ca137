"""The grade stage: CRAG-style grading of the selection (correct / ambiguous / incorrect). Noise is dropped,
but a required family's last validated chunk is restored; a family with none is reported missing."""

from __future__ import annotations

from collections.abc import Sequence

from evidex.evidence.grade import Graded, grade
from evidex.evidence.plan import RequiredFamily
from evidex.pipeline.context import RequestContext
from evidex.types import Candidate


def grade_selection(ctx: RequestContext, selected: Sequence[Candidate], admitted: Sequence[Candidate],
                    families: Sequence[RequiredFamily]) -> Graded | None:
    if not ctx.request.switches.grade:
        return None
    with ctx.trace.stage("grade", len(selected)) as st:
        graded = grade(selected, admitted, families, ctx.k, ctx.thresholds)
        st.n_out = len(graded.chunks)
        st.decisions = {"overall": graded.overall.value, "removed": list(graded.removed),
                        "restored": list(graded.restored), "missing": list(graded.missing_families),
                        "cut_by_k": list(graded.cut)}
    return graded
