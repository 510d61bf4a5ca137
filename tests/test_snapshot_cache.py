"""SnapshotCache: values read at one index generation, within a bound."""

from __future__ import annotations

from evidex.stores.snapshot_cache import SnapshotCache


def test_another_generation_drops_what_was_kept() -> None:
    cache: SnapshotCache[str, int] = SnapshotCache(10)
    cache.at(1)
    cache.keep("a", 1)
    assert cache.found(["a", "b"]) == {"a": 1}
    cache.at(1)  # the same generation keeps it
    assert cache.found(["a"]) == {"a": 1}
    cache.at(2)
    assert cache.found(["a"]) == {} and cache.used == 0


def test_a_full_cache_starts_over_and_never_exceeds_its_bound() -> None:
    cache: SnapshotCache[str, list[int]] = SnapshotCache(4, len)
    cache.at(7)
    cache.keep("three", [1, 2, 3])
    cache.keep("one", [1])
    assert cache.used == 4 and set(cache.found(["three", "one"])) == {"three", "one"}
    cache.keep("two", [1, 2])  # does not fit beside them: the cache starts over with it
    assert cache.found(["three", "one", "two"]) == {"two": [1, 2]} and cache.used == 2
    cache.keep("five", [1, 2, 3, 4, 5])  # larger than the whole cache: not kept, nothing dropped
    assert cache.found(["two", "five"]) == {"two": [1, 2]} and cache.used == 2
