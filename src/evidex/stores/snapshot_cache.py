"""Values read at one snapshot of an index, kept until the index changes or the cache is full."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class SnapshotCache(Generic[K, V]):
    """Up to `max_size` units of values (`size` of each; one by default) read at one index generation. Moving
    to another generation empties it; a full cache starts over rather than tracking use. Not thread-safe:
    callers hold the lock under which they read the values."""

    def __init__(self, max_size: int, size: Callable[[V], int] = lambda _value: 1) -> None:
        self._max_size = max_size
        self._size = size
        self._values: dict[K, V] = {}
        self._used = 0
        self._generation: int | None = None

    def at(self, generation: int) -> None:
        """Values from now on are read at `generation`: those kept from another are dropped."""
        if generation != self._generation:
            self.clear()
            self._generation = generation

    def found(self, keys: Iterable[K]) -> dict[K, V]:
        return {k: self._values[k] for k in keys if k in self._values}

    def keep(self, key: K, value: V) -> None:
        """Keep `value`; one larger than the whole cache is not kept."""
        size = self._size(value)
        if size > self._max_size:
            return
        if self._used + size > self._max_size:
            self.clear()
        self._values[key] = value
        self._used += size

    def clear(self) -> None:
        self._values.clear()
        self._used = 0

    @property
    def used(self) -> int:
        """The units of the values kept (their number, when each counts one)."""
        return self._used
