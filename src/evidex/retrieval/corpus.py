"""What the pipeline reads of an index beside its searches: what pages say around their links to a page, how
many records hold a word, and reading ahead at a server's warm-up.

Each is a function of a `Store` written once over the core protocol, so every backend has it:

    contexts = inlink_contexts(store, ["concepts/workloads/daemonset.md"], SearchFilters(access_labels=("eng",)))
    records, holding = word_counts(store, "set up", readers=("eng",))

A backend with a faster way offers it as an optional capability (`evidex.stores.protocol.WordCounts`,
`ReadAhead`), which these functions use when the store has it; SQLite answers word counts from its full-text
postings and reads ahead into the cache its sparse search reads. Without the capability a word count is
"cannot tell" and reading ahead does nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from weakref import WeakKeyDictionary

from evidex.errors import StoreError
from evidex.retrieval.links import LinkIndex
from evidex.stores.dense import DenseIndex
from evidex.stores.protocol import LiveScan, ReadAhead, Store, WordCounts
from evidex.types import Chunk, SearchFilters

_SNAPSHOT_ATTEMPTS = 3
# Per store: (snapshot id, the link index of its live records, those records' filter fields).
_LINKS: WeakKeyDictionary[Store, tuple[str, LinkIndex, DenseIndex]] = WeakKeyDictionary()
_LINKS_LOCK = threading.Lock()


def inlink_contexts(store: Store, sources: Sequence[str],
                    filters: SearchFilters | None = None) -> dict[str, list[str]]:
    """For each of `sources` (pages) that links of other pages' live records name, the words around those links
    (`evidex.retrieval.links`), in the order written, only from records that pass `filters` (the requester's):
    what readable pages say of it. Pages no readable link names are left out."""
    links, fields = _link_index(store)
    readable, _ = fields.passes(filters)
    return links.contexts(sources, readable)


def _may_link(chunk: Chunk) -> bool:
    """The chunk's text can hold a link `evidex.retrieval.links` reads: a Markdown "](" or an HTML href."""
    return "](" in chunk.text or "href" in chunk.text.lower()


def _link_index(store: Store) -> tuple[LinkIndex, DenseIndex]:
    """The link index of the store's current snapshot, built from a scan of its live records on first use after
    each commit or rollback (k8s: 1,728 of 3,563 chunks hold a link) and kept with their filter fields, so which
    of them a request may read is decided by the test the store's searches apply."""
    with _LINKS_LOCK:  # one scan per snapshot, however many requests ask at once
        for _ in range(_SNAPSHOT_ATTEMPTS):
            snapshot = store.snapshot_id()
            kept = _LINKS.get(store)
            if kept is not None and kept[0] == snapshot:
                return kept[1], kept[2]
            scanned = store.live_chunks_with(("](", "href")) if isinstance(store, LiveScan) else store.all_chunks()
            chunks = [c for c in scanned if _may_link(c)]
            if store.snapshot_id() != snapshot:  # a commit between the two reads: read again
                continue
            links = LinkIndex((c.record_id, c.source, c.text) for c in chunks)
            _LINKS[store] = (snapshot, links, DenseIndex.of_chunks(chunks))
            return links, _LINKS[store][2]
    raise StoreError("the index kept changing during a search; try again")


def word_counts(store: Store, text: str, readers: tuple[str, ...] | None = None) -> tuple[int, dict[str, int]]:
    """The live records (those carrying one of `readers`, when given) and, for each word of `text` the sparse
    search would search, how many of them hold it (title or text); (0, {}) when the store cannot tell (it offers
    no `WordCounts`): then a plan keeps every aspect."""
    if isinstance(store, WordCounts):
        return store.word_counts(text, readers)
    return 0, {}


def read_ahead(store: Store, words: Sequence[str]) -> None:
    """Read now what sparse searches of `words` will need, where the store caches it (`ReadAhead`): a server's
    first searches then cost what later ones do, with the same results. Nothing where there is no such cache."""
    if isinstance(store, ReadAhead):
        store.read_ahead(words)
