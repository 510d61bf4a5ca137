"""Each admission rule on its own, at and around its boundaries."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from admission_support import NOW, make_chunk

from evidex.admission import AccessRule, CitationRule, FreshnessRule, Principal, RejectReason

SECOND = timedelta(seconds=1)
READER = Principal.of("reader", ["public", "team-a"])


# --- access -------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("labels", "expected"), [
    (("public",), None),
    (("team-a", "restricted"), None),
    (("restricted",), RejectReason.ACCESS),
    ((), RejectReason.ACCESS),  # no labels: fail closed
    (("",), RejectReason.ACCESS),  # an empty label grants nothing
])
def test_access_rule(labels: tuple[str, ...], expected: RejectReason | None) -> None:
    assert AccessRule().check(make_chunk("r1", labels=labels), READER, NOW) is expected


def test_access_rule_principal_without_labels_reads_nothing() -> None:
    nobody = Principal.of("nobody", [])
    assert AccessRule().check(make_chunk("r1", labels=("public",)), nobody, NOW) is RejectReason.ACCESS


def test_principal_of_sorts_and_dedupes() -> None:
    assert Principal.of("p", ["b", "a", "b"]).labels == ("a", "b")


@pytest.mark.parametrize("labels", [("b", "a"), ("a", "a"), ("a", "")])
def test_principal_rejects_unsorted_duplicate_or_empty_labels(labels: tuple[str, ...]) -> None:
    with pytest.raises(ValueError, match="labels"):
        Principal("p", labels)


# --- freshness ----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("published_at", "expected"), [
    (None, None),  # no publication claim
    (NOW - SECOND, None),
    (NOW, None),  # published exactly at retrieved_at: admitted
    (NOW + SECOND, RejectReason.NOT_PUBLISHED),
])
def test_freshness_published_at(published_at: datetime | None, expected: RejectReason | None) -> None:
    assert FreshnessRule().check(make_chunk("r1", published_at=published_at), READER, NOW) is expected


@pytest.mark.parametrize(("expires_at", "expected"), [
    (None, None),  # never expires
    (NOW + SECOND, None),
    (NOW, RejectReason.EXPIRED),  # expires exactly at retrieved_at: expired
    (NOW - SECOND, RejectReason.EXPIRED),
])
def test_freshness_expires_at(expires_at: datetime | None, expected: RejectReason | None) -> None:
    assert FreshnessRule().check(make_chunk("r1", expires_at=expires_at), READER, NOW) is expected


def test_freshness_not_published_wins_over_expired() -> None:
    chunk = make_chunk("r1", published_at=NOW + SECOND, expires_at=NOW - SECOND)
    assert FreshnessRule().check(chunk, READER, NOW) is RejectReason.NOT_PUBLISHED


def test_freshness_compares_instants_across_time_zones() -> None:
    same_instant = NOW.astimezone(timezone(timedelta(hours=2)))
    assert same_instant.hour == 14
    assert FreshnessRule().check(make_chunk("r1", expires_at=NOW), READER, same_instant) is RejectReason.EXPIRED
    assert FreshnessRule().check(make_chunk("r1", published_at=NOW), READER, same_instant) is None


def test_freshness_reads_naive_chunk_times_as_utc() -> None:
    naive_now = NOW.replace(tzinfo=None)
    assert FreshnessRule().check(make_chunk("r1", expires_at=naive_now), READER, NOW) is RejectReason.EXPIRED
    assert FreshnessRule().check(make_chunk("r1", published_at=naive_now), READER, NOW) is None


# --- citation -----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("uri", "anchor", "expected"), [
    ("https://handbook.example/doc", "#section", None),
    (None, "#section", RejectReason.NO_CITATION),
    ("", "#section", RejectReason.NO_CITATION),
    ("   ", "#section", RejectReason.NO_CITATION),
    ("https://handbook.example/doc", None, RejectReason.NO_CITATION),
    ("https://handbook.example/doc", "", RejectReason.NO_CITATION),
    (None, None, RejectReason.NO_CITATION),
])
def test_citation_rule(uri: str | None, anchor: str | None, expected: RejectReason | None) -> None:
    chunk = make_chunk("r1", citation_uri=uri, citation_anchor=anchor)
    assert CitationRule().check(chunk, READER, NOW) is expected
