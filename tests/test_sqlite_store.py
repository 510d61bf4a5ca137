"""SqliteStore: the store contract, plus what only the SQLite file can promise (integrity, reopening)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest

from evidex.errors import StoreError
from evidex.retrieval.corpus import read_ahead
from evidex.stores.protocol import DocumentWrite
from evidex.stores.sqlite import INDEX_FILE, SqliteStore
from evidex.testing.store_contract import (
    DIM,
    TITLE_WEIGHT_CASES,
    StoreContract,
    axis,
    batch,
    check_title_weight,
    dead_letter,
    document,
    make_chunk,
)
from evidex.types import Provenance, SearchFilters


class TestSqliteStore(StoreContract):
    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[SqliteStore]:
        s = SqliteStore(tmp_path / "idx")
        yield s
        problems = s.check_integrity()  # whatever the test did, the file must still be consistent
        s.close()
        assert problems == []


def test_integrity_holds_after_every_operation(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "idx")
    steps: list[Callable[[], object]] = [
        lambda: store.commit_batch(batch("b1", document([make_chunk("A", 0, "alpha one"),
                                                         make_chunk("A", 1, "alpha two")],
                                                        [axis(0), axis(1)]),
                                         document([make_chunk("B", 0, "beta")], [axis(2)]),
                                         dead_letters=[dead_letter("bad.md", "b1")])),
        lambda: store.commit_batch(batch("b2", document([make_chunk("A", 0, "alpha one"),
                                                         make_chunk("A", 1, "alpha new", record_id="A#1n")],
                                                        [axis(0), axis(3)]), resolved=["bad.md"])),
        lambda: store.commit_batch(batch("b3", document([make_chunk("C", 0, "gamma")], [axis(4)]))),
        lambda: store.rollback("b2"),
        lambda: store.rollback(),
        lambda: store.commit_batch(batch("b4", document([make_chunk("A", 0, "alpha again", record_id="A#0x")],
                                                        [axis(5)]))),
    ]
    for n, step in enumerate(steps, start=1):
        step()
        assert store.check_integrity() == [], f"after step {n}"
    # Failed operations leave it consistent too.
    with pytest.raises(StoreError):
        store.rollback("b1")  # b4 replaced A
    assert store.check_integrity() == []
    with pytest.raises(StoreError):
        store.commit_batch(batch("b5", document([make_chunk("D", 0, "delta", record_id="B#0")], [axis(6)])))
    assert store.check_integrity() == []
    store.close()


def test_reopening_the_file_sees_the_same_data(tmp_path: Path) -> None:
    directory = tmp_path / "idx"
    store = SqliteStore(directory)
    a_chunks = [make_chunk("A", 0, "alpha one"), make_chunk("A", 1, "alpha two")]
    store.commit_batch(batch("b1", document(a_chunks, [axis(0), axis(1)]),
                             dead_letters=[dead_letter("bad.md", "b1")]))
    store.commit_batch(batch("b2", document([make_chunk("B", 0, "beta")], [axis(2)])))
    store.commit_batch(batch("b3", document([make_chunk("C", 0, "gamma alpha")], [axis(3)])))
    store.rollback()

    def observe(s: SqliteStore) -> tuple[object, ...]:
        return (s.get(["A#0", "A#1", "B#0", "C#0"]), s.search_dense(axis(0), 10),
                s.search_sparse("alpha", 10), s.ledger.document_hashes(), s.ledger.batches(), s.ledger.dead_letters(),
                s.snapshot_id(), s.ledger.stats())

    seen = observe(store)
    store.close()
    assert (directory / INDEX_FILE).is_file()
    reopened = SqliteStore(directory)
    assert observe(reopened) == seen
    assert reopened.check_integrity() == []
    reopened.close()


def test_a_second_connection_sees_new_commits(tmp_path: Path) -> None:
    """The dense matrix is cached per snapshot; a commit by another process must invalidate it."""
    reader, writer = SqliteStore(tmp_path / "idx"), SqliteStore(tmp_path / "idx")
    writer.commit_batch(batch("b1", document([make_chunk("A", 0, "alpha")], [axis(0)])))
    assert [h.record_id for h in reader.search_dense(axis(0), 10)] == ["A#0"]
    writer.commit_batch(batch("b2", document([make_chunk("B", 0, "beta")], [axis(1)])))
    assert [h.record_id for h in reader.search_dense(axis(1), 10)] == ["B#0", "A#0"]
    assert reader.snapshot_id() == writer.snapshot_id()
    writer.rollback()
    assert [h.record_id for h in reader.search_dense(axis(1), 10)] == ["A#0"]
    reader.close()
    writer.close()


def reader_and_writer(tmp_path: Path) -> tuple[SqliteStore, SqliteStore, list[str]]:
    """Two stores on one index holding records A#0 ("alpha") and B#0 ("beta"), and the SQL the reader runs."""
    reader, writer = SqliteStore(tmp_path / "idx"), SqliteStore(tmp_path / "idx")
    writer.commit_batch(batch("b1", document([make_chunk("A", 0, "alpha")], [axis(0)]),
                              document([make_chunk("B", 0, "beta")], [axis(1)])))
    statements: list[str] = []
    reader._db.set_trace_callback(statements.append)
    return reader, writer, statements

def test_records_are_read_once_per_snapshot(tmp_path: Path) -> None:
    """A search asks for the same records several times (its pool, rescues, name look-ups), and a server's
    requests for the same pages: within one snapshot a record is read and decoded once. A commit, here by
    another process, or a rollback reads it again: a replaced record keeps its id, so a record kept past its
    snapshot would answer with the old text."""
    reader, writer, statements = reader_and_writer(tmp_path)

    def reads() -> int:
        return sum("FROM records INDEXED BY" in s for s in statements)

    first = reader.get(["A#0", "B#0"])
    assert [c.text for c in first] == ["alpha", "beta"] and reads() == 1
    assert reader.get(["B#0", "A#0", "B#0"]) == first[::-1]
    assert reader.get(["A#0", "missing"]) == first[:1]
    assert reads() == 2  # only the record the index does not hold was asked for again
    writer.commit_batch(batch("b2", document([make_chunk("A", 0, "alpha replaced")], [axis(2)])))
    assert [c.text for c in reader.get(["A#0", "B#0"])] == ["alpha replaced", "beta"]
    writer.rollback()
    assert [c.text for c in reader.get(["A#0", "B#0"])] == ["alpha", "beta"]
    reader.close()
    writer.close()


def test_reading_every_record_keeps_them_for_get_until_the_index_changes(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A warm-up reads every record (`all_chunks`); when they fit in the record cache, the searches after it read
    none of them again, and a commit (here by another process) still shows the new text."""
    import evidex.stores.sqlite as sqlite_store

    reader, writer, statements = reader_and_writer(tmp_path)

    def reads() -> int:
        return sum("FROM records INDEXED BY" in s for s in statements)

    assert [c.text for c in reader.all_chunks()] == ["alpha", "beta"]
    assert [c.text for c in reader.get(["B#0", "A#0"])] == ["beta", "alpha"] and reads() == 0
    writer.commit_batch(batch("b2", document([make_chunk("A", 0, "alpha replaced")], [axis(2)])))
    assert [c.text for c in reader.get(["A#0", "B#0"])] == ["alpha replaced", "beta"] and reads() == 1
    monkeypatch.setattr(sqlite_store, "_CHUNK_CACHE_ROWS", 1)  # more records than the cache holds: none kept
    fresh = SqliteStore(tmp_path / "idx")
    fresh._db.set_trace_callback(statements.append)
    fresh.all_chunks()
    assert [c.text for c in fresh.get(["A#0"])] == ["alpha replaced"] and reads() == 2
    for store in (reader, writer, fresh):
        store.close()


def test_the_record_cache_stays_within_its_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A call asking for more records than the cache holds returns them all; the cache starts over when full."""
    import evidex.stores.sqlite as sqlite_store

    monkeypatch.setattr(sqlite_store, "_CHUNK_CACHE_ROWS", 2)
    store = SqliteStore(tmp_path / "idx")
    store.commit_batch(batch("b1", *(document([make_chunk(d, 0, f"text {d}")], [axis(i)])
                                     for i, d in enumerate("ABCDE"))))
    ids = [f"{d}#0" for d in "ABCDE"]
    assert [c.record_id for c in store.get(ids)] == ids
    assert store._chunk_cache.used <= 2
    assert [c.record_id for c in store.get(ids[:2])] == ids[:2]
    assert [c.record_id for c in store.get(ids[2:])] == ids[2:]
    assert store._chunk_cache.used <= 2
    assert [c.text for c in store.get(ids)] == [f"text {d}" for d in "ABCDE"]
    store.close()


@pytest.mark.parametrize(("title_weight", "first"), TITLE_WEIGHT_CASES)
def test_title_weight_moves_title_matches(tmp_path: Path, title_weight: float, first: str) -> None:
    store = SqliteStore(tmp_path / "idx", title_weight=title_weight)
    try:
        check_title_weight(store, first)
    finally:
        store.close()


def test_a_file_from_a_newer_schema_is_refused(tmp_path: Path) -> None:
    SqliteStore(tmp_path / "idx").close()
    db = sqlite3.connect(tmp_path / "idx" / INDEX_FILE)
    db.execute("PRAGMA user_version = 99")
    db.close()
    with pytest.raises(StoreError, match="schema 99"):
        SqliteStore(tmp_path / "idx")



def test_an_index_from_before_retired_counts_opens_with_its_batches_intact(tmp_path: Path) -> None:
    """Schema 4 added `batches.retired`; an index written at schema 3 migrates in place, counting none."""
    with closing(SqliteStore(tmp_path / "idx")) as old:
        old.commit_batch(batch("b1", document([make_chunk("A", 0, "alpha")], [axis(0)]), label="before"))
    db = sqlite3.connect(tmp_path / "idx" / INDEX_FILE)
    db.execute("ALTER TABLE batches DROP COLUMN retired")
    db.execute("PRAGMA user_version = 3")
    db.commit()
    db.close()
    with closing(SqliteStore(tmp_path / "idx")) as store:
        assert [(b.batch_id, b.added, b.replaced, b.retired, b.label) for b in store.ledger.batches()] == [
            ("b1", 1, 0, 0, "before")]
        gone = store.commit_batch(batch("b2", DocumentWrite("A", "A.md", "h", (), np.zeros((0, DIM), np.float32))))
        assert (gone.replaced, gone.retired) == (0, 1)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    s = SqliteStore(tmp_path / "idx")
    yield s
    s.close()


def test_rollback_restores_a_dead_letter_the_batch_resolved(store: SqliteStore) -> None:
    store.commit_batch(batch("b1", dead_letters=[dead_letter("bad.md", "b1")]))
    store.commit_batch(batch("b2", document([make_chunk("bad", 0, "fixed")], [axis(0)]), resolved=["bad.md"]))
    store.rollback("b2")  # the fixed document is gone again...
    assert [d.source for d in store.ledger.dead_letters()] == ["bad.md"]  # ...so its dead letter must be back


def test_rollback_keeps_a_dead_letter_that_failed_before_the_batch(store: SqliteStore) -> None:
    store.commit_batch(batch("b1", dead_letters=[dead_letter("bad.md", "b1")]))
    store.commit_batch(batch("b2", dead_letters=[dead_letter("bad.md", "b2")]))  # failed again: attempts 2
    store.rollback("b2")
    assert [(d.source, d.attempts) for d in store.ledger.dead_letters()] == [("bad.md", 1)]


def test_a_filtered_full_text_search_ranks_as_filtering_every_match_would(store: SqliteStore) -> None:
    """A filter is a mask over every word's matches: the result must be the unfiltered ranking with the failing
    records removed, at every limit. Here the best matches are exactly the ones the filter removes."""
    docs = []
    for i in range(60):
        secret = i < 20
        text = ("alpha " * (8 if secret else 1 + i % 3)) + f"filler {i}"
        labels = ("security",) if secret else ("eng",)
        chunk = make_chunk(f"d{i:02d}", 0, text, provenance=Provenance(access_labels=labels))
        docs.append(document([chunk], [axis(i % 8)]))
    store.commit_batch(batch("b1", *docs))
    everything = store.search_sparse("alpha", 1000)
    labels = {c.record_id: c.provenance.access_labels for c in store.get([h.record_id for h in everything])}
    assert [labels[h.record_id] for h in everything[:20]] == [("security",)] * 20  # the filter removes the top
    for wanted in (("eng",), ("security",), ("eng", "security")):
        expected = [h for h in everything if set(labels[h.record_id]) & set(wanted)]
        for limit in (1, 5, 10, 19, 20, 21, 30, 40, 45, 100):
            got = store.search_sparse("alpha", limit, SearchFilters(access_labels=wanted))
            assert [h.record_id for h in got] == [h.record_id for h in expected[:limit]], (wanted, limit)
            # "alpha" is in every record, readable or not: its rarity (FTS5 floors it) is the same either way.
            assert [h.score for h in got] == pytest.approx([h.score for h in expected[:limit]], rel=1e-9)


def test_vectors_of_another_dimension_are_refused_whole(store: SqliteStore) -> None:
    """A batch from another embedding model (here three more dimensions than the store holds) had been committed,
    after which every dense search failed. It is refused, atomically, and a query of the wrong size gets an
    error that says what happened."""
    store.commit_batch(batch("b1", document([make_chunk("a", 0, "alpha")], [axis(0)])))
    other = document([make_chunk("b", 0, "bravo")], [np.ones(DIM + 3, dtype=np.float32)])
    with pytest.raises(StoreError, match="embedding model changed"):
        store.commit_batch(batch("b2", other))
    assert [b.batch_id for b in store.ledger.batches()] == ["b1"] and store.search_sparse("bravo", 5) == []
    assert [h.record_id for h in store.search_dense(axis(0), 5)] == ["a#0"]
    with pytest.raises(StoreError, match="another model"):
        store.search_dense(np.ones(DIM + 3, dtype=np.float32), 5)


def _labelled(doc_id: str, text: str, label: str, i: int) -> DocumentWrite:
    return document([make_chunk(doc_id, 0, text, provenance=Provenance(access_labels=(label,)))], [axis(i % DIM)])


def _rotation_store(directory: Path, restricted_text: str) -> SqliteStore:
    """Readable runbooks about key rotation, and one restricted page whose text the caller chooses."""
    store = SqliteStore(directory)
    readable = ["key rotation schedule for the vault", "rotation of the signing key every quarter",
                "key ceremony checklist", "on-call rotation and paging", "the vault seals on restart",
                "signing service deploy steps"]
    store.commit_batch(batch("b1", *(_labelled(f"r{i}", t, "eng", i) for i, t in enumerate(readable)),
                             _labelled("x", restricted_text, "security", 7)))
    return store


def test_restricted_text_never_moves_a_readable_bm25_score(tmp_path: Path) -> None:
    """BM25's word rarity is taken over what the requester may read: two indexes that differ only in the words
    of a restricted page (of the same length) give every readable record the same score and rank, whether the
    search is filtered to the reader or spans every record with the reader's scope (a declared family's
    rescue). Unscoped (an operator's search), the scores differ: the check can fail."""
    holds = _rotation_store(tmp_path / "holds", "rotation rotation vault signing")
    lacks = _rotation_store(tmp_path / "lacks", "quokka quokka marmot wombat")
    eng = SearchFilters(access_labels=("eng",))
    try:
        for query in ("key rotation", "vault signing rotation", "signing"):
            assert holds.search_sparse(query, 10, eng) == lacks.search_sparse(query, 10, eng), query
            spanning = [h for h in holds.search_sparse(query, 10, scope=("eng",)) if h.record_id != "x#0"]
            assert spanning == lacks.search_sparse(query, 10, scope=("eng",)), query
            assert ([h for h in holds.search_sparse(query, 10) if h.record_id != "x#0"]
                    != lacks.search_sparse(query, 10)), query
    finally:
        holds.close()
        lacks.close()


def _fts5_ranking(store: SqliteStore, query: str, *, title_only: bool = False, where: str = "",
                  params: tuple[str, ...] = ()) -> list[tuple[str, float]]:
    """FTS5 ranking the OR query itself, in SQL on the index file: the reference the store's word-by-word
    search must reproduce."""
    from evidex.stores.sqlite_bm25 import fts_query

    match = fts_query(query)
    if title_only:
        match = "{title} : (" + match + ")"
    with closing(sqlite3.connect(store.path)) as db:
        rows = db.execute(
            "SELECT r.record_id, bm25(records_fts, ?, 1.0) AS s FROM records_fts JOIN records r "
            f"ON r.rowid = records_fts.rowid WHERE records_fts MATCH ? {where} ORDER BY s, r.rowid LIMIT 10",
            (store.title_weight, match, *params)).fetchall()
    return [(record_id, -score) for record_id, score in rows]


def test_bm25_summed_word_by_word_is_fts5s_own_to_the_last_bit(tmp_path: Path) -> None:
    """The store sums each word's bm25() instead of asking FTS5 to rank the OR query: ids, order and scores
    must be FTS5's exactly (title weight, title-only searches, filters, and readers who may read every record
    included). Words that stem alike ("keys", "key") and a word no record holds are in the queries."""
    store = SqliteStore(tmp_path / "idx", title_weight=2.5)
    texts = ["key rotation schedule for the vault", "rotation of the signing key every quarter key key",
             "key ceremony checklist", "on-call rotation and paging", "the vault seals on restart vault",
             "keys rotate quarterly; the signing keys rotate yearly", "paging runbook: rotation handover"]
    docs = [document([make_chunk(f"d{i}", 0, t, title="Vault key" if i % 2 else "Paging",
                                 provenance=Provenance(access_labels=("eng" if i % 2 else "security",),
                                                       evidence_family="keys" if i % 3 else "ops"))],
                     [axis(i % DIM)]) for i, t in enumerate(texts)]
    store.commit_batch(batch("b1", *docs))
    try:
        for query in ("key rotation vault", "paging key keys", "quarter", "signing rotate yearly quokka"):
            for title_only in (False, True):
                expected = _fts5_ranking(store, query, title_only=title_only)
                got = [(h.record_id, h.score) for h in store.search_sparse(query, 10, title_only=title_only)]
                assert got == expected, (query, title_only)
                everyone = store.search_sparse(query, 10, scope=("eng", "security"), title_only=title_only)
                assert [h.record_id for h in everyone] == [r for r, _ in expected], (query, title_only)
                assert [h.score for h in everyone] == pytest.approx([s for _, s in expected], rel=1e-9)
            ops = store.search_sparse(query, 10, SearchFilters(families=("ops",)))
            assert [(h.record_id, h.score) for h in ops] == _fts5_ranking(
                store, query, where="AND r.evidence_family = ?", params=("ops",)), query
            one = store.search_sparse(query, 10, SearchFilters(doc_ids=("d5",)))
            assert [(h.record_id, h.score) for h in one] == _fts5_ranking(
                store, query, where="AND r.doc_id = ?", params=("d5",)), query
    finally:
        store.close()


def test_scoped_bm25_equals_fts5_on_the_readable_records_alone(tmp_path: Path) -> None:
    """The reference: word rarity over what the reader may read is FTS5's own bm25() on an index holding only
    those records. The restricted rows are as long as the readable ones on average, so the one statistic still
    taken over every row (the average length) is the same in both."""
    readable = ["key rotation schedule for vault service", "rotation of signing key every quarter",
                "ceremony checklist for the security team", "on call paging policy and escalation",
                "deploy pipeline stages and canary gates", "database backups run every single night",
                "incident review template and its owners", "network policies isolate the team namespaces"]
    restricted = ["rotation rotation vault signing key holder", "quorum envelope rotation ceremony key list"]
    assert {len(t.split()) for t in readable + restricted} == {6}  # one length: the average is the same
    mixed = SqliteStore(tmp_path / "mixed")
    alone = SqliteStore(tmp_path / "alone")
    mixed.commit_batch(batch("b1", *(_labelled(f"r{i}", t, "eng", i) for i, t in enumerate(readable)),
                             *(_labelled(f"x{i}", t, "security", i) for i, t in enumerate(restricted))))
    alone.commit_batch(batch("b1", *(_labelled(f"r{i}", t, "eng", i) for i, t in enumerate(readable))))
    eng = SearchFilters(access_labels=("eng",))
    try:
        for query in ("key rotation", "vault signing ceremony", "rotation"):
            scoped, reference = mixed.search_sparse(query, 10, eng), alone.search_sparse(query, 10)
            assert [h.record_id for h in scoped] == [h.record_id for h in reference], query
            assert [h.score for h in scoped] == pytest.approx([h.score for h in reference], rel=1e-9), query
    finally:
        mixed.close()
        alone.close()


def test_a_search_wider_than_its_readers_keeps_each_audiences_best(tmp_path: Path) -> None:
    """A declared family's rescue searches every record with the reader's word statistics: restricted hits
    that match better must not push readable ones out of the first `limit` (each audience gets its own)."""
    holds = _rotation_store(tmp_path / "holds", "rotation rotation rotation key key vault")
    lacks = _rotation_store(tmp_path / "lacks", "quokka quokka quokka marmot marmot wombat")
    try:
        for limit in (1, 2, 3):
            spanning = holds.search_sparse("key rotation", limit, scope=("eng",))
            assert "x#0" in [h.record_id for h in spanning]
            readable = [h for h in spanning if h.record_id != "x#0"]
            assert readable == lacks.search_sparse("key rotation", limit, scope=("eng",)), limit
            assert len(readable) == limit
    finally:
        holds.close()
        lacks.close()


def test_reading_ahead_changes_no_result_and_spares_the_searches_their_reads(tmp_path: Path) -> None:
    """A server's warm-up reads the common words' matches ahead (`read_ahead`): a search of them then reads
    nothing more, and every result (plain, filtered, scoped, title-only, a word no record holds) is what a store
    that read nothing ahead gives, score for score."""
    ahead = _rotation_store(tmp_path / "idx", "rotation ceremony for the quorum keys")
    cold = SqliteStore(tmp_path / "idx")
    eng = SearchFilters(access_labels=("eng",))
    queries = ("key rotation vault", "signing keys", "paging quokka", "ceremony")
    try:
        read_ahead(ahead, ["key", "rotation", "vault", "signing", "keys", "paging", "quokka", "ceremony"])
        read = ahead._word_cache.used
        assert read > 0
        for query in queries:
            assert ahead.search_sparse(query, 10) == cold.search_sparse(query, 10), query
            assert ahead.search_sparse(query, 10, eng) == cold.search_sparse(query, 10, eng), query
            assert ahead.search_sparse(query, 10, scope=("eng",)) == cold.search_sparse(query, 10, scope=("eng",))
        assert ahead._word_cache.used == read  # every word was there already
        assert (ahead.search_sparse("rotation vault", 10, title_only=True)
                == cold.search_sparse("rotation vault", 10, title_only=True))
    finally:
        ahead.close()
        cold.close()


def test_the_word_cache_stays_within_its_bound_mid_search(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A search that mixes a cached word with one that overflows the cache had lost the cached word when the
    cache started over (KeyError): each search keeps what it read, and the cache never exceeds its bound."""
    import evidex.stores.sqlite as sqlite_store

    monkeypatch.setattr(sqlite_store, "_WORD_CACHE_ROWS", 3)
    store = _rotation_store(tmp_path / "idx", "restricted words")
    eng = SearchFilters(access_labels=("eng",))
    try:
        first = store.search_sparse("rotation", 10, eng)  # 3 rows: the cache is full
        both = store.search_sparse("rotation key", 10, eng)  # "key" (3 rows) does not fit beside it
        assert first and both and {h.record_id for h in first} <= {h.record_id for h in both}
        assert store._word_cache.used <= 3
        assert store.search_sparse("rotation key", 10, eng) == both
    finally:
        store.close()


def test_a_filter_without_labels_ranks_as_filtering_every_match_would(store: SqliteStore) -> None:
    """A filter without access labels (validity at an instant) ranks the matches it passes as the unfiltered
    search does, at every limit, where the best matches are exactly the ones the filter removes."""
    from datetime import UTC, datetime

    docs = []
    for i in range(60):
        expired = i < 20
        text = ("alpha " * (8 if expired else 1 + i % 3)) + f"filler {i}"
        until = datetime(2020, 1, 1, tzinfo=UTC) if expired else None
        chunk = make_chunk(f"d{i:02d}", 0, text, provenance=Provenance(access_labels=("eng",), expires_at=until))
        docs.append(document([chunk], [axis(i % 8)]))
    store.commit_batch(batch("b1", *docs))
    everything = store.search_sparse("alpha", 1000)
    assert [h.record_id for h in everything[:20]] == sorted(f"d{i:02d}#0" for i in range(20))
    now = SearchFilters(valid_at=datetime(2026, 1, 1, tzinfo=UTC))
    expected = [h for h in everything if int(h.record_id[1:3]) >= 20]
    for limit in (1, 5, 19, 20, 21, 39, 40, 45, 100):
        assert store.search_sparse("alpha", limit, now) == expected[:limit], limit
