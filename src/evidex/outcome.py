"""What a search is asked and what it decides, as data: the request, each required family's status, the
signals and recommendation, and the outcome the result is built from.

The stages that fill these in live in `evidex.pipeline`; the signals are computed in `evidex.signals`.
Every mode here is an Enum whose value is the string the result's JSON carries.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from evidex.admission.gate import GateDecision, Principal
from evidex.evidence.grade import Graded
from evidex.evidence.plan import EvidencePlan
from evidex.evidence.titles import PLAIN, TitleConvention
from evidex.trace import StageSwitches, Trace
from evidex.types import Candidate, RetrievalMode


@dataclass(frozen=True)
class SearchRequest:
    """One search: the question, how many chunks of context, who asks and at which pinned instant.

    >>> SearchRequest("how are certificates renewed?", k=5).k
    5
    """

    query: str
    k: int = 10
    principal: Principal | None = None  # None: no gate (evaluation of retrieval only)
    retrieved_at: datetime | None = None  # pinned; None = now, truncated to the second
    aspect_focus: str | None = None
    plan: EvidencePlan | None = None  # an explicit plan (the caller's / the oracle's)
    switches: StageSwitches = field(default_factory=StageSwitches)
    mode: RetrievalMode = RetrievalMode.HYBRID

    def __post_init__(self) -> None:
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise ValueError(f"k must be a positive integer (got {self.k!r})")
        # A focus of only whitespace is no focus: it would run an empty second search.
        object.__setattr__(self, "aspect_focus", (self.aspect_focus or "").strip() or None)


class FamilyState(enum.StrEnum):
    """Where a required family stands once the context is assembled."""

    COVERED = "covered"
    MISSING = "missing"
    FOUND_BUT_REJECTED = "found-but-rejected"


@dataclass(frozen=True)
class FamilyStatus:
    name: str
    status: FamilyState
    record_ids: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()


class Action(enum.StrEnum):
    """What an agent should do next."""

    PROCEED = "proceed"
    REQUERY = "re-query"
    STOP = "stop"


@dataclass(frozen=True)
class Recommendation:
    action: Action
    reason: str
    focus: tuple[str, ...] = ()  # aspects to re-query with (re-query)
    owner: str | None = None  # who can take the next step (stop)

    def to_dict(self) -> dict[str, Any]:
        return {"action": self.action.value, "reason": self.reason, "focus": list(self.focus), "owner": self.owner}


@dataclass(frozen=True)
class Signals:
    """What the evidence says about itself: confidence, the features it was computed from, coverage per aspect
    and family, source diversity, and the recommendation that follows."""

    confidence: float
    features: dict[str, float]
    coverage: dict[str, Any]
    source_diversity: dict[str, Any]
    recommendation: Recommendation


@dataclass(frozen=True)
class SearchOutcome:
    """What the pipeline decided, before serialisation (see `evidex.result`).

    `plan` is the plan as every stage after retrieval matched against it: the planned families, each with the
    evidence the request learned of it (`record_ids`: pages a focused search or a name look-up found;
    `term_weights`: its words' rarity among the candidates). Which families are required is decided by the
    plan stage alone."""

    request: SearchRequest
    retrieved_at: datetime
    plan: EvidencePlan
    context: tuple[Candidate, ...]
    families: tuple[FamilyStatus, ...]
    gate: GateDecision | None
    graded: Graded | None
    expanded: tuple[tuple[str, str], ...]
    ranked: tuple[Candidate, ...]  # every admitted candidate: the context, then each new page's best, then the rest
    ranked_all: tuple[Candidate, ...]  # every candidate before the gate (never serialised with text)
    reranker: dict[str, Any]
    trace: Trace
    hidden_successors: frozenset[str] = frozenset()  # `superseded_by` sources the requester may not read
    followed: frozenset[str] = frozenset()  # records reached by following a name out of the evidence (bridging)
    snapshot_id: str = ""  # the one index snapshot every read saw (set by `Engine.run`, which checks it)
    titles: TitleConvention = PLAIN  # how the index writes page titles (`evidex.evidence.titles`)
    signals: Signals | None = None  # set by the signals stage, the pipeline's last
