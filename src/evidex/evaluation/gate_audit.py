"""Evaluation through the admission gate: leaks, reject reasons, admissible family recall,
found-but-rejected reporting, and restricted evidence kept unseen.

A family whose evidence exists but was all rejected must be reported found-but-rejected, except when its
evidence is rejected for access only and the plan is automatic: then the family is the requester's own
words, and reporting it would let a question probe restricted text (`access_withheld`).

The records that must be rejected are computed once, independently of any pipeline, by applying the
configured gate to every live chunk of the index. A *leak* is the text of such a record appearing in what
a pipeline outputs (the serialised result of an evidence pipeline; the top-k chunk texts of a plain
retriever, which has no gate).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from evidex.admission.gate import AdmissionGate, GatePolicy, Principal, RejectReason
from evidex.types import Candidate, Chunk, EvalPlan

if TYPE_CHECKING:
    from evidex.engine import Engine
    from evidex.evaluation.answers import Ranked
    from evidex.evaluation.datasets import Question

ACCESS = RejectReason.ACCESS.value


@dataclass(frozen=True)
class GateAudit:
    chunks: tuple[Chunk, ...]
    admitted: frozenset[str]
    must_reject: dict[str, str]  # record id -> reason
    secret_texts: dict[str, str]  # record id -> text that must never appear (not shared with admitted text)

    @classmethod
    def build(cls, engine: Engine, principal: Principal, retrieved_at: datetime) -> GateAudit:
        chunks = tuple(engine.store.all_chunks())
        gate = AdmissionGate(GatePolicy.from_config(engine.config.gate.rules, engine.config.gate.visibility,
                                                    engine.config.gate.citation_schemes))
        decision = gate.admit([Candidate(c, 0.0) for c in chunks], principal, retrieved_at)
        admitted = frozenset(c.chunk.record_id for c in decision.admitted)
        # A rejected text that an admitted page also holds word for word (a shared section) is not secret.
        public_text = "\x00".join(c.chunk.text for c in decision.admitted)
        reasons = {r.record_id: r.reason.value for r in decision.rejected}
        secret = {c.record_id: c.text for c in chunks if c.record_id in reasons and c.text not in public_text}
        return cls(chunks, admitted, reasons, secret)

    def leaks_in(self, output: Any) -> int:
        """How many texts that must never appear do appear in `output`: a result (searched in its decoded
        strings; its JSON escapes every newline and quote, so a multi-line text never matched the serialised
        form) or plain text."""
        text = output if isinstance(output, str) else "\x00".join(strings_of(output))
        return sum(1 for secret in self.secret_texts.values() if secret in text)

    def _members(self, family: Any) -> list[Chunk]:
        return [c for c in self.chunks if family.matches(c)]

    def score(self, engine: Engine, rows: Sequence[tuple[Question, Ranked, float]], k: int,
              plan: EvalPlan) -> dict[str, Any]:
        leaks = 0
        reasons: Counter[str] = Counter()
        admissible_recall: list[float] = []
        expected_fbr = 0
        reported_fbr = 0
        expected_withheld = 0
        withheld = 0
        for question, ranked, _ in rows:
            outcome = ranked.info.get("outcome")
            output: Any
            if outcome is not None:
                output = ranked.info.get("result") or engine.result_of(outcome)
                if outcome.gate is not None:
                    reasons.update(r.reason.value for r in outcome.gate.rejected)
            else:
                output = "\n".join(f"{c.title}\n{c.text}" for c in ranked.chunks[:k])
            leaks += self.leaks_in(output)
            context = ranked.top_k(k)
            admissible_families = 0
            covered = 0
            for family in question.families:
                members = self._members(family)
                if any(m.record_id in self.admitted for m in members):
                    admissible_families += 1
                    covered += any(family.matches(c) and c.record_id in self.admitted for c in context)
                elif any(m.record_id in self.must_reject for m in members):
                    access_only = all(self.must_reject.get(m.record_id) == ACCESS for m in members)
                    if plan is not EvalPlan.ORACLE and access_only:
                        # An automatic plan's aspects are the requester's own words: evidence they may not
                        # read must stay unseen, not be reported found-but-rejected.
                        expected_withheld += 1
                        withheld += int(outcome is not None and not self._reported(outcome, family, plan))
                    else:
                        expected_fbr += 1
                        reported_fbr += self._reported(outcome, family, plan)
            if admissible_families:
                admissible_recall.append(covered / admissible_families)
        return {
            "leaks": leaks,
            "reject_reasons": dict(sorted(reasons.items())),
            "admissible_family_recall": round(sum(admissible_recall) / len(admissible_recall), 4)
            if admissible_recall else None,
            "found_but_rejected": {"expected": expected_fbr, "reported": reported_fbr},
            "access_withheld": {"expected": expected_withheld, "withheld": withheld},
        }

    def _reported(self, outcome: Any, family: Any, plan: EvalPlan) -> int:
        """Did the result tell the requester this family's evidence exists but was rejected?"""
        if outcome is None or outcome.gate is None:
            return 0
        if plan is EvalPlan.ORACLE:
            return int(any(f.name == family.name and f.status == "found-but-rejected" for f in outcome.families))
        rejected = {r.record_id for r in outcome.gate.rejected}
        return int(any(c.chunk.record_id in rejected and family.matches(c.chunk) for c in outcome.ranked_all))


def strings_of(value: Any) -> list[str]:
    """Every string in a JSON-like value (keys and values), decoded."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [x for k, v in value.items() for x in (*strings_of(k), *strings_of(v))]
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in strings_of(v)]
    return []
