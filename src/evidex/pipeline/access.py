"""Access, in one place: what the requester may read and what the gate admits, as every stage asks it.

Searches steered by the request's own words (retrieval, an aspect focus, an automatic aspect's rescue, name
look-ups, bridges) see only what the requester may read (`reader`); a declared family's rescue searches every
record, so that evidence which exists but is restricted can be reported `found-but-rejected`. The gate then
checks every candidate. With no gate or no principal (an evaluation of retrieval alone) everything is readable.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from evidex.admission.gate import AdmissionGate, GateDecision, Principal
from evidex.types import Candidate, Chunk, ScoredId, SearchFilters

ToCandidates = Callable[[list[ScoredId]], list[Candidate]]


@dataclass(frozen=True)
class Access:
    gate: AdmissionGate | None
    principal: Principal | None
    retrieved_at: datetime
    reader: SearchFilters | None  # the filter of searches the request's words steer; None: no filter

    @classmethod
    def of(cls, gate: AdmissionGate | None, principal: Principal | None, retrieved_at: datetime) -> Access:
        reader = gate.readable(principal) if gate is not None and principal is not None else None
        return cls(gate, principal, retrieved_at, reader)

    @property
    def reader_labels(self) -> tuple[str, ...] | None:
        """The labels whose records the requester may read (None: every record)."""
        return self.reader.access_labels if self.reader is not None else None

    def may_read(self, chunk: Chunk) -> bool:
        return self.gate is None or self.principal is None or self.gate.may_read(self.principal, chunk)

    def admit(self, candidates: Sequence[Candidate]) -> GateDecision | None:
        """The gate's decision on `candidates` (None when there is no gate)."""
        if self.gate is None or self.principal is None:
            return None
        return self.gate.admit(candidates, self.principal, self.retrieved_at)

    def admitted(self, candidates: Sequence[Candidate]) -> list[Candidate]:
        """`candidates` the gate admits for this request (all of them when there is no gate)."""
        decision = self.admit(candidates)
        return list(candidates) if decision is None else list(decision.admitted)

    def readable(self, to_candidates: ToCandidates) -> ToCandidates:
        """`to_candidates` limited to what the gate admits: a look-up must not reveal, even by id in the trace,
        a record the requester may not use."""
        if self.gate is None or self.principal is None:
            return to_candidates

        def readable(hits: list[ScoredId]) -> list[Candidate]:
            return self.admitted(to_candidates(hits))

        return readable
