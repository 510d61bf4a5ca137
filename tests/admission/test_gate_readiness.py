"""The design's readiness case at gate level: four candidates, one admissible, each rejection exact."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from admission_support import NOW, candidate, canonical, make_chunk

from evidex.admission import (
    AdmissionGate,
    AuditLog,
    EvidenceStatus,
    GatePolicy,
    Principal,
    Rejection,
    RejectionVisibility,
    RejectReason,
    VerificationLog,
    status_of,
)
from evidex.types import Candidate

DAY = timedelta(days=1)
ENGINEER = Principal.of("engineer", ["engineering"])


def _candidates() -> list[Candidate]:
    """Ranked by score: every record that must be rejected outranks the one that is admissible."""
    fresh = make_chunk("fresh", labels=("engineering",), published_at=NOW - 30 * DAY,
                       expires_at=NOW + 300 * DAY, citation_anchor="#rotate-keys",
                       text="FRESH-TEXT rotate the keys every 90 days")
    expired = make_chunk("expired", labels=("engineering",), published_at=NOW - 900 * DAY,
                         expires_at=NOW - DAY, owner="team-security", text="EXPIRED-TEXT rotate yearly",
                         title="EXPIRED-TITLE")
    restricted = make_chunk("restricted", labels=("security-leads",), published_at=NOW - DAY,
                            owner="team-security", text="RESTRICTED-TEXT the master key lives in vault 7",
                            title="RESTRICTED-TITLE")
    uncited = make_chunk("uncited", labels=("engineering",), citation_uri=None,
                         text="UNCITED-TEXT keys are rotated on demand", title="UNCITED-TITLE")
    return [candidate(restricted, 0.97), candidate(expired, 0.93), candidate(uncited, 0.88),
            candidate(fresh, 0.71)]


def test_four_cases(tmp_path: Path) -> None:
    candidates = _candidates()
    decision = AdmissionGate().admit(candidates, ENGINEER, NOW)

    assert [c.chunk.record_id for c in decision.admitted] == ["fresh"]
    assert decision.rejected == (
        Rejection("restricted", "doc-restricted", RejectReason.ACCESS, "team-security"),
        Rejection("expired", "doc-expired", RejectReason.EXPIRED, "team-security"),
        Rejection("uncited", "doc-uncited", RejectReason.NO_CITATION, "team-docs"),
    )

    # Statuses: admitted is citation-accepted, never human-verified until a person records it.
    verifications = VerificationLog(tmp_path / "verifications.sqlite")
    fresh = decision.admitted[0].chunk
    admitted_ids = {c.chunk.record_id for c in decision.admitted}
    statuses = {c.chunk.record_id: status_of(c.chunk.record_id in admitted_ids,
                                             verifications.for_record(c.chunk.record_id, "v1"))
                for c in candidates}
    assert statuses == {"restricted": EvidenceStatus.CANDIDATE_FOUND, "expired": EvidenceStatus.CANDIDATE_FOUND,
                        "uncited": EvidenceStatus.CANDIDATE_FOUND, "fresh": EvidenceStatus.CITATION_ACCEPTED}
    verifications.record("fresh", "v1", "keys rotate every 90 days", by="alice", at=NOW)
    current = verifications.for_record("fresh", fresh.provenance.source_version)
    assert status_of(True, current) is EvidenceStatus.HUMAN_VERIFIED
    # A verification never lifts a rejected record.
    verifications.record("expired", "v1", "keys rotate yearly", by="alice", at=NOW)
    assert status_of(False, verifications.for_record("expired", "v1")) is EvidenceStatus.CANDIDATE_FOUND


def test_requester_view_of_the_four_cases() -> None:
    decision = AdmissionGate().admit(_candidates(), ENGINEER, NOW)
    assert decision.to_dict(RejectionVisibility.REASONS_EXCEPT_ACCESS) == {
        "admitted": ["fresh"],
        "rejected": [{"record_id": "expired", "reason": "expired-at-retrieval-time"},
                     {"record_id": "uncited", "reason": "missing-exact-citation-anchor"}],
        "rejected_counts": {"access-label-not-granted": 1, "expired-at-retrieval-time": 1,
                            "missing-exact-citation-anchor": 1, "not-yet-published": 0},
    }


def test_same_request_same_decision_byte_for_byte(tmp_path: Path) -> None:
    outputs = []
    for run in range(2):  # a fresh gate and fresh candidates each time: nothing carries over
        decision = AdmissionGate(GatePolicy()).admit(_candidates(), ENGINEER, NOW)
        audit = AuditLog(tmp_path / f"audit-{run}.jsonl")
        audit.append(decision, request_id="req-1", principal=ENGINEER, retrieved_at=NOW, query="key rotation")
        outputs.append((canonical(decision, RejectionVisibility.ALL_REASONS),
                        canonical(decision, RejectionVisibility.REASONS_EXCEPT_ACCESS),
                        (tmp_path / f"audit-{run}.jsonl").read_bytes()))
    assert outputs[0] == outputs[1]


def test_nothing_admissible_leaves_only_reasons() -> None:
    decision = AdmissionGate().admit(_candidates()[:3], ENGINEER, NOW)
    assert decision.admitted == ()
    assert sum(decision.counts().values()) == 3
