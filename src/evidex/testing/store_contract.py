"""The store contract: what every `Store` backend must do, written once and reused by each backend.

A backend's test module subclasses `StoreContract` and provides a `store` fixture yielding a fresh, empty
store; every test here then runs against it:

    class TestSqliteStore(StoreContract):
        @pytest.fixture
        def store(self, tmp_path: Path) -> Iterator[Store]:
            s = SqliteStore(tmp_path / "idx")
            yield s
            s.close()

The suite calls only the `Store` protocol (the fixture closes the store). Of `stats()` it needs the keys
`documents` and `chunks` (live counts), `batches` (committed), `rolled_back_batches` and `access_labels` (live
chunks per label), which every interface shows. Vectors are 8-dimensional unit vectors
built from axis directions, so the expected dense order and cosine scores are exact; texts are a few
words, so the expected BM25 hits are exact too. The builders below (`unit`, `axis`, `make_chunk`,
`document`, `batch`, `dead_letter`) serve a backend's own extra tests as well.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, timezone

import numpy as np
import numpy.typing as npt
import pytest

from evidex.errors import StoreError
from evidex.stores.protocol import BatchWrite, DocumentWrite, Store
from evidex.types import Chunk, DeadLetter, Provenance, ScoredId, SearchFilters

DIM = 8
T0 = datetime(2024, 6, 1, 12, 0, 0, tzinfo=UTC)
INDEXED_AT = datetime(2024, 6, 2, 8, 30, 0, tzinfo=UTC)

Vector = npt.NDArray[np.float32]


def unit(*components: float) -> Vector:
    """A DIM-dimensional unit vector from its leading components: unit(4, 3) = (0.8, 0.6, 0, ...)."""
    v = np.zeros(DIM, dtype=np.float32)
    v[: len(components)] = components
    return (v / np.linalg.norm(v)).astype(np.float32)


def axis(i: int) -> Vector:
    v = np.zeros(DIM, dtype=np.float32)
    v[i] = 1.0
    return v


def make_chunk(doc_id: str, index: int, text: str, *, title: str = "", source: str | None = None,
               provenance: Provenance | None = None, record_id: str | None = None,
               anchor: str | None = "section", heading: str = "Section") -> Chunk:
    """A chunk as the ingest run builds it: no batch id yet (the store assigns the committing batch)."""
    return Chunk(
        record_id=record_id or f"{doc_id}#{index}", doc_id=doc_id, chunk_index=index,
        source=source or f"{doc_id}.md", title=title, text=text, citation_anchor=anchor,
        span_start=10 * index, span_end=10 * index + len(text),
        content_hash=hashlib.sha256(text.encode()).hexdigest(), provenance=provenance or Provenance(),
        heading=heading, indexed_at=INDEXED_AT)


def document(chunks: Sequence[Chunk], vectors: Sequence[Vector],
             doc_hash: str | None = None) -> DocumentWrite:
    first = chunks[0]
    digest = doc_hash or hashlib.sha256("\x00".join(c.text for c in chunks).encode()).hexdigest()
    return DocumentWrite(first.doc_id, first.source, digest, tuple(chunks),
                         np.vstack(vectors).astype(np.float32))


def batch(batch_id: str, *documents: DocumentWrite, dead_letters: Sequence[DeadLetter] = (),
          resolved: Sequence[str] = (), unchanged: int = 0, label: str = "", model: str = "") -> BatchWrite:
    return BatchWrite(batch_id, label or f"label of {batch_id}", tuple(documents), unchanged,
                      tuple(dead_letters), tuple(resolved), model)


def as_committed(chunk: Chunk, batch_id: str) -> Chunk:
    """What `get` must return for `chunk` once `batch_id` has committed it."""
    return dataclasses.replace(chunk, batch_id=batch_id)


def dead_letter(source: str, batch_id: str, reason: str = "invalid front matter",
                line: int = 3) -> DeadLetter:
    return DeadLetter(source=source, reason=reason, batch_id=batch_id, failed_at=T0,
                      location=f"/corpus/{source}:{line}", path=f"/corpus/{source}")


# ---- a corpus for the filter tests: one chunk per document, each with its own direction ----------------
# Every text contains "common", so one sparse query and one dense query reach every chunk.
_FILTER_DOCS: list[tuple[str, str, Provenance, Vector]] = [
    ("d1", "docs/deploy/a.md",
     Provenance(access_labels=("eng",), published_at=T0 - timedelta(days=1), evidence_family="deploy"),
     unit(1.0)),
    ("d2", "docs/deploy/b.md",
     Provenance(access_labels=("ops",), published_at=T0, expires_at=T0 + timedelta(days=1),
                evidence_family="deploy"), unit(0.9, 0.1)),
    ("d3", "docs/net/c.md",
     Provenance(access_labels=("eng", "ops"), expires_at=T0, evidence_family="network"), unit(0.8, 0.2)),
    ("d4", "blog/d.md", Provenance(published_at=T0 + timedelta(seconds=1)), unit(0.7, 0.3)),
    ("d5", "docs/net/e.md", Provenance(access_labels=("hr",), evidence_family="network"), unit(0.6, 0.4)),
]
_MINUS_5H = timezone(timedelta(hours=-5))
FILTER_CASES: list[tuple[str, SearchFilters, set[str]]] = [
    ("labels-one", SearchFilters(access_labels=("eng",)), {"d1", "d3"}),
    ("labels-any-of", SearchFilters(access_labels=("ops", "hr")), {"d2", "d3", "d5"}),
    ("labels-none-granted", SearchFilters(access_labels=()), set()),
    ("labels-unknown", SearchFilters(access_labels=("nobody",)), set()),
    # published_at == t is admitted, expires_at == t is rejected, None is unbounded.
    ("valid-at-t0", SearchFilters(valid_at=T0), {"d1", "d2", "d5"}),
    ("valid-at-t0-other-zone", SearchFilters(valid_at=T0.astimezone(_MINUS_5H)), {"d1", "d2", "d5"}),
    ("valid-at-before-t0", SearchFilters(valid_at=T0 - timedelta(seconds=1)), {"d1", "d3", "d5"}),
    ("valid-at-after-t0", SearchFilters(valid_at=T0 + timedelta(seconds=1)), {"d1", "d2", "d4", "d5"}),
    ("families-one", SearchFilters(families=("deploy",)), {"d1", "d2"}),
    ("families-two", SearchFilters(families=("network", "deploy")), {"d1", "d2", "d3", "d5"}),
    ("families-unknown", SearchFilters(families=("nope",)), set()),
    ("doc-ids", SearchFilters(doc_ids=("d2", "d4", "missing")), {"d2", "d4"}),
    ("source-prefix", SearchFilters(source_pattern=r"^docs/net/"), {"d3", "d5"}),
    ("source-anywhere", SearchFilters(source_pattern=r"deploy"), {"d1", "d2"}),
    ("source-all", SearchFilters(source_pattern=r"\.md$"), {"d1", "d2", "d3", "d4", "d5"}),
    ("combined-labels-family", SearchFilters(access_labels=("eng", "ops"), families=("network",)), {"d3"}),
    ("combined-time-labels", SearchFilters(valid_at=T0, access_labels=("eng", "hr")), {"d1", "d5"}),
    ("no-filter", SearchFilters(), {"d1", "d2", "d3", "d4", "d5"}),
]

# Queries carrying FTS5 syntax: each must be read as plain words (no operator, column filter or prefix).
HOSTILE_QUERIES = [
    'pods AND ingress', 'pods NOT ingress', 'pods NEAR ingress', 'NEAR(pods ingress, 2)', 'pod*', '-pods',
    '"pods', 'pods"', '"pods" OR', 'text:pods', '(pods', 'pods)', '^pods', "pods'", 'pods + ingress',
    'pods -ingress', '{text title}: pods', ':', '***', '"', "'", '(', 'AND', 'OR NOT', 'NEAR',
]


DAEMONSET_PAGE = "concepts/workloads/daemonset.md"
LOGGING_PAGE = "concepts/logging.md"
# The context (20 words either side, link markup left out) of each link of `StoreContract.commit_linking_pages`.
_LINKED = {
    "ds": "A DaemonSet runs a pod on every node (intro); its logs are read as logging says.",
    "logging": "To run a logging agent on every node, use a DaemonSet that mounts /var/log.",
    "agents": "Deploy the agent as a DaemonSet on each node.",
    "vault": "The break-glass DaemonSet of the vault team.",
    "old": "Old notes on the DaemonSet controller.",
}

TITLE_WEIGHT_CASES = [(10.0, "titled#0"), (0.1, "body#0")]  # (title weight, the first "zebra" hit)


def check_title_weight(store: Store, first: str) -> None:
    """A backend built with a BM25 title weight ranks a title match first when the weight is high and a body
    match first when it is low (see TITLE_WEIGHT_CASES); title-only search finds only the titled page."""
    store.commit_batch(batch(
        "b1",
        document([make_chunk("titled", 0, "general notes about many other things", title="Zebra crossings")],
                 [axis(0)]),
        document([make_chunk("body", 0, "a zebra crossing is painted white", title="Road paint")],
                 [axis(1)])))
    assert store.search_sparse("zebra", 10)[0].record_id == first
    assert [h.record_id for h in store.search_sparse("zebra", 10, title_only=True)] == ["titled#0"]


def _ids(hits: Sequence[ScoredId]) -> list[str]:
    return [h.record_id for h in hits]


class StoreContract:
    """Behaviour every `Store` must show. Subclasses provide a `store` fixture: a fresh, empty store."""

    # ---- the three-document corpus most tests use ------------------------------------------------------
    @staticmethod
    def corpus() -> tuple[list[Chunk], list[Vector]]:
        chunks = [
            make_chunk("kube", 0, "The scheduler assigns pods to nodes.", title="Kubernetes scheduler"),
            make_chunk("etcd", 0, "Snapshot the etcd cluster daily. Restore from a snapshot.",
                       title="Etcd backups"),
            make_chunk("net", 0, "Deny ingress traffic to pods by default.", title="Network policy"),
        ]
        return chunks, [axis(0), axis(1), axis(2)]

    def commit_corpus(self, store: Store, batch_id: str = "b1") -> list[Chunk]:
        chunks, vectors = self.corpus()
        docs = [document([c], [v]) for c, v in zip(chunks, vectors, strict=True)]
        store.commit_batch(batch(batch_id, *docs))
        return [as_committed(c, batch_id) for c in chunks]

    # ---- empty store -----------------------------------------------------------------------------------
    def test_empty_store(self, store: Store) -> None:
        assert store.document_hashes() == {}
        assert store.get(["nothing"]) == []
        assert store.search_dense(axis(0), 10) == []
        assert store.search_sparse("pods", 10) == []
        assert store.batches() == []
        assert store.dead_letters() == []
        assert isinstance(store.snapshot_id(), str)

    def test_the_first_batch_with_vectors_names_the_embedder_and_another_is_refused(self, store: Store) -> None:
        chunks, vectors = self.corpus()
        assert store.embedding_model() is None
        store.commit_batch(batch("b0", dead_letters=[DeadLetter("x.md", "broken", "b0", T0, "x.md")], model="m2"))
        assert store.embedding_model() is None  # no vectors, no model
        store.commit_batch(batch("b1", document([chunks[0]], [vectors[0]]), model="m1"))
        assert store.embedding_model() == "m1"
        snapshot = store.snapshot_id()
        with pytest.raises(StoreError, match="model m1, and the configured embedder is m2"):
            store.commit_batch(batch("b2", document([chunks[1]], [vectors[1]]), model="m2"))
        assert store.snapshot_id() == snapshot and [c.doc_id for c in store.get([chunks[1].record_id])] == []
        store.commit_batch(batch("b3", document([chunks[1]], [vectors[1]]), model="m1"))
        assert store.embedding_model() == "m1"

    def test_rolling_back_every_vector_forgets_the_embedder(self, store: Store) -> None:
        chunks, vectors = self.corpus()
        store.commit_batch(batch("b1", document([chunks[0]], [vectors[0]]), model="m1"))
        store.commit_batch(batch("b2", document([chunks[1]], [vectors[1]]), model="m1"))
        store.rollback()
        assert store.embedding_model() == "m1"  # b1's vectors are still there
        store.rollback()
        assert store.embedding_model() is None  # nothing left: another embedder may start the index
        store.commit_batch(batch("b3", document([chunks[0]], [vectors[0]]), model="m2"))
        assert store.embedding_model() == "m2"

    def test_an_index_written_before_embedders_were_recorded_adopts_none(self, store: Store) -> None:
        """Its vectors' embedder is unknown: naming the next batch's would refuse the one that made them."""
        chunks, vectors = self.corpus()
        store.commit_batch(batch("b1", document([chunks[0]], [vectors[0]])))  # no model named
        store.commit_batch(batch("b2", document([chunks[1]], [vectors[1]]), model="m1"))
        assert store.embedding_model() is None

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
        assert store.document_hashes() == {"kube": "h-kube", "etcd": "h-etcd"}

    def test_stats_count_live_documents_and_chunks(self, store: Store) -> None:
        a = [make_chunk("a", i, f"part {i}") for i in range(3)]
        store.commit_batch(batch("b1", document(a, [axis(0), axis(1), axis(2)]),
                                 document([make_chunk("b", 0, "other")], [axis(3)])))
        stats = store.stats()
        assert (stats["documents"], stats["chunks"]) == (2, 4)

    def test_stats_count_live_chunks_per_access_label(self, store: Store) -> None:
        both = Provenance(access_labels=("eng", "ops"))
        store.commit_batch(batch("b1", document([make_chunk("a", 0, "one", provenance=both),
                                                  make_chunk("a", 1, "two", provenance=both)], [axis(0), axis(1)]),
                                 document([make_chunk("b", 0, "three", provenance=Provenance(access_labels=("eng",)))],
                                          [axis(2)]),
                                 document([make_chunk("c", 0, "four")], [axis(3)])))
        assert store.stats()["access_labels"] == {"-": 1, "eng": 3, "ops": 2}
        store.commit_batch(batch("b2", document([make_chunk("b", 0, "three again")], [axis(2)])))
        assert store.stats()["access_labels"] == {"-": 2, "eng": 2, "ops": 2}  # the replaced chunk no longer counts

    # ---- dense search ----------------------------------------------------------------------------------
    def test_dense_search_exact_order_and_scores(self, store: Store) -> None:
        vectors = {"a": unit(1.0), "b": unit(4, 3), "c": unit(3, 4), "d": axis(1), "e": unit(-1.0)}
        store.commit_batch(batch("b1", *(document([make_chunk(k, 0, f"text {k}")], [v])
                                          for k, v in vectors.items())))
        hits = store.search_dense(axis(0), 10)
        assert _ids(hits) == ["a#0", "b#0", "c#0", "d#0", "e#0"]
        assert [h.score for h in hits] == pytest.approx([1.0, 0.8, 0.6, 0.0, -1.0], abs=1e-5)
        assert _ids(store.search_dense(axis(0), 2)) == ["a#0", "b#0"]
        assert _ids(store.search_dense(axis(1), 3)) == ["d#0", "c#0", "b#0"]

    # ---- sparse search ---------------------------------------------------------------------------------
    def test_sparse_search_finds_title_words(self, store: Store) -> None:
        self.commit_corpus(store)
        assert _ids(store.search_sparse("kubernetes", 10)) == ["kube#0"]  # only in the title
        assert _ids(store.search_sparse("backups", 10)) == ["etcd#0"]

    def test_sparse_search_finds_body_words(self, store: Store) -> None:
        self.commit_corpus(store)
        assert _ids(store.search_sparse("snapshot", 10)) == ["etcd#0"]
        assert _ids(store.search_sparse("traffic", 10)) == ["net#0"]

    def test_sparse_search_ranks_more_matching_terms_first(self, store: Store) -> None:
        self.commit_corpus(store)
        hits = store.search_sparse("pods ingress", 10)
        assert _ids(hits) == ["net#0", "kube#0"]
        assert hits[0].score > hits[1].score  # higher is better
        assert _ids(store.search_sparse("pods ingress", 1)) == ["net#0"]

    @pytest.mark.parametrize("query", HOSTILE_QUERIES)
    def test_sparse_search_reads_fts_syntax_as_words(self, store: Store, query: str) -> None:
        self.commit_corpus(store)
        hits = store.search_sparse(query, 10)
        assert len(hits) == len(set(_ids(hits)))
        assert set(_ids(hits)) <= {"kube#0", "etcd#0", "net#0"}

    def test_sparse_search_operators_are_not_applied(self, store: Store) -> None:
        self.commit_corpus(store)
        # NOT would exclude net (which says ingress); a column filter `text:` would hide the title word.
        assert "net#0" in _ids(store.search_sparse("pods NOT ingress", 10))
        assert "net#0" in _ids(store.search_sparse("pods -ingress", 10))
        assert _ids(store.search_sparse("text:kubernetes", 10)) == ["kube#0"]
        # AND would require both words; as plain words, either one matches.
        assert set(_ids(store.search_sparse("snapshot AND traffic", 10))) == {"etcd#0", "net#0"}
        # A trailing * is not a prefix query.
        assert store.search_sparse("kuber*", 10) == []

    def test_reading_ahead_changes_no_search(self, store: Store) -> None:
        """`read_ahead` is a warm-up hint: words the index holds, words it does not, hostile text and nothing at
        all are taken, and every search after it gives what it gave before, score for score."""
        self.commit_corpus(store)
        store.read_ahead([])
        store.read_ahead(["snapshot", "traffic", "quokka", 'text:"x" OR *', "kubernetes"])
        assert _ids(store.search_sparse("snapshot", 10)) == ["etcd#0"]  # as the searches above find them
        assert _ids(store.search_sparse("traffic quokka", 10)) == ["net#0"]
        assert _ids(store.search_sparse("kubernetes", 10, title_only=True)) == ["kube#0"]
        queries = ("pods ingress", "snapshot backups", "kubernetes quokka")
        before = [store.search_sparse(q, 10) for q in queries]
        store.read_ahead(["pods", "ingress", "backups"])
        assert [store.search_sparse(q, 10) for q in queries] == before

    @pytest.mark.parametrize("query", ["", "   ", "the of and", "?!", "what is it"])
    def test_sparse_search_empty_or_stopword_query_is_empty(self, store: Store, query: str) -> None:
        self.commit_corpus(store)
        assert store.search_sparse(query, 10) == []

    # ---- filters: identical in dense and sparse search -------------------------------------------------
    def commit_filter_corpus(self, store: Store) -> None:
        store.commit_batch(batch("b1", *(
            document([make_chunk(doc_id, 0, f"common words of {doc_id}", source=source, provenance=p)], [v])
            for doc_id, source, p, v in _FILTER_DOCS)))

    @pytest.mark.parametrize(("filters", "expected"), [c[1:] for c in FILTER_CASES],
                             ids=[c[0] for c in FILTER_CASES])
    def test_filters_apply_identically_in_dense_and_sparse(self, store: Store, filters: SearchFilters,
                                                           expected: set[str]) -> None:
        self.commit_filter_corpus(store)
        want = {f"{d}#0" for d in expected}
        dense = store.search_dense(unit(1.0), 100, filters)
        sparse = store.search_sparse("common", 100, filters)
        assert set(_ids(dense)) == want
        assert set(_ids(sparse)) == want
        # Filtering keeps the unfiltered order of what remains.
        unfiltered = _ids(store.search_dense(unit(1.0), 100))
        assert _ids(dense) == [i for i in unfiltered if i in want]

    def test_filters_apply_before_the_limit(self, store: Store) -> None:
        self.commit_filter_corpus(store)
        network = SearchFilters(families=("network",))
        assert _ids(store.search_dense(unit(1.0), 1, network)) == ["d3#0"]  # d1, d2 rank higher unfiltered
        assert len(store.search_sparse("common", 1, network)) == 1
        assert _ids(store.search_sparse("common", 1, network))[0] in {"d3#0", "d5#0"}

    # ---- inlink contexts: what other pages say around their links to a page ------------------------------
    def commit_linking_pages(self, store: Store) -> None:
        """The DaemonSet page (linking to the logging page, and to itself) and four pages linking to it: the
        logging page (Markdown, site path), the agents page (an upper-case HTML tag, relative path), a page only
        the security team may read and one that expires at T0; the contexts they give are `_LINKED`'s."""
        eng = Provenance(access_labels=("eng",))
        pages = [
            ("ds", DAEMONSET_PAGE, "A DaemonSet runs a pod on every node ([intro](/docs/concepts/workloads/daemonset/"
             "#intro)); its logs are read as [logging](../logging.md) says.", eng),
            ("logging", LOGGING_PAGE, "To run a logging agent on every node, use a [DaemonSet]"
             "(/docs/concepts/workloads/daemonset/) that mounts /var/log.", eng),
            ("agents", "tasks/agents.md", 'Deploy the agent as a <A HREF="../concepts/workloads/daemonset.html">'
             "DaemonSet</A> on each node.", eng),
            ("vault", "security/vault.md", "The break-glass [DaemonSet](../concepts/workloads/daemonset.md) of the "
             "vault team.", Provenance(access_labels=("security-team",))),
            ("old", "blog/old.md", "Old notes on the [DaemonSet](https://example.org/docs/concepts/workloads/"
             "daemonset/#top) controller.", Provenance(access_labels=("eng",), expires_at=T0)),
        ]
        store.commit_batch(batch("b1", *(document([make_chunk(d, 0, text, source=source, provenance=p)], [axis(i)])
                                         for i, (d, source, text, p) in enumerate(pages))))

    def test_inlink_contexts_are_what_other_pages_say_around_their_links_to_a_page(self, store: Store) -> None:
        assert store.inlink_contexts([DAEMONSET_PAGE]) == {}
        self.commit_linking_pages(store)
        got = store.inlink_contexts([DAEMONSET_PAGE, LOGGING_PAGE, "tasks/agents.md", "nowhere.md", DAEMONSET_PAGE])
        assert got == {DAEMONSET_PAGE: [_LINKED[d] for d in ("logging", "agents", "vault", "old")],
                       LOGGING_PAGE: [_LINKED["ds"]]}  # in the order written; a link to its own page says nothing
        assert store.inlink_contexts([]) == {}
        assert store.inlink_contexts([DAEMONSET_PAGE], SearchFilters()) == {DAEMONSET_PAGE: got[DAEMONSET_PAGE]}

    def test_inlink_contexts_come_only_from_records_the_filters_pass(self, store: Store) -> None:
        self.commit_linking_pages(store)
        pages = [DAEMONSET_PAGE, LOGGING_PAGE]
        assert store.inlink_contexts(pages, SearchFilters(access_labels=("eng",))) == {
            DAEMONSET_PAGE: [_LINKED[d] for d in ("logging", "agents", "old")], LOGGING_PAGE: [_LINKED["ds"]]}
        assert store.inlink_contexts(pages, SearchFilters(access_labels=("eng", "hr"), valid_at=T0)) == {
            DAEMONSET_PAGE: [_LINKED["logging"], _LINKED["agents"]], LOGGING_PAGE: [_LINKED["ds"]]}
        assert store.inlink_contexts(pages, SearchFilters(access_labels=("security-team",))) == {
            DAEMONSET_PAGE: [_LINKED["vault"]]}
        assert store.inlink_contexts(pages, SearchFilters(source_pattern=r"^(tasks|blog)/")) == {
            DAEMONSET_PAGE: [_LINKED["agents"], _LINKED["old"]]}
        assert store.inlink_contexts(pages, SearchFilters(access_labels=())) == {}
        assert store.inlink_contexts(pages, SearchFilters(access_labels=("nobody",))) == {}

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
            return [store.inlink_contexts([DAEMONSET_PAGE], filters) for filters in readers]

        assert seen() == [{DAEMONSET_PAGE: [_LINKED["logging"]]}] * 2
        rewritten = make_chunk("logging", 0, "Logs are collected on each host.", source=LOGGING_PAGE, provenance=eng)
        store.commit_batch(batch("b2", document([rewritten], [axis(1)])))
        assert seen() == [{}, {}]
        agents = make_chunk("agents", 0, 'Deploy the agent as a <A HREF="../concepts/workloads/daemonset.html">'
                            "DaemonSet</A> on each node.", source="tasks/agents.md", provenance=eng)
        store.commit_batch(batch("b3", document([agents], [axis(2)])))
        assert seen() == [{DAEMONSET_PAGE: [_LINKED["agents"]]}] * 2
        store.rollback()
        assert seen() == [{}, {}]
        store.rollback()
        assert seen() == [{DAEMONSET_PAGE: [_LINKED["logging"]]}] * 2

    # ---- replacing a document --------------------------------------------------------------------------
    def replace_scenario(self, store: Store) -> tuple[list[Chunk], list[Chunk]]:
        """b1: doc A (intro + legacy steps) and doc B; b2: A again, same intro, rewritten steps.

        Returns (chunks live after b1, chunks live after b2), as `get` returns them."""
        a0 = make_chunk("A", 0, "alpha intro", title="Alpha")
        a1 = make_chunk("A", 1, "alpha legacy steps", title="Alpha")
        b0 = make_chunk("B", 0, "beta notes", title="Beta")
        store.commit_batch(batch("b1", document([a0, a1], [axis(0), axis(1)], doc_hash="hA1"),
                                 document([b0], [axis(2)], doc_hash="hB")))
        a1_new = make_chunk("A", 1, "alpha modern steps", title="Alpha", record_id="A#1-new")
        info = store.commit_batch(batch("b2", document([a0, a1_new], [axis(0), axis(3)], doc_hash="hA2")))
        assert (info.added, info.replaced) == (2, 1)
        before = [as_committed(a0, "b1"), as_committed(a1, "b1"), as_committed(b0, "b1")]
        after = [as_committed(a0, "b2"), as_committed(a1_new, "b2"), as_committed(b0, "b1")]
        return before, after

    def test_replacing_a_document_retires_its_old_chunks(self, store: Store) -> None:
        _, after = self.replace_scenario(store)
        assert store.document_hashes() == {"A": "hA2", "B": "hB"}
        assert store.get(["A#0", "A#1", "A#1-new", "B#0"]) == [after[0], after[1], after[2]]
        alpha = _ids(store.search_sparse("alpha", 10))
        assert sorted(alpha) == ["A#0", "A#1-new"]
        assert store.search_sparse("legacy", 10) == []
        assert _ids(store.search_sparse("modern", 10)) == ["A#1-new"]
        dense = _ids(store.search_dense(axis(1), 10))
        assert sorted(dense) == ["A#0", "A#1-new", "B#0"]  # no retired chunk, no duplicate
        assert (store.stats()["documents"], store.stats()["chunks"], store.chunk_count()) == (2, 3, 3)

    def test_all_chunks_are_the_live_chunks_in_the_order_written(self, store: Store) -> None:
        assert store.all_chunks() == []
        before, after = self.replace_scenario(store)
        assert store.all_chunks() == [after[2], after[0], after[1]]  # B#0 (b1), then what b2 wrote
        store.rollback()
        assert store.all_chunks() == before

    def test_chunk_count_is_the_number_of_live_chunks(self, store: Store) -> None:
        """Without reading them (a warm-up asks), through a replacement, an emptied document and rollbacks."""
        counts = [store.chunk_count()]
        self.replace_scenario(store)  # b1 writes 3 chunks; b2 rewrites A's 2, retiring one
        counts.append(store.chunk_count())
        store.commit_batch(batch("b3", DocumentWrite("B", "B.md", "h-empty", (), np.zeros((0, DIM), np.float32))))
        counts.append(store.chunk_count())
        assert store.chunk_count() == store.stats()["chunks"] == len(store.all_chunks())
        store.rollback()
        store.rollback()
        counts.append(store.chunk_count())
        assert counts == [0, 3, 2, 3]

    # ---- rollback --------------------------------------------------------------------------------------
    def test_rollback_of_last_batch_restores_replaced_chunks_exactly(self, store: Store) -> None:
        before, _ = self.replace_scenario(store)
        info = store.rollback()
        assert (info.batch_id, info.status) == ("b2", "rolled-back")
        assert store.get(["A#0", "A#1", "A#1-new", "B#0"]) == before
        assert store.document_hashes() == {"A": "hA1", "B": "hB"}
        assert _ids(store.search_sparse("legacy", 10)) == ["A#1"]
        assert store.search_sparse("modern", 10) == []
        assert sorted(_ids(store.search_dense(axis(1), 10))) == ["A#0", "A#1", "B#0"]
        assert _ids(store.search_dense(axis(1), 1)) == ["A#1"]

    def test_rollback_by_id_and_then_the_batch_before(self, store: Store) -> None:
        self.replace_scenario(store)
        assert store.rollback("b2").batch_id == "b2"
        assert store.rollback().batch_id == "b1"  # the last one still committed
        assert store.document_hashes() == {}
        assert store.search_sparse("alpha", 10) == []
        assert store.search_dense(axis(0), 10) == []
        assert [(b.batch_id, b.status) for b in store.batches()] == [("b1", "rolled-back"),
                                                                      ("b2", "rolled-back")]

    def test_rollback_of_an_older_independent_batch(self, store: Store) -> None:
        store.commit_batch(batch("b1", document([make_chunk("A", 0, "alpha")], [axis(0)])))
        store.commit_batch(batch("b2", document([make_chunk("B", 0, "beta")], [axis(1)])))
        store.rollback("b1")
        assert list(store.document_hashes()) == ["B"]
        assert _ids(store.search_dense(axis(0), 10)) == ["B#0"]

    def test_a_document_emptied_and_written_again_keeps_one_live_version(self, store: Store) -> None:
        """A batch can retire a document without writing any of it (the file was emptied). It holds no rows a
        later batch could retire, so the later version must still stop it being rolled back alone; then the
        old text would answer beside the new."""
        store.commit_batch(batch("b1", document([make_chunk("A", 0, "alpha old")], [axis(0)])))
        emptied = store.commit_batch(batch("b2", DocumentWrite("A", "A.md", "h-empty", (),
                                                               np.zeros((0, DIM), np.float32))))
        assert store.search_sparse("alpha", 10) == [] and store.document_hashes() == {}
        assert (emptied.replaced, emptied.retired) == (0, 1)  # retired without a successor, not replaced
        assert [(b.replaced, b.retired) for b in store.batches()] == [(0, 0), (0, 1)]
        store.commit_batch(batch("b3", document([make_chunk("A", 0, "alpha new")], [axis(1)])))
        with pytest.raises(StoreError, match="b3"):
            store.rollback("b2")
        assert [c.text for c in store.get(_ids(store.search_sparse("alpha", 10)))] == ["alpha new"]
        assert store.rollback().batch_id == "b3" and store.rollback().batch_id == "b2"
        assert [c.text for c in store.get(_ids(store.search_sparse("alpha", 10)))] == ["alpha old"]

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
        assert [b.status for b in store.batches()] == ["committed", "committed"]

    def test_rolling_back_twice_is_an_error(self, store: Store) -> None:
        self.replace_scenario(store)
        store.rollback("b2")
        snapshot = store.snapshot_id()
        with pytest.raises(StoreError, match="b2"):
            store.rollback("b2")
        assert store.snapshot_id() == snapshot

    def test_a_failing_batch_writes_nothing(self, store: Store) -> None:
        self.commit_corpus(store)
        snapshot, hashes = store.snapshot_id(), store.document_hashes()
        fresh = make_chunk("fresh", 0, "brand new words")
        clash = make_chunk("clash", 0, "steals a live record id", record_id="kube#0")
        with pytest.raises(StoreError):
            store.commit_batch(batch("b2", document([fresh], [axis(4)]), document([clash], [axis(5)])))
        assert store.snapshot_id() == snapshot
        assert store.document_hashes() == hashes
        assert store.search_sparse("brand", 10) == []
        assert [b.batch_id for b in store.batches()] == ["b1"]

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
        store.batches()
        store.stats()
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
        letters = store.dead_letters()
        assert [(d.source, d.reason, d.location, d.attempts, d.batch_id) for d in letters] == [
            ("bad.md", "invalid front matter", "/corpus/bad.md:3", 1, "b1"),
            ("worse.md", "not UTF-8 text", "/corpus/worse.md:1", 1, "b1"),
        ]
        # The same source failing again: one letter, attempts incremented, reason and batch updated.
        store.commit_batch(batch("b2", dead_letters=[dead_letter("bad.md", "b2", "still invalid", 4)]))
        again = {d.source: d for d in store.dead_letters()}
        assert (again["bad.md"].attempts, again["bad.md"].reason, again["bad.md"].location,
                again["bad.md"].batch_id) == (2, "still invalid", "/corpus/bad.md:4", "b2")
        assert again["worse.md"].attempts == 1
        # Resolved sources are removed.
        store.commit_batch(batch("b3", document([make_chunk("bad", 0, "now fine")], [axis(1)]),
                                 resolved=["bad.md"]))
        assert [d.source for d in store.dead_letters()] == ["worse.md"]

    # ---- batches ---------------------------------------------------------------------------------------
    def test_batches_list_every_batch_with_its_status(self, store: Store) -> None:
        self.replace_scenario(store)
        store.commit_batch(batch("b3", document([make_chunk("C", 0, "gamma")], [axis(4)]), unchanged=2,
                                 dead_letters=[dead_letter("bad.md", "b3")], label="third"))
        store.rollback("b3")
        got = [(b.batch_id, b.status, b.added, b.replaced, b.unchanged, b.dead_letters)
               for b in store.batches()]
        assert got == [("b1", "committed", 3, 0, 0, 0), ("b2", "committed", 2, 1, 0, 0),
                       ("b3", "rolled-back", 1, 0, 2, 1)]
        assert [b.label for b in store.batches()] == ["label of b1", "label of b2", "third"]
        stats = store.stats()  # beside the list: it had counted 2 batches where `evidex batches` listed 3
        assert (stats["batches"], stats["rolled_back_batches"]) == (2, 1)
        assert all(b.finished_at is not None and b.finished_at >= b.started_at for b in store.batches())
