"""The admission gate and its rules, the operator audit log, and human verification records."""

from evidex.admission.audit import AuditedRejection, AuditEntry, AuditLog
from evidex.admission.gate import (
    RULES,
    AccessRule,
    AdmissionGate,
    CitationRule,
    FreshnessRule,
    GateDecision,
    GatePolicy,
    Principal,
    Rejection,
    RejectionVisibility,
    RejectReason,
    Rule,
)
from evidex.admission.verification import EvidenceStatus, Verification, VerificationLog, status_of

__all__ = [
    "RULES",
    "AccessRule",
    "AdmissionGate",
    "AuditEntry",
    "AuditLog",
    "AuditedRejection",
    "CitationRule",
    "EvidenceStatus",
    "FreshnessRule",
    "GateDecision",
    "GatePolicy",
    "Principal",
    "RejectReason",
    "Rejection",
    "RejectionVisibility",
    "Rule",
    "Verification",
    "VerificationLog",
    "status_of",
]
