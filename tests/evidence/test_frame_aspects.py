"""A clause that frames the question ("How do I set that up") is not an evidence obligation: every word of it is
common among the records the requester may read, so any page could 'meet' it and its reservation displaced a
family's page. Names, identifiers and a focus stay; the counts are the requester's, never restricted text's;
and a small index keeps every clause (its subject's words are as common as a frame's)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from evidence_support import build_store, constant_encoder, make_chunk

from evidex.admission.gate import AdmissionGate, Principal
from evidex.config import Config
from evidex.evidence.plan import PlanSource, RequiredFamily, auto_plan, explicit_plan, without_frames
from evidex.pipeline import PipelineParts, SearchOutcome, SearchRequest, run_search
from evidex.stores.sqlite import SqliteStore
from evidex.types import Chunk, RetrievalMode

AT = datetime(2026, 1, 1, tzinfo=UTC)
READER = Principal.of("reader", ["public"])
QUESTION = "How is the vaultline signing key rotated? How do I set that up?"
FRAME = "How do I set that up"
RECORDS = 2000
HOLDING = {"set": 600, "up": 400, "vaultline": 20, "signing": 40, "key": 400, "rotated": 20}


def counts_of(text: str, records: int = RECORDS) -> tuple[int, dict[str, int]]:
    return records, {w: HOLDING[w] for w in text.lower().replace("?", "").split() if w in HOLDING}


def test_a_clause_of_common_words_is_dropped_and_the_rest_stay() -> None:
    plan = auto_plan(QUESTION)
    assert FRAME in plan.aspects
    kept, frames = without_frames(plan, counts_of, 0.05, 1000)
    assert frames == (FRAME,) and FRAME not in kept.aspects
    assert [f.name for f in kept.families] == ["How is the vaultline signing key rotated"]
    assert kept.source is PlanSource.AUTO
    # Common words every one: still an obligation when it is the focus, or the threshold keeps all.
    assert without_frames(plan, counts_of, 0.05, 1000, keep=FRAME) == (plan, ())
    assert without_frames(plan, counts_of, 1.0, 1000) == (plan, ())
    assert without_frames(plan, lambda _text: (0, {}), 0.05, 1000) == (plan, ())  # a store that cannot tell
    # The same shares on an index of fewer records than the minimum: every clause stays.
    assert without_frames(plan, lambda text: counts_of(text, 999), 0.05, 1000) == (plan, ())


def test_names_identifiers_declared_families_and_a_last_aspect_stay() -> None:
    def everywhere(text: str) -> tuple[int, dict[str, int]]:
        return RECORDS, {w: RECORDS // 2 for w in text.lower().replace("?", "").replace("`", "").split()}

    named = auto_plan("How do I set up `config.yaml` for the Pod?")
    assert without_frames(named, everywhere, 0.05, 1000)[1] == ()  # an identifier and a name
    alone = auto_plan("How do I set that up?")
    assert without_frames(alone, everywhere, 0.05, 1000) == (alone, ())  # the only aspect
    declared = explicit_plan([RequiredFamily("setup", "how do I set that up")])
    assert without_frames(declared, everywhere, 0.05, 1000) == (declared, ())


def _corpus(*, restricted_frames: bool) -> list[Chunk]:
    """Forty pages of one product; "set ... up" is on half of them, readable or (`restricted_frames`) not."""
    pages = [make_chunk("rotation", "The vaultline signing key is rotated every quarter by the key service.")]
    for i in range(40):
        if i % 2:
            pages.append(make_chunk(f"page{i}", f"Tidepool topic {i} covers connection pools and their limits."))
        else:
            pages.append(make_chunk(f"setup{i}", f"To set topic {i} up, run the installer with its defaults.",
                                    labels=("secret",) if restricted_frames else ("public",)))
    return pages


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[dict[str, SqliteStore]]:
    built = {"readable": build_store(tmp_path / "readable", _corpus(restricted_frames=False)),
             "restricted": build_store(tmp_path / "restricted", _corpus(restricted_frames=True))}
    yield built
    for s in built.values():
        s.close()


SMALL_INDEX = Config().replace(evidence={"frame_min_records": 41})  # the test's index: 41 records


def _search(store: SqliteStore, config: Config = SMALL_INDEX) -> SearchOutcome:
    parts = PipelineParts(store=store, encode=constant_encoder, config=config, gate=AdmissionGate())
    return run_search(parts, SearchRequest(QUESTION, mode=RetrievalMode.BM25, principal=READER, retrieved_at=AT))


def test_the_pipeline_drops_the_frame_and_says_so(stores: dict[str, SqliteStore]) -> None:
    store = stores["readable"]
    assert store.word_counts(FRAME) == (41, {"set": 20, "up": 20})
    outcome = _search(store)
    assert FRAME not in outcome.plan.aspects
    planned = next(s for s in outcome.trace.stages if s.name == "plan")
    assert planned.decisions["frames"] == [FRAME]
    assert FRAME in _search(store, SMALL_INDEX.replace(evidence={"frame_word_share": 1.0})).plan.aspects
    assert FRAME in _search(store, Config()).plan.aspects  # the default minimum: 1,000 records


def test_restricted_pages_holding_the_words_decide_nothing(stores: dict[str, SqliteStore]) -> None:
    """The same words on pages the reader may not read: no readable page holds them, the clause stays an
    obligation, exactly as on an index whose pages never held them."""
    store = stores["restricted"]
    assert store.word_counts(FRAME) == (41, {"set": 20, "up": 20})  # over every record
    assert store.word_counts(FRAME, ("public",)) == (21, {"set": 0, "up": 0})
    outcome = _search(store, Config().replace(evidence={"frame_min_records": 21}))  # the reader's 21 count
    assert FRAME in outcome.plan.aspects
    assert next(s for s in outcome.trace.stages if s.name == "plan").decisions["frames"] == []
