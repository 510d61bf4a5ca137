"""export_index / import_index between two SQLite stores: needs no Milvus, so it runs everywhere."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evidex.stores.sqlite import SqliteStore
from evidex.stores.transfer import export_index, import_index
from evidex.testing.store_contract import axis, batch, dead_letter, document, make_chunk


def test_sqlite_round_trip_keeps_retired_rows_batches_and_dead_letters(tmp_path: Path) -> None:
    source = SqliteStore(tmp_path / "a")
    source.commit_batch(batch("b1", document([make_chunk("A", 0, "alpha old")], [axis(0)]),
                              dead_letters=[dead_letter("bad.md", "b1")], model="m1"))
    source.commit_batch(batch("b2", document([make_chunk("A", 0, "alpha new")], [axis(1)]), resolved=["bad.md"]))
    manifest = export_index(source, tmp_path / "exp")
    assert (manifest["rows"], manifest["batches"], manifest["dead_letter_events"]) == (2, 2, 2)
    lines = [json.loads(x) for x in (tmp_path / "exp" / "chunks.jsonl").read_text().splitlines()]
    assert [(r["text"], r["retired_by"]) for r in lines] == [("alpha old", "b2"), ("alpha new", None)]

    target = SqliteStore(tmp_path / "b")
    import_index(tmp_path / "exp", target)
    for store in (source, target):
        assert [c.text for c in store.get(["A#0"])] == ["alpha new"]
        assert store.ledger.dead_letters() == []
    assert target.ledger.batches() == source.ledger.batches()
    assert target.ledger.embedding_model() == source.ledger.embedding_model() == manifest["embedding_model"] == "m1"
    assert target.check_integrity() == []
    target.rollback()  # b2's replaced chunk and resolved dead letter come back
    assert [c.text for c in target.get(["A#0"])] == ["alpha old"]
    assert [d.source for d in target.ledger.dead_letters()] == ["bad.md"]
    assert [h.record_id for h in target.search_sparse("old", 10)] == ["A#0"]
    source.close()
    target.close()


def test_an_export_never_mixes_two_snapshots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows and the batch log are read one after the other: a batch committed in between had given an
    export whose log named the new batch while its rows held the old text. The export reads again until the
    index generation is the same before and after its rows."""
    from evidex.stores import transfer

    source = SqliteStore(tmp_path / "src")
    source.commit_batch(batch("b1", document([make_chunk("a", 0, "alpha one")], [axis(0)])))
    real_rows = transfer.SqliteTransfer.export_rows
    raced = []

    def racing_rows(self: transfer.SqliteTransfer) -> Any:
        rows = list(real_rows(self))
        if not raced:  # another writer commits while the first read is under way
            raced.append(source.commit_batch(batch("b2", document([make_chunk("a", 0, "alpha two")], [axis(1)]))))
        return rows

    monkeypatch.setattr(transfer.SqliteTransfer, "export_rows", racing_rows)
    export_index(source, tmp_path / "out")
    copy = SqliteStore(tmp_path / "copy")
    import_index(tmp_path / "out", copy)
    assert raced and [c.text for c in copy.all_chunks()] == [c.text for c in source.all_chunks()] == ["alpha two"]
    assert [b.batch_id for b in copy.ledger.batches()] == ["b1", "b2"]
    source.close()
    copy.close()
