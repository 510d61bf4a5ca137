"""Human verification records, kept apart from the gate, and the evidence status they lead to.

Statuses stay separate and nothing infers a stronger one:

    candidate-found     search found the record (it did not pass the gate, or was not evaluated)
    citation-accepted   the record passed the admission gate
    human-verified      it passed the gate AND a person confirmed a claim against its current source version

A verification is bound to the `source_version` it was made against. When the source changes, earlier
verifications stop counting (`for_record` drops them; `history` shows them with `is_current=False`).
A record with no source version has no current verification: a claim checked against an unknown version
cannot be shown to still hold.

The log is its own small SQLite file; its schema changes are numbered migrations (`PRAGMA user_version`).
"""

from __future__ import annotations

import enum
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from evidex.private_files import private_file


class EvidenceStatus(enum.Enum):
    CANDIDATE_FOUND = "candidate-found"
    CITATION_ACCEPTED = "citation-accepted"
    HUMAN_VERIFIED = "human-verified"


@dataclass(frozen=True)
class Verification:
    record_id: str
    source_version: str
    claim: str
    verified_by: str
    verified_at: datetime
    is_current: bool


def status_of(admitted: bool, verifications: Sequence[Verification]) -> EvidenceStatus:
    """human-verified only if the record was admitted and a current verification exists."""
    if not admitted:
        return EvidenceStatus.CANDIDATE_FOUND
    if any(v.is_current for v in verifications):
        return EvidenceStatus.HUMAN_VERIFIED
    return EvidenceStatus.CITATION_ACCEPTED


_MIGRATIONS: tuple[str, ...] = (
    # 1: the verifications table
    """
    CREATE TABLE verifications (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        record_id TEXT NOT NULL,
        source_version TEXT NOT NULL,
        claim TEXT NOT NULL,
        verified_by TEXT NOT NULL,
        verified_at TEXT NOT NULL
    );
    CREATE INDEX verifications_record ON verifications (record_id);
    """,
)


class VerificationLog:
    """Who verified which claim of which record, against which source version. One SQLite file."""

    def __init__(self, path: Path) -> None:
        self.path = private_file(Path(path))
        with self._connect() as conn:
            _migrate(conn)

    def record(self, record_id: str, source_version: str, claim: str, by: str, at: datetime) -> Verification:
        for name, value in (("record_id", record_id), ("source_version", source_version),
                            ("claim", claim), ("by", by)):
            if not value or not value.strip():
                raise ValueError(f"a verification needs a non-empty {name}")
        if at.utcoffset() is None:
            raise ValueError("verification time `at` must be timezone-aware")
        at = at.astimezone(UTC)
        with self._connect() as conn:
            conn.execute(
                "INSERT INTO verifications (record_id, source_version, claim, verified_by, verified_at) "
                "VALUES (?, ?, ?, ?, ?)", (record_id, source_version, claim, by, at.isoformat(timespec="microseconds")))
        return Verification(record_id, source_version, claim, by, at, is_current=True)

    def for_record(self, record_id: str, current_source_version: str | None, *,
                   as_of: datetime | None = None) -> list[Verification]:
        """The verifications that still count: made against the record's current source version.

        `as_of` (pass the request's `retrieved_at`) ignores verifications recorded after that instant, so
        replaying a request gives the same statuses.
        """
        return self.for_records([(record_id, current_source_version)], as_of=as_of)[record_id]

    def for_records(self, records: Sequence[tuple[str, str | None]], *,
                    as_of: datetime | None = None) -> dict[str, list[Verification]]:
        """`for_record` of each (record id, current source version), read in one query: a result's records are
        looked up together, not with a connection each."""
        return {record_id: [v for v in found if v.is_current]
                for record_id, found in self._histories(records, as_of).items()}

    def history(self, record_id: str, current_source_version: str | None, *,
                as_of: datetime | None = None) -> list[Verification]:
        """Every verification of the record, oldest first, with `is_current` against the given version."""
        return self._histories([(record_id, current_source_version)], as_of)[record_id]

    def _histories(self, records: Sequence[tuple[str, str | None]],
                   as_of: datetime | None) -> dict[str, list[Verification]]:
        """`history` of each (record id, current source version); a record named twice is read against its
        last version."""
        if as_of is not None and as_of.utcoffset() is None:
            raise ValueError("`as_of` must be timezone-aware")
        current = dict(records)
        ids = list(current)
        rows: list[tuple[str, str, str, str, str]] = []
        if ids:  # nothing to look up: the file is not opened
            with self._connect() as conn:
                for i in range(0, len(ids), 500):
                    part = ids[i:i + 500]
                    rows += conn.execute(
                        "SELECT record_id, source_version, claim, verified_by, verified_at FROM verifications "
                        f"WHERE record_id IN ({','.join('?' * len(part))}) ORDER BY verified_at, id", part
                    ).fetchall()
        out: dict[str, list[Verification]] = {record_id: [] for record_id in ids}
        for rid, version, claim, by, at in rows:
            made = Verification(rid, version, claim, by, datetime.fromisoformat(at),
                                is_current=current[rid] is not None and version == current[rid])
            if as_of is None or made.verified_at <= as_of:
                out[rid].append(made)
        return out

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """One connection per call, committed on success, always closed (the file is small)."""
        with closing(sqlite3.connect(self.path)) as conn, conn:
            yield conn


def _migrate(conn: sqlite3.Connection) -> None:
    """Apply the migrations this file lacks, all in one transaction (concurrent openers wait)."""
    conn.execute("BEGIN IMMEDIATE")
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    for number, script in enumerate(_MIGRATIONS[version:], start=version + 1):
        for statement in (s.strip() for s in script.split(";")):
            if statement:
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {number}")
