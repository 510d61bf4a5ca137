"""export_index / import_index between two SQLite stores: needs no Milvus, so it runs everywhere."""

from __future__ import annotations

import json
from pathlib import Path

from evidex.stores.sqlite import SqliteStore
from evidex.stores.transfer import export_index, import_index
from evidex.testing.store_contract import axis, batch, dead_letter, document, make_chunk


def test_sqlite_round_trip_keeps_retired_rows_batches_and_dead_letters(tmp_path: Path) -> None:
    source = SqliteStore(tmp_path / "a")
    source.commit_batch(batch("b1", document([make_chunk("A", 0, "alpha old")], [axis(0)]),
                              dead_letters=[dead_letter("bad.md", "b1")]))
    source.commit_batch(batch("b2", document([make_chunk("A", 0, "alpha new")], [axis(1)]), resolved=["bad.md"]))
    manifest = export_index(source, tmp_path / "exp")
    assert (manifest["rows"], manifest["batches"], manifest["dead_letter_events"]) == (2, 2, 2)
    lines = [json.loads(x) for x in (tmp_path / "exp" / "chunks.jsonl").read_text().splitlines()]
    assert [(r["text"], r["retired_by"]) for r in lines] == [("alpha old", "b2"), ("alpha new", None)]

    target = SqliteStore(tmp_path / "b")
    import_index(tmp_path / "exp", target)
    for store in (source, target):
        assert [c.text for c in store.get(["A#0"])] == ["alpha new"]
        assert store.dead_letters() == []
    assert target.batches() == source.batches()
    assert target.check_integrity() == []
    target.rollback()  # b2's replaced chunk and resolved dead letter come back
    assert [c.text for c in target.get(["A#0"])] == ["alpha old"]
    assert [d.source for d in target.dead_letters()] == ["bad.md"]
    assert [h.record_id for h in target.search_sparse("old", 10)] == ["A#0"]
    source.close()
    target.close()
