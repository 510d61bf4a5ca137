"""The admit stage: the gate's decision on every candidate (access, freshness at `retrieved_at`, exact
citation), and which successors (`superseded_by`) the requester may not learn of."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from evidex.admission.gate import GateDecision, RejectReason
from evidex.pipeline.context import RequestContext
from evidex.stores.protocol import Store
from evidex.types import Candidate, SearchFilters


@dataclass(frozen=True)
class Admitted:
    candidates: tuple[Candidate, ...]  # what the gate admitted, in rank order (everything when there is no gate)
    decision: GateDecision | None = None
    hidden_successors: frozenset[str] = frozenset()


def admit(ctx: RequestContext, ranked: Sequence[Candidate]) -> Admitted:
    if ctx.access.gate is None or ctx.access.principal is None:
        return Admitted(tuple(ranked))
    with ctx.trace.stage("admit", len(ranked)) as st:
        decision = ctx.access.admit(ranked)
        assert decision is not None  # a gate and a principal: the gate decides
        hidden = _unreadable_successors(ctx.store, lambda: ctx.encode(ctx.request.query), ranked, decision,
                                        ctx.access.reader)
        st.n_out = len(decision.admitted)
        st.decisions = {"rejected_counts": decision.counts()}
    return Admitted(tuple(decision.admitted), decision, hidden)


def _unreadable_successors(store: Store, vector: Callable[[], npt.NDArray[np.float32]],
                           candidates: Sequence[Candidate], decision: GateDecision,
                           reader: SearchFilters | None) -> frozenset[str]:
    """The successors (`superseded_by`) named by admitted or visibly rejected candidates of which the requester
    may read nothing: naming one would reveal a restricted page. A one-row dense search under the reader's
    filter and the source tells whether any of it is readable (`vector`: any query vector, computed only if
    needed)."""
    if reader is None:
        return frozenset()
    visible = {r.record_id for r in decision.rejected if r.reason is not RejectReason.ACCESS}
    visible |= {c.chunk.record_id for c in decision.admitted}
    named = sorted({s for c in candidates if c.chunk.record_id in visible
                    and (s := c.chunk.provenance.superseded_by)})
    return frozenset(source for source in named if not store.search_dense(vector(), 1, dataclasses.replace(
        reader, source_pattern=f"^{re.escape(source)}$")))
