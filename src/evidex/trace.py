"""The per-request trace: each stage's name, time, counts in/out and decisions, as data."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from evidex.errors import EvidexError, StageError


@dataclass
class StageRecord:
    name: str
    ms: float = 0.0
    n_in: int = 0
    n_out: int = 0
    decisions: dict[str, Any] = field(default_factory=dict)
    searches: list[tuple[str, str, float]] = field(default_factory=list)  # (kind, query, ms) of each search

    def to_dict(self, *, timing: bool) -> dict[str, Any]:
        d: dict[str, Any] = {"stage": self.name, "in": self.n_in, "out": self.n_out}
        if self.decisions:
            d["decisions"] = self.decisions
        if timing:
            d["ms"] = round(self.ms, 3)
            if self.searches:
                d["searches_ms"] = self.searches_ms()
        return d

    def searches_ms(self) -> list[dict[str, Any]]:
        return [{"stage": self.name, "kind": kind, "query": query, "ms": round(ms, 3)}
                for kind, query, ms in self.searches]


@dataclass
class Trace:
    stages: list[StageRecord] = field(default_factory=list)

    @contextmanager
    def stage(self, name: str, n_in: int = 0) -> Iterator[StageRecord]:
        record = StageRecord(name, n_in=n_in)
        started = time.perf_counter()
        try:
            yield record
        except EvidexError:  # already a domain error (a StageError included): keep it as it is
            raise
        except Exception as exc:
            raise StageError(name, f"{type(exc).__name__}: {exc}") from exc
        finally:
            record.ms = (time.perf_counter() - started) * 1000
            self.stages.append(record)

    def to_dict(self, *, timing: bool = True) -> list[dict[str, Any]]:
        return [s.to_dict(timing=timing) for s in self.stages]

    def total_ms(self) -> float:
        return sum(s.ms for s in self.stages)


@dataclass(frozen=True)
class StageSwitches:
    """Which optional stages run (the evaluation's ablations); the default runs all of them."""

    rescue: bool = True
    reserve: bool = True
    grade: bool = True
    rerank: bool = True
    expand: bool = True

    @classmethod
    def only(cls, *names: str) -> StageSwitches:
        return cls(**{n: n in names for n in ("rescue", "reserve", "grade", "rerank", "expand")})


def pinned_now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)
