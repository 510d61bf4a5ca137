"""API keys for the HTTP API and the streamable-HTTP MCP server: created, listed, rotated, revoked, and
checked on every request. A key carries the principal and its access labels: who is asking never comes
from the request body.

A key reads `evx_<key id>_<secret>`. The key id (12 hex characters) is not secret: it finds the row. The
secret is `secrets.token_urlsafe(32)` (256 bits). Only the SHA-256 of the whole key is stored, so the
SQLite file never holds a usable key, and the hashes are compared with `hmac.compare_digest`. A plain
(unsalted, fast) hash is enough because the key is random and long: there is nothing to guess.

Rotation issues a new key under the same name and lets the old one work until `now + grace_s`; revocation
stops every key of a name at once. `authenticate` reads the file each time, so `evidex keys revoke` takes
effect in a running server on its next request.

The rate limiter is a token bucket per key name, kept in a file beside the keys so that every server process
shares it: a rotated key shares its bucket with the key it replaces.
"""

from __future__ import annotations

import builtins
import hashlib
import hmac
import json
import math
import re
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from evidex.admission.gate import Principal
from evidex.errors import ConfigError
from evidex.private_files import private_file
from evidex.timestamps import read_time

KEYS_FILE = "keys.sqlite"
KEY_PREFIX = "evx_"
DEFAULT_RATE_PER_MIN = 60
MAX_RATE_PER_MIN = 100_000
MAX_GRACE_S = 365 * 24 * 3600.0  # how long a rotated key may keep working

Clock = Callable[[], datetime]

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_KEY_ID = re.compile(r"[0-9a-f]{12}")
_DUMMY_HASH = hashlib.sha256(b"evidex: no such key").hexdigest()

# Numbered migrations (PRAGMA user_version holds how many have run), each a list of statements run in one
# transaction. Append; never edit one that shipped.
_MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE api_keys (
            key_id       TEXT PRIMARY KEY,
            name         TEXT NOT NULL,
            key_hash     TEXT NOT NULL,
            principal    TEXT NOT NULL,
            labels       TEXT NOT NULL,
            rate_per_min INTEGER NOT NULL,
            created_at   TEXT NOT NULL,
            expires_at   TEXT,
            revoked_at   TEXT
        )""",
        "CREATE INDEX api_keys_name ON api_keys (name)",
    ),
)


def utc_now() -> datetime:
    return datetime.now(UTC)


def hash_key(plaintext: str) -> str:
    return hashlib.sha256(plaintext.encode("utf-8")).hexdigest()


def _text(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat() if value else None


@dataclass(frozen=True)
class KeyRecord:
    """One stored key, without its hash (the plaintext exists only once, when it is created)."""

    key_id: str
    name: str
    principal: str
    labels: tuple[str, ...]
    rate_per_min: int
    created_at: datetime
    expires_at: datetime | None = None  # set by rotation: the end of the old key's grace period
    revoked_at: datetime | None = None

    def is_valid(self, now: datetime) -> bool:
        if self.revoked_at is not None and self.revoked_at <= now:
            return False
        return self.expires_at is None or now < self.expires_at

    def status(self, now: datetime) -> str:
        if self.revoked_at is not None and self.revoked_at <= now:
            return "revoked"
        if self.expires_at is not None:
            return "active (rotating out)" if now < self.expires_at else "expired"
        return "active"

    def to_principal(self) -> Principal:
        return Principal.of(self.principal, self.labels)

    def to_dict(self, now: datetime | None = None) -> dict[str, Any]:
        data: dict[str, Any] = {
            "key_id": self.key_id, "name": self.name, "principal": self.principal, "labels": list(self.labels),
            "rate_per_min": self.rate_per_min, "created_at": _text(self.created_at),
            "expires_at": _text(self.expires_at), "revoked_at": _text(self.revoked_at),
        }
        if now is not None:
            data["status"] = self.status(now)
        return data


def _record(row: sqlite3.Row) -> KeyRecord:
    created = read_time(row["created_at"])
    assert created is not None
    return KeyRecord(key_id=row["key_id"], name=row["name"], principal=row["principal"],
                     labels=tuple(json.loads(row["labels"])), rate_per_min=int(row["rate_per_min"]),
                     created_at=created, expires_at=read_time(row["expires_at"]),
                     revoked_at=read_time(row["revoked_at"]))


class KeyStore:
    """API keys in a small SQLite file (0600). Thread-safe; several processes may share the file."""

    def __init__(self, path: str | Path, *, clock: Clock = utc_now) -> None:
        self.path = Path(path)
        self._clock = clock
        self._lock = threading.Lock()
        private_file(self.path)
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=10)
        self._db.row_factory = sqlite3.Row
        self._migrate()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken before reading (BEGIN IMMEDIATE): a check and the write it allows
        cannot interleave with another thread's or another process's."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _migrate(self) -> None:
        with self._transaction() as db:
            done = int(db.execute("PRAGMA user_version").fetchone()[0])
            for number, statements in enumerate(_MIGRATIONS[done:], start=done + 1):
                for statement in statements:
                    db.execute(statement)
                db.execute(f"PRAGMA user_version = {number}")

    def now(self) -> datetime:
        return self._clock()

    # ---- management (the `evidex keys` commands) ---------------------------------------------------
    def create(self, name: str, principal: str, labels: Iterable[str],
               rate_per_min: int = DEFAULT_RATE_PER_MIN) -> tuple[str, KeyRecord]:
        """A new key named `name` for `principal` with `labels`: (the plaintext key, shown once; its record)."""
        if not _NAME.fullmatch(name or ""):
            raise ConfigError(f"key name {name!r}: use 1-64 letters, digits, '.', '_' or '-'")
        if not (principal or "").strip():
            raise ConfigError("a key needs a non-empty principal name")
        clean = sorted({x.strip() for x in labels if x.strip()})
        if not 1 <= rate_per_min <= MAX_RATE_PER_MIN:
            raise ConfigError(f"rate_per_min must be between 1 and {MAX_RATE_PER_MIN} (got {rate_per_min})")
        with self._transaction():
            now = self.now()
            if any(r.is_valid(now) for r in self._rows(name)):
                raise ConfigError(f"a valid key named {name!r} exists; rotate or revoke it first")
            return self._insert(name, principal.strip(), clean, rate_per_min, now)

    def list(self) -> builtins.list[KeyRecord]:
        """Every key ever created (revoked and expired ones too), oldest first."""
        with self._lock:
            rows = self._db.execute("SELECT * FROM api_keys ORDER BY created_at, key_id").fetchall()
        return [_record(r) for r in rows]

    def rotate(self, name: str, grace_s: float = 3600.0) -> tuple[str, KeyRecord]:
        """A new key for `name` (same principal, labels and rate); the old keys stay valid for `grace_s`."""
        if not 0 <= grace_s <= MAX_GRACE_S:  # also refuses nan and inf
            raise ConfigError(f"the grace period must be between 0 and {MAX_GRACE_S:g} s (one year); got {grace_s}")
        with self._transaction() as db:
            now = self.now()
            valid = [r for r in self._rows(name) if r.is_valid(now)]
            if not valid:
                raise ConfigError(f"no valid key named {name!r} to rotate")
            newest = max(valid, key=lambda r: r.created_at)
            until = now + timedelta(seconds=grace_s)
            for r in valid:
                ends = until if r.expires_at is None else min(r.expires_at, until)
                db.execute("UPDATE api_keys SET expires_at = ? WHERE key_id = ?", (_text(ends), r.key_id))
            return self._insert(name, newest.principal, list(newest.labels), newest.rate_per_min, now)

    def revoke(self, name: str) -> int:
        """Revoke every key of `name` now; how many keys that was (0: none was valid)."""
        with self._transaction() as db:
            now = self.now()
            rows = self._rows(name)
            if not rows:
                raise ConfigError(f"no key named {name!r}")
            ids = [r.key_id for r in rows if r.is_valid(now)]
            db.executemany("UPDATE api_keys SET revoked_at = ? WHERE key_id = ?", [(_text(now), i) for i in ids])
            return len(ids)

    # ---- every request ---------------------------------------------------------------------------
    def authenticate(self, plaintext: str | None) -> KeyRecord | None:
        """The valid key `plaintext` is, or None (unknown, malformed, revoked or expired)."""
        key_id = _key_id(plaintext or "")
        with self._lock:
            row = self._db.execute("SELECT * FROM api_keys WHERE key_id = ?", (key_id,)).fetchone() \
                if key_id else None
        stored = row["key_hash"] if row is not None else _DUMMY_HASH
        matches = hmac.compare_digest(hash_key(plaintext or ""), stored)
        if row is None or not matches:
            return None
        record = _record(row)
        return record if record.is_valid(self.now()) else None

    # ---- internals -------------------------------------------------------------------------------
    def _rows(self, name: str) -> builtins.list[KeyRecord]:
        rows = self._db.execute("SELECT * FROM api_keys WHERE name = ? ORDER BY created_at", (name,)).fetchall()
        return [_record(r) for r in rows]

    def _insert(self, name: str, principal: str, labels: builtins.list[str], rate_per_min: int,
                now: datetime) -> tuple[str, KeyRecord]:
        Principal.of(principal, labels)  # the same validation the gate applies
        key_id = secrets.token_hex(6)
        plaintext = f"{KEY_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
        record = KeyRecord(key_id=key_id, name=name, principal=principal, labels=tuple(labels),
                           rate_per_min=rate_per_min, created_at=now)
        sql = ("INSERT INTO api_keys (key_id, name, key_hash, principal, labels, rate_per_min, created_at) "
               "VALUES (?, ?, ?, ?, ?, ?, ?)")
        self._db.execute(sql, (key_id, name, hash_key(plaintext), principal, json.dumps(labels), rate_per_min,
                               _text(now)))
        return plaintext, record

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> KeyStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _key_id(plaintext: str) -> str | None:
    if not plaintext.startswith(KEY_PREFIX):
        return None
    key_id, sep, secret = plaintext[len(KEY_PREFIX):].partition("_")
    return key_id if sep and secret and _KEY_ID.fullmatch(key_id) else None


# ---- rate limiting -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RateDecision:
    allowed: bool
    retry_after_s: float = 0.0  # when not allowed: seconds until one request fits
    remaining: int = 0

    @property
    def retry_after_header(self) -> str:
        """Retry-After takes whole seconds; round up so a client that obeys it is never refused again."""
        return str(max(1, math.ceil(self.retry_after_s)))


class RateLimiter:
    """A token bucket per key name: `rate_per_min` requests in a burst, refilled continuously at
    `rate_per_min / 60` per second.

    The buckets live in a SQLite file (a server's is `rates_path(keys file)`), so every process serving one key
    file draws on one bucket per key: the workers of `serve --workers N`, or `serve` beside
    `mcp --transport http`, had each given a key its whole rate. A restart does not refill them either. Each
    request is one short write transaction (WAL, not synced: a crash can only forget recent use, that is,
    refill). `clock` is wall-clock seconds, which every process shares; a clock stepped back refills
    nothing. Without a path the buckets are in memory, for one process. Thread-safe."""

    PRUNE_EVERY = 1000  # requests between deletions of buckets idle for a minute (full again: forgetting is exact)

    def __init__(self, path: str | Path = ":memory:", clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        if str(path) != ":memory:":
            private_file(Path(path))
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=10)
        self._db.execute("PRAGMA journal_mode = WAL")
        self._db.execute("PRAGMA synchronous = NORMAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS rate_buckets "
                         "(name TEXT PRIMARY KEY, tokens REAL NOT NULL, at REAL NOT NULL)")
        self._requests = 0

    def acquire(self, name: str, rate_per_min: int) -> RateDecision:
        capacity = float(max(1, rate_per_min))
        per_s = capacity / 60.0
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                now = self._clock()
                row = self._db.execute("SELECT tokens, at FROM rate_buckets WHERE name = ?", (name,)).fetchone()
                tokens, at = (float(row[0]), float(row[1])) if row is not None else (capacity, now)
                tokens = min(capacity, tokens + max(0.0, now - at) * per_s)
                allowed = tokens >= 1.0
                if allowed:
                    tokens -= 1.0
                self._db.execute("INSERT INTO rate_buckets (name, tokens, at) VALUES (?, ?, ?) ON CONFLICT (name) "
                                 "DO UPDATE SET tokens = excluded.tokens, at = excluded.at", (name, tokens, now))
                self._requests += 1
                if self._requests % self.PRUNE_EVERY == 0:
                    self._db.execute("DELETE FROM rate_buckets WHERE at < ?", (now - 60.0,))
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
        if allowed:
            return RateDecision(True, 0.0, int(tokens))
        return RateDecision(False, (1.0 - tokens) / per_s, 0)

    def acquire_request(self, name: str, rate_per_min: int, requests_per_call: float) -> RateDecision:
        """Count one request of any kind (an MCP initialize or tools/list, a stream, a health check) in `name`'s
        second bucket, which holds `requests_per_call` requests per search the key's rate allows (`[server]
        requests_per_call`): listing tools in a loop is refused like searching in one."""
        return self.acquire(f"{name}\x00requests", math.ceil(max(1, rate_per_min) * requests_per_call))

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> RateLimiter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def rates_path(keys_path: Path) -> Path:
    """Where the servers of the key file `keys_path` keep their rate buckets (beside it: keys.rates.sqlite)."""
    return keys_path.with_name(f"{keys_path.stem}.rates.sqlite")
