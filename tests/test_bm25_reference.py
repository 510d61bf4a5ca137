"""Our BM25 (SQLite FTS5, `SqliteStore.search_sparse`) against the reference implementation bm25s.

The two do not compute identical scores, so the comparison is on rankings (top-1 identical, top-5 sets
sharing at least 4 ids), not on values:
- IDF: FTS5 uses log((N - n + 0.5) / (n + 0.5)), clamped to a tiny positive value for terms in more than
  half the documents; bm25s's Lucene variant uses log(1 + (N - n + 0.5) / (n + 0.5)), always positive.
- Fields: FTS5 scores the title and the body as two columns; here every title is empty, so only the body
  counts, as in bm25s.
- Stemming: FTS5 runs the Porter stemmer. PyStemmer (which bm25s needs for stemming) is not installed,
  so the corpus and queries are written without inflections, and a test checks that Porter stemming
  merges no two of their words: both sides then see the same terms and the same statistics.
Both use k1 = 1.2, b = 0.75, and the same stopword-free query tokens.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import bm25s  # type: ignore[import-untyped]
import numpy as np
import pytest

from evidex.lexical import tokens
from evidex.stores.sqlite import SqliteStore
from evidex.testing.store_contract import axis, batch, document, make_chunk

CORPUS = {
    "etcd-backup": "take an etcd snapshot every night and copy the snapshot file to object storage",
    "etcd-restore": "restore etcd from the latest snapshot file then restart the control plane",
    "tls-renewal": "renew the tls certificate before expiry with the cert manager issuer",
    "tls-expiry": "an expired certificate breaks tls handshake for every ingress host",
    "ingress-routing": "the ingress gateway routes external traffic to a backend service by host and path",
    "network-policy": "a network policy denies ingress traffic unless a rule allows the source namespace",
    "dns-debug": "debug dns lookup failure with nslookup from a debug container in the same namespace",
    "node-drain": "drain a node before maintenance so the scheduler moves every workload elsewhere",
    "autoscaler": "the cluster autoscaler adds a node when a workload cannot fit on current capacity",
    "quota": "a resource quota caps cpu and memory for each namespace",
    "limit-range": "a limit range sets default cpu and memory request values for a container",
    "oom": "a container killed for memory exhaustion shows reason oomkilled in the event log",
    "rollout": "a canary rollout shifts a small share of traffic to the new version first",
    "rollback": "undo a bad rollout with a rollback to the previous revision of the deployment",
    "secret": "mount a secret as a volume so the container reads credential data from file",
}
QUERIES = [
    "etcd snapshot restore",
    "tls certificate expiry",
    "ingress traffic namespace",
    "container memory exhaustion",
    "rollout rollback revision",
    "node workload scheduler",
]
_WORD = re.compile(r"[^\W_]+")


def _vocab(texts: list[str], stem: bool) -> set[str]:
    if not stem:
        return {w for t in texts for w in _WORD.findall(t.lower())}
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='porter unicode61 remove_diacritics 2')")
    db.executemany("INSERT INTO t VALUES (?)", [(x,) for x in texts])
    db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'row')")
    terms = {r[0] for r in db.execute("SELECT term FROM v")}
    db.close()
    return terms


def test_porter_stemming_merges_no_two_words_of_the_corpus() -> None:
    texts = [*CORPUS.values(), *QUERIES]
    assert len(_vocab(texts, stem=True)) == len(_vocab(texts, stem=False))


@pytest.fixture(scope="module")
def ours(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqliteStore]:
    store = SqliteStore(Path(tmp_path_factory.mktemp("bm25")) / "idx")
    docs = [document([make_chunk(doc_id, 0, text, title="")], [axis(0)]) for doc_id, text in CORPUS.items()]
    store.commit_batch(batch("b1", *docs))
    yield store
    store.close()


@pytest.fixture(scope="module")
def reference() -> bm25s.BM25:
    retriever = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
    retriever.index([_WORD.findall(t.lower()) for t in CORPUS.values()], show_progress=False)
    return retriever


def reference_ranking(retriever: bm25s.BM25, query: str) -> list[str]:
    ids = list(CORPUS)
    docs, scores = retriever.retrieve([tokens(query)], k=len(ids), show_progress=False)
    return [f"{ids[int(d)]}#0" for d, s in zip(docs[0], scores[0], strict=True) if s > 0]


@pytest.mark.parametrize("query", QUERIES)
def test_fts5_bm25_agrees_with_bm25s(ours: SqliteStore, reference: bm25s.BM25, query: str) -> None:
    mine = [h.record_id for h in ours.search_sparse(query, 15)]
    theirs = reference_ranking(reference, query)
    assert mine, query
    assert mine[0] == theirs[0]
    top = min(5, len(theirs))
    assert len(set(mine[:5]) & set(theirs[:5])) >= top - 1
    assert set(mine) == set(theirs)  # both retrieve every document holding a query term


def test_exact_expected_top_hits(ours: SqliteStore) -> None:
    """Hand-checked: the document holding the most (and rarest) query terms comes first."""
    top = {q: ours.search_sparse(q, 1)[0].record_id for q in QUERIES}
    assert top == {
        "etcd snapshot restore": "etcd-restore#0",
        "tls certificate expiry": "tls-renewal#0",
        "ingress traffic namespace": "network-policy#0",
        "container memory exhaustion": "oom#0",
        "rollout rollback revision": "rollback#0",
        "node workload scheduler": "node-drain#0",
    }
    assert np.all(np.diff([h.score for h in ours.search_sparse("tls certificate expiry", 15)]) <= 0)
