"""One search, one index snapshot: a result names the snapshot all of its reads saw.

A search's reads are not one transaction, so a batch committed while it runs had left a result holding scores of
the earlier snapshot under the later snapshot's id, and replay on that snapshot then differed (a reviewer saw it
1-2 times in 150 queries racing an ingest). Here the commit lands deterministically: the store commits a real
batch from inside the search's first full-text read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from evidex.admission.gate import Principal
from evidex.config import Config
from evidex.embedding.protocol import Embedder
from evidex.engine import Engine
from evidex.pipeline import SearchRequest
from evidex.result import decision_json
from evidex.stores.sqlite import SqliteStore
from evidex.testing.store_contract import batch, document, make_chunk
from evidex.types import Provenance, ScoredId, SearchFilters

PAGES = {
    "rotation.md": "---\naccess_labels: [eng]\ncitation_uri: https://kb.example/rotation\n---\n# Key rotation\n\n"
                   "Rotate the signing key every quarter; the old key stays valid for a week.\n",
    "vault.md": "---\naccess_labels: [eng]\ncitation_uri: https://kb.example/vault\n---\n# Vault\n\n"
                "The vault seals itself on restart; unseal it with three of five key shares.\n",
}


class CommitsDuringTheFirstSearch(SqliteStore):
    """A real SqliteStore that, once armed, commits a batch from inside its next full-text search."""

    armed = False
    searches = 0

    def search_sparse(self, query: str, limit: int, filters: SearchFilters | None = None, **kw: Any) -> list[ScoredId]:
        self.searches += 1
        if self.armed:
            self.armed = False
            vector = np.zeros(self._dense_snapshot()[0].matrix.shape[1], dtype=np.float32)
            vector[0] = 1.0
            chunk = make_chunk("late", 0, "key rotation schedule written while the search ran",
                               provenance=Provenance(access_labels=("eng",), citation_uri="https://kb.example/late"))
            self.commit_batch(batch("late-batch", document([chunk], [vector])))
        return super().search_sparse(query, limit, filters, **kw)


def test_a_commit_during_a_search_runs_it_again_on_one_snapshot(tmp_path: Path, cache_dir: Path,
                                                                 embedder: Embedder) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in PAGES.items():
        (docs / name).write_text(text, encoding="utf-8")
    config = Config().replace(index={"path": str(tmp_path / "idx")}, embedding={"cache_dir": str(cache_dir)})
    store = CommitsDuringTheFirstSearch(config.index_dir)
    engine = Engine.open(config, embedder=embedder, store=store)
    try:
        engine.ingest([docs])
        request = SearchRequest("how often is the signing key rotated?", principal=Principal.of("p", ["eng"]))
        before = store.snapshot_id()
        store.armed, store.searches = True, 0
        outcome = engine.run(request)
        after = store.snapshot_id()
        assert before != after and outcome.snapshot_id == after  # every read of the result saw `after`
        assert store.searches >= 2  # it ran again after the commit
        pinned = SearchRequest(request.query, principal=request.principal, retrieved_at=outcome.retrieved_at)
        again = engine.result_of(engine.run(pinned))
        assert decision_json(engine.result_of(outcome)) == decision_json(again)  # replay on that snapshot agrees
    finally:
        engine.close()
