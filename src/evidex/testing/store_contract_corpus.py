"""The store contract's corpus facts (`evidex.testing.store_contract`): what `evidex.retrieval.corpus` reads of a
store beside its searches, through the store's own capabilities where it has them and through the core protocol
alone where it has none (`CoreStore`): inlink contexts, word counts and reading ahead."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from evidex.retrieval.corpus import inlink_contexts, read_ahead, word_counts
from evidex.stores.protocol import BatchWrite, Ledger, Store
from evidex.testing.store_builders import (
    DAEMONSET_PAGE,
    LINKED,
    LOGGING_PAGE,
    T0,
    ContractCorpus,
    axis,
    batch,
    document,
    ids,
    make_chunk,
    unit,
)
from evidex.types import BatchInfo, Chunk, Provenance, ScoredId, SearchFilters


class CoreStore:
    """A store seen through `Store` alone, without the optional capabilities it may offer (`WordCounts`,
    `ReadAhead`): what `evidex.retrieval.corpus` has to work with on a backend that offers none. Every call
    goes to the real store."""

    def __init__(self, store: Store) -> None:
        self._store = store

    @property
    def ledger(self) -> Ledger:
        return self._store.ledger

    def commit_batch(self, batch: BatchWrite) -> BatchInfo:
        return self._store.commit_batch(batch)

    def rollback(self, batch_id: str | None = None) -> BatchInfo:
        return self._store.rollback(batch_id)

    def get(self, record_ids: Sequence[str]) -> list[Chunk]:
        return self._store.get(record_ids)

    def all_chunks(self) -> list[Chunk]:
        return self._store.all_chunks()

    def search_dense(self, vector: npt.NDArray[np.float32], limit: int,
                     filters: SearchFilters | None = None) -> list[ScoredId]:
        return self._store.search_dense(vector, limit, filters)

    def search_sparse(self, query: str, limit: int, filters: SearchFilters | None = None, *,
                      title_only: bool = False, scope: tuple[str, ...] | None = None) -> list[ScoredId]:
        return self._store.search_sparse(query, limit, filters, title_only=title_only, scope=scope)

    def snapshot_id(self) -> str:
        return self._store.snapshot_id()

    def close(self) -> None:
        self._store.close()


# Text whose words the filter corpus holds in every record ("common", "words"), in one ("d1") and in none.
_COUNTED = "common words of d1, and a quokka"


class CorpusContract(ContractCorpus):
    """What `evidex.retrieval.corpus` must read of every store, with and without its capabilities."""

    def test_reading_ahead_changes_no_search(self, store: Store) -> None:
        """`read_ahead` is a warm-up hint: words the index holds, words it does not, hostile text and nothing at
        all are taken, and every search after it gives what it gave before, score for score."""
        self.commit_corpus(store)
        read_ahead(store, [])
        read_ahead(store, ["snapshot", "traffic", "quokka", 'text:"x" OR *', "kubernetes"])
        assert ids(store.search_sparse("snapshot", 10)) == ["etcd#0"]  # as the searches above find them
        assert ids(store.search_sparse("traffic quokka", 10)) == ["net#0"]
        assert ids(store.search_sparse("kubernetes", 10, title_only=True)) == ["kube#0"]
        queries = ("pods ingress", "snapshot backups", "kubernetes quokka")
        before = [store.search_sparse(q, 10) for q in queries]
        read_ahead(store, ["pods", "ingress", "backups"])
        assert [store.search_sparse(q, 10) for q in queries] == before

    # ---- inlink contexts: what other pages say around their links to a page ------------------------------
    def test_inlink_contexts_are_what_other_pages_say_around_their_links_to_a_page(self, store: Store) -> None:
        assert inlink_contexts(store, [DAEMONSET_PAGE]) == {}
        self.commit_linking_pages(store)
        got = inlink_contexts(store, [DAEMONSET_PAGE, LOGGING_PAGE, "tasks/agents.md", "nowhere.md", DAEMONSET_PAGE])
        assert got == {DAEMONSET_PAGE: [LINKED[d] for d in ("logging", "agents", "vault", "old")],
                       LOGGING_PAGE: [LINKED["ds"]]}  # in the order written; a link to its own page says nothing
        assert inlink_contexts(store, []) == {}
        assert inlink_contexts(store, [DAEMONSET_PAGE], SearchFilters()) == {DAEMONSET_PAGE: got[DAEMONSET_PAGE]}

    def test_inlink_contexts_come_only_from_records_the_filters_pass(self, store: Store) -> None:
        self.commit_linking_pages(store)
        pages = [DAEMONSET_PAGE, LOGGING_PAGE]
        assert inlink_contexts(store, pages, SearchFilters(access_labels=("eng",))) == {
            DAEMONSET_PAGE: [LINKED[d] for d in ("logging", "agents", "old")], LOGGING_PAGE: [LINKED["ds"]]}
        assert inlink_contexts(store, pages, SearchFilters(access_labels=("eng", "hr"), valid_at=T0)) == {
            DAEMONSET_PAGE: [LINKED["logging"], LINKED["agents"]], LOGGING_PAGE: [LINKED["ds"]]}
        assert inlink_contexts(store, pages, SearchFilters(access_labels=("security-team",))) == {
            DAEMONSET_PAGE: [LINKED["vault"]]}
        assert inlink_contexts(store, pages, SearchFilters(source_pattern=r"^(tasks|blog)/")) == {
            DAEMONSET_PAGE: [LINKED["agents"], LINKED["old"]]}
        assert inlink_contexts(store, pages, SearchFilters(access_labels=())) == {}
        assert inlink_contexts(store, pages, SearchFilters(access_labels=("nobody",))) == {}

    def test_inlink_contexts_follow_commits_and_rollbacks(self, store: Store) -> None:
        """Only live records say anything: a rewritten page's old words stop counting, a new page's start, and a
        rollback brings back what it replaced (asked for before each change, so a kept link index is outdated)."""
        eng = Provenance(access_labels=("eng",))
        ds = make_chunk("ds", 0, "A DaemonSet runs a pod on every node.", source=DAEMONSET_PAGE, provenance=eng)
        logging = make_chunk("logging", 0, "To run a logging agent on every node, use a [DaemonSet]"
                             "(/docs/concepts/workloads/daemonset/) that mounts /var/log.", source=LOGGING_PAGE,
                             provenance=eng)
        store.commit_batch(batch("b1", document([ds], [axis(0)]), document([logging], [axis(1)])))
        readers = (None, SearchFilters(access_labels=("eng",)))

        def seen() -> list[dict[str, list[str]]]:
            return [inlink_contexts(store, [DAEMONSET_PAGE], filters) for filters in readers]

        assert seen() == [{DAEMONSET_PAGE: [LINKED["logging"]]}] * 2
        rewritten = make_chunk("logging", 0, "Logs are collected on each host.", source=LOGGING_PAGE, provenance=eng)
        store.commit_batch(batch("b2", document([rewritten], [axis(1)])))
        assert seen() == [{}, {}]
        agents = make_chunk("agents", 0, 'Deploy the agent as a <A HREF="../concepts/workloads/daemonset.html">'
                            "DaemonSet</A> on each node.", source="tasks/agents.md", provenance=eng)
        store.commit_batch(batch("b3", document([agents], [axis(2)])))
        assert seen() == [{DAEMONSET_PAGE: [LINKED["agents"]]}] * 2
        store.rollback()
        assert seen() == [{}, {}]
        store.rollback()
        assert seen() == [{DAEMONSET_PAGE: [LINKED["logging"]]}] * 2

    def test_inlink_contexts_need_nothing_beyond_the_core_protocol(self, store: Store) -> None:
        """A backend that offers no capability gets the same contexts, and sees a commit the same way."""
        self.commit_linking_pages(store)
        core = CoreStore(store)
        pages = [DAEMONSET_PAGE, LOGGING_PAGE]
        for filters in (None, SearchFilters(access_labels=("eng",)), SearchFilters(valid_at=T0)):
            assert inlink_contexts(core, pages, filters) == inlink_contexts(store, pages, filters)
        assert inlink_contexts(core, [DAEMONSET_PAGE], SearchFilters(valid_at=T0)) == {
            DAEMONSET_PAGE: [LINKED[d] for d in ("logging", "agents", "vault")]}
        store.rollback()
        assert inlink_contexts(core, pages) == {}

    # ---- word counts: how many readable records hold each word of a text ---------------------------------
    def test_word_counts_are_the_records_a_sparse_search_of_each_word_finds(self, store: Store) -> None:
        """Where the store can tell (`WordCounts`): the records a reader may read, and for each distinct word of
        the text (as sparse search reads it) the records among them that a search of that word alone finds.
        Where it cannot: (0, {}), which a plan reads as "keep every aspect"."""
        self.commit_filter_corpus(store)
        for readers in (None, ("eng",), ("ops", "hr"), ("nobody",)):
            filters = SearchFilters(access_labels=readers) if readers is not None else None
            got = word_counts(store, _COUNTED, readers)
            if got == (0, {}):
                continue  # the store cannot tell
            records = len(store.search_dense(unit(1.0), 100, filters))
            assert got == (records, {w: len(store.search_sparse(w, 100, filters))
                                     for w in ("common", "words", "d1", "quokka")}), readers
        assert word_counts(store, _COUNTED, ("eng",)) in [(0, {}), (2, {"common": 2, "words": 2, "d1": 1,
                                                                        "quokka": 0})]
        assert word_counts(store, "the of ?!") in [(0, {}), (5, {})]

    def test_word_counts_without_the_capability_cannot_tell(self, store: Store) -> None:
        self.commit_filter_corpus(store)
        assert word_counts(CoreStore(store), _COUNTED) == (0, {})
        assert word_counts(CoreStore(store), _COUNTED, ("eng",)) == (0, {})

    def test_reading_ahead_without_the_capability_changes_nothing(self, store: Store) -> None:
        self.commit_corpus(store)
        before = store.search_sparse("pods ingress", 10)
        read_ahead(CoreStore(store), ["pods", "ingress"])
        assert store.search_sparse("pods ingress", 10) == before
        assert ids(before) == ["net#0", "kube#0"]
