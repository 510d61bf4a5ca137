"""An identifier the question quotes that no readable record holds whole is the requester's own value (`ledger_db`,
`10.96.0.20`): no evidence can meet it, so it is no obligation and takes none of the plan's aspect slots, which go
to what the question asks. The plan's notes name it; restricted text holding it decides nothing."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from evidence_support import build_store, constant_encoder, make_chunk

from evidex.admission.gate import AdmissionGate, Principal
from evidex.config import Config
from evidex.evidence.aspects import question_aspects
from evidex.evidence.plan import auto_plan
from evidex.evidence.rescue import index_holds
from evidex.pipeline import PipelineParts, SearchOutcome, SearchRequest, run_search
from evidex.signals.compute import coverage, recommend
from evidex.stores.sqlite import SqliteStore
from evidex.types import Chunk, RetrievalMode, SearchFilters

AT = datetime(2026, 1, 1, tzinfo=UTC)
READER = Principal.of("reader", ["public"])
QUESTION = ("Our `ledger_db` service reads `vaultline.yaml` at start. How do we rotate its signing key, "
            "and how do we cap the key service's memory?")


def test_an_unheld_identifier_gives_its_slot_to_an_ask() -> None:
    held = {"vaultline.yaml"}
    capped = question_aspects(QUESTION, max_aspects=3, held=held.__contains__)
    assert capped.unheld == ("ledger_db",)
    assert capped.aspects == ("vaultline.yaml", "How do we rotate its signing key",
                              "how do we cap the key service's memory")
    # Without the look-up the pasted value takes a slot and an ask is cut.
    blind = question_aspects(QUESTION, max_aspects=3)
    assert "ledger_db" in blind.aspects and "how do we cap the key service's memory" not in blind.aspects
    assert blind.unheld == ()


def test_only_identifiers_are_looked_up() -> None:
    asked: list[str] = []

    def held(identifier: str) -> bool:
        asked.append(identifier)
        return False

    plan = auto_plan("Does Tidepool read `ledger_db` when the 'Vault Line' sync runs?", max_aspects=6, held=held)
    assert asked == ["ledger_db"]  # not the name, nor the quoted title (met by its words)
    assert "ledger_db" not in plan.aspects and {"Vault Line", "Tidepool"} <= set(plan.aspects)
    assert plan.unheld == ("ledger_db",) and plan.to_dict()["not_in_index"] == ["ledger_db"]


def _corpus(ledger_labels: tuple[str, ...]) -> list[Chunk]:
    pages = [make_chunk("rotation", "Rotate the signing key of vaultline.yaml with the key service."),
             make_chunk("memory", "Cap the key service's memory with a limit on its container."),
             make_chunk("ledger", "The ledger_db service keeps its data on the fast disks.", labels=ledger_labels)]
    pages += [make_chunk(f"page{i}", f"Tidepool topic {i} covers connection pools and their limits.")
              for i in range(12)]
    return pages


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[dict[str, SqliteStore]]:
    built = {"readable": build_store(tmp_path / "readable", _corpus(("public",))),
             "restricted": build_store(tmp_path / "restricted", _corpus(("secret",)))}
    yield built
    for s in built.values():
        s.close()


def _search(store: SqliteStore) -> SearchOutcome:
    parts = PipelineParts(store=store, encode=constant_encoder, config=Config().replace(evidence={"max_aspects": 3}),
                          gate=AdmissionGate())
    return run_search(parts, SearchRequest(QUESTION, mode=RetrievalMode.BM25, principal=READER, retrieved_at=AT))


def test_index_holds_tests_the_whole_identifier_among_readable_records(stores: dict[str, SqliteStore]) -> None:
    readable, restricted = stores["readable"], stores["restricted"]
    public = SearchFilters(access_labels=("public",))
    assert index_holds(readable, "ledger_db", limit=50, reader=public)
    assert index_holds(readable, "vaultline.yaml", limit=50, reader=public)
    assert not index_holds(readable, "ledger_dbx", limit=50, reader=public)  # its words, not it whole
    assert not index_holds(restricted, "ledger_db", limit=50, reader=public)
    assert index_holds(restricted, "ledger_db", limit=50, reader=None)


def test_the_pipeline_plans_what_the_index_can_evidence(stores: dict[str, SqliteStore]) -> None:
    held = _search(stores["readable"])
    assert held.plan.aspects[0] == "ledger_db" and "how do we cap the key service's memory" not in held.plan.aspects
    # The page that holds it is one the reader may not read: the same plan as an index that never held it.
    unheld = _search(stores["restricted"])
    assert "ledger_db" not in unheld.plan.aspects
    assert unheld.plan.aspects == ("vaultline.yaml", "How do we rotate its signing key",
                                   "how do we cap the key service's memory")
    assert unheld.plan.unheld == ("ledger_db",) and held.plan.unheld == ()
    assert all(f.name != "ledger_db" for f in unheld.plan.families)  # never reported missing


def test_the_signals_count_it_missing_but_send_no_search_after_it(stores: dict[str, SqliteStore]) -> None:
    """The evidence says nothing of the value, so the answer is not complete; but a re-query focused on it would
    search for what the look-up already found nowhere, so the recommendation names no focus, only the value."""
    outcome = _search(stores["restricted"])
    cov = coverage(outcome)
    assert cov["aspects_not_in_index"] == ["ledger_db"] and "ledger_db" not in cov["aspects_missing"]
    covered = len(cov["aspects_covered"])
    assert covered == 3 and cov["ratio"] == round(covered / (covered + 1), 4)
    rec = recommend(outcome, cov, threshold=0.8, min_question_word_share=0.0, confidence=1.0,
                    min_proceed_confidence=0.0, default_owner=None)
    assert rec.action == "re-query" and rec.focus == () and "no record of ledger_db" in rec.reason
    assert recommend(outcome, cov, threshold=0.7, min_question_word_share=0.0, confidence=1.0,
                     min_proceed_confidence=0.0, default_owner=None).action == "proceed"
