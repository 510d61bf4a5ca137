"""API keys: stored hashed, created / rotated / revoked on a clock the test moves, and the rate limiter."""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from pathlib import Path

import pytest
from interfaces_support import TickClock, WallClock

from evidex.admission.gate import Principal
from evidex.errors import ConfigError
from evidex.interfaces import keys as keys_module
from evidex.interfaces.keys import KeyStore, RateLimiter, rates_path


def test_create_then_authenticate(keys: KeyStore) -> None:
    plaintext, record = keys.create("agent-a", "alice", ["security-team", "engineering-read", " "], 30)
    assert plaintext.startswith("evx_") and len(plaintext) > 50
    assert (record.name, record.principal, record.labels, record.rate_per_min) == (
        "agent-a", "alice", ("engineering-read", "security-team"), 30)
    found = keys.authenticate(plaintext)
    assert found == record
    assert found.to_principal() == Principal.of("alice", ["engineering-read", "security-team"])
    assert keys.authenticate(plaintext + "x") is None
    assert keys.authenticate(plaintext[:-1] + ("A" if plaintext[-1] != "A" else "B")) is None
    for junk in ("", "evx_", "evx_zzzzzzzzzzzz_secret", "Bearer " + plaintext, plaintext.replace("evx_", "evy_")):
        assert keys.authenticate(junk) is None


def test_keys_are_stored_only_as_hashes(tmp_path: Path) -> None:
    path = tmp_path / "keys.sqlite"
    with KeyStore(path) as store:
        plaintexts = [store.create(f"k{i}", "p", ["l"])[0] for i in range(3)]
        plaintexts.append(store.rotate("k0", 60)[0])
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    for plaintext in plaintexts:
        secret = plaintext[len("evx_") + 12 + 1:]  # after the prefix and the 12-character key id
        assert plaintext.encode() not in raw
        assert secret.encode() not in raw
    db = sqlite3.connect(path)
    stored = {row[0] for row in db.execute("SELECT key_hash FROM api_keys")}
    db.close()
    assert stored == {hashlib.sha256(p.encode()).hexdigest() for p in plaintexts}
    assert path.stat().st_mode & 0o077 == 0  # readable by the owner only


def test_unknown_key_id_still_compares_a_hash(keys: KeyStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Unknown ids cost one hash comparison, like known ones: the timing does not tell them apart."""
    calls: list[tuple[str, str]] = []
    real = keys_module.hmac.compare_digest
    monkeypatch.setattr(keys_module.hmac, "compare_digest", lambda a, b: calls.append((a, b)) or real(a, b))
    plaintext, _ = keys.create("a", "alice", ["x"])
    assert keys.authenticate("evx_0123456789ab_" + "A" * 43) is None
    assert keys.authenticate(plaintext) is not None
    assert len(calls) == 2


def test_rotation_keeps_the_old_key_for_the_grace_period(keys: KeyStore, wall_clock: WallClock) -> None:
    old, first = keys.create("agent", "alice", ["engineering-read"], 10)
    wall_clock.advance(5)
    new, second = keys.rotate("agent", grace_s=60)
    assert second.key_id != first.key_id
    assert (second.principal, second.labels, second.rate_per_min) == ("alice", ("engineering-read",), 10)
    wall_clock.advance(59.9)
    assert keys.authenticate(old) is not None and keys.authenticate(new) is not None
    wall_clock.advance(0.1)
    assert keys.authenticate(old) is None
    assert keys.authenticate(new) is not None
    statuses = {r.key_id: r.status(keys.now()) for r in keys.list()}
    assert statuses == {first.key_id: "expired", second.key_id: "active"}


def test_rotating_twice_never_extends_an_old_key(keys: KeyStore, wall_clock: WallClock) -> None:
    first, _ = keys.create("agent", "alice", ["x"])
    keys.rotate("agent", grace_s=10)
    keys.rotate("agent", grace_s=3600)
    wall_clock.advance(10)
    assert keys.authenticate(first) is None


def test_revoke_stops_every_key_of_the_name(keys: KeyStore, wall_clock: WallClock) -> None:
    old, _ = keys.create("agent", "alice", ["x"])
    new, _ = keys.rotate("agent", grace_s=600)
    other, _ = keys.create("other", "bob", ["x"])
    assert keys.revoke("agent") == 2
    assert keys.authenticate(old) is None and keys.authenticate(new) is None
    assert keys.authenticate(other) is not None
    assert keys.revoke("agent") == 0
    assert [r.status(keys.now()) for r in keys.list() if r.name == "agent"] == ["revoked", "revoked"]
    again, _ = keys.create("agent", "alice", ["x"])  # a revoked name may be issued again
    assert keys.authenticate(again) is not None


def test_management_errors_name_the_problem(keys: KeyStore) -> None:
    keys.create("agent", "alice", ["x"])
    with pytest.raises(ConfigError, match="a valid key named 'agent' exists"):
        keys.create("agent", "alice", ["x"])
    with pytest.raises(ConfigError, match="key name"):
        keys.create("has space", "alice", ["x"])
    with pytest.raises(ConfigError, match="principal"):
        keys.create("b", " ", ["x"])
    with pytest.raises(ConfigError, match="rate_per_min"):
        keys.create("b", "bob", ["x"], 0)
    with pytest.raises(ConfigError, match="no valid key named 'ghost'"):
        keys.rotate("ghost")
    with pytest.raises(ConfigError, match="no key named 'ghost'"):
        keys.revoke("ghost")
    for grace in (-1, float("nan"), float("inf"), 1e12):
        with pytest.raises(ConfigError, match="grace period must be between 0 and"):
            keys.rotate("agent", grace)


def test_to_dict_never_holds_the_hash(keys: KeyStore) -> None:
    plaintext, record = keys.create("agent", "alice", ["x"])
    data = record.to_dict(keys.now())
    assert set(data) == {"key_id", "name", "principal", "labels", "rate_per_min", "created_at", "expires_at",
                         "revoked_at", "status"}
    assert plaintext not in str(data) and hashlib.sha256(plaintext.encode()).hexdigest() not in str(data)


def test_token_bucket(tick_clock: TickClock) -> None:
    limiter = RateLimiter(clock=tick_clock)
    assert [limiter.acquire("a", 3).allowed for _ in range(4)] == [True, True, True, False]
    refused = limiter.acquire("a", 3)
    assert not refused.allowed and refused.retry_after_s == pytest.approx(20.0)
    assert refused.retry_after_header == "20"
    assert limiter.acquire("b", 3).allowed  # buckets are per key name
    tick_clock.advance(19.9)
    assert not limiter.acquire("a", 3).allowed
    tick_clock.advance(0.1)
    assert limiter.acquire("a", 3).allowed
    tick_clock.advance(3600)  # a long pause refills to the burst size, never beyond
    assert [limiter.acquire("a", 3).allowed for _ in range(4)] == [True, True, True, False]


def test_token_bucket_is_thread_safe(tick_clock: TickClock) -> None:
    limiter = RateLimiter(clock=tick_clock)
    allowed: list[bool] = []
    lock = threading.Lock()

    def hammer() -> None:
        for _ in range(50):
            ok = limiter.acquire("shared", 100).allowed
            with lock:
                allowed.append(ok)

    threads = [threading.Thread(target=hammer) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert (sum(allowed), len(allowed)) == (100, 400)


def test_two_stores_on_one_file_see_each_other(tmp_path: Path) -> None:
    """The CLI and a running server share the file: a revocation by one holds in the other at once."""
    with KeyStore(tmp_path / "keys.sqlite") as server, KeyStore(tmp_path / "keys.sqlite") as cli:
        plaintext, _ = cli.create("agent", "alice", ["x"])
        assert server.authenticate(plaintext) is not None
        with pytest.raises(ConfigError, match="exists"):
            server.create("agent", "alice", ["x"])
        cli.revoke("agent")
        assert server.authenticate(plaintext) is None


def test_limiters_on_one_file_share_each_keys_bucket(tmp_path: Path, tick_clock: TickClock) -> None:
    """Two limiters on one file are two server processes on one key file (`serve --workers`, or `serve` beside
    `mcp --transport http`): a key's rate is shared, not given whole to each."""
    path = rates_path(tmp_path / "keys.sqlite")
    with RateLimiter(path, clock=tick_clock) as one, RateLimiter(path, clock=tick_clock) as two:
        assert [one.acquire("a", 4).allowed, two.acquire("a", 4).allowed, one.acquire("a", 4).allowed,
                two.acquire("a", 4).allowed, one.acquire("a", 4).allowed, two.acquire("a", 4).allowed] == [
            True, True, True, True, False, False]
        tick_clock.advance(15)  # one request's worth
        assert two.acquire("a", 4).allowed and not one.acquire("a", 4).allowed
    with RateLimiter(path, clock=tick_clock) as restarted:  # a restart does not refill the bucket
        assert not restarted.acquire("a", 4).allowed
    assert path.name == "keys.rates.sqlite"


def test_a_clock_stepped_back_neither_refills_nor_blocks(tmp_path: Path, tick_clock: TickClock) -> None:
    """Wall-clock time (the one clock processes share) can step back: the bucket neither gains nor goes into
    debt for the lost time."""
    with RateLimiter(tmp_path / "rates.sqlite", clock=tick_clock) as limiter:
        assert [limiter.acquire("a", 2).allowed for _ in range(3)] == [True, True, False]
        tick_clock.advance(-3600)  # another process's clock behind, or NTP stepping back
        assert not limiter.acquire("a", 2).allowed
        tick_clock.advance(30)  # one request's worth after the step, not an hour and 30 s
        assert limiter.acquire("a", 2).allowed
