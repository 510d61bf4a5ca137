"""A deterministic synthetic corpus for `evidex bench`: Zipfian word-like text, unit vectors clustered by
topic, and varied provenance (families, access labels, publication and expiry), at any size.

It stands in for a real 100k-chunk corpus where only the scale matters (build throughput, query latency,
memory); its texts mean nothing, so it is never used for quality.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
import numpy.typing as npt

from evidex.embedding.protocol import Vectors
from evidex.ingest.run import record_id
from evidex.lexical import STOPWORDS
from evidex.stores.protocol import DocumentWrite
from evidex.types import Chunk, Provenance

SYNTH_DIM = 384
SYNTH_VOCAB = 30_000
SYNTH_CLUSTERS = 300
SYNTH_TOPIC_WORDS = 40
SYNTH_TOPIC_SHARE = 0.15  # share of a chunk's tokens drawn from its cluster's topic words
QUERY_HEAD_SKIP = 100  # query words skip the 100 most frequent ranks (the stopword-like head)
FILTER = {"access_labels": ("public", "internal")}  # plus valid_at = now
# Labels that let through a known share of the documents (nested: sel-1 within sel-10 within sel-50), so a filter
# of a given selectivity is one access label, the commonest filter.
SELECTIVITY = {"sel-1": 0.01, "sel-10": 0.10, "sel-50": 0.50}

_CONSONANTS = [*list("bcdfghjklmnprstvwz"), "ch", "sh", "th", "st", "tr", "pl"]
_VOWELS = [*list("aeiou"), "ai", "ou", "ea"]
_FAMILIES = [f"fam-{i:02d}" for i in range(24)]
_LABEL_SETS: list[tuple[str, ...]] = [("public",), ("internal",), ("eng", "internal"), ("restricted",),
                                      ("eng",), ()]
_LABEL_P = [0.35, 0.25, 0.15, 0.1, 0.1, 0.05]
_EPOCH = datetime(2018, 1, 1, tzinfo=UTC)


def _vocabulary(rng: np.random.Generator, size: int) -> npt.NDArray[np.object_]:
    """`size` distinct word-like tokens, shorter words at the frequent (low) ranks, as in real text."""
    words: dict[str, None] = {}
    while len(words) < size:
        n = size
        syllables = rng.choice([1, 2, 2, 3, 3, 3, 4], n)
        onsets = rng.integers(0, len(_CONSONANTS), (n, 4))
        nuclei = rng.integers(0, len(_VOWELS), (n, 4))
        codas = np.where(rng.random(n) < 0.3, rng.integers(0, len(_CONSONANTS), n), -1)
        for i in range(n):
            word = "".join(_CONSONANTS[onsets[i, j]] + _VOWELS[nuclei[i, j]] for j in range(syllables[i]))
            if codas[i] >= 0:
                word += _CONSONANTS[codas[i]]
            if word not in STOPWORDS:
                words[word] = None
    chosen = list(words)[:size]
    jitter = rng.normal(0, 2.0, len(chosen))
    keys = [len(w) + jitter[i] for i, w in enumerate(chosen)]
    ordered = [chosen[i] for i in np.argsort(keys, kind="stable")]
    return np.array(ordered, dtype=object)


@dataclass
class SyntheticCorpus:
    """A deterministic generator of chunks (Zipfian text, clustered unit vectors, varied provenance)."""

    vocab: npt.NDArray[np.object_]
    cdf: npt.NDArray[np.float64]  # Zipf(s=1.07) over vocabulary ranks
    query_cdf: npt.NDArray[np.float64]  # the same without the head
    centroids: npt.NDArray[np.float32]
    cluster_cdf: npt.NDArray[np.float64]
    topic_words: npt.NDArray[np.int64]  # (clusters, topic words) vocabulary ranks
    dim: int
    noise: float = 0.07  # per-dimension noise: cos(chunk, its centroid) ~ 0.55

    @classmethod
    def create(cls, seed: int, vocab_size: int = SYNTH_VOCAB, clusters: int = SYNTH_CLUSTERS,
               dim: int = SYNTH_DIM) -> SyntheticCorpus:
        rng = np.random.default_rng(seed)
        vocab = _vocabulary(rng, vocab_size)
        weights = 1.0 / np.arange(1, vocab_size + 1) ** 1.07
        cdf = np.cumsum(weights / weights.sum())
        tail = weights.copy()
        tail[:QUERY_HEAD_SKIP] = 0
        query_cdf = np.cumsum(tail / tail.sum())
        centroids = rng.standard_normal((clusters, dim)).astype(np.float32)
        centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
        popularity = 1.0 / np.arange(1, clusters + 1) ** 0.5
        topic_words = rng.integers(200, min(20_000, vocab_size), (clusters, SYNTH_TOPIC_WORDS))
        cluster_cdf = np.cumsum(popularity / popularity.sum())
        return cls(vocab, cdf, query_cdf, centroids, cluster_cdf, topic_words, dim)

    def _ranks(self, rng: np.random.Generator, n: int, cdf: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
        return np.minimum(np.searchsorted(cdf, rng.random(n), side="right"), len(self.vocab) - 1)

    def _clusters(self, rng: np.random.Generator, n: int) -> npt.NDArray[np.int64]:
        found = np.searchsorted(self.cluster_cdf, rng.random(n), side="right")
        return np.minimum(found, len(self.centroids) - 1)

    def _vectors(self, rng: np.random.Generator, clusters: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
        noise = rng.standard_normal((len(clusters), self.dim), dtype=np.float32) * self.noise
        v = self.centroids[clusters] + noise
        unit: npt.NDArray[np.float32] = (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)
        return unit

    def _words(self, ranks: npt.NDArray[np.int64]) -> str:
        return " ".join(self.vocab[ranks].tolist())

    def batch(self, seed: int, first_doc: int, n_chunks: int,
              now: datetime) -> tuple[list[DocumentWrite], int, int]:
        """Documents totalling `n_chunks` chunks; also (documents, chunks passing the benchmark filter)."""
        rng = np.random.default_rng(seed)
        sizes: list[int] = []
        total_sizes = 0
        while total_sizes < n_chunks:
            sizes.append(min(int(rng.geometric(0.2)), 12, n_chunks - total_sizes))
            total_sizes += sizes[-1]
        doc_clusters = self._clusters(rng, len(sizes))
        shares = np.random.default_rng(seed + 1).random(len(sizes))  # apart: the other draws stay as they were
        chunk_clusters = np.repeat(doc_clusters, sizes)
        lengths = rng.integers(80, 201, n_chunks)
        total = int(lengths.sum())
        ranks = self._ranks(rng, total, self.cdf)
        topical = rng.random(total) < SYNTH_TOPIC_SHARE
        picks = rng.integers(0, SYNTH_TOPIC_WORDS, total)
        topic = self.topic_words[np.repeat(chunk_clusters, lengths), picks]
        ranks = np.where(topical, topic, ranks)
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        vectors = self._vectors(rng, chunk_clusters)
        writes: list[DocumentWrite] = []
        passing = 0
        c = 0
        for d, size in enumerate(sizes):
            cluster = int(doc_clusters[d])
            family = _FAMILIES[int(rng.integers(len(_FAMILIES)))] if rng.random() < 0.7 else None
            labels = _LABEL_SETS[int(rng.choice(len(_LABEL_SETS), p=_LABEL_P))]
            labels += tuple(label for label, share in SELECTIVITY.items() if shares[d] < share)
            published = None if rng.random() < 0.1 else _EPOCH + timedelta(days=int(rng.integers(0, 7 * 365)))
            expires = None
            if rng.random() < 0.25:
                expires = (published or _EPOCH) + timedelta(days=int(rng.integers(30, 1500)))
            provenance = Provenance(
                source_version=f"v{int(rng.integers(1, 9))}", published_at=published, expires_at=expires,
                access_labels=labels, citation_uri=None,
                authority_tier="official" if rng.random() < 0.5 else "community",
                evidence_family=family, owner=f"team-{int(rng.integers(40)):02d}")
            n_title = int(rng.integers(3, 8))
            title_ranks = np.concatenate([self.topic_words[cluster, rng.integers(0, SYNTH_TOPIC_WORDS, 2)],
                                          self._ranks(rng, n_title - 2, self.query_cdf)])
            title = self._words(title_ranks).capitalize()
            doc_id = f"{family or 'misc'}/doc-{first_doc + d:07d}.md"
            doc_chunks = []
            for i in range(size):
                text = self._words(ranks[offsets[c + i]:offsets[c + i + 1]])
                doc_chunks.append(Chunk(
                    record_id=record_id(doc_id, i, text), doc_id=doc_id, chunk_index=i, source=doc_id,
                    title=title, text=text, citation_anchor=None, span_start=0, span_end=len(text),
                    content_hash=hashlib.sha256(text.encode()).hexdigest(), provenance=provenance,
                    heading="", indexed_at=now))
            if set(labels) & set(FILTER["access_labels"]) and (published is None or published <= now) and (
                    expires is None or expires > now):
                passing += size
            digest = hashlib.sha256(f"{doc_id}\x00{seed}".encode()).hexdigest()
            writes.append(DocumentWrite(doc_id, doc_id, digest, tuple(doc_chunks), vectors[c:c + size]))
            c += size
        return writes, len(sizes), passing

    def queries(self, seed: int, n: int) -> list[tuple[str, Vectors]]:
        """3-8 words: 1-2 topic words of one cluster, the rest Zipfian without the head; a vector near
        the same cluster's centroid."""
        rng = np.random.default_rng(seed)
        clusters = self._clusters(rng, n)
        vectors = self._vectors(rng, clusters)
        out: list[tuple[str, Vectors]] = []
        seen: set[str] = set()
        for i in range(n):
            n_words = int(rng.integers(3, 9))
            n_topic = int(rng.integers(1, 3))
            topical = self.topic_words[clusters[i], rng.integers(0, SYNTH_TOPIC_WORDS, n_topic)]
            ranks = np.concatenate([topical,
                                    self._ranks(rng, n_words - n_topic, self.query_cdf)])
            rng.shuffle(ranks)
            text = self._words(ranks)
            while text in seen:  # distinct texts: each maps to its own vector
                text += " " + self._words(self._ranks(rng, 1, self.query_cdf))
            seen.add(text)
            out.append((text, vectors[i]))
        return out
