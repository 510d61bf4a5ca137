"""The store contract: what every `Store` backend must do, written once and reused by each backend.

A backend's test module subclasses `StoreContract` and provides a `store` fixture yielding a fresh, empty
store; every test here then runs against it:

    class TestSqliteStore(StoreContract):
        @pytest.fixture
        def store(self, tmp_path: Path) -> Iterator[Store]:
            s = SqliteStore(tmp_path / "idx")
            yield s
            s.close()

The suite calls only the `Store` protocol, its `Ledger`, and the corpus facts `evidex.retrieval.corpus` reads
through it (the fixture closes the store). Of `ledger.stats()` it needs the keys `documents` and `chunks` (live
counts), `batches` (committed), `rolled_back_batches` and `access_labels` (live chunks per label), which every
interface shows. Its parts, by concept:

* `evidex.testing.store_contract_writes`: batches, read-back, replacement, rollback, snapshots, the ledger;
* `evidex.testing.store_contract_search`: dense and sparse search and their filters;
* `evidex.testing.store_contract_corpus`: inlink contexts, word counts and reading ahead, with the store's
  capabilities and through the core protocol alone (`CoreStore`);
* `evidex.testing.store_builders`: the vectors, chunks, batches and corpora they build, which serve a
  backend's own extra tests as well (re-exported here).
"""

from __future__ import annotations

from evidex.testing.store_builders import (
    DAEMONSET_PAGE,
    DIM,
    FILTER_CASES,
    HOSTILE_QUERIES,
    INDEXED_AT,
    LOGGING_PAGE,
    T0,
    TITLE_WEIGHT_CASES,
    ContractCorpus,
    Vector,
    as_committed,
    axis,
    batch,
    check_title_weight,
    dead_letter,
    document,
    make_chunk,
    unit,
)
from evidex.testing.store_contract_corpus import CoreStore, CorpusContract
from evidex.testing.store_contract_search import SearchContract
from evidex.testing.store_contract_writes import WritesContract

__all__ = [
    "DAEMONSET_PAGE", "DIM", "FILTER_CASES", "HOSTILE_QUERIES", "INDEXED_AT", "LOGGING_PAGE", "T0",
    "TITLE_WEIGHT_CASES", "ContractCorpus", "CoreStore", "StoreContract", "Vector", "as_committed", "axis", "batch",
    "check_title_weight", "dead_letter", "document", "make_chunk", "unit",
]


class StoreContract(WritesContract, SearchContract, CorpusContract):
    """Behaviour every `Store` must show. Subclasses provide a `store` fixture: a fresh, empty store."""
