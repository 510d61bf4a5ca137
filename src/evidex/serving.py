"""A process that serves (or measures) searches: what it reads before its first request, and how its heap is
settled afterwards, so that its first requests cost what later ones do."""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Iterable

from evidex.lexical import tokens
from evidex.types import Chunk

WARM_UP_QUERY = "How are access keys rotated, and who may read them?"
WARM_TERM_SETS_MAX = 20_000  # chunks whose term sets a warm-up computes: about 1 s and 20 MB
WARM_WORDS = 2_000  # the words most chunks hold, whose sparse matches a warm-up reads...
WARM_WORD_MATCHES = 1_000_000  # ...up to about this many matches (16 MB, half the SQLite store's word cache)
YOUNG_COLLECTION_THRESHOLD = 10_000  # allocations between collections of young objects (CPython's default: 700)


def settle_heap() -> None:
    """For a process that serves or measures searches, once its engine is warm (`Engine.warm_up`): what is
    alive now (the model, the index snapshot, the caches) moves out of the cyclic collector's reach
    (`gc.freeze`), and young objects are collected every 10,000 allocations instead of 700. A search allocates
    tens of thousands of short-lived objects, and with CPython's defaults the collector would rescan every
    cached chunk and pause searches (measured by `scripts/bench_gc.py`). Objects are still freed when their
    last reference goes; only cycles among the frozen ones wait."""
    gc.collect()
    gc.freeze()
    young, middle, old = gc.get_threshold()
    gc.set_threshold(max(young, YOUNG_COLLECTION_THRESHOLD), middle, old)


def common_words(chunks: Iterable[Chunk]) -> list[str]:
    """The WARM_WORDS words most chunks hold (ties in alphabetical order), as many as keep their matches (a word's
    chunks: about the rows of its matches) within WARM_WORD_MATCHES."""
    held_by: Counter[str] = Counter()
    for chunk in chunks:
        held_by.update(set(tokens(chunk.title)).union(tokens(chunk.text)))
    words: list[str] = []
    matches = 0
    for word, held in sorted(held_by.items(), key=lambda kv: (-kv[1], kv[0]))[:WARM_WORDS]:
        matches += held
        if matches > WARM_WORD_MATCHES:
            break
        words.append(word)
    return words
