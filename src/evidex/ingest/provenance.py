"""Provenance fields from front matter, JSONL records and metadata overlays, validated."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from datetime import UTC, date, datetime
from typing import Any
from urllib.parse import urlsplit

from evidex.errors import IngestError
from evidex.timestamps import format_time
from evidex.types import Provenance

PROVENANCE_KEYS = frozenset(f.name for f in dataclasses.fields(Provenance))
_TIME_KEYS = {"published_at", "expires_at"}
_STR_KEYS = PROVENANCE_KEYS - _TIME_KEYS - {"access_labels"}
_SCHEME = re.compile(r"[a-z][a-z0-9+.-]*")


def parse_time(value: Any, key: str, location: str) -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        try:
            return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
        except OverflowError:  # 0001-01-01T00:00:00+05:00 has no UTC equivalent
            raise IngestError(f"{key}: {value.isoformat()} is out of range in UTC", location=location) from None
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise IngestError(f"{key}: {value!r} is not an ISO 8601 timestamp", location=location) from None
        return parse_time(parsed, key, location)
    raise IngestError(f"{key}: expected an ISO 8601 timestamp, got {type(value).__name__}", location=location)


def provenance_fields(fields: Mapping[str, Any], location: str) -> dict[str, Any]:
    """The provenance subset of `fields`, type-checked. Other keys (title, weight, ...) are ignored."""
    out: dict[str, Any] = {}
    for key, value in fields.items():
        if key not in PROVENANCE_KEYS:
            continue
        if key in _TIME_KEYS:
            out[key] = parse_time(value, key, location)
        elif key == "access_labels":
            labels = [value] if isinstance(value, str) else value
            if labels is None:
                labels = []
            if not isinstance(labels, list) or not all(isinstance(x, str) and x for x in labels):
                raise IngestError("access_labels: expected a list of non-empty strings", location=location)
            out[key] = tuple(sorted(set(labels)))
        elif key in _STR_KEYS:
            if value is not None and not isinstance(value, (str, int, float)):
                raise IngestError(f"{key}: expected a string, got {type(value).__name__}", location=location)
            out[key] = None if value is None else str(value)
    return out


def misspelled_keys(fields: Mapping[str, Any]) -> list[str]:
    """Warnings for keys that are no provenance field but look like a misspelling of one (`access_label`,
    `citationURI`, `superceded_by`): the field they meant is otherwise missing without a word. Keys far from
    every field (title, weight, reviewers, Hugo's many) are ordinary metadata."""
    out = []
    for key in fields:
        if not isinstance(key, str) or key in PROVENANCE_KEYS:
            continue
        name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", key).lower().replace("-", "_")  # accessLabels, access-labels
        distance, field = min((_edit_distance(name, f), f) for f in PROVENANCE_KEYS)
        if distance <= (1 if len(field) <= 5 else 2):  # "owner" is short: "order" or "other" are not typos of it
            out.append(f"{key}: not a provenance field (did you mean {field}?)")
    return out


def _edit_distance(a: str, b: str) -> int:
    """Levenshtein distance (insertions, deletions, substitutions)."""
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        diagonal, row[0] = row[0], i
        for j, cb in enumerate(b, start=1):
            diagonal, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, diagonal + (ca != cb))
    return row[-1]


def doubtful_values(p: Provenance, citation_schemes: frozenset[str] | None = None) -> list[str]:
    """What looks mistaken in merged provenance, though it loads: a validity that holds at no instant, a
    citation URI that is not absolute (the gate would cite it as it is), one whose scheme is not among
    `citation_schemes` (`[gate] citation_schemes`: the gate counts it as no citation)."""
    out = []
    scheme = (p.citation_uri or "").partition(":")[0].strip().lower() if ":" in (p.citation_uri or "") else ""
    if citation_schemes is not None and scheme and scheme not in citation_schemes and is_absolute_uri(
            p.citation_uri or ""):
        out.append(f"citation_uri scheme {scheme!r} is not in [gate] citation_schemes "
                   f"({', '.join(sorted(citation_schemes))}): the gate counts it as no citation")
    if p.published_at is not None and p.expires_at is not None and p.expires_at <= p.published_at:
        out.append(f"expires_at {format_time(p.expires_at)} is not after published_at "
                   f"{format_time(p.published_at)}: the gate admits it at no instant")
    if p.citation_uri is not None and not is_absolute_uri(p.citation_uri):
        out.append(f"citation_uri {p.citation_uri!r} is not an absolute URI (scheme:..., e.g. https://host/path)")
    return out


def is_absolute_uri(uri: str) -> bool:
    try:
        parts = urlsplit(uri)
    except ValueError:  # "http://[::1" (an unclosed IPv6 host)
        return False
    return (bool(_SCHEME.fullmatch(parts.scheme)) and not any(c.isspace() for c in uri)
            and len(uri) > len(parts.scheme) + 1 and (bool(parts.netloc) or parts.scheme not in ("http", "https")))


def merge(base: Provenance, fields: Mapping[str, Any]) -> Provenance:
    return dataclasses.replace(base, **fields)
