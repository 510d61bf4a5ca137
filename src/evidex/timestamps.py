"""The one form in which evidex writes a timestamp, and reading it back.

Provenance times, batch and dead-letter times, key times and result times are all written as UTC to the
second with a trailing Z, which sorts as text; every store, the ingest run and the interfaces use these two
functions. This module imports nothing from evidex (like `evidex.types`), so stores can use it.

    >>> format_time(read_time("2024-06-01T14:00:00+02:00"))
    '2024-06-01T12:00:00Z'
"""

from __future__ import annotations

from datetime import UTC, datetime


def format_time(value: datetime | None) -> str | None:
    """The one timestamp format evidex writes: UTC, seconds, trailing Z (sorts lexicographically)."""
    if value is None:
        return None
    utc = value.astimezone(UTC)  # the year is padded by hand: strftime writes year 999 as '999'
    return f"{utc.year:04d}-{utc:%m-%dT%H:%M:%S}Z"


def read_time(value: str | None) -> datetime | None:
    """A stored timestamp back: `format_time`'s form or any ISO 8601 text Python reads; None for none."""
    return datetime.fromisoformat(value) if value else None
