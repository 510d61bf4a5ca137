"""The operator audit log: one JSON line per admission decision.

    {"request_id", "principal", "principal_labels", "retrieved_at", "query_sha256",
     "admitted": [record ids], "rejected": [{"record_id", "doc_id", "reason"}]}

Only ids, reasons and a SHA-256 of the query are written: never the query text, and never the text,
title or heading of any record (admitted or rejected). The hash lets an operator match a request they
already know; it is not secrecy against someone who can guess a short query.

Appends hold an in-process lock and, on POSIX, an exclusive `flock` on the file, and write each line in
one call, so concurrent writers do not interleave. A line torn by a crash is closed off before the next
append; `read` reports such a line as a `StoreError` naming the file and line, never skips it silently.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from evidex.admission.gate import GateDecision, Principal, RejectReason
from evidex.errors import StoreError
from evidex.private_files import private_file

if sys.platform != "win32":
    import fcntl


@dataclass(frozen=True)
class AuditedRejection:
    record_id: str
    doc_id: str
    reason: RejectReason


@dataclass(frozen=True)
class AuditEntry:
    request_id: str
    principal: str
    principal_labels: tuple[str, ...]
    retrieved_at: str  # ISO 8601, UTC, trailing Z
    query_sha256: str
    admitted: tuple[str, ...]
    rejected: tuple[AuditedRejection, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "request_id": self.request_id,
            "principal": self.principal,
            "principal_labels": list(self.principal_labels),
            "retrieved_at": self.retrieved_at,
            "query_sha256": self.query_sha256,
            "admitted": list(self.admitted),
            "rejected": [{"record_id": r.record_id, "doc_id": r.doc_id, "reason": r.reason.value}
                         for r in self.rejected],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AuditEntry:
        return cls(
            request_id=str(data["request_id"]),
            principal=str(data["principal"]),
            principal_labels=tuple(str(x) for x in data["principal_labels"]),
            retrieved_at=str(data["retrieved_at"]),
            query_sha256=str(data["query_sha256"]),
            admitted=tuple(str(x) for x in data["admitted"]),
            rejected=tuple(AuditedRejection(str(r["record_id"]), str(r["doc_id"]), RejectReason(r["reason"]))
                           for r in data["rejected"]),
        )


def query_sha256(query: str) -> str:
    return hashlib.sha256(query.encode("utf-8")).hexdigest()


def format_retrieved_at(retrieved_at: datetime) -> str:
    """UTC with microseconds only when present, trailing Z."""
    if retrieved_at.utcoffset() is None:
        raise ValueError("retrieved_at must be timezone-aware")
    return retrieved_at.astimezone(UTC).isoformat().replace("+00:00", "Z")


class AuditLog:
    """Append-only JSON-lines file of admission decisions, for operators."""

    def __init__(self, path: Path, *, fsync: bool = False) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self._lock = threading.Lock()

    def append(self, decision: GateDecision, *, request_id: str, principal: Principal,
               retrieved_at: datetime, query: str) -> AuditEntry:
        if not request_id:
            raise ValueError("an audit entry needs a request_id")
        entry = AuditEntry(
            request_id=request_id,
            principal=principal.name,
            principal_labels=principal.labels,
            retrieved_at=format_retrieved_at(retrieved_at),
            query_sha256=query_sha256(query),
            admitted=tuple(c.chunk.record_id for c in decision.admitted),
            rejected=tuple(AuditedRejection(r.record_id, r.doc_id, r.reason) for r in decision.rejected),
        )
        line = json.dumps(entry.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"
        private_file(self.path)
        with self._lock, open(self.path, "a+b") as f:
            _lock_file(f)
            try:
                data = line.encode("utf-8")
                if _ends_torn(f):
                    data = b"\n" + data
                f.write(data)
                f.flush()
                if self.fsync:
                    os.fsync(f.fileno())
            finally:
                _unlock_file(f)
        return entry

    def read(self) -> list[AuditEntry]:
        """Every entry, oldest first. A missing file is an empty log."""
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []
        entries: list[AuditEntry] = []
        for n, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                entries.append(AuditEntry.from_dict(json.loads(line)))
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                raise StoreError(f"{self.path}:{n}: unreadable audit entry: {exc}") from None
        return entries


def _ends_torn(f: IO[bytes]) -> bool:
    """True when the file is non-empty and its last byte is not a newline (a crash cut a line short)."""
    size = f.seek(0, os.SEEK_END)
    if size == 0:
        return False
    f.seek(size - 1)
    return f.read(1) != b"\n"


def _lock_file(f: IO[bytes]) -> None:
    if sys.platform != "win32":
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)


def _unlock_file(f: IO[bytes]) -> None:
    if sys.platform != "win32":
        fcntl.flock(f.fileno(), fcntl.LOCK_UN)
