"""The builders the store contract (`evidex.testing.store_contract`) and each backend's own tests use: unit
vectors, chunks, documents and batches as an ingest run writes them, and the small corpora whose expected hits,
orders and scores are exact.

Vectors are 8-dimensional unit vectors built from axis directions, so the expected dense order and cosine scores
are exact; texts are a few words, so the expected BM25 hits are exact too.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, timezone

import numpy as np
import numpy.typing as npt

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
FILTER_DOCS: list[tuple[str, str, Provenance, Vector]] = [
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
MINUS_5H = timezone(timedelta(hours=-5))
FILTER_CASES: list[tuple[str, SearchFilters, set[str]]] = [
    ("labels-one", SearchFilters(access_labels=("eng",)), {"d1", "d3"}),
    ("labels-any-of", SearchFilters(access_labels=("ops", "hr")), {"d2", "d3", "d5"}),
    ("labels-none-granted", SearchFilters(access_labels=()), set()),
    ("labels-unknown", SearchFilters(access_labels=("nobody",)), set()),
    # published_at == t is admitted, expires_at == t is rejected, None is unbounded.
    ("valid-at-t0", SearchFilters(valid_at=T0), {"d1", "d2", "d5"}),
    ("valid-at-t0-other-zone", SearchFilters(valid_at=T0.astimezone(MINUS_5H)), {"d1", "d2", "d5"}),
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
LINKED = {
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


def ids(hits: Sequence[ScoredId]) -> list[str]:
    return [h.record_id for h in hits]




class ContractCorpus:
    """The corpora the contract's tests share; each test commits the one it needs into a fresh store."""

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

    def commit_filter_corpus(self, store: Store) -> None:
        store.commit_batch(batch("b1", *(
            document([make_chunk(doc_id, 0, f"common words of {doc_id}", source=source, provenance=p)], [v])
            for doc_id, source, p, v in FILTER_DOCS)))

    def commit_linking_pages(self, store: Store) -> None:
        """The DaemonSet page (linking to the logging page, and to itself) and four pages linking to it: the
        logging page (Markdown, site path), the agents page (an upper-case HTML tag, relative path), a page only
        the security team may read and one that expires at T0; the contexts they give are `LINKED`'s."""
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
