"""The Engine as a library object: configurations over one index, and who closes the store."""

from __future__ import annotations

import gc
from collections.abc import Callable
from pathlib import Path

import pytest

from evidex.engine import Engine
from evidex.errors import ConfigError
from evidex.evidence import terms
from evidex.serving import YOUNG_COLLECTION_THRESHOLD, settle_heap
from evidex.stores.sqlite import SqliteStore
from evidex.types import RetrievalMode

EngineFactory = Callable[..., Engine]
CorpusWriter = Callable[..., Path]


def test_an_engine_with_another_configuration_borrows_the_store(make_engine: EngineFactory,
                                                                write_corpus: CorpusWriter) -> None:
    """Closing the derived engine (an ablation's, say) had closed the store under the engine it came from."""
    engine = make_engine()
    engine.ingest([write_corpus({"rotation.md": "# Key rotation\n\nRotate the signing key every quarter.\n"})])
    derived = engine.with_config(engine.config.replace(evidence={"grade_correct": 0.9}))
    assert derived.config.evidence.grade_correct == 0.9 and derived.store is engine.store
    assert [h.chunk.source for h in derived.search("signing key", k=1, mode=RetrievalMode.BM25)] == ["rotation.md"]
    derived.close()
    assert [h.chunk.source for h in engine.search("signing key", k=1, mode=RetrievalMode.BM25)] == ["rotation.md"]


def test_a_configuration_that_needs_another_index_is_refused(make_engine: EngineFactory) -> None:
    engine = make_engine()
    with pytest.raises(ConfigError, match="different index"):
        engine.with_config(engine.config.replace(chunking={"max_chars": 300}))


def test_warm_up_loads_what_the_first_search_needs(make_engine: EngineFactory, write_corpus: CorpusWriter) -> None:
    """A server warms its engine before the first request: the model, the pipeline's parts, the snapshot's
    matrix, the words of a question, every chunk's term set and the common words' sparse matches are loaded,
    and an empty index warms up without an error."""
    empty = make_engine()
    empty.warm_up()
    # More pages than a search's pool of ten candidates, rescues of one hit: the warm-up question meets few.
    engine = make_engine(evidence={"pool_size": 1, "wide_limit": 1, "name_lookups": 0})
    animals = ["marmot", "quokka", "wombat", "tapir", "okapi", "dugong", "pangolin", "axolotl", "numbat", "kakapo",
               "gharial", "saola", "fossa", "dhole"]
    engine.ingest([write_corpus({"rotation.md": "# Key rotation\n\nRotate the access keys every quarter.\n",
                                 **{f"{a}.md": f"# The {a}\n\nThe {a} forages at dusk.\n" for a in animals}})])
    store = engine.store
    assert isinstance(store, SqliteStore)
    assert engine._parts is None and store._dense is None and store._word_cache.used == 0
    engine.warm_up()
    assert engine._parts is not None and store._dense is not None and store._word_cache.used > 0
    every = store.all_chunks()
    assert every and all((c.record_id, c.content_hash, c.title, c.heading) in terms._TERM_CACHE for c in every)
    # The words most pages hold are read ahead, the warm-up question's or not ("forages" is in none of its words).
    assert {'"forages"', '"dusk"'} <= set(store._word_cache.found(['"forages"', '"dusk"', '"marmot"']))


def test_warm_up_reads_ahead_no_more_matches_than_its_bound(make_engine: EngineFactory, write_corpus: CorpusWriter,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The common words are read ahead, most common first (ties alphabetically), only up to WARM_WORD_MATCHES
    matches: "dusk" (14 pages) fits in 14, not beside "forages" (14 more), and nothing fits in 13."""
    import evidex.serving as serving_module

    pages = {f"{a}.md": f"# The {a}\n\nThe {a} forages at dusk.\n" for a in
             ["marmot", "quokka", "wombat", "tapir", "okapi", "dugong", "pangolin", "axolotl", "numbat", "kakapo",
              "gharial", "saola", "fossa", "dhole"]}
    corpus = write_corpus(pages)
    for bound, expected in ((14, {'"dusk"'}), (13, set())):
        monkeypatch.setattr(serving_module, "WARM_WORD_MATCHES", bound)
        engine = make_engine()
        engine.ingest([corpus])
        engine.warm_up()
        assert isinstance(engine.store, SqliteStore)
        assert set(engine.store._word_cache.found(['"forages"', '"dusk"'])) == expected, bound
        engine.close()


def test_settle_heap_freezes_what_is_alive_and_collects_young_objects_less_often() -> None:
    before = gc.get_threshold()
    try:
        settle_heap()
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == (max(before[0], YOUNG_COLLECTION_THRESHOLD), before[1], before[2])
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
