"""MilvusStore on Milvus Lite: the store contract, plus what only this backend must prove (quoting of
filter literals, crash repair of its multi-step writes, reopening, configuration).

One Milvus Lite server per module (it starts in ~1 s); every test gets its own pair of collections.
"""

from __future__ import annotations

import dataclasses
import itertools
import sys
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")

from hypothesis import given
from hypothesis import strategies as st
from milvus_lite.search.filter.tokens import TokenKind, tokenize  # type: ignore[import-untyped]

from evidex.config import Config
from evidex.errors import BackendUnavailable, ConfigError, StoreError
from evidex.retrieval.corpus import inlink_contexts
from evidex.stores.milvus import MilvusStore, collection_name, query_terms
from evidex.stores.milvus_collections import MilvusCollections
from evidex.stores.milvus_expression import literal as _literal
from evidex.stores.sqlite import SqliteStore
from evidex.testing.store_contract import (
    DIM,
    T0,
    TITLE_WEIGHT_CASES,
    StoreContract,
    axis,
    batch,
    check_title_weight,
    dead_letter,
    document,
    make_chunk,
    unit,
)
from evidex.types import Provenance, SearchFilters

_names = itertools.count()


@pytest.fixture(scope="module")
def lite_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("milvus") / "lite.db")


@pytest.fixture
def open_store(lite_uri: str) -> Iterator[Callable[..., MilvusStore]]:
    """Opens stores on fresh collections (or on `collection=` again, as a reopen); drops them all after."""
    opened: list[MilvusStore] = []

    def open_(collection: str | None = None, **kwargs: Any) -> MilvusStore:
        store = MilvusStore(lite_uri, collection=collection or f"t{next(_names)}", dim=DIM, **kwargs)
        opened.append(store)
        return store

    yield open_
    dropped = set()
    for store in reversed(opened):  # a test may have closed an earlier store of the same collection
        if store.collection not in dropped:
            store.drop()
            dropped.add(store.collection)
        store.close()


class TestMilvusStore(StoreContract):
    @pytest.fixture
    def store(self, open_store: Callable[..., MilvusStore]) -> MilvusStore:
        return open_store()


class TestMilvusStoreInTinyPages(StoreContract):
    """The contract again with pages of 2 ids and 3 sequence numbers, so every query and scan that pages
    (`in [...]` lists, scans by sequence range, upserts) crosses page boundaries."""

    @pytest.fixture
    def store(self, open_store: Callable[..., MilvusStore], monkeypatch: pytest.MonkeyPatch) -> MilvusStore:
        monkeypatch.setattr(MilvusCollections, "page", 2)
        monkeypatch.setattr(MilvusCollections, "seq_page", 3)
        return open_store()


# ---- literals: a value is always one string, never a piece of expression --------------------------------
HOSTILE = ['a" or 1==1 or "', "a' or 1==1 or '", 'back\\slash', 'trailing\\', '\\"', 'new\nline', 'cr\rlf',
           'tab\tbed', '"', "'", '', 'ünïcode ✓', 'x"] or retired_by != "" or doc_id in ["']


@pytest.mark.parametrize("value", HOSTILE)
def test_literal_reads_back_as_one_string(value: str) -> None:
    tokens = tokenize(_literal(value))
    assert [t.kind for t in tokens] == [TokenKind.STRING, TokenKind.EOF]
    assert tokens[0].value == value


@given(st.text())
def test_any_text_is_quoted_into_exactly_one_literal(value: str) -> None:
    tokens = tokenize(f"doc_id == {_literal(value)} and x")
    assert [t.kind for t in tokens] == [TokenKind.IDENT, TokenKind.EQ, TokenKind.STRING, TokenKind.AND,
                                        TokenKind.IDENT, TokenKind.EOF]
    assert tokens[2].value == value


def test_literal_escapes() -> None:
    assert _literal('a"b') == '"a\\"b"'
    assert _literal("a\\b") == '"a\\\\b"'
    assert _literal("a\nb") == '"a\\nb"'


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_filter_values_do_not_inject(open_store: Callable[..., MilvusStore], hostile: str) -> None:
    store = open_store()
    store.commit_batch(batch(
        "b1",
        document([make_chunk("plain", 0, "common words", provenance=Provenance(
            access_labels=("eng",), evidence_family="deploy"))], [axis(0)]),
        document([make_chunk(hostile or "empty-id", 0, "common words", source=f"{hostile}.md",
                             provenance=Provenance(access_labels=(hostile,) if hostile else (),
                                                   evidence_family=hostile))], [axis(1)])))
    target = f"{hostile or 'empty-id'}#0"
    for filters in (SearchFilters(access_labels=(hostile,)), SearchFilters(families=(hostile,)),
                    SearchFilters(doc_ids=(hostile or "empty-id",))):
        if not hostile and filters.doc_ids is None:
            continue  # an empty label / family is not stored as one
        assert [h.record_id for h in store.search_dense(axis(1), 10, filters)] == [target]
        assert [h.record_id for h in store.search_sparse("common", 10, filters)] == [target]
    # The hostile text as a query is words, and as a record id it is just an id.
    assert {h.record_id for h in store.search_sparse(hostile, 10)} <= {"plain#0", target}
    assert [c.record_id for c in store.get([target, 'x" or 1==1 or "'])] == [target]


def test_query_terms_drop_stopwords_and_operators() -> None:
    assert query_terms('What is "the" NEAR(pods, ingress)* of snake_case?') == ["near", "pods", "ingress",
                                                                                  "snake_case"]
    assert query_terms("the of and ?! _ __") == []


# ---- the same answers as the SQLite store (the reference) on random filters -----------------------------
_SOURCES = ["docs/deploy/a.md", "docs/deploy/b_v2.md", "docs/net/c.md", "blog/d.md", "docs/net/e.md",
            'odd "quoted" name.md']
_LABELS = ["eng", "ops", "hr", "a\"b"]
_FAMILIES = ["deploy", "network", None]


def _twins(lite_uri: str, directory: Path, collection: str,
           text: Callable[[int], str]) -> Iterator[tuple[SqliteStore, MilvusStore]]:
    """A SQLite and a Milvus store holding the same 24 one-chunk documents (the i-th with `text(i)`), their
    provenance varied over `_LABELS`, `_FAMILIES` and times around T0."""
    t0 = T0
    docs = []
    for i in range(24):
        provenance = Provenance(
            access_labels=tuple(sorted({_LABELS[i % 4], _LABELS[(i * 7) % 4]})) if i % 5 else (),
            evidence_family=_FAMILIES[i % 3], published_at=t0 + timedelta(days=i % 6) if i % 4 else None,
            expires_at=t0 + timedelta(days=3 + i % 5) if i % 3 else None)
        chunk = make_chunk(f"d{i}", 0, text(i), source=_SOURCES[i % 6], provenance=provenance)
        docs.append(document([chunk], [unit(1.0, i / 10, (i % 5) / 7)]))
    sqlite = SqliteStore(directory)
    milvus = MilvusStore(lite_uri, collection=collection, dim=DIM)
    for store in (sqlite, milvus):
        store.commit_batch(batch("b1", *docs))
    yield sqlite, milvus
    milvus.drop()
    milvus.close()
    sqlite.close()


@pytest.fixture(scope="module")
def twin_stores(lite_uri: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SqliteStore, MilvusStore]]:
    yield from _twins(lite_uri, tmp_path_factory.mktemp("twin"), "twin", lambda i: f"common words number{i % 3} text")


_FILTERS = st.builds(
    SearchFilters,
    access_labels=st.none() | st.lists(st.sampled_from([*_LABELS, "nobody"]), max_size=3).map(tuple),
    valid_at=st.none() | st.integers(-2, 12).map(lambda d: T0 + timedelta(days=d / 2)),
    families=st.none() | st.lists(st.sampled_from(["deploy", "network", "none"]), max_size=2).map(tuple),
    source_pattern=st.none() | st.sampled_from([r"^docs/", r"deploy", r"_v\d", r"\.md$", r"quoted", r"^zzz"]),
    doc_ids=st.none() | st.lists(st.sampled_from([f"d{i}" for i in range(30)]), max_size=5).map(tuple))


@given(filters=_FILTERS, limit=st.integers(1, 30))
def test_filters_match_the_sqlite_store(twin_stores: tuple[SqliteStore, MilvusStore], filters: SearchFilters,
                                        limit: int) -> None:
    sqlite, milvus = twin_stores
    query = unit(1.0, 0.5, 0.3)
    assert [h.record_id for h in milvus.search_dense(query, limit, filters)] == \
        [h.record_id for h in sqlite.search_dense(query, limit, filters)]
    want = {h.record_id for h in sqlite.search_sparse("common", 100, filters)}
    assert {h.record_id for h in milvus.search_sparse("common", 100, filters)} == want


def _linking_text(i: int) -> str:
    """Links of the i-th twin document to two other pages of `_SOURCES` (one Markdown, one HTML), and to its own."""
    def page(n: int) -> str:
        return _SOURCES[n % 5].removesuffix(".md")  # not the sixth: its name has a space, which no link holds

    return (f"words before [page {i}](/{page(i + 1)}/#part) and between, "
            f'<a href="https://example.org/{page(i + 3)}.html">another</a> after, and [itself](/{page(i)}/) '
            f"number{i}")


@pytest.fixture(scope="module")
def linked_twins(lite_uri: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SqliteStore, MilvusStore]]:
    yield from _twins(lite_uri, tmp_path_factory.mktemp("linked"), "linked_twin", _linking_text)


@given(filters=_FILTERS)
def test_inlink_contexts_match_the_sqlite_store(linked_twins: tuple[SqliteStore, MilvusStore],
                                                filters: SearchFilters) -> None:
    sqlite, milvus = linked_twins
    want = inlink_contexts(sqlite, _SOURCES, filters)
    assert inlink_contexts(milvus, _SOURCES, filters) == want
    assert inlink_contexts(milvus, _SOURCES[::-1], filters) == inlink_contexts(sqlite, _SOURCES[::-1], filters)


# ---- crash repair ---------------------------------------------------------------------------------------
class Crash(BaseException):
    """Stands for the process dying: `commit_batch` cleans up after an Exception, not after this."""


def crash_after(store: MilvusStore, writes: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the store's `writes + 1`-th write die before it happens."""
    real = store._io.mutate
    count = itertools.count()

    def mutate(op: str, collection: str, **kwargs: Any) -> None:
        if next(count) >= writes:
            raise Crash(f"killed before write {writes + 1}")
        real(op, collection, **kwargs)

    monkeypatch.setattr(store._io, "mutate", mutate)


def first_batch(store: MilvusStore) -> None:
    store.commit_batch(batch("b1", document([make_chunk("A", 0, "alpha intro"), make_chunk("A", 1, "alpha legacy")],
                                            [axis(0), axis(1)], doc_hash="hA1"),
                             document([make_chunk("B", 0, "beta notes")], [axis(2)], doc_hash="hB"),
                             dead_letters=[dead_letter("bad.md", "b1")]))


def second_batch() -> Any:
    return batch("b2", document([make_chunk("A", 0, "alpha intro"),
                                 make_chunk("A", 1, "alpha modern", record_id="A#1-new")],
                                [axis(0), axis(3)], doc_hash="hA2"),
                 document([make_chunk("C", 0, "gamma")], [axis(4)], doc_hash="hC"),
                 dead_letters=[dead_letter("worse.md", "b2")], resolved=["bad.md"])


def observe(store: MilvusStore) -> tuple[object, ...]:
    stats = store.ledger.stats()
    return (store.get(["A#0", "A#1", "A#1-new", "B#0", "C#0"]), store.search_dense(axis(1), 10),
            store.search_sparse("alpha legacy modern gamma", 10), store.ledger.document_hashes(),
            [(b.batch_id, b.status, b.added, b.replaced, b.unchanged, b.dead_letters, b.label)
             for b in store.ledger.batches()],
            store.ledger.dead_letters(), stats["documents"], stats["chunks"], stats["retired_chunks"])


def record_writes(store: MilvusStore, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The store's writes from now on, as the keyword arguments of each `MilvusCollections.mutate` call."""
    writes: list[dict[str, Any]] = []
    real = store._io.mutate

    def mutate(op: str, collection: str, **kwargs: Any) -> None:
        writes.append(kwargs)
        real(op, collection, **kwargs)

    monkeypatch.setattr(store._io, "mutate", mutate)
    return writes


def is_status(write: dict[str, Any], status: str) -> bool:
    return any(row.get("kind") == "batch" and row.get("status") == status for row in write.get("data", []))


def test_equal_scores_rank_in_the_order_written_however_milvus_lays_out_its_segments(
        open_store: Callable[..., MilvusStore]) -> None:
    """Milvus returns equal scores in the order of its segments, and a rewritten row (retired, then restored
    by a rollback) moves to the newest one once its first version is sealed (a server seals growing rows on
    its own; here a flush does). Two tied chunks had swapped places; they rank as SQLite ranks them, in the
    order first written."""
    store = open_store()
    store.commit_batch(batch("b1", document([make_chunk("A", 0, "shared words here")], [axis(1)]),
                             document([make_chunk("B", 0, "shared words here")], [axis(1)])))
    before = (store.search_dense(axis(1), 10), store.search_sparse("shared words", 10))
    store._io.client.flush(store.collection)
    store.commit_batch(batch("b2", document([make_chunk("A", 0, "new words", record_id="A#0-new")], [axis(2)])))
    store.rollback()
    after = (store.search_dense(axis(1), 10), store.search_sparse("shared words", 10))
    assert [h.record_id for h in before[0]] == [h.record_id for h in before[1]] == ["A#0", "B#0"]
    assert [h.record_id for h in after[0]] == [h.record_id for h in after[1]] == ["A#0", "B#0"]


def test_every_crash_point_of_a_commit_is_repaired_on_open(open_store: Callable[..., MilvusStore],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    reference = open_store()
    first_batch(reference)
    before = observe(reference)
    with monkeypatch.context() as patch:
        writes = record_writes(reference, patch)
        reference.commit_batch(second_batch())
    after = observe(reference)
    commit_point = next(n for n, w in enumerate(writes) if is_status(w, "committed"))
    assert len(writes) >= 7 and commit_point >= 5
    for k in range(len(writes)):
        store = open_store()
        first_batch(store)
        with monkeypatch.context() as patch:
            crash_after(store, k, patch)
            with pytest.raises(Crash):
                store.commit_batch(second_batch())
        reopened = open_store(store.collection)
        if k <= commit_point:  # died before the batch was recorded as committed: as if never started
            assert observe(reopened) == before, f"crash before write {k + 1}"
            reopened.commit_batch(second_batch())  # the retried batch goes through
        assert observe(reopened) == after, f"crash before write {k + 1}"
        assert reopened.snapshot_id().endswith("-b2")


def test_every_crash_point_of_a_rollback_completes_on_open(open_store: Callable[..., MilvusStore],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    reference = open_store()
    first_batch(reference)
    before = observe(reference)
    reference.commit_batch(second_batch())
    committed = observe(reference)
    with monkeypatch.context() as patch:
        writes = record_writes(reference, patch)
        reference.rollback()
    rolled_back = observe(reference)
    assert rolled_back[:4] == before[:4]
    assert is_status(writes[0], "rolling-back")
    for k in range(len(writes)):
        store = open_store()
        first_batch(store)
        store.commit_batch(second_batch())
        with monkeypatch.context() as patch:
            crash_after(store, k, patch)
            with pytest.raises(Crash):
                store.rollback()
        reopened = open_store(store.collection)
        assert observe(reopened) == (committed if k == 0 else rolled_back), f"crash before write {k + 1}"


def test_a_first_batch_that_dies_before_its_commit_point_names_no_embedder(
        open_store: Callable[..., MilvusStore], monkeypatch: pytest.MonkeyPatch) -> None:
    """The embedder is recorded at the commit point only: a first batch undone by repair leaves an empty index
    that any embedder may start (it had refused another one, claiming vectors it did not hold)."""
    def named_batch() -> Any:
        return dataclasses.replace(second_batch(), embedding_model="m1")

    reference = open_store()
    with monkeypatch.context() as patch:
        writes = record_writes(reference, patch)
        reference.commit_batch(named_batch())
    commit_point = next(n for n, w in enumerate(writes) if is_status(w, "committed"))
    for k in range(len(writes)):
        store = open_store()
        with monkeypatch.context() as patch:
            crash_after(store, k, patch)
            with pytest.raises(Crash):
                store.commit_batch(named_batch())
        reopened = open_store(store.collection)
        assert reopened.ledger.embedding_model() == (None if k <= commit_point else "m1"), f"crash before write {k + 1}"


def test_an_imported_index_keeps_its_model_through_a_crashed_rollback(
        open_store: Callable[..., MilvusStore], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Repair takes the model from the last committed batch row: imported rows had named none, so a rollback
    that died before its state write left the index unchecked, and another model's batch was then accepted."""
    from evidex.stores.transfer import export_index, import_index

    source = open_store()
    source.commit_batch(dataclasses.replace(second_batch(), batch_id="b1", embedding_model="m1"))
    source.commit_batch(batch("b2", document([make_chunk("D", 0, "delta")], [axis(5)]), model="m1"))
    export_index(source, tmp_path / "export")
    reference = open_store()
    import_index(tmp_path / "export", reference)
    with monkeypatch.context() as patch:
        writes = record_writes(reference, patch)
        reference.rollback()
    for k in range(1, len(writes)):
        store = open_store()
        import_index(tmp_path / "export", store)
        with monkeypatch.context() as patch:
            crash_after(store, k, patch)
            with pytest.raises(Crash):
                store.rollback()
        assert open_store(store.collection).ledger.embedding_model() == "m1", f"crash before write {k + 1}"


def test_a_failed_write_is_undone_at_once(open_store: Callable[..., MilvusStore],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    store = open_store()
    first_batch(store)
    before, snapshot = observe(store), store.snapshot_id()
    real = store._io.mutate
    count = itertools.count()

    def flaky(op: str, collection: str, **kwargs: Any) -> None:
        if next(count) == 4:
            raise store._io.error("server went away")
        real(op, collection, **kwargs)

    monkeypatch.setattr(store._io, "mutate", flaky)
    with pytest.raises(StoreError, match="b2 was not committed"):
        store.commit_batch(second_batch())
    assert observe(store) == before
    assert store.snapshot_id() != snapshot  # the partial batch may have been visible: caches must drop


def test_pending_rows_are_invisible_to_readers(open_store: Callable[..., MilvusStore],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader during a commit, right after the new rows were written: it sees the old state."""
    store = open_store()
    first_batch(store)
    reader = open_store(store.collection)
    before = observe(reader)
    seen: list[tuple[object, ...]] = []
    real = store._io.mutate

    def spy(op: str, collection: str, **kwargs: Any) -> None:
        real(op, collection, **kwargs)
        rows = kwargs.get("data") or []
        if rows and str(rows[0].get("retired_by", "")).startswith("pending:"):
            seen.append(observe(reader))
            # BM25 statistics count every stored row, so scores may move; the hits may not.
            seen.append(tuple(h.record_id for h in reader.search_sparse("alpha legacy modern gamma", 10)))

    monkeypatch.setattr(store._io, "mutate", spy)
    store.commit_batch(second_batch())
    assert len(seen) == 2
    assert seen[1] == tuple(h.record_id for h in before[2])  # type: ignore[attr-defined]
    assert seen[0][:2] == before[:2] and seen[0][3:] == before[3:]


# ---- reopening, configuration --------------------------------------------------------------------------
def test_reopening_sees_the_same_data(open_store: Callable[..., MilvusStore]) -> None:
    store = open_store()
    first_batch(store)
    store.commit_batch(second_batch())
    store.commit_batch(batch("b3", document([make_chunk("D", 0, "delta alpha")], [axis(5)])))
    store.rollback()
    seen = observe(store), store.snapshot_id()
    store.close()
    assert (observe(reopened := open_store(store.collection)), reopened.snapshot_id()) == seen


def test_a_different_dimension_is_refused(open_store: Callable[..., MilvusStore], lite_uri: str) -> None:
    store = open_store()
    with pytest.raises(StoreError, match="8-dimensional"):
        MilvusStore(lite_uri, collection=store.collection, dim=16)
    with pytest.raises(StoreError, match="8-dimensional vector"):
        store.commit_batch(batch("b1", document([make_chunk("A", 0, "a")], [unit(1.0)[:4]])))


@pytest.mark.parametrize(("title_weight", "first"), TITLE_WEIGHT_CASES)
def test_title_weight_moves_title_matches(open_store: Callable[..., MilvusStore], title_weight: float,
                                          first: str) -> None:
    check_title_weight(open_store(title_weight=title_weight), first)


def test_from_config_opens_a_lite_file_in_the_index_directory(tmp_path: Path) -> None:
    config = Config(root=str(tmp_path)).replace(index={"path": "my index", "backend": "milvus"},
                                                retrieval={"title_weight": 2.0})
    store = MilvusStore.from_config(config, dim=DIM)
    try:
        assert (store.uri, store.collection, store.title_weight) == (
            str(tmp_path / "my index" / "milvus.db"), "evidex_my_index", 2.0)
        assert store.ledger.stats()["backend"] == "milvus"
    finally:
        store.drop()
        store.close()


def test_from_config_with_a_relative_root_resolves_the_lite_file_once(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A config loaded as `-c sub/evidex.toml` has the root `sub`: the default file had been `sub/sub/...`."""
    monkeypatch.chdir(tmp_path)
    config = Config(root="sub").replace(index={"path": ".evidex", "backend": "milvus"})
    store = MilvusStore.from_config(config, dim=DIM)
    try:
        assert Path(store.uri).resolve() == (tmp_path / "sub" / ".evidex" / "milvus.db").resolve()
    finally:
        store.drop()
        store.close()


def test_collection_names_are_valid() -> None:
    assert collection_name(".evidex") == "evidex_evidex"
    assert collection_name("handbook-v2.index") == "evidex_handbook_v2_index"
    assert collection_name("---") == "evidex_index"


def test_a_local_uri_must_name_a_db_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"\.db"):
        MilvusStore(str(tmp_path / "index.sqlite"), dim=DIM)


def test_missing_pymilvus_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "pymilvus", None)
    with pytest.raises(BackendUnavailable, match=r"pip install -e '\.\[milvus\]'"):
        MilvusStore(str(tmp_path / "x.db"), dim=DIM)


def test_rolling_back_again_after_an_interrupted_rollback_undoes_nothing_more(
        open_store: Callable[..., MilvusStore], monkeypatch: pytest.MonkeyPatch) -> None:
    """An operator re-runs a rollback that was killed: opening the index completes it, and the rollback had
    then undone the batch before it too (run again and again, until the index was empty). A named batch is
    still rolled back."""
    reference = open_store()
    first_batch(reference)
    only_b1 = observe(reference)
    for explicit in (None, "b1"):
        store = open_store()
        first_batch(store)
        store.commit_batch(second_batch())
        with monkeypatch.context() as patch:
            crash_after(store, 1, patch)  # recorded as rolling-back, then killed
            with pytest.raises(Crash):
                store.rollback()
        reopened = open_store(store.collection)
        assert reopened.ledger.finished_rollbacks == ["b2"]
        info = reopened.rollback(explicit)
        if explicit is None:
            assert (info.batch_id, info.status) == ("b2", "rolled-back")
            seen = observe(reopened)
            assert seen[:4] == only_b1[:4] and seen[5:] == only_b1[5:]  # [4]: the batches
            assert reopened.rollback().batch_id == "b1"  # the next one goes on to the batch before
        else:
            assert info.batch_id == "b1"
        assert [(b.batch_id, b.status) for b in reopened.ledger.batches()] == [("b1", "rolled-back"),
                                                                                ("b2", "rolled-back")]
        assert reopened.ledger.stats()["chunks"] == 0


def test_a_commit_after_a_completed_rollback_is_the_next_to_roll_back(
        open_store: Callable[..., MilvusStore], monkeypatch: pytest.MonkeyPatch) -> None:
    store = open_store()
    first_batch(store)
    store.commit_batch(second_batch())
    with monkeypatch.context() as patch:
        crash_after(store, 1, patch)
        with pytest.raises(Crash):
            store.rollback()
    reopened = open_store(store.collection)
    reopened.commit_batch(batch("b3", document([make_chunk("D", 0, "delta")], [axis(5)])))
    assert reopened.rollback().batch_id == "b3"


@pytest.mark.parametrize("damage", ["segment deleted", "manifest truncated"])
def test_a_damaged_lite_file_is_refused_not_read_as_empty(tmp_path: Path, damage: str) -> None:
    """A lost data segment (or a manifest that falls back to an older one) had loaded as an empty index: `stats`
    said 0 chunks while `batches` listed a committed batch of them, and every query answered from nothing."""
    from milvus_lite.server_manager import server_manager_instance  # type: ignore[import-untyped]

    uri = str(tmp_path / "lite.db")
    store = MilvusStore(uri, collection="damaged", dim=DIM)
    first_batch(store)
    store.close()
    server_manager_instance.release_server(uri)  # flushes the files and lets the next open read them
    files = tmp_path / "lite.db" / "collections" / "damaged"
    if damage == "segment deleted":
        for segment in files.glob("partitions/*/data/*.parquet"):
            segment.unlink()
    else:
        (files / "manifest.json").write_text('{"vers')
    try:
        with pytest.raises(StoreError, match=r"holds 0 chunk rows, but its committed batches wrote 3.*damaged"):
            MilvusStore(uri, collection="damaged", dim=DIM)
    finally:
        server_manager_instance.release_server(uri)


def test_a_lite_file_held_by_another_process_says_so(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """`evidex serve` holds its Milvus Lite file: an ingest beside it had printed milvus-lite's tracebacks and
    blamed the package and the loopback interface."""
    import subprocess

    uri = str(tmp_path / "lite.db")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from pymilvus import MilvusClient; MilvusClient(sys.argv[1]); "
         "print('ready', flush=True); sys.stdin.read()", uri],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        capfd.readouterr()
        with pytest.raises(StoreError, match="in use by another process"):
            MilvusStore(uri, collection="held", dim=DIM)
        assert "Traceback" not in capfd.readouterr().err
    finally:
        holder.communicate("", timeout=60)


def test_closing_the_last_store_on_a_lite_file_stops_its_server(tmp_path: Path) -> None:
    """Milvus Lite serves a file from the process that opens it and searches the rows that server wrote without
    their index; closing the process's last store on the file stops the server, so an engine opened again
    searches them indexed, and another process (`evidex serve` after an ingest) may open the file. A store
    still open keeps it running."""
    import subprocess

    uri = str(tmp_path / "lite.db")
    count = ("import sys; from evidex.stores.milvus import MilvusStore; "
             "s = MilvusStore(sys.argv[1], collection='c', dim=int(sys.argv[2])); print(len(s.all_chunks()))")

    def chunks_seen_by_another_process() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", count, uri, str(DIM)], capture_output=True, text=True,
                              timeout=120)

    first, second = MilvusStore(uri, collection="c", dim=DIM), MilvusStore(uri, collection="c", dim=DIM)
    first_batch(first)
    first.close()
    first.close()  # a second close changes nothing
    assert len(second.all_chunks()) == 3  # the server still runs for the store left open
    held = chunks_seen_by_another_process()
    assert held.returncode != 0 and "in use by another process" in held.stderr
    second.close()
    assert chunks_seen_by_another_process().stdout.strip() == "3"
    reopened = MilvusStore(uri, collection="c", dim=DIM)  # a new server in this process
    assert [h.record_id for h in reopened.search_sparse("alpha", 10)] == ["A#0", "A#1"]
    reopened.close()


def test_the_snapshot_id_moves_before_a_batch_or_rollback_touches_rows(open_store: Callable[..., MilvusStore],
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A search that runs while a batch's rows change (its upsert, retirements, a rollback's deletes) must read a
    different snapshot id before and after it, or `Engine.run` would name a snapshot that never existed: the
    generation had moved only at the end, so one wholly inside that window read the same id twice."""
    store = open_store()
    first_batch(store)
    seen: list[str] = []
    real = store._io.mutate

    def mutate(op: str, collection: str, **kwargs: Any) -> None:
        if collection == store.collection:  # a write to the rows a search reads
            seen.append(store.snapshot_id())
        real(op, collection, **kwargs)

    for change in (lambda: store.commit_batch(second_batch()), lambda: store.rollback()):
        before = store.snapshot_id()
        seen.clear()
        with monkeypatch.context() as patch:
            patch.setattr(store._io, "mutate", mutate)
            change()
        assert seen and before not in seen  # every row write happens after the id moved...
        assert store.snapshot_id() not in seen  # ...and the finished change moves it again
