"""The store contract's writes and the ledger (`evidex.testing.store_contract`): a batch committed whole or not
at all, read back field for field, replaced documents retired, rollbacks restoring exactly what a batch
replaced, snapshot ids, dead letters, batches and counts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import numpy as np
import pytest

from evidex.errors import StoreError
from evidex.stores.protocol import DocumentWrite, Store
from evidex.testing.store_builders import (
    DIM,
    T0,
    ContractCorpus,
    as_committed,
    axis,
    batch,
    dead_letter,
    document,
    ids,
    make_chunk,
)
from evidex.types import DeadLetter, Provenance


class WritesContract(ContractCorpus):
    """What every store's writes, rollbacks and ledger must do."""

    # ---- empty store -----------------------------------------------------------------------------------
    def test_empty_store(self, store: Store) -> None:
        assert store.ledger.document_hashes() == {}
        assert store.get(["nothing"]) == []
        assert store.search_dense(axis(0), 10) == []
        assert store.search_sparse("pods", 10) == []
        assert store.ledger.batches() == []
        assert store.ledger.dead_letters() == []
        assert isinstance(store.snapshot_id(), str)

    def test_the_first_batch_with_vectors_names_the_embedder_and_another_is_refused(self, store: Store) -> None:
        chunks, vectors = self.corpus()
        assert store.ledger.embedding_model() is None
        store.commit_batch(batch("b0", dead_letters=[DeadLetter("x.md", "broken", "b0", T0, "x.md")], model="m2"))
        assert store.ledger.embedding_model() is None  # no vectors, no model
        store.commit_batch(batch("b1", document([chunks[0]], [vectors[0]]), model="m1"))
        assert store.ledger.embedding_model() == "m1"
        snapshot = store.snapshot_id()
        with pytest.raises(StoreError, match="model m1, and the configured embedder is m2"):
            store.commit_batch(batch("b2", document([chunks[1]], [vectors[1]]), model="m2"))
        assert store.snapshot_id() == snapshot and [c.doc_id for c in store.get([chunks[1].record_id])] == []
        store.commit_batch(batch("b3", document([chunks[1]], [vectors[1]]), model="m1"))
        assert store.ledger.embedding_model() == "m1"

    def test_rolling_back_every_vector_forgets_the_embedder(self, store: Store) -> None:
        chunks, vectors = self.corpus()
        store.commit_batch(batch("b1", document([chunks[0]], [vectors[0]]), model="m1"))
        store.commit_batch(batch("b2", document([chunks[1]], [vectors[1]]), model="m1"))
        store.rollback()
        assert store.ledger.embedding_model() == "m1"  # b1's vectors are still there
        store.rollback()
        assert store.ledger.embedding_model() is None  # nothing left: another embedder may start the index
        store.commit_batch(batch("b3", document([chunks[0]], [vectors[0]]), model="m2"))
        assert store.ledger.embedding_model() == "m2"

    def test_an_index_written_before_embedders_were_recorded_adopts_none(self, store: Store) -> None:
        """Its vectors' embedder is unknown: naming the next batch's would refuse the one that made them."""
        chunks, vectors = self.corpus()
        store.commit_batch(batch("b1", document([chunks[0]], [vectors[0]])))  # no model named
        store.commit_batch(batch("b2", document([chunks[1]], [vectors[1]]), model="m1"))
        assert store.ledger.embedding_model() is None

    # ---- commit and read back --------------------------------------------------------------------------
    def test_commit_then_get_round_trips_every_field(self, store: Store) -> None:
        plus_2h = timezone(timedelta(hours=2))
        full = Provenance(
            source_version="v1.2.3", published_at=datetime(2024, 1, 2, 3, 4, 5, tzinfo=plus_2h),
            expires_at=datetime(2030, 12, 31, 23, 59, 59, tzinfo=UTC), access_labels=("eng", "ops"),
            citation_uri="https://docs.example.com/guide", authority_tier="official",
            evidence_family="deploy", owner="team-platform", superseded_by="guide-v2")
        chunks = [
            make_chunk("guide", 0, "First part of the guide.", title="The guide", provenance=full,
                       anchor="first-part", heading="First part"),
            make_chunk("guide", 1, "Second part of the guide.", title="The guide", provenance=full,
                       anchor="second-part", heading="Second part"),
            make_chunk("bare", 0, "No provenance at all.", provenance=Provenance(), anchor=None, heading=""),
        ]
        info = store.commit_batch(batch("b1", document(chunks[:2], [axis(0), axis(1)]),
                                        document(chunks[2:], [axis(2)]), label="first"))
        assert (info.batch_id, info.status, info.added, info.replaced, info.label) == (
            "b1", "committed", 3, 0, "first")
        got = store.get([c.record_id for c in chunks])
        assert got == [as_committed(c, "b1") for c in chunks]
        published = got[0].provenance.published_at
        assert published is not None and published.utcoffset() is not None  # tz-aware, same instant
        assert published == datetime(2024, 1, 2, 1, 4, 5, tzinfo=UTC)
        assert got[0].provenance.access_labels == ("eng", "ops")
        assert isinstance(got[0].provenance.access_labels, tuple)
        assert got[2].citation_anchor is None
        assert got[2].provenance == Provenance()

    def test_get_preserves_asked_order_and_skips_unknown_ids(self, store: Store) -> None:
        kube, etcd, net = self.commit_corpus(store)
        assert store.get([net.record_id, "unknown", kube.record_id]) == [net, kube]
        assert store.get([etcd.record_id]) == [etcd]
        assert store.get(["unknown"]) == []
        assert store.get([]) == []

    def test_document_hashes_map_live_documents(self, store: Store) -> None:
        chunks, vectors = self.corpus()
        store.commit_batch(batch("b1", document([chunks[0]], [vectors[0]], doc_hash="h-kube"),
                                 document([chunks[1]], [vectors[1]], doc_hash="h-etcd")))
        assert store.ledger.document_hashes() == {"kube": "h-kube", "etcd": "h-etcd"}

    def test_stats_count_live_documents_and_chunks(self, store: Store) -> None:
        a = [make_chunk("a", i, f"part {i}") for i in range(3)]
        store.commit_batch(batch("b1", document(a, [axis(0), axis(1), axis(2)]),
                                 document([make_chunk("b", 0, "other")], [axis(3)])))
        stats = store.ledger.stats()
        assert (stats["documents"], stats["chunks"]) == (2, 4)

    def test_stats_count_live_chunks_per_access_label(self, store: Store) -> None:
        both = Provenance(access_labels=("eng", "ops"))
        store.commit_batch(batch("b1", document([make_chunk("a", 0, "one", provenance=both),
                                                  make_chunk("a", 1, "two", provenance=both)], [axis(0), axis(1)]),
                                 document([make_chunk("b", 0, "three", provenance=Provenance(access_labels=("eng",)))],
                                          [axis(2)]),
                                 document([make_chunk("c", 0, "four")], [axis(3)])))
        assert store.ledger.stats()["access_labels"] == {"-": 1, "eng": 3, "ops": 2}
        store.commit_batch(batch("b2", document([make_chunk("b", 0, "three again")], [axis(2)])))
        # The replaced chunk no longer counts.
        assert store.ledger.stats()["access_labels"] == {"-": 2, "eng": 2, "ops": 2}

    # ---- replacing a document --------------------------------------------------------------------------
    def test_replacing_a_document_retires_its_old_chunks(self, store: Store) -> None:
        _, after = self.replace_scenario(store)
        assert store.ledger.document_hashes() == {"A": "hA2", "B": "hB"}
        assert store.get(["A#0", "A#1", "A#1-new", "B#0"]) == [after[0], after[1], after[2]]
        alpha = ids(store.search_sparse("alpha", 10))
        assert sorted(alpha) == ["A#0", "A#1-new"]
        assert store.search_sparse("legacy", 10) == []
        assert ids(store.search_sparse("modern", 10)) == ["A#1-new"]
        dense = ids(store.search_dense(axis(1), 10))
        assert sorted(dense) == ["A#0", "A#1-new", "B#0"]  # no retired chunk, no duplicate
        stats = store.ledger.stats()
        assert (stats["documents"], stats["chunks"], store.ledger.chunk_count()) == (2, 3, 3)

    def test_all_chunks_are_the_live_chunks_in_the_order_written(self, store: Store) -> None:
        assert store.all_chunks() == []
        before, after = self.replace_scenario(store)
        assert store.all_chunks() == [after[2], after[0], after[1]]  # B#0 (b1), then what b2 wrote
        store.rollback()
        assert store.all_chunks() == before

    def test_chunk_count_is_the_number_of_live_chunks(self, store: Store) -> None:
        """Without reading them (a warm-up asks), through a replacement, an emptied document and rollbacks."""
        counts = [store.ledger.chunk_count()]
        self.replace_scenario(store)  # b1 writes 3 chunks; b2 rewrites A's 2, retiring one
        counts.append(store.ledger.chunk_count())
        store.commit_batch(batch("b3", DocumentWrite("B", "B.md", "h-empty", (), np.zeros((0, DIM), np.float32))))
        counts.append(store.ledger.chunk_count())
        assert store.ledger.chunk_count() == store.ledger.stats()["chunks"] == len(store.all_chunks())
        store.rollback()
        store.rollback()
        counts.append(store.ledger.chunk_count())
        assert counts == [0, 3, 2, 3]

    # ---- rollback --------------------------------------------------------------------------------------
    def test_rollback_of_last_batch_restores_replaced_chunks_exactly(self, store: Store) -> None:
        before, _ = self.replace_scenario(store)
        info = store.rollback()
        assert (info.batch_id, info.status) == ("b2", "rolled-back")
        assert store.get(["A#0", "A#1", "A#1-new", "B#0"]) == before
        assert store.ledger.document_hashes() == {"A": "hA1", "B": "hB"}
        assert ids(store.search_sparse("legacy", 10)) == ["A#1"]
        assert store.search_sparse("modern", 10) == []
        assert sorted(ids(store.search_dense(axis(1), 10))) == ["A#0", "A#1", "B#0"]
        assert ids(store.search_dense(axis(1), 1)) == ["A#1"]

    def test_rollback_by_id_and_then_the_batch_before(self, store: Store) -> None:
        self.replace_scenario(store)
        assert store.rollback("b2").batch_id == "b2"
        assert store.rollback().batch_id == "b1"  # the last one still committed
        assert store.ledger.document_hashes() == {}
        assert store.search_sparse("alpha", 10) == []
        assert store.search_dense(axis(0), 10) == []
        assert [(b.batch_id, b.status) for b in store.ledger.batches()] == [("b1", "rolled-back"),
                                                                      ("b2", "rolled-back")]

    def test_rollback_of_an_older_independent_batch(self, store: Store) -> None:
        store.commit_batch(batch("b1", document([make_chunk("A", 0, "alpha")], [axis(0)])))
        store.commit_batch(batch("b2", document([make_chunk("B", 0, "beta")], [axis(1)])))
        store.rollback("b1")
        assert list(store.ledger.document_hashes()) == ["B"]
        assert ids(store.search_dense(axis(0), 10)) == ["B#0"]

    def test_a_document_emptied_and_written_again_keeps_one_live_version(self, store: Store) -> None:
        """A batch can retire a document without writing any of it (the file was emptied). It holds no rows a
        later batch could retire, so the later version must still stop it being rolled back alone; then the
        old text would answer beside the new."""
        store.commit_batch(batch("b1", document([make_chunk("A", 0, "alpha old")], [axis(0)])))
        emptied = store.commit_batch(batch("b2", DocumentWrite("A", "A.md", "h-empty", (),
                                                               np.zeros((0, DIM), np.float32))))
        assert store.search_sparse("alpha", 10) == [] and store.ledger.document_hashes() == {}
        assert (emptied.replaced, emptied.retired) == (0, 1)  # retired without a successor, not replaced
        assert [(b.replaced, b.retired) for b in store.ledger.batches()] == [(0, 0), (0, 1)]
        store.commit_batch(batch("b3", document([make_chunk("A", 0, "alpha new")], [axis(1)])))
        with pytest.raises(StoreError, match="b3"):
            store.rollback("b2")
        assert [c.text for c in store.get(ids(store.search_sparse("alpha", 10)))] == ["alpha new"]
        assert store.rollback().batch_id == "b3" and store.rollback().batch_id == "b2"
        assert [c.text for c in store.get(ids(store.search_sparse("alpha", 10)))] == ["alpha old"]

    def test_rollback_with_no_batch_is_an_error(self, store: Store) -> None:
        with pytest.raises(StoreError):
            store.rollback()
        with pytest.raises(StoreError, match="nope"):
            store.rollback("nope")

    def test_rollback_of_a_batch_replaced_later_names_the_later_batch(self, store: Store) -> None:
        _, after = self.replace_scenario(store)
        snapshot = store.snapshot_id()
        with pytest.raises(StoreError, match="b2"):
            store.rollback("b1")
        assert store.snapshot_id() == snapshot
        assert store.get(["A#0", "A#1-new", "B#0"]) == after
        assert [b.status for b in store.ledger.batches()] == ["committed", "committed"]

    def test_rolling_back_twice_is_an_error(self, store: Store) -> None:
        self.replace_scenario(store)
        store.rollback("b2")
        snapshot = store.snapshot_id()
        with pytest.raises(StoreError, match="b2"):
            store.rollback("b2")
        assert store.snapshot_id() == snapshot

    def test_a_failing_batch_writes_nothing(self, store: Store) -> None:
        self.commit_corpus(store)
        snapshot, hashes = store.snapshot_id(), store.ledger.document_hashes()
        fresh = make_chunk("fresh", 0, "brand new words")
        clash = make_chunk("clash", 0, "steals a live record id", record_id="kube#0")
        with pytest.raises(StoreError):
            store.commit_batch(batch("b2", document([fresh], [axis(4)]), document([clash], [axis(5)])))
        assert store.snapshot_id() == snapshot
        assert store.ledger.document_hashes() == hashes
        assert store.search_sparse("brand", 10) == []
        assert [b.batch_id for b in store.ledger.batches()] == ["b1"]

    # ---- snapshots -------------------------------------------------------------------------------------
    def test_snapshot_id_changes_on_commit_and_rollback_only(self, store: Store) -> None:
        s0 = store.snapshot_id()
        assert store.snapshot_id() == s0
        self.commit_corpus(store)
        s1 = store.snapshot_id()
        assert s1 != s0
        store.search_dense(axis(0), 5)
        store.search_sparse("pods", 5)
        store.get(["kube#0"])
        store.ledger.batches()
        store.ledger.stats()
        assert store.snapshot_id() == s1
        store.commit_batch(batch("b2", document([make_chunk("x", 0, "x")], [axis(3)])))
        s2 = store.snapshot_id()
        assert s2 not in {s0, s1}
        store.rollback()
        s3 = store.snapshot_id()
        assert s3 != s2
        assert store.snapshot_id() == s3

    # ---- dead letters ----------------------------------------------------------------------------------
    def test_dead_letters_are_recorded_counted_and_resolved(self, store: Store) -> None:
        info = store.commit_batch(batch("b1", document([make_chunk("ok", 0, "fine")], [axis(0)]),
                                        dead_letters=[dead_letter("bad.md", "b1"),
                                                      dead_letter("worse.md", "b1", "not UTF-8 text", 1)]))
        assert info.dead_letters == 2
        letters = store.ledger.dead_letters()
        assert [(d.source, d.reason, d.location, d.attempts, d.batch_id) for d in letters] == [
            ("bad.md", "invalid front matter", "/corpus/bad.md:3", 1, "b1"),
            ("worse.md", "not UTF-8 text", "/corpus/worse.md:1", 1, "b1"),
        ]
        # The same source failing again: one letter, attempts incremented, reason and batch updated.
        store.commit_batch(batch("b2", dead_letters=[dead_letter("bad.md", "b2", "still invalid", 4)]))
        again = {d.source: d for d in store.ledger.dead_letters()}
        assert (again["bad.md"].attempts, again["bad.md"].reason, again["bad.md"].location,
                again["bad.md"].batch_id) == (2, "still invalid", "/corpus/bad.md:4", "b2")
        assert again["worse.md"].attempts == 1
        # Resolved sources are removed.
        store.commit_batch(batch("b3", document([make_chunk("bad", 0, "now fine")], [axis(1)]),
                                 resolved=["bad.md"]))
        assert [d.source for d in store.ledger.dead_letters()] == ["worse.md"]

    # ---- batches ---------------------------------------------------------------------------------------
    def test_batches_list_every_batch_with_its_status(self, store: Store) -> None:
        self.replace_scenario(store)
        store.commit_batch(batch("b3", document([make_chunk("C", 0, "gamma")], [axis(4)]), unchanged=2,
                                 dead_letters=[dead_letter("bad.md", "b3")], label="third"))
        store.rollback("b3")
        got = [(b.batch_id, b.status, b.added, b.replaced, b.unchanged, b.dead_letters)
               for b in store.ledger.batches()]
        assert got == [("b1", "committed", 3, 0, 0, 0), ("b2", "committed", 2, 1, 0, 0),
                       ("b3", "rolled-back", 1, 0, 2, 1)]
        assert [b.label for b in store.ledger.batches()] == ["label of b1", "label of b2", "third"]
        stats = store.ledger.stats()  # beside the list: it had counted 2 batches where `evidex batches` listed 3
        assert (stats["batches"], stats["rolled_back_batches"]) == (2, 1)
        assert all(b.finished_at is not None and b.finished_at >= b.started_at for b in store.ledger.batches())
