"""What a pipeline under evaluation returns for one question (`Ranked`) and the settings it runs with: the types
the runner and the scorers (`metrics`, `gate_audit`, `signal_check`) share."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from evidex.admission.gate import Principal
from evidex.types import Chunk, EvalPlan


@dataclass(frozen=True)
class Ranked:
    """A pipeline's answer to one question: the context (first k) and the deeper ranking behind it."""

    chunks: tuple[Chunk, ...]
    info: dict[str, Any] = field(default_factory=dict)

    def top_k(self, k: int) -> tuple[Chunk, ...]:
        """What an answer at k holds: an evidence pipeline's context (grading may leave it shorter than k),
        else a plain retriever's first k chunks."""
        return self.info["context"] if "context" in self.info else self.chunks[:k]


@dataclass(frozen=True)
class EvalSettings:
    """How every question of a run is asked: k, where its plan comes from, and (with both a principal and an
    instant) through the admission gate as that principal."""

    k: int = 10
    plan: EvalPlan = EvalPlan.AUTO
    principal: Principal | None = None
    retrieved_at: datetime | None = None
