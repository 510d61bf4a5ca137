"""The operator audit log: one JSON line per admission decision.

    {"request_id", "principal", "principal_labels", "retrieved_at", "query_sha256",
     "admitted": [record ids], "rejected": {reason: {doc_id: [record ids]}}}

Rejections are grouped by reason and document, so a line names each reason and page once however many of its
chunks were turned away (lines written before, with a list of {"record_id", "doc_id", "reason"}, still read).

Only ids, reasons and a SHA-256 of the query are written: never the query text, and never the text,
title or heading of any record (admitted or rejected). The hash lets an operator match a request they
already know; it is not secrecy against someone who can guess a short query.

Appends hold an in-process lock and, on POSIX, an exclusive `flock` on the file, and write each line in
one call, so concurrent writers do not interleave. A line torn by a crash is closed off before the next
append; `read` reports such a line as a `StoreError` naming the file and line, never skips it silently.

The log rotates by size: an append that would take the file past `max_bytes` first renames it `audit.jsonl.1`
(the one before to `.2`, ...), keeping `keep` old files and deleting the oldest; `max_bytes = 0` never rotates.
Every process appending to one log rotates it under the same lock, so none writes to a file renamed away.
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
            "rejected": _grouped(self.rejected),
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
            rejected=_rejections(data["rejected"]),
        )


def _grouped(rejected: tuple[AuditedRejection, ...]) -> dict[str, dict[str, list[str]]]:
    out: dict[str, dict[str, list[str]]] = {}
    for r in rejected:
        out.setdefault(r.reason.value, {}).setdefault(r.doc_id, []).append(r.record_id)
    return out


def _rejections(data: Any) -> tuple[AuditedRejection, ...]:
    """A line's rejections, grouped (`{reason: {doc_id: [record ids]}}`) or as the list older lines hold."""
    if isinstance(data, list):
        return tuple(AuditedRejection(str(r["record_id"]), str(r["doc_id"]), RejectReason(r["reason"])) for r in data)
    return tuple(AuditedRejection(str(rid), str(doc_id), RejectReason(reason))
                 for reason, docs in data.items() for doc_id, ids in docs.items() for rid in ids)


def _in_line_order(rejected: list[AuditedRejection]) -> tuple[AuditedRejection, ...]:
    """Rejections in the order a line lists them (by reason, then document; a document's records in turn)."""
    return tuple(sorted(rejected, key=lambda r: (r.reason.value, r.doc_id)))  # stable: records keep their turn


def query_sha256(query: str) -> str:
    return hashlib.sha256(query.encode("utf-8")).hexdigest()


def format_retrieved_at(retrieved_at: datetime) -> str:
    """UTC with microseconds only when present, trailing Z."""
    if retrieved_at.utcoffset() is None:
        raise ValueError("retrieved_at must be timezone-aware")
    return retrieved_at.astimezone(UTC).isoformat().replace("+00:00", "Z")


class AuditLog:
    """Append-only JSON-lines file of admission decisions, for operators, rotated past `max_bytes` (0: never)
    with `keep` older files beside it: AuditLog(index / "audit.jsonl", max_bytes=64_000_000, keep=5)."""

    def __init__(self, path: Path, *, fsync: bool = False, max_bytes: int = 0, keep: int = 5) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self.max_bytes = max_bytes
        self.keep = keep
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
            rejected=_in_line_order([AuditedRejection(r.record_id, r.doc_id, r.reason) for r in decision.rejected]),
        )
        line = json.dumps(entry.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"
        with self._lock:
            f = self._open_locked()
            try:
                data = line.encode("utf-8")
                size = f.seek(0, os.SEEK_END)
                if self.max_bytes and size and size + len(data) > self.max_bytes:
                    self._rotate()
                    _unlock_file(f)
                    f.close()
                    f = self._open_locked()
                if _ends_torn(f):
                    data = b"\n" + data
                f.write(data)
                f.flush()
                if self.fsync:
                    os.fsync(f.fileno())
            finally:
                _unlock_file(f)
                f.close()
        return entry

    def _open_locked(self) -> IO[bytes]:
        """The log file opened for appending and locked, the file now at `path` (another process may have
        rotated the one opened before its lock was taken)."""
        while True:
            f = open(private_file(self.path), "a+b")  # noqa: SIM115 (closed by append)
            _lock_file(f)
            try:
                if os.fstat(f.fileno()).st_ino == os.stat(self.path).st_ino:
                    return f
            except FileNotFoundError:
                pass
            _unlock_file(f)
            f.close()

    def _rotate(self) -> None:
        """audit.jsonl -> .1 -> .2 ... -> .keep (the oldest deleted); called holding the lock."""
        rotated = [self.path.with_name(f"{self.path.name}.{n}") for n in range(1, self.keep + 1)]
        if not rotated:
            self.path.unlink()
            return
        rotated[-1].unlink(missing_ok=True)
        for older, newer in zip(reversed(rotated[1:]), reversed(rotated[:-1]), strict=True):
            if newer.exists():
                newer.rename(older)
        self.path.rename(rotated[0])

    def rotated(self) -> list[Path]:
        """The older files beside the log, newest first."""
        found = (self.path.with_name(f"{self.path.name}.{n}") for n in range(1, self.keep + 1))
        return [p for p in found if p.exists()]

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
