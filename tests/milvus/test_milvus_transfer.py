"""export_index / import_index: SQLite -> Milvus -> SQLite without re-embedding, retired chunks included."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")

from evidex.errors import StoreError
from evidex.stores.milvus import MilvusStore
from evidex.stores.milvus_schema import batch_row
from evidex.stores.protocol import DocumentWrite, Store
from evidex.stores.sqlite import SqliteStore
from evidex.stores.transfer import FORMAT_VERSION, export_index, import_index
from evidex.testing.store_contract import DIM, T0, axis, batch, dead_letter, document, make_chunk, unit
from evidex.types import BatchInfo, Provenance

_names = itertools.count()
IDS = ["A#0", "A#1", "A#1-new", "B#0", "C#0", "D#0"]
QUERIES = [axis(0), axis(1), axis(3), unit(1, 1, 1), unit(0.2, 0.1, 0.9, 0.3)]
FULL = Provenance(source_version="v2", published_at=T0, access_labels=("eng", "ops"), citation_uri="https://x/y",
                  authority_tier="official", evidence_family="deploy", owner="team", superseded_by="z")


@pytest.fixture(scope="module")
def lite_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("milvus") / "lite.db")


@pytest.fixture
def milvus(lite_uri: str) -> Iterator[MilvusStore]:
    store = MilvusStore(lite_uri, collection=f"x{next(_names)}", dim=DIM)
    yield store
    store.drop()
    store.close()


@pytest.fixture
def sqlite(tmp_path: Path) -> Iterator[SqliteStore]:
    store = SqliteStore(tmp_path / "sqlite")
    yield store
    store.close()


def build_history(store: Store) -> None:
    """Live, retired and rolled-back rows, failed and resolved dead letters."""
    store.commit_batch(batch("b1", document([make_chunk("A", 0, "alpha intro", title="Alpha", provenance=FULL),
                                             make_chunk("A", 1, "alpha legacy steps", title="Alpha")],
                                            [axis(0), axis(1)], doc_hash="hA1"),
                             document([make_chunk("B", 0, "beta notes", anchor=None)], [axis(2)], doc_hash="hB"),
                             dead_letters=[dead_letter("bad.md", "b1"), dead_letter("worse.md", "b1")], model="m1"))
    store.commit_batch(batch("b2", document([make_chunk("A", 0, "alpha intro", title="Alpha", provenance=FULL),
                                             make_chunk("A", 1, "alpha modern steps", title="Alpha",
                                                        record_id="A#1-new")],
                                            [axis(0), axis(3)], doc_hash="hA2"),
                             dead_letters=[dead_letter("bad.md", "b2", "still bad")], resolved=["worse.md"]))
    store.commit_batch(batch("b3", document([make_chunk("C", 0, "gamma alpha")], [unit(1, 1, 1)]),
                             DocumentWrite("B", "B.md", "h-empty", (), np.zeros((0, DIM), np.float32)),  # retired
                             unchanged=2, label="third"))
    store.commit_batch(batch("b4", document([make_chunk("D", 0, "delta")], [axis(4)]),
                             dead_letters=[dead_letter("gone.md", "b4")]))
    store.rollback()  # b4


def observe(store: Any) -> dict[str, Any]:
    stats = store.ledger.stats()
    return {
        "get": store.get(IDS),
        "dense": [[h.record_id for h in store.search_dense(q, 3)] for q in QUERIES],
        "sparse": sorted(h.record_id for h in store.search_sparse("alpha steps gamma", 10)),
        "hashes": store.ledger.document_hashes(),
        "batches": store.ledger.batches(),
        "dead_letters": store.ledger.dead_letters(),
        "embedding_model": store.ledger.embedding_model(),
        "counts": {k: stats[k] for k in ("documents", "chunks", "retired_chunks", "batches", "rolled_back_batches",
                                         "dead_letters",
                                         "families")},
    }


def test_sqlite_to_milvus_and_back(sqlite: SqliteStore, milvus: MilvusStore, tmp_path: Path) -> None:
    build_history(sqlite)
    want = observe(sqlite)
    manifest = export_index(sqlite, tmp_path / "from-sqlite")
    assert (manifest["version"], manifest["dim"], manifest["rows"], manifest["batches"]) == (FORMAT_VERSION, DIM,
                                                                                             6, 4)
    import_index(tmp_path / "from-sqlite", milvus)
    assert observe(milvus) == want and want["embedding_model"] == "m1"
    assert [(b.batch_id, b.replaced, b.retired) for b in want["batches"]][1:3] == [("b2", 1, 0), ("b3", 0, 1)]
    assert milvus.snapshot_id() != "g0-empty" and milvus.snapshot_id().endswith("-b3")

    export_index(milvus, tmp_path / "from-milvus")
    back = SqliteStore(tmp_path / "back")
    import_index(tmp_path / "from-milvus", back)
    assert observe(back) == want
    assert back.check_integrity() == []
    for name in ("chunks.jsonl", "batches.jsonl", "dead_letter_events.jsonl"):  # the same bytes both ways
        assert (tmp_path / "from-milvus" / name).read_text() == (tmp_path / "from-sqlite" / name).read_text()

    # Retired rows travelled too: rolling back b3 and b2 restores the same chunks in all three stores.
    for store in (sqlite, milvus, back):
        store.rollback()
        store.rollback()
    assert observe(milvus) == observe(sqlite) == observe(back)
    assert [c.text for c in milvus.get(["A#1"])] == ["alpha legacy steps"]
    assert [c.text for c in milvus.get(["B#0"])] == ["beta notes"]  # the retired document is back
    back.close()


def test_import_refuses_a_store_that_is_not_empty(sqlite: SqliteStore, milvus: MilvusStore, tmp_path: Path) -> None:
    build_history(sqlite)
    export_index(sqlite, tmp_path / "exp")
    milvus.commit_batch(batch("x1", document([make_chunk("Z", 0, "zeta")], [axis(5)])))
    with pytest.raises(StoreError, match="not empty"):
        import_index(tmp_path / "exp", milvus)
    with pytest.raises(StoreError, match="not empty"):
        import_index(tmp_path / "exp", sqlite)
    with pytest.raises(StoreError, match="already exists"):
        export_index(sqlite, tmp_path / "exp")


def test_import_refuses_a_newer_format_and_a_broken_export(sqlite: SqliteStore, milvus: MilvusStore,
                                                           tmp_path: Path) -> None:
    build_history(sqlite)
    export_index(sqlite, tmp_path / "exp")
    manifest = json.loads((tmp_path / "exp" / "manifest.json").read_text())
    (tmp_path / "exp" / "manifest.json").write_text(json.dumps({**manifest, "version": FORMAT_VERSION + 1}))
    with pytest.raises(StoreError, match="format version"):
        import_index(tmp_path / "exp", milvus)
    (tmp_path / "exp" / "manifest.json").write_text(json.dumps(manifest))
    (tmp_path / "exp" / "vectors.npy").unlink()
    with pytest.raises(StoreError, match=r"missing vectors\.npy"):
        import_index(tmp_path / "exp", milvus)


def test_an_interrupted_import_into_milvus_is_resumed(sqlite: SqliteStore, milvus: MilvusStore, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    build_history(sqlite)
    export_index(sqlite, tmp_path / "exp")
    real, count = milvus._io.mutate, itertools.count()

    def dies(op: str, collection: str, **kwargs: Any) -> None:
        if next(count) == 3:
            raise KeyboardInterrupt
        real(op, collection, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(milvus._io, "mutate", dies)
        with pytest.raises(KeyboardInterrupt):
            import_index(tmp_path / "exp", milvus)
    with pytest.raises(StoreError, match="import"):
        milvus.commit_batch(batch("x1", document([make_chunk("Z", 0, "zeta")], [axis(5)])))
    import_index(tmp_path / "exp", milvus)
    assert observe(milvus) == observe(sqlite)


def test_an_export_waits_out_a_batch_being_written(milvus: MilvusStore, tmp_path: Path) -> None:
    """Milvus writes a batch in steps: between its rows going live and its commit point the generation has
    not moved, so only the pending batch row tells an export that rows and log may disagree. A batch that
    stays pending (here: one a writer left behind) makes the export fail clearly, and repair clears it."""
    milvus.commit_batch(batch("b1", document([make_chunk("A", 0, "alpha")], [axis(0)])))
    pending = BatchInfo("b2", T0, None, "pending", 0, 0, 0, 0, "in flight")
    milvus._io.put_meta([batch_row(pending, 99)])
    assert milvus.export_log().writing
    with pytest.raises(StoreError, match="being written"):
        export_index(milvus, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    milvus.repair()
    assert not milvus.export_log().writing
    assert export_index(milvus, tmp_path / "out")["rows"] == 1
