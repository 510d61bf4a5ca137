"""The gate as a whole: reason order, candidate order, policies, visibility, configuration errors."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest
from admission_support import NOW, candidate, make_chunk

from evidex.admission import (
    AdmissionGate,
    GateDecision,
    GatePolicy,
    Principal,
    Rejection,
    RejectionVisibility,
    RejectReason,
)
from evidex.errors import ConfigError

SECOND = timedelta(seconds=1)
READER = Principal.of("reader", ["public"])


def test_rejection_carries_no_text_fields() -> None:
    assert [f.name for f in dataclasses.fields(Rejection)] == ["record_id", "doc_id", "reason", "owner"]


def test_reason_values_and_order() -> None:
    assert [r.value for r in RejectReason] == [
        "access-label-not-granted", "not-yet-published", "expired-at-retrieval-time",
        "missing-exact-citation-anchor"]
    assert [r.rank for r in RejectReason] == [0, 1, 2, 3]


@pytest.mark.parametrize(("overrides", "expected"), [
    ({"labels": ("secret",), "published_at": NOW + SECOND, "expires_at": NOW, "citation_uri": None},
     RejectReason.ACCESS),
    ({"published_at": NOW + SECOND, "expires_at": NOW, "citation_uri": None}, RejectReason.NOT_PUBLISHED),
    ({"expires_at": NOW, "citation_uri": None}, RejectReason.EXPIRED),
    ({"citation_anchor": None}, RejectReason.NO_CITATION),
])
def test_first_failing_rule_in_fixed_order_wins(overrides: dict[str, Any], expected: RejectReason) -> None:
    chunk = make_chunk("r1", **overrides)
    decision = AdmissionGate().admit([candidate(chunk)], READER, NOW)
    assert decision.admitted == ()
    assert [r.reason for r in decision.rejected] == [expected]


def test_reason_order_does_not_depend_on_policy_rule_order() -> None:
    chunk = make_chunk("r1", labels=("secret",), citation_uri=None)
    for rules in (["citation", "access"], ["access", "citation"]):
        gate = AdmissionGate(GatePolicy.from_names(rules, "all-reasons"))
        assert gate.admit([candidate(chunk)], READER, NOW).rejected[0].reason is RejectReason.ACCESS


def test_only_active_rules_apply() -> None:
    expired_secret = make_chunk("r1", labels=("secret",), expires_at=NOW)
    gate = AdmissionGate(GatePolicy.from_names(["citation"], "all-reasons"))
    assert [c.chunk.record_id for c in gate.admit([candidate(expired_secret)], READER, NOW).admitted] == ["r1"]
    gate = AdmissionGate(GatePolicy.from_names(["freshness"], "all-reasons"))
    assert gate.admit([candidate(expired_secret)], READER, NOW).rejected[0].reason is RejectReason.EXPIRED


def test_candidate_order_is_kept_and_rejection_names_owner() -> None:
    chunks = [make_chunk("a"), make_chunk("b", expires_at=NOW, owner="team-b"), make_chunk("c"),
              make_chunk("d", labels=("secret",), owner=None), make_chunk("e")]
    decision = AdmissionGate().admit([candidate(c, 1.0 - i / 10) for i, c in enumerate(chunks)], READER, NOW)
    assert [c.chunk.record_id for c in decision.admitted] == ["a", "c", "e"]
    assert decision.rejected == (Rejection("b", "doc-b", RejectReason.EXPIRED, "team-b"),
                                 Rejection("d", "doc-d", RejectReason.ACCESS, None))


def test_naive_retrieved_at_is_rejected() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        AdmissionGate().admit([candidate(make_chunk("a"))], READER, NOW.replace(tzinfo=None))


def test_empty_input_gives_empty_decision() -> None:
    decision = AdmissionGate().admit([], READER, NOW)
    assert decision == GateDecision(admitted=(), rejected=())
    assert set(decision.counts().values()) == {0}


# --- policy construction ------------------------------------------------------------------------------

def test_default_policy_runs_every_rule_and_hides_access_ids() -> None:
    policy = GatePolicy()
    assert policy.rules == ("access", "freshness", "citation")
    assert policy.visibility is RejectionVisibility.REASONS_EXCEPT_ACCESS


@pytest.mark.parametrize(("rules", "visibility", "message"), [
    (["access", "fresh"], "counts-only", "unknown admission rule 'fresh'; choose from: access, freshness"),
    ([], "counts-only", "at least one rule"),
    (["access", "access"], "counts-only", "more than once"),
    (["access"], "everything", "unknown rejection visibility 'everything'; choose one of: reasons-except"),
    ("access", "counts-only", "not one string"),
])
def test_unknown_policy_is_a_config_error(rules: list[str], visibility: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        GatePolicy.from_names(rules, visibility)


def test_policy_constructor_validates_too() -> None:
    with pytest.raises(ConfigError, match="unknown admission rule"):
        GatePolicy(rules=("acces",))


def test_policy_from_config_values() -> None:
    policy = GatePolicy.from_config(" access , Freshness,citation ", "All-Reasons")
    assert policy == GatePolicy(("access", "freshness", "citation"), RejectionVisibility.ALL_REASONS)
    with pytest.raises(ConfigError, match="at least one rule"):
        GatePolicy.from_config(" , ", "counts-only")


# --- visibility ---------------------------------------------------------------------------------------

def _mixed_decision() -> GateDecision:
    chunks = [make_chunk("ok"), make_chunk("secret", labels=("secret",)), make_chunk("old", expires_at=NOW),
              make_chunk("future", published_at=NOW + SECOND), make_chunk("uncited", citation_uri="")]
    return AdmissionGate().admit([candidate(c) for c in chunks], READER, NOW)


def test_counts_cover_every_reason_with_sorted_keys() -> None:
    assert _mixed_decision().counts() == {
        "access-label-not-granted": 1, "expired-at-retrieval-time": 1, "missing-exact-citation-anchor": 1,
        "not-yet-published": 1}
    assert list(_mixed_decision().counts()) == sorted(_mixed_decision().counts())


def test_visibility_reasons_except_access() -> None:
    assert _mixed_decision().visible_rejections(RejectionVisibility.REASONS_EXCEPT_ACCESS) == [
        {"record_id": "old", "reason": "expired-at-retrieval-time"},
        {"record_id": "future", "reason": "not-yet-published"},
        {"record_id": "uncited", "reason": "missing-exact-citation-anchor"},
    ]


def test_visibility_counts_only() -> None:
    decision = _mixed_decision()
    assert decision.visible_rejections(RejectionVisibility.COUNTS_ONLY) == []
    assert decision.to_dict(RejectionVisibility.COUNTS_ONLY) == {
        "admitted": ["ok"], "rejected": [], "rejected_counts": decision.counts()}


def test_visibility_all_reasons() -> None:
    assert _mixed_decision().visible_rejections(RejectionVisibility.ALL_REASONS) == [
        {"record_id": "secret", "reason": "access-label-not-granted"},
        {"record_id": "old", "reason": "expired-at-retrieval-time"},
        {"record_id": "future", "reason": "not-yet-published"},
        {"record_id": "uncited", "reason": "missing-exact-citation-anchor"},
    ]


def test_visibility_from_str_lists_choices() -> None:
    assert RejectionVisibility.from_str("COUNTS-ONLY") is RejectionVisibility.COUNTS_ONLY
    with pytest.raises(ValueError, match="reasons-except-access, counts-only, all-reasons"):
        RejectionVisibility.from_str("some")  # a mode's own error; the policy and config name it a ConfigError
