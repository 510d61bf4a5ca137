"""The operator audit log: ids, reasons and a query hash per decision; never record or query text."""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path

import pytest
from admission_support import NOW, candidate, make_chunk

from evidex.admission import AdmissionGate, AuditedRejection, AuditLog, Principal, RejectReason
from evidex.admission.gate import GateDecision
from evidex.errors import StoreError

READER = Principal.of("reader", ["public"])


def _decision() -> GateDecision:
    chunks = [make_chunk("ok", text="OK-TEXT-1f3c", title="OK-TITLE-1f3c"),
              make_chunk("secret", labels=("secret",), text="SECRET-TEXT-9a7e", title="SECRET-TITLE-9a7e",
                         heading="SECRET-HEADING-9a7e"),
              make_chunk("old", expires_at=NOW, text="OLD-TEXT-55d0", title="OLD-TITLE-55d0")]
    return AdmissionGate().admit([candidate(c) for c in chunks], READER, NOW)


def test_one_line_per_decision_with_ids_and_reasons(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit" / "gate.jsonl")
    entry = log.append(_decision(), request_id="req-1", principal=READER, retrieved_at=NOW,
                       query="where are the secrets")
    lines = (tmp_path / "audit" / "gate.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1
    assert json.loads(lines[0]) == {
        "request_id": "req-1", "principal": "reader", "principal_labels": ["public"],
        "retrieved_at": "2026-03-01T12:00:00Z",
        "query_sha256": hashlib.sha256(b"where are the secrets").hexdigest(),
        "admitted": ["ok"],
        "rejected": {"access-label-not-granted": {"doc-secret": ["secret"]},
                     "expired-at-retrieval-time": {"doc-old": ["old"]}},
    }
    assert log.read() == [entry]
    assert entry.rejected[0] == AuditedRejection("secret", "doc-secret", RejectReason.ACCESS)


def test_no_text_title_heading_or_query_in_the_log(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "gate.jsonl", fsync=True)
    log.append(_decision(), request_id="req-1", principal=READER, retrieved_at=NOW, query="QUERY-TEXT-77b1")
    raw = (tmp_path / "gate.jsonl").read_text(encoding="utf-8")
    for marker in ("TEXT", "TITLE", "HEADING", "1f3c", "9a7e", "55d0", "77b1"):
        assert marker not in raw


def test_appends_from_threads_stay_whole_lines(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "gate.jsonl")
    decision = _decision()

    def write(worker: int) -> None:
        for i in range(25):
            log.append(decision, request_id=f"w{worker}-{i}", principal=READER, retrieved_at=NOW, query="q")

    threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(e.request_id for e in log.read()) == sorted(f"w{w}-{i}" for w in range(4) for i in range(25))


def test_torn_line_is_closed_off_and_reported(tmp_path: Path) -> None:
    path = tmp_path / "gate.jsonl"
    log = AuditLog(path)
    log.append(_decision(), request_id="req-1", principal=READER, retrieved_at=NOW, query="q")
    with open(path, "a", encoding="utf-8") as f:
        f.write('{"request_id": "req-2", "princ')  # a crash mid-line
    log.append(_decision(), request_id="req-3", principal=READER, retrieved_at=NOW, query="q")
    lines = path.read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[2])["request_id"] == "req-3"
    with pytest.raises(StoreError, match=r"gate\.jsonl:2: unreadable audit entry"):
        log.read()


def test_missing_log_reads_empty_and_naive_time_is_refused(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "gate.jsonl")
    assert log.read() == []
    with pytest.raises(ValueError, match="timezone-aware"):
        log.append(_decision(), request_id="r", principal=READER, retrieved_at=NOW.replace(tzinfo=None), query="q")
    with pytest.raises(ValueError, match="request_id"):
        log.append(_decision(), request_id="", principal=READER, retrieved_at=NOW, query="q")
