"""Human verification records: bound to a source version, never inferred."""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest
from admission_support import NOW

from evidex.admission import EvidenceStatus, Verification, VerificationLog, status_of


def test_record_then_human_verified(tmp_path: Path) -> None:
    log = VerificationLog(tmp_path / "v.sqlite")
    assert status_of(True, log.for_record("r1", "v1")) is EvidenceStatus.CITATION_ACCEPTED
    made = log.record("r1", "v1", "backups run nightly", by="alice", at=NOW)
    assert made == Verification("r1", "v1", "backups run nightly", "alice", NOW, is_current=True)
    assert log.for_record("r1", "v1") == [made]
    assert status_of(True, log.for_record("r1", "v1")) is EvidenceStatus.HUMAN_VERIFIED


def test_new_source_version_invalidates(tmp_path: Path) -> None:
    log = VerificationLog(tmp_path / "v.sqlite")
    log.record("r1", "v1", "backups run nightly", by="alice", at=NOW)
    assert log.for_record("r1", "v2") == []
    assert status_of(True, log.for_record("r1", "v2")) is EvidenceStatus.CITATION_ACCEPTED
    later = log.record("r1", "v2", "backups run hourly", by="bob", at=NOW + timedelta(days=1))
    history = log.history("r1", "v2")
    assert [(v.source_version, v.verified_by, v.is_current) for v in history] == [
        ("v1", "alice", False), ("v2", "bob", True)]
    assert log.for_record("r1", "v2") == [later]


def test_unknown_source_version_has_no_current_verification(tmp_path: Path) -> None:
    log = VerificationLog(tmp_path / "v.sqlite")
    log.record("r1", "v1", "claim", by="alice", at=NOW)
    assert log.for_record("r1", None) == []
    assert [v.is_current for v in log.history("r1", None)] == [False]


def test_verifications_are_per_record_and_persist(tmp_path: Path) -> None:
    VerificationLog(tmp_path / "v.sqlite").record("r1", "v1", "claim", by="alice", at=NOW)
    reopened = VerificationLog(tmp_path / "v.sqlite")
    assert len(reopened.for_record("r1", "v1")) == 1
    assert reopened.for_record("r2", "v1") == []
    with sqlite3.connect(tmp_path / "v.sqlite") as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (1,)
    conn.close()


def test_status_is_never_inferred() -> None:
    stale = Verification("r1", "v1", "claim", "alice", NOW, is_current=False)
    assert status_of(True, []) is EvidenceStatus.CITATION_ACCEPTED
    assert status_of(True, [stale]) is EvidenceStatus.CITATION_ACCEPTED
    current = Verification("r1", "v1", "claim", "alice", NOW, is_current=True)
    assert status_of(False, [current]) is EvidenceStatus.CANDIDATE_FOUND


@pytest.mark.parametrize(("args", "message"), [
    (("", "v1", "claim", "alice"), "record_id"),
    (("r1", "", "claim", "alice"), "source_version"),
    (("r1", "v1", " ", "alice"), "claim"),
    (("r1", "v1", "claim", ""), "by"),
])
def test_record_requires_every_field(tmp_path: Path, args: tuple[str, str, str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        VerificationLog(tmp_path / "v.sqlite").record(*args, at=NOW)


def test_record_requires_aware_time(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        VerificationLog(tmp_path / "v.sqlite").record("r1", "v1", "c", by="a", at=NOW.replace(tzinfo=None))


def test_as_of_ignores_later_verifications(tmp_path: Path) -> None:
    log = VerificationLog(tmp_path / "v.sqlite")
    log.record("r1", "v1", "claim", by="alice", at=NOW + timedelta(seconds=1))
    assert log.for_record("r1", "v1", as_of=NOW) == []
    assert len(log.for_record("r1", "v1", as_of=NOW + timedelta(seconds=1))) == 1
    assert len(log.for_record("r1", "v1")) == 1
    with pytest.raises(ValueError, match="timezone-aware"):
        log.history("r1", "v1", as_of=NOW.replace(tzinfo=None))


def test_records_looked_up_together_read_as_one_at_a_time(tmp_path: Path) -> None:
    """A result's records are looked up in one query (`for_records`): each gets what `for_record` gives it
    alone, in the same order, with the same version and `as_of` rules, from one connection."""
    log = VerificationLog(tmp_path / "v.sqlite")
    log.record("r1", "v1", "first", by="alice", at=NOW)
    log.record("r2", "v1", "other record", by="bob", at=NOW)
    log.record("r1", "v2", "after the edit", by="carol", at=NOW + timedelta(days=1))
    log.record("r1", "v2", "checked again", by="dave", at=NOW + timedelta(days=1))
    log.record("r3", "v1", "made later", by="erin", at=NOW + timedelta(days=3))
    records = [("r1", "v2"), ("r2", "v1"), ("r3", "v1"), ("r4", "v1"), ("r5", None)]
    for as_of in (None, NOW, NOW + timedelta(days=2)):
        together = log.for_records(records, as_of=as_of)
        assert together == {rid: log.for_record(rid, version, as_of=as_of) for rid, version in records}
    assert [v.claim for v in log.for_records(records)["r1"]] == ["after the edit", "checked again"]
    connects: list[Path] = []
    opened = sqlite3.connect

    def counting(path: Path) -> sqlite3.Connection:
        connects.append(path)
        return opened(path)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sqlite3, "connect", counting)
        log.for_records(records)
        assert len(connects) == 1
        assert log.for_records([]) == {} and len(connects) == 1
