"""`run_search` on tiny inline corpora: stage switches, where rescued chunks enter, the gate's place in the
order, and a verification of a page that has no source version."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from evidence_support import build_store, constant_encoder, ids, make_chunk

from evidex.admission.gate import AdmissionGate, Principal
from evidex.config import Config
from evidex.engine import Engine
from evidex.evidence.plan import RequiredFamily, explicit_plan
from evidex.pipeline import PipelineParts, SearchOutcome, SearchRequest, run_search
from evidex.stores.sqlite import SqliteStore
from evidex.trace import StageSwitches
from evidex.types import RetrievalMode

AT = datetime(2026, 1, 1, tzinfo=UTC)
READER = Principal.of("reader", ["public"])
STRONG = make_chunk("strong", "database password vaultline database password", family="secrets")
WEAK = make_chunk("weak", "vaultline is a product", family="secrets")
GRANT = make_chunk("grant", "RoleGrant least privilege", family="rbac")
HIDDEN = make_chunk("hidden", "database password vaultline root token", family="secrets", labels=("secret",))
RBAC_PLAN = explicit_plan([RequiredFamily("rbac", "RoleGrant privilege", label="rbac")])


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    s = build_store(tmp_path / "idx", [STRONG, WEAK, GRANT, HIDDEN])
    yield s
    s.close()


Search = Callable[..., SearchOutcome]


@pytest.fixture
def search(store: SqliteStore) -> Search:
    parts = PipelineParts(store=store, encode=constant_encoder, config=Config(), gate=AdmissionGate())

    def run(query: str = "database password vaultline", **kw: object) -> SearchOutcome:
        kw.setdefault("principal", READER)
        kw.setdefault("retrieved_at", AT)
        return run_search(parts, SearchRequest(query, mode=RetrievalMode.BM25, **kw))  # type: ignore[arg-type]

    return run


def _stages(outcome: SearchOutcome) -> list[str]:
    return [s.name for s in outcome.trace.stages]


def test_all_stages_run_in_order(search: Search) -> None:
    outcome = search(plan=RBAC_PLAN)
    assert _stages(outcome) == ["plan", "retrieve", "rerank", "rescue", "bridge", "cite", "rescore", "admit",
                                "reserve", "grade", "assemble", "signals"]
    assert ids(outcome.context)[0] == "strong"
    assert "grant" in ids(outcome.context)  # rescued for its family
    assert "hidden" not in ids(outcome.context)
    assert [(f.name, f.status) for f in outcome.families] == [("rbac", "covered")]


def test_stage_switches_leave_stages_out(search: Search) -> None:
    outcome = search(plan=RBAC_PLAN, switches=StageSwitches.only("rerank"))
    assert _stages(outcome) == ["plan", "retrieve", "rerank", "admit", "reserve", "assemble", "signals"]
    assert "grant" not in ids(outcome.ranked_all)  # no rescue: the family's page is never found
    assert [(f.name, f.status) for f in outcome.families] == [("rbac", "missing")]


def test_without_a_principal_there_is_no_gate(search: Search) -> None:
    outcome = search(principal=None)
    assert "admit" not in _stages(outcome)
    assert outcome.gate is None
    assert "hidden" in ids(outcome.ranked_all)


def test_a_naive_retrieved_at_is_read_as_utc(search: Search) -> None:
    outcome = search(retrieved_at=datetime(2026, 1, 1))
    assert outcome.retrieved_at == AT


def test_rescued_chunks_enter_at_the_retrieval_floor(search: Search) -> None:
    outcome = search(plan=RBAC_PLAN)
    scores = {c.chunk.record_id: c.score for c in outcome.ranked_all}
    assert scores["grant"] < scores["strong"]


def test_rescued_chunks_enter_at_the_floor_without_rerank(search: Search) -> None:
    outcome = search(plan=RBAC_PLAN, switches=StageSwitches(rerank=False))
    retrieved = [c for c in outcome.ranked_all if c.chunk.record_id != "grant"]
    floor = min(c.score for c in retrieved)
    rescued = next(c for c in outcome.ranked_all if c.chunk.record_id == "grant")
    assert rescued.score <= floor
    assert ids(outcome.context)[0] == "strong"


# ---- a verification of a page without a source version ----------------------------------------------
PAGE = """
---
access_labels: [eng]
citation_uri: https://docs.example/keys
---
# Keys

## Rotate

Rotate the transit key every ninety days with the rewrap command.
"""


def test_verification_of_a_page_without_source_version(make_engine: Callable[..., Engine],
                                                       write_corpus: Callable[..., Path]) -> None:
    engine = make_engine()
    engine.ingest([write_corpus({"keys.md": PAGE})])
    who = Principal.of("p", ["eng"])
    at = datetime(2026, 11, 30, tzinfo=UTC)
    first = engine.search_with_reasoning("rotate the transit key", principal=who, retrieved_at=at)
    chunk = first["evidence"][0]["chunks"][0]
    assert chunk["status"] == "citation-accepted" and chunk["provenance"]["source_version"] is None
    recorded = engine.verify(chunk["record_id"], claim="every ninety days", by="alice", at=at - timedelta(days=1))
    assert recorded.is_current
    second = engine.search_with_reasoning("rotate the transit key", principal=who, retrieved_at=at)
    assert second["evidence"][0]["chunks"][0]["status"] == "human-verified"

